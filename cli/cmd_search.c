/*
 * cmd_search.c: `placer search` runs the non-learned placers (single
 * device, human splits, the DP over contiguous partitions, random search,
 * simulated annealing, local search, exhaustive search, Baechi's m-ETF and
 * m-SCT) against the
 * simulator and prints their best placements side by side: it parses
 * (search_parse), opens the session, calls search_suite_run
 * (policy/search_suite.h) and prints the table.
 *
 * With --from FILE it also scores placements from another machine's
 * database on this one (policy/transfer_score.h): the shortlists of runs
 * trained there (--run; the search then takes its problem from the first
 * run) or placements given as text (--placement), each carried over by
 * the device map (--map speed|rank), with the gain each retains of this
 * machine's best placement's lead over its best baseline (docs/transfer.md).
 * Without --from the output is what it always was.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_output.h"
#include "placement.h"
#include "search_suite.h"
#include "session.h"
#include "transfer_score.h"
#include "util.h"

static void search_usage(FILE *f) {
    fprintf(f,
            "usage: placer search [--db FILE] [--method LIST] [--groups colocate|none]\n"
            "                     [--micro-batches M] [--schedule gpipe|1f1b] [--mem-cap CAP]\n"
            "                     [--devices N] [--config NAME] [--budget N] [--seed N]\n"
            "                     [--max-evals N] [--threads N] [--uncalibrated] [--json]\n"
            "                     [--from FILE (--run ID | --placement P)... [--map speed|rank] [--top K]\n"
            "                      [--record]]\n\n"
            "Runs baseline and search placers against the simulator and prints the best\n"
            "placement of each: predicted step time, peak memory, speed-up over the best\n"
            "single device, and whether it fits the memory cap.\n\n"
            "  --method      comma-separated: single, human, dp, random, anneal, local,\n"
            "                exhaustive, etf, sct (Baechi's m-ETF and m-SCT, on nodes), or all\n"
            "                (default: all; with all, an exhaustive search over --max-evals is\n"
            "                skipped with a note, and m-SCT without GLPK in the build)\n"
            "  --db          profile database (default: $PLACER_DB or the shipped profile)\n"
            "  --groups      colocate (13 groups on the default GPT, default) or none (nodes)\n"
            "  --micro-batches, --schedule   pipeline schedule (default 1, gpipe)\n"
            "  --mem-cap     per-device cap: bytes (16GB, 512MiB) or a fraction (50%%, 0.5)\n"
            "  --devices     use only the profile's first N devices\n"
            "  --config      graph config when the database holds several (default: its graph)\n"
            "  --budget      evaluations for random, anneal and local (default 2000 = 250 x 8)\n"
            "  --seed        seed of the random choices (default 1)\n"
            "  --max-evals   largest exhaustive search allowed (default 5e7 simulations)\n"
            "  --threads     simulator threads (default: all cores)\n"
            "  --uncalibrated  neutral simulator parameters even if the store has fitted ones\n"
            "  --json        print the rows (and what --from scored) as JSON\n\n"
            "Placements from another machine (docs/transfer.md):\n"
            "  --from FILE   the database of the machine they were found on (its profile and runs)\n"
            "  --run ID      score the shortlist of run ID of FILE (its top --top K distinct\n"
            "                placements); the search takes the run's graph, grouping, micro-batches\n"
            "                and schedule (and its cap unless --mem-cap is given); repeatable, the\n"
            "                runs must share them\n"
            "  --placement P a node placement in FILE's device indices (this graph); repeatable\n"
            "  --map         how FILE's devices become this machine's: speed (default: by speed on\n"
            "                this graph, fastest first) or rank (by index); over the devices each\n"
            "                placement uses, neighbours merging when this machine has fewer\n"
            "  --top K       placements of each run's shortlist (default 5)\n"
            "  --record      keep the scored placements in --db as a run (method transfer), so that\n"
            "                placer confirm --run times them on this machine's GPUs\n"
            "                With --from the methods default to single,human,dp, and the gain\n"
            "                retained is printed: (best baseline - placement) / (best baseline -\n"
            "                best method here), n/a within 0.5%%\n");
}

/* What the user typed: the session's options and the methods'. */
typedef struct {
    policy_session_options so;
    search_suite_options o;
    int json;
    const char *from;                                /* --from FILE */
    int64_t runs[TRANSFER_MAX_SOURCES];
    int n_runs;
    const char *placements[TRANSFER_MAX_SOURCES];
    int n_placements;
    transfer_map map;
    int map_given, top_k, top_given, method_given, record;
    int problem_given;                               /* --config, --groups, --micro-batches, --schedule, --devices */
    char config[256];                                /* the run's config, when the problem comes from a run */
    char cap[64];                                    /* the run's cap */
} search_args;

static int parse_int_opt(const char *name, const char *text, long lo, long hi, long *out) {
    if (cli_parse_int(text, lo, hi, out)) return 0;
    cli_usage_error("search", "%s must be an integer in %ld..%ld, not '%s'", name, lo, hi, text);
    return -1;
}

/* Parse argv into a. Returns -1 after printing the usage error, 1 for
 * --help, 0 to go on. */
static int search_parse(int argc, char **argv, search_args *a) {
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},        {"method", required_argument, 0, 'M'},
        {"groups", required_argument, 0, 'g'},    {"micro-batches", required_argument, 0, 'm'},
        {"schedule", required_argument, 0, 's'},  {"mem-cap", required_argument, 0, 'c'},
        {"devices", required_argument, 0, 'n'},   {"config", required_argument, 0, 'C'},
        {"budget", required_argument, 0, 'b'},    {"seed", required_argument, 0, 'S'},
        {"max-evals", required_argument, 0, 'x'}, {"threads", required_argument, 0, 't'},
        {"uncalibrated", no_argument, 0, 'u'},    {"help", no_argument, 0, 'h'},
        {"json", no_argument, 0, 'j'},            {"from", required_argument, 0, 'F'},
        {"run", required_argument, 0, 'r'},       {"placement", required_argument, 0, 'P'},
        {"map", required_argument, 0, 'A'},       {"top", required_argument, 0, 'k'},
        {"record", no_argument, 0, 'R'},
        {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    policy_session_options_default(&a->so);
    a->so.db_path = NULL;
    a->o = (search_suite_options){SEARCH_SUITE_ALL, 0, 2000, 1, 5e7, NULL, NULL};
    a->top_k = 5;
    optind = 1;
    opterr = 0;
    int ch;
    char msg[512] = "";
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        long v;
        if (ch == 'g' || ch == 'm' || ch == 's' || ch == 'n' || ch == 'C') a->problem_given = 1;
        switch (ch) {
        case 'd': a->so.db_path = optarg; break;
        case 'j': a->json = 1; break;
        case 'R': a->record = 1; break;
        case 'F': a->from = optarg; break;
        case 'r':
            if (a->n_runs == TRANSFER_MAX_SOURCES)
                return cli_usage_error("search", "at most %d --run options", TRANSFER_MAX_SOURCES), -1;
            if (parse_int_opt("--run", optarg, 1, 0x7fffffffffffL, &v)) return -1;
            a->runs[a->n_runs++] = v;
            break;
        case 'P':
            if (a->n_placements == TRANSFER_MAX_SOURCES)
                return cli_usage_error("search", "at most %d --placement options", TRANSFER_MAX_SOURCES), -1;
            a->placements[a->n_placements++] = optarg;
            break;
        case 'A':
            if (transfer_parse_map(optarg, &a->map, msg, sizeof msg) != PL_OK)
                return cli_usage_error("search", "%s", msg), -1;
            a->map_given = 1;
            break;
        case 'k':
            if (parse_int_opt("--top", optarg, 1, 32, &v)) return -1;
            a->top_k = (int)v;
            a->top_given = 1;
            break;
        case 'M':
            a->method_given = 1;
            if (search_suite_parse_methods(optarg, &a->o.methods) != 0)
                return cli_usage_error("search", "unknown --method '%s' (use single, human, dp, random, anneal, "
                                                 "local, exhaustive or all, comma-separated)", optarg), -1;
            a->o.explicit_methods = !(a->o.methods == SEARCH_SUITE_ALL && strstr(optarg, "all"));
            break;
        case 'g':
            if (grouping_parse_mode(optarg, &a->so.groups, msg, sizeof msg) != PL_OK)
                return cli_usage_error("search", "%s", msg), -1;
            if (a->so.groups == GROUPING_LEARNED || a->so.groups == GROUPING_EAGLE)
                return cli_usage_error("search", "--groups %s is learned by placer train; search over colocate groups "
                                                 "or none (nodes)", optarg), -1;
            break;
        case 'm':
            if (schedule_parse_micro_batches(optarg, &a->so.micro_batches, msg, sizeof msg) != PL_OK)
                return cli_usage_error("search", "%s", msg), -1;
            break;
        case 's':
            if (schedule_parse_order(optarg, &a->so.order, msg, sizeof msg) != PL_OK)
                return cli_usage_error("search", "%s", msg), -1;
            break;
        case 'c': a->so.mem_cap = optarg; break;
        case 'n': if (parse_int_opt("--devices", optarg, 1, 64, &v)) return -1; a->so.devices = (int)v; break;
        case 'C': a->so.config = optarg; break;
        case 'b': if (parse_int_opt("--budget", optarg, 1, 100000000, &v)) return -1; a->o.budget = (int)v; break;
        case 'S': if (parse_int_opt("--seed", optarg, 0, 0x7fffffffL, &v)) return -1; a->o.seed = (uint64_t)v; break;
        case 't': if (parse_int_opt("--threads", optarg, 1, 1024, &v)) return -1; a->so.threads = (int)v; break;
        case 'x': {
            char *end = NULL;
            a->o.max_evals = strtod(optarg, &end);
            if (!*optarg || *end || !(a->o.max_evals >= 1))
                return cli_usage_error("search", "--max-evals must be a number >= 1, not '%s'", optarg), -1;
            break;
        }
        case 'u': a->so.calibrated = 0; break;
        case 'h': return 1;
        default:
            return cli_usage_error("search", "unknown or incomplete option '%s'; see placer search --help",
                                   argv[optind - 1]), -1;
        }
    }
    if (optind < argc)
        return cli_usage_error("search", "unexpected argument '%s'; see placer search --help", argv[optind]), -1;
    if (!a->from && (a->n_runs || a->n_placements))
        return cli_usage_error("search", "--run and --placement score placements of another database: give it with "
                                         "--from FILE"), -1;
    if (!a->from && (a->map_given || a->top_given || a->record))
        return cli_usage_error("search", "--map, --top and --record go with --from FILE"), -1;
    if (a->from && !a->n_runs && !a->n_placements)
        return cli_usage_error("search", "--from %s: give --run ID (a run trained there) or --placement P to score",
                               a->from), -1;
    if (a->from && a->n_runs && a->problem_given)
        return cli_usage_error("search", "with --run the problem comes from the run (its graph, grouping, "
                                         "micro-batches and schedule): leave out --config, --groups, "
                                         "--micro-batches, --schedule and --devices"), -1;
    if (a->from && !a->method_given) a->o.methods = SEARCH_SUITE_SINGLE | SEARCH_SUITE_HUMAN | SEARCH_SUITE_DP;
    if (!a->so.db_path) a->so.db_path = cli_default_db();
    if (!a->so.db_path)
        return cli_usage_error("search", "no profile database found; give --db FILE (placer profile --from-spec "
                                         "t4x4-pcie --db FILE makes one)"), -1;
    return 0;
}

/* Progress on stderr, only when it is a terminal. */
static void progress(void *ud, const char *what) {
    (void)ud;
    fprintf(stderr, "\r\033[Kplacer search: %s ...", what);
}

/* The closing table and the notes under it; the exit code. rows are the
 * methods' rows and, with --from, the transferred ones after them. */
static int search_print(const policy_session *ss, const search_args *a, const search_suite_result *r,
                        const policy_cands *rows) {
    char *table = policy_format_table(rows, r->ref_us);
    if (!table) return cli_report("search", PL_ERR_NOMEM, NULL);
    fputs(table, stdout);
    free(table);
    const int m = a->o.methods;
    if (isnan(r->ref_us)) printf("\nevery single device runs out of memory: no speed-up reference\n");
    if (m & (SEARCH_SUITE_RANDOM | SEARCH_SUITE_ANNEAL | SEARCH_SUITE_LOCAL))
        printf("\nrandom, anneal and local: %d evaluations each, seed %llu\n", a->o.budget,
               (unsigned long long)a->o.seed);
    if ((m & SEARCH_SUITE_EXHAUSTIVE) && !r->exhaustive_skipped) {
        const int th = policy_evaluator_threads(ss->ev);
        printf("exhaustive: %.0f placements up to %d device relabellings (of %.3g), %.2f s on %d thread%s\n",
               r->xi.orbits, r->xi.n_automorphisms, r->xi.space, r->xi.wall_s, th, cli_plural(th));
    }
    if (r->exhaustive_skipped) printf("exhaustive: skipped, %s\n", r->note);
    printf("searched in %.2f s\n", r->wall_s);
    return CLI_EXIT_OK;
}

/* The best baseline (single device or human split) and the best method row
 * that fits, among the methods' rows; -1 when none. */
static void best_rows(const policy_cands *m, int *base, int *best) {
    *base = *best = -1;
    for (int i = 0; i < m->n; i++) {
        const policy_cand *c = &m->items[i];
        if (c->ev.oom) continue;
        if ((!strncmp(c->label, "single", 6) || !strncmp(c->label, "human", 5)) &&
            (*base < 0 || c->ev.cost_us < m->items[*base].ev.cost_us))
            *base = i;
        if (*best < 0 || c->ev.cost_us < m->items[*best].ev.cost_us) *best = i;
    }
}

/* The transferred row of source k with the lowest cost here, or -1. */
static int best_of_source(const transfer_scores *t, int k) {
    int b = -1;
    for (int i = 0; i < t->rows->n; i++)
        if (t->origin[i].source == k && (b < 0 || t->rows->items[i].ev.cost_us < t->rows->items[b].ev.cost_us)) b = i;
    return b;
}

static void source_name(const search_args *a, int k, char *buf, size_t len) {
    if (k < a->n_runs) snprintf(buf, len, "run %lld", (long long)a->runs[k]);
    else snprintf(buf, len, "placement %d", k - a->n_runs + 1);
}

/* The --from block: where each placement came from and what it retains. */
static void transfer_print(const search_args *a, const policy_cands *m, const transfer_scores *t) {
    printf("\nfrom %s (%s, %d device%s), devices mapped by %s, over the devices each placement uses:\n", a->from,
           t->machine, t->n_src_devices, cli_plural(t->n_src_devices),
           a->map == TRANSFER_MAP_RANK ? "rank order" : "speed rank");
    for (int i = 0; i < t->rows->n; i++) {
        const transfer_origin *o = &t->origin[i];
        const policy_cand *c = &t->rows->items[i];
        char src[32];
        if (o->src_oom) snprintf(src, sizeof src, "OOM");
        else if (isnan(o->src_step_us)) snprintf(src, sizeof src, "-");
        else snprintf(src, sizeof src, "%.3f ms", o->src_step_us * 1e-3);
        printf("  %-24s here %.3f ms%s, there %s, devices", c->label, c->ev.step_us * 1e-3, c->ev.oom ? " (OOM)" : "",
               src);
        for (int d = 0; d < o->n_src; d++)
            if (o->map[d] >= 0) printf(" %d->%d", d, o->map[d]);
        printf("\n");
    }
    int base, best;
    best_rows(m, &base, &best);
    if (base < 0 || best < 0) {
        printf("gain retained: n/a (no single-device or human-split baseline that fits among the methods run)\n");
        return;
    }
    const policy_cand *cb = &m->items[base], *cx = &m->items[best];
    if (isnan(transfer_gain_retained(cb->ev.cost_us, cx->ev.cost_us, cx->ev.cost_us))) {
        printf("gain retained: n/a (the best method here, %s at %.3f ms, is within 0.5%% of the best baseline, %s "
               "at %.3f ms)\n", cx->label, cx->ev.cost_us * 1e-3, cb->label, cb->ev.cost_us * 1e-3);
        return;
    }
    printf("gain retained of the best method's lead here (%s, %.3f ms) over the best baseline (%s, %.3f ms):\n",
           cx->label, cx->ev.cost_us * 1e-3, cb->label, cb->ev.cost_us * 1e-3);
    for (int k = 0; k < a->n_runs + a->n_placements; k++) {
        int i = best_of_source(t, k);
        if (i < 0) continue;
        const policy_cand *c = &t->rows->items[i];
        char name[48];
        source_name(a, k, name, sizeof name);
        if (c->ev.oom) {
            printf("  %-14s %s runs out of memory here\n", name, c->label);
            continue;
        }
        printf("  %-14s %s at %.3f ms: %.0f%%\n", name, c->label, c->ev.cost_us * 1e-3,
               100 * transfer_gain_retained(cb->ev.cost_us, c->ev.cost_us, cx->ev.cost_us));
    }
}

static void json_row(const policy_session *ss, const policy_cand *c, const transfer_origin *o, char *pl, size_t plen) {
    printf("{\"label\": ");
    pl_json_string(stdout, c->label);
    printf(", \"step_ms\": %.6f, \"cost_ms\": %.6f, \"peak_bytes\": %lld, \"oom\": %s, \"devices_used\": %d",
           c->ev.step_us * 1e-3, c->ev.cost_us * 1e-3, (long long)c->ev.peak_bytes, cli_json_bool(c->ev.oom),
           c->ev.devices_used);
    placement_format(c->node_dev, ss->g->n_nodes, pl, plen);
    printf(", \"placement\": ");
    pl_json_string(stdout, pl);
    if (o) {
        printf(", \"from\": {\"source\": %d, \"run\": %lld, \"source_step_ms\": ", o->source, (long long)o->run);
        if (isnan(o->src_step_us)) printf("null");
        else printf("%.6f", o->src_step_us * 1e-3);
        printf(", \"source_oom\": %s, \"map\": [", cli_json_bool(o->src_oom));
        for (int d = 0; d < o->n_src; d++) printf("%s%d", d ? ", " : "", o->map[d]);
        printf("]}");
    }
    printf("}");
}

/* --json: the rows (each transferred one with where it came from), the
 * reference and, with --from, the gains. */
static void search_print_json(const policy_session *ss, const search_args *a, const search_suite_result *r,
                              const policy_cands *m, const transfer_scores *t) {
    char key[128];
    gpt_config_key(&ss->cfg, key, sizeof key);
    size_t plen = (size_t)ss->g->n_nodes * 4 + 16;
    char *pl = malloc(plen);
    if (!pl) return;
    printf("{\"db\": ");
    pl_json_string(stdout, a->so.db_path);
    printf(", \"machine\": ");
    pl_json_string(stdout, ss->p->machine);
    printf(", \"devices\": %d, \"graph\": ", ss->p->n_devices);
    pl_json_string(stdout, key);
    printf(", \"micro_batches\": %d, \"schedule\": \"%s\", \"cap_bytes\": %lld, \"ref_step_ms\": ", a->so.micro_batches,
           schedule_order_name(a->so.order), (long long)ss->cap_bytes);
    if (isnan(r->ref_us)) printf("null");
    else printf("%.6f", r->ref_us * 1e-3);
    printf(",\n \"rows\": [");
    for (int i = 0; i < m->n; i++) {
        printf(i ? ",\n  " : "\n  ");
        json_row(ss, &m->items[i], NULL, pl, plen);
    }
    for (int i = 0; t && i < t->rows->n; i++) {
        printf(m->n || i ? ",\n  " : "\n  ");
        json_row(ss, &t->rows->items[i], &t->origin[i], pl, plen);
    }
    printf("]");
    if (t) {
        int base, best;
        best_rows(m, &base, &best);
        printf(",\n \"transfer\": {\"from\": ");
        pl_json_string(stdout, a->from);
        printf(", \"source_machine\": ");
        pl_json_string(stdout, t->machine);
        printf(", \"source_devices\": %d, \"map\": \"%s\", \"best_baseline\": ", t->n_src_devices,
               transfer_map_name(a->map));
        if (base < 0) printf("null");
        else pl_json_string(stdout, m->items[base].label);
        printf(", \"best_baseline_ms\": ");
        if (base < 0) printf("null");
        else printf("%.6f", m->items[base].ev.cost_us * 1e-3);
        printf(", \"best\": ");
        if (best < 0) printf("null");
        else pl_json_string(stdout, m->items[best].label);
        printf(", \"best_ms\": ");
        if (best < 0) printf("null");
        else printf("%.6f", m->items[best].ev.cost_us * 1e-3);
        printf(", \"sources\": [");
        for (int k = 0; k < a->n_runs + a->n_placements; k++) {
            int i = best_of_source(t, k);
            char name[48];
            source_name(a, k, name, sizeof name);
            printf("%s{\"source\": ", k ? ", " : "");
            pl_json_string(stdout, name);
            double g = NAN;
            if (i >= 0 && base >= 0 && best >= 0 && !t->rows->items[i].ev.oom)
                g = transfer_gain_retained(m->items[base].ev.cost_us, t->rows->items[i].ev.cost_us,
                                           m->items[best].ev.cost_us);
            printf(", \"best_here\": ");
            if (i < 0) printf("null");
            else pl_json_string(stdout, t->rows->items[i].label);
            printf(", \"step_ms\": ");
            if (i < 0) printf("null");
            else printf("%.6f", t->rows->items[i].ev.cost_us * 1e-3);
            printf(", \"oom\": %s, \"gain_retained\": ", cli_json_bool(i >= 0 && t->rows->items[i].ev.oom));
            if (isnan(g)) printf("null");
            else printf("%.6f", g);
            printf("}");
        }
        printf("]}");
    }
    printf(",\n \"wall_s\": %.3f}\n", r->wall_s);
    free(pl);
}

/* With --from and --run: the problem from the first run (graph, grouping,
 * micro-batches, schedule, and its cap unless --mem-cap was given). The
 * exit code after an error, or -1 to go on. */
static int search_problem_from_run(search_args *a) {
    transfer_run_args ra;
    char msg[512] = "";
    pl_status st = transfer_source_run(a->from, a->runs[0], &ra, msg, sizeof msg);
    if (st != PL_OK) return cli_report("search", st, msg);
    snprintf(a->config, sizeof a->config, "%s", ra.config);
    a->so.config = a->config;
    a->so.groups = ra.groups == GROUPING_COLOCATE ? GROUPING_COLOCATE : GROUPING_NONE;
    a->so.micro_batches = ra.micro_batches;
    a->so.order = ra.order;
    if (!a->so.mem_cap && ra.mem_cap[0]) {
        snprintf(a->cap, sizeof a->cap, "%s", ra.mem_cap);
        a->so.mem_cap = a->cap;
    }
    return -1;
}

int cmd_search(int argc, char **argv) {
    search_args a;
    int pr = search_parse(argc, argv, &a);
    if (pr < 0) return CLI_EXIT_USAGE;
    if (pr > 0) {
        search_usage(stdout);
        return CLI_EXIT_OK;
    }
    int rc;
    if (a.from && a.n_runs && (rc = search_problem_from_run(&a)) >= 0) return rc;
    char msg[512] = "";
    policy_session *ss = NULL;
    pl_status st = policy_session_open(&a.so, &ss, msg, sizeof msg);
    if (st != PL_OK && a.from && a.n_runs) {
        char m2[600];
        snprintf(m2, sizeof m2, "run %lld of %s cannot be scored on %s: %s", (long long)a.runs[0], a.from,
                 a.so.db_path, msg);
        return cli_report("search", st, m2);
    }
    if (st != PL_OK) return cli_report("search", st, msg);
    if (!a.json) {
        cli_print_session_header(ss, &a.so, "");
        putchar('\n');
    }
    const int tty = cli_stderr_is_tty();
    if (tty) a.o.progress = progress;
    search_suite_result r;
    st = search_suite_run(ss, &a.o, &r, msg, sizeof msg);
    if (tty) fprintf(stderr, "\r\033[K");
    rc = CLI_EXIT_OK;
    transfer_scores t;
    memset(&t, 0, sizeof t);
    policy_cands *all = NULL;
    if (st != PL_OK) {
        rc = cli_report("search", st, msg);
    } else if (a.from) {
        transfer_score_options to = {a.from, a.runs, a.n_runs, a.placements, a.n_placements, a.map, a.top_k,
                                     a.so.threads};
        st = transfer_score(&to, ss, &t, msg, sizeof msg);
        if (st == PL_OK) st = policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &all);
        for (int k = 0; k < 2 && st == PL_OK; k++) {
            const policy_cands *src = k ? t.rows : r.rows;
            for (int i = 0; i < src->n && st == PL_OK; i++)
                st = policy_cands_add(all, ss->gr, src->items[i].label, src->items[i].node_dev, src->items[i].unit_dev,
                                      &src->items[i].ev, src->items[i].aux);
        }
        if (st != PL_OK) rc = cli_report("search", st, msg);
    }
    if (rc == CLI_EXIT_OK && a.json) {
        search_print_json(ss, &a, &r, r.rows, a.from ? &t : NULL);
    } else if (rc == CLI_EXIT_OK) {
        rc = search_print(ss, &a, &r, all ? all : r.rows);
        if (a.from) transfer_print(&a, r.rows, &t);
    }
    if (rc == CLI_EXIT_OK && a.record) {
        char prov[1024];
        int k = snprintf(prov, sizeof prov, "--from %s --map %s --top %d", a.from, transfer_map_name(a.map), a.top_k);
        for (int i = 0; i < a.n_runs && k < (int)sizeof prov; i++)
            k += snprintf(prov + k, sizeof prov - (size_t)k, " --run %lld", (long long)a.runs[i]);
        for (int i = 0; i < a.n_placements && k < (int)sizeof prov; i++)
            k += snprintf(prov + k, sizeof prov - (size_t)k, " --placement %s", a.placements[i]);
        int64_t run = 0;
        st = transfer_scores_record(a.so.db_path, &t, prov, &run, msg, sizeof msg);
        if (st != PL_OK) rc = cli_report("search", st, msg);
        else if (!a.json)
            printf("recorded as run %lld of %s: placer confirm --db %s --run %lld times them here\n", (long long)run,
                   a.so.db_path, a.so.db_path, (long long)run);
    }
    policy_cands_destroy(all);
    transfer_scores_free(&t);
    search_suite_result_free(&r);
    policy_session_close(ss);
    return rc;
}
