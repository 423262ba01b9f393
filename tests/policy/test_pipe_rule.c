/*
 * test_pipe_rule.c: the pipeline prior's device rule and the training
 * schedules (reinforce.h: pipe_devices, pipe_anneal, lr_decay,
 * entropy_decay).
 *
 * - PIPE_DEVICES_ESTIMATE on 2 x H200 + 2 x L40S leaves the two L40S
 *   without a stage for the 6-layer GPT (the DP's estimate of the
 *   H200-only split is lower), the first policy's greedy placement then
 *   uses the H200s only and is faster than the all-device prior's; on 4
 *   identical T4s it gives every device a stage and the very same
 *   training as PIPE_DEVICES_ALL.
 * - With the schedules on, a run stopped after some updates and resumed
 *   from its checkpoint ends in the same state as one run straight
 *   through; the annealed prior ends at 0, and the schedules change the
 *   training (different final state than without them).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy_fixture.h"
#include "reinforce.h"

static reinforce_options hier(int updates, reinforce_algo algo) {
    reinforce_options o;
    reinforce_options_default(&o);
    o.updates = updates;
    o.samples = 4;
    o.hidden = 16;
    o.seed = 5;
    o.grouper = GROUPER_HIER;
    o.n_groups = 8;
    o.grouper_hidden = 16;
    o.algo = algo;
    o.ppo_epochs = 2;
    o.pipe_prior = 8;
    o.group_prior = 8;
    return o;
}

static void stage_mask(policy_evaluator *ev, const reinforce_options *o, int *mask, policy_eval *fav,
                       int *fav_dev) {
    reinforce *r = NULL;
    char msg[256];
    cr_assert_eq(reinforce_create(ev, o, &r, msg, sizeof msg), PL_OK, "%s", msg);
    reinforce_pipe_stage_devices(r, mask);
    cr_assert_eq(reinforce_favourite(r, fav_dev, fav), PL_OK);
    reinforce_destroy(r);
}

Test(pipe_rule, estimate_drops_the_slow_devices_on_a_mixed_machine) {
    fixture f;
    fixture_init(&f, "default", "h200x2-l40sx2", 4, GROUPING_LEARNED, 4, SCHED_1F1B, 0, 1);
    const int N = f.g->n_nodes;
    int *fa = malloc(sizeof *fa * (size_t)N), *fe = malloc(sizeof *fe * (size_t)N);
    int ma[4], me[4];
    policy_eval ea, ee;
    reinforce_options o = hier(1, ALGO_REINFORCE);
    stage_mask(f.ev, &o, ma, &ea, fa);
    o.pipe_devices = PIPE_DEVICES_ESTIMATE;
    stage_mask(f.ev, &o, me, &ee, fe);
    for (int d = 0; d < 4; d++) cr_assert_eq(ma[d], 1, "all: device %d has a stage", d);
    cr_assert(me[0] && me[1] && !me[2] && !me[3], "estimate: stages on %d%d%d%d", me[0], me[1], me[2], me[3]);
    int slow_a = 0, slow_e = 0;
    for (int n = 0; n < N; n++) {
        slow_a += fa[n] >= 2;
        slow_e += fe[n] >= 2;
    }
    cr_assert_gt(slow_a, 0, "the all-device prior's first policy uses an L40S");
    cr_assert_eq(slow_e, 0, "the rule's first policy keeps off the L40S");
    cr_assert_lt(ee.cost_us, ea.cost_us, "rule %.1f us, all %.1f us", ee.cost_us, ea.cost_us);
    /* without the pipeline prior the rule has nothing to act on */
    o.pipe_prior = 0;
    stage_mask(f.ev, &o, me, &ee, fe);
    for (int d = 0; d < 4; d++) cr_assert_eq(me[d], 1);
    free(fa);
    free(fe);
    fixture_fini(&f);
}

Test(pipe_rule, estimate_is_all_on_identical_devices) {
    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 4, GROUPING_LEARNED, 4, SCHED_1F1B, 0, 1);
    char msg[256];
    reinforce_options o = hier(3, ALGO_REINFORCE), oe = o;
    oe.pipe_devices = PIPE_DEVICES_ESTIMATE;
    reinforce *a = NULL, *b = NULL;
    cr_assert_eq(reinforce_create(f.ev, &o, &a, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_create(f.ev, &oe, &b, msg, sizeof msg), PL_OK, "%s", msg);
    int mb[4];
    reinforce_pipe_stage_devices(b, mb);
    for (int d = 0; d < 4; d++) cr_assert_eq(mb[d], 1, "device %d has a stage", d);
    cr_assert_eq(reinforce_train(a, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_train(b, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_best_cost(a), reinforce_best_cost(b));
    const placer_net *na = reinforce_get_net(a), *nb = reinforce_get_net(b);
    cr_assert_eq(na->n_params, nb->n_params);
    cr_assert(memcmp(na->params, nb->params, sizeof(double) * na->n_params) == 0, "same training");
    reinforce_destroy(a);
    reinforce_destroy(b);
    fixture_fini(&f);
}

static int stop_at(void *ud, const reinforce_progress *p) { return p->update + 1 >= *(const int *)ud; }

static void *state(const reinforce *r, size_t *n) {
    void *blob = NULL;
    cr_assert_eq(reinforce_serialize(r, &blob, n), PL_OK);
    return blob;
}

Test(pipe_rule, schedules_resume_identically_and_change_the_training) {
    fixture f;
    fixture_init(&f, "default", "h200x2-l40sx2", 4, GROUPING_LEARNED, 4, SCHED_1F1B, 0, 1);
    char msg[256];
    reinforce_options o = hier(6, ALGO_PPO);
    o.pipe_devices = PIPE_DEVICES_ESTIMATE;
    reinforce_options plain = o;
    o.pipe_anneal = 1;
    o.lr_decay = 1.0;
    o.entropy_decay = 0.5;
    reinforce *a = NULL, *b = NULL, *c = NULL;
    cr_assert_eq(reinforce_create(f.ev, &o, &a, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_get_net(a)->cfg.pipe, 8.0, "full strength at the first update");
    cr_assert_eq(reinforce_train(a, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_get_net(a)->cfg.pipe, 0.0, "annealed to 0 after the last update");
    /* stopped after 2 updates, resumed from the checkpoint */
    int stop = 2;
    cr_assert_eq(reinforce_create(f.ev, &o, &b, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_train(b, NULL, 0, stop_at, &stop, msg, sizeof msg), PL_ERR_INTERRUPTED);
    cr_assert_eq(reinforce_updates_done(b), 2);
    cr_assert(fabs(reinforce_get_net(b)->cfg.pipe - 8.0 * 4 / 6) < 1e-12, "strength after 2 of 6 updates");
    size_t n = 0;
    void *blob = state(b, &n);
    reinforce_destroy(b);
    b = NULL;
    cr_assert_eq(reinforce_create_from_checkpoint(f.ev, blob, n, 0, &b, msg, sizeof msg), PL_OK, "%s", msg);
    free(blob);
    const reinforce_options *ob = reinforce_get_options(b);
    cr_assert(ob->pipe_anneal == 1 && ob->lr_decay == 1.0 && ob->entropy_decay == 0.5 &&
              ob->pipe_devices == PIPE_DEVICES_ESTIMATE, "the checkpoint keeps the options (version 4)");
    cr_assert(fabs(reinforce_get_net(b)->cfg.pipe - 8.0 * 4 / 6) < 1e-12, "the restored schedule");
    cr_assert_eq(reinforce_train(b, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    size_t na = 0, nb = 0;
    void *ba = state(a, &na), *bb = state(b, &nb);
    cr_assert_eq(na, nb);
    cr_assert(memcmp(ba, bb, na) == 0, "resumed state differs");
    /* the same run without the schedules ends elsewhere, and so does each
     * schedule alone */
    cr_assert_eq(reinforce_create(f.ev, &plain, &c, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_train(c, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    const placer_net *pa = reinforce_get_net(a), *pc = reinforce_get_net(c);
    cr_assert(memcmp(pa->params, pc->params, sizeof(double) * pa->n_params) != 0, "the schedules changed nothing");
    for (int which = 0; which < 3; which++) {
        reinforce_options one = plain;
        if (which == 0) one.pipe_anneal = 1;
        if (which == 1) one.lr_decay = 1.0;
        if (which == 2) one.entropy_decay = 1.0;
        reinforce *d = NULL;
        cr_assert_eq(reinforce_create(f.ev, &one, &d, msg, sizeof msg), PL_OK, "%s", msg);
        cr_assert_eq(reinforce_train(d, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
        const placer_net *pd = reinforce_get_net(d);
        cr_assert(memcmp(pd->params, pc->params, sizeof(double) * pd->n_params) != 0, "schedule %d changed nothing",
                  which);
        reinforce_destroy(d);
    }
    free(ba);
    free(bb);
    reinforce_destroy(a);
    reinforce_destroy(b);
    reinforce_destroy(c);
    fixture_fini(&f);
}

Test(pipe_rule, bad_schedules_are_refused) {
    fixture f;
    fixture_init(&f, "tiny", "t4x4-pcie", 2, GROUPING_LEARNED, 1, SCHED_GPIPE, 0, 1);
    char msg[256];
    reinforce *r = NULL;
    reinforce_options o = hier(1, ALGO_REINFORCE);
    o.lr_decay = 1.5;
    cr_assert_eq(reinforce_create(f.ev, &o, &r, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "--lr-decay"), "%s", msg);
    o = hier(1, ALGO_REINFORCE);
    o.entropy_decay = -0.1;
    cr_assert_eq(reinforce_create(f.ev, &o, &r, msg, sizeof msg), PL_ERR_INVALID);
    o = hier(1, ALGO_REINFORCE);
    o.pipe_devices = (reinforce_pipe_devices)7;
    cr_assert_eq(reinforce_create(f.ev, &o, &r, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_null(r);
    reinforce_pipe_devices pd;
    cr_assert_eq(reinforce_parse_pipe_devices("estimate", &pd, NULL, 0), PL_OK);
    cr_assert_eq(pd, PIPE_DEVICES_ESTIMATE);
    cr_assert_eq(reinforce_parse_pipe_devices("some", &pd, msg, sizeof msg), PL_ERR_INVALID);
    fixture_fini(&f);
}
