/*
 * cuda_nodes.h: the node math on a GPU (kernels.cu and the files it names),
 * for the CUDA backend.
 * Internal to hw/: only CUDA translation units include it.
 *
 * Every function enqueues work on ctx->stream, with matrix products through
 * cuBLAS (fp32 storage; TF32 tensor-core math unless strict fp32), and
 * returns PL_OK or PL_ERR_CUDA with "file:line: call: error" in ctx->err.
 * Each launch is followed by a cudaGetLastError check.
 */
#ifndef PLACER_HW_CUDA_NODES_H
#define PLACER_HW_CUDA_NODES_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "node_call.h"
#include "status.h"
}

#define CU_KPROF_MAX 8192
#define CU_KPROF_NAMES 64

/* Per-kernel timing (PLACER_KPROF set in the environment): an event after
 * every launch on the compute stream, aggregated by kernel name at each
 * step's end and printed when the backend is destroyed. Off by default; never
 * inside a graph capture. */
typedef struct {
    int on;                              /* enabled */
    cudaEvent_t ev[CU_KPROF_MAX];        /* marks of the current step */
    const char *name[CU_KPROF_MAX];      /* kernel ending at each mark; NULL = a boundary */
    int n;                               /* marks so far this step */
    const char *agg_name[CU_KPROF_NAMES];/* totals by name */
    double agg_ms[CU_KPROF_NAMES];
    double agg_max[CU_KPROF_NAMES];      /* slowest call (the first, with lazy loading) */
    long agg_calls[CU_KPROF_NAMES];
    int n_agg;
    char gemm_names[CU_KPROF_NAMES][48]; /* "gemm MxNxK" names seen */
    int n_gemm_names;
} cu_kprof;

struct cu_lt_entry;   /* a cached cuBLASLt matmul of the bf16 mode (kernels_bf16.cu) */
struct cu_lt32_entry; /* a cached cuBLASLt matmul of the TF32 mode (gemm_lt32.cu) */

typedef struct {
    cudaStream_t stream;             /* the compute stream */
    cublasHandle_t blas;             /* bound to stream */
    cublasComputeType_t compute;     /* CUBLAS_COMPUTE_32F or _32F_FAST_TF32 */
    int loss_smem_ok;                /* the loss kernel may keep a row in shared memory */
    int n_sm;                        /* multiprocessors (the persistent loss's grid) */
    int flash_ok;                    /* the GPU runs the bf16 flash kernels (sm_80 or newer) */
    int loss16_nocache;              /* bf16 loss: re-read rows from L2 (PLACER_LOSS16=l2) */
    char *err;                       /* message buffer */
    size_t err_len;
    cu_kprof *kprof;                 /* per-kernel timing, or NULL */
    /* the bf16 mode's GEMMs (cuBLASLt) */
    cublasLtHandle_t lt;             /* created by cu_nodes_init */
    void *ws;                        /* the workspace bound by set_workspace */
    size_t ws_bytes;
    struct cu_lt_entry *lt_cache;    /* descriptors and algorithms by shape */
    int n_lt;
    /* the TF32 mode's fused paths (kernels.cu; all 0 in strict fp32), each on
     * unless PLACER_TF32_OFF names it ("epi", "loss", "flash", "ltnn", "tune",
     * "headt", "headlt" or "all"), but for lt, gelu and tdw, off unless PLACER_TF32_ON names them */
    int tf32_epi;                    /* bias / bias+GELU in cuBLASLt epilogues, fused bias gradients */
    int tf32_loss;                   /* the TF32 loss variant (loss32.h; PLACER_LOSS32=name) */
    int tf32_flash;                  /* the TF32 flash attention (hs 64 or 128) */
    int tf32_ltnn;                   /* "ltnn": the input-gradient GEMMs (N, N) through cuBLASLt */
    int tf32_lt;                     /* opt-in (PLACER_TF32_ON=lt): the other GEMMs through cuBLASLt */
    int tf32_tune;                   /* "tune": the cuBLASLt GEMMs' algorithms chosen by timing */
    int tf32_gelu_epi;               /* opt-in (PLACER_TF32_ON=gelu): GELU in the fc GEMM's epilogue */
    int tf32_tdw;                    /* opt-in (PLACER_TF32_ON=tdw): weight gradients from transposed copies */
    int tf32_headt;                  /* "headt": the head's weight gradient from x^T */
    int tf32_headlt;                 /* "headlt": the head's forward and weight-gradient GEMMs through cuBLASLt */
    int ln_bwd_threads;              /* layernorm backward block (512; PLACER_LN_BWD=256) */
    int ln4;                         /* the float4 layernorm kernels (off: PLACER_LN4=0) */
    struct cu_lt32_entry *lt32_cache;
    int n_lt32;
    /* the side stream of the weight gradients (side_stream.cu; NULL: one
     * stream). While on_side, stream, blas, ws and ws_bytes above are the
     * side's; the compute stream's are kept in main_*. */
    cudaStream_t side;
    cublasHandle_t blas_side;        /* bound to side */
    void *ws_side;                   /* its half of the workspace */
    size_t ws_side_bytes;
    cudaEvent_t side_fork_ev, side_join_ev;
    int side_forked;                 /* side has work the compute stream has not waited for */
    int on_side;
    cudaStream_t main_stream;
    cublasHandle_t main_blas;
    void *main_ws;
    size_t main_ws_bytes;
} cu_ctx;

/* The side stream (side_stream.cu). Inside one node call, cu_side_fork makes
 * the side stream wait for all the compute stream has so far and points ctx
 * at the side stream, so that the node math after it enqueues there;
 * cu_side_back points ctx at the compute stream again. cu_side_join makes the
 * compute stream wait for the side stream (cu_node_backward calls it before
 * returning, so to the executor a node call stays one unit on the compute
 * stream, and the executor may reuse the call's buffers after it). All three do
 * nothing without a side stream. cu_side_create makes one (a stream of the
 * compute stream's priority, a cuBLAS handle, two events), none with
 * PLACER_SIDE=0 or PLACER_KPROF (whose marks time one stream);
 * cu_side_destroy frees it. cu_side_set_workspace splits a workspace between the two streams. */
pl_status cu_side_create(cu_ctx *ctx, cublasMath_t math);
void cu_side_destroy(cu_ctx *ctx);
void cu_side_set_workspace(cu_ctx *ctx, void *ptr, size_t bytes, void **main_ws, size_t *main_bytes);
pl_status cu_side_fork(cu_ctx *ctx);
void cu_side_back(cu_ctx *ctx);
pl_status cu_side_join(cu_ctx *ctx);

/* Mark the end of kernel `name` (NULL: a boundary) when profiling. */
void cu_kmark(cu_ctx *ctx, const char *name);
/* Fold the step's marks into the totals (after the stream is idle). */
void cu_kprof_collect(cu_kprof *k);
/* Print the totals to stderr: "KPROF dev D name calls N total T ms mean M us",
 * the mean leaving out each name's slowest call (its first: module loading). */
void cu_kprof_print(const cu_kprof *k, int dev);

/* Record a failure in ctx->err and return its status (PL_ERR_DEVICE_OOM for
 * an allocation failure, else PL_ERR_CUDA). */
pl_status cu_fail(char *err, size_t len, const char *file, int line, const char *call, const char *what,
                  int is_oom);

#define CU_TRY(ctx_err, ctx_len, x)                                                                    \
    do {                                                                                               \
        cudaError_t e_ = (x);                                                                          \
        if (e_ != cudaSuccess)                                                                         \
            return cu_fail(ctx_err, ctx_len, __FILE__, __LINE__, #x, cudaGetErrorString(e_),           \
                           e_ == cudaErrorMemoryAllocation);                                           \
    } while (0)

#define BLAS_TRY(ctx_err, ctx_len, x)                                                                  \
    do {                                                                                               \
        cublasStatus_t s_ = (x);                                                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                               \
            return cu_fail(ctx_err, ctx_len, __FILE__, __LINE__, #x, cublasGetStatusString(s_), 0);    \
    } while (0)

/* One-time per-device setup of kernel attributes (shared-memory limits)
 * and the cuBLASLt handle; cu_nodes_fini releases what it made. */
pl_status cu_nodes_init(cu_ctx *ctx);
void cu_nodes_fini(cu_ctx *ctx);

pl_status cu_node_forward(cu_ctx *ctx, const hw_node_call *c);
pl_status cu_node_backward(cu_ctx *ctx, const hw_node_call *c);
pl_status cu_add(cu_ctx *ctx, float *y, const float *x, int64_t n);
pl_status cu_adamw(cu_ctx *ctx, float *p, const float *g, float *m, float *v, int64_t n, const hw_adamw_args *a);

#endif
