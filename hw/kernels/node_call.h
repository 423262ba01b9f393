/*
 * node_call.h: what one call of the node math takes: a node's forward or
 * backward with its buffers (hw_node_call), and the optimizer's update
 * (hw_adamw_args). Both backends' node math (nodes_cpu.c through
 * backend_cpu.c; the CUDA kernels through cuda_nodes.h) receives these, and
 * the executor (hw/exec) fills them from its compiled program; they live
 * here, beside the kernels, so that the kernels need nothing of the
 * executor. Pointers are memory of the device the call runs on.
 */
#ifndef PLACER_HW_NODE_CALL_H
#define PLACER_HW_NODE_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "param_memory.h"

/* Dimensions of one node call. B is the micro-batch size in samples. */
typedef struct {
    int B, T, C, NH, V, Vp;
} hw_dims;

/* One forward or backward call of a node, with device pointers. Unused
 * pointers are NULL. */
typedef struct {
    op_kind kind;               /* which node math */
    hw_dims d;                  /* dimensions */
    const float *in[2];         /* inputs, in graph order (producers' outputs) */
    const int *tokens;          /* embedding: (B,T) token ids */
    const int *targets;         /* loss: (B,T) target ids */
    const float *params;        /* the node's parameter shard (param_memory.h) */
    float *grads;               /* the node's gradient shard (accumulated +=) */
    float *out;                 /* forward output */
    float *saved;               /* saved block (hw_node_mem layout) */
    float *scratch;             /* scratch of hw_node_mem's size for this call */
    const float *dout;          /* backward: gradient of the output */
    float *din[2];              /* backward: gradients of the inputs; loss forward:
                                   din[0] receives dlogits (may equal in[0]) */
    int acc[2];                 /* 0: din[k] = ...; 1: din[k] += ... */
    double *loss_sum;           /* loss: running sum of token losses */
    float inv_norm;             /* loss: 1 / (full batch * T) */
    hw_param_map pl;         /* the shard's tensor offsets */
    hw_node_mem mem;            /* the saved block's tensor offsets */
    int bf16;                   /* the bf16 mixed mode (hw.h) */
    const void *params16;       /* bf16: the shard's weight copy, same offsets in elements
                                   (CUDA: __nv_bfloat16; CPU: floats rounded to bf16) */
    int part;                   /* backward: HW_BWD_WHOLE, HW_BWD_INPUT (B: din, keeping
                                   wstash) or HW_BWD_WEIGHT (W: the grads from wstash) */
    float *wstash;              /* B to W: what W needs beyond dout, in and saved
                                   (hw_bwd_wstash_floats), or NULL */
} hw_node_call;

/* The parts of a backward call (orders that split it: schedule.h). */
enum { HW_BWD_WHOLE = 0, HW_BWD_INPUT, HW_BWD_WEIGHT };

/* The node kinds whose backward splits into B and W (GEMM weights), and
 * the floats their B keeps for W: attention dqkv 3NC, MLP dh 4NC, head 0
 * (N = B*T tokens). */
static inline int hw_bwd_splits(op_kind k) { return k == OP_ATTENTION || k == OP_MLP || k == OP_HEAD; }
static inline int64_t hw_bwd_wstash_floats(op_kind k, int64_t N, int64_t C) {
    return k == OP_ATTENTION ? 3 * N * C : k == OP_MLP ? 4 * N * C : 0;
}

typedef struct {
    float lr, beta1, beta2, eps, weight_decay; /* AdamW hyper-parameters */
    int t;                                     /* step number, 1-based, when t_dev is NULL */
    int *t_dev;                                /* or a step counter in device memory: the
                                                  update uses t = *t_dev + 1, then increments
                                                  it (so a captured graph stays valid) */
    void *p16;                                 /* or NULL: the bf16 weight copy, written
                                                  from the updated p in the same pass */
} hw_adamw_args;

#endif
