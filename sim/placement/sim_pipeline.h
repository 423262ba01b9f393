/*
 * sim_pipeline.h: the pipeline orders both simulators share, as per-rank
 * lists of (chunk, micro-batch, forward/backward) operations, so that the
 * placement simulator (sim_order.c) and the layout simulator
 * (layout_sim.c) run one and the same Megatron-LM order.
 *
 *   1F1B (v = 1)         rank r of p: w = min(m, p-1-r) warm-up forwards,
 *                        then one forward and one backward while forwards
 *                        remain, then the remaining backwards
 *                        (Megatron-LM's forward_backward_pipelining_without_interleaving)
 *   interleaved (v > 1)  virtual micro-batch t runs forward on chunk
 *                        (t mod pv)/p, backward on chunk v-1-(t mod pv)/p,
 *                        micro-batch (t / pv)*p + t mod p; min(2(p-r-1) +
 *                        (v-1)p, mv) warm-up forwards (all of them when
 *                        m == p), then one forward and one backward
 *                        (..._with_interleaving; m a multiple of p)
 * Chunk c of rank r is the pipeline's chunk c*p + r (model order).
 */
#ifndef PLACER_SIM_PIPELINE_H
#define PLACER_SIM_PIPELINE_H

typedef struct {
    int chunk; /* local chunk 0..v-1 */
    int mb;    /* micro-batch 0..m-1 */
    int bwd;   /* 0 forward, 1 backward */
} pipe_op;

/* Rank r's order (0 <= r < p, v >= 1, m >= 1; for v > 1, m a multiple of
 * p) into out[0 .. 2*v*m). Returns the count, 2*v*m. */
int pipe_order_rank(int p, int r, int v, int m, pipe_op *out);

#endif
