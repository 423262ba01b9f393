/*
 * test_export.c: every export of a planned layout parsed back and compared
 * with the layout it came from, and every name it uses checked against the
 * framework's documented options:
 *   Megatron-LM  megatron/training/arguments.py (add_argument names)
 *   torchtitan   torchtitan/config/job_config.py (JobConfig sections/fields)
 *   DeepSpeed    the config-json documentation (train_batch_size, ...) and
 *                deepspeed.pipe.PipelineModule's arguments
 * The parsers here are small and strict (an unknown line fails the test),
 * so an export that drifts from the format fails instead of being skipped.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "export_plan.h"
#include "graph.h"
#include "plan.h"
#include "model_config.h"
#include "model_params.h"

/* ---- the cases ---------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *model;  /* gpt_config_parse text */
    int tp, sp, cp, pp, vp, dp, zero, mbs, gbs, recompute;
    precision prec;
    int chunks[16];     /* pp * vp, or all zero: uniform */
} ex_case;

static const ex_case CASES[] = {
    {"uniform", "gpt12", 2, 1, 1, 2, 1, 4, 1, 1, 64, RECOMPUTE_FULL, PRECISION_BF16, {0}},
    {"uniform interleaved", "gpt12", 1, 0, 1, 2, 3, 2, 0, 2, 32, RECOMPUTE_NONE, PRECISION_BF16, {0}},
    {"first and last lighter", "gpt12,layers=14", 4, 1, 2, 4, 1, 2, 2, 1, 32, RECOMPUTE_SELECTIVE,
     PRECISION_FP16, {2, 5, 5, 2}},
    {"any split", "gpt12", 1, 0, 1, 3, 1, 8, 3, 2, 64, RECOMPUTE_FULL, PRECISION_BF16, {3, 4, 5}},
    {"interleaved non-uniform", "gpt12,layers=16", 2, 1, 1, 2, 2, 2, ZERO_FSDP, 1, 16, RECOMPUTE_NONE,
     PRECISION_FP8, {3, 5, 5, 3}},
    {"two stages, deepspeed's parameters split", "default", 1, 0, 1, 2, 1, 1, 0, 4, 16, RECOMPUTE_NONE,
     PRECISION_FP32, {3, 3}},
    {"no pipeline", "default", 8, 1, 1, 1, 1, 4, 1, 2, 64, RECOMPUTE_NONE, PRECISION_BF16, {0}},
    {"repeated middle chunks", "gpt12,layers=14", 1, 0, 1, 4, 2, 2, 0, 1, 16, RECOMPUTE_NONE, PRECISION_BF16,
     {1, 2, 2, 2, 2, 2, 2, 1}},
};
#define N_CASES (int)(sizeof CASES / sizeof CASES[0])

static void build_case(const ex_case *x, gpt_config *cfg, layout *l, int *ch) {
    char msg[256];
    cr_assert_eq(gpt_config_parse(x->model, cfg, msg, sizeof msg), PL_OK, "%s", msg);
    memset(l, 0, sizeof *l);
    l->tp = x->tp;
    l->sp = x->sp;
    l->cp = x->cp;
    l->pp = x->pp;
    l->vp = x->vp;
    l->dp = x->dp;
    l->zero = (zero_kind)x->zero;
    l->micro_batch = x->mbs;
    l->global_batch = x->gbs;
    l->recompute = (recompute_kind)x->recompute;
    l->prec = x->prec;
    const int C = x->pp * x->vp;
    if (x->chunks[0]) {
        l->n_stage_layers = C;
        for (int c = 0; c < C; c++) l->stage_layers[c] = ch[c] = x->chunks[c];
    } else {
        cr_assert_eq(cfg->n_layers % C, 0, "uniform case %s needs layers divisible by chunks", x->name);
        for (int c = 0; c < C; c++) ch[c] = cfg->n_layers / C;
    }
}

static char *export_of(plan_export_format f, const gpt_config *cfg, const layout *l, const int *ch,
                       const layout_result *r) {
    char *s = NULL, msg[256] = "";
    cr_assert_eq(plan_export_string(f, cfg, l, ch, r, &s, msg, sizeof msg), PL_OK, "%s", msg);
    return s;
}

/* ---- Megatron-LM --------------------------------------------------------- */

/* Names from megatron/training/arguments.py that the export may use. */
static const char *const MEGATRON_ARGS[] = {
    "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--group-query-attention",
    "--num-query-groups", "--seq-length", "--max-position-embeddings", "--tensor-model-parallel-size",
    "--pipeline-model-parallel-size", "--context-parallel-size", "--sequence-parallel",
    "--num-layers-per-virtual-pipeline-stage", "--decoder-first-pipeline-num-layers",
    "--decoder-last-pipeline-num-layers", "--pipeline-model-parallel-layout", "--recompute-granularity",
    "--recompute-method", "--recompute-num-layers", "--use-distributed-optimizer", "--use-torch-fsdp2", "--bf16",
    "--fp16", "--fp8-format", "--fp8-recipe", "--micro-batch-size", "--global-batch-size",
    /* mixture of experts and latent attention (the same file; checked with the search tool against
     * NVIDIA/Megatron-LM's arguments.py and its MoE tests' command lines) */
    "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size", "--moe-shared-expert-intermediate-size",
    "--moe-layer-freq", "--moe-router-score-function", "--expert-model-parallel-size",
    "--expert-tensor-parallel-size", "--moe-token-dispatcher-type", "--moe-grouped-gemm", "--multi-latent-attention",
    "--kv-lora-rank", "--q-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim", "--v-head-dim", "--kv-channels",
    NULL};
static const char *const MEGATRON_FLAGS[] = {"--group-query-attention", "--sequence-parallel",
                                             "--use-distributed-optimizer", "--use-torch-fsdp2", "--bf16", "--fp16",
                                             "--moe-grouped-gemm", "--multi-latent-attention", NULL};

static int in_list(const char *const *list, const char *s) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], s)) return 1;
    return 0;
}

typedef struct {
    char name[64];
    char value[256];
} arg_kv;

/* Split the argument block into (name, value) pairs; value "" for flags. */
static int parse_megatron(char *text, arg_kv *out, int cap) {
    int n = 0, last_continued = 1;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        cr_assert(last_continued, "an argument line after the last one: '%s'", line);
        size_t len = strlen(line);
        last_continued = len >= 2 && !strcmp(line + len - 2, " \\");
        if (last_continued) line[len - 2] = 0;
        cr_assert_lt(n, cap);
        char *sp = strchr(line, ' ');
        if (sp) {
            *sp = 0;
            char *v = sp + 1;
            size_t vl = strlen(v);
            if (v[0] == '"') {
                cr_assert(vl >= 2 && v[vl - 1] == '"', "unbalanced quotes in '%s'", v);
                v[vl - 1] = 0;
                v++;
            }
            cr_assert(!strchr(v, ' '), "two values on one line: '%s'", v);
            snprintf(out[n].value, sizeof out[n].value, "%s", v);
        } else {
            out[n].value[0] = 0;
        }
        snprintf(out[n].name, sizeof out[n].name, "%s", line);
        cr_assert(in_list(MEGATRON_ARGS, out[n].name), "'%s' is not a Megatron-LM argument", out[n].name);
        cr_assert_eq(in_list(MEGATRON_FLAGS, out[n].name), out[n].value[0] == 0, "'%s' flag/value mismatch",
                     out[n].name);
        for (int i = 0; i < n; i++) cr_assert(strcmp(out[i].name, out[n].name), "'%s' given twice", out[n].name);
        n++;
    }
    cr_assert(!last_continued, "the last argument line ends in a continuation");
    return n;
}

static const char *arg_get(const arg_kv *a, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(a[i].name, name)) return a[i].value;
    return NULL;
}

static int arg_int(const arg_kv *a, int n, const char *name, int dflt) {
    const char *v = arg_get(a, n, name);
    return v ? atoi(v) : dflt;
}

/* Expand Megatron's repetitions "(pattern)*k" (not nested). */
static void expand_layout(const char *s, char *out, size_t cap) {
    size_t n = 0;
    for (const char *p = s; *p;) {
        if (*p == '(') {
            const char *e = strchr(p, ')');
            cr_assert(e && e[1] == '*', "bad repetition in %s", s);
            char *end;
            long k = strtol(e + 2, &end, 10);
            cr_assert(k >= 1, "bad count in %s", s);
            for (long i = 0; i < k; i++)
                for (const char *q = p + 1; q < e; q++) {
                    cr_assert_lt(n + 1, cap);
                    out[n++] = *q;
                }
            p = end;
        } else {
            cr_assert_lt(n + 1, cap);
            out[n++] = *p++;
        }
    }
    out[n] = 0;
}

/* Megatron's layout string ("Et*3|(t*2|)*3t,L") into chunk layer counts. */
static int parse_layout_string(const char *s0, int *ch) {
    static char s[8192];
    expand_layout(s0, s, sizeof s);
    int c = 0, cur = 0;
    cr_assert_eq(s[0], 'E', "layout string must start with the embedding: %s", s);
    for (const char *p = s + 1; *p; p++) {
        if (*p == 't') {
            int k = 1;
            if (p[1] == '*') {
                k = (int)strtol(p + 2, (char **)&p, 10);
                p--;
            }
            cur += k;
        } else if (*p == '|') {
            ch[c++] = cur;
            cur = 0;
        } else if (*p == ',') {
            cr_assert(!strcmp(p, ",L"), "only the final ,L may follow: %s", p);
            break;
        } else {
            cr_assert_fail("unexpected '%c' in the layout string %s", *p, s);
        }
    }
    cr_assert(strstr(s, ",L") && s[strlen(s) - 1] == 'L', "the loss must close the last chunk: %s", s);
    ch[c++] = cur;
    return c;
}

Test(export, megatron_round_trips) {
    for (int i = 0; i < N_CASES; i++) {
        gpt_config cfg;
        layout l;
        int ch[16];
        build_case(&CASES[i], &cfg, &l, ch);
        char *s = export_of(PLAN_EXPORT_MEGATRON, &cfg, &l, ch, NULL);
        arg_kv a[64];
        int n = parse_megatron(s, a, 64);
        cr_assert_eq(arg_int(a, n, "--num-layers", 0), cfg.n_layers, "%s", CASES[i].name);
        cr_assert_eq(arg_int(a, n, "--tensor-model-parallel-size", 0), l.tp);
        cr_assert_eq(arg_int(a, n, "--pipeline-model-parallel-size", 0), l.pp);
        cr_assert_eq(arg_int(a, n, "--context-parallel-size", 0), l.cp);
        cr_assert_eq(arg_get(a, n, "--sequence-parallel") != NULL, l.sp && l.tp > 1, "%s", CASES[i].name);
        cr_assert_eq(arg_int(a, n, "--micro-batch-size", 0), l.micro_batch);
        cr_assert_eq(arg_int(a, n, "--global-batch-size", 0), l.global_batch);
        cr_assert_eq(arg_int(a, n, "--seq-length", 0), cfg.seq_len);
        /* the chunks, from whichever form the export chose */
        int got[16], C;
        const char *lay = arg_get(a, n, "--pipeline-model-parallel-layout");
        if (lay) {
            C = parse_layout_string(lay, got);
        } else {
            const int per = arg_int(a, n, "--num-layers-per-virtual-pipeline-stage", 0);
            const int vp = per ? cfg.n_layers / (l.pp * per) : 1;
            C = l.pp * vp;
            const int first = arg_int(a, n, "--decoder-first-pipeline-num-layers", -1);
            const int last = arg_int(a, n, "--decoder-last-pipeline-num-layers", -1);
            cr_assert_eq(first < 0, last < 0, "first and last come together");
            for (int c = 0; c < C; c++) got[c] = per ? per : cfg.n_layers / C;
            if (first >= 0) {
                cr_assert_eq(vp, 1);
                got[0] = first;
                got[C - 1] = last;
                for (int c = 1; c < C - 1; c++) got[c] = (cfg.n_layers - first - last) / (C - 2);
            }
        }
        cr_assert_eq(C, l.pp * l.vp, "%s: %d chunks, not %d", CASES[i].name, C, l.pp * l.vp);
        for (int c = 0; c < C; c++) cr_assert_eq(got[c], ch[c], "%s: chunk %d", CASES[i].name, c);
        const char *g = arg_get(a, n, "--recompute-granularity");
        cr_assert_eq(l.recompute == RECOMPUTE_NONE ? g == NULL : g != NULL, 1);
        if (g) cr_assert_str_eq(g, l.recompute == RECOMPUTE_FULL ? "full" : "selective");
        if (l.recompute == RECOMPUTE_FULL) cr_assert_str_eq(arg_get(a, n, "--recompute-method"), "uniform");
        const int dopt = arg_get(a, n, "--use-distributed-optimizer") != NULL;
        const int fsdp = arg_get(a, n, "--use-torch-fsdp2") != NULL;
        cr_assert_eq(dopt, l.dp > 1 && (l.zero == ZERO_1 || l.zero == ZERO_2), "%s", CASES[i].name);
        cr_assert_eq(fsdp, l.dp > 1 && (l.zero == ZERO_3 || l.zero == ZERO_FSDP), "%s", CASES[i].name);
        cr_assert_eq(arg_get(a, n, "--bf16") != NULL, l.prec == PRECISION_BF16 || l.prec == PRECISION_FP8);
        cr_assert_eq(arg_get(a, n, "--fp16") != NULL, l.prec == PRECISION_FP16);
        const int kv = cfg.n_kv_heads ? cfg.n_kv_heads : cfg.n_heads;
        cr_assert_eq(arg_get(a, n, "--group-query-attention") != NULL, kv != cfg.n_heads);
        free(s);
    }
}

Test(export, megatron_uses_the_simple_flags_when_they_suffice) {
    gpt_config cfg;
    layout l;
    int ch[16];
    build_case(&CASES[2], &cfg, &l, ch); /* 2 / 5 / 5 / 2 at vp 1 */
    char *s = export_of(PLAN_EXPORT_MEGATRON, &cfg, &l, ch, NULL);
    cr_assert(strstr(s, "--decoder-first-pipeline-num-layers 2 \\\n"), "%s", s);
    cr_assert(strstr(s, "--decoder-last-pipeline-num-layers 2 \\\n"), "%s", s);
    cr_assert(!strstr(s, "--pipeline-model-parallel-layout"), "%s", s);
    free(s);
    build_case(&CASES[3], &cfg, &l, ch); /* 3 / 4 / 5: the middle decides nothing, so the layout string */
    s = export_of(PLAN_EXPORT_MEGATRON, &cfg, &l, ch, NULL);
    cr_assert(strstr(s, "--decoder-first-pipeline-num-layers 3"), "%s", s); /* pp=3: one middle stage */
    free(s);
    build_case(&CASES[4], &cfg, &l, ch);
    s = export_of(PLAN_EXPORT_MEGATRON, &cfg, &l, ch, NULL);
    cr_assert(strstr(s, "--pipeline-model-parallel-layout \"Et*3|t*5|t*5|t*3,L\""), "%s", s);
    free(s);
    build_case(&CASES[7], &cfg, &l, ch);
    s = export_of(PLAN_EXPORT_MEGATRON, &cfg, &l, ch, NULL);
    cr_assert(strstr(s, "--pipeline-model-parallel-layout \"Et|(t*2|)*6t,L\""), "%s", s);
    free(s);
}

/* ---- torchtitan ---------------------------------------------------------- */

/* JobConfig fields (torchtitan/config/job_config.py) by section. */
static const char *const TT_PARALLELISM[] = {
    "data_parallel_replicate_degree", "data_parallel_shard_degree", "fsdp_reshard_after_forward",
    "tensor_parallel_degree", "context_parallel_degree", "pipeline_parallel_degree", "pipeline_parallel_schedule",
    "pipeline_parallel_split_points", "pipeline_parallel_microbatch_size", "expert_parallel_degree",
    "expert_tensor_parallel_degree", NULL};
static const char *const TT_TRAINING[] = {"local_batch_size", "global_batch_size", "seq_len", "mixed_precision_param",
                                          NULL};
static const char *const TT_AC[] = {"mode", "selective_ac_option", NULL};
static const char *const TT_MODEL[] = {"converters", NULL};
static const char *const TT_FLOAT8[] = {"enable_fsdp_float8_all_gather", "precompute_float8_dynamic_scale_for_fsdp",
                                        "force_recompute_fp8_weight_in_bwd", "recipe_name", "filter_fqns", NULL};
static const char *const TT_MX[] = {"use_fp8_dim1_cast_triton_kernel", "recipe_name", "filter_fqns", NULL};

typedef struct {
    char section[32], key[64], value[512];
} toml_kv;

/* A strict TOML subset: [section], key = int | true | false | "string" | ["s", ...]. */
static int parse_toml(char *text, toml_kv *out, int cap) {
    char section[32] = "";
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || line[0] == 0) continue;
        if (line[0] == '[' && line[1] != '"') {
            char *e = strchr(line, ']');
            cr_assert(e && e[1] == 0, "bad section line '%s'", line);
            *e = 0;
            snprintf(section, sizeof section, "%s", line + 1);
            continue;
        }
        char *eq = strstr(line, " = ");
        cr_assert(eq, "not key = value: '%s'", line);
        *eq = 0;
        cr_assert_lt(n, cap);
        snprintf(out[n].section, sizeof out[n].section, "%s", section);
        snprintf(out[n].key, sizeof out[n].key, "%s", line);
        const char *v = eq + 3;
        if (v[0] == '"') cr_assert(strlen(v) >= 2 && v[strlen(v) - 1] == '"' && !strchr(v + 1, '"')[1], "%s", v);
        else if (v[0] == '[') cr_assert(v[strlen(v) - 1] == ']', "%s", v);
        else if (!strcmp(v, "true") || !strcmp(v, "false")) {
        } else {
            char *end;
            strtol(v, &end, 10);
            cr_assert(*v && !*end, "'%s' is neither an integer, a string nor a list", v);
        }
        snprintf(out[n].value, sizeof out[n].value, "%s", v);
        const char *const *names = !strcmp(section, "parallelism")             ? TT_PARALLELISM
                                   : !strcmp(section, "training")              ? TT_TRAINING
                                   : !strcmp(section, "activation_checkpoint") ? TT_AC
                                   : !strcmp(section, "model")                 ? TT_MODEL
                                   : !strcmp(section, "float8")                ? TT_FLOAT8
                                   : !strcmp(section, "mx")                    ? TT_MX
                                                                               : NULL;
        cr_assert(names, "section [%s] is not a JobConfig section the export should write", section);
        cr_assert(in_list(names, out[n].key), "[%s] %s is not a torchtitan option", section, out[n].key);
        n++;
    }
    return n;
}

static const char *toml_get(const toml_kv *t, int n, const char *sec, const char *key) {
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].section, sec) && !strcmp(t[i].key, key)) return t[i].value;
    return NULL;
}

static int toml_int(const toml_kv *t, int n, const char *sec, const char *key) {
    const char *v = toml_get(t, n, sec, key);
    cr_assert(v, "[%s] %s missing", sec, key);
    return atoi(v);
}

Test(export, torchtitan_round_trips) {
    for (int i = 0; i < N_CASES; i++) {
        gpt_config cfg;
        layout l;
        int ch[16];
        build_case(&CASES[i], &cfg, &l, ch);
        char *s = export_of(PLAN_EXPORT_TORCHTITAN, &cfg, &l, ch, NULL);
        toml_kv t[64];
        int n = parse_toml(s, t, 64);
        const int rep = toml_int(t, n, "parallelism", "data_parallel_replicate_degree");
        const int shard = toml_int(t, n, "parallelism", "data_parallel_shard_degree");
        cr_assert_eq(rep * shard, l.dp, "%s", CASES[i].name);
        cr_assert_eq(shard > 1, l.dp > 1 && l.zero != ZERO_NONE, "%s", CASES[i].name);
        cr_assert_eq(toml_int(t, n, "parallelism", "tensor_parallel_degree"), l.tp);
        cr_assert_eq(toml_int(t, n, "parallelism", "context_parallel_degree"), l.cp);
        cr_assert_eq(toml_int(t, n, "parallelism", "pipeline_parallel_degree"), l.pp);
        cr_assert_eq(toml_int(t, n, "training", "local_batch_size") * l.dp, l.global_batch);
        cr_assert_eq(toml_int(t, n, "training", "global_batch_size"), l.global_batch);
        cr_assert_eq(toml_int(t, n, "training", "seq_len"), cfg.seq_len);
        const char *mode = toml_get(t, n, "activation_checkpoint", "mode");
        cr_assert_str_eq(mode, l.recompute == RECOMPUTE_FULL        ? "\"full\""
                               : l.recompute == RECOMPUTE_SELECTIVE ? "\"selective\""
                                                                    : "\"none\"");
        if (l.pp > 1) {
            const char *sched = toml_get(t, n, "parallelism", "pipeline_parallel_schedule");
            cr_assert_str_eq(sched, l.vp > 1 ? "\"Interleaved1F1B\"" : "\"1F1B\"");
            cr_assert_eq(toml_int(t, n, "parallelism", "pipeline_parallel_microbatch_size"), l.micro_batch);
            /* split points "layers.N": the first module of every chunk after the first */
            const char *sp = toml_get(t, n, "parallelism", "pipeline_parallel_split_points");
            int starts[16], k = 0;
            for (const char *p = strstr(sp, "\"layers."); p; p = strstr(p + 1, "\"layers.")) starts[k++] = atoi(p + 8);
            cr_assert_eq(k, l.pp * l.vp - 1, "%s: %d split points", CASES[i].name, k);
            int prev = 0;
            for (int c = 0; c < l.pp * l.vp; c++) {
                const int next = c < k ? starts[c] : cfg.n_layers;
                cr_assert_eq(next - prev, ch[c], "%s: chunk %d", CASES[i].name, c);
                prev = next;
            }
        } else {
            cr_assert_null(toml_get(t, n, "parallelism", "pipeline_parallel_split_points"));
        }
        free(s);
    }
}

/* ---- FP8 options ---------------------------------------------------------- */

/* FP8 layouts carry their recipe in each framework's own names, checked
 * against the frameworks' sources: Megatron-LM's arguments.py
 * (--fp8-format e4m3|hybrid, --fp8-recipe tensorwise|delayed|mxfp8|blockwise)
 * and torchtitan's job_config.py (converters "float8" with [float8]
 * recipe_name tensorwise|rowwise|rowwise_with_gw_hp,
 * enable_fsdp_float8_all_gather, precompute_float8_dynamic_scale_for_fsdp,
 * filter_fqns; converter "mx" with [mx] recipe_name "mxfp8"). */
Test(export, fp8_options_in_each_frameworks_names) {
    static const char *const want_format[FP8_RECIPE_COUNT] = {"hybrid", "hybrid", "e4m3", "hybrid"};
    static const char *const want_tt[FP8_RECIPE_COUNT] = {"\"tensorwise\"", "\"tensorwise\"", "\"rowwise\"", "\"mxfp8\""};
    for (int r = 0; r < FP8_RECIPE_COUNT; r++) {
        gpt_config cfg;
        layout l;
        int ch[16];
        build_case(&CASES[0], &cfg, &l, ch);
        l.prec = PRECISION_FP8;
        l.fp8 = (fp8_recipe)r;
        l.dp = 4;
        l.zero = ZERO_FSDP;
        char *s = export_of(PLAN_EXPORT_MEGATRON, &cfg, &l, ch, NULL);
        arg_kv a[64];
        int n = parse_megatron(s, a, 64);
        cr_assert_str_eq(arg_get(a, n, "--fp8-format"), want_format[r], "%s", fp8_recipe_name(l.fp8));
        cr_assert_str_eq(arg_get(a, n, "--fp8-recipe"), fp8_recipe_name(l.fp8));
        cr_assert_not_null(arg_get(a, n, "--bf16"), "FP8 runs keep bf16 elsewhere");
        for (int i = 0; i < n; i++) cr_assert(in_list(MEGATRON_ARGS, a[i].name), "unknown argument %s", a[i].name);
        free(s);
        s = export_of(PLAN_EXPORT_TORCHTITAN, &cfg, &l, ch, NULL);
        const int noted = strstr(s, "# fp8=") != NULL;
        toml_kv t[64];
        n = parse_toml(s, t, 64);
        const int mx = r == FP8_RECIPE_MXFP8;
        cr_assert_str_eq(toml_get(t, n, "model", "converters"), mx ? "[\"mx\"]" : "[\"float8\"]");
        cr_assert_str_eq(toml_get(t, n, mx ? "mx" : "float8", "recipe_name"), want_tt[r]);
        cr_assert_str_eq(toml_get(t, n, mx ? "mx" : "float8", "filter_fqns"), "[\"output\"]", "the head stays bf16");
        cr_assert_eq(noted, r == FP8_RECIPE_DELAYED || r == FP8_RECIPE_BLOCKWISE,
                     "a note where torchtitan lacks the recipe (%s)", fp8_recipe_name(l.fp8));
        if (r == FP8_RECIPE_TENSORWISE)
            cr_assert_str_eq(toml_get(t, n, "float8", "enable_fsdp_float8_all_gather"), "true");
        free(s);
    }
    /* a bf16 layout carries none of it */
    gpt_config cfg;
    layout l;
    int ch[16];
    build_case(&CASES[0], &cfg, &l, ch);
    l.prec = PRECISION_BF16;
    char *s = export_of(PLAN_EXPORT_MEGATRON, &cfg, &l, ch, NULL);
    cr_assert_null(strstr(s, "fp8"), "%s", s);
    free(s);
    s = export_of(PLAN_EXPORT_TORCHTITAN, &cfg, &l, ch, NULL);
    cr_assert_null(strstr(s, "float8"), "%s", s);
    free(s);
}

/* ---- DeepSpeed ----------------------------------------------------------- */

static const char *const DS_CONFIG_KEYS[] = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                             "gradient_accumulation_steps", "bf16", "fp16", "zero_optimization",
                                             NULL};
static const char *const DS_MODULE_KEYS[] = {"num_stages", "partition_method", "activation_checkpoint_interval",
                                             "layer_specs", "parts", "stage_layers", NULL};

Test(export, deepspeed_round_trips) {
    for (int i = 0; i < N_CASES; i++) {
        gpt_config cfg;
        layout l;
        int ch[16];
        build_case(&CASES[i], &cfg, &l, ch);
        char *s = export_of(PLAN_EXPORT_DEEPSPEED, &cfg, &l, ch, NULL);
        json_error_t err;
        json_t *root = json_loads(s, 0, &err);
        cr_assert(root, "%s: not JSON (line %d: %s):\n%s", CASES[i].name, err.line, err.text, s);
        json_t *ds = json_object_get(root, "ds_config"), *pm = json_object_get(root, "pipeline_module");
        cr_assert(json_is_object(ds) && json_is_object(pm) && json_is_array(json_object_get(root, "notes")));
        const char *key;
        json_t *v;
        json_object_foreach(ds, key, v) cr_assert(in_list(DS_CONFIG_KEYS, key), "ds_config.%s is not DeepSpeed's", key);
        json_object_foreach(pm, key, v) cr_assert(in_list(DS_MODULE_KEYS, key), "pipeline_module.%s unknown", key);
        const int tb = (int)json_integer_value(json_object_get(ds, "train_batch_size"));
        const int mb = (int)json_integer_value(json_object_get(ds, "train_micro_batch_size_per_gpu"));
        const int gas = (int)json_integer_value(json_object_get(ds, "gradient_accumulation_steps"));
        cr_assert_eq(tb, l.global_batch);
        cr_assert_eq(mb, l.micro_batch);
        cr_assert_eq(mb * gas * l.dp, tb, "%s: DeepSpeed requires train_batch = micro * gas * dp", CASES[i].name);
        const int stage = (int)json_integer_value(json_object_get(json_object_get(ds, "zero_optimization"), "stage"));
        cr_assert_eq(stage, l.dp > 1 ? (l.zero == ZERO_FSDP ? 3 : (int)l.zero) : 0, "%s", CASES[i].name);
        cr_assert_eq(json_is_true(json_object_get(json_object_get(ds, "bf16"), "enabled")),
                     l.prec == PRECISION_BF16 || l.prec == PRECISION_FP8);
        cr_assert_eq(json_integer_value(json_object_get(pm, "num_stages")), l.pp);
        json_t *parts = json_object_get(pm, "parts");
        cr_assert_eq((int)json_array_size(parts), l.pp + 1);
        cr_assert_eq(json_integer_value(json_array_get(parts, 0)), 0);
        cr_assert_eq(json_integer_value(json_array_get(parts, l.pp)), cfg.n_layers + 2);
        for (int st = 0; st < l.pp; st++) {
            int want = 0;
            for (int vv = 0; vv < l.vp; vv++) want += ch[vv * l.pp + st];
            /* specs of stage st minus the embedding (stage 0) and the head (last stage) */
            int got = (int)(json_integer_value(json_array_get(parts, st + 1)) - json_integer_value(json_array_get(parts, st)));
            got -= (st == 0) + (st == l.pp - 1);
            cr_assert_eq(got, want, "%s: stage %d holds %d layers, not %d", CASES[i].name, st, got, want);
        }
        const char *method = json_string_value(json_object_get(pm, "partition_method"));
        cr_assert(method && (!strcmp(method, "uniform") || !strcmp(method, "parameters") || !strcmp(method, "explicit")));
        /* 3 | 3 of the default GPT is DeepSpeed's parameters split and, over 8 specs, its uniform one */
        if (!strcmp(CASES[i].name, "two stages, deepspeed's parameters split"))
            cr_assert(strcmp(method, "explicit"), "%s", method);
        if (!strcmp(CASES[i].name, "any split")) cr_assert_str_eq(method, "explicit");
        cr_assert_eq(json_integer_value(json_object_get(pm, "activation_checkpoint_interval")),
                     l.recompute != RECOMPUTE_NONE);
        json_decref(root);
        free(s);
    }
}

/* ---- JSON ---------------------------------------------------------------- */

Test(export, json_round_trips_with_a_prediction) {
    for (int i = 0; i < N_CASES; i++) {
        gpt_config cfg;
        layout l;
        int ch[16];
        build_case(&CASES[i], &cfg, &l, ch);
        layout_result r;
        memset(&r, 0, sizeof r);
        r.step_us = 1234.5 + i;
        r.tokens_per_s = 1e6;
        r.mfu = 0.41;
        r.mem.total = 123456789;
        r.mem_cap = 80000000000LL;
        r.parts_us[LAYOUT_T_BUBBLE] = 100.0;
        char *s = export_of(PLAN_EXPORT_JSON, &cfg, &l, ch, i % 2 ? &r : NULL);
        json_error_t err;
        json_t *root = json_loads(s, 0, &err);
        cr_assert(root, "%s: not JSON: %s\n%s", CASES[i].name, err.text, s);
        json_t *lay = json_object_get(root, "layout");
        cr_assert_eq(json_integer_value(json_object_get(lay, "tp")), l.tp);
        cr_assert_eq(json_integer_value(json_object_get(lay, "pp")), l.pp);
        cr_assert_eq(json_integer_value(json_object_get(lay, "vp")), l.vp);
        cr_assert_eq(json_integer_value(json_object_get(lay, "dp")), l.dp);
        cr_assert_eq(json_integer_value(json_object_get(lay, "cp")), l.cp);
        cr_assert_eq(json_integer_value(json_object_get(lay, "micro_batch")), l.micro_batch);
        cr_assert_eq(json_integer_value(json_object_get(lay, "micro_batches")), l.global_batch / (l.dp * l.micro_batch));
        cr_assert_str_eq(json_string_value(json_object_get(lay, "precision")), precision_name(l.prec));
        json_t *cl = json_object_get(root, "chunk_layers");
        cr_assert_eq((int)json_array_size(cl), l.pp * l.vp);
        for (int c = 0; c < l.pp * l.vp; c++) cr_assert_eq(json_integer_value(json_array_get(cl, c)), ch[c]);
        json_t *pr = json_object_get(root, "predicted");
        if (i % 2) {
            cr_assert(json_is_object(pr));
            cr_assert_float_eq(json_real_value(json_object_get(pr, "step_ms")), r.step_us / 1e3, 1e-9);
            cr_assert_eq(json_integer_value(json_object_get(json_object_get(pr, "memory_bytes"), "total")), r.mem.total);
            cr_assert_eq(json_integer_value(json_object_get(pr, "headroom_bytes")), r.mem_cap - r.mem.total);
            cr_assert_float_eq(json_real_value(json_object_get(json_object_get(pr, "breakdown_ms"), "bubble")), 0.1, 1e-12);
        } else {
            cr_assert_null(pr);
        }
        json_decref(root);
        free(s);
    }
}

Test(export, bad_chunks_and_formats_are_refused) {
    gpt_config cfg;
    layout l;
    int ch[16];
    build_case(&CASES[3], &cfg, &l, ch);
    ch[1] = 3; /* 3 + 3 + 5 = 11, not 12 */
    char *s = NULL, msg[256] = "";
    cr_assert_eq(plan_export_string(PLAN_EXPORT_MEGATRON, &cfg, &l, ch, NULL, &s, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_null(s);
    cr_assert(strstr(msg, "11"), "%s", msg);
    ch[1] = 0;
    ch[2] = 9;
    cr_assert_eq(plan_export_string(PLAN_EXPORT_JSON, &cfg, &l, ch, NULL, &s, msg, sizeof msg), PL_ERR_INVALID);
    plan_export_format f;
    cr_assert_eq(plan_export_parse_format("torchtitan", &f, msg, sizeof msg), PL_OK);
    cr_assert_eq(f, PLAN_EXPORT_TORCHTITAN);
    cr_assert_eq(plan_export_parse_format("nemo", &f, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "megatron"), "%s", msg);
}

/* The layout's pipeline order (sched=): torchtitan names its own schedules,
 * Megatron-LM and DeepSpeed say plainly they have none. */
Test(export, split_orders_are_named_where_the_framework_runs_them) {
    gpt_config cfg;
    char msg[256];
    cr_assert_eq(gpt_config_parse("default,layers=8", &cfg, msg, sizeof msg), PL_OK, "%s", msg);
    static const struct {
        const char *text, *tt, *mg;
    } cases[] = {
        {"pp=4,vp=2,mbs=1,gbs=16,sched=zb-v", "pipeline_parallel_schedule = \"ZBVZeroBubble\"", "--zero-bubble-v-schedule"},
        {"pp=4,vp=2,mbs=1,gbs=16,sched=dualpipev", "pipeline_parallel_schedule = \"DualPipeV\"", "no DualPipeV"},
        {"pp=4,mbs=1,gbs=16,sched=zb-h1", "pipeline_parallel_schedule = \"InterleavedZeroBubble\"", "--enable-zero-bubble"},
        {"pp=4,mbs=1,gbs=16,sched=zb-h2", "no ZB-H2 memory setting", "--enable-zero-bubble"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        layout l;
        cr_assert_eq(layout_parse(cases[i].text, &l, msg, sizeof msg), PL_OK, "%s", msg);
        int ch[LAYOUT_MAX_CHUNKS];
        cr_assert_eq(layout_chunk_layers(&l, cfg.n_layers, ch, msg, sizeof msg), PL_OK, "%s", msg);
        char *tt = export_of(PLAN_EXPORT_TORCHTITAN, &cfg, &l, ch, NULL);
        cr_assert_not_null(strstr(tt, cases[i].tt), "%s: torchtitan export lacks %s:\n%s", cases[i].text, cases[i].tt, tt);
        char *mg = export_of(PLAN_EXPORT_MEGATRON, &cfg, &l, ch, NULL);
        cr_assert_not_null(strstr(mg, "Megatron-LM has no zero-bubble or DualPipe schedule option"), "%s", mg);
        cr_assert_not_null(strstr(mg, cases[i].mg), "%s: megatron export lacks %s:\n%s", cases[i].text, cases[i].mg, mg);
        free(tt);
        free(mg);
    }
}

/* Mixture-of-experts layouts: the expert grid, dispatcher and the model's
 * MoE and MLA shapes parsed back from each export; a dense model's exports
 * carry none of them (the cases above). */
Test(export, moe_options_round_trip) {
    static const struct { const char *model, *layout; } cases[] = {
        {"deepseek-v3", "tp=1,pp=16,dp=128,ep=64,zero=1,mbs=1,gbs=15360,recompute=full"},
        {"mixtral-8x7b", "tp=2,sp=1,pp=4,dp=8,ep=4,etp=2,zero=1,mbs=1,gbs=256,dispatcher=allgather"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gpt_config cfg;
        layout l;
        char msg[512];
        cr_assert_eq(model_config_load(cases[i].model, &cfg, NULL, 0, msg, sizeof msg), PL_OK, "%s", msg);
        cr_assert_eq(layout_parse(cases[i].layout, &l, msg, sizeof msg), PL_OK, "%s", msg);
        cr_assert_eq(layout_validate(&l, &cfg, 0, msg, sizeof msg), PL_OK, "%s", msg);
        int ch[LAYOUT_MAX_CHUNKS];
        cr_assert_eq(layout_chunk_layers(&l, cfg.n_layers, ch, msg, sizeof msg), PL_OK);
        char *s = export_of(PLAN_EXPORT_MEGATRON, &cfg, &l, ch, NULL);
        arg_kv a[64];
        int n = parse_megatron(s, a, 64);
        cr_assert_eq(arg_int(a, n, "--num-experts", 0), cfg.n_experts);
        cr_assert_eq(arg_int(a, n, "--moe-router-topk", 0), cfg.top_k);
        cr_assert_eq(arg_int(a, n, "--moe-ffn-hidden-size", 0), cfg.moe_d_ff);
        cr_assert_eq(arg_int(a, n, "--expert-model-parallel-size", 0), l.ep);
        cr_assert_eq(arg_int(a, n, "--expert-tensor-parallel-size", 0), l.etp);
        cr_assert_str_eq(arg_get(a, n, "--moe-token-dispatcher-type"), moe_dispatcher_name(l.dispatcher));
        cr_assert_not_null(arg_get(a, n, "--moe-grouped-gemm"));
        cr_assert_eq(arg_get(a, n, "--multi-latent-attention") != NULL, gpt_is_mla(&cfg));
        if (gpt_is_mla(&cfg)) {
            cr_assert_eq(arg_int(a, n, "--kv-lora-rank", 0), cfg.kv_lora_rank);
            cr_assert_eq(arg_int(a, n, "--q-lora-rank", 0), cfg.q_lora_rank);
            cr_assert_eq(arg_int(a, n, "--qk-pos-emb-head-dim", 0), cfg.qk_rope_dim);
            cr_assert_eq(arg_int(a, n, "--moe-shared-expert-intermediate-size", 0), cfg.shared_d_ff);
            /* the layer pattern: one entry per layer, 1 for MoE */
            const char *freq = arg_get(a, n, "--moe-layer-freq");
            cr_assert_not_null(freq);
            int k = 0, moe = 0;
            for (const char *p = freq; *p; p++)
                if (*p == '0' || *p == '1') moe += *p == '1', k++;
            cr_assert_eq(k, cfg.n_layers);
            cr_assert_eq(moe, gpt_moe_layers_in(&cfg, 0, cfg.n_layers));
        }
        free(s);
        s = export_of(PLAN_EXPORT_TORCHTITAN, &cfg, &l, ch, NULL);
        toml_kv t[64];
        n = parse_toml(s, t, 64);
        cr_assert_eq(toml_int(t, n, "parallelism", "expert_parallel_degree"), l.ep);
        cr_assert_eq(toml_int(t, n, "parallelism", "expert_tensor_parallel_degree"), l.etp);
        free(s);
        s = export_of(PLAN_EXPORT_DEEPSPEED, &cfg, &l, ch, NULL);
        json_error_t err;
        json_t *root = json_loads(s, 0, &err);
        cr_assert(root, "%s", err.text);
        json_t *moe = json_object_get(root, "moe");
        cr_assert_eq(json_integer_value(json_object_get(moe, "num_experts")), cfg.n_experts);
        cr_assert_eq(json_integer_value(json_object_get(moe, "ep_size")), l.ep);
        cr_assert_eq(json_integer_value(json_object_get(moe, "k")), cfg.top_k);
        json_decref(root);
        free(s);
    }
}
