/* test_cmd_step.c: `placer step` on the CPU backend, as CI runs it. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run the placer binary with args; capture stdout+stderr into out. Returns
 * the exit status. */
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

Test(cmd_step, runs_a_two_device_pipeline_on_the_cpu_backend) {
    char out[8192];
    int rc = run_placer("step --config tiny --cpu 2 --micro-batches 2 --schedule 1f1b --warmup 1 --steps 3 "
                        "--placement 0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1 --json",
                        out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "\"status\":\"ok\"") != NULL, "%s", out);
    cr_assert(strstr(out, "\"median\":") != NULL && strstr(out, "\"peak_bytes\":") != NULL, "%s", out);
    /* both devices hold something */
    cr_assert(strstr(out, "\"peak_bytes\":0,") == NULL, "%s", out);
}

Test(cmd_step, text_output_names_step_time_loss_and_memory) {
    char out[8192];
    int rc = run_placer("step --config tiny --cpu 1 --warmup 0 --steps 2", out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "step time") && strstr(out, "median") && strstr(out, "loss") && strstr(out, "peak"), "%s",
              out);
}

Test(cmd_step, bad_input_is_one_line_and_exit_2) {
    static const char *cases[] = {
        "step --config tiny --cpu 2 --placement 0,1",             /* wrong length */
        "step --config tiny --cpu 2 --placement 0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,9", /* range */
        "step --config tiny --cpu 2 --micro-batches 3",           /* does not divide 4 */
        "step --config tiny --cpu 2 --schedule zigzag",
        "step --config tiny --cpu 0",
        "step --config tiny --cpu 2 --mem-cap lots",
        "step --config tiny --cpu 2 --devices 0,1",               /* both */
        "step --config nonsense --cpu 1",
        "step --config tiny --cpu 1 --frobnicate",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[4096];
        int rc = run_placer(cases[i], out, sizeof out);
        cr_expect_eq(rc, 2, "'%s' exited %d: %s", cases[i], rc, out);
        cr_expect(strncmp(out, "placer step: ", 13) == 0, "'%s': %s", cases[i], out);
        char *nl = strchr(out, '\n');
        cr_expect(nl && nl[1] == 0, "'%s' printed more than one line: %s", cases[i], out);
    }
}

Test(cmd_step, an_oom_under_a_cap_is_a_clear_error) {
    char out[4096];
    int rc = run_placer("step --config tiny --cpu 2 --mem-cap 64KB", out, sizeof out);
    cr_assert_eq(rc, 1, "%s", out);
    cr_assert(strstr(out, "device 0 needs") && strstr(out, "cap"), "%s", out);
}

Test(cmd_step, a_missing_gpu_is_an_error_not_a_crash) {
    char out[4096];
    int rc = run_placer("step --config tiny --devices 0", out, sizeof out);
    if (rc == 0) return; /* a machine with a GPU: that is fine too */
    cr_assert(rc == 1 || rc == 2, "exit %d: %s", rc, out);
    cr_assert(strncmp(out, "placer step: ", 13) == 0, "%s", out);
}

/* ---- precision (issue 16) ---- */

Test(cmd_step, precision_bf16_runs_and_is_reported) {
    char out[8192];
    int rc = run_placer("step --config tiny --cpu 1 --warmup 1 --steps 2 --precision bf16 --json", out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "\"precision\":\"bf16\"") != NULL, "%s", out);
    rc = run_placer("step --config tiny --cpu 1 --precision fp16", out, sizeof out);
    cr_assert_eq(rc, 2, "%s", out);
    cr_assert(strstr(out, "fp32, tf32 or bf16") != NULL && strchr(out, '\n') == strrchr(out, '\n'), "%s", out);
    rc = run_placer("step --config tiny --cpu 1 --strict-fp32 --precision bf16", out, sizeof out);
    cr_assert_eq(rc, 2, "%s", out);
}

Test(cmd_step, a_profile_records_its_precision_and_refuses_another) {
    char out[16384], path[256], args[512];
    snprintf(path, sizeof path, "/tmp/placer-test-prec-%d.db", (int)getpid());
    remove(path);
    snprintf(args, sizeof args, "profile --db %s --cpu 1 --config tiny --micro-batch-sizes 4 --reps 3 --precision bf16",
             path);
    int rc = run_placer(args, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "bf16") != NULL, "%s", out);
    snprintf(args, sizeof args, "profile show --db %s --config tiny", path);
    rc = run_placer(args, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "precision bf16") != NULL, "%s", out);
    snprintf(args, sizeof args, "profile show --db %s --config tiny --json", path);
    rc = run_placer(args, out, sizeof out);
    cr_assert(rc == 0 && strstr(out, "\"precision\":\"bf16\"") != NULL, "%s", out);
    /* each call's workspace on its own: the bf16 MLP's forward holds the
     * rounded copy of its input (B T C floats), its backward 7 B T C */
    json_error_t jerr;
    json_t *doc = json_loads(out, 0, &jerr);
    cr_assert_not_null(doc, "%s: %s", jerr.text, out);
    json_t *nodes = json_object_get(doc, "nodes");
    int n_mlp = 0;
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        json_t *nd = json_array_get(nodes, i);
        if (strcmp(json_string_value(json_object_get(nd, "kind")), "mlp") != 0) continue;
        const json_int_t f = json_integer_value(json_object_get(nd, "fwd_workspace_bytes"));
        const json_int_t b = json_integer_value(json_object_get(nd, "bwd_workspace_bytes"));
        const json_int_t w = json_integer_value(json_object_get(nd, "workspace_bytes"));
        cr_assert(f > 0 && f < b && w == b, "node %zu: forward %lld, backward %lld, workspace %lld", i,
                  (long long)f, (long long)b, (long long)w);
        n_mlp++;
    }
    cr_assert_gt(n_mlp, 0, "%s", out);
    json_decref(doc);
    /* the same file in tf32: refused, one line, exit 2 */
    snprintf(args, sizeof args, "profile --db %s --cpu 1 --config tiny --micro-batch-sizes 4 --reps 3", path);
    rc = run_placer(args, out, sizeof out);
    cr_assert_eq(rc, 2, "%s", out);
    cr_assert(strstr(out, "measured in bf16, not tf32") != NULL, "%s", out);
    remove(path);
}
