/* helpers.h: shared setup for the hw tests (CPU backend, tiny GPT). */
#ifndef PLACER_TESTS_HW_HELPERS_H
#define PLACER_TESTS_HW_HELPERS_H

#include <criterion/criterion.h>
#include <stdlib.h>

#include "graph.h"
#include "hw.h"
#include "param_memory.h"

static inline graph *tiny_graph(const char *cfgtext) {
    gpt_config cfg;
    char msg[256];
    cr_assert_eq(gpt_config_parse(cfgtext, &cfg, msg, sizeof msg), PL_OK, "%s", msg);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, msg, sizeof msg), PL_OK, "%s", msg);
    return g;
}

static inline hw_engine *cpu_engine(int n, hw_issue_mode issue) {
    hw_engine_opts o = {0};
    o.backend = HW_BACKEND_CPU;
    o.n_devices = n;
    o.issue = issue;
    hw_engine *e = NULL;
    char msg[256];
    cr_assert_eq(hw_engine_create(&o, &e, msg, sizeof msg), PL_OK, "%s", msg);
    return e;
}

/* What one step leaves behind: its loss, the gradients and the updated
 * parameters in the model view. */
typedef struct {
    double loss;
    float *grads, *params;
    int64_t n;
} step_out;

static inline void step_out_free(step_out *s) {
    free(s->grads);
    free(s->params);
}

/* One step of placement `pl` with m micro-batches and the given order.
 * Returns the plan status; on PL_OK *out holds the results. */
static inline pl_status run_one_step(hw_engine *e, const graph *g, const int *pl, int m, schedule_order order,
                                     const hw_adamw *opt, step_out *out) {
    hw_program_opts o = {0};
    o.placement = pl;
    o.sched = schedule_make(m, order);
    o.seed = 1234;
    o.adamw = opt ? *opt : hw_adamw_default();
    hw_program *p = NULL;
    char msg[256];
    pl_status st = hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg);
    if (st != PL_OK) return st;
    const int n = g->cfg.batch * g->cfg.seq_len;
    int *tok = malloc(sizeof(int) * (size_t)n), *tgt = malloc(sizeof(int) * (size_t)n);
    hw_make_batch(&g->cfg, 99, tok, tgt);
    cr_assert_eq(hw_program_set_batch(p, tok, tgt, msg, sizeof msg), PL_OK, "%s", msg);
    free(tok);
    free(tgt);
    hw_step_result r;
    cr_assert_eq(hw_program_step(p, &r, msg, sizeof msg), PL_OK, "%s", msg);
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(g->n_nodes + 1));
    out->n = hw_model_param_offsets(g, off);
    free(off);
    out->loss = r.loss;
    out->grads = malloc(sizeof(float) * (size_t)out->n);
    out->params = malloc(sizeof(float) * (size_t)out->n);
    cr_assert_eq(hw_program_get_grads(p, out->grads, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(hw_program_get_params(p, out->params, msg, sizeof msg), PL_OK, "%s", msg);
    hw_program_destroy(p);
    return PL_OK;
}

#endif
