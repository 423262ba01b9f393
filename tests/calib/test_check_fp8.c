/*
 * test_check_fp8.c: the FP8 / Blackwell check set (calib/published_fp8.c)
 * on the shipped data/published-runs/fp8-runs.csv: the bar (mean absolute
 * error <= 10%, max <= 20% over the rows not fitted on, recomputed here
 * from the per-row figures), one fitted constant on one named row that
 * --fit reproduces, the Llama 3 rows on H100 among the simulated ones (the
 * file's reader: tests/inputs/test_fp8_runs.c).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "published_fp8.h"

static const char *DIR = PLACER_SOURCE_DIR "/data/published-runs";

Test(check_fp8, meets_the_bar_on_rows_not_fitted_on, .timeout = 60) {
    pub_fp8_result r;
    char msg[512] = "";
    cr_assert_eq(pub_fp8_check_run(DIR, 0, 0, &r, msg, sizeof msg), PL_OK, "%s", msg);
    double sum = 0, mx = 0;
    int n = 0, fitted = 0, llama_h100 = 0;
    for (int i = 0; i < r.n; i++) {
        const pub_fp8_row *w = &r.rows[i];
        if (w->run.skipped[0]) continue;
        cr_assert(w->predicted_tokens > 0, "%s", w->run.run_id);
        cr_assert(fabs(w->err - (w->predicted_tokens / w->run.published_tokens - 1)) < 1e-12);
        if (w->fitted) {
            fitted++;
            cr_assert_str_eq(w->run.run_id, PUB_FP8_FIT_ROW);
            continue;
        }
        sum += fabs(w->err);
        if (fabs(w->err) > mx) mx = fabs(w->err);
        n++;
        if (strstr(w->run.run_id, "h100") && strstr(w->run.run_id, "llama3")) llama_h100++;
    }
    cr_assert_eq(fitted, 1, "one fitted row");
    cr_assert_geq(n, 20, "the check set has %d rows scored", n);
    cr_assert_eq(n, r.rows_scored);
    cr_assert(fabs(sum / n - r.mean_abs_error) < 1e-12 && mx == r.max_abs_error);
    cr_assert_leq(sum / n, 0.10, "mean |error| %.1f%%", 100 * sum / n);
    cr_assert_leq(mx, 0.20, "max |error| %.1f%%", 100 * mx);
    cr_assert_geq(llama_h100, 2, "the NeMo 24.07 Llama 3 8B and 70B rows on H100 are in the set");
    pub_fp8_free(&r);
}

/* Every row ran in public: each simulated row fits its GPU, or is predicted
 * OOM with an audited reason (not "not audited"). The rows that say
 * "FSDP 1" are NeMo's Megatron FSDP (optim_grads_params): zero 3, weights
 * sharded, so the 70B rows on 64 GB200s hold well under the GPU. */
Test(check_fp8, rows_that_ran_fit_or_say_why, .timeout = 60) {
    pub_fp8_result r;
    char msg[512] = "";
    cr_assert_eq(pub_fp8_check_run(DIR, 0, 0, &r, msg, sizeof msg), PL_OK, "%s", msg);
    int fsdp = 0, simulated = 0;
    for (int i = 0; i < r.n; i++) {
        const pub_fp8_row *w = &r.rows[i];
        if (w->run.skipped[0]) continue;
        simulated++;
        cr_assert(w->res.mem_cap > 0, "%s", w->run.run_id);
        if (w->res.oom) {
            cr_assert_not_null(w->mem_why, "%s is OOM without a reason", w->run.run_id);
            cr_assert(strcmp(w->mem_why, "not audited") != 0, "%s: predicted OOM (%.1f of %.1f GB), not audited",
                      w->run.run_id, w->res.mem.total * 1e-9, w->res.mem_cap * 1e-9);
        } else {
            cr_assert_null(w->mem_why, "%s fits: no reason", w->run.run_id);
        }
        if (strstr(w->run.run_id, "-fsdp")) {
            fsdp++;
            cr_assert_eq(w->run.lay.zero, ZERO_3, "%s: Megatron FSDP shards the weights", w->run.run_id);
            if (strstr(w->run.run_id, "70b")) cr_assert(!w->res.oom, "%s", w->run.run_id);
        } else {
            cr_assert_eq(w->run.lay.zero, ZERO_1, "%s: the distributed optimizer", w->run.run_id);
        }
    }
    cr_assert_geq(simulated, 20);
    cr_assert_eq(fsdp, 3, "the three NeMo GB200 FSDP rows");
    cr_assert_str_eq(pub_fp8_mem_why("no-such-row"), "not audited");
    pub_fp8_free(&r);
}

Test(check_fp8, fit_reproduces_the_stored_constant, .timeout = 120) {
    pub_fp8_result r, s;
    char msg[512] = "";
    cr_assert_eq(pub_fp8_check_run(DIR, 1, 0, &r, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(pub_fp8_check_run(DIR, 0, 0, &s, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(r.fitted && !s.fitted);
    cr_assert(fabs(r.blackwell_gemm_efficiency - s.blackwell_gemm_efficiency) < 1e-3, "fitted %.5f, stored %.5f",
              r.blackwell_gemm_efficiency, s.blackwell_gemm_efficiency);
    for (int i = 0; i < r.n; i++)
        if (r.rows[i].fitted) cr_assert(fabs(r.rows[i].err) < 1e-3, "the fit row is predicted exactly");
    pub_fp8_free(&r);
    pub_fp8_free(&s);
}
