/*
 * hw_timer.c: the engine-backed timer (see hw_timer.h). One hw_engine for
 * the timer's life; one hw_program per timing, destroyed right after, so that
 * every placement starts from the same free memory and a failed plan leaves
 * nothing behind. The batch is the same deterministic one for every
 * placement (hw_make_batch with the timer's seed), and so are the initial
 * parameters: drawn once at creation (hw_params_init takes about a second
 * for the 49M GPT) and handed to every plan as its starting model view.
 */
#include "hw_timer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw.h"
#include "param_memory.h"

struct calib_hw_timer {
    hw_engine *e;       /* owned */
    const graph *g;     /* borrowed */
    uint64_t seed;      /* parameters and batch */
    int *tokens;        /* batch * seq_len, owned */
    int *targets;       /* batch * seq_len, owned */
    float *model;       /* initial parameters (model view), owned */
    int n_devices;      /* logical devices */
    int64_t caps[HW_MAX_DEVICES]; /* scratch */
};

/* Compile a plan of node_placement under s and mem_cap, with the batch set.
 * PL_ERR_DEVICE_OOM passes through with mem filled. */
static pl_status make_plan(calib_hw_timer *t, const int *node_placement, const schedule *s, int64_t mem_cap,
                           hw_program **out, hw_mem_report *mem, char *msg, size_t len) {
    for (int d = 0; d < t->n_devices; d++) t->caps[d] = mem_cap;
    hw_program_opts o;
    memset(&o, 0, sizeof o);
    o.placement = node_placement;
    o.sched = *s;
    o.caps = mem_cap > 0 ? t->caps : NULL;
    o.seed = t->seed;
    o.init_params = t->model;
    o.adamw = hw_adamw_default();
    pl_status st = hw_program_create(t->e, t->g, &o, out, mem, msg, len);
    if (st != PL_OK) return st;
    st = hw_program_set_batch(*out, t->tokens, t->targets, msg, len);
    if (st != PL_OK) {
        hw_program_destroy(*out);
        *out = NULL;
    }
    return st;
}

static pl_status hw_timer_time(void *self, const int *placement, const schedule *s, int64_t mem_cap, int warmup,
                               int steps, double *out, int64_t *peak, int *oom, char *msg, size_t len) {
    calib_hw_timer *t = self;
    hw_program *p = NULL;
    hw_mem_report mem;
    memset(&mem, 0, sizeof mem);
    pl_status st = make_plan(t, placement, s, mem_cap, &p, &mem, msg, len);
    if (st == PL_ERR_DEVICE_OOM) {
        int64_t mx = 0;
        for (int d = 0; d < mem.n_devices && d < HW_MAX_DEVICES; d++)
            if (mem.need_bytes[d] > mx) mx = mem.need_bytes[d];
        *peak = mx;
        *oom = 1;
        for (int i = 0; i < steps; i++) out[i] = NAN;
        if (msg && len) msg[0] = 0;
        return PL_OK;
    }
    if (st != PL_OK) return st;
    /* hw_timing keeps 64 steps: time longer runs in chunks, warming up once */
    int done = 0;
    while (done < steps && st == PL_OK) {
        int k = steps - done < 64 ? steps - done : 64;
        hw_timing tm;
        st = hw_program_time(p, done ? 0 : warmup, k, &tm, msg, len);
        if (st == PL_OK)
            for (int i = 0; i < k; i++) out[done + i] = tm.step_us[i];
        done += k;
    }
    if (st == PL_ERR_DEVICE_OOM) { /* ran out while running: still an outcome */
        *oom = 1;
        for (int i = 0; i < steps; i++) out[i] = NAN;
        if (msg && len) msg[0] = 0;
        st = PL_OK;
    }
    int64_t mx = 0;
    for (int d = 0; d < t->n_devices; d++) {
        int64_t b = hw_program_peak_bytes(p, d);
        if (b > mx) mx = b;
    }
    *peak = mx;
    hw_program_destroy(p);
    return st;
}

pl_status calib_hw_timer_create(const char *backend, const graph *g, const int *gpus, int n_devices, uint64_t seed,
                                int graphs, hw_precision precision, calib_hw_timer **out, calib_timer *timer,
                                char *msg, size_t len) {
    if (out) *out = NULL;
    if (!backend || !g || !out || !timer) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    if (n_devices < 1 || n_devices > HW_MAX_DEVICES)
        return pl_fail(msg, len, PL_ERR_INVALID, "%d devices (the engine takes 1..%d)", n_devices, HW_MAX_DEVICES);
    hw_engine_opts o;
    memset(&o, 0, sizeof o);
    if (!strcmp(backend, "cuda")) o.backend = HW_BACKEND_CUDA;
    else if (!strcmp(backend, "cpu")) o.backend = HW_BACKEND_CPU;
    else return pl_fail(msg, len, PL_ERR_INVALID, "unknown engine backend '%s' (cuda or cpu)", backend);
    o.n_devices = n_devices;
    for (int d = 0; d < n_devices; d++) o.gpus[d] = gpus ? gpus[d] : d;
    o.issue = HW_ISSUE_AUTO;
    o.graphs = o.backend == HW_BACKEND_CUDA && graphs;
    o.precision = precision;
    calib_hw_timer *t = calloc(1, sizeof *t);
    if (!t) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    size_t n = (size_t)g->cfg.batch * (size_t)g->cfg.seq_len;
    t->tokens = malloc(sizeof(int) * n);
    t->targets = malloc(sizeof(int) * n);
    t->model = malloc(sizeof(float) * (size_t)hw_model_param_offsets(g, NULL));
    if (!t->tokens || !t->targets || !t->model) {
        calib_hw_timer_destroy(t);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    }
    pl_status st = hw_engine_create(&o, &t->e, msg, len);
    if (st != PL_OK) {
        calib_hw_timer_destroy(t);
        return st;
    }
    t->g = g;
    t->seed = seed;
    t->n_devices = n_devices;
    hw_make_batch(&g->cfg, seed, t->tokens, t->targets);
    hw_params_init(g, seed, t->model);
    *out = t;
    timer->time_placement = hw_timer_time;
    timer->self = t;
    timer->name = o.backend == HW_BACKEND_CUDA ? "cuda" : "cpu";
    return PL_OK;
}

hw_precision calib_hw_timer_precision(const calib_hw_timer *t) { return hw_engine_precision(t->e); }

pl_status calib_db_precision(profile_db *db, hw_precision *out, char *msg, size_t len) {
    char name[32] = "";
    pl_status st = profile_db_precision(db, name, sizeof name);
    if (st != PL_OK) return pl_fail(msg, len, st, "reading the profile's precision");
    char pm[128];
    if (hw_precision_parse(name, out, pm, sizeof pm) != PL_OK)
        return pl_fail(msg, len, PL_ERR_INVALID, "the profile records precision '%s', which the engine does not run",
                       name);
    return PL_OK;
}

void calib_hw_timer_destroy(calib_hw_timer *t) {
    if (!t) return;
    hw_engine_destroy(t->e);
    free(t->tokens);
    free(t->targets);
    free(t->model);
    free(t);
}

pl_status calib_hw_timer_trace(calib_hw_timer *t, const int *node_placement, const schedule *s, int64_t mem_cap,
                               int warmup, char **json, char *msg, size_t len) {
    if (!t || !node_placement || !s || !json) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    *json = NULL;
    hw_program *p = NULL;
    pl_status st = make_plan(t, node_placement, s, mem_cap, &p, NULL, msg, len);
    if (st != PL_OK) return st;
    hw_timing tm;
    if (warmup > 0) st = hw_program_time(p, warmup - 1, 1, &tm, msg, len);
    if (st == PL_OK) st = hw_program_set_trace(p, 1);
    hw_step_result r;
    if (st == PL_OK) st = hw_program_step(p, &r, msg, len);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = st == PL_OK ? open_memstream(&buf, &n) : NULL;
    if (st == PL_OK && !f) st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    if (f) {
        st = hw_program_write_chrome_trace(p, f);
        if (fclose(f) && st == PL_OK) st = PL_ERR_NOMEM;
        if (st == PL_OK) *json = buf;
        else free(buf);
    }
    hw_program_destroy(p);
    return st;
}
