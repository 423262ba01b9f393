/*
 * cmd_train.c: `placer train` trains the seq2seq placer with REINFORCE or
 * PPO (--algo), over co-location groups, nodes, or groups it learns
 * jointly (--groups learned: the hierarchical planner; eagle: with EAGLE's
 * link), against the simulator, logging every sampled placement and a checkpoint
 * per update into the profile database, and ends with the shortlist next to
 * the baselines. `--resume RUN` continues a stopped or killed run on the
 * identical trajectory. The session, the placer, its run row and the
 * closing shortlist are policy/training.h's; the command parses, resolves a
 * resume, trains with SIGINT/SIGTERM stopping it cleanly, and prints.
 *
 * A run stores its problem and options as canonical arguments in the run
 * table; a resume re-reads them, so only --updates (a new target) and
 * --threads may be given with --resume.
 *
 * `--resume RUN --from FILE` starts a new run on this database from run RUN
 * of another machine's database (docs/transfer.md): the run's problem and
 * options, its last checkpoint with the devices relabelled by the device
 * map (--map speed|rank, printed), and training afresh on this machine
 * (policy/training.h, policy_training_start_transfer); --mem-cap may then
 * give this machine's cap.
 */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "reinforce.h"
#include "cli_output.h"
#include "search.h"
#include "session.h"
#include "training.h"
#include "transfer.h"
#include "util.h"

/* Set by SIGINT/SIGTERM; the progress callback stops training after the
 * update in flight is committed. Signal handlers need a global. */
static volatile sig_atomic_t g_stop = 0;

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static void train_usage(FILE *f) {
    fprintf(f,
            "usage: placer train [--db FILE] [--groups colocate|none|learned|eagle] [--updates 250] [--samples 8]\n"
            "                    [--baseline ema|loo] [--entropy X] [--lr X] [--seed N]\n"
            "                    [--micro-batches M] [--schedule gpipe|1f1b] [--mem-cap CAP]\n"
            "                    [--devices N] [--config NAME] [--resume RUN] [--threads N]\n"
            "                    [--algo reinforce|ppo] [--ppo-epochs 4] [--ppo-clip 0.2]\n"
            "                    [--n-groups 16] [--group-prior 2] [--link-hidden 16] [--pipe-prior 0]\n"
            "                    [--pipe-devices all|estimate] [--pipe-anneal] [--lr-decay 0] [--entropy-decay 0]\n"
            "       placer train --db FILE --resume RUN --from OTHER [--map speed|rank] [--updates N]\n"
            "                    [--mem-cap CAP] [--threads N]\n\n"
            "Trains the seq2seq LSTM placer (Mirhoseini et al. 2017) with REINFORCE (or PPO) against\n"
            "the simulator, optionally with a grouper learned jointly (Mirhoseini et al. 2018, EAGLE).\n"
            "Each update samples K placements, simulates them in parallel, and takes\n"
            "one Adam step on cost = sqrt(step time in seconds), an OOM counting as a 10 s step.\n"
            "Every sample and a checkpoint per update go to the database; the run's id is printed.\n"
            "Ends with a table of the shortlist (top distinct placements found and the final\n"
            "favourite) against the best single device, the best human split and the DP.\n\n"
            "  --db            database to read the profile from and write the run into (default:\n"
            "                  $PLACER_DB, else ./placer-runs.db, made as a copy of the shipped profile)\n"
            "  --groups        colocate (default; 13 groups on the default GPT), none (nodes),\n"
            "                  learned (the hierarchical planner: a grouper network learns the groups\n"
            "                  jointly with the placer) or eagle (the same with EAGLE's link RNN)\n"
            "  --updates       policy updates in total (default 250)\n"
            "  --samples       placements per update, K (default 8)\n"
            "  --baseline      ema (moving average, default) or loo (leave-one-out)\n"
            "  --entropy       entropy bonus (default 0.02)\n"
            "  --lr            Adam step size (default 0.003)\n"
            "  --seed          seed of the network and of every sample (default 1)\n"
            "  --prior-stay P  first policy repeats the previous device with probability P\n"
            "                  (default 0.75; 0 = uniform start as in the paper)\n"
            "  --logit-clip C  logits clipped to C tanh(z/C) (default 0 = off)\n"
            "  --hidden H      LSTM width (default 64)\n"
            "  --top-k K       distinct placements kept for the shortlist (default 5)\n"
            "  --algo          reinforce (default: one step per batch) or ppo (clipped ratio of the\n"
            "                  whole placement's probability, several steps per batch)\n"
            "  --ppo-epochs N  PPO: gradient steps per batch (default 4)\n"
            "  --ppo-clip X    PPO: clip the ratio to [1-X, 1+X] (default 0.2)\n"
            "  --n-groups G    learned/eagle: groups the grouper may use (default 16)\n"
            "  --group-prior X learned/eagle: first grouper prefers contiguous chunks of the\n"
            "                  topological order with strength X (default 2; 0 = uniform)\n"
            "  --link-hidden H eagle: width of the link LSTM (default 16)\n"
            "  --pipe-prior X  a pipeline-shaped start of strength X (default 0 = off): the first\n"
            "                  placer prefers D consecutive stages on devices 0..D-1 in unit order,\n"
            "                  sized by each device's speed in the profile; learned/eagle: the\n"
            "                  grouper's chunks are of equal work (profiled time), not node count\n"
            "  --pipe-devices  which devices the pipeline prior gives a stage: all (default) or\n"
            "                  estimate (devices of differing speeds: the fastest 1, 2, ... device\n"
            "                  types, whichever the DP's estimate of the prior's own split prefers;\n"
            "                  no simulation; one device type: all). Printed with the run\n"
            "  --pipe-anneal   the pipeline prior's strength falls linearly to 0 over the updates\n"
            "  --lr-decay F    Adam's step size falls linearly to (1-F) lr over the updates (0..1)\n"
            "  --entropy-decay F  the entropy bonus likewise (0..1; default 0 = constant)\n"
            "  --micro-batches, --schedule   pipeline schedule (default 1, gpipe)\n"
            "  --mem-cap       per-device cap: bytes (16GB, 512MiB) or a fraction (50%%, 0.5)\n"
            "  --devices       use only the profile's first N devices\n"
            "  --config        graph config when the database holds several\n"
            "  --resume RUN    continue run RUN from its last checkpoint (with --updates: new target)\n"
            "  --from OTHER    with --resume: start a new run here from run RUN of the database OTHER\n"
            "                  (another machine's profile): its problem and options, its last\n"
            "                  checkpoint with the devices relabelled, Adam, baseline and best list\n"
            "                  afresh; --updates counts from 0 (default: the run's target); --mem-cap\n"
            "                  gives this machine's cap (default: the run's). The device counts must\n"
            "                  be equal (placer search --from scores placements across counts)\n"
            "  --map           with --from: speed (default; devices by speed on the graph, fastest\n"
            "                  first) or rank (by index); the map is printed\n"
            "  --threads       simulator threads (default: all cores)\n"
            "  --uncalibrated  neutral simulator parameters even if the store has fitted ones\n");
}

typedef struct {
    policy_session_options so;
    reinforce_options ro;
    const char *config_text;
    const char *mem_cap_text;
    long threads;
    long resume;          /* run id, 0 = fresh */
    int updates_given;    /* --updates appeared */
    int problem_given;    /* an option a resume may not change appeared */
    const char *from;     /* --from: the source database of --resume */
    transfer_map map;     /* --map */
    int map_given;
    int cap_given;        /* --mem-cap appeared */
} train_args;

static int parse_long(const char *name, const char *text, long lo, long hi, long *out) {
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < lo || v > hi) {
        cli_usage_error("train", "%s must be an integer in %ld..%ld, not '%s'", name, lo, hi, text);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_double(const char *name, const char *text, double lo, double hi, double *out) {
    char *end = NULL;
    double v = strtod(text, &end);
    if (!*text || *end || !(v >= lo && v <= hi)) {
        cli_usage_error("train", "%s must be a number in [%g, %g], not '%s'", name, lo, hi, text);
        return -1;
    }
    *out = v;
    return 0;
}

/* Parse argv into a (pre-filled) train_args. Returns -1 after printing a
 * usage error, 1 for --help, 0 otherwise. */
static int parse_args(int argc, char **argv, train_args *a) {
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},          {"groups", required_argument, 0, 'g'},
        {"updates", required_argument, 0, 'U'},     {"samples", required_argument, 0, 'K'},
        {"baseline", required_argument, 0, 'B'},    {"entropy", required_argument, 0, 'e'},
        {"lr", required_argument, 0, 'l'},          {"seed", required_argument, 0, 'S'},
        {"micro-batches", required_argument, 0, 'm'}, {"schedule", required_argument, 0, 's'},
        {"mem-cap", required_argument, 0, 'c'},     {"devices", required_argument, 0, 'n'},
        {"config", required_argument, 0, 'C'},      {"resume", required_argument, 0, 'r'},
        {"threads", required_argument, 0, 't'},     {"prior-stay", required_argument, 0, 'p'},
        {"logit-clip", required_argument, 0, 'L'},  {"hidden", required_argument, 0, 'H'},
        {"top-k", required_argument, 0, 'k'},       {"uncalibrated", no_argument, 0, 'u'},
        {"algo", required_argument, 0, 'A'},        {"ppo-epochs", required_argument, 0, 'E'},
        {"ppo-clip", required_argument, 0, 'P'},     {"n-groups", required_argument, 0, 'G'},
        {"group-prior", required_argument, 0, 'R'},  {"link-hidden", required_argument, 0, 'I'},
        {"pipe-prior", required_argument, 0, 'Q'},
        {"pipe-devices", required_argument, 0, 'V'}, {"pipe-anneal", no_argument, 0, 'N'},
        {"lr-decay", required_argument, 0, 'Y'},     {"entropy-decay", required_argument, 0, 'Z'},
        {"from", required_argument, 0, 'F'},         {"map", required_argument, 0, 'W'},
        {"help", no_argument, 0, 'h'},              {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int ch;
    char msg[256];
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        long v;
        double x;
        if (ch != 'd' && ch != 'U' && ch != 'r' && ch != 't' && ch != 'h' && ch != 'F' && ch != 'W' && ch != 'c')
            a->problem_given = 1;
        switch (ch) {
        case 'F': a->from = optarg; break;
        case 'W':
            if (transfer_parse_map(optarg, &a->map, msg, sizeof msg) != PL_OK) {
                cli_usage_error("train", "%s", msg);
                return -1;
            }
            a->map_given = 1;
            break;
        case 'd': a->so.db_path = optarg; break;
        case 'g':
            if (grouping_parse_mode(optarg, &a->so.groups, msg, sizeof msg) != PL_OK) {
                cli_usage_error("train", "%s", msg);
                return -1;
            }
            break;
        case 'U': if (parse_long("--updates", optarg, 0, 10000000, &v)) return -1; a->ro.updates = (int)v; a->updates_given = 1; break;
        case 'K': if (parse_long("--samples", optarg, 1, 4096, &v)) return -1; a->ro.samples = (int)v; break;
        case 'B':
            if (reinforce_parse_baseline(optarg, &a->ro.baseline, msg, sizeof msg) != PL_OK) {
                cli_usage_error("train", "%s", msg);
                return -1;
            }
            break;
        case 'e': if (parse_double("--entropy", optarg, 0, 100, &a->ro.entropy)) return -1; break;
        case 'l': if (parse_double("--lr", optarg, 1e-12, 10, &a->ro.lr)) return -1; break;
        case 'S': if (parse_long("--seed", optarg, 0, 0x7fffffffL, &v)) return -1; a->ro.seed = (uint64_t)v; break;
        case 'm':
            if (schedule_parse_micro_batches(optarg, &a->so.micro_batches, msg, sizeof msg) != PL_OK) {
                cli_usage_error("train", "%s", msg);
                return -1;
            }
            break;
        case 's':
            if (schedule_parse_order(optarg, &a->so.order, msg, sizeof msg) != PL_OK) {
                cli_usage_error("train", "%s", msg);
                return -1;
            }
            break;
        case 'c': a->mem_cap_text = optarg; a->cap_given = 1; break;
        case 'n': if (parse_long("--devices", optarg, 1, 64, &v)) return -1; a->so.devices = (int)v; break;
        case 'C': a->config_text = optarg; break;
        case 'r': if (parse_long("--resume", optarg, 1, 0x7fffffffffffL, &v)) return -1; a->resume = v; break;
        case 't': if (parse_long("--threads", optarg, 1, 1024, &a->threads)) return -1; break;
        case 'p': if (parse_double("--prior-stay", optarg, 0, 0.999, &a->ro.stay)) return -1; break;
        case 'L': if (parse_double("--logit-clip", optarg, 0, 1000, &a->ro.logit_clip)) return -1; break;
        case 'H': if (parse_long("--hidden", optarg, 1, 1024, &v)) return -1; a->ro.hidden = (int)v; break;
        case 'k': if (parse_long("--top-k", optarg, 1, REINFORCE_MAX_TOP, &v)) return -1; a->ro.top_k = (int)v; break;
        case 'A':
            if (reinforce_parse_algo(optarg, &a->ro.algo, msg, sizeof msg) != PL_OK) {
                cli_usage_error("train", "%s", msg);
                return -1;
            }
            break;
        case 'E': if (parse_long("--ppo-epochs", optarg, 1, 100, &v)) return -1; a->ro.ppo_epochs = (int)v; break;
        case 'P': if (parse_double("--ppo-clip", optarg, 1e-6, 0.999, &a->ro.ppo_clip)) return -1; break;
        case 'G': if (parse_long("--n-groups", optarg, 1, 4096, &v)) return -1; a->ro.n_groups = (int)v; break;
        case 'R': if (parse_double("--group-prior", optarg, 0, 100, &a->ro.group_prior)) return -1; break;
        case 'Q': if (parse_double("--pipe-prior", optarg, 0, 100, &a->ro.pipe_prior)) return -1; break;
        case 'V':
            if (reinforce_parse_pipe_devices(optarg, &a->ro.pipe_devices, msg, sizeof msg) != PL_OK) {
                cli_usage_error("train", "%s", msg);
                return -1;
            }
            break;
        case 'N': a->ro.pipe_anneal = 1; break;
        case 'Y': if (parse_double("--lr-decay", optarg, 0, 1, &a->ro.lr_decay)) return -1; break;
        case 'Z': if (parse_double("--entropy-decay", optarg, 0, 1, &a->ro.entropy_decay)) return -1; break;
        case 'I': if (parse_long("--link-hidden", optarg, 1, 1024, &v)) return -1; a->ro.link_hidden = (int)v; break;
        case 'u': a->so.calibrated = 0; break;
        case 'h': return 1;
        default:
            cli_usage_error("train", "unknown or incomplete option '%s'; see placer train --help", argv[optind - 1]);
            return -1;
        }
        (void)x;
    }
    if (optind < argc) {
        cli_usage_error("train", "unexpected argument '%s'; see placer train --help", argv[optind]);
        return -1;
    }
    return 0;
}

static void defaults(train_args *a) {
    memset(a, 0, sizeof *a);
    policy_session_options_default(&a->so);
    reinforce_options_default(&a->ro);
}

typedef struct {
    int64_t id;
    int found;
    char method[32];
    char args[2048];
} run_lookup;

static int find_run(void *ctx, const profile_run_info *r) {
    run_lookup *l = ctx;
    if (r->id != l->id) return 0;
    l->found = 1;
    snprintf(l->method, sizeof l->method, "%s", r->method ? r->method : "");
    snprintf(l->args, sizeof l->args, "%s", r->args ? r->args : "");
    return 1;
}

typedef struct {
    int tty;
    double t_last;
} progress_state;

static int on_progress(void *ud, const reinforce_progress *p) {
    progress_state *ps = ud;
    double now = pl_now_us();
    if (ps->tty && (now - ps->t_last > 1e5 || p->update + 1 == p->updates)) {
        ps->t_last = now;
        fprintf(stderr, "\r\033[Kupdate %d/%d  best %.3f ms  mean %.3f ms  entropy %.3f  oom %d  %.1f s",
                p->update + 1, p->updates, p->best_us * 1e-3, p->mean_cost_us * 1e-3, p->entropy, p->n_oom,
                p->elapsed_s);
    }
    return g_stop ? 1 : 0;
}

/* With --resume: replace a's problem and options by the run's stored
 * arguments (keeping --db, --threads and, when given, --updates). The exit
 * code after an error, or -1 to go on. l keeps the arguments a points into. */
static int train_resolve_resume(train_args *a, run_lookup *l) {
    char msg[512] = "";
    profile_db *db = NULL;
    if (a->problem_given || a->cap_given)
        return cli_usage_error("train", "with --resume only --updates and --threads may be given (the run keeps "
                                        "its own problem and options)");
    /* read the run's stored arguments and parse them as if given */
    pl_status st = profile_db_open(a->so.db_path, PROFILE_DB_READ, &db, msg, sizeof msg);
    if (st != PL_OK) return cli_report("train", st, msg);
    memset(l, 0, sizeof *l);
    l->id = a->resume;
    st = profile_db_runs(db, find_run, l);
    profile_db_close(db);
    if (st != PL_OK) return cli_report("train", st, "cannot list the runs of the database");
    if (!l->found)
        return cli_usage_error("train", "run %ld is not in %s; give the id placer train printed ('run N: ...')",
                               a->resume, a->so.db_path);
    if (strcmp(l->method, "reinforce") != 0)
        return cli_usage_error("train", "run %ld is a '%s' run, not a placer training run", a->resume, l->method);
    char *words[64];
    int n = 0;
    words[n++] = "train";
    char *save = NULL;
    for (char *t = strtok_r(l->args, " ", &save); t && n < 63; t = strtok_r(NULL, " ", &save)) words[n++] = t;
    words[n] = NULL;
    train_args s;
    defaults(&s);
    if (parse_args(n, words, &s) != 0) return cli_usage_error("train", "run %ld has unreadable arguments", a->resume);
    s.so.db_path = a->so.db_path;
    s.threads = a->threads;
    s.resume = a->resume;
    if (a->updates_given) s.ro.updates = a->ro.updates;
    *a = s;
    return -1;
}

/* The run's opening lines: problem, options, the decays and the pipeline
 * prior's devices. */
static void train_print_header(const policy_training *t, const train_args *a) {
    const policy_session *ss = t->ss;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "run %lld%s: ", (long long)t->run_id, a->resume ? " (resumed)" : "");
    cli_print_session_header(ss, &a->so, prefix);
    const reinforce_options *ro = reinforce_get_options(t->r);
    printf("updates %d (from %d), samples %d, %s, baseline %s, entropy %g, lr %g, seed %llu, prior-stay %g\n",
           ro->updates, t->start_update, ro->samples, reinforce_algo_name(ro->algo),
           reinforce_baseline_name(ro->baseline), ro->entropy, ro->lr, (unsigned long long)ro->seed, ro->stay);
    if (ro->lr_decay > 0 || ro->entropy_decay > 0)
        printf("lr falls to %g and entropy to %g by the last update\n", ro->lr * (1 - ro->lr_decay),
               ro->entropy * (1 - ro->entropy_decay));
    if (ro->pipe_prior > 0) {
        int mask[64];
        printf("pipeline prior %g%s, devices %s: stages on", ro->pipe_prior, ro->pipe_anneal ? " falling to 0" : "",
               reinforce_pipe_devices_name(ro->pipe_devices));
        const int nd = policy_devices(policy_evaluator_problem(ss->ev));
        if (nd <= 64) {
            reinforce_pipe_stage_devices(t->r, mask);
            for (int d = 0; d < nd; d++)
                if (mask[d]) printf(" %d", d);
        }
        printf("\n");
    }
    printf("\n");
    fflush(stdout);
}

/* Train, SIGINT/SIGTERM stopping after the update in flight is committed;
 * *wall the seconds it took. */
static pl_status train_with_signals(policy_training *t, double *wall, char *msg, size_t len) {
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    progress_state ps = {cli_stderr_is_tty(), 0};
    double t0 = pl_now_us();
    pl_status st = reinforce_train(t->r, t->ss->db, t->run_id, on_progress, &ps, msg, len);
    *wall = (pl_now_us() - t0) * 1e-6;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (ps.tty) fprintf(stderr, "\r\033[K");
    return st;
}

/* After training: mark the run finished, print the shortlist against the
 * baselines and the closing line; the exit code. */
static int train_finish(policy_training *t, double wall) {
    char msg[512] = "";
    pl_status st = profile_db_run_finish(t->ss->db, t->run_id);
    if (st != PL_OK) return cli_report("train", st, profile_db_last_error(t->ss->db));
    policy_cands *rows = NULL;
    double ref = NAN;
    if ((st = policy_training_shortlist(t, &rows, &ref, msg, sizeof msg)) != PL_OK) return cli_report("train", st, msg);
    char *table = policy_format_table(rows, ref);
    policy_cands_destroy(rows);
    if (!table) return cli_report("train", PL_ERR_NOMEM, "out of memory");
    fputs(table, stdout);
    free(table);
    if (isnan(ref)) printf("\nevery single device runs out of memory: no speed-up reference\n");
    const int done = reinforce_updates_done(t->r);
    printf("\n%d updates x %d samples in %.2f s (this process: %d updates); samples and checkpoint in run %lld\n", done,
           reinforce_get_options(t->r)->samples, wall, done - t->start_update, (long long)t->run_id);
    return CLI_EXIT_OK;
}

/* Train, then finish or report; closes t. The exit code. */
static int train_run(policy_training *t, const char *db_path) {
    double wall = 0;
    char msg[512] = "";
    int rc;
    pl_status st = train_with_signals(t, &wall, msg, sizeof msg);
    if (st == PL_ERR_INTERRUPTED) {
        fprintf(stderr, "placer train: %s; resume with: placer train --db %s --resume %lld\n", msg, db_path,
                (long long)t->run_id);
        rc = CLI_EXIT_FAIL;
    } else if (st != PL_OK) {
        rc = cli_report("train", st, msg);
    } else {
        rc = train_finish(t, wall);
    }
    policy_training_close(t);
    return rc;
}

/* --resume RUN --from OTHER: a new run here from another machine's run. */
static int train_transfer(train_args *a) {
    if (a->problem_given)
        return cli_usage_error("train", "with --resume --from only --updates, --mem-cap, --map and --threads may be "
                                        "given (the run keeps its own problem and options)");
    char msg[512] = "";
    transfer_run_args ra;
    pl_status st = transfer_source_run(a->from, a->resume, &ra, msg, sizeof msg);
    if (st != PL_OK) return cli_report("train", st, msg);
    train_args h;
    defaults(&h);
    h.so.db_path = a->so.db_path;
    h.so.config = ra.config;
    h.so.groups = ra.groups;
    h.so.micro_batches = ra.micro_batches;
    h.so.order = ra.order;
    h.so.mem_cap = a->cap_given ? a->mem_cap_text : ra.mem_cap[0] ? ra.mem_cap : NULL;
    h.so.calibrated = ra.calibrated;
    h.so.threads = (int)a->threads;
    const int updates = a->updates_given ? a->ro.updates : ra.updates > 0 ? ra.updates : h.ro.updates;
    int map[SIM_MAX_DEVICES];
    char machine[64] = "";
    policy_training *t = NULL;
    st = policy_training_start_transfer(&h.so, a->from, a->resume, &ra, a->map, updates, map, machine,
                                        sizeof machine, &t, msg, sizeof msg);
    if (st != PL_OK) {
        char m2[700];
        snprintf(m2, sizeof m2, "run %ld of %s cannot start here: %s", a->resume, a->from, msg);
        return cli_report("train", st, m2);
    }
    const int nd = policy_devices(policy_evaluator_problem(t->ss->ev));
    printf("run %lld starts from run %ld of %s (%s), devices mapped by %s:", (long long)t->run_id, a->resume,
           a->from, machine, a->map == TRANSFER_MAP_RANK ? "rank order" : "speed rank");
    for (int d = 0; d < nd; d++) printf(" %d->%d", d, map[d]);
    printf("\n");
    train_print_header(t, &h);
    return train_run(t, h.so.db_path);
}

int cmd_train(int argc, char **argv) {
    train_args a;
    defaults(&a);
    int pr = parse_args(argc, argv, &a);
    if (pr < 0) return CLI_EXIT_USAGE;
    if (pr > 0) {
        train_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (a.map_given && !a.from) return cli_usage_error("train", "--map goes with --resume RUN --from OTHER");
    if (a.from && !a.resume)
        return cli_usage_error("train", "--from %s goes with --resume RUN (the run of that database to start from)",
                               a.from);
    if (!a.so.db_path) {
        int wrc = cli_working_db("train", &a.so.db_path);
        if (wrc != CLI_EXIT_OK) return wrc;
    }
    if (a.from) return train_transfer(&a);
    /* a resume's options point into the stored arguments: keep them for the
     * whole command */
    run_lookup l;
    memset(&l, 0, sizeof l);
    int rc;
    if (a.resume && (rc = train_resolve_resume(&a, &l)) >= 0) return rc;
    a.ro.grouper = a.so.groups == GROUPING_LEARNED ? GROUPER_HIER
                   : a.so.groups == GROUPING_EAGLE ? GROUPER_EAGLE
                                                   : GROUPER_NONE;
    a.so.config = a.config_text;
    a.so.mem_cap = a.mem_cap_text;
    a.so.threads = (int)a.threads;
    char msg[512] = "";
    policy_training *t = NULL;
    pl_status st = policy_training_start(&a.so, &a.ro, a.resume, a.ro.updates, &t, msg, sizeof msg);
    if (st != PL_OK) return cli_report("train", st, msg);
    train_print_header(t, &a);
    return train_run(t, a.so.db_path);
}
