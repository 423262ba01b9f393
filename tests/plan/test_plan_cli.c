/*
 * test_plan_cli.c: `placer plan` end to end, as child processes of the
 * built binary on the shipped cluster files and profile: the table, --json
 * parsed back, each --export parsed by the same reading as test_export.c's
 * (here only its key names), the profile path against the exhaustive
 * search, nothing fitting (exit 1 with the memory needed) and bad input
 * (one line, exit 2); the memory unit against placer layout's on the same
 * layout (GB = 10^9 bytes in both), and the sequence length a config file
 * defaults to, said on the first line.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../placer_run.h"

static int run_plan(const char *args, char **out, char **err) { return placer_run(PLACER_SOURCE_DIR, args, out, err); }

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
    const char *mark[] = {"--tensor-model-parallel-size 1 \\\n", "[parallelism]\n", "\"train_batch_size\"", "\"layout\""};
    for (int i = 0; i < 4; i++) {
        char args[256], *out, *err;
        /* a model every framework builds (torchtitan: its llama3 8B flavor cut to 4 layers) */
        snprintf(args, sizeof args, "plan --model llama-3-8b,layers=4 --seq 2048 --cluster h200x2 --global-batch 16 "
                                    "--fix pp=2,dp=1 --export %s", fmts[i]);
        int rc = run_plan(args, &out, &err);
        cr_assert_eq(rc, 0, "%s: %s", fmts[i], err);
        cr_assert(strstr(out, mark[i]), "%s export:\n%s", fmts[i], out);
        if (i != 2) /* DeepSpeed's stage split is partition.json, written with --out */
            cr_assert(strstr(out, "pipeline") || strstr(out, "\"pp\": 2"), "%s export says nothing of the pipeline",
                      fmts[i]);
        cr_assert(!strncmp(err, "placer plan: best of ", 21), "a summary line first on stderr: %s", err);
        for (const char *p = strchr(err, '\n'); p && p[1]; p = strchr(p + 1, '\n'))
            cr_assert(!strncmp(p + 1, "placer plan: note: ", 19), "then notes only: %s", err);
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
        "plan --model gpt12 --cluster h200x2 --dp-overlap 2",
        "plan --model gpt12 --cluster h200x2 --grad-bytes 9",
        "plan --model gpt12 --cluster h200x2 --reserve -1",
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

/* The two numbers "X GB of Y GB" that follow `after` in text. */
static int gb_of(const char *text, const char *after, double *x, double *y) {
    const char *p = strstr(text, after);
    return p && sscanf(p + strlen(after), "%lf GB of %lf GB", x, y) == 2;
}

/* plan and layout print one memory unit: the same layout (every dimension
 * fixed) shows the same GB, peak and capacity, in both; neither says GiB,
 * and both --help texts state GB = 10^9 bytes. */
Test(plan_cli, memory_unit_agrees_with_placer_layout) {
    char *out, *err, *lo, *le;
    int rc = run_plan("plan --model gpt12 --cluster h200x2 --global-batch 16 "
                      "--fix tp=1,cp=1,pp=1,vp=1,dp=2,mbs=8,recompute=none,zero=0",
                      &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    int rl = run_plan("layout --model gpt12 --cluster h200x2 "
                      "--layout tp=1,pp=1,dp=2,mbs=8,gbs=16,zero=0,recompute=none,precision=bf16",
                      &lo, &le);
    cr_assert_eq(rl, 0, "%s", le);
    double pt = 0, pc = 0, lt = 0, lc = 0;
    /* "  memory (stage 0 of the worst): params ... = 3.94 GB of 150.75 GB" */
    const char *mem = strstr(out, "memory (stage");
    cr_assert(mem && gb_of(mem, " = ", &pt, &pc), "%s", out);
    cr_assert(gb_of(lo, "the largest): ", &lt, &lc), "%s", lo);
    cr_assert(pt > 0 && pc > 100, "plan %.2f of %.2f", pt, pc);
    cr_assert(fabs(pt - lt) < 1e-9 && fabs(pc - lc) < 1e-9, "plan %.2f GB of %.2f GB, layout %.2f GB of %.2f GB", pt, pc,
              lt, lc);
    cr_assert(!strstr(out, "GiB") && !strstr(lo, "GiB"));
    free(out);
    free(err);
    free(lo);
    free(le);
    const char *helps[] = {"plan --help", "layout --help", "check-published --help"};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(run_plan(helps[i], &out, &err), 0);
        cr_assert(strstr(out, "GB = 10^9 bytes"), "%s:\n%s", helps[i], out);
        free(out);
        free(err);
    }
}

/* A config with only max_position_embeddings (llama-3-8b: 8192) is planned
 * at 4096 without --seq, and the first line says why; --seq 8192 plans
 * 8192 tokens and the note goes. */
Test(plan_cli, config_length_default_is_said_on_the_first_line) {
    char *out, *err;
    int rc = run_plan("plan --model llama-3-8b --cluster dgx-h100 --gpus 64 --global-batch 512 --top 1", &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    char first[512];
    snprintf(first, sizeof first, "%.*s", (int)strcspn(out, "\n"), out);
    cr_assert(strstr(first, "512 x 4096 tokens per step (seq: default, the config's max_position_embeddings 8192 "
                            "capped at 4096; --seq sets it)"),
              "%s", first);
    free(out);
    free(err);
    rc = run_plan("plan --model llama-3-8b --cluster dgx-h100 --gpus 64 --global-batch 512 --top 1 --seq 8192 --json",
                  &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    json_t *j = json_loads(out, 0, NULL);
    cr_assert_not_null(j, "%s", out);
    const long long seq = json_integer_value(json_object_get(j, "seq_len"));
    json_decref(j);
    cr_assert_eq(seq, 8192);
    free(out);
    free(err);
}

/* Every layout of a plan's --json top as (zero, dp, vp, cp) into z, d, v, c
 * (at most n); the count. */
static int top_layouts(const char *out, char z[][8], int *d, int *v, int *c, int n) {
    json_error_t e;
    json_t *j = json_loads(out, 0, &e);
    cr_assert(j, "not JSON: %s\n%s", e.text, out);
    json_t *top = json_object_get(j, "top");
    int k = 0;
    for (; k < n && (size_t)k < json_array_size(top); k++) {
        json_t *l = json_object_get(json_array_get(top, (size_t)k), "layout");
        snprintf(z[k], 8, "%s", json_string_value(json_object_get(l, "zero")));
        d[k] = (int)json_integer_value(json_object_get(l, "dp"));
        v[k] = (int)json_integer_value(json_object_get(l, "vp"));
        c[k] = (int)json_integer_value(json_object_get(l, "cp"));
    }
    json_decref(j);
    return k;
}

/* --framework names the stack a plan is predicted for and exported to, and
 * --for is the same option under its older name: the same plan, the same
 * filter on what the stack runs, and one of them at a time. */
Test(plan_cli, framework_and_its_alias_for_are_one_option) {
    /* a model torchtitan has (its llama3 8B flavor, cut to 8 layers) */
    const char *base = "plan --model llama-3-8b,layers=8 --cluster dgx-h100 --gpus 16 --global-batch 64 --seq 4096 --top 6";
    char args[512], *out[2], *err;
    const char *opt[2] = {"--framework", "--for"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "%s %s torchtitan --export json", base, opt[i]);
        cr_assert_eq(run_plan(args, &out[i], &err), 0, "%s: %s", opt[i], err);
        free(err);
    }
    cr_assert_str_eq(out[0], out[1], "--for and --framework plan alike");
    free(out[0]);
    free(out[1]);
    char z[6][8];
    int d[6], v[6], c[6];
    /* torchtitan runs no ZeRO 1 or 2; DeepSpeed's pipeline engine no interleaving and no cp */
    snprintf(args, sizeof args, "%s --framework torchtitan --json", base);
    cr_assert_eq(run_plan(args, &out[0], &err), 0, "%s", err);
    int n = top_layouts(out[0], z, d, v, c, 6);
    cr_assert_gt(n, 0);
    for (int k = 0; k < n; k++) cr_assert(d[k] == 1 || (strcmp(z[k], "1") && strcmp(z[k], "2")), "zero %s", z[k]);
    free(out[0]);
    free(err);
    snprintf(args, sizeof args, "%s --framework deepspeed --json", base);
    cr_assert_eq(run_plan(args, &out[0], &err), 0, "%s", err);
    n = top_layouts(out[0], z, d, v, c, 6);
    cr_assert_gt(n, 0);
    for (int k = 0; k < n; k++) cr_assert(v[k] == 1 && c[k] == 1, "vp %d cp %d", v[k], c[k]);
    free(out[0]);
    free(err);
    /* the text says which stack the layouts are for */
    snprintf(args, sizeof args, "%s --for megatron", base);
    cr_assert_eq(run_plan(args, &out[0], &err), 0, "%s", err);
    cr_assert(strstr(out[0], ", layouts megatron\n"), "%s", out[0]);
    free(out[0]);
    free(err);
    const char *bad[] = {"--for megatron --framework megatron", "--framework hf --framework hf", "--for nope",
                         "--framework nope"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "%s %s", base, bad[i]);
        cr_assert_eq(run_plan(args, &out[0], &err), 2, "'%s': %s", bad[i], err);
        cr_assert_eq(lines(err), 1, "'%s' printed:\n%s", bad[i], err);
        cr_assert(strstr(err, "--framework"), "'%s': %s", bad[i], err);
        free(out[0]);
        free(err);
    }
    cr_assert_eq(run_plan("plan --help", &out[0], &err), 0);
    cr_assert(strstr(out[0], "--for F         an alias of --framework"), "%s", out[0]);
    free(out[0]);
    free(err);
}

/* An explicit --attention wins over the framework profile's kernel, in
 * either order (before, a later --framework silently undid it). */
Test(plan_cli, explicit_attention_wins_over_the_framework_in_either_order) {
    const char *base = "layout --model gpt12 --cluster h200x2 --gpus 1 --layout mbs=2,gbs=2 --json";
    const char *tails[3] = {"--attention unfused --framework megatron", "--framework megatron --attention unfused",
                            "--framework megatron"};
    char *out[3], *err, args[512];
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "%s %s", base, tails[i]);
        cr_assert_eq(run_plan(args, &out[i], &err), 0, "%s: %s", tails[i], err);
        free(err);
    }
    cr_assert_str_eq(out[0], out[1], "the order of --attention and --framework does not matter");
    cr_assert(strcmp(out[0], out[2]), "unfused attention predicts another step than flash");
    for (int i = 0; i < 3; i++) free(out[i]);
}
