/*
 * dist_step.c: timed training steps in this process or over the ranks of
 * a tp x dp grid (dist_step.h). One function, run_rank, is a rank's whole
 * work; the in-process run calls it without groups, the launched run from
 * every rank (launcher.h) with the launcher's group.
 */
#include "dist_step.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist_dp.h"
#include "dist_group.h"
#include "dist_mpi.h"
#include "dist_program.h"
#include "dist_tp.h"
#include "launcher.h"
#include "placement.h"
#include "util.h"

void dist_step_job_default(dist_step_job *j) {
    memset(j, 0, sizeof *j);
    j->sched = schedule_make(1, SCHED_1F1B);
    j->n_dev = 1;
    j->issue = HW_ISSUE_AUTO;
    j->seed = 1;
    j->lr = -1.0;
    j->warmup = 2;
    j->steps = 5;
    j->tp = 1;
    j->timeout_s = 30.0;
    j->kill_rank = j->hang_rank = -1;
}

/* Each device's cap: the card's memory, or the job's mem_cap (one for all,
 * or one per device). */
static pl_status resolve_caps(const dist_step_job *j, hw_engine *e, int64_t *caps, dist_step_result *r, char *err,
                              size_t errlen) {
    const int nd = hw_engine_n_devices(e);
    for (int d = 0; d < nd; d++) caps[d] = hw_engine_device(e, d)->mem_bytes;
    if (!j->mem_cap) return PL_OK;
    const int nc = placement_count_fields(j->mem_cap);
    if (nc != 1 && nc != nd) {
        r->failed = DIST_STEP_FAILED_CAP_COUNT;
        return pl_fail(err, errlen, PL_ERR_INVALID, "takes one cap or one per device (%d), got %d", nd, nc);
    }
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", j->mem_cap);
    char *save = NULL, *tok = strtok_r(buf, ",", &save);
    for (int d = 0; d < nd; d++) {
        pl_status st = pl_parse_mem_cap(tok ? tok : "", hw_engine_device(e, d)->mem_bytes, &caps[d], err, errlen);
        if (st != PL_OK) {
            r->failed = DIST_STEP_FAILED_CAP;
            return st;
        }
        if (nc > 1) tok = strtok_r(NULL, ",", &save);
    }
    return PL_OK;
}

/* One more step with per-operation timestamps, written to the job's trace
 * file as Chrome trace JSON. */
static pl_status write_trace(hw_program *p, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) return pl_fail(err, errlen, PL_ERR_IO, "cannot write the trace file");
    hw_step_result sr;
    err[0] = 0;
    pl_status st = hw_program_set_trace(p, 1);
    if (st == PL_OK) st = hw_program_step(p, &sr, err, errlen);
    if (st == PL_OK) st = hw_program_write_chrome_trace(p, f);
    if (fclose(f) != 0 && st == PL_OK) st = PL_ERR_IO;
    if (st != PL_OK && !err[0]) snprintf(err, errlen, "writing the trace failed");
    return st;
}

/* A rank's figures into r (rank 0 only). */
static void fill_result(dist_group *grp, hw_engine *e, hw_program *p, const graph *g,
                        const int *pl, const int64_t *caps, const int *gpus, int count, const hw_timing *t,
                        dist_step_result *r) {
    r->n_nodes = g->n_nodes;
    placement_format(pl, g->n_nodes, r->placement, sizeof r->placement);
    r->rank_batch = count;
    r->t = *t;
    r->prec = hw_engine_precision(e);
    r->n_dev = hw_engine_n_devices(e);
    for (int d = 0; d < r->n_dev; d++) {
        r->dev[d] = *hw_engine_device(e, d);
        r->gpus[d] = gpus[d];
        r->peak_bytes[d] = hw_program_peak_bytes(p, d);
        r->caps[d] = caps[d];
    }
    r->reorders = hw_program_reorders(p);
    r->graph_state = hw_program_graph_state(p);
    snprintf(r->transport, sizeof r->transport, "%s", grp ? dist_transport_name(grp) : "");
    snprintf(r->collectives, sizeof r->collectives, "%s", hw_program_collectives(p));
}

/* One rank's work (dist_step.h, steps 1-5); grp NULL: in this process.
 * Rank 0 writes its figures into r. */
static pl_status run_rank(const dist_step_job *j, dist_group *grp, int rank, dist_step_result *r, char *err,
                          size_t errlen) {
    const gpt_config *cfg = &j->cfg;
    const int dp = grp ? j->procs / j->tp : 1;
    int first = 0, count = cfg->batch, replica = rank;
    graph *g = NULL;
    hw_engine *e = NULL;
    hw_program *p = NULL;
    int *tok = NULL, *tgt = NULL, *pl = NULL;
    dist_group *tg = NULL, *dg = NULL;
    pl_status st = PL_OK;
    if (grp && j->tp > 1 && (st = hw_tp_dp_groups(grp, j->tp, dp, &tg, &dg, &replica, err, errlen)) != PL_OK) goto out;
    if (grp && (st = hw_dp_slice(dp, replica, cfg->batch, &first, &count, err, errlen)) != PL_OK) goto out;
    gpt_config local = *cfg;
    local.batch = count;
    if ((st = graph_build_gpt(&local, &g, err, errlen)) != PL_OK) goto out;
    const int ntok = cfg->batch * cfg->seq_len;
    pl = calloc((size_t)g->n_nodes, sizeof *pl);
    tok = malloc(sizeof *tok * (size_t)ntok);
    tgt = malloc(sizeof *tgt * (size_t)ntok);
    if (!pl || !tok || !tgt) {
        st = pl_fail(err, errlen, PL_ERR_NOMEM, "out of host memory");
        goto out;
    }
    if (j->placement && (st = placement_parse(j->placement, g->n_nodes, j->n_dev, pl, err, errlen)) != PL_OK) {
        r->failed = DIST_STEP_FAILED_PLACEMENT;
        r->n_nodes = g->n_nodes;
        goto out;
    }
    hw_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.backend = j->cuda ? HW_BACKEND_CUDA : HW_BACKEND_CPU;
    eo.n_devices = j->n_dev;
    eo.strict_fp32 = j->strict_fp32;
    eo.precision = j->prec;
    eo.issue = j->issue;
    eo.graphs = j->graphs;
    if (j->cuda) {
        /* the rank's GPUs: the job's for every rank (ranks sharing a GPU: host-staged collectives),
         * or with gpu_per_rank its own ones (under mpirun, by its rank on its host) */
        const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        const int local_rank = lr && *lr ? atoi(lr) : rank;
        for (int d = 0; d < j->n_dev; d++)
            eo.gpus[d] = j->gpus[d] + (grp && j->gpu_per_rank ? local_rank * j->n_dev : 0);
    }
    if ((st = hw_engine_create(&eo, &e, err, errlen)) != PL_OK) goto out;
    int64_t caps[HW_MAX_DEVICES];
    if ((st = resolve_caps(j, e, caps, r, err, errlen)) != PL_OK) goto out;
    hw_program_opts po;
    memset(&po, 0, sizeof po);
    po.placement = pl;
    po.sched = j->sched;
    po.caps = caps;
    po.seed = j->seed;
    po.adamw = hw_adamw_default();
    if (j->lr > 0) po.adamw.lr = (float)j->lr;
    /* the rank's groups (none in one process: the options are still checked) */
    dist_parallel par = {.dp = j->tp > 1 ? dg : (grp && (dp > 1 || j->one_rank_group) ? grp : NULL),
                         .tp = tg,
                         .seq_parallel = j->sp,
                         .zero = j->zero,
                         .bucket_bytes = j->bucket_bytes};
    po.parallel = dist_parallel_hooks(&par);
    hw_mem_report mem;
    memset(&mem, 0, sizeof mem);
    st = hw_program_create(e, g, &po, &p, &mem, err, errlen);
    if (rank == 0) r->mem = mem;
    if (st != PL_OK) goto out;
    /* the global batch, as the single-process run makes it; this rank's rows */
    hw_make_batch(cfg, j->seed, tok, tgt);
    const size_t off = (size_t)first * (size_t)cfg->seq_len;
    if ((st = hw_program_set_batch(p, tok + off, tgt + off, err, errlen)) != PL_OK) goto out;
    if (grp && (rank == j->kill_rank || rank == j->hang_rank)) {
        hw_step_result sr;
        if ((st = hw_program_step(p, &sr, err, errlen)) != PL_OK) goto out;
        if (rank == j->kill_rank) raise(SIGKILL);
        pause(); /* until mpirun or the launcher ends it */
    }
    hw_timing t;
    if ((st = hw_program_time(p, j->warmup, j->steps, &t, err, errlen)) != PL_OK) goto out;
    if (!grp && j->trace_path && (st = write_trace(p, j->trace_path, err, errlen)) != PL_OK) goto out;
    if (rank == 0) fill_result(grp, e, p, g, pl, caps, eo.gpus, count, &t, r);
out:
    hw_program_destroy(p);
    hw_engine_destroy(e);
    graph_destroy(g);
    free(pl);
    free(tok);
    free(tgt);
    dist_group_destroy(tg);
    dist_group_destroy(dg);
    return st;
}

typedef struct {
    const dist_step_job *j;
    dist_step_result *shared; /* rank 0 writes here (MAP_SHARED: the parent reads it after the fork) */
} rank_ctx;

static int launched_rank(dist_group *grp, int rank, void *vctx, char *err, size_t errlen) {
    const rank_ctx *c = vctx;
    return run_rank(c->j, grp, rank, c->shared, err, errlen) == PL_OK ? 0 : 1;
}

/* Build the graph and parse the placement, so that bad input is refused
 * before any rank starts. */
static pl_status check_placement(const dist_step_job *j, dist_step_result *r, char *msg, size_t len) {
    graph *g = NULL;
    pl_status st = graph_build_gpt(&j->cfg, &g, msg, len);
    if (st != PL_OK) return st;
    int *pl = calloc((size_t)g->n_nodes, sizeof *pl);
    st = pl ? placement_parse(j->placement, g->n_nodes, j->n_dev, pl, msg, len)
            : pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    if (st != PL_OK && pl) {
        r->failed = DIST_STEP_FAILED_PLACEMENT;
        r->n_nodes = g->n_nodes;
    }
    free(pl);
    graph_destroy(g);
    return st;
}

static pl_status run_launched(const dist_step_job *j, dist_step_result *r, char *msg, size_t len) {
    if (j->tp < 1 || j->procs % j->tp != 0 || (j->sp && j->tp < 2) || j->zero < 0 || j->zero > 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "dist_step_run: tp=%d, sp=%d, zero=%d over %d ranks", j->tp, j->sp,
                       j->zero, j->procs);
    if (j->mem_cap || j->trace_path || j->graphs)
        return pl_fail(msg, len, PL_ERR_INVALID, "memory caps, traces and CUDA graphs run in one process only");
    int mpi_size = 0;
    const int mpi = dist_mpi_launched(NULL, &mpi_size);
    if (mpi && mpi_size != j->procs)
        return pl_fail(msg, len, PL_ERR_INVALID, "mpirun started %d ranks; the job runs %d", mpi_size, j->procs);
    dist_step_result *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) return pl_fail(msg, len, PL_ERR_NOMEM, "cannot map memory for the ranks' figures");
    memset(shared, 0, sizeof *shared);
    rank_ctx ctx = {j, shared};
    pl_status st;
    int rank = 0;
    if (mpi) { /* mpirun started this process: one rank of the job */
        int rc = 0;
        st = hw_launch_mpi(j->timeout_s, launched_rank, &ctx, &rank, &rc, msg, len);
    } else {
        st = hw_launch(j->procs, j->timeout_s, launched_rank, &ctx, NULL, msg, len);
    }
    if (st == PL_OK) {
        *r = *shared;
        r->here = rank == 0;
        if (r->here && !(r->t.median_us > 0)) st = pl_fail(msg, len, PL_ERR_IO, "rank 0 returned no timing");
    }
    munmap(shared, sizeof *shared);
    return st;
}

pl_status dist_step_run(const dist_step_job *j, dist_step_result *r, char *msg, size_t len) {
    if (r) memset(r, 0, sizeof *r);
    if (!j || !r || j->n_dev < 1 || j->n_dev > HW_MAX_DEVICES || j->procs < 0 || j->procs > DIST_MAX_RANKS ||
        j->steps < 1 || j->warmup < 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "dist_step_run: bad job");
    if (msg && len) msg[0] = 0;
    if (j->placement) {
        pl_status st = check_placement(j, r, msg, len);
        if (st != PL_OK) return st;
    }
    if (j->procs > 0) return run_launched(j, r, msg, len);
    pl_status st = run_rank(j, NULL, 0, r, msg, len);
    if (st == PL_OK) r->here = 1;
    return st;
}

int dist_step_gpu_count(void) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        const int n = hw_cuda_device_count();
        _exit(n > 250 ? 250 : n);
    }
    int ws = 0;
    if (waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws)) return -1;
    return WEXITSTATUS(ws);
}
