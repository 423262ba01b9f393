/*
 * test_export.c: every export of a planned layout read back with a small,
 * strict reader (an unknown line or key fails the test) and compared with
 * the layout and model it came from; each framework's refusals; the
 * framework filter and torchtitan's flavor table. The names themselves are
 * checked by the frameworks' own parsers in tests/plan/
 * test_framework_parsers.py (Megatron-Core's config classes, torchtitan's
 * ConfigManager and ParallelDims, DeepSpeed's DeepSpeedConfig and
 * PipelineModule); the lists here are the names each writer may use.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "export_plan.h"
#include "framework_keys.h"
#include "graph.h"
#include "model_arch.h"
#include "model_config.h"
#include "model_params.h"
#include "plan.h"

/* ---- the cases ---------------------------------------------------------- */

/* A model (model_config_load's text, so shipped names bring their
 * architecture) and a layout (placer layout's text form). */
typedef struct {
    const char *name, *model, *layout;
} ex_case;

/* Cases each framework runs: Megatron and torchtitan a Llama-3-8B cut to
 * 16 layers; DeepSpeed, which has no tensor parallelism, the same without. */
static const ex_case MEGATRON_CASES[] = {
    {"uniform", "llama-3-8b,layers=16", "tp=2,sp=1,pp=2,dp=4,zero=1,mbs=1,gbs=64,recompute=full"},
    {"uniform interleaved", "llama-3-8b,layers=12", "tp=1,pp=2,vp=3,dp=2,mbs=2,gbs=32"},
    {"first and last lighter", "llama-3-8b,layers=14", "tp=4,sp=1,cp=2,pp=4,dp=2,zero=1,mbs=1,gbs=32,"
                                                       "recompute=selective,precision=fp16,stages=2/5/5/2"},
    {"any split", "llama-3-8b,layers=12", "pp=3,dp=8,mbs=2,gbs=64,recompute=full,stages=3/4/5"},
    {"interleaved non-uniform", "llama-3-8b,layers=16", "tp=2,sp=1,pp=2,vp=2,dp=2,zero=1,mbs=1,gbs=16,"
                                                        "precision=fp8,fp8=tensorwise,stages=3/5/5/3"},
    {"no pipeline, torch FSDP2", "llama-3-8b,layers=8", "tp=8,sp=1,dp=4,zero=3,mbs=2,gbs=64"},
    {"repeated middle chunks", "llama-3-8b,layers=14", "pp=4,vp=2,dp=2,mbs=1,gbs=16,stages=1/2/2/2/2/2/2/1"},
};
static const ex_case TORCHTITAN_CASES[] = {
    {"fsdp, no pipeline", "llama-3-8b,layers=16", "tp=2,sp=1,dp=4,zero=fsdp,mbs=2,gbs=64,recompute=full"},
    {"zero 3 with a pipeline", "llama-3-8b,layers=16", "tp=2,sp=1,pp=2,dp=4,zero=3,mbs=1,gbs=64"},
    {"interleaved non-uniform", "llama-3-8b,layers=16", "pp=2,vp=2,dp=2,zero=3,mbs=1,gbs=16,stages=3/5/5/3"},
    {"context parallel", "llama-3-8b,layers=8", "tp=2,sp=1,cp=2,dp=2,zero=3,mbs=1,gbs=8"},
    {"ddp alone", "llama-3-8b,layers=8", "dp=8,mbs=1,gbs=64"},
    {"zb-v", "llama-3-8b,layers=16", "pp=4,vp=2,dp=2,zero=3,mbs=1,gbs=32,sched=zb-v"},
    {"dualpipev", "llama-3-8b,layers=16", "pp=2,vp=2,dp=2,zero=3,mbs=1,gbs=16,sched=dualpipev"},
    {"the full flavor", "llama-3-8b", "pp=4,dp=2,zero=3,mbs=1,gbs=16"},
};
static const ex_case DEEPSPEED_CASES[] = {
    {"uniform", "llama-3-8b,layers=14", "pp=2,dp=4,zero=1,mbs=1,gbs=64,recompute=full"},
    {"any split", "llama-3-8b,layers=12", "pp=3,dp=8,mbs=2,gbs=64,stages=3/4/5"},
    {"no pipeline, ZeRO-3", "llama-3-8b,layers=8", "dp=8,zero=3,mbs=1,gbs=64,precision=fp16"},
    {"deepspeed's parameters split", "default", "pp=2,mbs=4,gbs=16,precision=fp32,stages=3/3"},
};
#define N_OF(a) (int)(sizeof(a) / sizeof(a)[0])

typedef struct {
    gpt_config cfg;
    model_arch arch;
    layout l;
    int ch[LAYOUT_MAX_CHUNKS];
} built;

static void build(const ex_case *x, built *b) {
    char msg[512];
    cr_assert_eq(model_config_load(x->model, &b->cfg, NULL, 0, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(model_arch_load(x->model, &b->arch, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_parse(x->layout, &b->l, msg, sizeof msg), PL_OK, "%s: %s", x->name, msg);
    if (!strstr(x->layout, "seq")) b->cfg.seq_len = 4096;
    cr_assert_eq(layout_validate(&b->l, &b->cfg, 0, msg, sizeof msg), PL_OK, "%s: %s", x->name, msg);
    cr_assert_eq(layout_chunk_layers(&b->l, b->cfg.n_layers, b->ch, msg, sizeof msg), PL_OK, "%s", msg);
}

/* The export's files, checked to exist; NULL file names are not looked up. */
static void export_files(plan_export_format f, const built *b, plan_export_files *out) {
    char msg[512] = "";
    plan_export_in in = {&b->cfg, &b->arch, "model", &b->l, b->ch, NULL, plan_export_framework(f)};
    cr_assert_eq(plan_export_build(f, &in, out, msg, sizeof msg), PL_OK, "%s", msg);
}

static const char *file_of(const plan_export_files *o, const char *name) {
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->name[i], name)) return o->text[i];
    return NULL;
}

static char *dup_file(const plan_export_files *o, const char *name) {
    const char *t = file_of(o, name);
    cr_assert_not_null(t, "no %s in the export", name);
    return strdup(t);
}

static int in_list(const char *const *list, const char *s) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], s)) return 1;
    return 0;
}

/* ---- Megatron-LM --------------------------------------------------------- */

/* Names from megatron/training/arguments.py that the export may use (the
 * parsers' check compares them with Megatron-LM's own parser). */
static const char *const MEGATRON_ARGS[] = {
    "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--group-query-attention",
    "--num-query-groups", "--kv-channels", "--seq-length", "--max-position-embeddings", "--normalization",
    "--norm-epsilon", "--swiglu", "--squared-relu", "--position-embedding-type", "--rotary-base",
    "--disable-bias-linear", "--add-qkv-bias", "--untie-embeddings-and-output-weights", "--qk-layernorm",
    "--make-vocab-size-divisible-by", "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
    "--context-parallel-size", "--sequence-parallel", "--num-layers-per-virtual-pipeline-stage",
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers", "--pipeline-model-parallel-layout",
    "--recompute-granularity", "--recompute-method", "--recompute-num-layers", "--use-distributed-optimizer",
    "--use-torch-fsdp2", "--no-gradient-accumulation-fusion", "--bf16", "--fp16", "--fp8-format", "--fp8-recipe",
    "--micro-batch-size", "--global-batch-size", "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size",
    "--moe-shared-expert-intermediate-size", "--moe-layer-freq", "--moe-router-score-function",
    "--moe-router-enable-expert-bias", "--moe-router-num-groups", "--moe-router-group-topk",
    "--moe-router-topk-scaling-factor", "--expert-model-parallel-size", "--expert-tensor-parallel-size",
    "--moe-token-dispatcher-type", "--moe-flex-dispatcher-backend", "--moe-grouped-gemm", "--multi-latent-attention",
    "--kv-lora-rank", "--q-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim", "--v-head-dim", NULL};
static const char *const MEGATRON_FLAGS[] = {
    "--group-query-attention", "--sequence-parallel", "--use-distributed-optimizer", "--use-torch-fsdp2",
    "--no-gradient-accumulation-fusion", "--bf16", "--fp16", "--moe-grouped-gemm", "--multi-latent-attention",
    "--swiglu", "--squared-relu", "--disable-bias-linear", "--add-qkv-bias", "--untie-embeddings-and-output-weights",
    "--qk-layernorm", "--moe-router-enable-expert-bias", NULL};

typedef struct {
    char name[64];
    char value[1024];
} arg_kv;

/* args.txt into (name, value) pairs (value "" for flags): arguments only,
 * every line but the last continued. */
static int parse_megatron(char *text, arg_kv *out, int cap) {
    int n = 0, last_continued = 1;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cr_assert(line[0] == '-', "args.txt holds arguments only: '%s'", line);
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
        cr_assert(in_list(MEGATRON_ARGS, out[n].name), "'%s' is not an argument the export writes", out[n].name);
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

/* Megatron's layout string ("Et*3|(t*2|)*3t*2,L") into chunk layer counts. */
static int parse_layout_string(const char *s0, int *ch) {
    static char s[8192];
    expand_layout(s0, s, sizeof s);
    int c = 0, cur = 0;
    cr_assert_eq(s[0], 'E', "layout string must start with the embedding: %s", s);
    cr_assert_eq(s[strlen(s) - 1], 'L', "the loss must close the last chunk: %s", s);
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
    ch[c++] = cur;
    return c;
}

static int megatron_args(const built *b, arg_kv *a, int cap) {
    plan_export_files o;
    export_files(PLAN_EXPORT_MEGATRON, b, &o);
    char *s = dup_file(&o, "args.txt");
    cr_assert_not_null(file_of(&o, "env.sh"));
    cr_assert_not_null(file_of(&o, "README"));
    const int n = parse_megatron(s, a, cap);
    free(s);
    plan_export_files_free(&o);
    return n;
}

Test(export, megatron_round_trips) {
    for (int i = 0; i < N_OF(MEGATRON_CASES); i++) {
        const ex_case *x = &MEGATRON_CASES[i];
        built b;
        build(x, &b);
        const layout *l = &b.l;
        arg_kv a[96];
        int n = megatron_args(&b, a, 96);
        cr_assert_eq(arg_int(a, n, "--num-layers", 0), b.cfg.n_layers, "%s", x->name);
        cr_assert_eq(arg_int(a, n, "--tensor-model-parallel-size", 0), l->tp);
        cr_assert_eq(arg_int(a, n, "--pipeline-model-parallel-size", 0), l->pp);
        cr_assert_eq(arg_int(a, n, "--context-parallel-size", 0), l->cp);
        cr_assert_eq(arg_get(a, n, "--sequence-parallel") != NULL, l->sp && l->tp > 1, "%s", x->name);
        cr_assert_eq(arg_int(a, n, "--micro-batch-size", 0), l->micro_batch);
        cr_assert_eq(arg_int(a, n, "--global-batch-size", 0), l->global_batch);
        cr_assert_eq(arg_int(a, n, "--seq-length", 0), b.cfg.seq_len);
        /* the chunks, from whichever form the export chose */
        int got[LAYOUT_MAX_CHUNKS], C;
        const char *lay = arg_get(a, n, "--pipeline-model-parallel-layout");
        if (lay) {
            C = parse_layout_string(lay, got);
        } else {
            const int per = arg_int(a, n, "--num-layers-per-virtual-pipeline-stage", 0);
            const int vp = per ? b.cfg.n_layers / (l->pp * per) : 1;
            C = l->pp * vp;
            const int first = arg_int(a, n, "--decoder-first-pipeline-num-layers", -1);
            const int last = arg_int(a, n, "--decoder-last-pipeline-num-layers", -1);
            cr_assert_eq(first < 0, last < 0, "first and last come together");
            for (int c = 0; c < C; c++) got[c] = per ? per : b.cfg.n_layers / C;
            if (first >= 0) {
                cr_assert_eq(vp, 1);
                got[0] = first;
                got[C - 1] = last;
                for (int c = 1; c < C - 1; c++) got[c] = (b.cfg.n_layers - first - last) / (C - 2);
            }
        }
        cr_assert_eq(C, l->pp * l->vp, "%s: %d chunks, not %d", x->name, C, l->pp * l->vp);
        for (int c = 0; c < C; c++) cr_assert_eq(got[c], b.ch[c], "%s: chunk %d", x->name, c);
        const char *g = arg_get(a, n, "--recompute-granularity");
        cr_assert_eq(l->recompute == RECOMPUTE_NONE ? g == NULL : g != NULL, 1);
        if (g) cr_assert_str_eq(g, l->recompute == RECOMPUTE_FULL ? "full" : "selective");
        if (l->recompute == RECOMPUTE_FULL) cr_assert_str_eq(arg_get(a, n, "--recompute-method"), "uniform");
        const int dopt = arg_get(a, n, "--use-distributed-optimizer") != NULL;
        const int fsdp = arg_get(a, n, "--use-torch-fsdp2") != NULL;
        cr_assert_eq(dopt, l->dp > 1 && l->zero == ZERO_1, "%s", x->name);
        cr_assert_eq(fsdp, l->dp > 1 && l->zero == ZERO_3, "%s", x->name);
        cr_assert_eq(arg_get(a, n, "--no-gradient-accumulation-fusion") != NULL, fsdp, "FSDP2 asserts it off");
        cr_assert_eq(arg_get(a, n, "--bf16") != NULL, l->prec == PRECISION_BF16 || l->prec == PRECISION_FP8);
        cr_assert_eq(arg_get(a, n, "--fp16") != NULL, l->prec == PRECISION_FP16);
        /* the model is Llama's, not Megatron's GPT-2 default */
        cr_assert_str_eq(arg_get(a, n, "--normalization"), "RMSNorm");
        cr_assert_not_null(arg_get(a, n, "--swiglu"));
        cr_assert_str_eq(arg_get(a, n, "--position-embedding-type"), "rope");
        cr_assert_str_eq(arg_get(a, n, "--rotary-base"), "500000");
        cr_assert_str_eq(arg_get(a, n, "--norm-epsilon"), "1e-05");
        cr_assert_not_null(arg_get(a, n, "--disable-bias-linear"));
        cr_assert_not_null(arg_get(a, n, "--untie-embeddings-and-output-weights"));
        cr_assert_not_null(arg_get(a, n, "--group-query-attention"));
        cr_assert_eq(arg_int(a, n, "--num-query-groups", 0), 8);
        cr_assert_eq(arg_int(a, n, "--ffn-hidden-size", 0), 14336);
    }
}

Test(export, megatron_uses_the_simple_flags_when_they_suffice) {
    built b;
    arg_kv a[96];
    build(&MEGATRON_CASES[2], &b); /* 2 / 5 / 5 / 2 at vp 1 */
    int n = megatron_args(&b, a, 96);
    cr_assert_eq(arg_int(a, n, "--decoder-first-pipeline-num-layers", 0), 2);
    cr_assert_eq(arg_int(a, n, "--decoder-last-pipeline-num-layers", 0), 2);
    cr_assert_null(arg_get(a, n, "--pipeline-model-parallel-layout"));
    build(&MEGATRON_CASES[3], &b); /* 3 / 4 / 5: one middle stage, so the first/last flags */
    n = megatron_args(&b, a, 96);
    cr_assert_eq(arg_int(a, n, "--decoder-first-pipeline-num-layers", 0), 3);
    build(&MEGATRON_CASES[4], &b);
    n = megatron_args(&b, a, 96);
    cr_assert_str_eq(arg_get(a, n, "--pipeline-model-parallel-layout"), "Et*3|t*5|t*5|t*3,L");
    build(&MEGATRON_CASES[6], &b);
    n = megatron_args(&b, a, 96);
    cr_assert_str_eq(arg_get(a, n, "--pipeline-model-parallel-layout"), "Et|(t*2|)*6t,L");
}

/* Every way a model differs from Megatron's GPT-2 default is written, and
 * nothing for the ways it does not. */
Test(export, megatron_writes_the_architecture) {
    static const struct {
        const char *model, *layout;
        const char *has[8], *lacks[6];
    } cases[] = {
        {"qwen3-30b-a3b,layers=8", "tp=2,sp=1,dp=4,ep=4,zero=1,mbs=1,gbs=32",
         {"--qk-layernorm", "--kv-channels", "--num-experts", "--moe-router-topk", "--rotary-base", NULL},
         {"--moe-shared-expert-intermediate-size", "--moe-layer-freq", "--multi-latent-attention", NULL}},
        {"deepseek-v3,layers=8", "pp=2,dp=4,ep=4,zero=1,mbs=1,gbs=32",
         {"--multi-latent-attention", "--q-lora-rank", "--moe-router-enable-expert-bias", "--moe-router-num-groups",
          "--moe-layer-freq", "--moe-shared-expert-intermediate-size", NULL},
         {"--group-query-attention", "--kv-channels", "--qk-layernorm", NULL}},
        {"gpt2,layers=4", "tp=2,sp=1,dp=2,mbs=1,gbs=8",
         {"--normalization", "--position-embedding-type", NULL},
         {"--swiglu", "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--rotary-base",
          "--qk-layernorm", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ex_case x = {cases[i].model, cases[i].model, cases[i].layout};
        built b;
        build(&x, &b);
        arg_kv a[96];
        int n = megatron_args(&b, a, 96);
        for (int k = 0; cases[i].has[k]; k++)
            cr_assert_not_null(arg_get(a, n, cases[i].has[k]), "%s lacks %s", x.model, cases[i].has[k]);
        for (int k = 0; cases[i].lacks[k]; k++)
            cr_assert_null(arg_get(a, n, cases[i].lacks[k]), "%s has %s", x.model, cases[i].lacks[k]);
        if (i == 2) {
            cr_assert_str_eq(arg_get(a, n, "--normalization"), "LayerNorm");
            cr_assert_str_eq(arg_get(a, n, "--position-embedding-type"), "learned_absolute");
        }
        if (i == 1) { /* DeepSeek-V3: 3 dense layers, then experts; sigmoid router of 8 groups, 4 taken, x2.5 */
            cr_assert_str_eq(arg_get(a, n, "--moe-layer-freq"), "[0,0,0,1,1,1,1,1]");
            cr_assert_str_eq(arg_get(a, n, "--moe-router-score-function"), "sigmoid");
            cr_assert_eq(arg_int(a, n, "--moe-router-group-topk", 0), 4);
            /* the shipped file gives no routed_scaling_factor: none is written */
            cr_assert_null(arg_get(a, n, "--moe-router-topk-scaling-factor"));
        }
    }
}

Test(export, megatron_environment_and_readme) {
    built b;
    plan_export_files o;
    build(&MEGATRON_CASES[0], &b); /* tp 2 */
    export_files(PLAN_EXPORT_MEGATRON, &b, &o);
    cr_assert(strstr(file_of(&o, "env.sh"), "export CUDA_DEVICE_MAX_CONNECTIONS=1"), "%s", file_of(&o, "env.sh"));
    cr_assert(strstr(file_of(&o, "README"), "Megatron-LM d98e8a6 (megatron-core 0.16.1)"));
    cr_assert(strstr(file_of(&o, "README"), "tp=2,sp=1,cp=1,pp=2"), "the README names the layout");
    plan_export_files_free(&o);
    build(&MEGATRON_CASES[5], &b); /* torch FSDP2 with tp 8 */
    export_files(PLAN_EXPORT_MEGATRON, &b, &o);
    cr_assert(strstr(file_of(&o, "env.sh"), "unset CUDA_DEVICE_MAX_CONNECTIONS"), "%s", file_of(&o, "env.sh"));
    plan_export_files_free(&o);
}

/* ---- torchtitan ---------------------------------------------------------- */

/* JobConfig fields (torchtitan/config/job_config.py) by section. */
static const char *const TT_JOB[] = {"description", NULL};
static const char *const TT_MODEL[] = {"name", "flavor", "converters", NULL};
static const char *const TT_EXPERIMENTAL[] = {"custom_import", NULL};
static const char *const TT_TRAINING[] = {"local_batch_size", "global_batch_size", "seq_len", "mixed_precision_param",
                                          "dtype", NULL};
static const char *const TT_PARALLELISM[] = {
    "data_parallel_replicate_degree", "data_parallel_shard_degree", "fsdp_reshard_after_forward",
    "tensor_parallel_degree", "context_parallel_degree", "pipeline_parallel_degree", "pipeline_parallel_schedule",
    "module_fqns_per_model_part", "pipeline_parallel_microbatch_size", "pipeline_parallel_expert_parallel_overlap",
    "expert_parallel_degree", "expert_tensor_parallel_degree", "expert_parallel_comm_backend", NULL};
static const char *const TT_AC[] = {"mode", NULL};
static const char *const TT_FP8[] = {"recipe_name", "filter_fqns", NULL};

typedef struct {
    char section[40], key[64], value[16384];
} toml_kv;

/* A strict TOML subset: [section], key = int | true | false | "string" |
 * [...] (a list may span lines). */
static int parse_toml(char *text, toml_kv *out, int cap) {
    char section[40] = "";
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
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
        char *v = eq + 3, *hash = strstr(v, "  # ");
        if (hash) *hash = 0;
        if (!strcmp(v, "[")) { /* a list over lines, up to a line "]" */
            size_t k = (size_t)snprintf(out[n].value, sizeof out[n].value, "[\n");
            for (;;) {
                v = strtok_r(NULL, "\n", &save);
                cr_assert_not_null(v, "unclosed list for %s", out[n].key);
                k += (size_t)snprintf(out[n].value + k, sizeof out[n].value - k, "%s\n", v);
                cr_assert_lt(k, sizeof out[n].value);
                if (!strcmp(v, "]")) break;
            }
        } else if (v[0] == '[') {
            cr_assert(v[strlen(v) - 1] == ']', "%s", v);
            snprintf(out[n].value, sizeof out[n].value, "%s", v);
        } else {
            if (v[0] == '"') cr_assert(strlen(v) >= 2 && v[strlen(v) - 1] == '"' && !strchr(v + 1, '"')[1], "%s", v);
            else if (strcmp(v, "true") && strcmp(v, "false")) {
                char *end;
                strtol(v, &end, 10);
                cr_assert(*v && !*end, "'%s' is neither an integer, a string nor a list", v);
            }
            snprintf(out[n].value, sizeof out[n].value, "%s", v);
        }
        const char *const *names = !strcmp(section, "parallelism")             ? TT_PARALLELISM
                                   : !strcmp(section, "training")              ? TT_TRAINING
                                   : !strcmp(section, "activation_checkpoint") ? TT_AC
                                   : !strcmp(section, "model")                 ? TT_MODEL
                                   : !strcmp(section, "job")                   ? TT_JOB
                                   : !strcmp(section, "experimental")          ? TT_EXPERIMENTAL
                                   : !strcmp(section, "quantize.linear.float8") ||
                                           !strcmp(section, "quantize.linear.mx")
                                       ? TT_FP8
                                       : NULL;
        cr_assert(names, "section [%s] is not a JobConfig section the export should write", section);
        cr_assert(in_list(names, out[n].key), "[%s] %s is not a key the export writes", section, out[n].key);
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

static toml_kv TT[48];

static int torchtitan_toml(const built *b, plan_export_files *o) {
    export_files(PLAN_EXPORT_TORCHTITAN, b, o);
    char *s = dup_file(o, "job.toml");
    int n = parse_toml(s, TT, 48);
    free(s);
    return n;
}

/* module_fqns_per_model_part back into layers per chunk (the embedding in
 * the first chunk, norm and output in the last, layers consecutive). */
static int parse_modules(const char *v, const gpt_config *cfg, int *ch) {
    int c = 0, next = 0, depth = 0;
    for (const char *p = v; *p; p++) {
        if (*p == '[' && ++depth == 2) ch[c] = 0;
        else if (*p == ']' && depth-- == 2) c++;
        else if (!strncmp(p, "\"layers.", 8)) {
            cr_assert_eq(atoi(p + 8), next, "layers in order: %s", v);
            next++;
            ch[c]++;
        } else if (!strncmp(p, "\"tok_embeddings\"", 16)) {
            cr_assert_eq(c, 0, "the embedding in the first chunk");
        }
    }
    cr_assert_eq(next, cfg->n_layers);
    cr_assert(strstr(v, "\"norm\", \"output\"]\n]"), "norm and output close the last chunk: %s", v);
    return c;
}

Test(export, torchtitan_round_trips) {
    for (int i = 0; i < N_OF(TORCHTITAN_CASES); i++) {
        const ex_case *x = &TORCHTITAN_CASES[i];
        built b;
        build(x, &b);
        const layout *l = &b.l;
        plan_export_files o;
        const int n = torchtitan_toml(&b, &o);
        cr_assert_str_eq(toml_get(TT, n, "model", "name"), "\"llama3\"");
        char flavor[32];
        if (b.cfg.n_layers == 32) snprintf(flavor, sizeof flavor, "\"8B\"");
        else snprintf(flavor, sizeof flavor, "\"8B_%d_layers\"", b.cfg.n_layers);
        cr_assert_str_eq(toml_get(TT, n, "model", "flavor"), flavor, "%s", x->name);
        const int rep = toml_int(TT, n, "parallelism", "data_parallel_replicate_degree");
        const int shard = toml_int(TT, n, "parallelism", "data_parallel_shard_degree");
        cr_assert_eq(rep * shard, l->dp, "%s", x->name);
        cr_assert_eq(shard > 1, l->dp > 1 && l->zero != ZERO_NONE, "%s", x->name);
        if (shard > 1 || l->cp > 1)
            cr_assert_str_eq(toml_get(TT, n, "parallelism", "fsdp_reshard_after_forward"),
                             l->zero == ZERO_FSDP ? "\"never\"" : "\"always\"", "%s", x->name);
        cr_assert_eq(toml_int(TT, n, "parallelism", "tensor_parallel_degree"), l->tp);
        cr_assert_eq(toml_int(TT, n, "parallelism", "context_parallel_degree"), l->cp);
        cr_assert_eq(toml_int(TT, n, "parallelism", "pipeline_parallel_degree"), l->pp);
        /* a forward runs the micro-batch: without a pipeline local_batch_size is it (torchtitan accumulates
         * global / (local x dp) of them); with one, the replica's batch split in micro-batches */
        const int local = toml_int(TT, n, "training", "local_batch_size");
        cr_assert_eq(local, l->pp > 1 ? l->global_batch / l->dp : l->micro_batch, "%s", x->name);
        cr_assert_eq(toml_int(TT, n, "training", "global_batch_size"), l->global_batch);
        cr_assert_eq(toml_int(TT, n, "training", "seq_len"), b.cfg.seq_len);
        cr_assert_str_eq(toml_get(TT, n, "activation_checkpoint", "mode"),
                         l->recompute == RECOMPUTE_FULL ? "\"full\"" : "\"none\"");
        if (l->pp > 1) {
            const char *sched = toml_get(TT, n, "parallelism", "pipeline_parallel_schedule");
            cr_assert_str_eq(sched, l->sched == SCHED_ZB_V        ? "\"ZBVZeroBubble\""
                                    : l->sched == SCHED_DUALPIPEV ? "\"DualPipeV\""
                                    : l->vp > 1                   ? "\"Interleaved1F1B\""
                                                                  : "\"1F1B\"");
            cr_assert_eq(toml_int(TT, n, "parallelism", "pipeline_parallel_microbatch_size"), l->micro_batch);
            int got[LAYOUT_MAX_CHUNKS];
            const int C = parse_modules(toml_get(TT, n, "parallelism", "module_fqns_per_model_part"), &b.cfg, got);
            cr_assert_eq(C, l->pp * l->vp, "%s: %d chunks", x->name, C);
            for (int c = 0; c < C; c++) cr_assert_eq(got[c], b.ch[c], "%s: chunk %d", x->name, c);
        } else {
            cr_assert_null(toml_get(TT, n, "parallelism", "module_fqns_per_model_part"));
        }
        plan_export_files_free(&o);
    }
}

/* A flavor cut to another layer count gets a flavor of its own, which the
 * export's placer_model.py registers and the TOML imports. */
Test(export, torchtitan_cut_flavor_registers_itself) {
    built b;
    const ex_case x = {"cut", "llama-3-8b,layers=4", "dp=8,zero=3,mbs=1,gbs=8"};
    build(&x, &b);
    plan_export_files o;
    const int n = torchtitan_toml(&b, &o);
    cr_assert_str_eq(toml_get(TT, n, "model", "flavor"), "\"8B_4_layers\"");
    cr_assert_str_eq(toml_get(TT, n, "experimental", "custom_import"), "\"placer_model\"");
    const char *py = file_of(&o, "placer_model.py");
    cr_assert_not_null(py);
    cr_assert(strstr(py, "llama3.llama3_args[\"8B_4_layers\"] = dataclasses.replace(llama3.llama3_args[\"8B\"], "
                         "n_layers=4)"), "%s", py);
    plan_export_files_free(&o);
    /* the whole flavor needs no module */
    const ex_case y = {"whole", "llama-3-8b", "dp=8,zero=3,mbs=1,gbs=8"};
    build(&y, &b);
    const int m = torchtitan_toml(&b, &o);
    cr_assert_null(toml_get(TT, m, "experimental", "custom_import"));
    cr_assert_null(file_of(&o, "placer_model.py"));
    plan_export_files_free(&o);
}

/* ---- FP8 ------------------------------------------------------------------ */

/* FP8 layouts carry their recipe in each framework's names: Megatron-LM's
 * --fp8-format e4m3|hybrid and --fp8-recipe (all four recipes);
 * torchtitan's float8 converter with recipe tensorwise and its MX
 * converter with mxfp8_cublas, which is all it has (delayed and blockwise
 * are refused, test below). */
Test(export, fp8_options_in_each_frameworks_names) {
    static const char *const want_format[FP8_RECIPE_COUNT] = {"hybrid", "hybrid", "e4m3", "hybrid"};
    for (int r = 0; r < FP8_RECIPE_COUNT; r++) {
        built b;
        build(&MEGATRON_CASES[0], &b);
        b.l.prec = PRECISION_FP8;
        b.l.fp8 = (fp8_recipe)r;
        arg_kv a[96];
        int n = megatron_args(&b, a, 96);
        cr_assert_str_eq(arg_get(a, n, "--fp8-format"), want_format[r], "%s", fp8_recipe_name(b.l.fp8));
        cr_assert_str_eq(arg_get(a, n, "--fp8-recipe"), fp8_recipe_name(b.l.fp8));
        cr_assert_not_null(arg_get(a, n, "--bf16"), "FP8 runs keep bf16 elsewhere");
        if (r != FP8_RECIPE_TENSORWISE && r != FP8_RECIPE_MXFP8) continue;
        build(&TORCHTITAN_CASES[0], &b);
        b.l.prec = PRECISION_FP8;
        b.l.fp8 = (fp8_recipe)r;
        plan_export_files o;
        n = torchtitan_toml(&b, &o);
        const int mx = r == FP8_RECIPE_MXFP8;
        const char *sec = mx ? "quantize.linear.mx" : "quantize.linear.float8";
        cr_assert_str_eq(toml_get(TT, n, "model", "converters"), mx ? "[\"quantize.linear.mx\"]"
                                                                   : "[\"quantize.linear.float8\"]");
        cr_assert_str_eq(toml_get(TT, n, sec, "recipe_name"), mx ? "\"mxfp8_cublas\"" : "\"tensorwise\"");
        cr_assert_str_eq(toml_get(TT, n, sec, "filter_fqns"), "[\"output\"]", "the head stays bf16");
        plan_export_files_free(&o);
    }
    /* a bf16 layout carries none of it */
    built b;
    build(&MEGATRON_CASES[0], &b);
    plan_export_files o;
    export_files(PLAN_EXPORT_MEGATRON, &b, &o);
    cr_assert_null(strstr(file_of(&o, "args.txt"), "fp8"));
    plan_export_files_free(&o);
    build(&TORCHTITAN_CASES[0], &b);
    export_files(PLAN_EXPORT_TORCHTITAN, &b, &o);
    cr_assert_null(strstr(file_of(&o, "job.toml"), "quantize"));
    plan_export_files_free(&o);
}

/* ---- DeepSpeed ----------------------------------------------------------- */

static const char *const DS_CONFIG_KEYS[] = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                             "gradient_accumulation_steps", "bf16", "fp16", "zero_optimization",
                                             NULL};
static const char *const DS_PARTITION_KEYS[] = {"num_stages", "layer_specs", "layer_specs_are", "parts",
                                                "stage_layers", "same_as_partition_method",
                                                "activation_checkpoint_interval", "moe", NULL};

static json_t *json_of(const char *s) {
    json_error_t err;
    json_t *root = json_loads(s, 0, &err);
    cr_assert(root, "not JSON (line %d: %s):\n%s", err.line, err.text, s);
    return root;
}

Test(export, deepspeed_round_trips) {
    for (int i = 0; i < N_OF(DEEPSPEED_CASES); i++) {
        const ex_case *x = &DEEPSPEED_CASES[i];
        built b;
        build(x, &b);
        const layout *l = &b.l;
        plan_export_files o;
        export_files(PLAN_EXPORT_DEEPSPEED, &b, &o);
        json_t *ds = json_of(file_of(&o, "ds_config.json"));
        const char *key;
        json_t *v;
        json_object_foreach(ds, key, v) cr_assert(in_list(DS_CONFIG_KEYS, key), "%s is not DeepSpeed's key", key);
        const int tb = (int)json_integer_value(json_object_get(ds, "train_batch_size"));
        const int mb = (int)json_integer_value(json_object_get(ds, "train_micro_batch_size_per_gpu"));
        const int gas = (int)json_integer_value(json_object_get(ds, "gradient_accumulation_steps"));
        cr_assert_eq(tb, l->global_batch);
        cr_assert_eq(mb, l->micro_batch);
        cr_assert_eq(mb * gas * l->dp, tb, "%s: DeepSpeed requires train_batch = micro * gas * dp", x->name);
        const int stage = (int)json_integer_value(json_object_get(json_object_get(ds, "zero_optimization"), "stage"));
        cr_assert_eq(stage, l->dp > 1 ? (int)l->zero : 0, "%s", x->name);
        cr_assert_eq(json_is_true(json_object_get(json_object_get(ds, "bf16"), "enabled")), l->prec == PRECISION_BF16);
        cr_assert_eq(json_is_true(json_object_get(json_object_get(ds, "fp16"), "enabled")), l->prec == PRECISION_FP16);
        json_decref(ds);
        if (l->pp == 1) {
            cr_assert_null(file_of(&o, "partition.json"), "no pipeline, no partition");
            plan_export_files_free(&o);
            continue;
        }
        cr_assert(strstr(file_of(&o, "pipeline.py"), "class PlannedPipelineModule(PipelineModule)"));
        json_t *pm = json_of(file_of(&o, "partition.json"));
        json_object_foreach(pm, key, v) cr_assert(in_list(DS_PARTITION_KEYS, key), "partition.json: %s", key);
        cr_assert_eq(json_integer_value(json_object_get(pm, "num_stages")), l->pp);
        json_t *parts = json_object_get(pm, "parts");
        cr_assert_eq((int)json_array_size(parts), l->pp + 1);
        cr_assert_eq(json_integer_value(json_array_get(parts, 0)), 0);
        cr_assert_eq(json_integer_value(json_array_get(parts, l->pp)), b.cfg.n_layers + 2);
        for (int st = 0; st < l->pp; st++) {
            int got = (int)(json_integer_value(json_array_get(parts, st + 1)) - json_integer_value(json_array_get(parts, st)));
            got -= (st == 0) + (st == l->pp - 1); /* the embedding, the head */
            cr_assert_eq(got, b.ch[st], "%s: stage %d holds %d layers, not %d", x->name, st, got, b.ch[st]);
        }
        json_t *same = json_object_get(pm, "same_as_partition_method");
        /* 3 | 3 of the default GPT is DeepSpeed's parameters split and, over 8 specs, its uniform one */
        if (i == 3) cr_assert(json_is_string(same), "%s", x->name);
        if (i == 1) cr_assert(json_is_null(same), "3 / 4 / 5 is neither of DeepSpeed's own");
        cr_assert_eq(json_integer_value(json_object_get(pm, "activation_checkpoint_interval")),
                     l->recompute == RECOMPUTE_FULL);
        json_decref(pm);
        plan_export_files_free(&o);
    }
}

/* ---- JSON ---------------------------------------------------------------- */

Test(export, json_round_trips_with_a_prediction) {
    for (int i = 0; i < N_OF(MEGATRON_CASES); i++) {
        built b;
        build(&MEGATRON_CASES[i], &b);
        const layout *l = &b.l;
        layout_result r;
        memset(&r, 0, sizeof r);
        r.step_us = 1234.5 + i;
        r.tokens_per_s = 1e6;
        r.mfu = 0.41;
        r.mem.total = 123456789;
        r.mem_cap = 80000000000LL;
        r.parts_us[LAYOUT_T_BUBBLE] = 100.0;
        plan_export_in in = {&b.cfg, &b.arch, "model", l, b.ch, i % 2 ? &r : NULL, PLAN_FRAMEWORK_MEGATRON};
        plan_export_files o;
        char msg[256];
        cr_assert_eq(plan_export_build(PLAN_EXPORT_JSON, &in, &o, msg, sizeof msg), PL_OK, "%s", msg);
        json_t *root = json_of(file_of(&o, "plan.json"));
        json_t *lay = json_object_get(root, "layout");
        cr_assert_eq(json_integer_value(json_object_get(lay, "tp")), l->tp);
        cr_assert_eq(json_integer_value(json_object_get(lay, "pp")), l->pp);
        cr_assert_eq(json_integer_value(json_object_get(lay, "vp")), l->vp);
        cr_assert_eq(json_integer_value(json_object_get(lay, "dp")), l->dp);
        cr_assert_eq(json_integer_value(json_object_get(lay, "cp")), l->cp);
        cr_assert_eq(json_integer_value(json_object_get(lay, "micro_batch")), l->micro_batch);
        cr_assert_eq(json_integer_value(json_object_get(lay, "micro_batches")), l->global_batch / (l->dp * l->micro_batch));
        cr_assert_str_eq(json_string_value(json_object_get(lay, "precision")), precision_name(l->prec));
        /* the json export's additions: the layout's text form reads back to the layout */
        layout back;
        cr_assert_eq(layout_parse(json_string_value(json_object_get(lay, "text")), &back, msg, sizeof msg), PL_OK);
        cr_assert_eq(back.tp * 1000 + back.pp * 100 + back.vp, l->tp * 1000 + l->pp * 100 + l->vp);
        cr_assert_str_eq(json_string_value(json_object_get(json_object_get(root, "framework"), "name")), "megatron");
        cr_assert_eq(json_number_value(json_object_get(json_object_get(root, "model"), "rope_theta")), 500000.0);
        json_t *cl = json_object_get(root, "chunk_layers");
        cr_assert_eq((int)json_array_size(cl), l->pp * l->vp);
        for (int c = 0; c < l->pp * l->vp; c++) cr_assert_eq(json_integer_value(json_array_get(cl, c)), b.ch[c]);
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
        plan_export_files_free(&o);
    }
}

Test(export, bad_chunks_and_formats_are_refused) {
    built b;
    build(&MEGATRON_CASES[3], &b);
    b.ch[1] = 3; /* 3 + 3 + 5 = 11, not 12 */
    char *s = NULL, msg[256] = "";
    cr_assert_eq(plan_export_string(PLAN_EXPORT_MEGATRON, &b.cfg, &b.l, b.ch, NULL, &s, msg, sizeof msg),
                 PL_ERR_INVALID);
    cr_assert_null(s);
    cr_assert(strstr(msg, "11"), "%s", msg);
    b.ch[1] = 0; /* a middle chunk without layers */
    b.ch[2] = 9;
    cr_assert_eq(plan_export_string(PLAN_EXPORT_JSON, &b.cfg, &b.l, b.ch, NULL, &s, msg, sizeof msg), PL_ERR_INVALID);
    plan_export_format f;
    cr_assert_eq(plan_export_parse_format("torchtitan", &f, msg, sizeof msg), PL_OK);
    cr_assert_eq(f, PLAN_EXPORT_TORCHTITAN);
    cr_assert_eq(plan_export_parse_format("nemo", &f, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "megatron"), "%s", msg);
}

/* ---- what each framework runs ------------------------------------------- */

/* A layout or model the framework cannot run is refused with one line that
 * says what is missing; nothing is written. */
Test(export, frameworks_refuse_what_they_do_not_run) {
    static const struct {
        plan_export_format f;
        const char *model, *layout, *why;
    } cases[] = {
        {PLAN_EXPORT_MEGATRON, "llama-3-8b,layers=8", "pp=4,vp=2,dp=2,mbs=1,gbs=16,sched=zb-v", "not sched=zb-v"},
        {PLAN_EXPORT_MEGATRON, "llama-3-8b,layers=8", "pp=2,vp=2,dp=2,mbs=1,gbs=16,sched=dualpipev", "dualpipev"},
        {PLAN_EXPORT_MEGATRON, "llama-3-8b,layers=8", "pp=4,dp=2,mbs=1,gbs=16,sched=zb-h1", "zb-h1"},
        {PLAN_EXPORT_MEGATRON, "llama-3-8b,layers=8", "dp=8,zero=2,mbs=1,gbs=16", "no ZeRO-2"},
        {PLAN_EXPORT_MEGATRON, "llama-3-8b,layers=8", "dp=8,zero=fsdp,mbs=1,gbs=16", "zero=fsdp"},
        {PLAN_EXPORT_MEGATRON, "llama-3-8b,layers=8", "pp=2,dp=4,zero=3,mbs=1,gbs=16", "pipeline parallelism"},
        {PLAN_EXPORT_MEGATRON, "gpt2,layers=4", "dp=8,zero=3,mbs=1,gbs=16", "untied embeddings"},
        {PLAN_EXPORT_TORCHTITAN, "mixtral-8x7b,layers=4", "dp=8,zero=3,mbs=1,gbs=16", "has no model of this shape"},
        {PLAN_EXPORT_TORCHTITAN, "gpt12", "dp=8,zero=3,mbs=1,gbs=16", "has no model of this shape"},
        {PLAN_EXPORT_TORCHTITAN, "llama-3-8b,layers=8", "pp=4,dp=2,zero=3,mbs=1,gbs=16,sched=zb-h1", "no zb-h1"},
        {PLAN_EXPORT_TORCHTITAN, "qwen3-30b-a3b,layers=8", "pp=2,dp=4,zero=3,mbs=1,gbs=16", "no pipelining"},
        {PLAN_EXPORT_TORCHTITAN, "llama-3-8b,layers=8", "dp=8,zero=1,mbs=1,gbs=16", "no ZeRO-1"},
        {PLAN_EXPORT_TORCHTITAN, "llama-3-8b,layers=8", "tp=2,sp=1,dp=4,mbs=1,gbs=16", "DDP"},
        {PLAN_EXPORT_TORCHTITAN, "llama-3-8b,layers=8", "cp=2,dp=4,zero=fsdp,mbs=1,gbs=16", "dp x cp"},
        {PLAN_EXPORT_TORCHTITAN, "llama-3-8b,layers=8", "dp=8,zero=3,mbs=1,gbs=16,recompute=selective",
         "selective"},
        {PLAN_EXPORT_TORCHTITAN, "llama-3-8b,layers=8", "dp=8,zero=3,mbs=1,gbs=16,precision=fp8,fp8=delayed",
         "no delayed FP8"},
        {PLAN_EXPORT_TORCHTITAN, "llama-3-8b,layers=8", "dp=8,zero=3,mbs=1,gbs=16,precision=fp8,fp8=blockwise",
         "no blockwise FP8"},
        {PLAN_EXPORT_TORCHTITAN, "llama-3-8b,layers=8", "dp=8,zero=3,mbs=1,gbs=16,precision=fp16", "no fp16"},
        {PLAN_EXPORT_DEEPSPEED, "llama-3-8b,layers=8", "tp=2,sp=1,pp=2,dp=2,mbs=1,gbs=16", "tensor parallelism"},
        {PLAN_EXPORT_DEEPSPEED, "llama-3-8b,layers=8", "pp=2,vp=2,dp=2,mbs=1,gbs=16", "interleaving"},
        {PLAN_EXPORT_DEEPSPEED, "llama-3-8b,layers=8", "pp=2,dp=4,zero=2,mbs=1,gbs=16", "ZeRO stage 0 or 1"},
        {PLAN_EXPORT_DEEPSPEED, "llama-3-8b,layers=8", "dp=8,mbs=1,gbs=16,precision=fp8", "no fp8"},
        {PLAN_EXPORT_DEEPSPEED, "deepseek-v3,layers=8", "pp=2,dp=4,ep=4,zero=1,mbs=1,gbs=16", "sigmoid router"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const ex_case x = {cases[i].layout, cases[i].model, cases[i].layout};
        built b;
        build(&x, &b);
        plan_export_in in = {&b.cfg, &b.arch, "model", &b.l, b.ch, NULL, PLAN_FRAMEWORK_ANY};
        plan_export_files o;
        char msg[512] = "";
        cr_assert_eq(plan_export_build(cases[i].f, &in, &o, msg, sizeof msg), PL_ERR_INVALID, "%s %s: exported",
                     plan_export_format_name(cases[i].f), x.layout);
        cr_assert_eq(o.n, 0, "nothing written");
        cr_assert(strstr(msg, cases[i].why), "%s %s: '%s' lacks '%s'", plan_export_format_name(cases[i].f), x.layout,
                  msg, cases[i].why);
        cr_assert(strstr(msg, plan_framework_version(plan_export_framework(cases[i].f))), "the line names the version");
        cr_assert_null(strchr(msg, '\n'), "one line");
        /* the search's filter agrees */
        cr_assert_eq(plan_framework_runs(plan_export_framework(cases[i].f), &b.cfg, &b.l) &&
                         plan_framework_model_runs(plan_export_framework(cases[i].f), &b.cfg, &b.arch, NULL, 0),
                     0);
    }
}

/* A search that cannot find anything the framework runs is refused up front
 * with the reason (plan_framework_ask_runs); one that can is let through. */
Test(export, asks_a_framework_cannot_meet_are_refused_with_the_reason) {
    gpt_config cfg;
    char msg[512], why[320];
    cr_assert_eq(model_config_load("llama-3-8b", &cfg, NULL, 0, msg, sizeof msg), PL_OK);
    plan_framework_ask ask = {0, 0, 0, 0, 0, -1, -1, 1, {PRECISION_FP8}, {FP8_RECIPE_DELAYED}, 0};
    cr_assert_eq(plan_framework_ask_runs(PLAN_FRAMEWORK_TORCHTITAN, &cfg, &ask, why, sizeof why), 0);
    cr_assert(strstr(why, "delayed"), "%s", why);
    cr_assert_eq(plan_framework_ask_runs(PLAN_FRAMEWORK_MEGATRON, &cfg, &ask, why, sizeof why), 1);
    ask.n_prec = 2, ask.prec[1] = PRECISION_FP8, ask.fp8[1] = FP8_RECIPE_TENSORWISE; /* one it runs */
    cr_assert_eq(plan_framework_ask_runs(PLAN_FRAMEWORK_TORCHTITAN, &cfg, &ask, why, sizeof why), 1);
    plan_framework_ask z2 = {0, 0, 0, 0, 0, ZERO_2, -1, 1, {PRECISION_BF16}, {0}, 0};
    cr_assert_eq(plan_framework_ask_runs(PLAN_FRAMEWORK_MEGATRON, &cfg, &z2, why, sizeof why), 0);
    cr_assert(strstr(why, "ZeRO-2"), "%s", why);
    plan_framework_ask vp = {0, 0, 0, 2, 0, -1, -1, 1, {PRECISION_BF16}, {0}, 0};
    cr_assert_eq(plan_framework_ask_runs(PLAN_FRAMEWORK_DEEPSPEED, &cfg, &vp, why, sizeof why), 0);
    cr_assert(strstr(why, "interleaving"), "%s", why);
    cr_assert_eq(plan_framework_ask_runs(PLAN_FRAMEWORK_TORCHTITAN, &cfg, &vp, why, sizeof why), 1);
}

/* The shipped models torchtitan has are found in its flavor table by their
 * shapes, cut ones too; the others are not. */
Test(export, torchtitan_flavors_match_the_shipped_models) {
    static const struct {
        const char *model, *tt_model, *flavor;
    } cases[] = {
        {"llama-3-8b", "llama3", "8B"},         {"llama-3-70b", "llama3", "70B"},
        {"llama-3-405b", "llama3", "405B"},     {"qwen3-32b", "qwen3", "32B"},
        {"qwen3-30b-a3b", "qwen3", "30B-A3B"},  {"qwen3-235b-a22b", "qwen3", "235B-A22B"},
        {"deepseek-v3", "deepseek_v3", "671B"}, {"llama-3-8b,layers=4", "llama3", "8B"},
        {"deepseek-v3,layers=5", "deepseek_v3", "671B"},
        {"mixtral-8x7b", NULL, NULL},           {"mistral-7b", NULL, NULL},
        {"gpt2", NULL, NULL},                   {"deepseek-v3,layers=3", NULL, NULL}, /* only its dense layers */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gpt_config cfg;
        char msg[512];
        cr_assert_eq(model_config_load(cases[i].model, &cfg, NULL, 0, msg, sizeof msg), PL_OK, "%s", msg);
        const plan_tt_flavor *t = plan_torchtitan_flavor(&cfg);
        if (!cases[i].tt_model) {
            cr_assert_null(t, "%s matched %s %s", cases[i].model, t ? t->model : "", t ? t->flavor : "");
            continue;
        }
        cr_assert_not_null(t, "%s has no flavor", cases[i].model);
        cr_assert_str_eq(t->model, cases[i].tt_model);
        cr_assert_str_eq(t->flavor, cases[i].flavor);
    }
}

/* Each key table names every key, once. */
Test(export, key_tables_are_complete) {
    for (int k = 0; k < MK_COUNT; k++) {
        cr_assert_str_neq(megatron_key_name((megatron_key)k), "?", "megatron key %d has no name", k);
        if (!strncmp(megatron_key_name((megatron_key)k), "--", 2))
            for (int j = 0; j < k; j++)
                cr_assert_str_neq(megatron_key_name((megatron_key)j), megatron_key_name((megatron_key)k));
    }
    for (int k = 0; k < TK_COUNT; k++) cr_assert_str_neq(torchtitan_key_name((torchtitan_key)k), "?", "%d", k);
    for (int k = 0; k < DK_COUNT; k++) cr_assert_str_neq(deepspeed_key_name((deepspeed_key)k), "?", "%d", k);
    cr_assert_str_eq(megatron_key_name(MK_COUNT), "?");
}

/* Mixture-of-experts layouts: the expert grid, dispatcher and the model's
 * MoE and MLA shapes read back from each export that runs them. */
Test(export, moe_options_round_trip) {
    static const struct {
        plan_export_format f;
        const char *model, *layout;
    } cases[] = {
        {PLAN_EXPORT_MEGATRON, "deepseek-v3", "tp=1,pp=16,dp=128,ep=64,zero=1,mbs=1,gbs=15360,recompute=full"},
        {PLAN_EXPORT_MEGATRON, "mixtral-8x7b", "tp=2,sp=1,pp=4,dp=8,ep=4,etp=2,zero=1,mbs=1,gbs=256,dispatcher=allgather"},
        {PLAN_EXPORT_TORCHTITAN, "deepseek-v3", "tp=1,pp=16,dp=128,ep=64,zero=3,mbs=1,gbs=15360,recompute=full"},
        {PLAN_EXPORT_TORCHTITAN, "qwen3-30b-a3b", "tp=2,sp=1,dp=8,ep=8,etp=2,zero=fsdp,mbs=1,gbs=256"},
        {PLAN_EXPORT_DEEPSPEED, "mixtral-8x7b", "pp=4,dp=8,ep=4,zero=1,mbs=1,gbs=256,recompute=full"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const ex_case x = {cases[i].layout, cases[i].model, cases[i].layout};
        built b;
        build(&x, &b);
        const gpt_config *cfg = &b.cfg;
        const layout *l = &b.l;
        if (cases[i].f == PLAN_EXPORT_MEGATRON) {
            arg_kv a[96];
            int n = megatron_args(&b, a, 96);
            cr_assert_eq(arg_int(a, n, "--num-experts", 0), cfg->n_experts);
            cr_assert_eq(arg_int(a, n, "--moe-router-topk", 0), cfg->top_k);
            cr_assert_eq(arg_int(a, n, "--moe-ffn-hidden-size", 0), cfg->moe_d_ff);
            cr_assert_eq(arg_int(a, n, "--expert-model-parallel-size", 0), l->ep);
            cr_assert_eq(arg_int(a, n, "--expert-tensor-parallel-size", 0), l->etp);
            cr_assert_str_eq(arg_get(a, n, "--moe-token-dispatcher-type"), moe_dispatcher_name(l->dispatcher));
            cr_assert_not_null(arg_get(a, n, "--moe-grouped-gemm"));
            cr_assert_eq(arg_get(a, n, "--multi-latent-attention") != NULL, gpt_is_mla(cfg));
            if (gpt_is_mla(cfg)) {
                cr_assert_eq(arg_int(a, n, "--kv-lora-rank", 0), cfg->kv_lora_rank);
                cr_assert_eq(arg_int(a, n, "--q-lora-rank", 0), cfg->q_lora_rank);
                cr_assert_eq(arg_int(a, n, "--qk-pos-emb-head-dim", 0), cfg->qk_rope_dim);
                cr_assert_eq(arg_int(a, n, "--moe-shared-expert-intermediate-size", 0), cfg->shared_d_ff);
                const char *freq = arg_get(a, n, "--moe-layer-freq");
                cr_assert_not_null(freq);
                int k = 0, moe = 0;
                for (const char *p = freq; *p; p++)
                    if (*p == '0' || *p == '1') moe += *p == '1', k++;
                cr_assert_eq(k, cfg->n_layers);
                cr_assert_eq(moe, gpt_moe_layers_in(cfg, 0, cfg->n_layers));
            }
        } else if (cases[i].f == PLAN_EXPORT_TORCHTITAN) {
            plan_export_files o;
            int n = torchtitan_toml(&b, &o);
            cr_assert_eq(toml_int(TT, n, "parallelism", "expert_parallel_degree"), l->ep);
            cr_assert_eq(toml_int(TT, n, "parallelism", "expert_tensor_parallel_degree"), l->etp);
            cr_assert_str_eq(toml_get(TT, n, "parallelism", "expert_parallel_comm_backend"), "\"standard\"");
            plan_export_files_free(&o);
        } else {
            plan_export_files o;
            export_files(PLAN_EXPORT_DEEPSPEED, &b, &o);
            json_t *pm = json_of(file_of(&o, "partition.json"));
            json_t *moe = json_object_get(pm, "moe");
            cr_assert_eq(json_integer_value(json_object_get(moe, "num_experts")), cfg->n_experts);
            cr_assert_eq(json_integer_value(json_object_get(moe, "ep_size")), l->ep);
            cr_assert_eq(json_integer_value(json_object_get(moe, "k")), cfg->top_k);
            json_decref(pm);
            plan_export_files_free(&o);
        }
    }
}
