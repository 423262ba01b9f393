/*
 * cmd_confirm.c: `placer confirm` re-times a run's RL shortlist against the
 * baselines on the real engine, with the head-to-head protocol: shuffled
 * selection rounds pick one placement per side, fresh confirmation rounds
 * time only the picks, and only those are reported.
 *
 * With --layout L (repeatable) where some L has tp x dp > 1, it times the
 * layouts themselves instead, one process per rank on the CPU backend, in
 * shuffled rounds, against the layout simulator's prediction on the CPU
 * profile (calib/layout_confirm.h): one row per layout.
 *
 * The command only parses and checks: options into confirm_opts, then one
 * of the two library runs (calib/confirm_session.h for placements,
 * calib/layout_confirm.h for layouts), printed through print_confirm.h.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib_db.h"
#include "cli.h"
#include "confirm_session.h"
#include "hw_timer.h"
#include "layout_confirm.h"
#include "placer_config.h"
#include "print_confirm.h"
#include "step_layout.h"
#include "util.h"

static void confirm_usage(FILE *f) {
    fprintf(f,
            "usage: placer confirm --db FILE --run RUN [--devices 0,1] [--micro-batches M] [--schedule S]\n"
            "                      [--mem-cap CAP] [--selection-rounds 4] [--confirm-rounds 8] [--steps 10]\n"
            "                      [--warmup 2] [--seed N] [--label NAME] [--no-dp] [--no-search]\n"
            "                      [--timer cuda|cpu|synthetic] [--config NAME] [--no-trace] [--graphs]\n"
            "                      [--layout TEXT]\n\n"
            "Sides: the RL shortlist of run RUN (top-k and the final favourite), every single GPU, every\n"
            "human split and device assignment, the DP winner and the search winner. Selection rounds time\n"
            "every candidate in a shuffled order and pick each side's fastest (never one that ran out of\n"
            "memory); confirmation rounds then time only the picks, shuffled, and are the only numbers\n"
            "reported: mean +- sd and standard error per side, differences in standard errors, and the\n"
            "simulator's prediction beside each. Every timing is stored in the database.\n\n"
            "  --db FILE               profile database (written)\n"
            "  --run RUN               placer run whose shortlist competes (0: no RL side)\n"
            "  --devices LIST          GPU of each profile device (default 0,1,..)\n"
            "  --micro-batches M       micro-batches per step (default 1)\n"
            "  --schedule S            gpipe or 1f1b (default gpipe)\n"
            "  --mem-cap CAP           per-device cap: bytes (16GiB) or a fraction of the card (0.5, 50%%)\n"
            "  --selection-rounds N    (default 4)     --confirm-rounds N   (default 8)\n"
            "  --steps N               timed steps per timing (default 10)   --warmup N (default 2)\n"
            "  --seed N                shuffles (default 1)\n"
            "  --label NAME            name of this setting in the results (default: run RUN)\n"
            "  --top-k N               RL candidates from the samples when the run has no checkpoint (5)\n"
            "  --no-dp, --no-search    leave out the DP or the search winner\n"
            "  --timer KIND            cuda (default when built), cpu, or synthetic (the simulator with\n"
            "                          known parameters plus noise, to try the protocol without a GPU)\n"
            "  --config NAME           graph config when the database holds several\n"
            "  --no-trace              do not record a traced step of the fastest side (engine timers\n"
            "                          record one in the database, for placer report)\n"
            "  --graphs                CUDA: replay steps as captured CUDA graphs (as placer step --graphs)\n"
            "  --layout TEXT           a layout in placer layout's text form: its micro-batches\n"
            "                          (gbs / (dp x mbs)) are every side's schedule, and its pipeline\n"
            "                          (pp stages over devices 0..pp-1, by stages= or uniform) joins as\n"
            "                          the side 'layout'; gbs must be the profile's batch and a precision\n"
            "                          the profile's; cp, vp, recompute, zero 2/3 refused\n\n"
            "       placer confirm --db FILE --timer cpu|cuda --layout TEXT [--layout TEXT ...] [--confirm-rounds 8]\n"
            "                      [--steps 10] [--warmup 2] [--seed N]\n\n"
            "With a layout of tp x dp > 1 (or several --layout), times the layouts themselves on the CPU\n"
            "backend or on CUDA (every rank on GPU 0), one process per rank (as placer step --layout), in\n"
            "rounds shuffled by --seed, and\n"
            "prints one row per layout: the mean of the rounds' medians beside the layout simulator's\n"
            "prediction on the profile (compute and memory rates fitted to its single-device steps,\n"
            "collectives from its curves: placer profile --collectives N first). pp must be 1. Timings\n"
            "are stored with\n"
            "purpose confirm-layout. docs/layouts.md describes the prediction and its limits.\n");
}

static int parse_int(const char *cmd, const char *opt, const char *text, int lo, int hi, int *out) {
    char *end;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < lo || v > hi)
        return cli_usage_error(cmd, "%s must be an integer in [%d, %d], got '%s'", opt, lo, hi, text);
    *out = (int)v;
    return 0;
}

/* The options as given. */
typedef struct {
    const char *db_path, *devices, *cap_text, *label, *config, *timer_kind;
    const char *layouts[CALIB_MAX_LAYOUTS]; /* --layout, in order */
    int n_layouts;
    int have_run, m, m_given, trace, graphs;
    double timeout_s;
    schedule_order order;
    calib_confirm_config cfg;  /* rounds, steps, warm-up, seed */
    calib_sides_options so;    /* the run, top-k, the dp and search sides */
} confirm_opts;

/* argv into o. -1 to go on, else the exit code (--help: 0). */
static int confirm_parse(int argc, char **argv, confirm_opts *o) {
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},       {"run", required_argument, 0, 'r'},
        {"devices", required_argument, 0, 'D'},  {"micro-batches", required_argument, 0, 'm'},
        {"schedule", required_argument, 0, 'S'}, {"mem-cap", required_argument, 0, 'C'},
        {"selection-rounds", required_argument, 0, 'R'}, {"confirm-rounds", required_argument, 0, 'K'},
        {"steps", required_argument, 0, 'k'},    {"warmup", required_argument, 0, 'w'},
        {"seed", required_argument, 0, 's'},     {"label", required_argument, 0, 'l'},
        {"top-k", required_argument, 0, 'T'},    {"no-dp", no_argument, 0, 'P'},
        {"no-search", no_argument, 0, 'X'},      {"timer", required_argument, 0, 't'},
        {"config", required_argument, 0, 'c'},   {"no-trace", no_argument, 0, 'N'},
        {"graphs", no_argument, 0, 'G'},         {"layout", required_argument, 0, 'L'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    char *end;
    char msg[512] = "";
    pl_status st;
    while ((c = getopt_long(argc, argv, "d:r:D:m:S:C:R:K:k:w:s:l:T:PXt:c:NGL:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': o->db_path = optarg; break;
        case 'r':
            o->so.run_id = strtoll(optarg, &end, 10);
            if (!*optarg || *end || o->so.run_id < 0)
                return cli_usage_error("confirm", "--run takes a run id, got '%s'", optarg);
            o->have_run = 1;
            break;
        case 'D': o->devices = optarg; break;
        case 'm':
            if ((st = schedule_parse_micro_batches(optarg, &o->m, msg, sizeof msg)) != PL_OK)
                return cli_report("confirm", st, msg);
            o->m_given = 1;
            break;
        case 'S':
            if ((st = schedule_parse_order(optarg, &o->order, msg, sizeof msg)) != PL_OK)
                return cli_report("confirm", st, msg);
            break;
        case 'C': o->cap_text = optarg; break;
        case 'R':
            if (parse_int("confirm", "--selection-rounds", optarg, 1, 1000, &o->cfg.selection_rounds))
                return CLI_EXIT_USAGE;
            break;
        case 'K':
            if (parse_int("confirm", "--confirm-rounds", optarg, 2, 1000, &o->cfg.confirm_rounds)) return CLI_EXIT_USAGE;
            break;
        case 'k': if (parse_int("confirm", "--steps", optarg, 1, 10000, &o->cfg.steps)) return CLI_EXIT_USAGE; break;
        case 'w': if (parse_int("confirm", "--warmup", optarg, 0, 10000, &o->cfg.warmup)) return CLI_EXIT_USAGE; break;
        case 's':
            o->cfg.seed = strtoull(optarg, &end, 10);
            if (!*optarg || *end) return cli_usage_error("confirm", "--seed must be a non-negative integer");
            o->so.seed = o->cfg.seed;
            break;
        case 'l': o->label = optarg; break;
        case 'T': if (parse_int("confirm", "--top-k", optarg, 1, 64, &o->so.top_k)) return CLI_EXIT_USAGE; break;
        case 'P': o->so.dp = 0; break;
        case 'X': o->so.search = 0; break;
        case 't': o->timer_kind = optarg; break;
        case 'c': o->config = optarg; break;
        case 'N': o->trace = 0; break;
        case 'G': o->graphs = 1; break;
        case 'L':
            if (o->n_layouts == CALIB_MAX_LAYOUTS)
                return cli_usage_error("confirm", "at most %d --layout options", CALIB_MAX_LAYOUTS);
            o->layouts[o->n_layouts++] = optarg;
            break;
        case 'h': confirm_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("confirm", "unknown or incomplete option '%s'; see placer confirm --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("confirm", "unexpected argument '%s'; see placer confirm --help", argv[optind]);
    if (!o->db_path) return cli_usage_error("confirm", "--db FILE is required");
    if (!o->have_run && !o->n_layouts) return cli_usage_error("confirm", "--run RUN is required (0 for baselines only)");
    if (!o->timer_kind || (!PLACER_HAVE_CUDA && !strcmp(o->timer_kind, "cuda"))) /* not the engine's --cpu hint */
        return cli_usage_error("confirm", "this build has no CUDA engine: use --timer cpu or --timer synthetic");
    if (strcmp(o->timer_kind, "cuda") && strcmp(o->timer_kind, "cpu") && strcmp(o->timer_kind, "synthetic"))
        return cli_usage_error("confirm", "--timer must be cuda, cpu or synthetic, got '%s'", o->timer_kind);
    if (o->n_layouts && o->m_given)
        return cli_usage_error("confirm", "--layout sets the micro-batches; leave out --micro-batches");
    return -1;
}

/* Whether each layout of several, or one over several processes, can be
 * timed over its ranks against the profile (prec: the profile's); names
 * the precision in each text. -1 to go on, else the exit code. */
static int check_layouts(const confirm_opts *o, const calib_model *mo, hw_precision prec, step_layout *sls) {
    for (int i = 0; i < o->n_layouts; i++) {
        step_layout *q = &sls[i];
        const char *lt = o->layouts[i];
        if (!strcmp(o->timer_kind, "synthetic"))
            return cli_usage_error("confirm", "--layout %s: tp x dp = %d processes; with --timer synthetic "
                                              "confirm times placements in one process; --timer cpu times layouts "
                                              "(or --timer cuda), one process per rank", lt, q->world);
        if (!strcmp(o->timer_kind, "cuda") && (q->has_precision ? q->prec : prec) == HW_PREC_BF16)
            return cli_usage_error("confirm", "--layout %s: the engine's tp and dp run fp32 / tf32 on CUDA, not "
                                              "bf16; use precision=tf32", lt);
        if (q->batch != mo->cfg.batch)
            return cli_usage_error("confirm", "--layout %s: gbs=%d, but the profile's graph %s has a batch of %d", lt,
                                   q->batch, mo->key, mo->cfg.batch);
        if (q->has_precision && q->prec != prec)
            return cli_usage_error("confirm", "--layout %s: precision=%s, but the profile was measured in %s", lt,
                                   hw_precision_name(q->prec), hw_precision_name(prec));
        if (q->pp > 1)
            return cli_usage_error("confirm", "--layout %s: pp=%d: a rank runs its pipeline stages one after "
                                              "another on the CPU backend, which the layout simulator does not "
                                              "model; use pp=1 with tp x dp > 1", lt, q->pp);
        if (!q->has_precision) step_layout_set_precision(q, prec);
    }
    if (o->so.run_id > 0 || o->devices || o->cap_text || o->graphs)
        return cli_usage_error("confirm", "--layout with tp x dp > 1 times only the layouts: leave out --run, "
                                          "--devices, --mem-cap and --graphs");
    if (o->cfg.steps > 64)
        return cli_usage_error("confirm", "--steps %d: a layout over processes is timed in at most 64 steps",
                               o->cfg.steps);
    return -1;
}

/* The layouts over their ranks (calib/layout_confirm.h): predicted from db
 * (read only), which is then reopened for writing the timings. */
static int confirm_layouts(const confirm_opts *o, profile_db **dbp, const calib_model *mo, const step_layout *sl) {
    char msg[512] = "";
    calib_layouts_confirm c;
    const calib_layouts_opts lo = {o->cfg.confirm_rounds, o->cfg.steps, o->cfg.warmup, o->cfg.seed, o->timeout_s,
                                   !strcmp(o->timer_kind, "cuda")};
    int rc = CLI_EXIT_OK;
    pl_status st = calib_layouts_predict(*dbp, mo, sl, o->n_layouts, &c, msg, sizeof msg);
    if (st != PL_OK) {
        rc = c.fit_failed ? cli_usage_error("confirm", "--layout with tp x dp > 1 is predicted from the profile's "
                                                       "collective curves: %s", msg)
                          : cli_report("confirm", st, msg);
        goto out;
    }
    profile_db_close(*dbp);
    *dbp = NULL;
    if ((st = profile_db_open(o->db_path, PROFILE_DB_WRITE, dbp, msg, sizeof msg)) != PL_OK) {
        rc = cli_report("confirm", st, msg);
        goto out;
    }
    print_confirm_layouts_start(&lo, o->n_layouts);
    if ((st = calib_layouts_time(*dbp, mo, sl, &lo, &c, msg, sizeof msg)) != PL_OK) {
        rc = cli_report("confirm", st, msg);
        goto out;
    }
    print_confirm_layouts(&c, mo, sl, &lo);
out:
    calib_layouts_confirm_free(&c);
    return rc;
}

/* --layout with one process: its micro-batches are every side's, its
 * pipeline split (into *layout_pl, owned by the caller) the side "layout".
 * -1 to go on, else the exit code. */
static int layout_side(confirm_opts *o, const calib_model *mo, hw_precision prec, step_layout *sl, int **layout_pl) {
    char msg[512] = "";
    if (!o->have_run) return cli_usage_error("confirm", "--run RUN is required (0 for baselines only)");
    if (sl->batch != mo->cfg.batch)
        return cli_usage_error("confirm", "--layout: gbs=%d, but the profile's graph %s has a batch of %d", sl->batch,
                               mo->key, mo->cfg.batch);
    if (sl->has_precision && sl->prec != prec)
        return cli_usage_error("confirm", "--layout: precision=%s, but the profile was measured in %s",
                               hw_precision_name(sl->prec), hw_precision_name(prec));
    if (sl->pp > mo->p->n_devices)
        return cli_usage_error("confirm", "--layout: pp=%d stages, but the profile has %d devices", sl->pp,
                               mo->p->n_devices);
    if (!sl->has_precision) step_layout_set_precision(sl, prec); /* the text names what runs: the profile's */
    o->m = sl->micro_batches;
    *layout_pl = calloc((size_t)mo->g->n_nodes, sizeof **layout_pl);
    if (!*layout_pl) return cli_report("confirm", PL_ERR_NOMEM, msg);
    if (step_layout_placement(sl, mo->g, *layout_pl, msg, sizeof msg) != PL_OK)
        return cli_usage_error("confirm", "--layout: %s", msg);
    return -1;
}

/* The head-to-head of placements (calib/confirm_session.h): prepared from
 * db (read only), which is then reopened for writing the timings. */
static int confirm_placements(confirm_opts *o, profile_db **dbp, const calib_model *mo, hw_precision prec,
                              const step_layout *sl, const int *layout_pl) {
    char msg[512] = "";
    calib_session_opts so;
    memset(&so, 0, sizeof so);
    so.cfg = o->cfg;
    so.cfg.label = o->label;
    so.so = o->so;
    so.cfg.sched = schedule_make(o->m, o->order);
    pl_status st = schedule_validate(&so.cfg.sched, mo->cfg.batch, msg, sizeof msg);
    if (st != PL_OK) return cli_report("confirm", st, msg);
    if (o->cap_text &&
        (st = pl_parse_mem_cap(o->cap_text, mo->p->devices[0].mem_bytes, &so.cfg.mem_cap, msg, sizeof msg)) != PL_OK)
        return cli_report("confirm", st, msg);
    int gpus[PLACEMENT_MAX_DEVICES], n_gpus = mo->p->n_devices;
    for (int i = 0; i < n_gpus; i++) gpus[i] = i;
    if (o->devices) {
        if ((st = calib_parse_int_list(o->devices, gpus, PLACEMENT_MAX_DEVICES, &n_gpus, msg, sizeof msg)) != PL_OK)
            return cli_report("confirm", st, msg);
        if (n_gpus != mo->p->n_devices)
            return cli_usage_error("confirm", "--devices lists %d devices but the profile has %d", n_gpus,
                                   mo->p->n_devices);
    }
    so.gpus = gpus;
    so.n_gpus = n_gpus;
    so.timer_kind = o->timer_kind;
    so.graphs = o->graphs;
    so.trace = o->trace;
    so.prec = prec;
    char llabel[CALIB_LABEL_LEN];
    if (layout_pl) {
        snprintf(llabel, sizeof llabel, "pp=%d %s", sl->pp, sl->l.n_stage_layers ? "stages" : "uniform");
        so.layout_placement = layout_pl;
        so.layout_label = llabel;
    }
    calib_session s;
    int rc = CLI_EXIT_OK;
    if ((st = calib_session_prepare(*dbp, mo, &so, &s, msg, sizeof msg)) != PL_OK) {
        if (st == PL_ERR_NO_DEVICE) {
            char m2[sizeof msg], *semi = strchr(msg, ';'); /* drop the engine's own hint */
            if (semi) *semi = 0;
            snprintf(m2, sizeof m2, "no usable GPU (%.300s); --timer cpu uses the engine's CPU backend", msg);
            memcpy(msg, m2, sizeof msg);
        }
        rc = cli_report("confirm", st, msg);
        goto out;
    }
    print_confirm_start(&s);
    profile_db_close(*dbp);
    *dbp = NULL;
    if ((st = profile_db_open(o->db_path, PROFILE_DB_WRITE, dbp, msg, sizeof msg)) != PL_OK ||
        (st = calib_session_run(&s, *dbp, mo, &so, msg, sizeof msg)) != PL_OK) {
        rc = cli_report("confirm", st, msg);
        goto out;
    }
    print_confirm(&s, mo, layout_pl ? sl->text : NULL);
out:
    calib_session_free(&s);
    return rc;
}

int cmd_confirm(int argc, char **argv) {
    confirm_opts o;
    memset(&o, 0, sizeof o);
    o.timeout_s = 30.0;
    o.timer_kind = PLACER_HAVE_CUDA ? "cuda" : NULL;
    o.m = 1;
    o.trace = 1;
    o.order = SCHED_GPIPE;
    calib_confirm_config_default(&o.cfg);
    calib_sides_options_default(&o.so);
    int rc = confirm_parse(argc, argv, &o);
    if (rc >= 0) return rc;
    char msg[512] = "";
    profile_db *db = NULL;
    calib_model mo = {0};
    step_layout *sls = NULL;
    int *layout_pl = NULL; /* --layout's pipeline split, a candidate of the side "layout" */
    /* read-only until everything (sides, timer) is ready, so that a failed
     * start leaves the file as it was; an older schema needs a write open */
    pl_status st = profile_db_open(o.db_path, PROFILE_DB_READ, &db, msg, sizeof msg);
    if (st == PL_ERR_INVALID) st = profile_db_open(o.db_path, PROFILE_DB_WRITE, &db, msg, sizeof msg);
    if (st != PL_OK) return cli_report("confirm", st, msg);
    hw_precision prec; /* the engine runs in the precision the profile was measured in */
    if ((st = calib_model_load(db, o.config, &mo, msg, sizeof msg)) != PL_OK ||
        (st = calib_db_precision(db, &prec, msg, sizeof msg)) != PL_OK) {
        rc = cli_report("confirm", st, msg);
        goto out;
    }
    if (o.n_layouts > 0) { /* several layouts, or one over several processes: time the layouts themselves */
        sls = calloc((size_t)o.n_layouts, sizeof *sls);
        if (!sls) {
            rc = cli_report("confirm", PL_ERR_NOMEM, msg);
            goto out;
        }
        int world_max = 1;
        for (int i = 0; i < o.n_layouts; i++) {
            if ((st = step_layout_resolve(o.layouts[i], &mo.cfg, !strcmp(o.timer_kind, "cuda"), &sls[i], msg,
                                          sizeof msg)) != PL_OK) {
                rc = cli_usage_error("confirm", "--layout %s: %s", o.layouts[i], msg);
                goto out;
            }
            if (sls[i].world > world_max) world_max = sls[i].world;
        }
        if (o.n_layouts > 1 || world_max > 1) {
            if ((rc = check_layouts(&o, &mo, prec, sls)) < 0) rc = confirm_layouts(&o, &db, &mo, sls);
            goto out;
        }
        if ((rc = layout_side(&o, &mo, prec, &sls[0], &layout_pl)) >= 0) goto out;
    }
    rc = confirm_placements(&o, &db, &mo, prec, sls, layout_pl);
out:
    free(sls);
    free(layout_pl);
    calib_model_free(&mo);
    profile_db_close(db);
    return rc;
}
