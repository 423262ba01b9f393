/*
 * plan.h: `placer plan`, the best parallel layout for a model on a cluster.
 *
 * The planner enumerates the layout space of core/layout.h for a GPU count
 * N and a global batch B:
 *   tp   divides the attention heads and the KV heads (and N), <= max_tp
 *        (default: GPUs per node, so tensor-parallel groups stay on NVLink)
 *   cp   divides N / tp, the sequence splits into 2 cp chunks, <= max_cp
 *   pp   divides N / (tp cp), at most the model's layers
 *   vp   1..max_vp virtual chunks per stage (pp > 1, pp vp <= layers)
 *   dp   N / (tp cp pp); mbs divides B / dp, m = B / (dp mbs), m a
 *        multiple of pp under interleaving (Megatron's rule)
 *   recompute none | selective | full; zero 0 | 1 | 2 | 3 | fsdp (dp > 1)
 *   sp   on whenever tp > 1 (Megatron's recommended setting; the search
 *        does not try tp without it)
 * and keeps exactly the combinations layout_validate accepts.
 *
 * Every enumerated layout is *considered* (with a precision list, every
 * layout under every precision the cluster runs, in one list); before any
 * simulation it is
 *   pruned by memory  when a lower bound of its peak memory exceeds the
 *                     largest GPU memory of the cluster: the stage that
 *                     holds the most layers (at least ceil(L / pp)) with
 *                     one micro-batch stashed (layout_stage_memory is
 *                     monotone in both), taken at the cheapest stage;
 *   pruned by bound   when a lower bound of its step time exceeds the
 *                     top_k-th best fitting step simulated so far:
 *                       m * (C + L (t_f + t_b) + e + c_embed + c_head) / pp
 *                         + (pp - 1) / 2 * (f_1 + b_1)
 *                     C every layer's compute (an MoE layer with its MoE
 *                     block) on the cluster's fastest GPU at the layout's
 *                     own precision and recipe; t_f, t_b one layer's
 *                     tensor- and context-parallel collectives forward and
 *                     backward (on the compute stream in the simulator;
 *                     taken on the stage where they are cheapest; 0 under
 *                     DualPipeV, whose pairs hide them); e the MoE
 *                     dispatch and combine; f_1, b_1 the cheapest layer's
 *                     forward and backward with their collectives (stage s
 *                     idles at least s of those forwards before its first
 *                     op, and under 1F1B s backwards after its last; the
 *                     split orders get the forwards only). The busiest
 *                     stage does at least the average stage's work.
 *                     plan_bound.c says why each term is a bound; the
 *                     tests check it against the simulator on every layout
 *                     of small cases under every order and recipe.
 *                     Layouts are simulated in increasing order of this
 *                     bound, so once one is pruned by bound every later
 *                     one is too.
 * The rest are *simulated* (layout_sim) with the stage split of
 * plan_split_dp and with the uniform split; the faster of the two is kept.
 * They are simulated in waves of 64 on plan_options.threads threads; a
 * wave's results are taken in order, so the layouts simulated, the counts
 * and the answer are the same for any thread count. Ties in step and
 * memory go to the layout enumerated first. The fastest layout that does
 * not fit (res->oom_best) is kept only when it is faster than the k-th
 * best that fits: every such layout is simulated whatever was pruned.
 * Once a layout fits, a layout that no stage split fits (plan_stage_split
 * finds none; for the V orders, which it does not split, the uniform split
 * over the order's stash rule) is certain to be OOM in the simulator (the
 * tests check it) and is not simulated unless its bound is under both the
 * k-th best step and the fastest OOM step (it could be the OOM row); it
 * counts as pruned by memory. Not with a framework profile that has its
 * own memory rules for a dense model (the split's are Megatron's).
 * Finally each of the top k layouts' splits is refined against the
 * simulator itself: one layer moved across a chunk boundary, or between
 * neighbouring chunks of one stage, in either direction, kept when the
 * simulated step is shorter and still fits,
 * until no move helps or refine_sims runs are spent (each top layout on its
 * own budget, at most considered / k runs); the list is then
 * sorted again. (The DP's per-micro-batch model misses sends, tensor-
 * parallel collectives and the schedule's exact order; the refinement
 * closes that gap where it matters, e.g. gpt12 pp2x2 on h200x2: 6.9%.)
 * None of this depends on what was pruned: plan_options.exhaustive
 * (every layout simulated) gives the same top list and OOM row.
 *
 * Stage split (non-uniform stage boundaries). For a layout with pp stages
 * and m micro-batches, stage s costs c_s(n) = e_s + n (f_s + b_s + r_s)
 * per micro-batch for n layers, with f, b, r one layer's forward, backward
 * and recompute time on the slowest GPU of the stage, e_0 the embedding and
 * e_{pp-1} the final norm, head and loss (the heavy vocabulary). A stage
 * may take n layers only when its memory (layout_stage_memory with the
 * schedule's stash on that stage) fits its smallest GPU. The split
 * minimises
 *     T_est = (m vp - 1) max_s c_s + sum_s c_s
 * (proportional to m M + (S - M) / vp: the bottleneck stage m times, plus
 * the interleaved fill and drain), exactly, by dynamic programming over the
 * stages with a Pareto front of (max, sum) per (stage, layers so far). With
 * vp > 1 each stage's layers go over its vp chunks one at a time to the
 * chunk of lowest cost (so the chunks that hold the embedding or the head
 * take fewer). The split is written as layout.stage_layers.
 *
 * Mixed GPUs. On a cluster of several node groups, stage s runs on the
 * ranks s * tp cp dp .. (s + 1) * tp cp dp - 1 (the rank grid puts pp
 * outermost), so a stage lies on one GPU type when its ranks do; a stage
 * that straddles two groups is costed on the slower GPU and capped at the
 * smaller memory (its data-parallel peers wait for the slowest), and is
 * simulated so too: the simulator runs each stage on its replica-0 rank's
 * GPU, so plan_simulate hands it a copy of the cluster in which the node
 * groups that share a stage all take the slowest of their GPU types, with
 * the smallest of their memories. The DP
 * then gives the faster or larger GPUs' stages more layers; nothing else
 * in the search changes. The bound uses the fastest GPU, the memory prune
 * the largest memory, so both stay lower bounds.
 */
#ifndef PLACER_PLAN_PLAN_H
#define PLACER_PLAN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "graph.h"
#include "layout.h"
#include "layout_sim.h"
#include "precision.h"
#include "plan_framework.h"
#include "status.h"

#define PLAN_MAX_TOP 32
#define PLAN_MAX_PRECISIONS 8


typedef struct {
    int64_t gpus;            /* GPUs to plan for, 1..cluster_n_gpus */
    int global_batch;        /* sequences per step, >= 1 */
    precision prec;          /* GEMM / activation precision */
    int max_tp;              /* 0: the cluster's GPUs per node */
    int max_cp;              /* 0: the largest power of two keeping seq / cp >= 4096 */
    int max_vp;              /* virtual chunks per stage tried, >= 1 (default 4) */
    int max_mbs;             /* largest micro-batch tried (default 16) */
    int top_k;               /* layouts kept, 1..PLAN_MAX_TOP (default 5) */
    int no_uniform;          /* 1: simulate only the DP split (not also the uniform one) */
    int refine_sims;         /* simulator runs each top layout's split may spend on moving
                                one layer across a chunk boundary while that helps
                                (default 256; 0: no refinement) */
    plan_framework framework; /* the stack the plan is predicted for and exported to: the
                                search keeps only layouts it runs as planned (ANY: all) */
    int64_t reserve_bytes;   /* a layout fits when its peak + this <= the GPU's memory (0) */
    /* dimensions held fixed (plan_parse_fixed; 0 or -1: searched). A fixed
     * tp or cp is tried even beyond max_tp / max_cp. */
    int fix_tp, fix_cp, fix_pp, fix_vp, fix_dp, fix_mbs; /* 0: searched */
    int fix_recompute, fix_zero;                          /* -1: searched */
    /* the software stack's settings every layout takes (plan_parse_fixed's
     * dispatcher= and mem=; they are not searched): the MoE dispatcher (-1:
     * the layout default, alltoall) and the memory options a stack uses
     * (LAYOUT_MEM_* bits; 0: none). A layout they do not validate with (mem
     * options of another precision or attention) is left out. */
    int fix_dispatcher;
    unsigned fix_mem;
    const layout_sim_params *sim; /* NULL: layout_sim_params_default */
    /* precisions and FP8 recipes (plan_parse_precisions): with n_prec > 0
     * the search runs once per entry (precs[i], with recipe fp8s[i] when
     * fp8) that every GPU type of the cluster runs, and keeps the fastest
     * layouts over all of them; 0: prec alone, with recipe fp8 when fp8 */
    fp8_recipe fp8;          /* the recipe of prec = fp8 (default delayed) */
    int n_prec;
    precision precs[PLAN_MAX_PRECISIONS];
    fp8_recipe fp8s[PLAN_MAX_PRECISIONS];
    unsigned sched_mask;     /* pipeline orders searched beside 1F1B / interleaved: bits
                                1u << SCHED_ZB_H1, ZB_H2 (vp 1), ZB_V, DUALPIPEV,
                                DUALPIPE (vp 2);
                                0 (default): none */
    int threads;             /* threads simulating candidates (0, the default: every online
                                core); the result is the same for any count */
    int exhaustive;          /* 1: no pruning: every enumerated layout simulated (the memory
                                bound's too), for checking the pruned search; 0 (default) */
} plan_options;

/* Defaults above; gpus and global_batch 0 (the caller sets them), bf16,
 * nothing fixed. */
void plan_options_default(plan_options *o);

/* Fix dimensions from text "tp=8,pp=16,vp=1,dp=4,cp=1,mbs=1,
 * recompute=none|selective|full,zero=0|1|2|3|fsdp" (any subset, any
 * order; the layout text form's keys), and the stack's settings
 * "dispatcher=alltoall|allgather|flex" and "mem=A+B" (layout.h's mem
 * names, or none). PL_ERR_INVALID naming the bad key
 * or value; *o untouched then. */
pl_status plan_parse_fixed(const char *text, plan_options *o, char *msg, size_t len);

/* The precisions the search may use, from text: a comma-separated list of
 * precision names (bf16, fp16, fp8, tf32, fp32), where "fp8" means every
 * FP8 recipe (delayed, tensorwise, blockwise, mxfp8: those a GPU cannot run
 * are dropped by the search) and "fp8=R" or "fp8=R1|R2" names recipes. One
 * entry sets o->prec (and o->fp8) with n_prec = 0, as a plain precision;
 * several fill precs / fp8s. PL_ERR_INVALID naming the bad item (an
 * unknown name, a duplicate, more than PLAN_MAX_PRECISIONS); *o untouched
 * then. */
pl_status plan_parse_precisions(const char *text, plan_options *o, char *msg, size_t len);
/* The best layout's step with each pipeline order beside its own: 1f1b
 * (vp 1), interleaved (vp 2), zb-h1, zb-h2 (vp 1), zb-v, dualpipev, dualpipe (vp 2),
 * the rest of the layout kept (uniform stages). A row whose layout is
 * invalid (dualpipev with m < 2pp, pp 1, ...) has ok 0 and why. */
typedef struct {
    schedule_order sched;    /* SCHED_INTERLEAVED: 1f1b with vp 2 */
    int ok;                  /* simulated */
    char why[120];           /* when not */
    layout l;
    double step_us, bubble_us;
    int64_t peak_bytes;
    int fits;
} plan_sched_row;
#define PLAN_SCHED_ROWS 7
pl_status plan_schedule_rows(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm, const layout *best,
                             plan_sched_row rows[PLAN_SCHED_ROWS], char *msg, size_t len);

/* One simulated layout. */
typedef struct {
    layout l;                /* the layout, stage_layers explicit when non-uniform */
    layout_result res;       /* its simulation */
    double lb_us;            /* the step-time lower bound it was ranked by */
    int split_dp;            /* 1: the DP split won (or equals the uniform one), 0: uniform */
    int refined;             /* layers moved by the refinement (0: the split as found) */
    int64_t index;           /* enumeration index over every precision (ties: the lower first) */
} plan_entry;

typedef struct {
    int64_t considered;      /* layouts enumerated that layout_validate accepts */
    int64_t pruned_memory;   /* of which dropped by the memory bound, or not simulated because
                                no stage split fits (certain OOM, see above) */
    int64_t pruned_bound;    /* of which dropped by the step-time bound */
    int64_t simulated;       /* of which simulated */
    int64_t sim_runs;        /* simulator runs (a layout takes one or two) */
    int64_t sim_oom;         /* simulated layouts the simulator found OOM (or short of the reserve) */
    int64_t refine_runs;     /* simulator runs of the refinement */
    double wall_s;           /* seconds */
    int n_top;               /* entries in top */
    plan_entry top[PLAN_MAX_TOP]; /* fastest fitting layouts, fastest first */
    int have_oom_best;       /* 1: oom_best holds the fastest simulated OOM layout */
    plan_entry oom_best;     /* for the message when nothing fits */
    int64_t min_mem_bytes;   /* smallest peak memory of any simulated layout or memory
                                bound of a layout pruned by memory (depends on what was
                                simulated, unless nothing fits) */
} plan_result;

/* A snapshot of the search, handed to the progress callback. The search
 * is one pass over every precision (pass 0 of n_passes 1); best points
 * into the search's own state and is valid only during the call. */
typedef struct {
    int64_t done;            /* simulation candidates handled so far, of total */
    int64_t total;           /* candidates that passed the memory prune (bounded layouts) */
    int pass, n_passes;      /* precision pass, 0-based, and how many there are */
    int64_t considered;      /* as plan_result's fields, so far */
    int64_t pruned_memory;
    int64_t pruned_bound;
    int64_t simulated;
    const plan_entry *best;  /* fastest fitting layout of this pass so far; NULL when none */
    double elapsed_s;        /* seconds since the search began */
} plan_progress;

/* Called as the search advances (every 65536 layouts enumerated, with done
 * and total 0; then before each wave of 64 candidates, and once at the
 * end); may be NULL. Returning non-zero cancels the search:
 * plan_search then returns PL_ERR_INTERRUPTED with *res holding what was
 * found so far (top sorted, counts as far as they got; the refinement of
 * splits is skipped). The server cancels when its client disconnects, the
 * CLI on Ctrl-C. */
typedef int (*plan_progress_fn)(void *ctx, const plan_progress *p);

/* Search the layouts of model cfg (cfg->seq_len is the sequence) on
 * cluster c. *res is filled (n_top = 0 when nothing fits: then see
 * min_mem_bytes and oom_best). PL_ERR_INVALID with a message for bad
 * options (no valid layout at all, gpus beyond the cluster, ...); a
 * simulator error is passed up with its message. res is large (about
 * 0.5 MB: a layout and a result with per-stage memory per entry): allocate
 * it, do not put it on the stack. PL_ERR_INTERRUPTED when progress asked
 * to stop (see plan_progress_fn). */
pl_status plan_search(const gpt_config *cfg, const cluster *c, const plan_options *o, plan_progress_fn progress,
                      void *progress_ctx, plan_result *res, char *msg, size_t len);

/* Called for every layout the search enumerates that layout_validate
 * accepts (index counts them from 0); return non-zero to stop. l is
 * scratch: copy what is kept. */
typedef int (*plan_layout_fn)(void *ctx, const layout *l, int64_t index);

/* The enumeration alone (options as plan_search takes them; gpus and
 * global_batch must be set). PL_ERR_NOMEM when fn stops it. */
pl_status plan_enumerate(const gpt_config *cfg, const cluster *c, const plan_options *o, plan_layout_fn fn,
                         void *ctx, char *msg, size_t len);

/* Simulate one given layout the way the search does (its stage_layers as
 * given, uniform when n_stage_layers = 0; stages that straddle node groups
 * on their slowest GPU, see above): for comparing a published or
 * hand-written layout with the plan. */
pl_status plan_simulate(const gpt_config *cfg, const cluster *c, const layout *l, const layout_sim_params *prm,
                        layout_result *res, char *msg, size_t len);

/* The DP stage split for layout l (its pp, vp, m, recompute, ...) of cfg
 * on c, as described above. Writes l->stage_layers / n_stage_layers
 * (pp * vp entries); prm NULL: defaults. *est_us (may be NULL) gets the estimate
 * (m - 1/vp) M + S / vp in microseconds (M the bottleneck stage, S the sum
 * of the stages, per micro-batch). PL_ERR_INVALID when no split fits
 * the memory caps (l untouched then: the caller may still simulate the
 * uniform split, which the simulator will call OOM). */
pl_status plan_stage_split(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm, layout *l,
                           double *est_us, char *msg, size_t len);

/* The lower bounds the search prunes with (above), for layout l of cfg
 * on c: the step time in microseconds, and the peak memory in bytes
 * (layout_stage_memory_moe with prm's compute parameters at one micro-batch
 * in flight, the busiest rank's fewest layers: ceil(L / pp), DualPipe's two
 * stages a rank ceil(2 L / pp); prm NULL: defaults). */
double plan_step_lower_bound_us(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm,
                                const layout *l);
int64_t plan_memory_lower_bound(const gpt_config *cfg, const layout_sim_params *prm, const layout *l);

/* ---- the pure parts, exposed for tests --------------------------------- */

/* The exact split of L layers over S stages minimising
 *     w * max_s cost[s][n_s] + sum_s cost[s][n_s]
 * over n_s >= min_n, sum n_s = L, where cost is S rows of L + 1 entries
 * (cost[s * (L + 1) + n]; INFINITY marks a count the stage cannot take).
 * Writes n (S entries) and returns the objective, or INFINITY (n
 * untouched) when no split is feasible. w >= 0. PL_ERR_NOMEM -> NAN. */
double plan_split_dp(int S, int L, int min_n, const double *cost, double w, int *n);

/* DeepSpeed's partition_method="parameters": ds_utils.partition_balanced
 * as DeepSpeed ships it today (since its PR 4312): a dynamic programme
 * over contiguous partitions of the n_items weights into S non-empty parts
 * that keeps, per (items, parts), the partition with the smallest
 * heaviest-minus-lightest part (ties to the last boundary tried), and
 * returns S + 1 boundaries parts[0] = 0 .. parts[S] = n_items (DeepSpeed's
 * self.parts). Reproduced step for step, so the split is the one DeepSpeed
 * would use, not an optimum of ours. n_items <= S gives DeepSpeed's
 * partition_uniform. PL_ERR_INVALID for S < 1 or n_items < 1;
 * PL_ERR_NOMEM. */
pl_status plan_partition_balanced(const double *weights, int n_items, int S, int *parts);

/* DeepSpeed's `parameters` split of cfg over pp stages as layer counts
 * per stage (pp entries): the layer specs are [embedding, L transformer
 * layers, final norm + head] weighted by their parameters (a tied head
 * counts its matrix again, as DeepSpeed's TiedLayerSpec does). A stage
 * that gets no transformer layer makes it PL_ERR_INVALID (the layout
 * cannot express it). */
pl_status plan_deepspeed_parameters_split(const gpt_config *cfg, int pp, int *stage_layers, char *msg, size_t len);

#endif
