/*
 * step_layout.h: a parallel layout (core/layout.h, the text form of
 * `placer layout` and `placer plan`) mapped onto what the engine runs, for
 * `placer step --layout` and `placer confirm --layout`.
 *
 *   tp, sp     tensor (and sequence) parallelism over tp processes
 *              (hw_program_opts.tp, .seq_parallel; hw/dist/dist_tp.h); sp is
 *              dropped when tp is 1 (a no-op, as layout_validate allows)
 *   dp         data-parallel processes (hw_program_opts.dp); the fork launcher
 *              or mpirun runs tp * dp processes, tp innermost (the rank grid)
 *   zero       0 or 1 (hw_program_opts.zero: ZeRO-1, sharded AdamW state);
 *              dropped when dp is 1. 2, 3 and fsdp are refused
 *   pp         a pipeline of pp stages over pp logical devices of each
 *              process: a contiguous split of the graph's nodes, the
 *              embedding on stage 0, the final norm, head and loss on the
 *              last, the transformer blocks by the layout's stage
 *              boundaries (stages=...) or uniformly (layout_chunk_layers)
 *   mbs, gbs   gbs is the global batch (the config's batch when the text
 *              has no gbs); each pipeline runs gbs / (dp * mbs)
 *              micro-batches (one micro-batch of gbs / dp when the text has
 *              no mbs)
 *   precision  the engine's precision (fp32, tf32, bf16) when the text
 *              names one; else the engine's default (fp32 on the CPU, tf32
 *              on CUDA), not the layout's bf16 default
 * Refused, one line each: cp > 1 ("the engine does not run context
 * parallelism yet"), vp > 1, recompute other than none, zero 2/3/fsdp,
 * precision fp16/fp8; and every layout_validate error against the model.
 *
 * It lives in hw/dist/ beside the runner of those processes (dist_step.h):
 * which parts of a layout the engine runs, and how, is the engine's
 * knowledge, and both commands that take a layout (and calib/) sit above
 * hw.
 */
#ifndef PLACER_HW_STEP_LAYOUT_H
#define PLACER_HW_STEP_LAYOUT_H

#include <stddef.h>

#include "graph.h"
#include "hw.h"
#include "layout.h"
#include "status.h"

typedef struct {
    layout l;            /* as parsed, gbs and mbs filled in as above */
    char text[1024];     /* its canonical text form (layout_format) */
    int world;           /* processes: tp * dp */
    int tp, sp, dp, zero;/* as the engine takes them */
    int pp;              /* logical devices per process, the pipeline stages */
    int batch;           /* global batch */
    int micro_batches;   /* per pipeline per step */
    int has_precision;   /* the text named a precision */
    hw_precision prec;   /* that precision, or HW_PREC_DEFAULT */
} step_layout;

/* Parse text and map it for model cfg (the config's batch is the default
 * global batch) on the CUDA engine (cuda != 0) or the CPU backend, whose
 * default precision (tf32, fp32) the canonical text then names when the
 * layout gives none. PL_ERR_INVALID with one line in msg for a bad layout,
 * one the model cannot take, or a part the engine does not run. */
pl_status step_layout_resolve(const char *text, const gpt_config *cfg, int cuda, step_layout *out, char *msg,
                              size_t len);

/* Set the precision the engine runs (not HW_PREC_DEFAULT) into sl's layout
 * and its canonical text, for a layout that named none: the text then says
 * what ran. */
void step_layout_set_precision(step_layout *sl, hw_precision p);

/* The stage (0..pp-1) of every node of g under sl (g built from the model
 * with sl->batch; placement has g->n_nodes entries). PL_ERR_INVALID when
 * the stages cannot be laid out over g's layers. */
pl_status step_layout_placement(const step_layout *sl, const graph *g, int *placement, char *msg, size_t len);

#endif
