/*
 * plan_framework.h: the training frameworks a plan is predicted for and
 * exported to, pinned at one version each, and what each runs there: the
 * filter the search applies (with --framework, or --export F alone, the
 * search keeps only layouts F runs as planned) and the one line an export
 * prints when it refuses.
 *
 * Pinned versions (docs/exports.md says why these):
 *   megatron    Megatron-LM at commit d98e8a6 (its training script's flags)
 *               with megatron-core 0.16.1 (the newest on the Python
 *               registry reachable here; 0.19.x is not on it)
 *   torchtitan  torchtitan 0.2.2 (on torch 2.11)
 *   deepspeed   DeepSpeed 0.19.8
 *
 * What each runs. A layout is refused, with the first reason below, when:
 *   megatron    the order is zb-h1, zb-h2, zb-v or dualpipev (Megatron-LM
 *               runs 1F1B and interleaved 1F1B); zero=2 (the distributed
 *               optimizer keeps whole gradient buffers: ZeRO-1 memory);
 *               zero=fsdp (--use-torch-fsdp2 reshards after forward: that
 *               is zero=3); zero=3 with pp > 1, ep > 1, fp16 or tied
 *               embeddings (--use-torch-fsdp2's asserts); tf32 (no flag)
 *   torchtitan  zb-h1 / zb-h2 (no such schedule; ZBVZeroBubble and
 *               DualPipeV are its V orders); dualpipev with tp or cp > 1
 *               (the simulated pair hides tp / cp collectives, torchtitan's
 *               only expert-parallel traffic); pp > 1 for a model whose train
 *               spec has no pipelining function (qwen3); zero=1 or 2 (FSDP2
 *               only); zero=0 with dp > 1 and any other parallelism (its DDP
 *               is 1-D only); cp > 1 or ep > 1 without zero=3 (the cp and ep
 *               meshes are cut from the FSDP dimension, which shards the
 *               weights over dp x cp: zero=3's grouping); tp > 1 without sp
 *               (its TP always splits the sequence); etp other than 1 or tp;
 *               the allgather dispatcher; recompute=selective (its
 *               selective AC saves other tensors than the attention core);
 *               fp16 or tf32; FP8 recipes delayed or blockwise (it has
 *               tensorwise and MXFP8); FP8 with experts (its float8 and MX
 *               converters leave the grouped expert GEMMs in bf16)
 *   deepspeed   tp > 1 or cp > 1 (DeepSpeed's engine has neither for these
 *               models); vp > 1 or any order but 1F1B (its pipeline engine
 *               runs one 1F1B schedule); zero 2 / 3 with pp > 1 (the engine
 *               asserts ZeRO 0 or 1); zero=fsdp; etp > 1 or a dispatcher
 *               other than alltoall; recompute=selective; fp8 or tf32
 * and a model is refused when:
 *   megatron    it has a parallel residual, sliding-window attention or
 *               biased experts (gpt-oss): no flag writes them
 *   torchtitan  its shapes are those of no torchtitan model (llama3,
 *               qwen3, deepseek_v3 flavors below: a flavor with fewer or
 *               more layers is written as that flavor cut; Mixtral and the
 *               rest have no model in torchtitan 0.2.2)
 *   deepspeed   its router is one deepspeed.moe's gate cannot express
 *               (sigmoid scores, group-limited routing, shared experts)
 */
#ifndef PLACER_PLAN_FRAMEWORK_H
#define PLACER_PLAN_FRAMEWORK_H

#include <stddef.h>

#include "graph.h"
#include "layout.h"
#include "model_arch.h"
#include "precision.h"

/* The software stack a plan is predicted for and exported to (one option,
 * --framework, sets it; --for is its older name). The figures the stack is
 * predicted with are its framework profile (sim/layout/framework.h), which
 * travels in plan_options.sim; any and deepspeed have none (Megatron's are
 * used). */
typedef enum {
    PLAN_FRAMEWORK_ANY = 0,
    PLAN_FRAMEWORK_MEGATRON,
    PLAN_FRAMEWORK_TORCHTITAN,
    PLAN_FRAMEWORK_DEEPSPEED,
    PLAN_FRAMEWORK_COUNT
} plan_framework;

/* "any", "megatron", "torchtitan", "deepspeed". Static. */
const char *plan_framework_name(plan_framework f);
/* The framework named name (plan_framework_name's names) into *out: 1, or
 * 0 with *out untouched for any other name (hf, a fitted profile's). */
int plan_framework_parse(const char *name, plan_framework *out);
/* The pinned version as people name it ("torchtitan 0.2.2"); "" for any. Static. */
const char *plan_framework_version(plan_framework f);

/* One flavor of torchtitan 0.2.2's model registry, by its shapes (the
 * fields gpt_config has; 0 where the model has none). */
typedef struct {
    const char *model;   /* torchtitan's model name: llama3, qwen3, deepseek_v3 */
    const char *flavor;  /* its flavor: "8B", "30B-A3B", "671B", ... */
    int pipelines;       /* 1: its train spec has a pipelining function */
    int layers, d_model, heads, kv_heads, head_dim, d_ff, vocab;
    int experts, top_k, moe_d_ff, shared_d_ff, first_dense, router_sigmoid;
    int q_lora, kv_lora, qk_nope, qk_rope, v_head;
} plan_tt_flavor;

/* The flavor whose shapes cfg has, the layer count aside (a model cut to
 * fewer layers is that flavor with n_layers changed; for deepseek_v3 the
 * dense first layers must still fit); NULL when none. The table's n-th
 * entry through plan_tt_flavor_at (NULL past the end). */
const plan_tt_flavor *plan_torchtitan_flavor(const gpt_config *cfg);
const plan_tt_flavor *plan_tt_flavor_at(int i);

/* 1 when framework f builds model cfg (arch may be NULL: the shapes'
 * rules only); 0 with one line in why (may be NULL) saying what is missing.
 * PLAN_FRAMEWORK_ANY runs everything. */
int plan_framework_model_runs(plan_framework f, const gpt_config *cfg, const model_arch *arch, char *why, size_t len);

/* 1 when framework f runs layout l of cfg as planned (cfg may be NULL:
 * the rules that need no model); 0 with one line in why (may be NULL). */
int plan_framework_layout_runs(plan_framework f, const gpt_config *cfg, const layout *l, char *why, size_t len);

/* The search's filter: plan_framework_layout_runs without the message. */
int plan_framework_runs(plan_framework f, const gpt_config *cfg, const layout *l);

/* The same with no model (the rules that need none). */
int plan_framework_accepts(plan_framework f, const layout *l);

/* What a search may still find (plan.h's plan_options, as far as this
 * check needs it): the dimensions held fixed, the precisions tried, the
 * extra pipeline orders tried. */
typedef struct {
    int tp, cp, pp, vp, dp;       /* fixed sizes; 0: searched */
    int zero, recompute;          /* fixed kinds; -1: searched */
    int n_prec;                   /* precisions tried (1..8) */
    precision prec[8];
    fp8_recipe fp8[8];            /* the recipe of an fp8 entry */
    unsigned sched_mask;          /* 1u << SCHED_ZB_H1 ...: orders tried beside 1F1B / interleaved */
} plan_framework_ask;

/* 1 when some layout the search may try (ask's fixed dimensions, one of its
 * precisions, one of its orders) runs in f; 0 with the reason for the
 * first combination tried otherwise, so that a plan f cannot run is
 * refused with what f lacks rather than reported as "nothing fits". cfg
 * may be NULL. */
int plan_framework_ask_runs(plan_framework f, const gpt_config *cfg, const plan_framework_ask *ask, char *why,
                            size_t len);

#endif
