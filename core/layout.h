/*
 * layout.h: a parallel layout of one model on a cluster, and the rank grid.
 *
 * A layout says how a training step is spread over tp * cp * dp * pp GPUs:
 *   tp   tensor parallelism (Megatron column/row split of attention and MLP;
 *        vocabulary-parallel embedding, head and loss)
 *   sp   sequence parallelism on top of tp (all-gather / reduce-scatter
 *        instead of all-reduce; norms and dropout split by sequence)
 *   cp   context parallelism (the sequence split over cp ranks; keys and
 *        values exchanged for attention)
 *   pp   pipeline stages; vp virtual chunks per stage (interleaved 1F1B)
 *   dp   data-parallel replicas; zero 0..3 shards optimizer state (1),
 *        gradients (2) and parameters (3) over dp; fsdp is zero-3 with the
 *        parameters gathered per layer (torch FSDP / Llama 3's variant that
 *        keeps the gathered weights from forward to backward: see zero_kind)
 *   micro_batch  sequences per micro-batch per replica; global_batch
 *        sequences per step over all replicas, so each pipeline runs
 *        m = global_batch / (dp * micro_batch) micro-batches
 *   recompute    none | selective (attention core, Korthikanti et al.) | full
 *   precision    of the GEMMs and activations (precision.h)
 *   stage_layers explicit transformer layers per pipeline chunk (pp * vp
 *        entries, in pipeline order, summing to the model's layers), or
 *        n_stage_layers = 0 for a uniform split. Pipeline order is the
 *        model's layer order: chunk c holds the layers after chunks 0..c-1
 *        and lives on stage c % pp as its virtual chunk c / pp (Megatron's
 *        interleaving: with pp 4, vp 2, stage 0 holds chunks 0 and 4). An
 *        entry may be 0 (a stage holding only the embedding or the head).
 *
 * Text form (layout_parse / layout_format), comma-separated key=value in any
 * order, unspecified keys taking the defaults of layout_default:
 *   "tp=8,sp=1,cp=1,pp=16,vp=2,dp=64,zero=1,mbs=1,gbs=2048,recompute=full,
 *    precision=bf16,stages=7/8/8/.../7"
 * keys: tp sp cp pp vp dp zero (0|1|2|3|fsdp) mbs gbs recompute precision
 * stages (slash-separated layer counts), fp8 (tensorwise|delayed|blockwise|
 * mxfp8: the FP8 recipe; implies precision=fp8 when precision is not given,
 * an error beside another precision), and for mixture-of-experts models
 * ep etp (expert parallel and expert tensor parallel sizes, default 1) and
 * dispatcher (alltoall | allgather | flex); layout_format writes these three only
 * when they differ from their defaults, so a dense layout's text is what
 * it always was. overlap (none | ep: the MoE all-to-all hidden in paired
 * ops) and mem (none, or norm_mla, fp8_act, bf16_moments, mtp_last,
 * fp32_grads joined by '+') are written only when set. Unknown keys, a key given twice,
 * junk values and out-of-range values are errors naming the key. Spaces
 * around keys and values are ignored. layout_format writes zero as
 * 0|1|2|3|fsdp (parse also takes "none" for 0).
 *
 * The rank grid, one ordering for everything (Megatron-Core's): tp is the
 * innermost dimension, then cp, then dp, then pp:
 *   rank = tp_i + tp * (cp_i + cp * (dp_i + dp * pp_i))
 * so the tp ranks of one group are consecutive GPUs (one node when tp <=
 * GPUs per node), and a pipeline send goes from rank r to r + tp*cp*dp.
 * The simulator, the planner and the engine all go through
 * layout_rank_coords / layout_rank_of / layout_group_ranks, never through
 * rank arithmetic of their own.
 */
#ifndef PLACER_CORE_LAYOUT_H
#define PLACER_CORE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "precision.h"
#include "schedule.h"
#include "status.h"

#define LAYOUT_MAX_CHUNKS 1024 /* pp * vp at most */

typedef enum { ZERO_NONE = 0, ZERO_1, ZERO_2, ZERO_3, ZERO_FSDP } zero_kind;
typedef enum { RECOMPUTE_NONE = 0, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL } recompute_kind;
/* Megatron's --moe-token-dispatcher-type: all-to-all over the ep group,
 * all-gather of every token over it (each rank keeps its experts' share),
 * or flex (DeepEP: a token crosses the network once per destination node,
 * then NVLink to its experts' GPUs). */
typedef enum { MOE_DISPATCH_ALLTOALL = 0, MOE_DISPATCH_ALLGATHER, MOE_DISPATCH_FLEX } moe_dispatcher;

/* The expert grid's dimensions (innermost first): etp, ep, edp (expert
 * data parallel = tp * cp * dp / (etp * ep)), pp. */
typedef enum { LAYOUT_EDIM_ETP = 0, LAYOUT_EDIM_EP, LAYOUT_EDIM_EDP, LAYOUT_EDIM_PP, LAYOUT_EDIM_COUNT } layout_edim;

/* The parallel dimensions, in rank-grid order (innermost first). */
typedef enum { LAYOUT_DIM_TP = 0, LAYOUT_DIM_CP, LAYOUT_DIM_DP, LAYOUT_DIM_PP, LAYOUT_DIM_COUNT } layout_dim;

typedef struct {
    int tp;                 /* tensor-parallel size, >= 1 */
    int sp;                 /* 1: sequence parallelism (needs tp > 1 to matter) */
    int cp;                 /* context-parallel size, >= 1 */
    int pp;                 /* pipeline stages, >= 1 */
    int vp;                 /* virtual chunks per stage (interleaving), >= 1 */
    int dp;                 /* data-parallel replicas, >= 1 */
    zero_kind zero;         /* optimizer / gradient / parameter sharding over dp */
    int micro_batch;        /* sequences per micro-batch per replica, >= 1 */
    int global_batch;       /* sequences per step over all replicas, >= 1 */
    recompute_kind recompute; /* activation recomputation */
    precision prec;         /* GEMM / activation precision */
    schedule_order sched;   /* pipeline order: 1f1b (default; interleaved when vp > 1), zb-h1,
                               zb-h2 (vp 1), zb-v or dualpipev (vp 2: a V of 2 pp stages);
                               text key sched, written only when not 1f1b */
    int n_stage_layers;     /* 0: uniform; else pp * vp entries below */
    /* mixture of experts (Megatron-Core's parallel folding, see above): */
    int ep;                 /* expert-parallel size, >= 1 (1: every rank holds every expert) */
    int etp;                /* expert tensor-parallel size, >= 1 */
    moe_dispatcher dispatcher; /* how tokens reach their experts */
    int stage_layers[LAYOUT_MAX_CHUNKS]; /* layers per chunk, pipeline order */
    /* FP8 (precision fp8 only; precision.h): text key fp8=RECIPE, written
     * by layout_format only when precision is fp8 */
    fp8_recipe fp8;         /* scaling recipe (default delayed: Megatron's --fp8-recipe default) */
    /* overlap and memory options (issue 33; text keys overlap= and mem=, written only when set) */
    int ep_overlap;         /* 1: the MoE dispatch and combine of one micro-batch hidden under another's
                               compute in paired ops: Megatron's --overlap-moe-expert-parallel-comm on
                               1f1b / interleaved (schedule.paired), or asserted for dualpipe(v) */
    unsigned mem;           /* LAYOUT_MEM_* bits: memory savings a run used (each with its source in
                               docs/moe.md) */
} layout;

/* Memory savings (layout.mem bits; text mem=a+b+...): DeepSeek-V3's
 * (arXiv 2412.19437, sections 3.2.3 and 3.3.4) and any stack's that does
 * the same. */
enum {
    LAYOUT_MEM_NORM_MLA = 1u << 0,     /* norm_mla: RMSNorms and MLA up-projections recomputed in backward */
    LAYOUT_MEM_FP8_ACT = 1u << 1,      /* fp8_act: the linear layers' inputs cached in FP8 (precision fp8) */
    LAYOUT_MEM_BF16_MOMENTS = 1u << 2, /* bf16_moments: AdamW's two moments kept in bf16 */
    LAYOUT_MEM_MTP_LAST = 1u << 3,     /* mtp_last: one multi-token-prediction module (an MoE layer and a
                                          second head and loss, the head and embedding shared) on the last
                                          stage */
    LAYOUT_MEM_FP32_GRADS = 1u << 4,   /* fp32_grads: mixed precision's gradients held in fp32 (4 bytes a
                                          parameter, not 2): a cost the run paid, not a saving */
    LAYOUT_MEM_COUNT = 5
};

/* "norm_mla", "fp8_act", "bf16_moments", "mtp_last", "fp32_grads" for bit i
 * (0..LAYOUT_MEM_COUNT-1); "unknown". */
const char *layout_mem_name(int i);

/* Coordinates of a rank in the grid, indexed by layout_dim. */
typedef struct {
    int c[LAYOUT_DIM_COUNT];
} layout_coords;

/* tp = sp-off = cp = pp = vp = dp = 1, zero 0, mbs 1, gbs 1, no
 * recompute, bf16, uniform stages. */
void layout_default(layout *l);

/* Parse the text form above into *out (starting from layout_default).
 * PL_ERR_INVALID with a message naming the offending key on failure; *out
 * untouched then. Does not check the layout against a model or cluster:
 * see layout_validate. */
pl_status layout_parse(const char *text, layout *out, char *msg, size_t len);

/* The keys of the text form, in the order the parser knows them. */
typedef enum {
    LAYOUT_KEY_TP = 0, LAYOUT_KEY_SP, LAYOUT_KEY_CP, LAYOUT_KEY_PP, LAYOUT_KEY_VP, LAYOUT_KEY_DP,
    LAYOUT_KEY_ZERO, LAYOUT_KEY_MBS, LAYOUT_KEY_GBS, LAYOUT_KEY_RECOMPUTE, LAYOUT_KEY_PRECISION, LAYOUT_KEY_STAGES,
    LAYOUT_KEY_FP8, /* FP8 recipe */
    LAYOUT_KEY_SCHED,
    LAYOUT_KEY_EP, LAYOUT_KEY_ETP, LAYOUT_KEY_DISPATCHER,
    LAYOUT_KEY_OVERLAP, LAYOUT_KEY_MEM,
    LAYOUT_KEY_COUNT
} layout_key;

/* A key's name in the text form ("tp", ..., "mem"; "unknown" out of range):
 * the help texts list them from here. */
const char *layout_key_name(layout_key k);

/* layout_parse, and *given (may be NULL) gets bit (1u << LAYOUT_KEY_x) for
 * each key the text named, so a caller can tell a default from a value the
 * user gave (set only on success). */
pl_status layout_parse_given(const char *text, layout *out, unsigned *given, char *msg, size_t len);

/* Write the canonical text form (every key, stages only when explicit).
 * Returns the length the full text needs, like snprintf. */
int layout_format(const layout *l, char *buf, size_t len);

/* GPUs the layout uses: tp * cp * dp * pp. */
int64_t layout_world_size(const layout *l);

/* Micro-batches each pipeline runs per step: global_batch / (dp * mbs);
 * 0 when dp * mbs does not divide the global batch. */
int layout_micro_batches(const layout *l);

/* Check a layout against a model (NULL: the layout's own rules only) and a
 * GPU count (n_gpus <= 0: no limit).
 * One clear message for the first problem found, e.g. tp not dividing the
 * heads or the KV heads, cp not dividing the sequence (2 * cp chunks for
 * causal load balance), dp * mbs not dividing the global batch, pp * vp
 * chunks more than layers, explicit stages of the wrong count or sum, m not
 * a multiple of pp under interleaving, the world larger than the cluster,
 * sp without tp > 1 (allowed, a no-op: not an error), zero / fsdp with
 * dp = 1 (allowed, a no-op). Also: tp dividing d_ff, vp > 1 needing
 * pp >= 2, with sp tp dividing the sequence per cp rank, and every field in
 * range for layouts built in code. The vocabulary need not divide by tp
 * (each rank holds ceil(Vp / tp) rows; Megatron pads to 128 * tp: set
 * the model's vocab_multiple for the exact figure). Returns PL_OK or
 * PL_ERR_INVALID. */
pl_status layout_validate(const layout *l, const gpt_config *model, int64_t n_gpus, char *msg, size_t len);

/* Layers in each of the pp * vp chunks (explicit, or the uniform split:
 * the remainder goes one layer each to the middle chunks, so the first and
 * last, which also hold the embedding and the head, stay lighter). out has
 * pp * vp entries. sched=dualpipe (vp 2): the model in pp stages (stages=
 * gives pp entries), written twice: chunks 0..pp-1 the down pipeline,
 * pp..2pp-1 the up one (schedule.h), so the entries sum to twice the
 * layers. PL_ERR_INVALID when they cannot be laid out. */
pl_status layout_chunk_layers(const layout *l, int n_layers, int *out, char *msg, size_t len);

/* Size of one grid dimension. */
int layout_dim_size(const layout *l, layout_dim d);

/* Coordinates of rank (0 <= rank < world size) / the rank of coordinates. */
layout_coords layout_rank_coords(const layout *l, int64_t rank);
int64_t layout_rank_of(const layout *l, const layout_coords *c);

/* The ranks of rank's group along dimension d (its peers with every other
 * coordinate equal), in coordinate order; out has layout_dim_size(l, d)
 * entries. Returns that size. */
int layout_group_ranks(const layout *l, int64_t rank, layout_dim d, int64_t *out);

/* The expert grid (Megatron-Core's MoE parallel folding): the ranks of
 * one pipeline stage, tp * cp * dp of them, are also an etp x ep x edp grid
 * with etp innermost:
 *   rank = etp_i + etp * (ep_i + ep * (edp_i + edp * pp_i))
 * so an ep group with etp = 1 is ep consecutive ranks (one node for ep <=
 * GPUs per node), whatever tp, cp and dp the attention uses. Sizes,
 * coordinates' groups as for the dense grid; edp = tp cp dp / (etp ep)
 * (0 when etp * ep does not divide tp * cp * dp: layout_validate refuses
 * that). */
int layout_expert_dim_size(const layout *l, layout_edim d);
int layout_expert_group_ranks(const layout *l, int64_t rank, layout_edim d, int64_t *out);

/* "alltoall", "allgather", "flex". Static. */
const char *moe_dispatcher_name(moe_dispatcher d);

/* "none", "1", "2", "3", "fsdp"; "none", "selective", "full". Static.
 * The one table of these names: parsers and printers use these. */
const char *zero_kind_name(zero_kind z);
const char *recompute_kind_name(recompute_kind r);

/* The recompute kind whose recompute_kind_name is name, or -1 (NULL or
 * any other text). */
int recompute_kind_from_name(const char *name);

#endif
