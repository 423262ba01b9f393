/*
 * test_dist_step.c: the one runner of timed steps (hw/dist/dist_step.h),
 * on the CPU backend with the tiny GPT, in process and over forked ranks.
 *
 * What it holds the runner to:
 *   - the same job in process and over 2 data-parallel ranks gives the same
 *     first-step loss: the loss is computed before the first update, and
 *     the ranks' mean of their half-batch losses is the full-batch loss up
 *     to the summation order (a few float roundings of values near 4, so
 *     1e-6 relative is ~10x the measured difference, while a rank that
 *     took the wrong rows of the batch moves it by ~1e-3);
 *   - over a tp 2 x dp 2 grid the first loss is again that loss (tensor
 *     parallelism splits the math, not the batch), the rank batch is half
 *     the global one, and the result says the ranks' transport;
 *   - one launched rank without a group (a layout of one rank, as
 *     `placer confirm --layout` runs it) reports no collectives, with its
 *     group of one (`placer step --procs 1`) the all-reduce path;
 *   - bad input is refused before anything runs, and says which part
 *     refused: a placement of the wrong length (with the graph's node
 *     count), a cap that will not parse, a cap count that fits neither one
 *     nor one per device, options that run in one process only.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "dist_step.h"

static void tiny_job(dist_step_job *j) {
    char msg[256];
    dist_step_job_default(j);
    cr_assert_eq(gpt_config_parse("tiny", &j->cfg, msg, sizeof msg), PL_OK, "%s", msg);
    j->warmup = 0;
    j->steps = 1;
}

static void run_ok(const dist_step_job *j, dist_step_result *r) {
    char msg[512] = "";
    cr_assert_eq(dist_step_run(j, r, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(r->here, 1);
    cr_assert(r->t.median_us > 0);
}

Test(dist_step, ranks_and_process_agree_on_the_first_loss, .timeout = 120) {
    dist_step_job j;
    dist_step_result one, two, grid;
    tiny_job(&j);
    run_ok(&j, &one);
    cr_expect_eq(one.rank_batch, j.cfg.batch);
    cr_expect_str_eq(one.transport, "");
    j.procs = 2;
    run_ok(&j, &two);
    cr_expect_eq(two.rank_batch, j.cfg.batch / 2);
    cr_expect(strlen(two.transport) > 0);
    cr_expect(fabs(two.t.first_loss - one.t.first_loss) <= 1e-6 * fabs(one.t.first_loss), "%.9f vs %.9f",
              two.t.first_loss, one.t.first_loss);
    j.procs = 4;
    j.tp = 2;
    run_ok(&j, &grid);
    cr_expect_eq(grid.rank_batch, j.cfg.batch / 2);
    cr_expect(fabs(grid.t.first_loss - one.t.first_loss) <= 1e-6 * fabs(one.t.first_loss), "%.9f vs %.9f",
              grid.t.first_loss, one.t.first_loss);
}

Test(dist_step, one_rank_has_a_group_only_when_asked, .timeout = 60) {
    dist_step_job j;
    dist_step_result none, group;
    tiny_job(&j);
    j.procs = 1;
    run_ok(&j, &none);
    cr_expect_str_eq(none.collectives, "none");
    j.one_rank_group = 1;
    run_ok(&j, &group);
    cr_expect_str_neq(group.collectives, "none");
}

Test(dist_step, bad_input_says_which_part_refused) {
    dist_step_job j;
    dist_step_result r;
    char msg[512];
    tiny_job(&j);
    j.n_dev = 2;
    j.placement = "0,1";
    cr_expect_neq(dist_step_run(&j, &r, msg, sizeof msg), PL_OK);
    cr_expect_eq(r.failed, DIST_STEP_FAILED_PLACEMENT);
    cr_expect_eq(r.n_nodes, 16, "tiny: embedding, 2 blocks of 6, norm, head, loss");
    j.procs = 2; /* refused before any rank starts */
    cr_expect_neq(dist_step_run(&j, &r, msg, sizeof msg), PL_OK);
    cr_expect_eq(r.failed, DIST_STEP_FAILED_PLACEMENT);
    j.procs = 0;
    j.placement = NULL;
    j.mem_cap = "lots";
    cr_expect_eq(dist_step_run(&j, &r, msg, sizeof msg), PL_ERR_INVALID);
    cr_expect_eq(r.failed, DIST_STEP_FAILED_CAP, "%s", msg);
    j.mem_cap = "1GB,2GB,3GB";
    cr_expect_eq(dist_step_run(&j, &r, msg, sizeof msg), PL_ERR_INVALID);
    cr_expect_eq(r.failed, DIST_STEP_FAILED_CAP_COUNT, "%s", msg);
    cr_expect(strstr(msg, "(2), got 3") != NULL, "%s", msg);
    j.mem_cap = "50%";
    j.procs = 2;
    cr_expect_eq(dist_step_run(&j, &r, msg, sizeof msg), PL_ERR_INVALID);
    cr_expect(strstr(msg, "one process only") != NULL, "%s", msg);
    j.mem_cap = NULL;
    j.tp = 3;
    cr_expect_eq(dist_step_run(&j, &r, msg, sizeof msg), PL_ERR_INVALID, "tp 3 does not divide 2 ranks");
    j.tp = 1;
    j.steps = 0;
    cr_expect_eq(dist_step_run(&j, &r, msg, sizeof msg), PL_ERR_INVALID);
}
