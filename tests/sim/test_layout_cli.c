/*
 * test_layout_cli.c: `placer layout` end to end on the shipped cluster
 * files and model configs: the JSON against the library run on the same
 * inputs, the breakdown summing to the step, the trace file, --gpus and
 * --seq, and one stderr line with exit 2 for each kind of bad input; the
 * memory unit (GB = 10^9 bytes, the JSON's bytes over 1e9), the sequence
 * length a config file defaults to (its seq_length, else its
 * max_position_embeddings up to 4096, said on the first line) and the
 * stack options shared with placer plan (--attention, --dp-overlap,
 * --grad-bytes) against the library run with the same parameters.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_file.h"
#include "layout_sim.h"
#include "model_config.h"
#include "plan_model.h"

static char out_path[64], err_path[64], tmp_path[64];

static void paths(void) {
    snprintf(out_path, sizeof out_path, "/tmp/placer-laycli-%d.out", (int)getpid());
    snprintf(err_path, sizeof err_path, "/tmp/placer-laycli-%d.err", (int)getpid());
    snprintf(tmp_path, sizeof tmp_path, "/tmp/placer-laycli-%d.tmp", (int)getpid());
}

static void drop(void) {
    unlink(out_path);
    unlink(err_path);
    unlink(tmp_path);
}

/* Run placer layout <args>; stdout and stderr to files; the exit status. */
static int layout_cmd(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' layout %s >'%s' 2>'%s'", PLACER_BIN, args, out_path, err_path);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    char *buf = malloc(1 << 20);
    cr_assert_not_null(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static int lines_of(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* The number after "key": in a JSON text. */
static double json_num(const char *text, const char *key) {
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(text, pat);
    cr_assert_not_null(p, "no %s in the JSON", key);
    return strtod(p + strlen(pat), NULL);
}

#define MODEL PLACER_SOURCE_DIR "/data/models/megatron-18b.json"
#define LAYOUT "tp=8,pp=1,mbs=8,gbs=1024,recompute=full,precision=fp16"

Test(layout_cli, json_matches_the_library) {
    paths();
    cr_assert_eq(layout_cmd("--model '" MODEL "' --cluster dgx-a100-80gb --gpus 256 --layout " LAYOUT " --json"), 0,
                 "%s", slurp(err_path));
    char *out = slurp(out_path);
    gpt_config cfg;
    cluster c;
    layout l;
    char msg[512];
    cr_assert_eq(model_config_load(MODEL, &cfg, NULL, 0, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(cluster_load("dgx-a100-80gb", NULL, &c, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_parse(LAYOUT ",dp=32", &l, msg, sizeof msg), PL_OK, "%s", msg);
    c.groups[0].n_nodes = 32;
    c.n_groups = 1;
    layout_sim *s = NULL;
    cr_assert_eq(layout_sim_create(&cfg, &l, &c, &s, msg, sizeof msg), PL_OK, "%s", msg);
    layout_result r;
    cr_assert_eq(layout_sim_run(s, NULL, 0, &r, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim_destroy(s);
    const double step = json_num(out, "step_us");
    cr_assert(fabs(step - r.step_us) <= 1e-3 + 1e-9 * r.step_us, "cli %.3f, library %.3f", step, r.step_us);
    cr_assert_eq((int)json_num(out, "gpus"), 256);
    cr_assert_eq((int)json_num(out, "micro_batches"), 4);
    double sum = 0;
    static const char *const parts[] = {"compute", "tp", "cp", "dp", "pp", "bubble", "optimizer"};
    for (int i = 0; i < 7; i++) sum += json_num(out, parts[i]);
    cr_assert(fabs(sum - step) < 1e-2, "breakdown %.3f, step %.3f", sum, step);
    cr_assert(json_num(out, "mfu") > 0 && json_num(out, "mfu") < 1);
    cr_assert(strstr(out, "\"oom\": false") != NULL);
    free(out);
    drop();
}

Test(layout_cli, prints_for_people_explains_and_traces) {
    paths();
    char args[1024];
    snprintf(args, sizeof args,
             "--model '" MODEL "' --cluster dgx-a100-80gb --gpus 512 --seq 1024 "
             "--layout tp=8,pp=2,vp=2,mbs=2,gbs=128,precision=bf16 --explain --trace '%s'",
             tmp_path);
    cr_assert_eq(layout_cmd(args), 0, "%s", slurp(err_path));
    char *out = slurp(out_path);
    cr_assert(strstr(out, "dp=32") != NULL, "%s", out);
    cr_assert(strstr(out, "seq 1024") != NULL);
    cr_assert(strstr(out, "bubble") && strstr(out, "memory per GPU") && strstr(out, "MFU"));
    cr_assert(strstr(out, "tp all-reduce") && strstr(out, "busbw") && strstr(out, "pipeline send"), "%s", out);
    free(out);
    char *tr = slurp(tmp_path);
    cr_assert(strncmp(tr, "{\"displayTimeUnit\"", 18) == 0);
    cr_assert(strstr(tr, "\"name\":\"F chunk0 mb0\"") != NULL);
    free(tr);
    drop();
}

/* Each bad input: exit 2, exactly one line on stderr, nothing on stdout. */
Test(layout_cli, bad_input_is_one_stderr_line_and_exit_2) {
    paths();
    FILE *f = fopen(tmp_path, "w");
    cr_assert_not_null(f);
    fputs("{\"hidden_size\": 1024, \"num_hidden_layers\": ", f); /* truncated JSON */
    fclose(f);
    char bad_model[256];
    snprintf(bad_model, sizeof bad_model, "--model '%s' --cluster dgx-a100-80gb --layout tp=1,mbs=1,gbs=1", tmp_path);
    const char *cases[] = {
        bad_model,
        "--model default --cluster no-such-cluster --layout tp=1,mbs=1,gbs=1",
        "--model default --cluster dgx-a100-80gb --layout tp=1,bogus=3",
        "--model default --cluster dgx-a100-80gb --layout tp=5,mbs=1,gbs=1",   /* 5 does not divide 6 heads */
        "--model default --cluster dgx-a100-80gb --layout dp=3,mbs=2,gbs=16",  /* dp*mbs does not divide gbs */
        "--model default --cluster h200x2 --layout tp=2,dp=2,mbs=1,gbs=2",     /* 4 GPUs on a 2-GPU cluster */
        "--model default --cluster dgx-a100-80gb --gpus 12 --layout tp=1,mbs=1,gbs=12",
        "--model default --cluster dgx-a100-80gb --gpus 16 --layout tp=2,dp=2,mbs=1,gbs=2",
        "--model default --cluster dgx-a100-80gb --layout tp=1,mbs=1,gbs=1 --flops both",
        "--model default --cluster dgx-a100-80gb --layout tp=1,mbs=1,gbs=1 --seq 0",
        "--model default --cluster dgx-a100-80gb --layout tp=1,mbs=1,gbs=1 --bogus",
        "--model default --cluster dgx-a100-80gb",
        "--model no-such-preset --cluster dgx-a100-80gb --layout tp=1,mbs=1,gbs=1",
        "--model /nonexistent/config.json --cluster dgx-a100-80gb --layout tp=1,mbs=1,gbs=1",
        "--model default --cluster dgx-a100-80gb --layout tp=1,mbs=1,gbs=1 --attention sparse",
        "--model default --cluster dgx-a100-80gb --layout tp=1,mbs=1,gbs=1 --dp-overlap 2",
        "--model default --cluster dgx-a100-80gb --layout tp=1,mbs=1,gbs=1 --grad-bytes 0",
        "--model default --cluster dgx-a100-80gb --layout tp=1,mbs=1,gbs=1 --grad-bytes",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(layout_cmd(cases[i]), 2, "'%s' should exit 2", cases[i]);
        char *err = slurp(err_path), *out = slurp(out_path);
        cr_assert_eq(lines_of(err), 1, "'%s': stderr %s", cases[i], err);
        cr_assert(strncmp(err, "placer layout: ", 15) == 0, "%s", err);
        cr_assert_eq(out[0], 0, "'%s': stdout %s", cases[i], out);
        free(err);
        free(out);
    }
    cr_assert_eq(layout_cmd("--help"), 0);
    drop();
}

/* The number that follows `after` in text (strtod), or NAN when absent. */
static double num_after(const char *text, const char *after) {
    const char *p = strstr(text, after);
    return p ? strtod(p + strlen(after), NULL) : NAN;
}

/* Memory is printed in GB = 10^9 bytes, the same figures as the JSON's
 * bytes; nothing says GiB, and --help states the unit. */
Test(layout_cli, memory_is_in_gb_of_ten_to_the_nine_bytes) {
    paths();
    const char *args = "--model '" MODEL "' --cluster dgx-a100-80gb --gpus 256 --layout " LAYOUT;
    char a2[1024];
    snprintf(a2, sizeof a2, "%s --json", args);
    cr_assert_eq(layout_cmd(a2), 0, "%s", slurp(err_path));
    char *js = slurp(out_path);
    const double total = json_num(js, "total"), cap = json_num(js, "cap"), params = json_num(js, "params");
    free(js);
    cr_assert_eq(layout_cmd(args), 0, "%s", slurp(err_path));
    char *out = slurp(out_path);
    cr_assert_null(strstr(out, "GiB"), "%s", out);
    /* "memory per GPU (stage 0, the largest): 25.54 GB of 85.90 GB: fits" */
    const char *m = strstr(out, "the largest): ");
    cr_assert_not_null(m, "%s", out);
    double shown_total = 0, shown_cap = 0;
    cr_assert_eq(sscanf(m, "the largest): %lf GB of %lf GB", &shown_total, &shown_cap), 2, "%s", m);
    cr_assert(fabs(shown_total - total / 1e9) <= 0.005 + 1e-9, "%.2f GB shown, %.0f bytes", shown_total, total);
    cr_assert(fabs(shown_cap - cap / 1e9) <= 0.005 + 1e-9, "%.2f GB shown, %.0f bytes", shown_cap, cap);
    /* an "80 GB" A100 holds 80 GiB: 85.90 GB, not 80.00 */
    cr_assert(fabs(shown_cap - 85.90) < 0.006, "cap %.2f GB", shown_cap);
    const double shown_params = num_after(out, "parameters");
    cr_assert(fabs(shown_params - params / 1e9) <= 0.005 + 1e-9, "parameters %.2f GB, %.0f bytes", shown_params, params);
    free(out);
    cr_assert_eq(layout_cmd("--help"), 0);
    out = slurp(out_path);
    cr_assert_not_null(strstr(out, "GB = 10^9 bytes"), "%s", out);
    free(out);
    drop();
}

/* A Hugging Face config (Qwen2.5-14B's fields) whose only length is its
 * 131,072-token context: planned at 4,096 unless --seq or seq= says
 * otherwise, and the first line says so. */
Test(layout_cli, config_length_defaults_to_a_training_length) {
    paths();
    char cfg_path[96];
    snprintf(cfg_path, sizeof cfg_path, "%s.json", tmp_path);
    FILE *f = fopen(cfg_path, "w");
    cr_assert_not_null(f);
    fputs("{\"model_type\": \"qwen2\", \"hidden_size\": 5120, \"num_hidden_layers\": 48, \"num_attention_heads\": 40, "
          "\"num_key_value_heads\": 8, \"intermediate_size\": 13824, \"vocab_size\": 152064, "
          "\"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-6, \"hidden_act\": \"silu\", "
          "\"tie_word_embeddings\": false}",
          f);
    fclose(f);
    char args[1024];
    snprintf(args, sizeof args, "--model '%s' --cluster dgx-h100 --gpus 64 --layout tp=8,pp=2,mbs=1,gbs=64", cfg_path);
    cr_assert_eq(layout_cmd(args), 0, "%s", slurp(err_path));
    char *out = slurp(out_path);
    char first[1024];
    snprintf(first, sizeof first, "%.*s", (int)strcspn(out, "\n"), out);
    cr_assert_not_null(strstr(first, "; seq 4096 (default, the config's max_position_embeddings 131072 capped at 4096"),
                       "%s", first);
    free(out);
    /* --seq wins, and the note goes */
    snprintf(args, sizeof args, "--model '%s' --cluster dgx-h100 --gpus 64 --layout tp=8,pp=2,mbs=1,gbs=64 --seq 8192",
             cfg_path);
    cr_assert_eq(layout_cmd(args), 0, "%s", slurp(err_path));
    out = slurp(out_path);
    snprintf(first, sizeof first, "%.*s", (int)strcspn(out, "\n"), out);
    cr_assert(strstr(first, "; seq 8192") && !strstr(first, "default"), "%s", first);
    free(out);
    /* a seq= override in the model text is as given */
    snprintf(args, sizeof args, "--model '%s,seq=2048' --cluster dgx-h100 --gpus 64 --layout tp=8,pp=2,mbs=1,gbs=64 --json",
             cfg_path);
    cr_assert_eq(layout_cmd(args), 0, "%s", slurp(err_path));
    out = slurp(out_path);
    cr_assert_eq((int)json_num(out, "seq_len"), 2048);
    free(out);
    /* the library: the same rules */
    plan_model m;
    char msg[256];
    cr_assert_eq(plan_model_load(cfg_path, 0, &m, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(m.cfg.seq_len, 4096);
    cr_assert_eq(m.seq_source, PLAN_SEQ_CAPPED);
    cr_assert_eq(m.positions, 131072);
    /* a config's stated training length (llama-3-405b: seq_length 8192 beside 131072 positions) */
    cr_assert_eq(plan_model_load("llama-3-405b", 0, &m, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(m.cfg.seq_len, 8192);
    cr_assert_eq(m.seq_source, PLAN_SEQ_CONFIG);
    /* a context of at most 4096 is the length (gpt2: 1024) */
    cr_assert_eq(plan_model_load("gpt2", 0, &m, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(m.cfg.seq_len, 1024);
    cr_assert_eq(m.seq_source, PLAN_SEQ_POSITIONS);
    /* a preset keeps its own */
    gpt_config preset;
    cr_assert_eq(model_config_load("gpt12", &preset, NULL, 0, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(plan_model_load("gpt12", 0, &m, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(m.cfg.seq_len, preset.seq_len);
    cr_assert_eq(m.seq_source, PLAN_SEQ_PRESET);
    unlink(cfg_path);
    drop();
}

/* --attention, --dp-overlap and --grad-bytes (as placer plan takes them)
 * reach the simulator: the JSON equals the library run with the same
 * parameters, and each flag moves what it models. */
Test(layout_cli, stack_options_reach_the_simulator) {
    paths();
    const char *base = "--model '" MODEL "' --cluster dgx-a100-80gb --gpus 256 --layout " LAYOUT " --json";
    char args[1024];
    cr_assert_eq(layout_cmd(base), 0, "%s", slurp(err_path));
    char *out = slurp(out_path);
    const double step0 = json_num(out, "step_us"), dp0 = json_num(out, "dp");
    free(out);
    snprintf(args, sizeof args, "%s --attention unfused --dp-overlap 0 --grad-bytes 2", base);
    cr_assert_eq(layout_cmd(args), 0, "%s", slurp(err_path));
    out = slurp(out_path);
    const double step1 = json_num(out, "step_us"), dp1 = json_num(out, "dp");
    free(out);

    gpt_config cfg;
    cluster c;
    layout l;
    char msg[512];
    cr_assert_eq(model_config_load(MODEL, &cfg, NULL, 0, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(cluster_load("dgx-a100-80gb", NULL, &c, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_parse(LAYOUT ",dp=32", &l, msg, sizeof msg), PL_OK, "%s", msg);
    c.groups[0].n_nodes = 32;
    c.n_groups = 1;
    layout_sim_params prm;
    layout_sim_params_default(&prm);
    prm.compute.attention = ATTENTION_UNFUSED;
    prm.dp_overlap_grad = 0;
    prm.grad_comm_bytes = 2;
    layout_sim *s = NULL;
    cr_assert_eq(layout_sim_create(&cfg, &l, &c, &s, msg, sizeof msg), PL_OK, "%s", msg);
    layout_result r;
    cr_assert_eq(layout_sim_run(s, &prm, 0, &r, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim_destroy(s);
    cr_assert(fabs(step1 - r.step_us) <= 1e-3 + 1e-9 * r.step_us, "cli %.3f, library %.3f", step1, r.step_us);
    /* unfused attention is slower; reducing after backward exposes the dp time */
    cr_assert_gt(step1, step0);
    cr_assert_gt(dp1, dp0, "dp exposed %.3f with --dp-overlap 0, %.3f with overlap", dp1, dp0);
    /* the help lists them as plan's does */
    cr_assert_eq(layout_cmd("--help"), 0);
    out = slurp(out_path);
    cr_assert(strstr(out, "--attention") && strstr(out, "--dp-overlap") && strstr(out, "--grad-bytes"), "%s", out);
    free(out);
    drop();
}
