/*
 * test_step_layout.c: `placer step --layout TEXT` on the CPU backend
 * (issue 17, item 5; hw/dist/step_layout.c). A layout is the same run as the
 * options it stands for: pp stages as an explicit contiguous placement
 * over pp devices, tp x dp as forked ranks, gbs / (dp x mbs) micro-batches,
 * so the printed losses match the single-process step to the printed digit
 * (the engine tests bound the math at 1e-8 relative; the losses are printed
 * with 6 decimals, hence 2e-6). Parts the engine does not run and bad
 * layouts are one line and exit 2. `placer confirm --layout` takes the
 * layout's micro-batches and adds its pipeline split as the side 'layout'.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist_mpi.h"

/* Run the placer binary with args; stdout and stderr into out. Returns the
 * exit status. */
static int run_placer(const char *args, char *out, size_t len) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", PLACER_BIN, args);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f, "cannot run %s", PLACER_BIN);
    size_t n = fread(out, 1, len - 1, f);
    out[n] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double json_num(const char *out, const char *key) {
    const char *p = strstr(out, key);
    cr_assert_not_null(p, "no %s in %s", key, out);
    return strtod(p + strlen(key), NULL);
}

static void expect_same_loss(const char *a, const char *b) {
    cr_expect(fabs(json_num(a, "\"first\":") - json_num(b, "\"first\":")) <= 2e-6 &&
                  fabs(json_num(a, "\"last\":") - json_num(b, "\"last\":")) <= 2e-6,
              "%s\nvs\n%s", a, b);
}

#define STEPS " --warmup 1 --steps 3 --json"

Test(step_layout, pp_2_is_the_uniform_contiguous_placement) {
    char lay[8192], ref[8192];
    cr_assert_eq(run_placer("step --config tiny --cpu 2 --layout pp=2,mbs=2,gbs=4" STEPS, lay, sizeof lay), 0, "%s",
                 lay);
    /* tiny: embedding, 2 blocks of 6 nodes, final norm, head, loss */
    cr_assert_eq(run_placer("step --config tiny --cpu 2 -m 2 --placement 0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1" STEPS, ref,
                            sizeof ref),
                 0, "%s", ref);
    cr_expect(strstr(lay, "\"layout\":\"tp=1,sp=0,cp=1,pp=2,vp=1,dp=1,zero=0,mbs=2,gbs=4,recompute=none,"
                          "precision=fp32\""),
              "%s", lay);
    cr_expect(strstr(lay, "\"placement\":\"0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1\""), "%s", lay);
    cr_expect(strstr(lay, "\"micro_batches\":2"), "%s", lay);
    expect_same_loss(lay, ref);
}

Test(step_layout, explicit_stages_set_the_boundaries) {
    char out[8192];
    cr_assert_eq(run_placer("step --config tiny --cpu 2 --layout pp=2,stages=0/2,mbs=1" STEPS, out, sizeof out), 0,
                 "%s", out);
    cr_expect(strstr(out, "\"placement\":\"0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1\""), "stage 0 holds the embedding: %s",
              out);
    cr_expect(strstr(out, "\"micro_batches\":4"), "gbs 4 (the config's batch) / mbs 1: %s", out);
    cr_expect(strstr(out, "stages=0/2"), "%s", out);
}

Test(step_layout, the_text_names_the_precision_that_runs) {
    char out[8192];
    cr_assert_eq(run_placer("step --config tiny --cpu 2 --layout pp=2 --precision bf16" STEPS, out, sizeof out), 0,
                 "%s", out);
    cr_expect(strstr(out, "recompute=none,precision=bf16\"") && strstr(out, "\"precision\":\"bf16\""), "%s", out);
}

Test(step_layout, gbs_sets_the_batch_and_text_output_names_the_layout) {
    char out[8192];
    cr_assert_eq(run_placer("step --config tiny --cpu 1 --layout gbs=8,mbs=4 --warmup 0 --steps 1", out, sizeof out),
                 0, "%s", out);
    cr_expect(strstr(out, "B8") && strstr(out, "m=2"), "%s", out);
    cr_expect(strstr(out, "layout      tp=1,sp=0,cp=1,pp=1,vp=1,dp=1,zero=0,mbs=4,gbs=8"), "%s", out);
}

Test(step_layout, tp_dp_sp_and_zero_layouts_keep_the_single_process_loss, .timeout = 180) {
    char one[8192], grid[8192], z[8192];
    cr_assert_eq(run_placer("step --config tiny --cpu 1" STEPS, one, sizeof one), 0, "%s", one);
    cr_assert_eq(run_placer("step --config tiny --layout tp=2,sp=1,dp=2,mbs=1,gbs=4,precision=fp32" STEPS, grid,
                            sizeof grid),
                 0, "%s", grid);
    cr_expect(strstr(grid, "\"procs\":4,\"tp\":2,\"sp\":1,\"dp\":2") && strstr(grid, "\"rank_batch\":2") &&
                  strstr(grid, "\"micro_batches\":2"),
              "%s", grid);
    cr_expect(strstr(grid, "\"layout\":\"tp=2,sp=1,cp=1,pp=1,vp=1,dp=2,zero=0,mbs=1,gbs=4"), "%s", grid);
    expect_same_loss(grid, one);
    cr_assert_eq(run_placer("step --config tiny --layout dp=2,zero=1,pp=2,mbs=1" STEPS, z, sizeof z), 0, "%s", z);
    cr_expect(strstr(z, "\"procs\":2,\"tp\":1,\"sp\":0,\"dp\":2") && strstr(z, "\"devices_per_rank\":2") &&
                  strstr(z, "\"zero\":1"),
              "%s", z);
    expect_same_loss(z, one);
}

Test(step_layout, what_the_engine_does_not_run_and_bad_layouts_are_one_line_exit_2) {
    static const char *cases[][2] = {
        {"--layout cp=2", "does not run context parallelism yet"},
        {"--layout pp=2,vp=2,mbs=1 --cpu 2", "interleaved (virtual) pipeline"},
        {"--layout recompute=full", "does not recompute activations"},
        {"--layout dp=2,zero=2", "only the optimizer state"},
        {"--layout dp=2,zero=fsdp", "only the optimizer state"},
        {"--layout precision=fp16", "use precision=fp32, tf32 or bf16"},
        {"--layout tp=3", "must divide the attention heads"},
        {"--layout tp=x", "layout tp must be an integer"},
        {"--layout colour=blue", "unknown layout key 'colour'"},
        {"--layout pp=2,stages=1/1/1 --cpu 2", "stages"},
        {"--layout dp=3", "dp=3 does not divide the global batch of 4"},
        {"--layout pp=2 --cpu 3", "give --cpu 2, not 3"},
        {"--layout pp=2 --devices 0", "--devices must list 2 GPUs"},
        {"--layout tp=2 --procs 2", "leave out --placement"},
        {"--layout pp=2 --cpu 2 -m 2", "leave out --placement"},
        {"--layout precision=bf16 --cpu 1 --precision fp32", "contradict"},
        {"--layout ''", "empty layout"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512], out[2048];
        snprintf(args, sizeof args, "step --config tiny %s", cases[i][0]);
        int rc = run_placer(args, out, sizeof out);
        cr_expect_eq(rc, 2, "%s: exit %d: %s", args, rc, out);
        cr_expect(strstr(out, cases[i][1]) != NULL, "%s: %s", args, out);
        const char *nl = strchr(out, '\n');
        cr_expect(nl && nl[1] == 0 && !strncmp(out, "placer step: ", 13), "%s: not one line: %s", args, out);
    }
}

/* ---- placer confirm --layout ---------------------------------------------- */

/* A tiny-graph spec profile of 2 devices in dir; returns its path in db. */
static void tiny_profile(char *db, size_t len) {
    snprintf(db, len, "/tmp/placer-step-layout-%d.db", (int)getpid());
    char args[1024], out[4096];
    snprintf(args, sizeof args, "profile --from-spec h200x2-nvlink --config tiny --db %s", db);
    remove(db);
    cr_assert_eq(run_placer(args, out, sizeof out), 0, "%s", out);
}

static void remove_profile(const char *db) {
    char p[600];
    remove(db);
    snprintf(p, sizeof p, "%s-wal", db);
    remove(p);
    snprintf(p, sizeof p, "%s-shm", db);
    remove(p);
}

Test(confirm_layout, the_layouts_pipeline_is_a_side_and_sets_the_micro_batches) {
    char db[256], args[1024], out[16384];
    tiny_profile(db, sizeof db);
    snprintf(args, sizeof args,
             "confirm --db %s --run 0 --timer synthetic --layout pp=2,stages=1/1,mbs=2 --confirm-rounds 2 --steps 2",
             db);
    cr_assert_eq(run_placer(args, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "m=2 gpipe"), "gbs 4 / mbs 2: %s", out);
    cr_expect(strstr(out, "layout tp=1,sp=0,cp=1,pp=2,vp=1,dp=1,zero=0,mbs=2,gbs=4"), "%s", out);
    cr_expect(strstr(out, "  layout   pp=2 stages"), "the side 'layout' is in the table: %s", out);
    remove_profile(db);
}

Test(confirm_layout, the_engine_times_the_layout_side) {
    char db[256], args[1024], out[16384];
    tiny_profile(db, sizeof db);
    snprintf(args, sizeof args,
             "confirm --db %s --run 0 --timer cpu --layout pp=2,mbs=1 --selection-rounds 1 --confirm-rounds 2 "
             "--steps 1 --warmup 0 --no-trace",
             db);
    cr_assert_eq(run_placer(args, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "m=4 gpipe"), "gbs 4 / mbs 1: %s", out);
    const char *row = strstr(out, "  layout   pp=2 uniform");
    cr_assert_not_null(row, "%s", out);
    cr_expect(strstr(row, " +- ") != NULL && strstr(row, "OOM") == NULL, "the side was timed: %s", row);
    remove_profile(db);
}

Test(confirm_layout, layouts_confirm_cannot_time_are_one_line_exit_2) {
    char db[256];
    tiny_profile(db, sizeof db);
    static const char *cases[][2] = {
        {"--layout dp=2", "confirm times placements in one process"},
        {"--layout tp=2", "confirm times placements in one process"},
        {"--layout gbs=8", "has a batch of 4"},
        {"--layout precision=bf16", "the profile was measured in"},
        {"--layout pp=2 --micro-batches 2", "leave out --micro-batches"},
        {"--layout cp=2", "context parallelism"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[1024], out[2048];
        snprintf(args, sizeof args, "confirm --db %s --run 0 --timer synthetic %s", db, cases[i][0]);
        int rc = run_placer(args, out, sizeof out);
        cr_expect_eq(rc, 2, "%s: exit %d: %s", args, rc, out);
        cr_expect(strstr(out, cases[i][1]) != NULL, "%s: %s", args, out);
        const char *nl = strchr(out, '\n');
        cr_expect(nl && nl[1] == 0 && !strncmp(out, "placer confirm: ", 16), "%s: not one line: %s", args, out);
    }
    remove_profile(db);
}

/* ---- under mpirun ---------------------------------------------------------- */

/* As tests/hw/test_dist_mpi.c: root allowed, shared memory only. */
#define MPI_ENV                                                                                                      \
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none "      \
    "OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader ASAN_OPTIONS=detect_leaks=0"

Test(step_layout, under_mpirun_the_ranks_are_the_layouts, .timeout = 120) {
    if (!dist_mpi_built() || system("command -v mpirun >/dev/null 2>&1") != 0) {
        cr_log_warn("skipped: no MPI in this build or no mpirun on PATH");
        return;
    }
    char one[8192], mpi[8192], bad[2048], cmd[1024];
    cr_assert_eq(run_placer("step --config tiny --cpu 1" STEPS, one, sizeof one), 0, "%s", one);
    /* run_placer prefixes PLACER_BIN; mpirun goes through the shell instead */
    snprintf(cmd, sizeof cmd,
             "env " MPI_ENV " mpirun -q --oversubscribe -np 4 %s step --config tiny --layout "
             "tp=2,sp=1,dp=2,mbs=1,precision=fp32" STEPS " 2>&1",
             PLACER_BIN);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t n = fread(mpi, 1, sizeof mpi - 1, f);
    mpi[n] = 0;
    int st = pclose(f);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", mpi);
    cr_expect(strstr(mpi, "\"procs\":4,\"tp\":2,\"sp\":1,\"dp\":2") && strstr(mpi, "\"transport\":\"mpi\""), "%s",
              mpi);
    expect_same_loss(mpi, one);
    snprintf(cmd, sizeof cmd,
             "env " MPI_ENV " mpirun -q --oversubscribe -np 2 %s step --config tiny --layout tp=2,dp=2 2>&1",
             PLACER_BIN);
    f = popen(cmd, "r");
    cr_assert_not_null(f);
    n = fread(bad, 1, sizeof bad - 1, f);
    bad[n] = 0;
    st = pclose(f);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s", bad);
    cr_expect(strstr(bad, "--layout runs tp x dp = 4 processes, mpirun started 2"), "%s", bad);
}
