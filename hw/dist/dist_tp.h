/*
 * dist_tp.h: tensor parallelism of the GPT's blocks over a process group
 * (issue 17, item 1). Megatron-LM's split (Shoeybi et
 * al. 2019), one process per tp rank, every rank running the same program
 * (placement and schedule over its own logical devices) in lockstep:
 *
 *   attention  column-parallel qkv: rank r holds heads [r nh/t, (r+1) nh/t)
 *              (their q, k and v rows of wqkv and bqkv); row-parallel
 *              projection: the columns of wproj that read those heads. The
 *              forward's projection is a partial sum: all-reduce (sum) over
 *              the group, then add bproj, which every rank holds whole.
 *   mlp        fc by rows of wfc (F/t hidden units, their bias), proj by the
 *              matching columns of wproj; the same all-reduce, then bproj.
 *   head       vocabulary-parallel: rank r holds rows [r s, (r+1) s) of the
 *              head's weight, s = ceil(V/t) (param_memory.h's
 *              hw_tp_vocab_slice: rows past V are padding, as Megatron pads
 *              the vocabulary; the slice is padded to a multiple of 64) and
 *              computes those logits only, (N, s).
 *   loss       vocabulary-parallel cross-entropy: per token the max of the
 *              logits (all-reduce max), the sum of exp(x - max) (all-reduce
 *              sum) and the target's logit (all-reduce sum: the owner gives
 *              it, the others 0); each rank writes the logits gradient of
 *              its own slice. Every rank gets the same loss.
 *   backward   the input gradient of every column-parallel matmul (qkv, fc,
 *              head) is a partial sum over the ranks: all-reduce (sum).
 *   replicated embedding, layernorms, residuals and the projection biases:
 *              every rank holds them whole and computes them from identical
 *              inputs (the all-reduces give every rank the same bits), so
 *              their gradients are identical on every rank and need no
 *              reduction (CPU). On CUDA the kernels summing them use
 *              atomics, so the ranks' bits may differ: dist_program.c averages
 *              them over the group before AdamW, keeping the replicas
 *              identical.
 *
 * Sequence parallelism (sp, Korthikanti et al. 2022): the activations
 * between the blocks (embedding, layernorm and residual outputs) are split
 * by token: rank r holds tokens [r Ns, (r+1) Ns) of the micro-batch's N =
 * b T tokens (flattened in (b, t) order; Ns = N / t). The all-reduce after
 * a row-parallel projection becomes a reduce-scatter to the rank's tokens
 * (then + bproj), and the input of a column-parallel matmul (attention,
 * MLP, head) is all-gathered first; in backward the output gradient is
 * all-gathered and the input gradient reduce-scattered. Layernorms and
 * residuals run on Ns tokens. The replicated parameters' gradients are then
 * partial sums over the token slices and are all-reduced (sum) over the
 * group before AdamW. The reduce-scatter and all-gather are the group's
 * (hw/dist/dist_group.h): its shard r is bit for bit the all-reduce's elements
 * of rank r, so with and without sp the block outputs get the same sums.
 *
 * Rules: t divides the heads and F = 4C (hw_tp_check says which does
 * not); with sp, t also divides each micro-batch's tokens. Two
 * implementations of the calls: hw_tp_forward/_backward on host buffers
 * (the CPU backend, below) and hw_tp_forward_cuda/_backward_cuda on device
 * buffers (hw/dist/dist_tp_cuda.cu; the collectives through hw/dist/dist_device.h).
 * In the bf16 mode (hw.h) the slices round what the whole nodes
 * round (nodes.h's _heads_bf16 / _cols_bf16 forms); the biases of the
 * projections are added in fp32 after the all-reduce, and the loss rounds
 * the logits gradient of its slice.
 */
#ifndef PLACER_HW_DIST_TP_H
#define PLACER_HW_DIST_TP_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "graph.h"
#include "status.h"

struct dist_group;

typedef struct {
    struct dist_group *g; /* the tp group (borrowed) */
    int rank, size;       /* this rank's index in it and the group's size */
    int sp;               /* sequence parallelism on */
} hw_tp;

/* Whether t tensor-parallel ranks can split cfg: t >= 1 divides n_heads
 * and 4 d_model (any vocabulary: its slices are padded), and with sp also
 * tokens (the tokens of one
 * micro-batch, b T). PL_OK, or PL_ERR_INVALID with a message naming the
 * first size t does not divide. */
pl_status hw_tp_check(const gpt_config *cfg, int t, int sp, int64_t tokens, char *msg, size_t len);

/* The tensors of node `node`'s local shard that every rank holds whole
 * (embedding, layernorm: all; attention, MLP: bproj; head: none): up to
 * HW_MAX_PARAM_TENSORS (offset, floats) pairs in the local shard. Returns
 * their count. */
int hw_tp_replicated(const graph *g, int node, int size, int64_t *off, int64_t *n);

/* The tensor- and data-parallel groups of this rank of `world` (tp * dp
 * ranks) in core/layout.h's rank grid (tp innermost, then dp): *tp_g the
 * ranks of layout_group_ranks(TP), ranked by their tp coordinate, *dp_g
 * those of layout_group_ranks(DP) (the same tp rank of every replica);
 * *dp_index gets the rank's DP coordinate (its replica: its batch slice is
 * hw_dp_slice(dp, *dp_index, ...)). A dimension of size 1 gets NULL (no
 * group). Collective over world (dist_group_split); the caller owns the
 * sub-groups (dist_group_destroy). PL_ERR_INVALID when tp * dp is not the
 * world's size; the split's status otherwise (nothing is left allocated). */
pl_status hw_tp_dp_groups(struct dist_group *world, int tp, int dp, struct dist_group **tp_g,
                          struct dist_group **dp_g, int *dp_index, char *msg, size_t len);

/* One node call on tp rank tp->rank (CPU backend: the call's pointers are
 * host memory). c has the whole model's dimensions (c->d), the rank's
 * parameter shard and the activation buffers of hw_node_mem_floats_tp.
 * Every rank of the group must make the same calls in the same order.
 * PL_OK, or the group's failure status with one line in msg. */
pl_status hw_tp_forward(const hw_tp *tp, const hw_node_call *c, char *msg, size_t len);
pl_status hw_tp_backward(const hw_tp *tp, const hw_node_call *c, char *msg, size_t len);

struct dist_device;
/* The same calls on the CUDA backend (hw/dist/dist_tp_cuda.cu, CUDA builds
 * only): c's pointers are memory of logical device dev of be, and the
 * collectives run through xd (dist_device.h: NCCL across distinct GPUs, or
 * host staging), in the engine's precision (fp32, tf32, bf16). */
pl_status hw_tp_forward_cuda(const hw_tp *tp, struct dist_device *xd, hw_backend *be, int dev, const hw_node_call *c,
                             char *msg, size_t len);
pl_status hw_tp_backward_cuda(const hw_tp *tp, struct dist_device *xd, hw_backend *be, int dev,
                              const hw_node_call *c, char *msg, size_t len);

#endif
