/*
 * param_memory.h: where each node's parameters and activations live, shared by the
 * executor, both backends and the tests.
 *
 * Parameters: each node owns a "shard" of floats holding its tensors in a
 * fixed order, every tensor starting on a 64-float (256-byte) boundary so the
 * CUDA kernels can use wide loads. A device's flat parameter buffer is the
 * concatenation of the shards of the nodes placed on it (in node order); so
 * are its gradient and AdamW m and v buffers. The "model view" is the same
 * concatenation over all nodes, used to initialise and to compare parameters
 * across placements.
 *
 *   embedding  wte (V,C), wpe (T,C)
 *   layernorm  weight (C), bias (C)
 *   attention  wqkv (3C,C), bqkv (3C), wproj (C,C), bproj (C)
 *   residual   -
 *   mlp        wfc (4C,C), bfc (4C), wproj (C,4C), bproj (C)
 *   head       w (Vp,C): the vocabulary padded to Vp (layout below) with
 *              rows V..Vp-1 zero, so the head's GEMMs run on aligned sizes;
 *              those rows get zero logits, zero gradients and stay zero
 *   loss       -
 *
 * Activations, per node and micro-batch of b samples (floats):
 *   out      the output: (b,T,C); the head's logits (b,T,Vp) with the vocab
 *            padded to Vp (a multiple of 64) for aligned rows; the loss's
 *            per-token losses (b,T)
 *   saved    what backward needs besides the inputs: layernorm mean, rstd;
 *            attention qkvr, att, y; mlp h, g (see nodes.h)
 *   scratch  transient buffers of one forward or backward call
 */
#ifndef PLACER_HW_PARAM_MEMORY_H
#define PLACER_HW_PARAM_MEMORY_H

#include <stdint.h>

#include "graph.h"
#include "status.h"

#define HW_ALIGN_FLOATS 64
#define HW_MAX_PARAM_TENSORS 4
#define HW_MAX_SAVED 3

static inline int64_t hw_align_floats(int64_t n) {
    return (n + HW_ALIGN_FLOATS - 1) / HW_ALIGN_FLOATS * HW_ALIGN_FLOATS;
}

/* Padded vocabulary: V rounded up to a multiple of 64. */
static inline int hw_padded_vocab(int V) { return (V + 63) / 64 * 64; }

/* Tensor parallelism's vocabulary split (hw/dist/dist_tp.h): each of tp ranks
 * holds a slice of ceil(V / tp) head rows, rank r the rows from r times
 * that; the last slices may hold fewer real rows (their tail is padding,
 * like rows V..Vp-1 of the whole head) or none. */
static inline int hw_tp_vocab_slice(int V, int tp) { return (V + tp - 1) / tp; }
static inline int hw_tp_vocab_rows(int V, int tp, int rank) {
    const int s = hw_tp_vocab_slice(V, tp), n = V - rank * s;
    return n < 0 ? 0 : n > s ? s : n;
}

typedef struct {
    int n;                              /* tensors in the shard */
    int64_t off[HW_MAX_PARAM_TENSORS];  /* offset of each tensor in the shard (floats) */
    int64_t size[HW_MAX_PARAM_TENSORS]; /* floats in each tensor */
    int64_t floats;                     /* shard size, padding included */
} hw_param_map;

/* The parameter shard layout of node i of g. */
void hw_node_param_map(const graph *g, int i, hw_param_map *pl);

/* Offsets of every node's shard in the model view: off[i] for node i,
 * off[n_nodes] = total floats. off must hold n_nodes + 1 entries, or be
 * NULL to get only the total. Returns the total floats. */
int64_t hw_model_param_offsets(const graph *g, int64_t *off);

/* Fill the model view (hw_model_param_offsets floats) with the initial
 * parameters: weights N(0, 0.02), the two residual projections (attention
 * and MLP proj) N(0, 0.02/sqrt(2L)), biases 0, layernorm weight 1 and bias
 * 0, padding 0. Node i draws from its own generator seeded by (seed, i), so
 * the values do not depend on the placement. */
void hw_params_init(const graph *g, uint64_t seed, float *model);

typedef struct {
    int64_t out;                   /* output floats */
    int n_saved;                   /* saved tensors */
    int64_t saved_off[HW_MAX_SAVED]; /* offsets in the saved block (floats) */
    int64_t saved_size[HW_MAX_SAVED];
    int64_t saved;                 /* saved block floats, padding included */
    int64_t fwd_scratch;           /* forward scratch floats */
    int64_t bwd_scratch;           /* backward scratch floats */
} hw_node_mem;

/* Tensor parallelism (hw.h, hw/dist/dist_tp.h): the shard one of tp ranks holds
 * of node i. Attention keeps nh/tp heads: wqkv (3 Cl, C) with Cl = C/tp
 * (q, k, v rows of its heads), bqkv (3 Cl), wproj (C, Cl) (the columns that
 * read its heads), bproj (C) whole; the MLP wfc (F/tp, C), bfc (F/tp),
 * wproj (C, F/tp), bproj (C); the head (Vlp, C) with its vocabulary slice
 * (hw_tp_vocab_slice) padded to Vlp = hw_padded_vocab(slice); every other
 * node is whole.
 * tp = 1 gives hw_node_param_map. The caller has checked that tp divides
 * the heads and F (hw_tp_check). */
void hw_node_param_map_tp(const graph *g, int i, int tp, hw_param_map *pl);

/* The shard of node `node` that tp rank `rank` of `size` holds
 * (hw_node_param_map_tp), from the node's whole shard `full`
 * (hw_node_param_map): local gets every float (its padding rows 0). */
void hw_tp_shard_from_full(const graph *g, int node, int rank, int size, const float *full, float *local);
/* The reverse: the rank's slice of local written to its places in full;
 * the rest of full (the other ranks' slices, the vocabulary padding rows)
 * is left as it is. */
void hw_tp_shard_to_full(const graph *g, int node, int rank, int size, const float *local, float *full);

/* Activation sizes of node i for a micro-batch of b samples. */
void hw_node_mem_floats(const graph *g, int i, int b, hw_node_mem *m);
/* The same for a precision: bf16 != 0 is the bf16 mixed mode (hw.h), whose
 * nodes need more scratch; bf16 == 0 gives hw_node_mem_floats. */
void hw_node_mem_floats_prec(const graph *g, int i, int b, int bf16, hw_node_mem *m);
/* The same on one of tp tensor-parallel ranks (bf16 as above; tp = 1 gives
 * hw_node_mem_floats_prec). Let N = b T tokens, Ns = N / tp with sequence
 * parallelism (sp != 0), else N. Outputs: embedding, layernorm, attention,
 * residual and MLP (Ns, C); head (N, Vlp); loss (N). Saved: the rank's
 * heads (qkvr 3 N Cl, att b nh T T, y N Cl) and its MLP columns (h, g:
 * N F/tp each). Scratch adds the full-width partial products and, with sp,
 * the gathered inputs (hw/dist/dist_tp.c says which). */
void hw_node_mem_floats_tp(const graph *g, int i, int b, int bf16, int tp, int sp, hw_node_mem *m);

/* Whether a consumer of kind k reads its input again in backward (layernorm,
 * attention, mlp, head do; residual and loss do not). */
int hw_kind_bwd_reads_input(op_kind k);

#endif
