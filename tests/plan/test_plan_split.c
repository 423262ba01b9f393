/*
 * test_plan_split.c: the planner's stage split without the simulator. The
 * DP against brute force over every composition on small synthetic stage
 * costs (linear, non-linear, with memory holes, heterogeneous), and
 * DeepSpeed's partition_balanced against outputs of DeepSpeed's own Python
 * (ds_utils.partition_balanced as shipped since its PR 4312, run on the
 * same weights with numpy replaced by lists).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "plan.h"
#include "util.h"

/* Every split of L into S parts >= min_n, by recursion: min of the objective. */
static double brute(int S, int L, int min_n, const double *cost, double w, int s, int left, double mx, double sum) {
    if (s == S) return left == 0 ? w * mx + sum : INFINITY;
    double best = INFINITY;
    for (int k = min_n; k <= left; k++) {
        const double c = cost[s * (L + 1) + k];
        if (!isfinite(c)) continue;
        double v = brute(S, L, min_n, cost, w, s + 1, left - k, mx > c ? mx : c, sum + c);
        if (v < best) best = v;
    }
    return best;
}

static double objective(int S, int L, const double *cost, double w, const int *n) {
    double mx = 0, sum = 0;
    int tot = 0;
    for (int s = 0; s < S; s++) {
        const double c = cost[s * (L + 1) + n[s]];
        mx = c > mx ? c : mx;
        sum += c;
        tot += n[s];
    }
    cr_assert_eq(tot, L, "the split holds %d layers, not %d", tot, L);
    return w * mx + sum;
}

Test(plan_split, dp_equals_brute_force_on_random_costs) {
    pl_rng r;
    pl_rng_seed(&r, 14);
    int cases = 0, infeasible = 0;
    for (int t = 0; t < 400; t++) {
        const int S = 1 + pl_rng_int(&r, 5), L = S + pl_rng_int(&r, 9), min_n = pl_rng_int(&r, 2);
        const double w = pl_rng_int(&r, 4) == 0 ? 0.0 : pl_rng_uniform(&r) * 20;
        const int kind = pl_rng_int(&r, 3);
        double *cost = malloc(sizeof *cost * (size_t)(S * (L + 1)));
        for (int s = 0; s < S; s++) {
            /* heterogeneous stages: own speed, own fixed cost (embedding / head) */
            const double fixed = pl_rng_uniform(&r) * 5, slope = 0.5 + pl_rng_uniform(&r) * 3;
            const int cap = kind == 2 ? 1 + pl_rng_int(&r, L) : L; /* memory: at most cap layers */
            for (int n = 0; n <= L; n++) {
                double c = kind == 0 ? fixed + slope * n : fixed + pl_rng_uniform(&r) * 10; /* non-monotone too */
                cost[s * (L + 1) + n] = n > cap ? INFINITY : c;
            }
        }
        int n[8];
        const double got = plan_split_dp(S, L, min_n, cost, w, n);
        const double want = brute(S, L, min_n, cost, w, 0, L, 0, 0);
        if (!isfinite(want)) {
            cr_assert(isinf(got), "case %d: DP found %g where no split is feasible", t, got);
            infeasible++;
        } else {
            cr_assert(fabs(got - want) <= 1e-9 * fabs(want), "case %d (S=%d L=%d): DP %.12g, brute force %.12g", t, S,
                      L, got, want);
            cr_assert(fabs(objective(S, L, cost, w, n) - got) <= 1e-9 * fabs(got), "case %d: split does not give %g", t,
                      got);
            for (int s = 0; s < S; s++) cr_assert_geq(n[s], min_n);
            cases++;
        }
        free(cost);
    }
    cr_assert_gt(cases, 250);
    cr_assert_gt(infeasible, 0); /* the memory holes made some cases impossible */
}

Test(plan_split, heavy_first_and_last_stages_get_fewer_layers) {
    /* 4 stages, 16 layers of cost 1, embedding 3 on the first, head 5 on the last */
    const int S = 4, L = 16;
    double cost[4 * 17];
    for (int s = 0; s < S; s++)
        for (int n = 0; n <= L; n++) cost[s * (L + 1) + n] = n + (s == 0 ? 3 : 0) + (s == S - 1 ? 5 : 0);
    int n[4];
    double v = plan_split_dp(S, L, 1, cost, 7.0, n);
    cr_assert(isfinite(v));
    /* total 24 over 4 stages: the bottleneck is at least 6; 3+3, 6, 6, 1+5 reach it */
    cr_assert_eq(n[0], 3);
    cr_assert_eq(n[1] + n[2], 12);
    cr_assert_eq(n[3], 1);
}

Test(plan_split, faster_gpu_gets_more_layers) {
    /* two stages, the second twice as slow per layer (an A100 stage after an H100 one) */
    const int S = 2, L = 12;
    double cost[2 * 13];
    for (int n = 0; n <= L; n++) {
        cost[n] = 1.0 * n;
        cost[13 + n] = 2.0 * n;
    }
    int n[2];
    cr_assert(isfinite(plan_split_dp(S, L, 1, cost, 3.0, n)));
    cr_assert_eq(n[0], 8);
    cr_assert_eq(n[1], 4);
}

Test(plan_split, impossible_inputs) {
    double cost[3] = {0, 1, 2};
    int n[2] = {-7, -7};
    cr_assert(isinf(plan_split_dp(2, 2, 2, cost, 1.0, n))); /* 2 stages x 2 layers > 2 */
    cr_assert(isinf(plan_split_dp(0, 2, 1, cost, 1.0, n)));
    cr_assert(isinf(plan_split_dp(1, 2, 1, cost, -1.0, n)));
    cr_assert_eq(n[0], -7);
}

/* Outputs of DeepSpeed's partition_balanced on the same inputs. */
Test(plan_split, partition_balanced_matches_deepspeed) {
    struct { double w[16]; int n, S, parts[8]; } cases[] = {
        {{3, 1, 4, 1, 5, 9, 2, 6}, 8, 3, {0, 5, 6, 8}},
        {{5, 1, 1, 1, 1, 1, 1, 5}, 8, 4, {0, 1, 4, 7, 8}},
        {{2, 2, 2, 2, 2, 2}, 6, 3, {0, 2, 4, 6}},
        {{1, 2, 3}, 3, 5, {0, 1, 2, 3, 3, 3}}, /* fewer items than parts: partition_uniform */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int parts[8];
        cr_assert_eq(plan_partition_balanced(cases[i].w, cases[i].n, cases[i].S, parts), PL_OK);
        for (int p = 0; p <= cases[i].S; p++)
            cr_assert_eq(parts[p], cases[i].parts[p], "case %zu boundary %d: %d, DeepSpeed %d", i, p, parts[p],
                         cases[i].parts[p]);
    }
}

Test(plan_split, deepspeed_parameters_split_of_the_default_gpt) {
    gpt_config c;
    char msg[256];
    cr_assert_eq(gpt_config_parse("default", &c, msg, sizeof msg), PL_OK);
    int n[6];
    /* DeepSpeed: parts [0, 4, 8] over [embedding, 6 layers, head] */
    cr_assert_eq(plan_deepspeed_parameters_split(&c, 2, n, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(n[0], 3);
    cr_assert_eq(n[1], 3);
    /* DeepSpeed: parts [0, 1, 7, 8]: the embedding alone on stage 0, no layout can say that */
    cr_assert_eq(plan_deepspeed_parameters_split(&c, 3, n, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "stage 0"), "%s", msg);
    cr_assert_eq(gpt_config_parse("gpt12", &c, msg, sizeof msg), PL_OK);
    /* DeepSpeed: parts [0, 7, 14] over 14 specs */
    cr_assert_eq(plan_deepspeed_parameters_split(&c, 2, n, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(n[0], 6);
    cr_assert_eq(n[1], 6);
}
