/*
 * test_transfer_cli.c: train on one machine, use it on another, end to end
 * on the built binary (docs/transfer.md): `placer search --from` scores a
 * run's shortlist and a placement given as text on another machine's
 * profile, each row equal to what `placer simulate` predicts for the mapped
 * placement there; `placer train --resume --from` starts a fine-tune that a
 * plain resume continues; `placer report --transfer` draws the heatmap.
 * Bad input is in the catalogue (tests/reliability/test_bad_inputs.c).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../placer_run.h"

static int run(const char *args, char **out, char **err) { return placer_run(NULL, args, out, err); }

static char g_dir[256];

/* Three tiny-graph profiles: a 4 x T4 source with a short training run,
 * a 4 x H200 and a 2 x H200 target. */
static void setup(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/placer-test-transfer-cli-XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
    static const char *const specs[3][2] = {{"t4x4-pcie", "s.db"}, {"h200x4-nvlink", "t4.db"}, {"h200x2-nvlink", "t2.db"}};
    char args[1024], *err = NULL;
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "profile --from-spec %s --config tiny --db %s/%s", specs[i][0], g_dir, specs[i][1]);
        cr_assert_eq(run(args, NULL, &err), 0, "%s", err);
        free(err);
    }
    snprintf(args, sizeof args, "train --db %s/s.db --micro-batches 2 --schedule 1f1b --updates 6 --samples 4 --threads 1",
             g_dir);
    cr_assert_eq(run(args, NULL, &err), 0, "%s", err);
    free(err);
}

static void teardown(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    cr_assert_eq(system(cmd), 0);
}

/* The value of "key": in the JSON text after from (a number), or NAN. */
static double json_num(const char *from, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = strstr(from, k);
    return p ? atof(p + strlen(k)) : -1;
}

/* The string value of "key" after from, into buf. */
static void json_str(const char *from, const char *key, char *buf, size_t len) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\": \"", key);
    const char *p = strstr(from, k);
    cr_assert_not_null(p, "no %s", key);
    p += strlen(k);
    const char *e = strchr(p, '"');
    snprintf(buf, len, "%.*s", (int)(e - p), p);
}

Test(transfer_cli, a_runs_shortlist_scored_on_another_machine_is_what_simulate_predicts_there, .init = setup,
     .fini = teardown) {
    char args[1024], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "search --db %s/t2.db --from %s/s.db --run 1 --threads 1", g_dir, g_dir);
    int rc = run(args, &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    const char *want[] = {"m=2 1f1b", "single gpu 0", "dp (", "run 1 top 1", "from ", "t4x4-pcie, 4 devices",
                          "devices mapped by speed rank", "gain retained"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(out, want[i]) != NULL, "missing '%s' in:\n%s", want[i], out);
    cr_assert_null(strstr(out, "random"), "with --from the methods default to single, human and dp");
    free(out);
    free(err);
    /* the JSON rows: each transferred placement's time is simulate's */
    snprintf(args, sizeof args, "search --db %s/t2.db --from %s/s.db --run 1 --threads 1 --json", g_dir, g_dir);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    const char *row = strstr(out, "\"label\": \"run 1 top 1\"");
    cr_assert_not_null(row, "%s", out);
    char pl[512];
    json_str(row, "placement", pl, sizeof pl);
    const double step = json_num(row, "step_ms");
    cr_assert(strstr(out, "\"source_machine\": \"t4x4-pcie\"") != NULL, "%s", out);
    cr_assert(strstr(out, "\"gain_retained\": ") != NULL, "%s", out);
    for (const char *c = pl; *c; c++) cr_assert(*c == ',' || *c == '0' || *c == '1', "2 devices here: %s", pl);
    free(out);
    free(err);
    snprintf(args, sizeof args, "simulate --db %s/t2.db --placement %s --micro-batches 2 --schedule 1f1b --json", g_dir,
             pl);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    const char *k = strstr(out, "\"step_us_exact\":");
    cr_assert_not_null(k, "%s", out);
    const double sim = atof(k + strlen("\"step_us_exact\":")) * 1e-3;
    cr_assert_float_eq(sim, step, 1e-5 * step, "search says %.6f ms, simulate %.6f", step, sim);
    free(out);
    free(err);
}

Test(transfer_cli, a_placement_as_text_maps_over_the_devices_it_uses, .init = setup, .fini = teardown) {
    /* the tiny graph's 16 nodes on the source's devices 2 and 3 */
    char args[1024], *out = NULL, *err = NULL;
    snprintf(args, sizeof args,
             "search --db %s/t2.db --from %s/s.db --placement 2,2,2,2,2,2,2,2,3,3,3,3,3,3,3,3 --method single "
             "--threads 1 --json",
             g_dir, g_dir);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    const char *row = strstr(out, "\"label\": \"placement 1\"");
    cr_assert_not_null(row, "%s", out);
    char pl[256];
    json_str(row, "placement", pl, sizeof pl);
    cr_assert_str_eq(pl, "0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1");
    cr_assert(strstr(row, "\"map\": [-1, -1, 0, 1]") != NULL, "%s", row);
    free(out);
    free(err);
    /* by rank order the same here (the source's devices are equal) */
    snprintf(args, sizeof args,
             "search --db %s/t2.db --from %s/s.db --placement 2,2,2,2,2,2,2,2,3,3,3,3,3,3,3,3 --map rank "
             "--method single --threads 1",
             g_dir, g_dir);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert(strstr(out, "devices mapped by rank order") != NULL, "%s", out);
    cr_assert(strstr(out, "2->0 3->1") != NULL, "%s", out);
    free(out);
    free(err);
}

Test(transfer_cli, a_fine_tune_from_another_machine_prints_its_map_and_resumes_like_any_run, .init = setup,
     .fini = teardown) {
    char args[1024], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "train --db %s/t4.db --resume 1 --from %s/s.db --updates 3 --threads 1", g_dir, g_dir);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert(strstr(out, "run 1 starts from run 1 of") != NULL, "%s", out);
    cr_assert(strstr(out, "(t4x4-pcie), devices mapped by speed rank:") != NULL, "%s", out);
    cr_assert(strstr(out, "profile h200x4-nvlink") != NULL, "%s", out);
    cr_assert(strstr(out, "m=2 1f1b") != NULL, "the run's schedule: %s", out);
    cr_assert(strstr(out, "updates 3 (from 0)") != NULL, "%s", out);
    cr_assert(strstr(out, "3 updates x 4 samples") != NULL, "%s", out);
    free(out);
    free(err);
    snprintf(args, sizeof args, "train --db %s/t4.db --resume 1 --updates 5 --threads 1", g_dir);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert(strstr(out, "updates 5 (from 3)") != NULL, "%s", out);
    free(out);
    free(err);
}

Test(transfer_cli, report_draws_the_gain_retained_heatmap, .init = setup, .fini = teardown) {
    char path[512], args[1024], *out = NULL, *err = NULL;
    snprintf(path, sizeof path, "%s/m.tsv", g_dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("graph\tsetting\tplacer\tsource\ttarget\tseeds\tstatus\tgain\tgain_lo\tgain_hi\toom\ton_target_ms\t"
          "baseline_ms\tbest_ms\n", f);
    const char *m[3] = {"a", "b", "c"};
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 3; t++)
            if (t == 2) fprintf(f, "tiny\tB\treinforce\t%s\t%s\t3\tn/a\tnan\tnan\tnan\t0\t1.5\t2.0\t1.0\n", m[s], m[t]);
            else fprintf(f, "tiny\tB\treinforce\t%s\t%s\t3\tok\t%.2f\t0.5\t1.2\t0\t1.5\t2.0\t1.0\n", m[s], m[t],
                         1.0 - 0.4 * s);
    fclose(f);
    snprintf(args, sizeof args, "report --transfer %s --out %s/rep", path, g_dir);
    int rc = run(args, &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert(strstr(out, "1 heatmap (PNG and SVG) of 9 cells over 1 graph") != NULL, "%s", out);
    const char *files[] = {"transfer-tiny.png", "transfer-tiny.svg", "transfer-tiny.gp", "transfer.md"};
    for (int i = 0; i < 4; i++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/rep/%s", g_dir, files[i]);
        cr_assert_eq(stat(path, &st), 0, "missing %s", path);
        cr_assert_gt(st.st_size, 100);
    }
    free(out);
    free(err);
    snprintf(path, sizeof path, "%s/rep/transfer.md", g_dir);
    f = fopen(path, "r");
    char md[8192];
    size_t n = fread(md, 1, sizeof md - 1, f);
    md[n] = 0;
    fclose(f);
    cr_assert(strstr(md, "| b | 60% [50%, 120%] (1.500) |") != NULL, "%s", md);
    cr_assert(strstr(md, " n/a (1.500) |") != NULL, "%s", md);
    cr_assert(strstr(md, "| *100% [50%, 120%]* (1.500) |") != NULL, "the diagonal in italics: %s", md);
}

/* --record keeps the scored placements as a run here, which placer confirm
 * times as its RL side (the synthetic timer stands in for GPUs). */
Test(transfer_cli, recorded_placements_are_what_confirm_times_here, .init = setup, .fini = teardown) {
    char args[1024], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "search --db %s/t2.db --from %s/s.db --run 1 --top 3 --record --threads 1", g_dir, g_dir);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert(strstr(out, "recorded as run 1 of") != NULL, "%s", out);
    free(out);
    free(err);
    snprintf(args, sizeof args,
             "confirm --db %s/t2.db --run 1 --timer synthetic --micro-batches 2 --schedule 1f1b --selection-rounds 1 "
             "--confirm-rounds 2 --steps 2 --warmup 1 --no-search",
             g_dir);
    cr_assert_eq(run(args, &out, &err), 0, "%s", err);
    cr_assert(strstr(err, "from samples") != NULL, "%s", err);
    cr_assert(strstr(out, "rl top 1") != NULL || strstr(out, "rl top 2") != NULL || strstr(out, "rl top 3") != NULL,
              "%s", out);
    free(out);
    free(err);
    /* a transfer run is not a training run to resume */
    snprintf(args, sizeof args, "train --db %s/t2.db --resume 1", g_dir);
    cr_assert_eq(run(args, NULL, &err), 2);
    cr_assert(strstr(err, "a 'transfer' run, not a placer training run") != NULL, "%s", err);
    free(err);
}
