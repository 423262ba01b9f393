/*
 * test_plan_cli.c: `placer plan` end to end, as child processes of the
 * built binary on the shipped cluster files and profile: the table, --json
 * parsed back, each --export parsed by the same reading as test_export.c's
 * (here only its key names), the profile path against the exhaustive
 * search, nothing fitting (exit 1 with the memory needed) and bad input
 * (one line, exit 2).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run the placer binary with args; capture stdout and stderr. Exit code. */
static int run_plan(const char *args, char **out, char **err) {
    char cmd[2048], of[] = "/tmp/placer-test-plan-out-XXXXXX", ef[] = "/tmp/placer-test-plan-err-XXXXXX";
    close(mkstemp(of));
    close(mkstemp(ef));
    snprintf(cmd, sizeof cmd, "cd %s && %s %s >%s 2>%s", PLACER_SOURCE_DIR, PLACER_BIN, args, of, ef);
    int rc = system(cmd);
    const char *files[2] = {of, ef};
    char **dst[2] = {out, err};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "r");
        size_t cap = 1 << 16, n = 0, k;
        char *buf = malloc(cap);
        while (f && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
            n += k;
            if (n + 1 >= cap) buf = realloc(buf, cap *= 2);
        }
        buf[n] = 0;
        if (f) fclose(f);
        unlink(files[i]);
        *dst[i] = buf;
    }
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

Test(plan_cli, table_marks_the_best_that_fits) {
    char *out, *err;
    int rc = run_plan("plan --model gpt12 --cluster h200x2 --global-batch 16 --fix pp=2,dp=1 --splits", &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    const char *want[] = {"considered", "pruned by memory", "simulated", "1* ", "best that fits", "time: compute",
                          "memory (stage", "stage splits", "uniform", "DeepSpeed parameters"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) cr_assert(strstr(out, want[i]), "no '%s' in\n%s", want[i], out);
    free(out);
    free(err);
}

Test(plan_cli, json_parses_and_the_top_is_sorted) {
    char *out, *err;
    int rc = run_plan("plan --model default --cluster h200x2 --global-batch 16 --top 4 --json "
                      "--compare pp=2,mbs=4,gbs=16",
                      &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    json_error_t e;
    json_t *j = json_loads(out, 0, &e);
    cr_assert(j, "not JSON: %s\n%s", e.text, out);
    json_t *top = json_object_get(j, "top"), *s = json_object_get(j, "search");
    cr_assert_eq(json_array_size(top), 4);
    const long long cons = json_integer_value(json_object_get(s, "considered"));
    cr_assert_eq(cons, json_integer_value(json_object_get(s, "pruned_memory")) +
                           json_integer_value(json_object_get(s, "pruned_bound")) +
                           json_integer_value(json_object_get(s, "simulated")));
    double prev = 0;
    for (size_t i = 0; i < json_array_size(top); i++) {
        json_t *p = json_object_get(json_array_get(top, i), "predicted");
        const double t = json_real_value(json_object_get(p, "step_ms"));
        cr_assert_geq(t, prev);
        cr_assert(json_is_false(json_object_get(p, "oom")));
        prev = t;
    }
    json_t *cmp = json_object_get(j, "compare");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(cmp, "layout"), "pp")), 2);
    /* the plan searched that layout too: it is not faster than the best */
    cr_assert_geq(json_real_value(json_object_get(json_object_get(cmp, "predicted"), "step_ms")),
                  json_real_value(json_object_get(json_object_get(json_array_get(top, 0), "predicted"), "step_ms")));
    json_decref(j);
    free(out);
    free(err);
}

Test(plan_cli, exports_write_only_the_format) {
    const char *fmts[] = {"megatron", "torchtitan", "deepspeed", "json"};
    const char *mark[] = {"--tensor-model-parallel-size 1 \\\n", "[parallelism]\n", "\"ds_config\"", "\"layout\""};
    for (int i = 0; i < 4; i++) {
        char args[256], *out, *err;
        snprintf(args, sizeof args, "plan --model gpt12 --cluster h200x2 --global-batch 16 --fix pp=2,dp=1 --export %s",
                 fmts[i]);
        int rc = run_plan(args, &out, &err);
        cr_assert_eq(rc, 0, "%s: %s", fmts[i], err);
        cr_assert(strstr(out, mark[i]), "%s export:\n%s", fmts[i], out);
        cr_assert(strstr(out, "pipeline") || strstr(out, "\"pp\": 2"), "%s export says nothing of the pipeline", fmts[i]);
        cr_assert_eq(lines(err), 1, "one summary line on stderr: %s", err);
        free(out);
        free(err);
    }
}

Test(plan_cli, profile_plan_at_m4_equals_the_exhaustive_search) {
    char *out, *err, *o2, *e2;
    int rc = run_plan("plan --db data/h200x2.db --fix mbs=4 --json", &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    json_error_t e;
    json_t *j = json_loads(out, 0, &e);
    cr_assert(j, "%s\n%s", e.text, out);
    json_t *best = json_array_get(json_object_get(j, "plans"), 0);
    cr_assert_eq(json_integer_value(json_object_get(best, "micro_batches")), 4);
    const double plan_ms = json_real_value(json_object_get(best, "step_ms"));
    rc = run_plan("search --db data/h200x2.db --micro-batches 4 --schedule 1f1b --method exhaustive", &o2, &e2);
    cr_assert_eq(rc, 0, "%s", e2);
    const char *row = strstr(o2, "\nexhaustive ");
    cr_assert(row, "%s", o2);
    const double ex_ms = strtod(row + strlen("\nexhaustive "), NULL);
    cr_assert(ex_ms > 0);
    /* issue 14: within 0.5% of the exhaustive search's best placement */
    cr_assert_leq(plan_ms, ex_ms * 1.005, "plan %.3f ms, exhaustive %.3f ms", plan_ms, ex_ms);
    json_decref(j);
    free(out);
    free(err);
    free(o2);
    free(e2);
}

Test(plan_cli, nothing_fits_exits_1_with_the_memory_needed) {
    char *out, *err;
    int rc = run_plan("plan --model megatron-1t --cluster h200x2 --global-batch 16", &out, &err);
    cr_assert_eq(rc, 1, "%s", err);
    cr_assert_eq(lines(err), 1, "%s", err);
    cr_assert(strstr(err, "no layout of 2 GPUs fits") && strstr(err, "GB per GPU"), "%s", err);
    free(out);
    free(err);
}

Test(plan_cli, bad_input_is_one_line_and_exit_2) {
    const char *cases[] = {
        "plan --cluster h200x2",
        "plan --model gpt12",
        "plan --model gpt12 --cluster nosuch",
        "plan --model nosuch.json --cluster h200x2",
        "plan --model gpt12 --cluster h200x2 --gpus 3",
        "plan --model gpt12 --cluster h200x2 --gpus two",
        "plan --model gpt12 --cluster h200x2 --top 0",
        "plan --model gpt12 --cluster h200x2 --fix tp=0",
        "plan --model gpt12 --cluster h200x2 --fix bogus=1",
        "plan --model gpt12 --cluster h200x2 --export nemo",
        "plan --model gpt12 --cluster h200x2 --precision fp4",
        "plan --model gpt12 --cluster h200x2 --compare tp=x",
        "plan --model gpt12 --cluster h200x2 --attention sparse",
        "plan --model gpt12 --cluster h200x2 --json --export json",
        "plan --model gpt12 --cluster h200x2 --bogus",
        "plan --model gpt12 --cluster h200x2 extra",
        "plan --db data/h200x2.db --cluster h200x2",
        "plan --db data/h200x2.db --fix tp=2",
        "plan --db data/h200x2.db --fix mbs=3",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out, *err;
        int rc = run_plan(cases[i], &out, &err);
        cr_assert_eq(rc, 2, "'%s' exited %d: %s", cases[i], rc, err);
        cr_assert_eq(lines(err), 1, "'%s' printed:\n%s", cases[i], err);
        cr_assert(!strncmp(err, "placer plan: ", 13), "'%s': %s", cases[i], err);
        free(out);
        free(err);
    }
}

Test(plan_cli, trace_of_the_winner_is_chrome_json) {
    char path[] = "/tmp/placer-test-plan-trace-XXXXXX";
    close(mkstemp(path));
    char args[512], *out, *err;
    snprintf(args, sizeof args, "plan --model gpt12 --cluster h200x2 --global-batch 16 --fix pp=2,dp=1 --trace %s", path);
    int rc = run_plan(args, &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert(strstr(out, "trace: "), "%s", out);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    cr_assert(j, "the trace is not JSON: %s", e.text);
    json_t *ev = json_is_array(j) ? j : json_object_get(j, "traceEvents");
    cr_assert(json_is_array(ev) && json_array_size(ev) > 10, "no trace events");
    json_decref(j);
    unlink(path);
    free(out);
    free(err);
}
