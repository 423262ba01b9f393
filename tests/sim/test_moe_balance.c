/*
 * test_moe_balance.c: an expert placement's per-layer scores
 * (sim/layout/moe_balance.h) against their closed forms (per-GPU tokens
 * under the even split, copies per token from sampled tokens and from the
 * independence estimate, the worst NIC), the MoE layer's time in the load
 * factor, and the layout step with a placement's per-layer factors
 * (layout_sim_params.moe_layer_load).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "cluster_file.h"
#include "layout_sim.h"
#include "model_config.h"
#include "model_params.h"
#include "moe_balance.h"

Test(moe_balance, gpu_loads_split_evenly_over_replicas) {
    /* 3 experts on 2 GPUs of 2 slots: expert 0 twice */
    const moe_balance_group g = {2, 2, 2, 100, 10};
    moe_balance_ctx *c = NULL;
    char msg[256] = "";
    cr_assert_eq(moe_balance_ctx_create(&g, 3, 4, &c, msg, sizeof msg), PL_OK, "%s", msg);
    const int32_t p[4] = {0, 1, 0, 2};
    const double w[3] = {8, 4, 2};
    double gl[2];
    moe_balance_layer r;
    cr_assert_eq(moe_balance_score_layer(c, p, w, NULL, 0, 0, gl, &r), PL_OK);
    cr_assert(fabs(gl[0] - 8.0) < 1e-12 && fabs(gl[1] - 6.0) < 1e-12, "%g %g", gl[0], gl[1]);
    cr_assert(fabs(r.busiest_over_mean - 8.0 / 7.0) < 1e-12);
    cr_assert_eq(r.copies_per_token, 0.0, "one node: no remote copies");
    cr_assert_eq(r.worst_nic_bytes, 0.0);
    /* an expert with load and no slot, or an id out of range, is refused */
    const int32_t q[4] = {0, 1, 0, 1}, bad[4] = {0, 1, 7, 2};
    cr_assert_eq(moe_balance_score_layer(c, q, w, NULL, 0, 0, NULL, &r), PL_ERR_INVALID);
    cr_assert_eq(moe_balance_score_layer(c, bad, w, NULL, 0, 0, NULL, &r), PL_ERR_INVALID);
    moe_balance_ctx_destroy(c);
}

Test(moe_balance, copies_per_token_from_samples_and_from_counts) {
    /* 4 experts, one per GPU, one GPU per node: 4 nodes */
    const moe_balance_group g = {4, 1, 2, 1000, 2};
    moe_balance_ctx *c = NULL;
    char msg[256] = "";
    cr_assert_eq(moe_balance_ctx_create(&g, 4, 4, &c, msg, sizeof msg), PL_OK, "%s", msg);
    const int32_t p[4] = {0, 1, 2, 3};
    const double w[4] = {1, 1, 1, 1};
    /* every sampled token picks experts 0 and 1: it reaches nodes 0 and 1; from a uniform source node
     * (N - 1) / N x 2 = 1.5 remote nodes */
    const int16_t s[6] = {0, 1, 1, 0, 0, 1};
    moe_balance_layer r;
    cr_assert_eq(moe_balance_score_layer(c, p, w, s, 3, 2, NULL, &r), PL_OK);
    cr_assert(r.copies_sampled);
    cr_assert(fabs(r.copies_per_token - 1.5) < 1e-12, "%g", r.copies_per_token);
    /* node 0 receives (N - 1) t q_0 = 3 x 1000 x 1 rows of 2 bytes */
    cr_assert(fabs(r.worst_nic_bytes - 6000.0) < 1e-9, "%g", r.worst_nic_bytes);
    /* independence: each node holds a quarter of the copies; q = 1 - (3/4)^2 */
    cr_assert_eq(moe_balance_score_layer(c, p, w, NULL, 0, 0, NULL, &r), PL_OK);
    cr_assert(!r.copies_sampled);
    const double q = 1 - 0.75 * 0.75;
    cr_assert(fabs(r.copies_per_token - 0.75 * 4 * q) < 1e-12, "%g", r.copies_per_token);
    moe_balance_ctx_destroy(c);
    /* a replica on each of two nodes: a token of that expert alone reaches each half the time */
    const moe_balance_group g2 = {2, 1, 1, 1, 1};
    cr_assert_eq(moe_balance_ctx_create(&g2, 1, 2, &c, msg, sizeof msg), PL_OK, "%s", msg);
    const int32_t p2[2] = {0, 0};
    const double w2[1] = {5};
    const int16_t s2[1] = {0};
    cr_assert_eq(moe_balance_score_layer(c, p2, w2, s2, 1, 1, NULL, &r), PL_OK);
    cr_assert(fabs(r.copies_per_token - 0.5) < 1e-12, "%g", r.copies_per_token); /* (2-1)/2 x (0.5 + 0.5) */
    moe_balance_ctx_destroy(c);
}

typedef struct {
    gpt_config cfg;
    cluster clu;
    layout lay;
} ds_setup;

static void deepseek(ds_setup *d, const char *lt) {
    char msg[512] = "", name[64];
    cr_assert_eq(model_config_load("deepseek-v3", &d->cfg, name, sizeof name, msg, sizeof msg), PL_OK, "%s", msg);
    d->cfg.seq_len = 4096;
    cr_assert_eq(cluster_load("h800-deepseek", NULL, &d->clu, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_parse(lt, &d->lay, msg, sizeof msg), PL_OK, "%s", msg);
}

Test(moe_balance, layer_time_grows_with_the_load_factor_and_the_nic_bytes) {
    ds_setup d;
    deepseek(&d, "tp=1,pp=1,dp=64,ep=64,mbs=1,gbs=64");
    moe_balance_cost m = {.clu = &d.clu, .cfg = &d.cfg, .lay = &d.lay, .training = 1};
    compute_params_default(&m.compute);
    moe_params_default(&m.moe);
    moe_balance_group g;
    moe_balance_group_of(&d.clu, &d.cfg, &d.lay, &g);
    cr_assert_eq(g.n_gpus, 64);
    cr_assert_eq(g.gpus_per_node, 8);
    cr_assert_eq(g.top_k, 8);
    cr_assert(fabs(g.tokens_per_gpu - 4096) < 1e-9 && fabs(g.row_bytes - 7168 * 2) < 1e-9);
    double c1, m1, c2, m2, c3, m3;
    cr_assert_eq(moe_balance_layer_time(&m, 1.0, NULL, 0, 1e8, &c1, &m1), PL_OK);
    cr_assert_eq(moe_balance_layer_time(&m, 1.3, NULL, 0, 1e8, &c2, &m2), PL_OK);
    cr_assert_eq(moe_balance_layer_time(&m, 1.3, NULL, 0, 4e8, &c3, &m3), PL_OK);
    cr_assert_gt(c2, c1, "the busiest GPU computes more");
    cr_assert_lt(c2, 1.3 * c1, "not in proportion: the block's shared parts do not grow");
    cr_assert(c3 == c2 && m3 > m2, "NIC bytes cost only communication");
    /* training runs four dispatches and combines, inference two */
    m.training = 0;
    double ci, mi;
    cr_assert_eq(moe_balance_layer_time(&m, 1.3, NULL, 0, 4e8, &ci, &mi), PL_OK);
    cr_assert(fabs(mi * 2 - m3) < 1e-9 * m3 && ci < c3);
    cr_assert_eq(moe_balance_layer_time(&m, 0.9, NULL, 0, 0, &ci, &mi), PL_ERR_INVALID);
}

Test(moe_balance, layout_step_takes_each_layers_factor) {
    ds_setup d;
    deepseek(&d, "tp=1,pp=8,dp=64,ep=64,mbs=1,gbs=512");
    char msg[512] = "";
    layout_sim *s = NULL;
    cr_assert_eq(layout_sim_create(&d.cfg, &d.lay, &d.clu, &s, msg, sizeof msg), PL_OK, "%s", msg);
    const int nm = gpt_moe_layers_in(&d.cfg, 0, d.cfg.n_layers);
    cr_assert_eq(nm, 58);
    double f[58];
    layout_sim_params p;
    layout_result r0, r1, r2, r3;
    layout_sim_params_default(&p);
    p.moe.imbalance = 1.0; /* balanced (the default derives a factor from expert_cv) */
    cr_assert_eq(layout_sim_run(s, &p, 0, &r0, msg, sizeof msg), PL_OK, "%s", msg);
    /* all ones: the balanced step */
    for (int i = 0; i < nm; i++) f[i] = 1.0;
    p.moe_layer_load = f, p.moe_layer_load_n = nm, p.moe_layer_load_ep = 64;
    cr_assert_eq(layout_sim_run(s, &p, 0, &r1, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(fabs(r1.step_us - r0.step_us) < 1e-6 * r0.step_us, "%g vs %g", r1.step_us, r0.step_us);
    /* all 1.25: the same as moe.imbalance 1.25 */
    for (int i = 0; i < nm; i++) f[i] = 1.25;
    cr_assert_eq(layout_sim_run(s, &p, 0, &r2, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim_params q;
    layout_sim_params_default(&q);
    q.moe.imbalance = 1.25;
    cr_assert_eq(layout_sim_run(s, &q, 0, &r3, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(fabs(r2.step_us - r3.step_us) < 1e-6 * r3.step_us, "%g vs %g", r2.step_us, r3.step_us);
    cr_assert_gt(r2.step_us, r0.step_us);
    /* another ep's placement leaves the step as it was; a factor below 1 is refused */
    p.moe_layer_load_ep = 32;
    cr_assert_eq(layout_sim_run(s, &p, 0, &r1, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(fabs(r1.step_us - r0.step_us) < 1e-6 * r0.step_us);
    f[3] = 0.5;
    cr_assert_eq(layout_sim_run(s, &p, 0, &r1, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "moe_layer_load[3] is 0.5"), "%s", msg);
    layout_sim_destroy(s);
}
