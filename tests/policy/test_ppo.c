/*
 * test_ppo.c: the PPO estimator. The clipped surrogate's derivative
 * against finite differences (scalar, and through the whole placer
 * network with ratios on both sides of the clip), the first epoch equal
 * to REINFORCE's step, and a PPO run resumed from a checkpoint on the
 * identical trajectory.
 *
 * Tolerances as in test_nn.c: central differences with h = 1e-6 in double
 * precision agree to ~1e-8; a sign or a wrong clipping branch gives O(1).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "placer_net.h"
#include "policy_fixture.h"
#include "reinforce.h"
#include "util.h"

#define FD_H 1e-6

static void check_close(double analytic, double numeric, const char *what, int i) {
    double err = fabs(analytic - numeric);
    double scale = fmax(fabs(analytic), fabs(numeric));
    cr_assert(err <= 1e-8 || err <= 1e-6 * scale, "%s[%d]: analytic %.10g numeric %.10g", what, i, analytic,
              numeric);
}

/* d surrogate / d log p = ppo_weight, on both sides of both kinks. */
Test(ppo, weight_is_the_derivative_of_the_surrogate_in_log_p) {
    const double eps = 0.2;
    const double ratios[] = {0.5, 0.79, 0.81, 0.95, 1.0, 1.05, 1.19, 1.21, 2.0};
    const double advs[] = {-1.5, -0.3, 0.4, 2.0};
    int zero = 0, nonzero = 0;
    for (size_t i = 0; i < sizeof ratios / sizeof ratios[0]; i++)
        for (size_t j = 0; j < sizeof advs / sizeof advs[0]; j++) {
            double l = log(ratios[i]), a = advs[j];
            double num = (ppo_surrogate(exp(l + FD_H), a, eps) - ppo_surrogate(exp(l - FD_H), a, eps)) / (2 * FD_H);
            double w = ppo_weight(ratios[i], a, eps);
            check_close(w, num, "ppo weight", (int)(i * 4 + j));
            zero += w == 0.0;
            nonzero += w != 0.0;
        }
    /* both branches were exercised */
    cr_assert_gt(zero, 0);
    cr_assert_gt(nonzero, 0);
    /* ratio 1: the weight is the advantage (REINFORCE) */
    cr_assert_eq(ppo_weight(1.0, 0.7, eps), 0.7);
    cr_assert_eq(ppo_weight(1.0, -0.7, eps), -0.7);
}

static double ppo_objective(placer_net *net, placer_acts *acts, const double *feat, int T, int B, int *act,
                            const double *logp_old, const double *adv, double eps) {
    double logp[8];
    cr_assert_eq(placer_net_forward(net, acts, feat, T, B, PN_GIVEN, NULL, act, logp), PL_OK);
    double L = 0;
    for (int b = 0; b < B; b++) L -= ppo_surrogate(exp(logp[b] - logp_old[b]), adv[b], eps) / B;
    return L;
}

/* The whole network: L(theta) = -(1/B) sum_b min(r_b A_b, clip(r_b) A_b),
 * with the old policy a perturbed copy, so that some ratios are clipped.
 * The analytic gradient is the REINFORCE backward with weights ppo_weight. */
Test(ppo, clipped_objective_gradient_through_the_network_matches_finite_differences) {
    enum { F = 5, D = 3, T = 4, B = 6 };
    const double eps = 0.1;
    placer_net_config cfg = {F, D, 4, 5, 3, 2, 0.5, 0.0, 0.0};
    placer_net *net = NULL;
    cr_assert_eq(placer_net_create(&cfg, 3, &net), PL_OK);
    pl_rng r;
    pl_rng_seed(&r, 9);
    for (size_t i = 0; i < net->size[PN_OUT_W]; i++)
        placer_net_param(net, PN_OUT_W)[i] = 2.0 * pl_rng_uniform(&r) - 1.0;
    placer_acts *acts = NULL;
    cr_assert_eq(placer_acts_create(net, T, B, &acts), PL_OK);
    double feat[T * F];
    for (int i = 0; i < T * F; i++) feat[i] = 2.0 * pl_rng_uniform(&r) - 1.0;
    int act[B * T];
    double logp_old[B], logp[B], w[B];
    const double adv[B] = {1.0, -0.8, 0.5, -1.2, 0.3, -0.4};
    cr_assert_eq(placer_net_forward(net, acts, feat, T, B, PN_SAMPLE, &r, act, logp_old), PL_OK);
    /* move the policy: the "current" parameters differ from the sampler's */
    for (size_t i = 0; i < net->n_params; i++) net->params[i] += 0.15 * (2.0 * pl_rng_uniform(&r) - 1.0);
    cr_assert_eq(placer_net_forward(net, acts, feat, T, B, PN_GIVEN, NULL, act, logp), PL_OK);
    int clipped = 0;
    for (int b = 0; b < B; b++) {
        w[b] = ppo_weight(exp(logp[b] - logp_old[b]), adv[b], eps);
        clipped += w[b] == 0.0;
    }
    cr_assert_gt(clipped, 0, "no ratio left the clip interval; the test would not exercise the clipped branch");
    cr_assert_lt(clipped, B);
    placer_net_zero_grad(net);
    placer_net_policy_loss(acts, w, 0.0, 1.0 / B, NULL);
    placer_net_backward(net, acts, feat);
    double *grad = malloc(sizeof *grad * net->n_params);
    memcpy(grad, net->grads, sizeof *grad * net->n_params);
    for (size_t i = 0; i < net->n_params; i++) {
        double old = net->params[i];
        net->params[i] = old + FD_H;
        double lp = ppo_objective(net, acts, feat, T, B, act, logp_old, adv, eps);
        net->params[i] = old - FD_H;
        double lm = ppo_objective(net, acts, feat, T, B, act, logp_old, adv, eps);
        net->params[i] = old;
        check_close(grad[i], (lp - lm) / (2 * FD_H), "param", (int)i);
    }
    free(grad);
    placer_acts_destroy(acts);
    placer_net_destroy(net);
}

static reinforce_options small(int updates, reinforce_algo algo, int epochs) {
    reinforce_options o;
    reinforce_options_default(&o);
    o.updates = updates;
    o.samples = 6;
    o.hidden = 16;
    o.seed = 5;
    o.algo = algo;
    o.ppo_epochs = epochs;
    return o;
}

/* PPO with one epoch is REINFORCE: same samples, same parameters. */
Test(ppo, one_epoch_equals_reinforce_and_more_epochs_differ) {
    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 4, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 2);
    char msg[256];
    reinforce_options oa = small(6, ALGO_REINFORCE, 1), ob = small(6, ALGO_PPO, 1), oc = small(6, ALGO_PPO, 4);
    reinforce *a = NULL, *b = NULL, *c = NULL;
    cr_assert_eq(reinforce_create(f.ev, &oa, &a, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_create(f.ev, &ob, &b, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_create(f.ev, &oc, &c, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_train(a, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_train(b, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_train(c, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    const placer_net *na = reinforce_get_net(a), *nb = reinforce_get_net(b), *nc = reinforce_get_net(c);
    cr_assert(memcmp(na->params, nb->params, sizeof(double) * na->n_params) == 0, "PPO(1 epoch) != REINFORCE");
    cr_assert(memcmp(na->params, nc->params, sizeof(double) * na->n_params) != 0, "4 PPO epochs changed nothing");
    reinforce_destroy(a);
    reinforce_destroy(b);
    reinforce_destroy(c);
    fixture_fini(&f);
}

/* A PPO run stopped and resumed from its serialized state ends identical. */
Test(ppo, resume_from_checkpoint_continues_the_identical_trajectory) {
    fixture f;
    fixture_init(&f, "default", "t4x4-pcie", 4, GROUPING_COLOCATE, 4, SCHED_1F1B, 0, 2);
    char msg[256];
    reinforce_options o = small(8, ALGO_PPO, 3);
    o.ppo_clip = 0.15;
    reinforce *a = NULL, *b = NULL;
    cr_assert_eq(reinforce_create(f.ev, &o, &a, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_train(a, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    reinforce_options o3 = o;
    o3.updates = 3;
    cr_assert_eq(reinforce_create(f.ev, &o3, &b, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(reinforce_train(b, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    void *blob = NULL;
    size_t n = 0;
    cr_assert_eq(reinforce_serialize(b, &blob, &n), PL_OK);
    reinforce_destroy(b);
    cr_assert_eq(reinforce_create_from_checkpoint(f.ev, blob, n, 8, &b, msg, sizeof msg), PL_OK, "%s", msg);
    free(blob);
    cr_assert_eq(reinforce_get_options(b)->algo, ALGO_PPO);
    cr_assert_eq(reinforce_get_options(b)->ppo_epochs, 3);
    cr_assert_eq(reinforce_get_options(b)->ppo_clip, 0.15);
    cr_assert_eq(reinforce_train(b, NULL, 0, NULL, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    void *ba = NULL, *bb = NULL;
    size_t na = 0, nb = 0;
    cr_assert_eq(reinforce_serialize(a, &ba, &na), PL_OK);
    cr_assert_eq(reinforce_serialize(b, &bb, &nb), PL_OK);
    cr_assert_eq(na, nb);
    cr_assert(memcmp(ba, bb, na) == 0, "resumed PPO state differs");
    free(ba);
    free(bb);
    reinforce_destroy(a);
    reinforce_destroy(b);
    fixture_fini(&f);
}

Test(ppo, bad_options_are_refused) {
    fixture f;
    fixture_init(&f, "tiny", "t4x4-pcie", 2, GROUPING_COLOCATE, 1, SCHED_GPIPE, 0, 1);
    char msg[256];
    reinforce *r = NULL;
    reinforce_options o = small(2, ALGO_PPO, 0);
    cr_assert_eq(reinforce_create(f.ev, &o, &r, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "ppo-epochs"));
    o = small(2, ALGO_PPO, 2);
    o.ppo_clip = 1.5;
    cr_assert_eq(reinforce_create(f.ev, &o, &r, msg, sizeof msg), PL_ERR_INVALID);
    reinforce_algo a;
    cr_assert_eq(reinforce_parse_algo("ppo", &a, msg, sizeof msg), PL_OK);
    cr_assert_eq(a, ALGO_PPO);
    cr_assert_eq(reinforce_parse_algo("a2c", &a, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_null(r);
    fixture_fini(&f);
}
