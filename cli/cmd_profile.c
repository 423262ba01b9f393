/*
 * cmd_profile.c: `placer profile` writes a profile database; `placer profile
 * show` prints one (profile_show.c); `compare` and `check` read measured
 * ones back.
 *
 *   placer profile --from-spec NAME --db FILE   roofline profile, no GPU needed
 *   placer profile --db FILE --devices 0,1      measure the hardware (CUDA engine)
 *   placer profile --db FILE --cpu N            measure the CPU reference backend (CI)
 *   placer profile show [--db FILE] [--json]    machine, links, node costs, totals
 *   placer profile compare --db A --db B        run-to-run variation of node times
 *   placer profile check [--db FILE]            node sums against whole steps
 *   placer profile node-memory --db FILE        node memory rows against this engine's
 *                                               (profile_node_memory.c)
 *
 * Option parsing is shared by both writing modes (profile_opts); measuring
 * runs the profiler (profile/profiler.h), which is resumable: a re-run
 * measures only what the file lacks, --force measures everything again.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dist_group.h"
#include "dist_mpi.h"
#include "graph.h"
#include "launcher.h"
#include "hw.h"
#include "placement.h"
#include "placer_config.h"
#include "profile_data.h"
#include "probe.h"
#include "profiler.h"
#include "spec.h"
#include "store.h"
#include "util.h"

#define MAX_MB_SIZES 32

/* What `placer profile` (the writing modes) was asked to do. */
typedef struct {
    const char *db_path;   /* --db, required */
    const char *config;    /* --config, "default" when not given */
    const char *from_spec; /* --from-spec NAME, NULL for hardware profiling */
    const char *devices;   /* --devices list (hardware profiling), NULL when not given */
    int portable;          /* --portable: leave the file in rollback-journal mode */
    int cpu;               /* --cpu N: CPU reference backend with N devices (0: GPUs) */
    int force;             /* --force: re-measure what the file already holds */
    int verbose;           /* --verbose: one line per measured unit */
    int reps;              /* --reps: timed repetitions per node probe (0: default) */
    int64_t link_max;      /* --link-max-bytes (0: backend default) */
    const char *machine;   /* --machine NAME (NULL: from the devices) */
    const char *precision; /* --precision fp32|tf32|bf16 (hardware profiling; NULL: tf32) */
    int coll_ranks;        /* --collectives N: collective curves over N ranks (0: none) */
    int64_t coll_max;      /* --collective-max-bytes (0: 64 MiB) */
    int coll_reps;         /* --collective-reps (0: default) */
    gpt_config cfg;        /* parsed --config */
    int mb_sizes[MAX_MB_SIZES]; /* parsed --micro-batch-sizes, ascending */
    int n_mb;              /* entries in mb_sizes */
} profile_opts;

static void profile_usage(FILE *f) {
    char names[256];
    spec_names(names, sizeof names);
    fprintf(f,
            "usage: placer profile --from-spec NAME --db FILE [--config CFG] [--micro-batch-sizes LIST]\n"
            "                      [--portable]\n"
            "       placer profile --db FILE [--devices LIST | --cpu N] [--config CFG] [--micro-batch-sizes LIST]\n"
            "                      [--machine NAME] [--precision fp32|tf32|bf16] [--force] [--reps N]\n"
            "                      [--link-max-bytes SIZE] [--collectives N [--collective-max-bytes SIZE]\n"
            "                      [--collective-reps R]] [--portable] [--verbose]\n"
            "       placer profile show [--db FILE] [--config CFG] [--device N] [--json]\n"
            "       placer profile compare --db A --db B [--config CFG] [--min-us US]\n"
            "       placer profile check [--db FILE] [--config CFG]\n"
            "       placer profile node-memory --db FILE [--config CFG] [--write [--portable]] [--json]\n\n"
            "Writes a profile database: every node's forward, backward and optimizer time per\n"
            "device and micro-batch size, node memory, and a transfer curve per device pair.\n"
            "The simulator, search and training read it; no GPU is needed after this step.\n\n"
            "  --from-spec NAME        build the profile from a machine description, without a GPU\n"
            "                          (%s)\n"
            "  --db FILE               the profile database to write (created when missing; a file\n"
            "                          holding another machine is refused)\n"
            "  --config CFG            graph config: default, gpt12 or tiny, with key=value overrides\n"
            "  --micro-batch-sizes L   comma-separated sizes to profile (default: every divisor of\n"
            "                          the batch, e.g. 16,8,4,2,1)\n"
            "  --devices LIST          GPUs to measure, e.g. 0,1 (default 0; needs the CUDA engine)\n"
            "  --cpu N                 measure N virtual devices of the CPU reference backend instead\n"
            "  --machine NAME          machine name to record (default: from the devices, e.g. h200x2)\n"
            "  --precision P           the engine's precision for every measurement: fp32, tf32 (default)\n"
            "                          or bf16 (mixed, hw/exec/hw.h); recorded in the file, and a file\n"
            "                          measured in another precision is refused\n"
            "  --force                 measure again what the file already holds (a re-run without\n"
            "                          it measures only what is missing, e.g. after a kill)\n"
            "  --reps N                timed repetitions per node probe (default 60; median kept)\n"
            "  --link-max-bytes SIZE   largest transfer of the link sweep (default 1GiB on GPUs,\n"
            "                          16MiB on the CPU backend; the sweep starts at 4 KiB)\n"
            "  --collectives N         also measure collective curves over N processes of this host\n"
            "                          (the fork launcher's sockets, as placer step --procs uses):\n"
            "                          all-reduce, all-gather and reduce-scatter from 4 B to 64 MiB\n"
            "                          by powers of 4 (nccl-tests buffer sizes), the median of\n"
            "                          the slowest rank's time over the repetitions after warm-up;\n"
            "                          placer profile show prints them with bus bandwidth\n"
            "  --collective-max-bytes SIZE  largest collective buffer (default 64MiB)\n"
            "  --collective-reps R     timed collectives per size (default 15, after 3 warm-up)\n"
            "                          Under mpirun (mpirun -np N placer profile --db FILE --collectives N)\n"
            "                          only the collectives are measured, over MPI, into a file that\n"
            "                          already holds its machine\n"
            "  --verbose               one line per measured unit with its repetition figures\n"
            "  --portable              leave the file in rollback-journal mode, so that it opens\n"
            "                          read-only anywhere (for files shipped in data/)\n\n"
            "Measuring writes each finished unit (one transfer size, one whole step, one device's\n"
            "AdamW or one device and micro-batch size's node times) in its own transaction.\n"
            "See placer profile show --help, compare --help, check --help and node-memory --help for\n"
            "reading profiles.\n",
            names);
}

/* Parse "16,8,4,2,1" into ascending unique sizes. Exit code 0 or 2 (message printed). */
static int parse_mb_sizes(const char *text, int batch, int *out, int *n_out) {
    int n = 0;
    const char *p = text;
    if (!*p) return cli_usage_error("profile", "--micro-batch-sizes is empty; give e.g. 16,8,4,2,1");
    for (;;) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ','))
            return cli_usage_error("profile", "--micro-batch-sizes '%s': '%.*s' is not a positive integer", text,
                                   (int)strcspn(p, ","), p);
        if (v < 1 || v > batch)
            return cli_usage_error("profile", "--micro-batch-sizes: %ld is outside 1..%d (the batch)", v, batch);
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= out[i] == (int)v;
        if (!dup) {
            if (n == MAX_MB_SIZES) return cli_usage_error("profile", "--micro-batch-sizes: at most %d sizes", MAX_MB_SIZES);
            out[n++] = (int)v;
        }
        if (!*end) break;
        p = end + 1;
    }
    for (int i = 1; i < n; i++) /* insertion sort, ascending */
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            int t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    *n_out = n;
    return CLI_EXIT_OK;
}

/* ---- writing: from a spec ------------------------------------------------- */

static int profile_from_spec(const profile_opts *o) {
    const machine_spec *s = spec_find(o->from_spec);
    if (!s) {
        char names[256];
        spec_names(names, sizeof names);
        return cli_usage_error("profile", "unknown spec '%s'; known specs: %s", o->from_spec, names);
    }
    char msg[1024] = "";
    graph *g = NULL;
    profile_data *p = NULL;
    profile_db *db = NULL;
    int code = CLI_EXIT_OK;
    pl_status st = graph_build_gpt(&o->cfg, &g, msg, sizeof msg);
    if (st != PL_OK) return cli_report("profile", st, msg);
    if ((st = spec_profile_build(s, g, o->mb_sizes, o->n_mb, &p)) != PL_OK) {
        code = cli_report("profile", st, "building the spec profile failed");
        goto out;
    }
    /* a file of another machine is refused on a read-only open: a write open
     * would already switch a portable file to WAL */
    if ((st = profile_db_open(o->db_path, PROFILE_DB_READ, &db, msg, sizeof msg)) == PL_OK) {
        profile_db_machine_row mr;
        if (profile_db_machine(db, &mr) == PL_OK && strcmp(mr.name, s->name) != 0) {
            code = cli_usage_error("profile", "%s holds machine '%s', not '%s'; a profile database holds one machine: "
                                              "use another file", o->db_path, mr.name, s->name);
            goto out;
        }
        profile_db_close(db);
        db = NULL;
    } /* any other refusal (not SQLite, newer schema) comes from the write open
       * below, which checks before it writes; an empty SQLite file left by a
       * run killed before its schema was written is taken over there */
    if ((st = profile_db_open(o->db_path, PROFILE_DB_CREATE, &db, msg, sizeof msg)) != PL_OK) {
        code = cli_report("profile", st, msg);
        goto out;
    }
    /* one transaction: profile, machine description and link kinds together */
    if ((st = profile_db_begin(db)) != PL_OK) goto out_db_error;
    if ((st = profile_db_save_profile(db, &o->cfg, p, msg, sizeof msg)) != PL_OK) {
        profile_db_rollback(db);
        code = cli_report("profile", st, msg);
        goto out;
    }
    profile_machine_info info = {.name = s->name, .source = "spec", .topology = s->description};
    if ((st = profile_db_put_machine(db, &info)) != PL_OK) goto out_rollback;
    for (int a = 0; a < s->n_devices; a++)
        for (int b = 0; b < s->n_devices; b++)
            if (a != b &&
                (st = profile_db_put_link(db, s->name, a, b, spec_link_at(s, a, b).latency_us,
                                          spec_link_at(s, a, b).bandwidth, spec_link_at(s, a, b).kind)) != PL_OK)
                goto out_rollback;
    if ((st = profile_db_commit(db)) != PL_OK) goto out_db_error;
    if (o->portable && (st = profile_db_make_portable(db, msg, sizeof msg)) != PL_OK) {
        code = cli_report("profile", st, msg);
        goto out;
    }
    double step = 0;
    int kb = profile_mb_index(p, o->cfg.batch);
    if (kb >= 0)
        for (int i = 0; i < p->n_nodes; i++)
            step += p->cost_us[profile_cost_index(p, 0, kb, i, PHASE_FWD)] +
                    p->cost_us[profile_cost_index(p, 0, kb, i, PHASE_BWD)] +
                    p->cost_us[profile_cost_index(p, 0, kb, i, PHASE_OPT)];
    printf("wrote spec profile %s (%s) for %s: %d devices, %d nodes, %d micro-batch sizes -> %s\n", s->name,
           s->description, p->graph_key, p->n_devices, p->n_nodes, p->n_mb, o->db_path);
    if (kb >= 0)
        printf("single-device step at batch %d (roofline): %.2f ms\n", o->cfg.batch, step / 1000.0);
    goto out;

out_rollback:
    profile_db_rollback(db);
out_db_error:
    code = cli_report("profile", st, profile_db_last_error(db));
out:
    profile_db_close(db);
    profile_data_destroy(p);
    graph_destroy(g);
    return code;
}

/* ---- writing: measuring the hardware -------------------------------------- */

/* Progress on stderr (a bar, only on a terminal), the --verbose unit lines,
 * and the test hook for kills in flight: with PLACER_PROFILE_TEST_KILL_AT=N
 * in the environment, the process SIGKILLs itself while the N-th measured
 * unit's transaction is open (half its rows written), as a crash would. */
typedef struct {
    int tty;        /* draw the bar */
    int verbose;    /* print unit lines on stdout */
    long kill_at;   /* 0: off */
    double last_us; /* last bar redraw */
    int drawn;      /* a bar is on the line */
} progress_ctx;

static int on_progress(void *ctx, const profiler_progress *p) {
    progress_ctx *c = ctx;
    if (p->stage == PROFILER_WRITING && c->kill_at > 0 && p->measured + 1 == c->kill_at) {
        fflush(stdout);
        raise(SIGKILL);
    }
    if (p->stage == PROFILER_DONE && c->verbose) {
        if (c->drawn) fputs("\r\033[K", stderr);
        c->drawn = 0;
        if (p->stats)
            printf("  %-26s kept %3d starved %3d%s  total %10.1f us  host %9.1f us  pad %9.1f us\n", p->label,
                   p->stats->kept, p->stats->starved, p->stats->unclean ? " (kept starved)" : "", p->stats->total_us,
                   p->stats->host_us, p->stats->pad_us);
        else
            printf("  %-26s done\n", p->label);
        fflush(stdout);
    }
    if (c->tty && p->stage != PROFILER_WRITING) {
        double now = pl_now_us();
        int last = p->index + 1 == p->total && p->stage != PROFILER_START;
        if (last || now - c->last_us > 100e3 || p->stage == PROFILER_START) {
            int done = p->index + (p->stage == PROFILER_START ? 0 : 1), width = 30;
            int fill = p->total > 0 ? done * width / p->total : width;
            fprintf(stderr, "\r\033[K[%.*s%*s] %d/%d %s", fill, "##############################", width - fill, "",
                    done, p->total, p->label);
            fflush(stderr);
            c->last_us = now;
            c->drawn = 1;
        }
    }
    return 0;
}

/* "0,1" -> GPU ordinals; count, or -1 after printing the error. */
static int parse_gpu_list(const char *text, int *gpus) {
    int n = placement_count_fields(text);
    if (n < 1 || n > HW_MAX_DEVICES) {
        cli_usage_error("profile", "--devices needs 1 to %d GPU ordinals, e.g. 0,1", HW_MAX_DEVICES);
        return -1;
    }
    char msg[256];
    if (placement_parse(text, n, 1 << 20, gpus, msg, sizeof msg) != PL_OK) {
        cli_usage_error("profile", "--devices: %s", msg);
        return -1;
    }
    return n;
}

/* The sanity check: per device and micro-batch size, the sum of the node
 * costs (forward + backward + AdamW) against the whole single-device step
 * measured on the engine. Prints nothing when the file has no anchors. */
static void print_sanity(profile_db *db, const profile_data *p) {
    int header = 0;
    for (int d = 0; d < p->n_devices; d++)
        for (int k = p->n_mb - 1; k >= 0; k--) {
            int mb = p->mb_sizes[k];
            double f, b, o, step, spread;
            if (profile_node_sums(p, d, mb, &f, &b, &o) != PL_OK) continue;
            if (profile_db_get_step_anchor(db, p->graph_key, d, mb, &step, &spread) != PL_OK) continue;
            if (!header) {
                printf("sanity check: sum of node costs (fwd + bwd + AdamW) vs the whole single-device step\n"
                       "  %3s %4s %11s %11s %10s %11s %11s %9s %7s\n",
                       "dev", "mb", "fwd sum", "bwd sum", "adamw", "node sum", "step", "step iqr", "sum/step");
                header = 1;
            }
            double sum = f + b + o;
            printf("  %3d %4d %8.1f us %8.1f us %7.1f us %8.1f us %8.1f us %6.1f us %7.3f\n", d, mb, f, b, o, sum, step,
                   spread, step > 0 ? sum / step : NAN);
        }
    if (!header) printf("sanity check: the file holds no whole-step anchors\n");
}

static const char *const PHASE_NAMES[PHASE_COUNT] = {"fwd", "bwd", "adamw"};

static int profile_measure(const profile_opts *o) {
    hw_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.issue = HW_ISSUE_AUTO;
    hw_precision prec = HW_PREC_TF32;
    if (o->precision) {
        char pm[128];
        if (hw_precision_parse(o->precision, &prec, pm, sizeof pm) != PL_OK)
            return cli_usage_error("profile", "--precision: %s", pm);
    }
    eo.precision = prec;
    if (o->cpu) {
        eo.backend = HW_BACKEND_CPU;
        eo.n_devices = o->cpu;
    } else {
        eo.backend = HW_BACKEND_CUDA;
        eo.n_devices = parse_gpu_list(o->devices ? o->devices : "0", eo.gpus);
        if (eo.n_devices < 0) return CLI_EXIT_USAGE;
    }
    char msg[1024] = "";
    hw_engine *e = NULL;
    pl_status st = hw_engine_create(&eo, &e, msg, sizeof msg);
    if (st != PL_OK) {
        if (o->cpu) return cli_report("profile", st, msg);
        fprintf(stderr,
                "placer profile: hardware profiling needs the CUDA engine and a GPU: %s; use --from-spec NAME for a "
                "profile without a GPU\n",
                msg);
        return CLI_EXIT_FAIL;
    }
    profile_db *db = NULL;
    profile_data *p = NULL;
    int code = CLI_EXIT_OK;
    /* a file of another machine is refused on a read-only open: a write open
     * would already switch a portable file to WAL */
    if ((st = profile_db_open(o->db_path, PROFILE_DB_READ, &db, msg, sizeof msg)) == PL_OK) {
        profile_db_machine_row mr;
        hw_machine_info mi;
        char name[PROFILE_NAME_LEN];
        if (o->machine && *o->machine) snprintf(name, sizeof name, "%s", o->machine);
        else if (hw_probe_machine(e, &mi, msg, sizeof msg) == PL_OK)
            profiler_machine_name(mi.dev[0].name, mi.n_devices, name, sizeof name);
        else name[0] = 0;
        if (*name && profile_db_machine(db, &mr) == PL_OK && strcmp(mr.name, name) != 0) {
            code = cli_usage_error("profile", "%s holds machine '%s', not '%s'; a profile database holds one machine: "
                                              "use another file", o->db_path, mr.name, name);
            goto out;
        }
        char have[16] = "";
        if (profile_db_machine(db, &mr) == PL_OK && profile_db_precision(db, have, sizeof have) == PL_OK &&
            strcmp(have, hw_precision_name(prec)) != 0) {
            code = cli_usage_error("profile", "%s was measured in %s, not %s; a profile database holds one precision: "
                                              "use another file", o->db_path, have, hw_precision_name(prec));
            goto out;
        }
        profile_db_close(db);
        db = NULL;
    } /* any other refusal (not SQLite, newer schema) comes from the write open
       * below, which checks before it writes; an empty SQLite file left by a
       * run killed before its schema was written is taken over there */
    if ((st = profile_db_open(o->db_path, PROFILE_DB_CREATE, &db, msg, sizeof msg)) != PL_OK) {
        code = cli_report("profile", st, msg);
        goto out;
    }
    progress_ctx pc = {cli_stderr_is_tty(), o->verbose, 0, 0.0, 0};
    if ((st = profile_db_set_precision(db, hw_precision_name(prec))) != PL_OK) {
        code = cli_report("profile", st, profile_db_last_error(db));
        goto out;
    }
    const char *kill = getenv("PLACER_PROFILE_TEST_KILL_AT");
    if (kill && *kill) pc.kill_at = strtol(kill, NULL, 10);
    profiler_opts po = profiler_opts_default();
    po.machine = o->machine;
    po.mb_sizes = o->mb_sizes;
    po.n_mb = o->n_mb;
    po.force = o->force;
    if (o->reps > 0) po.nodes.reps = o->reps;
    po.link_max_bytes = o->link_max;
    po.progress = on_progress;
    po.progress_ctx = &pc;
    profiler_result r;
    st = profiler_run(e, db, &o->cfg, &po, &r, msg, sizeof msg);
    if (pc.drawn) fputs("\r\033[K", stderr);
    if (st == PL_ERR_INVALID) {
        code = cli_report("profile", st, msg);
        goto out;
    }
    if (st != PL_OK) {
        fprintf(stderr, "placer profile: %s (%d of %d units measured now, %d were already there; re-run to resume)\n",
                msg, r.units_measured, r.units_total, r.units_skipped);
        code = CLI_EXIT_FAIL;
        goto out;
    }
    printf("profiled %s for %s on %d device%s (%s, %s): %d units measured, %d already there, %d in all, in %.1f s -> "
           "%s\n",
           r.machine, r.graph_key, hw_engine_n_devices(e), hw_engine_n_devices(e) > 1 ? "s" : "",
           o->cpu ? "CPU reference backend" : "CUDA", hw_precision_name(prec), r.units_measured, r.units_skipped, r.units_total,
           r.wall_us / 1e6, o->db_path);
    printf("probe repetitions discarded for possible launch gaps: %d; units that had to keep some: %d\n",
           r.starved_reps, r.unclean_units);
    if (o->coll_ranks > 0) {
        profiler_coll_opts co = profiler_coll_opts_default();
        co.ranks = o->coll_ranks;
        if (o->coll_max > 0) co.max_bytes = o->coll_max;
        if (o->coll_reps > 0) co.reps = o->coll_reps;
        co.force = o->force;
        co.progress = on_progress;
        co.progress_ctx = &pc;
        pc.last_us = 0.0;
        profiler_result cr;
        fflush(stdout);
        st = profiler_collectives(db, r.machine, &co, &cr, msg, sizeof msg);
        if (pc.drawn) fputs("\r\033[K", stderr);
        pc.drawn = 0;
        if (st == PL_ERR_INVALID) {
            code = cli_report("profile", st, msg);
            goto out;
        }
        if (st != PL_OK) {
            fprintf(stderr, "placer profile: collectives: %s (%d of %d sizes measured now, %d were already there; "
                            "re-run to resume)\n", msg, cr.units_measured, cr.units_total, cr.units_skipped);
            code = CLI_EXIT_FAIL;
            goto out;
        }
        printf("collectives over %d ranks (sockets): %d points measured, %d already there, in %.1f s\n",
               co.ranks, cr.units_measured, cr.units_skipped, cr.wall_us / 1e6);
    }
    if ((st = profile_db_load_profile(db, &o->cfg, &p, NULL, msg, sizeof msg)) != PL_OK) {
        code = cli_report("profile", st, msg);
        goto out;
    }
    print_sanity(db, p);
    if (o->portable && (st = profile_db_make_portable(db, msg, sizeof msg)) != PL_OK) code = cli_report("profile", st, msg);
out:
    profile_data_destroy(p);
    profile_db_close(db);
    hw_engine_destroy(e);
    return code;
}

/* ---- under mpirun: the collective curves over MPI ----------------------------- */

/* One rank of `mpirun -np N placer profile --db FILE --collectives N`
 * (hw_launch_mpi): rank 0 opens the file (which must hold its machine
 * already) and tells the others whether it could; then every rank runs
 * the sweep and rank 0 writes it. */
static int coll_mpi_rank(dist_group *g, int rank, void *ctx, char *err, size_t errlen) {
    const profile_opts *o = ctx;
    profile_db *db = NULL;
    profile_db_machine_row mr;
    int ok = 1, rc = 1;
    char msg[1024] = "";
    memset(&mr, 0, sizeof mr);
    if (rank == 0) {
        pl_status st = profile_db_open(o->db_path, PROFILE_DB_WRITE, &db, msg, sizeof msg);
        if (st == PL_OK && profile_db_machine(db, &mr) != PL_OK) {
            snprintf(msg, sizeof msg, "%s holds no machine yet; profile it first without mpirun (placer profile --cpu N "
                                      "--db %s), then add its collectives under mpirun", o->db_path, o->db_path);
            st = PL_ERR_NOT_FOUND;
        }
        ok = st == PL_OK;
        if (!ok) snprintf(err, errlen, "%s", msg);
    }
    char bmsg[512] = "";
    if (dist_broadcast(g, &ok, sizeof ok, 0, bmsg, sizeof bmsg) != PL_OK) {
        snprintf(err, errlen, "%s", bmsg);
        goto out;
    }
    if (!ok) {
        if (rank) snprintf(err, errlen, "rank 0 could not open the database");
        goto out;
    }
    profiler_coll_opts co = profiler_coll_opts_default();
    if (o->coll_max > 0) co.max_bytes = o->coll_max;
    if (o->coll_reps > 0) co.reps = o->coll_reps;
    co.force = o->force;
    progress_ctx pc = {rank == 0 && cli_stderr_is_tty(), rank == 0 && o->verbose, 0, 0.0, 0};
    co.progress = rank == 0 ? on_progress : NULL;
    co.progress_ctx = &pc;
    profiler_result cr;
    pl_status st = profiler_collectives_group(g, db, rank == 0 ? mr.name : NULL, &co, &cr, err, errlen);
    if (pc.drawn) fputs("\r\033[K", stderr);
    if (st != PL_OK) goto out;
    if (rank == 0) {
        printf("collectives over %d ranks (%s): %d points measured, %d already there, in %.1f s -> %s\n",
               dist_size(g), dist_transport_name(g), cr.units_measured, cr.units_skipped, cr.wall_us / 1e6, o->db_path);
        fflush(stdout);
    }
    rc = 0;
out:
    profile_db_close(db);
    return rc;
}

static int profile_collectives_mpi(const profile_opts *o, int mpi_size) {
    if (!o->coll_ranks)
        return cli_usage_error("profile", "under mpirun placer profile measures only collective curves: give --db FILE "
                                          "--collectives %d", mpi_size);
    if (o->coll_ranks != mpi_size)
        return cli_usage_error("profile", "--collectives %d contradicts mpirun's %d ranks", o->coll_ranks, mpi_size);
    if (o->from_spec || o->devices || o->cpu || o->machine || o->precision || o->reps || o->link_max || o->portable)
        return cli_usage_error("profile", "under mpirun placer profile takes only --db, --collectives, "
                                          "--collective-max-bytes, --collective-reps, --force and --verbose");
    char msg[1024] = "";
    int rank = -1, rc = 0;
    pl_status st = hw_launch_mpi(30.0, coll_mpi_rank, (void *)o, &rank, &rc, msg, sizeof msg);
    if (st != PL_OK) return cli_report("profile", st, msg);
    return CLI_EXIT_OK;
}

/* ---- reading measured profiles back: compare and check ---------------------- */

static void compare_usage(FILE *f) {
    fprintf(f,
            "usage: placer profile compare --db A --db B [--config CFG] [--min-us US]\n\n"
            "Run-to-run variation between two profiles of the same graph and device count (e.g.\n"
            "the same machine profiled twice): for every node time of at least US microseconds in\n"
            "A (forward, backward at each micro-batch size both hold, and AdamW), |B - A| / A.\n"
            "Prints the cell count, median, 90th percentile and maximum per phase and overall, and\n"
            "the worst cell.\n\n"
            "  --db FILE     the two profiles, A first\n"
            "  --config CFG  which graph when a file holds several (default: the latest)\n"
            "  --min-us US   smallest time in A that is compared (default 50)\n");
}

static void check_usage(FILE *f) {
    fprintf(f,
            "usage: placer profile check [--db FILE] [--config CFG]\n\n"
            "The sanity check of a measured profile: per device and micro-batch size, the sum of\n"
            "the node costs (forward + backward + AdamW) against the whole single-device step the\n"
            "profiler measured on the engine; and each link's fitted latency and bandwidth.\n\n"
            "  --db FILE     the profile database (default: $PLACER_DB or the shipped profile)\n"
            "  --config CFG  which graph when the file holds several (default: the latest)\n");
}

/* Open path READ and load its profile (cfg may be NULL). Exit code. */
static int load_for(const char *cmd, const char *path, const gpt_config *cfg, profile_db **db, profile_data **p) {
    char msg[1024] = "";
    pl_status st = profile_db_open(path, PROFILE_DB_READ, db, msg, sizeof msg);
    if (st != PL_OK) return cli_report(cmd, st, msg);
    if ((st = profile_db_load_profile(*db, cfg, p, NULL, msg, sizeof msg)) != PL_OK) return cli_report(cmd, st, msg);
    return CLI_EXIT_OK;
}

static int profile_compare_cmd(int argc, char **argv) {
    const char *paths[2] = {NULL, NULL}, *config = NULL;
    int n_paths = 0;
    double min_us = 50.0;
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"config", required_argument, 0, 'c'},
                                         {"min-us", required_argument, 0, 'u'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "d:c:u:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            if (n_paths == 2) return cli_usage_error("profile compare", "give --db exactly twice");
            paths[n_paths++] = optarg;
            break;
        case 'c': config = optarg; break;
        case 'u': {
            char *end = NULL;
            errno = 0;
            min_us = strtod(optarg, &end);
            if (!*optarg || *end || errno || !(min_us >= 0) || !isfinite(min_us))
                return cli_usage_error("profile compare", "--min-us '%s' is not a time in microseconds", optarg);
            break;
        }
        case 'h': compare_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("profile compare", "unknown or incomplete option '%s'; see placer profile compare --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("profile compare", "unexpected argument '%s'", argv[optind]);
    if (n_paths != 2) return cli_usage_error("profile compare", "give --db exactly twice: --db A --db B");
    char msg[1024] = "";
    gpt_config cfg;
    if (config && gpt_config_parse(config, &cfg, msg, sizeof msg) != PL_OK)
        return cli_report("profile compare", PL_ERR_INVALID, msg);
    profile_db *db[2] = {NULL, NULL};
    profile_data *p[2] = {NULL, NULL};
    graph *g = NULL;
    int code = CLI_EXIT_OK;
    for (int i = 0; i < 2 && code == CLI_EXIT_OK; i++)
        code = load_for("profile compare", paths[i], config ? &cfg : NULL, &db[i], &p[i]);
    if (code != CLI_EXIT_OK) goto out;
    profile_compare_result all;
    pl_status st = profile_compare(p[0], p[1], min_us, -1, &all, msg, sizeof msg);
    if (st != PL_OK) {
        code = cli_report("profile compare", st, msg);
        goto out;
    }
    printf("run-to-run variation of per-node median times >= %.0f us: %s vs %s (%s, %s)\n", min_us, paths[1], paths[0],
           p[0]->machine, p[0]->graph_key);
    printf("  %-6s %6s %9s %9s %9s\n", "phase", "cells", "median", "p90", "max");
    for (int ph = 0; ph < PHASE_COUNT; ph++) {
        profile_compare_result r;
        profile_compare(p[0], p[1], min_us, ph, &r, NULL, 0);
        if (r.n == 0) printf("  %-6s %6d %9s %9s %9s\n", PHASE_NAMES[ph], 0, "-", "-", "-");
        else
            printf("  %-6s %6d %8.2f%% %8.2f%% %8.2f%%\n", PHASE_NAMES[ph], r.n, 100 * r.median_rel, 100 * r.p90_rel,
                   100 * r.max_rel);
    }
    if (all.n == 0) {
        printf("  %-6s %6d (no node time reaches %.0f us)\n", "all", 0, min_us);
        goto out;
    }
    printf("  %-6s %6d %8.2f%% %8.2f%% %8.2f%%\n", "all", all.n, 100 * all.median_rel, 100 * all.p90_rel,
           100 * all.max_rel);
    /* node names for the worst cell */
    char key_msg[256];
    profile_db_graph_info *gi = NULL;
    int n_gi = 0;
    const char *name = "?";
    if (profile_db_list_graphs(db[0], &gi, &n_gi) == PL_OK)
        for (int i = 0; i < n_gi; i++)
            if (!strcmp(gi[i].key, p[0]->graph_key) && graph_build_gpt(&gi[i].cfg, &g, key_msg, sizeof key_msg) == PL_OK)
                break;
    free(gi);
    if (g && all.worst_node >= 0 && all.worst_node < g->n_nodes) name = g->nodes[all.worst_node].name;
    if (all.worst_phase == PHASE_OPT)
        printf("worst: device %d node %d (%s) adamw: %.1f us vs %.1f us\n", all.worst_dev, all.worst_node, name,
               all.worst_a, all.worst_b);
    else
        printf("worst: device %d node %d (%s) %s at micro-batch %d: %.1f us vs %.1f us\n", all.worst_dev,
               all.worst_node, name, PHASE_NAMES[all.worst_phase], all.worst_mb, all.worst_a, all.worst_b);
out:
    graph_destroy(g);
    for (int i = 0; i < 2; i++) {
        profile_data_destroy(p[i]);
        profile_db_close(db[i]);
    }
    return code;
}

static int profile_check_cmd(int argc, char **argv) {
    const char *path = NULL, *config = NULL;
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"config", required_argument, 0, 'c'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "d:c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': path = optarg; break;
        case 'c': config = optarg; break;
        case 'h': check_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("profile check", "unknown or incomplete option '%s'; see placer profile check --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("profile check", "unexpected argument '%s'", argv[optind]);
    if (!path) path = cli_default_db();
    if (!path) return cli_usage_error("profile check", "no profile database found; give --db FILE or set PLACER_DB");
    char msg[1024] = "";
    gpt_config cfg;
    if (config && gpt_config_parse(config, &cfg, msg, sizeof msg) != PL_OK)
        return cli_report("profile check", PL_ERR_INVALID, msg);
    profile_db *db = NULL;
    profile_data *p = NULL;
    int code = load_for("profile check", path, config ? &cfg : NULL, &db, &p);
    if (code == CLI_EXIT_OK) {
        profile_db_machine_row m;
        if (profile_db_machine(db, &m) == PL_OK)
            printf("profile %s: %s (%s, written %s) for %s\n", path, m.name, m.source, m.created_at, p->graph_key);
        print_sanity(db, p);
        for (int a = 0; a < p->n_devices; a++)
            for (int b = 0; b < p->n_devices; b++) {
                if (a == b) continue;
                const profile_link *l = &p->links[a * p->n_devices + b];
                char kind[64] = "", bw[32];
                profile_db_link_kind(db, a, b, kind, sizeof kind);
                pl_format_bytes(l->bandwidth, bw, sizeof bw);
                printf("link %d -> %d (%s): latency %.1f us, bandwidth %s/s, %d points\n", a, b, kind[0] ? kind : "-",
                       l->latency_us, bw, l->n_points);
            }
    }
    profile_data_destroy(p);
    profile_db_close(db);
    return code;
}

/* ---- entry ------------------------------------------------------------------- */

int cmd_profile(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "show")) return cmd_profile_show(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "compare")) return profile_compare_cmd(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "check")) return profile_check_cmd(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "node-memory")) return cmd_profile_node_memory(argc - 1, argv + 1);

    profile_opts o = {.config = "default"};
    const char *mb_text = NULL;
    static const struct option opts[] = {{"from-spec", required_argument, 0, 's'},
                                         {"db", required_argument, 0, 'd'},
                                         {"config", required_argument, 0, 'c'},
                                         {"micro-batch-sizes", required_argument, 0, 'm'},
                                         {"devices", required_argument, 0, 'D'},
                                         {"portable", no_argument, 0, 'p'},
                                         {"cpu", required_argument, 0, 'C'},
                                         {"force", no_argument, 0, 'f'},
                                         {"machine", required_argument, 0, 'M'},
                                         {"precision", required_argument, 0, 'P'},
                                         {"reps", required_argument, 0, 'r'},
                                         {"link-max-bytes", required_argument, 0, 'L'},
                                         {"verbose", no_argument, 0, 'v'},
                                         {"collectives", required_argument, 0, 'N'},
                                         {"collective-max-bytes", required_argument, 0, 'X'},
                                         {"collective-reps", required_argument, 0, 'R'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    char emsg[256] = "";
    while ((c = getopt_long(argc, argv, "s:d:c:m:D:pC:fM:P:r:L:vN:X:R:h", opts, NULL)) != -1) {
        switch (c) {
        case 's': o.from_spec = optarg; break;
        case 'd': o.db_path = optarg; break;
        case 'c': o.config = optarg; break;
        case 'm': mb_text = optarg; break;
        case 'D': o.devices = optarg; break;
        case 'p': o.portable = 1; break;
        case 'C':
        case 'r': {
            char *end = NULL;
            errno = 0;
            long v = strtol(optarg, &end, 10);
            long hi = c == 'C' ? HW_MAX_DEVICES : 100000;
            if (!*optarg || *end || errno || v < 1 || v > hi)
                return cli_usage_error("profile", "--%s must be an integer in [1, %ld], got '%s'",
                                       c == 'C' ? "cpu" : "reps", hi, optarg);
            if (c == 'C') o.cpu = (int)v;
            else o.reps = (int)v;
            break;
        }
        case 'f': o.force = 1; break;
        case 'M':
            if (!*optarg || strlen(optarg) >= PROFILE_NAME_LEN)
                return cli_usage_error("profile", "--machine needs a name of 1 to %d characters", PROFILE_NAME_LEN - 1);
            o.machine = optarg;
            break;
        case 'L':
            if (pl_parse_bytes(optarg, &o.link_max, emsg, sizeof emsg) != PL_OK)
                return cli_usage_error("profile", "--link-max-bytes: %s", emsg);
            if (o.link_max < 4096)
                return cli_usage_error("profile", "--link-max-bytes: the sweep starts at 4 KiB; give at least 4KiB");
            break;
        case 'v': o.verbose = 1; break;
        case 'N':
        case 'R': {
            char *end = NULL;
            errno = 0;
            long v = strtol(optarg, &end, 10);
            long lo = c == 'N' ? 2 : 1, hi = c == 'N' ? DIST_MAX_RANKS : 10000;
            if (!*optarg || *end || errno || v < lo || v > hi)
                return cli_usage_error("profile", "--%s must be an integer in [%ld, %ld], got '%s'",
                                       c == 'N' ? "collectives" : "collective-reps", lo, hi, optarg);
            if (c == 'N') o.coll_ranks = (int)v;
            else o.coll_reps = (int)v;
            break;
        }
        case 'X':
            if (pl_parse_bytes(optarg, &o.coll_max, emsg, sizeof emsg) != PL_OK)
                return cli_usage_error("profile", "--collective-max-bytes: %s", emsg);
            if (o.coll_max < 4 || o.coll_max > ((int64_t)1 << 34))
                return cli_usage_error("profile", "--collective-max-bytes must be 4 B to 16 GiB, got '%s'", optarg);
            break;
        case 'P': o.precision = optarg; break;
        case 'h': profile_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("profile", "unknown or incomplete option '%s'; see placer profile --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("profile", "unexpected argument '%s'; see placer profile --help", argv[optind]);
    if (!o.db_path) return cli_usage_error("profile", "--db FILE is required; see placer profile --help");
    if (o.from_spec && (o.devices || o.cpu))
        return cli_usage_error("profile", "--%s is for hardware profiling; a spec names its own devices",
                               o.devices ? "devices" : "cpu");
    if (o.from_spec && (o.force || o.machine || o.reps || o.link_max || o.verbose || o.precision))
        return cli_usage_error("profile", "--force, --machine, --precision, --reps, --link-max-bytes and --verbose are "
                                          "for hardware profiling, not --from-spec");
    if (o.from_spec && (o.coll_ranks || o.coll_max || o.coll_reps))
        return cli_usage_error("profile", "--collectives measures this host; it does not go with --from-spec");
    if (!o.coll_ranks && (o.coll_max || o.coll_reps))
        return cli_usage_error("profile", "--collective-max-bytes and --collective-reps need --collectives N");
    if (o.cpu && o.devices) return cli_usage_error("profile", "give either --devices or --cpu, not both");

    char msg[256] = "";
    pl_status st = gpt_config_parse(o.config, &o.cfg, msg, sizeof msg);
    if (st != PL_OK) return cli_report("profile", st, msg);
    if (mb_text) {
        int code = parse_mb_sizes(mb_text, o.cfg.batch, o.mb_sizes, &o.n_mb);
        if (code != CLI_EXIT_OK) return code;
    } else {
        for (int b = 1; b <= o.cfg.batch && o.n_mb < MAX_MB_SIZES; b++)
            if (o.cfg.batch % b == 0) o.mb_sizes[o.n_mb++] = b;
    }
    int mpi_size = 0;
    if (dist_mpi_launched(NULL, &mpi_size)) return profile_collectives_mpi(&o, mpi_size);
    if (o.from_spec) return profile_from_spec(&o);
    return profile_measure(&o);
}
