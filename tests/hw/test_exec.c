/*
 * test_exec.c: the placement executor on the CPU backend: a tiny GPT that
 * learns, placement and schedule invariance, memory caps and OOM, traces
 * and bad input.
 *
 * Invariance tolerances.
 *   Same micro-batch count m: a placement changes where tensors live and in
 *   which order devices work, not the arithmetic. Each kernel computes the
 *   same values from the same inputs; a tensor with two consumers sums two
 *   contributions, and a + b == b + a exactly in IEEE arithmetic; parameter
 *   gradients add micro-batches in the same (ascending) order under both
 *   schedules. So the loss, every gradient and every updated parameter must
 *   be bit-identical to the single-device run with the same m.
 *   Different m: a parameter gradient becomes a float sum of m per-micro-
 *   batch partials instead of one, so it may differ by a few float roundings
 *   of the partials, each at most 2^-24 of the largest gradient magnitude
 *   (1.1e-7 measured for m = 4). Tolerance: 1e-6 * max|g| (9x margin). At
 *   step 1 AdamW moves each parameter by lr * g / (|g| + eps), so a
 *   parameter moves by at most lr: a wrong gradient shows up as an O(lr)
 *   difference, a rounding one as lr * 5e-5 (measured). Tolerance on
 *   parameters: 1e-3 * lr. The loss is summed in double: tolerance 1e-9.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "placement.h"
#include "placer_config.h"
#include "util.h"

#define MAXN 64

static int count_diff(const float *a, const float *b, int64_t n) {
    int k = 0;
    for (int64_t i = 0; i < n; i++) k += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return k;
}

static void expect_identical(const step_out *ref, const step_out *s, const char *what) {
    cr_expect(ieee_ulp_eq(dbl, s->loss, ref->loss, 0), "%s: loss %.12g vs %.12g", what, s->loss, ref->loss);
    int dg = count_diff(ref->grads, s->grads, s->n), dp = count_diff(ref->params, s->params, s->n);
    cr_expect_eq(dg, 0, "%s: %d gradients differ from the single-device run", what, dg);
    cr_expect_eq(dp, 0, "%s: %d parameters differ from the single-device run", what, dp);
}

/* ---- learning ---- */

Test(exec, first_step_loss_is_near_log_vocab) {
    graph *g = tiny_graph("tiny");
    hw_engine *e = cpu_engine(1, HW_ISSUE_AUTO);
    int pl[MAXN] = {0};
    step_out s = {0};
    cr_assert_eq(run_one_step(e, g, pl, 1, SCHED_GPIPE, NULL, &s), PL_OK);
    /* weights N(0, 0.02) give logits near 0: the loss is about ln V */
    cr_assert(epsilon_eq(dbl, s.loss, log(64.0), 0.05), "loss %g", s.loss);
    for (int64_t i = 0; i < s.n; i++)
        cr_assert(isfinite(s.params[i]) && isfinite(s.grads[i]), "element %lld is not finite", (long long)i);
    step_out_free(&s);
    hw_engine_destroy(e);
    graph_destroy(g);
}

Test(exec, tiny_gpt_overfits_one_batch) {
    graph *g = tiny_graph("tiny");
    hw_engine *e = cpu_engine(2, HW_ISSUE_AUTO);
    int pl[MAXN];
    for (int i = 0; i < g->n_nodes; i++) pl[i] = i < g->n_nodes / 2 ? 0 : 1;
    hw_program_opts o = {0};
    o.placement = pl;
    o.sched = schedule_make(2, SCHED_1F1B);
    o.seed = 7;
    o.adamw = hw_adamw_default();
    o.adamw.lr = 1e-2f;
    o.adamw.weight_decay = 0.0f;
    hw_program *p = NULL;
    char msg[256];
    cr_assert_eq(hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    int tok[256], tgt[256];
    hw_make_batch(&g->cfg, 3, tok, tgt);
    cr_assert_eq(hw_program_set_batch(p, tok, tgt, msg, sizeof msg), PL_OK, "%s", msg);
    hw_step_result r;
    double first = 0, last = 0;
    for (int i = 0; i < 150; i++) {
        cr_assert_eq(hw_program_step(p, &r, msg, sizeof msg), PL_OK, "%s", msg);
        if (i == 0) first = r.loss;
        last = r.loss;
    }
    /* 32 random next-token pairs over a vocabulary of 64 can be memorised:
     * the loss must fall far below its ln(64) = 4.16 start */
    cr_assert(last < 0.25 * first, "loss %g -> %g after 150 steps", first, last);
    hw_program_destroy(p);
    hw_engine_destroy(e);
    graph_destroy(g);
}

/* ---- invariance ---- */

typedef struct {
    graph *g;
    hw_engine *e;
    step_out ref[5]; /* single device, by m (1, 2, 4) */
    int tested;
} inv_ctx;

static void inv_setup(inv_ctx *c, int n_dev, hw_issue_mode issue) {
    c->g = tiny_graph("tiny");
    c->e = cpu_engine(n_dev, issue);
    int pl[MAXN] = {0};
    for (int m = 1; m <= 4; m *= 2) cr_assert_eq(run_one_step(c->e, c->g, pl, m, SCHED_GPIPE, NULL, &c->ref[m]), PL_OK);
    c->tested = 0;
}

static void inv_teardown(inv_ctx *c) {
    for (int m = 1; m <= 4; m *= 2) step_out_free(&c->ref[m]);
    hw_engine_destroy(c->e);
    graph_destroy(c->g);
}

/* Run pl under m in {1,2,4} and both orders; each must match the single
 * device bit for bit. */
static void check_placement(inv_ctx *c, const int *pl) {
    char pls[256], what[320];
    placement_format(pl, c->g->n_nodes, pls, sizeof pls);
    for (int m = 1; m <= 4; m *= 2)
        for (int o = 0; o < 2; o++) {
            step_out s = {0};
            pl_status st = run_one_step(c->e, c->g, pl, m, (schedule_order)o, NULL, &s);
            cr_assert_eq(st, PL_OK, "placement %s m=%d: %s", pls, m, pl_status_str(st));
            snprintf(what, sizeof what, "placement %s m=%d %s", pls, m, o ? "1f1b" : "gpipe");
            expect_identical(&c->ref[m], &s, what);
            step_out_free(&s);
            c->tested++;
        }
}

Test(invariance, micro_batching_matches_the_full_batch) {
    inv_ctx c;
    inv_setup(&c, 1, HW_ISSUE_AUTO);
    const step_out *r1 = &c.ref[1];
    double gmax = 0.0;
    for (int64_t i = 0; i < r1->n; i++) gmax = fmax(gmax, fabs(r1->grads[i]));
    const float lr = hw_adamw_default().lr;
    for (int m = 2; m <= 4; m *= 2) {
        const step_out *s = &c.ref[m];
        cr_expect(epsilon_eq(dbl, s->loss, r1->loss, 1e-9), "m=%d loss %.12g vs %.12g", m, s->loss, r1->loss);
        double dg = 0.0, dp = 0.0;
        for (int64_t i = 0; i < s->n; i++) {
            dg = fmax(dg, fabs((double)s->grads[i] - r1->grads[i]));
            dp = fmax(dp, fabs((double)s->params[i] - r1->params[i]));
        }
        cr_expect(dg <= 1e-6 * gmax, "m=%d: gradient differs by %g (max |g| %g)", m, dg, gmax);
        cr_expect(dp <= 1e-3 * lr, "m=%d: parameter differs by %g (lr %g)", m, dp, lr);
    }
    inv_teardown(&c);
}

/* Every contiguous split of the 16-node tiny GPT into k = 2, 3, 4 stages. */
static void all_contiguous(inv_ctx *c, int k, int *pl, int node, int stage) {
    const int n = c->g->n_nodes;
    if (stage == k - 1) {
        for (int i = node; i < n; i++) pl[i] = stage;
        check_placement(c, pl);
        return;
    }
    /* stage takes nodes [node, end), leaving at least one node per later stage */
    for (int end = node + 1; end <= n - (k - 1 - stage); end++) {
        for (int i = node; i < end; i++) pl[i] = stage;
        all_contiguous(c, k, pl, end, stage + 1);
    }
}

Test(invariance, every_contiguous_split_over_2_to_4_devices_matches_one_device, .timeout = 600) {
    inv_ctx c;
    inv_setup(&c, 4, HW_ISSUE_AUTO);
    int pl[MAXN];
    for (int k = 2; k <= 4; k++) all_contiguous(&c, k, pl, 0, 0);
    /* 15 + 105 + 455 splits, 6 runs each */
    cr_assert_eq(c.tested, (15 + 105 + 455) * 6);
    inv_teardown(&c);
}

Test(invariance, random_placements_over_2_to_4_devices_match_one_device, .timeout = 600) {
    inv_ctx c;
    inv_setup(&c, 4, HW_ISSUE_AUTO);
    pl_rng r;
    pl_rng_seed(&r, 2024);
    int pl[MAXN];
    for (int trial = 0; trial < 300; trial++) {
        int k = 2 + trial % 3;
        for (int i = 0; i < c.g->n_nodes; i++) pl[i] = pl_rng_int(&r, k);
        check_placement(&c, pl);
    }
    inv_teardown(&c);
}

Test(invariance, one_thread_per_device_matches_one_device) {
    inv_ctx c;
    inv_setup(&c, 4, HW_ISSUE_THREADS);
    pl_rng r;
    pl_rng_seed(&r, 77);
    int pl[MAXN];
    for (int trial = 0; trial < 40; trial++) {
        int k = 2 + trial % 3;
        for (int i = 0; i < c.g->n_nodes; i++) pl[i] = trial % 2 ? pl_rng_int(&r, k) : (i * k) / c.g->n_nodes;
        check_placement(&c, pl);
    }
    inv_teardown(&c);
}

Test(invariance, alternating_placement_needs_reordering_under_1f1b_and_still_matches) {
    inv_ctx c;
    inv_setup(&c, 2, HW_ISSUE_AUTO);
    int pl[MAXN];
    for (int i = 0; i < c.g->n_nodes; i++) pl[i] = i % 2;
    hw_program_opts o = {0};
    o.placement = pl;
    o.sched = schedule_make(4, SCHED_1F1B);
    o.adamw = hw_adamw_default();
    hw_program *p = NULL;
    char msg[256];
    cr_assert_eq(hw_program_create(c.e, c.g, &o, &p, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_gt(hw_program_reorders(p), 0, "strict 1f1b should deadlock on an alternating placement");
    hw_program_destroy(p);
    /* contiguous placements never need it */
    for (int i = 0; i < c.g->n_nodes; i++) pl[i] = i < 9 ? 0 : 1;
    cr_assert_eq(hw_program_create(c.e, c.g, &o, &p, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(hw_program_reorders(p), 0);
    hw_program_destroy(p);
    for (int i = 0; i < c.g->n_nodes; i++) pl[i] = i % 2;
    check_placement(&c, pl);
    inv_teardown(&c);
}

/* ---- memory ---- */

static pl_status try_plan(hw_engine *e, const graph *g, const int *pl, int m, schedule_order ord,
                          const int64_t *caps, hw_mem_report *mem, char *msg, size_t len) {
    hw_program_opts o = {0};
    o.placement = pl;
    o.sched = schedule_make(m, ord);
    o.caps = caps;
    o.adamw = hw_adamw_default();
    hw_program *p = NULL;
    pl_status st = hw_program_create(e, g, &o, &p, mem, msg, len);
    hw_program_destroy(p);
    return st;
}

Test(memory, cap_below_the_parameters_is_an_oom_naming_the_device) {
    graph *g = tiny_graph("tiny");
    hw_engine *e = cpu_engine(2, HW_ISSUE_AUTO);
    int pl[MAXN];
    for (int i = 0; i < g->n_nodes; i++) pl[i] = i < 8 ? 0 : 1;
    int64_t caps[2] = {1LL << 30, 4096};
    hw_mem_report mem;
    char msg[256] = "";
    cr_assert_eq(try_plan(e, g, pl, 1, SCHED_GPIPE, caps, &mem, msg, sizeof msg), PL_ERR_DEVICE_OOM);
    cr_assert_eq(mem.oom_device, 1);
    cr_assert(strstr(msg, "device 1") && strstr(msg, "cap"), "%s", msg);
    cr_assert_gt(mem.need_bytes[1], caps[1]);
    cr_assert_gt(mem.static_bytes[1], 0);
    hw_engine_destroy(e);
    graph_destroy(g);
}

Test(memory, a_cap_of_exactly_the_need_fits_and_one_block_less_does_not) {
    graph *g = tiny_graph("tiny");
    hw_engine *e = cpu_engine(2, HW_ISSUE_AUTO);
    int pl[MAXN];
    for (int i = 0; i < g->n_nodes; i++) pl[i] = i < 8 ? 0 : 1;
    for (int o = 0; o < 2; o++) {
        hw_mem_report mem;
        char msg[256];
        cr_assert_eq(try_plan(e, g, pl, 4, (schedule_order)o, NULL, &mem, msg, sizeof msg), PL_OK, "%s", msg);
        int64_t caps[2] = {mem.need_bytes[0], mem.need_bytes[1]};
        hw_mem_report m2;
        cr_assert_eq(try_plan(e, g, pl, 4, (schedule_order)o, caps, &m2, msg, sizeof msg), PL_OK, "%s", msg);
        cr_assert_eq(m2.need_bytes[0], caps[0]);
        cr_assert_eq(m2.need_bytes[1], caps[1]);
        /* device 0 sends activations and so defers frees; take device 1's
         * cap down by one allocation unit */
        caps[1] -= 256;
        pl_status st = try_plan(e, g, pl, 4, (schedule_order)o, caps, &m2, msg, sizeof msg);
        cr_assert_eq(st, PL_ERR_DEVICE_OOM, "%s", msg);
        cr_assert_eq(m2.oom_device, 1);
    }
    hw_engine_destroy(e);
    graph_destroy(g);
}

Test(memory, engine_stays_usable_after_ooms_and_injected_allocation_failures) {
    graph *g = tiny_graph("tiny");
    hw_engine *e = cpu_engine(3, HW_ISSUE_AUTO);
    int pl[MAXN];
    for (int i = 0; i < g->n_nodes; i++) pl[i] = (i * 3) / g->n_nodes;
    char msg[256];
    int64_t tiny_caps[3] = {1024, 1024, 1024};
    for (int k = 0; k < 50; k++)
        cr_assert_eq(try_plan(e, g, pl, 2, SCHED_1F1B, tiny_caps, NULL, msg, sizeof msg), PL_ERR_DEVICE_OOM);
    cr_assert_eq(hw_engine_live_arenas(e), 0);
    /* the 1st, 2nd and 3rd device allocation fail in turn: whatever was
     * taken before the failure is released (ASan's leak check sees it) */
    for (int n = 1; n <= 3; n++) {
        hw_engine_fail_alloc_at(e, n);
        hw_mem_report mem;
        cr_assert_eq(try_plan(e, g, pl, 2, SCHED_1F1B, NULL, &mem, msg, sizeof msg), PL_ERR_DEVICE_OOM);
        cr_assert_eq(mem.oom_device, n - 1, "%s", msg);
        cr_assert(strstr(msg, "injected") != NULL, "%s", msg);
        cr_assert_eq(hw_engine_live_arenas(e), 0, "device memory left behind after a failed plan");
    }
    hw_engine_fail_alloc_at(e, 0);
    step_out a = {0}, b = {0};
    cr_assert_eq(run_one_step(e, g, pl, 2, SCHED_1F1B, NULL, &a), PL_OK);
    hw_engine *fresh = cpu_engine(3, HW_ISSUE_AUTO);
    cr_assert_eq(run_one_step(fresh, g, pl, 2, SCHED_1F1B, NULL, &b), PL_OK);
    expect_identical(&b, &a, "after OOMs");
    step_out_free(&a);
    step_out_free(&b);
    hw_engine_destroy(fresh);
    hw_engine_destroy(e);
    graph_destroy(g);
}

Test(memory, peaks_are_per_device_and_unused_devices_take_nothing) {
    graph *g = tiny_graph("tiny");
    hw_engine *e = cpu_engine(4, HW_ISSUE_AUTO);
    int pl[MAXN];
    for (int i = 0; i < g->n_nodes; i++) pl[i] = i < 8 ? 0 : 2;
    hw_program_opts o = {0};
    o.placement = pl;
    o.sched = schedule_make(2, SCHED_GPIPE);
    o.adamw = hw_adamw_default();
    hw_program *p = NULL;
    hw_mem_report mem;
    char msg[256];
    cr_assert_eq(hw_program_create(e, g, &o, &p, &mem, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_gt(hw_program_peak_bytes(p, 0), 0);
    cr_assert_eq(hw_program_peak_bytes(p, 1), 0);
    cr_assert_gt(hw_program_peak_bytes(p, 2), 0);
    cr_assert_eq(hw_program_peak_bytes(p, 3), 0);
    for (int d = 0; d < 4; d++) {
        cr_assert_eq(hw_program_peak_bytes(p, d), mem.need_bytes[d]);
        cr_assert_geq(mem.need_bytes[d], mem.static_bytes[d]);
    }
    /* the static part holds at least params, grads, m and v of the nodes there */
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(g->n_nodes + 1));
    hw_model_param_offsets(g, off);
    cr_assert_geq(mem.static_bytes[0], 4 * 4 * off[8]);
    free(off);
    hw_program_destroy(p);
    hw_engine_destroy(e);
    graph_destroy(g);
}

Test(memory, one_f_one_b_holds_fewer_activations_than_gpipe_on_the_first_stage) {
    graph *g = tiny_graph("tiny,batch=8");
    hw_engine *e = cpu_engine(2, HW_ISSUE_AUTO);
    int pl[MAXN];
    for (int i = 0; i < g->n_nodes; i++) pl[i] = i < 8 ? 0 : 1;
    hw_mem_report a, b;
    char msg[256];
    cr_assert_eq(try_plan(e, g, pl, 8, SCHED_GPIPE, NULL, &a, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(try_plan(e, g, pl, 8, SCHED_1F1B, NULL, &b, msg, sizeof msg), PL_OK, "%s", msg);
    /* gpipe keeps all 8 micro-batches' activations on stage 0; 1f1b at most 2 */
    int64_t act_g = a.need_bytes[0] - a.static_bytes[0], act_1 = b.need_bytes[0] - b.static_bytes[0];
    cr_assert_lt(2 * act_1, act_g, "activation peak: 1f1b %lld, gpipe %lld", (long long)act_1, (long long)act_g);
    hw_engine_destroy(e);
    graph_destroy(g);
}

/* ---- traces ---- */

Test(trace, every_node_call_and_transfer_is_recorded_in_stream_order) {
    graph *g = tiny_graph("tiny");
    hw_engine *e = cpu_engine(2, HW_ISSUE_AUTO);
    int pl[MAXN];
    for (int i = 0; i < g->n_nodes; i++) pl[i] = i < 8 ? 0 : 1;
    hw_program_opts o = {0};
    o.placement = pl;
    o.sched = schedule_make(4, SCHED_1F1B);
    o.adamw = hw_adamw_default();
    hw_program *p = NULL;
    char msg[256];
    cr_assert_eq(hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    int tok[256], tgt[256];
    hw_make_batch(&g->cfg, 1, tok, tgt);
    cr_assert_eq(hw_program_set_batch(p, tok, tgt, msg, sizeof msg), PL_OK);
    cr_assert_eq(hw_program_set_trace(p, 1), PL_OK);
    hw_step_result r;
    cr_assert_eq(hw_program_step(p, &r, msg, sizeof msg), PL_OK, "%s", msg);
    int n = 0;
    const hw_trace_event *ev = hw_program_trace(p, &n);
    cr_assert_not_null(ev);
    int fwd = 0, bwd = 0, opt = 0, send = 0, recv = 0;
    for (int i = 0; i < n; i++) {
        fwd += ev[i].kind == HW_EV_FWD;
        bwd += ev[i].kind == HW_EV_BWD;
        opt += ev[i].kind == HW_EV_OPT;
        send += ev[i].kind == HW_EV_SEND;
        recv += ev[i].kind == HW_EV_RECV;
        cr_assert_geq(ev[i].end_us, ev[i].start_us);
        cr_assert_geq(ev[i].start_us, 0.0);
    }
    cr_assert_eq(fwd, g->n_nodes * 4);
    cr_assert_eq(bwd, (g->n_nodes - 1) * 4); /* the loss's backward is fused into its forward */
    cr_assert_eq(opt, 2);
    /* per micro-batch, each producer with a consumer across the cut sends its
     * activation forward and receives a gradient back */
    int cut = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        int crosses = 0;
        for (int k = g->cons_start[i]; k < g->cons_start[i + 1]; k++) crosses |= pl[g->cons[k]] != pl[i];
        cut += crosses;
    }
    cr_assert_eq(cut, 2); /* the residual stream and the layernorm output entering block 1 */
    cr_assert_eq(send, 2 * cut * 4);
    cr_assert_eq(recv, 2 * cut * 4);
    FILE *f = tmpfile();
    cr_assert_eq(hw_program_write_chrome_trace(p, f), PL_OK);
    long sz = ftell(f);
    rewind(f);
    char head[64] = "";
    cr_assert(fread(head, 1, sizeof head - 1, f) > 0);
    fclose(f);
    cr_assert(sz > 1000 && strstr(head, "traceEvents"), "%s", head);
    hw_program_destroy(p);
    hw_engine_destroy(e);
    graph_destroy(g);
}

/* ---- bad input ---- */

Test(bad_input, placements_schedules_and_batches_are_checked) {
    graph *g = tiny_graph("tiny");
    hw_engine *e = cpu_engine(2, HW_ISSUE_AUTO);
    int pl[MAXN] = {0};
    char msg[256];
    hw_program_opts o = {0};
    o.placement = pl;
    o.sched = schedule_make(3, SCHED_GPIPE);
    o.adamw = hw_adamw_default();
    hw_program *p = NULL;
    cr_assert_eq(hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg), PL_ERR_SCHEDULE);
    cr_assert_null(p);
    o.sched = schedule_make(2, SCHED_INTERLEAVED);
    o.sched.chunks = 2;
    cr_assert_eq(hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg), PL_ERR_UNSUPPORTED);
    o.sched = schedule_make(2, SCHED_GPIPE);
    pl[3] = 2;
    cr_assert_eq(hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg), PL_ERR_PLACEMENT_RANGE);
    pl[3] = 0;
    int64_t caps[2] = {0, 0};
    o.caps = caps;
    cr_assert_eq(hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg), PL_ERR_INVALID);
    o.caps = NULL;
    cr_assert_eq(hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    hw_step_result r;
    cr_assert_eq(hw_program_step(p, &r, msg, sizeof msg), PL_ERR_INVALID, "a step without a batch");
    int tok[256], tgt[256];
    hw_make_batch(&g->cfg, 1, tok, tgt);
    tok[5] = 64;
    cr_assert_eq(hw_program_set_batch(p, tok, tgt, msg, sizeof msg), PL_ERR_INVALID);
    tok[5] = -1;
    cr_assert_eq(hw_program_set_batch(p, tok, tgt, msg, sizeof msg), PL_ERR_INVALID);
    hw_program_destroy(p);
    hw_program_destroy(NULL);
    hw_engine_destroy(e);
    hw_engine_destroy(NULL);
    graph_destroy(g);
}

Test(bad_input, a_gpu_engine_without_a_gpu_is_a_clear_error) {
    hw_engine_opts o = {0};
    o.backend = HW_BACKEND_CUDA;
    o.n_devices = 1;
    hw_engine *e = NULL;
    char msg[256] = "";
    pl_status st = hw_engine_create(&o, &e, msg, sizeof msg);
    if (PLACER_HAVE_CUDA && hw_cuda_device_count() > 0) {
        cr_assert_eq(st, PL_OK, "%s", msg);
        hw_engine_destroy(e);
        return;
    }
    cr_assert(st == PL_ERR_UNSUPPORTED || st == PL_ERR_NO_DEVICE, "status %s", pl_status_str(st));
    cr_assert_null(e);
    cr_assert_gt(strlen(msg), 10);
    o.backend = HW_BACKEND_CPU;
    o.n_devices = 0;
    cr_assert_eq(hw_engine_create(&o, &e, msg, sizeof msg), PL_ERR_INVALID);
}

/* The engine runs only the original GPT block: a config with any extension
 * (RMSNorm, SwiGLU, GQA, ...) is refused when the plan is made, instead of
 * silently training the original block under the new config's name. */
Test(bad_input, a_model_the_engine_cannot_run_is_refused) {
    static const char *const configs[] = {"tiny,norm=rmsnorm", "tiny,mlp=swiglu", "tiny,parallel=1,tied=1",
                                          "tiny,tied=1"};
    hw_engine *e = cpu_engine(1, HW_ISSUE_AUTO);
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
        graph *g = tiny_graph(configs[k]);
        int pl[MAXN] = {0};
        char msg[256] = "";
        hw_program_opts o = {0};
        o.placement = pl;
        o.sched = schedule_make(1, SCHED_GPIPE);
        o.adamw = hw_adamw_default();
        hw_program *p = NULL;
        cr_assert_eq(hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg), PL_ERR_UNSUPPORTED, "%s", configs[k]);
        cr_assert_null(p);
        cr_assert(strstr(msg, "original GPT") != NULL, "%s: %s", configs[k], msg);
        graph_destroy(g);
    }
    hw_engine_destroy(e);
}
