/*
 * side_stream.cu: a second compute stream on each logical device, for the
 * weight gradients of a backward.
 *
 * Why: a weight-gradient GEMM of the 49M GPT has few output tiles and a long
 * reduction (384 x 1152 x 4096: 27 tiles of 128 x 128 on 132 SMs), and the
 * head's input gradient (4096 x 384 x 50304) 96. Alone on the GPU each leaves
 * SMs idle. Independent of the input-gradient chain that the next node waits
 * for, they go to a second stream, which fills SMs the chain leaves idle;
 * inside the node call the compute stream then waits for it. What it gains
 * is small: cuBLAS's kernels for these shapes mostly fill the GPU on their
 * own.
 *
 * Contract (cuda_nodes.h): cu_side_fork / cu_side_back bracket the side's
 * work inside a node call; cu_node_backward joins before it returns, so the
 * executor's view (one node call = one unit of the compute stream, whose
 * buffers the executor may reuse afterwards) is unchanged, and a graph capture
 * sees the fork and the join as edges of one graph. The side stream takes
 * the same GEMM calls with its own cuBLAS handle and the upper half of the
 * workspace (the compute stream keeps the lower half).
 *
 * Measured on the H200 (third session, graph step, 49M GPT, with the head's
 * TF32 GEMMs through cuBLASLt, call 8, 3 rounds): TF32 5.053 / 5.086 /
 * 5.021 ms with the side stream, 5.095 / 5.113 / 5.088 on one stream; bf16
 * 2.997 / 2.994 / 2.993 against 3.012 / 3.015 / 3.014. Not additive by node:
 * the attention and MLP weight gradients alone on it gave 5.112 / 5.125 /
 * 5.148 in TF32 (call 8), the head's alone 5.335 / 5.320 / 5.337 (call 7).
 * PLACER_SIDE=0 turns it off (one stream, the whole workspace: the engine as
 * it was). PLACER_KPROF turns it off: its marks time kernels on one stream.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_nodes.h"

#define TRY(x) CU_TRY(ctx->err, ctx->err_len, x)

pl_status cu_side_create(cu_ctx *ctx, cublasMath_t math) {
    const char *e = getenv("PLACER_SIDE");
    if ((e && !strcmp(e, "0")) || ctx->kprof) return PL_OK;
    /* the same priority as the compute stream: a side stream at the lowest
     * priority (the compute and comm streams at the highest) was slower on
     * the H200 (GPU call 1 of the third session, graph step, 2 rounds: TF32
     * 5.289 / 5.286 ms against 5.274 / 5.265 at equal priorities and 5.324 /
     * 5.324 on one stream; bf16 3.112 / 3.115 against 3.037 / 3.040 and
     * 3.062 / 3.063) */
    TRY(cudaStreamCreateWithFlags(&ctx->side, cudaStreamNonBlocking));
    TRY(cudaEventCreateWithFlags(&ctx->side_fork_ev, cudaEventDisableTiming));
    TRY(cudaEventCreateWithFlags(&ctx->side_join_ev, cudaEventDisableTiming));
    cublasStatus_t bs = cublasCreate(&ctx->blas_side);
    if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasSetStream(ctx->blas_side, ctx->side);
    if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasSetMathMode(ctx->blas_side, math);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return cu_fail(ctx->err, ctx->err_len, __FILE__, __LINE__, "cublasCreate (side stream)",
                       cublasGetStatusString(bs), 0);
    return PL_OK;
}

void cu_side_destroy(cu_ctx *ctx) {
    if (ctx->side) cudaStreamSynchronize(ctx->side);
    if (ctx->blas_side) cublasDestroy(ctx->blas_side);
    if (ctx->side_fork_ev) cudaEventDestroy(ctx->side_fork_ev);
    if (ctx->side_join_ev) cudaEventDestroy(ctx->side_join_ev);
    if (ctx->side) cudaStreamDestroy(ctx->side);
    ctx->side = NULL;
    ctx->blas_side = NULL;
    ctx->side_fork_ev = ctx->side_join_ev = NULL;
}

/* The lower half (256-byte aligned) for the compute stream, the upper half
 * for the side; without a side stream the compute stream has it all. */
void cu_side_set_workspace(cu_ctx *ctx, void *ptr, size_t bytes, void **main_ws, size_t *main_bytes) {
    if (!ctx->side || !ptr) {
        *main_ws = ptr;
        *main_bytes = ptr ? bytes : 0;
        ctx->ws_side = NULL;
        ctx->ws_side_bytes = 0;
        if (ctx->blas_side) cublasSetWorkspace(ctx->blas_side, NULL, 0);
        return;
    }
    const size_t half = bytes / 2 / 256 * 256;
    *main_ws = ptr;
    *main_bytes = half;
    ctx->ws_side = (char *)ptr + half;
    ctx->ws_side_bytes = half;
    cublasSetWorkspace(ctx->blas_side, ctx->ws_side, half);
}

pl_status cu_side_fork(cu_ctx *ctx) {
    if (!ctx->side) return PL_OK;
    if (ctx->on_side) cu_side_back(ctx);
    TRY(cudaEventRecord(ctx->side_fork_ev, ctx->stream));
    TRY(cudaStreamWaitEvent(ctx->side, ctx->side_fork_ev, 0));
    ctx->main_stream = ctx->stream;
    ctx->main_blas = ctx->blas;
    ctx->main_ws = ctx->ws;
    ctx->main_ws_bytes = ctx->ws_bytes;
    ctx->stream = ctx->side;
    ctx->blas = ctx->blas_side;
    ctx->ws = ctx->ws_side;
    ctx->ws_bytes = ctx->ws_side_bytes;
    ctx->on_side = 1;
    ctx->side_forked = 1;
    return PL_OK;
}

void cu_side_back(cu_ctx *ctx) {
    if (!ctx->on_side) return;
    ctx->stream = ctx->main_stream;
    ctx->blas = ctx->main_blas;
    ctx->ws = ctx->main_ws;
    ctx->ws_bytes = ctx->main_ws_bytes;
    ctx->on_side = 0;
}

pl_status cu_side_join(cu_ctx *ctx) {
    cu_side_back(ctx);
    if (!ctx->side_forked) return PL_OK;
    ctx->side_forked = 0;
    TRY(cudaEventRecord(ctx->side_join_ev, ctx->side));
    TRY(cudaStreamWaitEvent(ctx->stream, ctx->side_join_ev, 0));
    return PL_OK;
}
