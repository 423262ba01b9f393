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
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib_db.h"
#include "coll_fit.h"
#include "cli.h"
#include "confirm.h"
#include "hw_timer.h"
#include "layout_confirm.h"
#include "placer_config.h"
#include "sides.h"
#include "stats.h"
#include "step_layout.h"
#include "timer.h"
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

/* ---- --layout with tp x dp > 1: one process per rank (calib/layout_confirm.h) ---- */

#define CONFIRM_MAX_LAYOUTS 16

typedef struct {
    int rounds, steps, warmup; /* confirmation rounds, per timing */
    uint64_t seed;
    double timeout_s;
    int cuda;                  /* 1: the CUDA backend, every rank on GPU 0 */
} layout_run_opts;

/* Time every layout in shuffled rounds on the CPU backend and print one row
 * per layout: measured mean +- sd of the rounds' medians against the layout
 * simulator's prediction on the CPU profile. The timings are stored as
 * measurements of purpose "confirm-layout" (extra: the layout, ranks,
 * round and prediction). db is open read-only and is reopened for writing. */
static int confirm_layouts(const char *db_path, profile_db **dbp, const calib_model *mo, step_layout *sl, int n,
                           const layout_run_opts *o) {
    char msg[512] = "";
    profile_db *db = *dbp;
    coll_measured *meas = calloc(1, sizeof *meas);
    calib_layout_prediction *pred = calloc((size_t)n, sizeof *pred);
    double *med = calloc((size_t)n * (size_t)o->rounds, sizeof *med);
    int rc = CLI_EXIT_OK;
    if (!meas || !pred || !med) {
        rc = cli_report("confirm", PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    calib_coll_fit_result fr;
    pl_status st = calib_coll_fit_db(db, NULL, meas, &fr, msg, sizeof msg);
    if (st != PL_OK) {
        rc = cli_usage_error("confirm", "--layout with tp x dp > 1 is predicted from the profile's collective curves: "
                                        "%s",
                             msg);
        goto out;
    }
    calib_coll_fit_free(&fr);
    meas->use_curves = 1;
    for (int i = 0; i < n; i++) {
        if ((st = calib_layout_predict(db, mo->key, mo->p, &mo->cfg, &sl[i].l, meas, &pred[i], msg, sizeof msg)) !=
            PL_OK) {
            rc = cli_report("confirm", st, msg);
            goto out;
        }
    }
    profile_db_close(db);
    *dbp = db = NULL;
    if ((st = profile_db_open(db_path, PROFILE_DB_WRITE, dbp, msg, sizeof msg)) != PL_OK) {
        rc = cli_report("confirm", st, msg);
        goto out;
    }
    db = *dbp;
    const char *backend = o->cuda ? "CUDA backend, every rank on GPU 0" : "CPU backend";
    fprintf(stderr, "placer confirm: %d layout%s, %d rounds of %d steps after %d warm-up, %s, one process per rank\n",
            n, n > 1 ? "s" : "", o->rounds, o->steps, o->warmup, backend);
    int order[CONFIRM_MAX_LAYOUTS];
    for (int i = 0; i < n; i++) order[i] = i;
    uint64_t rng = o->seed * 0x9E3779B97F4A7C15ull + 1;
    char pl_text[16384];
    int *zeros = calloc((size_t)mo->g->n_nodes, sizeof *zeros);
    if (!zeros) {
        rc = cli_report("confirm", PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    placement_format(zeros, mo->g->n_nodes, pl_text, sizeof pl_text);
    free(zeros);
    for (int r = 0; r < o->rounds; r++) {
        for (int i = n - 1; i > 0; i--) { /* a seeded Fisher-Yates shuffle per round */
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int k = (int)((rng >> 33) % (uint64_t)(i + 1)), tmp = order[i];
            order[i] = order[k];
            order[k] = tmp;
        }
        for (int q = 0; q < n; q++) {
            const int i = order[q];
            calib_layout_job j;
            memset(&j, 0, sizeof j);
            j.cfg = mo->cfg;
            j.tp = sl[i].tp;
            j.sp = sl[i].sp;
            j.dp = sl[i].dp;
            j.zero = sl[i].zero;
            j.micro_batches = sl[i].micro_batches;
            j.prec = sl[i].prec;
            j.cuda = o->cuda;
            j.gpu = 0;
            j.warmup = o->warmup;
            j.steps = o->steps;
            j.seed = o->seed;
            j.timeout_s = o->timeout_s;
            hw_timing t;
            if ((st = calib_layout_time(&j, &t, msg, sizeof msg)) != PL_OK) {
                char m2[sizeof msg + 128];
                snprintf(m2, sizeof m2, "layout %.200s: %s", sl[i].text, msg);
                rc = cli_report("confirm", st, m2);
                goto out;
            }
            med[(size_t)i * o->rounds + r] = t.median_us;
            char extra[1536];
            snprintf(extra, sizeof extra, "{\"layout\": \"%.1024s\", \"ranks\": %d, \"round\": %d, \"predicted_us\": %.3f}",
                     sl[i].text, sl[i].world, r, pred[i].step_us);
            profile_measurement pm = {.graph_key = mo->key, .placement = pl_text, .micro_batches = sl[i].micro_batches,
                                      .schedule = "1f1b", .step_us = t.median_us, .spread_us = t.sd_us,
                                      .purpose = "confirm-layout", .extra = extra};
            if ((st = profile_db_add_measurement(db, &pm, NULL)) != PL_OK) {
                rc = cli_report("confirm", st, profile_db_last_error(db));
                goto out;
            }
        }
    }
    printf("confirm --layout: graph %s, batch %d, %s, one process per rank; %d rounds of %d steps after %d warm-up, "
           "layouts shuffled each round\n",
           mo->key, mo->cfg.batch, backend, o->rounds, o->steps, o->warmup);
    printf("predicted: the layout simulator on a one-node cluster made from the profile (compute and memory rates "
           "fitted to its single-device steps, collectives from its curves: %s)\n\n",
           meas->source);
    printf("  %5s %22s %9s %13s %8s %14s  %s\n", "ranks", "measured mean +- sd ms", "se ms", "predicted ms", "error",
           "collectives", "layout");
    for (int i = 0; i < n; i++) {
        calib_summary s = calib_summarize(med + (size_t)i * o->rounds, o->rounds);
        const double err = 100.0 * (pred[i].step_us - s.mean) / s.mean;
        char coll[48];
        snprintf(coll, sizeof coll, "%d/%d/%d", pred[i].n_measured, pred[i].n_fitted, pred[i].n_model);
        printf("  %5d %14.3f +- %5.3f %9.3f %13.3f %+7.1f%% %14s  %s\n", sl[i].world, s.mean / 1e3, s.sd / 1e3,
               s.se / 1e3, pred[i].step_us / 1e3, err, coll, sl[i].text);
    }
    printf("  (collectives: how many of the simulator's collective times came from a measured curve / the fitted "
           "model / the cluster model)\n");
    printf("rates fitted to the profile's %d single-device step anchors: %.3g GFLOP/s, %.3g GB/s%s (%.1f us per "
           "kernel, not fitted); their relative error rms %.1f%%, max %.1f%%\n",
           pred[0].n_anchors, pred[0].flops / 1e9, pred[0].mem_bw / 1e9, pred[0].one_scale ? " (one common scale)" : "",
           pred[0].kernel_us, 100 * pred[0].anchor_rms, 100 * pred[0].anchor_max);
    {
    }
    printf("\nstored: %d timings (purpose confirm-layout)\n", n * o->rounds);
    printf("limits: the ranks share %s, which the simulator (one GPU per rank) does not model\n",
           o->cuda ? "GPU 0 and its collectives go through host memory" : "this host's cores");
out:
    free(meas);
    free(pred);
    free(med);
    return rc;
}

int cmd_confirm(int argc, char **argv) {
    const char *db_path = NULL, *devices = NULL, *cap_text = NULL, *label = NULL, *config = NULL;
    const char *layout_arg = NULL, *layout_args[CONFIRM_MAX_LAYOUTS];
    int n_layouts = 0, m_given = 0;
    double timeout_s = 30.0;
    const char *timer_kind = PLACER_HAVE_CUDA ? "cuda" : NULL;
    calib_confirm_config cfg;
    calib_confirm_config_default(&cfg);
    calib_sides_options so;
    calib_sides_options_default(&so);
    int have_run = 0, m = 1, trace = 1, graphs = 0;
    schedule_order order = SCHED_GPIPE;
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"run", required_argument, 0, 'r'},
                                         {"devices", required_argument, 0, 'D'},
                                         {"micro-batches", required_argument, 0, 'm'},
                                         {"schedule", required_argument, 0, 'S'},
                                         {"mem-cap", required_argument, 0, 'C'},
                                         {"selection-rounds", required_argument, 0, 'R'},
                                         {"confirm-rounds", required_argument, 0, 'K'},
                                         {"steps", required_argument, 0, 'k'},
                                         {"warmup", required_argument, 0, 'w'},
                                         {"seed", required_argument, 0, 's'},
                                         {"label", required_argument, 0, 'l'},
                                         {"top-k", required_argument, 0, 'T'},
                                         {"no-dp", no_argument, 0, 'P'},
                                         {"no-search", no_argument, 0, 'X'},
                                         {"timer", required_argument, 0, 't'},
                                         {"config", required_argument, 0, 'c'},
                                         {"no-trace", no_argument, 0, 'N'},
                                         {"graphs", no_argument, 0, 'G'},
                                         {"layout", required_argument, 0, 'L'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    char *end;
    char msg[512] = "";
    while ((c = getopt_long(argc, argv, "d:r:D:m:S:C:R:K:k:w:s:l:T:PXt:c:NGL:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': db_path = optarg; break;
        case 'r':
            so.run_id = strtoll(optarg, &end, 10);
            if (!*optarg || *end || so.run_id < 0) return cli_usage_error("confirm", "--run takes a run id, got '%s'", optarg);
            have_run = 1;
            break;
        case 'D': devices = optarg; break;
        case 'm': {
            pl_status st = schedule_parse_micro_batches(optarg, &m, msg, sizeof msg);
            if (st != PL_OK) return cli_report("confirm", st, msg);
            m_given = 1;
            break;
        }
        case 'S': {
            pl_status st = schedule_parse_order(optarg, &order, msg, sizeof msg);
            if (st != PL_OK) return cli_report("confirm", st, msg);
            break;
        }
        case 'C': cap_text = optarg; break;
        case 'R':
            if (parse_int("confirm", "--selection-rounds", optarg, 1, 1000, &cfg.selection_rounds)) return CLI_EXIT_USAGE;
            break;
        case 'K':
            if (parse_int("confirm", "--confirm-rounds", optarg, 2, 1000, &cfg.confirm_rounds)) return CLI_EXIT_USAGE;
            break;
        case 'k':
            if (parse_int("confirm", "--steps", optarg, 1, 10000, &cfg.steps)) return CLI_EXIT_USAGE;
            break;
        case 'w':
            if (parse_int("confirm", "--warmup", optarg, 0, 10000, &cfg.warmup)) return CLI_EXIT_USAGE;
            break;
        case 's':
            cfg.seed = strtoull(optarg, &end, 10);
            if (!*optarg || *end) return cli_usage_error("confirm", "--seed must be a non-negative integer");
            so.seed = cfg.seed;
            break;
        case 'l': label = optarg; break;
        case 'T':
            if (parse_int("confirm", "--top-k", optarg, 1, 64, &so.top_k)) return CLI_EXIT_USAGE;
            break;
        case 'P': so.dp = 0; break;
        case 'X': so.search = 0; break;
        case 't': timer_kind = optarg; break;
        case 'c': config = optarg; break;
        case 'N': trace = 0; break;
        case 'G': graphs = 1; break;
        case 'L':
            if (n_layouts == CONFIRM_MAX_LAYOUTS)
                return cli_usage_error("confirm", "at most %d --layout options", CONFIRM_MAX_LAYOUTS);
            layout_args[n_layouts++] = optarg;
            layout_arg = layout_args[0];
            break;
        case 'h': confirm_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("confirm", "unknown or incomplete option '%s'; see placer confirm --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("confirm", "unexpected argument '%s'; see placer confirm --help", argv[optind]);
    if (!db_path) return cli_usage_error("confirm", "--db FILE is required");
    if (!have_run && !n_layouts) return cli_usage_error("confirm", "--run RUN is required (0 for baselines only)");
    if (!timer_kind || (!PLACER_HAVE_CUDA && !strcmp(timer_kind, "cuda"))) /* not the engine's --cpu hint */
        return cli_usage_error("confirm", "this build has no CUDA engine: use --timer cpu or --timer synthetic");
    if (strcmp(timer_kind, "cuda") && strcmp(timer_kind, "cpu") && strcmp(timer_kind, "synthetic"))
        return cli_usage_error("confirm", "--timer must be cuda, cpu or synthetic, got '%s'", timer_kind);
    if (layout_arg && m_given)
        return cli_usage_error("confirm", "--layout sets the micro-batches; leave out --micro-batches");

    int rc = CLI_EXIT_OK;
    profile_db *db = NULL;
    calib_model mo = {0};
    calib_confirm *cf = NULL;
    calib_hw_timer *hw = NULL;
    calib_sim_timer *syn = NULL;
    sim_ctx *ctx = NULL;
    calib_timer t = {0};
    step_layout sl, *sls = NULL;
    int *layout_pl = NULL; /* --layout's pipeline split, a candidate of the side "layout" */
    /* read-only until everything (sides, timer) is ready, so that a failed
     * start leaves the file as it was; an older schema needs a write open */
    pl_status st = profile_db_open(db_path, PROFILE_DB_READ, &db, msg, sizeof msg);
    if (st == PL_ERR_INVALID) st = profile_db_open(db_path, PROFILE_DB_WRITE, &db, msg, sizeof msg);
    if (st != PL_OK) return cli_report("confirm", st, msg);
#define FAIL(s_)                                  \
    do {                                          \
        rc = cli_report("confirm", (s_), msg);    \
        goto out;                                 \
    } while (0)
    if ((st = calib_model_load(db, config, &mo, msg, sizeof msg)) != PL_OK) FAIL(st);
    hw_precision prec; /* the engine runs in the precision the profile was measured in */
    if ((st = calib_db_precision(db, &prec, msg, sizeof msg)) != PL_OK) FAIL(st);
    if (n_layouts > 0) { /* several layouts, or one over several processes: time the layouts themselves */
        sls = calloc((size_t)n_layouts, sizeof *sls);
        if (!sls) FAIL(PL_ERR_NOMEM);
        int world_max = 1;
        for (int i = 0; i < n_layouts; i++) {
            if ((st = step_layout_resolve(layout_args[i], &mo.cfg, !strcmp(timer_kind, "cuda"), &sls[i], msg,
                                          sizeof msg)) != PL_OK) {
                rc = cli_usage_error("confirm", "--layout %s: %s", layout_args[i], msg);
                goto out;
            }
            if (sls[i].world > world_max) world_max = sls[i].world;
        }
        if (n_layouts > 1 || world_max > 1) {
            for (int i = 0; i < n_layouts; i++) {
                step_layout *q = &sls[i];
                const char *lt = layout_args[i];
                if (!strcmp(timer_kind, "synthetic")) {
                    rc = cli_usage_error("confirm", "--layout %s: tp x dp = %d processes; with --timer synthetic "
                                                    "confirm times placements in one process; --timer cpu times layouts "
                                                    "(or --timer cuda), one process per rank", lt, q->world);
                    goto out;
                }
                if (!strcmp(timer_kind, "cuda") && (q->has_precision ? q->prec : prec) == HW_PREC_BF16) {
                    rc = cli_usage_error("confirm", "--layout %s: the engine's tp and dp run fp32 / tf32 on CUDA, not "
                                                    "bf16; use precision=tf32", lt);
                    goto out;
                }
                if (q->batch != mo.cfg.batch) {
                    rc = cli_usage_error("confirm", "--layout %s: gbs=%d, but the profile's graph %s has a batch of %d",
                                         lt, q->batch, mo.key, mo.cfg.batch);
                    goto out;
                }
                if (q->has_precision && q->prec != prec) {
                    rc = cli_usage_error("confirm", "--layout %s: precision=%s, but the profile was measured in %s", lt,
                                         hw_precision_name(q->prec), hw_precision_name(prec));
                    goto out;
                }
                if (q->pp > 1) {
                    rc = cli_usage_error("confirm", "--layout %s: pp=%d: a rank runs its pipeline stages one after "
                                                    "another on the CPU backend, which the layout simulator does not "
                                                    "model; use pp=1 with tp x dp > 1", lt, q->pp);
                    goto out;
                }
                if (!q->has_precision) step_layout_set_precision(q, prec);
            }
            if (so.run_id > 0 || devices || cap_text || graphs) {
                rc = cli_usage_error("confirm", "--layout with tp x dp > 1 times only the layouts: leave out --run, "
                                                "--devices, --mem-cap and --graphs");
                goto out;
            }
            if (cfg.steps > 64) {
                rc = cli_usage_error("confirm", "--steps %d: a layout over processes is timed in at most 64 steps",
                                     cfg.steps);
                goto out;
            }
            layout_run_opts lo = {cfg.confirm_rounds, cfg.steps, cfg.warmup, cfg.seed, timeout_s,
                                  !strcmp(timer_kind, "cuda")};
            rc = confirm_layouts(db_path, &db, &mo, sls, n_layouts, &lo);
            goto out;
        }
        if (!have_run) {
            rc = cli_usage_error("confirm", "--run RUN is required (0 for baselines only)");
            goto out;
        }
        sl = sls[0];
        if (sl.batch != mo.cfg.batch) {
            rc = cli_usage_error("confirm", "--layout: gbs=%d, but the profile's graph %s has a batch of %d", sl.batch,
                                 mo.key, mo.cfg.batch);
            goto out;
        }
        if (sl.has_precision && sl.prec != prec) {
            rc = cli_usage_error("confirm", "--layout: precision=%s, but the profile was measured in %s",
                                 hw_precision_name(sl.prec), hw_precision_name(prec));
            goto out;
        }
        if (sl.pp > mo.p->n_devices) {
            rc = cli_usage_error("confirm", "--layout: pp=%d stages, but the profile has %d devices", sl.pp,
                                 mo.p->n_devices);
            goto out;
        }
        if (!sl.has_precision) step_layout_set_precision(&sl, prec); /* the text names what runs: the profile's */
        m = sl.micro_batches;
        layout_pl = calloc((size_t)mo.g->n_nodes, sizeof *layout_pl);
        if (!layout_pl) FAIL(PL_ERR_NOMEM);
        if ((st = step_layout_placement(&sl, mo.g, layout_pl, msg, sizeof msg)) != PL_OK) {
            rc = cli_usage_error("confirm", "--layout: %s", msg);
            goto out;
        }
    }
    cfg.sched = schedule_make(m, order);
    if ((st = schedule_validate(&cfg.sched, mo.cfg.batch, msg, sizeof msg)) != PL_OK) FAIL(st);
    if (cap_text &&
        (st = pl_parse_mem_cap(cap_text, mo.p->devices[0].mem_bytes, &cfg.mem_cap, msg, sizeof msg)) != PL_OK)
        FAIL(st);
    int gpus[PLACEMENT_MAX_DEVICES], n_gpus = mo.p->n_devices;
    for (int i = 0; i < n_gpus; i++) gpus[i] = i;
    if (devices) {
        if ((st = calib_parse_int_list(devices, gpus, PLACEMENT_MAX_DEVICES, &n_gpus, msg, sizeof msg)) != PL_OK) FAIL(st);
        if (n_gpus != mo.p->n_devices) {
            rc = cli_usage_error("confirm", "--devices lists %d devices but the profile has %d", n_gpus, mo.p->n_devices);
            goto out;
        }
    }
    sim_params prm;
    int n_cal = 0;
    if ((st = calib_db_load_params(db, mo.key, &prm, &n_cal, msg, sizeof msg)) != PL_OK) FAIL(st);
    if ((st = calib_confirm_create(mo.g->n_nodes, mo.p->n_devices, &cf)) != PL_OK) FAIL(st);
    calib_sides_info info;
    if ((st = calib_sides_add(cf, db, &mo, &cfg.sched, cfg.mem_cap, &prm, &so, &info, msg, sizeof msg)) != PL_OK)
        FAIL(st);
    if (layout_pl) { /* the layout's pipeline split competes as its own side */
        char llabel[CALIB_LABEL_LEN];
        snprintf(llabel, sizeof llabel, "pp=%d %s", sl.pp, sl.l.n_stage_layers ? "stages" : "uniform");
        if ((st = calib_confirm_add(cf, "layout", llabel, layout_pl, NULL, msg, sizeof msg)) != PL_OK) FAIL(st);
    }
    if ((st = sim_ctx_create(mo.g, mo.p, m, &ctx)) != PL_OK) FAIL(st);
    if ((st = calib_confirm_predict(cf, ctx, &cfg.sched, cfg.mem_cap, &prm, msg, sizeof msg)) != PL_OK) FAIL(st);
    if (!strcmp(timer_kind, "synthetic")) {
        sim_params truth = prm; /* the "hardware" is the simulator with some extra cost per step */
        truth.step_fixed_us += 100.0;
        truth.launch_overhead_us += 1.0;
        if ((st = calib_sim_timer_create(mo.g, mo.p, &truth, 0.01, cfg.seed + 1000, m, &syn, &t)) != PL_OK) FAIL(st);
    } else if ((st = calib_hw_timer_create(timer_kind, mo.g, gpus, n_gpus, cfg.seed, graphs, prec, &hw, &t, msg, sizeof msg)) != PL_OK) {
        if (st == PL_ERR_NO_DEVICE) {
            char m2[sizeof msg], *semi = strchr(msg, ';'); /* drop the engine's own hint */
            if (semi) *semi = 0;
            snprintf(m2, sizeof m2, "no usable GPU (%.300s); --timer cpu uses the engine's CPU backend", msg);
            memcpy(msg, m2, sizeof msg);
        }
        FAIL(st);
    }
    char lbuf[64];
    if (!label) snprintf(lbuf, sizeof lbuf, "run %lld", (long long)so.run_id);
    cfg.label = label ? label : lbuf;
    cfg.graph_key = mo.key;
    cfg.run_id = so.run_id;
    char capbuf[32] = "none";
    if (cfg.mem_cap > 0) pl_format_bytes((double)cfg.mem_cap, capbuf, sizeof capbuf);
    fprintf(stderr, "placer confirm: %d candidates over %d sides (rl %d%s, single %d, human %d, dp %d, search %d %s); "
                    "%d selection rounds, then %d confirmation rounds of %d steps after %d warm-up, %s timer%s%s\n",
            cf->n_cand, cf->n_sides, info.n_added[0], info.rl_from_checkpoint ? " from checkpoint" : " from samples",
            info.n_added[1], info.n_added[2], info.n_added[3], info.n_added[4], info.search_method,
            cfg.selection_rounds, cfg.confirm_rounds, cfg.steps, cfg.warmup, t.name, hw ? " in " : "",
            hw ? hw_precision_name(calib_hw_timer_precision(hw)) : "");
    profile_db_close(db);
    db = NULL;
    if ((st = profile_db_open(db_path, PROFILE_DB_WRITE, &db, msg, sizeof msg)) != PL_OK) FAIL(st);
    if ((st = calib_confirm_run(cf, &t, &cfg, db, msg, sizeof msg)) != PL_OK) FAIL(st);
    int64_t cid = 0;
    if ((st = calib_db_save_confirm(db, cf, &cfg, t.name, &cid, msg, sizeof msg)) != PL_OK) FAIL(st);
    int win = calib_confirm_winner(cf);
    int traced = 0;
    if (hw && win >= 0 && trace) { /* one traced step of the winner, kept in the database for the report */
        const calib_candidate *k = &cf->cands[cf->sides[win].pick];
        char *json = NULL, ptext[4096];
        placement_format(k->placement, mo.g->n_nodes, ptext, sizeof ptext);
        st = calib_hw_timer_trace(hw, k->placement, &cfg.sched, cfg.mem_cap, cfg.warmup, &json, msg, sizeof msg);
        if (st == PL_OK) st = calib_db_save_trace(db, cid, cf->sides[win].name, ptext, json, msg, sizeof msg);
        free(json);
        if (st != PL_OK) FAIL(st);
        traced = 1;
    }

    printf("confirm %s: m=%d %s, cap %s, graph %s; simulator %s\n", cfg.label, m, schedule_order_name(order), capbuf,
           mo.key, n_cal ? "calibrated" : "neutral (not calibrated)");
    if (layout_arg) printf("layout %s: its pipeline split is the side 'layout'\n", sl.text);
    printf("%d selection rounds over %d candidates, %d confirmation rounds of the picks (%d steps each after %d "
           "warm-up); only confirmation rounds below\n\n",
           cfg.selection_rounds, cf->n_cand, cfg.confirm_rounds, cfg.steps, cfg.warmup);
    printf("  %-8s %-32s %9s %20s %9s %12s\n", "side", "pick", "cands/OOM", "mean +- sd (ms)", "se (ms)",
           "predicted");
    for (int s = 0; s < cf->n_sides; s++) {
        const calib_side *sd = &cf->sides[s];
        int n_oom = 0;
        for (int i = 0; i < cf->n_cand; i++) n_oom += cf->cands[i].side == s && cf->cands[i].oom;
        char cands[16], conf[48] = "OOM", se[16] = "-", pred[24] = "-";
        snprintf(cands, sizeof cands, "%d/%d", sd->n_cand, n_oom);
        const calib_candidate *k = sd->pick >= 0 ? &cf->cands[sd->pick] : NULL;
        if (k && sd->summary.n > 0) {
            snprintf(conf, sizeof conf, "%.3f +- %.3f", sd->summary.mean / 1000, sd->summary.sd / 1000);
            snprintf(se, sizeof se, "%.3f", sd->summary.se / 1000);
        }
        if (k) snprintf(pred, sizeof pred, "%.3f%s", k->pred_us / 1000, k->pred_oom ? " OOM" : "");
        printf("  %-8s %-32.32s %9s %20s %9s %12s%s\n", sd->name, k ? k->label : "-", cands, conf, se, pred,
               s == win ? "  <- fastest" : "");
    }
    if (win >= 0) {
        printf("\ndifference to the fastest side (%s), in standard errors (Welch):\n", cf->sides[win].name);
        for (int s = 0; s < cf->n_sides; s++) {
            if (s == win || cf->sides[s].summary.n == 0) continue;
            calib_diff d = calib_welch(cf->sides[s].summary, cf->sides[win].summary);
            printf("  %-8s %+8.3f ms (%+.1f%%), %+.1f se, dof %.1f\n", cf->sides[s].name, d.diff / 1000,
                   100.0 * d.diff / cf->sides[win].summary.mean, d.z, d.dof);
        }
    }
    printf("\nstored: %d timings (purposes confirm-select, confirm), confirmation %lld%s\n", cf->n_timings,
           (long long)cid, traced ? ", a measured trace of the fastest side" : "");
#undef FAIL
out:
    free(sls);
    free(layout_pl);
    sim_ctx_destroy(ctx);
    calib_hw_timer_destroy(hw);
    calib_sim_timer_destroy(syn);
    calib_confirm_destroy(cf);
    calib_model_free(&mo);
    profile_db_close(db);
    return rc;
}
