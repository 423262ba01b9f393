/*
 * backend_cuda.cu: the CUDA backend. Each logical device is a GPU (several
 * logical devices may share one) with its own compute stream, comm stream,
 * cuBLAS handle and event pools.
 *
 * Transfers between logical devices on different GPUs go through NCCL
 * send/recv on one communicator over the distinct GPUs (ncclCommInitAll),
 * on the comm streams. Between logical devices on the same GPU they are a
 * device-to-device copy: the copy runs on the receiver's comm stream after
 * it waits for the sender's comm stream, and the sender's comm stream then
 * waits for the copy, so that either side's comm stream being past the
 * transfer means the transfer is done (the executor relies on that).
 *
 * NVLink multicast (NVLS) is switched off before NCCL starts: on shared
 * machines a program using it can take the host's GPUs down.
 */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda.h"

#define WS_BYTES (32LL << 20) /* cuBLAS workspace per device (Hopper guidance) */

typedef struct {
    int gpu;                  /* physical ordinal */
    int rank;                 /* NCCL rank of that GPU, -1 without NCCL */
    cudaStream_t stream[2];   /* compute, comm */
    cublasHandle_t blas;
    cu_ctx ctx;               /* node-kernel context (compute stream) */
    cudaEvent_t *ev;          /* sync events (no timing) */
    int n_ev;
    cudaEvent_t *mk;          /* trace markers (timing) */
    int n_mk;
    cudaEvent_t start, end;   /* step timing */
    cudaEvent_t internal;     /* same-GPU copies */
    char err[256];            /* this device's last error */
    cu_kprof *kprof;          /* per-kernel timing (PLACER_KPROF), or NULL */
} cu_dev;

typedef struct {
    int n;
    cu_dev dev[HW_MAX_DEVICES];
    int n_gpus;                      /* distinct GPUs */
    int gpus[HW_MAX_DEVICES];
    ncclComm_t comms[HW_MAX_DEVICES];/* by rank */
    int have_nccl;
    int distinct;                    /* every logical device is its own GPU */
    int zero_on_compute;             /* PLACER_ZERO_COMM=0: the gradients' zero on the compute stream
                                        (for measurement; the program and the simulator put it on comm) */
} cu_impl;

static cu_impl *impl(hw_backend *be) { return (cu_impl *)be->impl; }

/* Copy a device's error into the backend's message and return st. */
static pl_status dev_fail(hw_backend *be, int d, pl_status st) {
    snprintf(be->err, sizeof be->err, "device %d (GPU %d): %s", d, impl(be)->dev[d].gpu, impl(be)->dev[d].err);
    return st;
}

#define DTRY(be, d, x)                                                                                      \
    do {                                                                                                    \
        cudaError_t e_ = (x);                                                                               \
        if (e_ != cudaSuccess)                                                                              \
            return dev_fail(be, d,                                                                          \
                            cu_fail(impl(be)->dev[d].err, sizeof impl(be)->dev[d].err, __FILE__, __LINE__, #x, \
                                    cudaGetErrorString(e_), e_ == cudaErrorMemoryAllocation));              \
    } while (0)

#define NTRY(be, d, x)                                                                                        \
    do {                                                                                                      \
        ncclResult_t r_ = (x);                                                                                \
        if (r_ != ncclSuccess)                                                                                \
            return dev_fail(be, d, cu_fail(impl(be)->dev[d].err, sizeof impl(be)->dev[d].err, __FILE__,      \
                                           __LINE__, #x, ncclGetErrorString(r_), 0));                         \
    } while (0)

#define SETDEV(be, d) DTRY(be, d, cudaSetDevice(impl(be)->dev[d].gpu))

static pl_status wrap(hw_backend *be, int d, pl_status st) { return st == PL_OK ? st : dev_fail(be, d, st); }

/* ---- lifecycle ---- */

static void destroy_events(cudaEvent_t *a, int n) {
    for (int i = 0; i < n; i++)
        if (a[i]) cudaEventDestroy(a[i]);
    free(a);
}

static void cuda_destroy(hw_backend *be) {
    cu_impl *c = impl(be);
    if (c) {
        for (int r = 0; r < c->n_gpus; r++)
            if (c->have_nccl && c->comms[r]) ncclCommDestroy(c->comms[r]);
        for (int d = 0; d < c->n; d++) {
            cu_dev *x = &c->dev[d];
            cudaSetDevice(x->gpu);
            if (x->stream[0]) cudaStreamSynchronize(x->stream[0]);
            if (x->stream[1]) cudaStreamSynchronize(x->stream[1]);
            if (x->kprof) {
                cu_kprof_print(x->kprof, d);
                for (int i = 0; i < CU_KPROF_MAX; i++)
                    if (x->kprof->ev[i]) cudaEventDestroy(x->kprof->ev[i]);
                free(x->kprof);
            }
            cu_side_destroy(&x->ctx);
            cu_nodes_fini(&x->ctx);
            destroy_events(x->ev, x->n_ev);
            destroy_events(x->mk, x->n_mk);
            if (x->start) cudaEventDestroy(x->start);
            if (x->end) cudaEventDestroy(x->end);
            if (x->internal) cudaEventDestroy(x->internal);
            if (x->blas) cublasDestroy(x->blas);
            if (x->stream[0]) cudaStreamDestroy(x->stream[0]);
            if (x->stream[1]) cudaStreamDestroy(x->stream[1]);
        }
        free(c);
    }
    free(be);
}

/* ---- memory ---- */

static pl_status cuda_mem_alloc(hw_backend *be, int d, int64_t bytes, void **ptr) {
    SETDEV(be, d);
    *ptr = NULL;
    cudaError_t e = cudaMalloc(ptr, (size_t)bytes);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError(); /* clear it: an OOM here leaves the context usable */
        *ptr = NULL;
        snprintf(be->err, sizeof be->err, "device %d: cudaMalloc of %lld bytes: out of memory", d, (long long)bytes);
        return PL_ERR_DEVICE_OOM;
    }
    DTRY(be, d, e);
    return PL_OK;
}

static void cuda_mem_free(hw_backend *be, int d, void *ptr) {
    cudaSetDevice(impl(be)->dev[d].gpu);
    cudaDeviceSynchronize(); /* no stream of this GPU may still use it */
    cudaFree(ptr);
}

static pl_status cuda_upload(hw_backend *be, int d, void *dst, const void *src, int64_t bytes) {
    cu_dev *x = &impl(be)->dev[d];
    SETDEV(be, d);
    DTRY(be, d, cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyHostToDevice, x->stream[0]));
    DTRY(be, d, cudaStreamSynchronize(x->stream[0]));
    return PL_OK;
}

static pl_status cuda_download(hw_backend *be, int d, void *dst, const void *src, int64_t bytes) {
    cu_dev *x = &impl(be)->dev[d];
    SETDEV(be, d);
    DTRY(be, d, cudaStreamSynchronize(x->stream[1]));
    DTRY(be, d, cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToHost, x->stream[0]));
    DTRY(be, d, cudaStreamSynchronize(x->stream[0]));
    return PL_OK;
}

static pl_status cuda_set_workspace(hw_backend *be, int d, void *ptr, int64_t bytes) {
    cu_dev *x = &impl(be)->dev[d];
    SETDEV(be, d);
    /* with a side stream, each stream gets half (side_stream.cu) */
    cu_side_set_workspace(&x->ctx, ptr, (size_t)bytes, &x->ctx.ws, &x->ctx.ws_bytes);
    cublasStatus_t s = cublasSetWorkspace(x->blas, x->ctx.ws, x->ctx.ws_bytes);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(be->err, sizeof be->err, "device %d: cublasSetWorkspace: %s", d, cublasGetStatusString(s));
        return PL_ERR_CUDA;
    }
    return PL_OK;
}

static pl_status cuda_mem_free_bytes(hw_backend *be, int d, int64_t *free_bytes) {
    SETDEV(be, d);
    size_t f = 0, t = 0;
    DTRY(be, d, cudaMemGetInfo(&f, &t));
    *free_bytes = (int64_t)f;
    return PL_OK;
}

/* ---- compute ---- */

static pl_status cuda_zero(hw_backend *be, int d, void *ptr, int64_t bytes) {
    SETDEV(be, d);
    DTRY(be, d, cudaMemsetAsync(ptr, 0, (size_t)bytes, impl(be)->dev[d].stream[0]));
    return PL_OK;
}

static pl_status cuda_zero_comm(hw_backend *be, int d, void *ptr, int64_t bytes) {
    SETDEV(be, d);
    DTRY(be, d, cudaMemsetAsync(ptr, 0, (size_t)bytes, impl(be)->dev[d].stream[impl(be)->zero_on_compute ? 0 : 1]));
    return PL_OK;
}

static pl_status cuda_forward(hw_backend *be, int d, const hw_node_call *c) {
    SETDEV(be, d);
    return wrap(be, d, cu_node_forward(&impl(be)->dev[d].ctx, c));
}

static pl_status cuda_backward(hw_backend *be, int d, const hw_node_call *c) {
    SETDEV(be, d);
    return wrap(be, d, cu_node_backward(&impl(be)->dev[d].ctx, c));
}

static pl_status cuda_add(hw_backend *be, int d, float *y, const float *x, int64_t n) {
    SETDEV(be, d);
    return wrap(be, d, cu_add(&impl(be)->dev[d].ctx, y, x, n));
}

static pl_status cuda_adamw(hw_backend *be, int d, float *p, const float *g, float *m, float *v, int64_t n,
                            const hw_adamw_args *a) {
    SETDEV(be, d);
    return wrap(be, d, cu_adamw(&impl(be)->dev[d].ctx, p, g, m, v, n, a));
}

/* ---- events ---- */

static pl_status grow_events(hw_backend *be, int d, cudaEvent_t **pool, int *have, int n, unsigned flags) {
    if (n <= *have) return PL_OK;
    SETDEV(be, d);
    cudaEvent_t *a = (cudaEvent_t *)realloc(*pool, sizeof(cudaEvent_t) * (size_t)n);
    if (!a) return PL_ERR_NOMEM;
    *pool = a;
    for (int i = *have; i < n; i++) {
        a[i] = NULL;
        DTRY(be, d, cudaEventCreateWithFlags(&a[i], flags));
        *have = i + 1;
    }
    return PL_OK;
}

static pl_status cuda_events_reserve(hw_backend *be, int d, int n) {
    cu_dev *x = &impl(be)->dev[d];
    return grow_events(be, d, &x->ev, &x->n_ev, n, cudaEventDisableTiming);
}

static pl_status cuda_event_record(hw_backend *be, int d, int stream, int ev) {
    cu_dev *x = &impl(be)->dev[d];
    SETDEV(be, d);
    DTRY(be, d, cudaEventRecord(x->ev[ev], x->stream[stream]));
    return PL_OK;
}

static pl_status cuda_event_wait(hw_backend *be, int d, int stream, int ev_dev, int ev) {
    cu_dev *x = &impl(be)->dev[d];
    SETDEV(be, d);
    DTRY(be, d, cudaStreamWaitEvent(x->stream[stream], impl(be)->dev[ev_dev].ev[ev], 0));
    return PL_OK;
}

/* ---- transfers ---- */

static pl_status cuda_xfer_pair(hw_backend *be, int s, int t, const void *sptr, void *dptr, int64_t bytes) {
    cu_impl *c = impl(be);
    cu_dev *xs = &c->dev[s], *xt = &c->dev[t];
    if (xs->gpu == xt->gpu) {
        SETDEV(be, s);
        DTRY(be, s, cudaEventRecord(xs->internal, xs->stream[1]));
        DTRY(be, t, cudaStreamWaitEvent(xt->stream[1], xs->internal, 0));
        DTRY(be, t, cudaMemcpyAsync(dptr, sptr, (size_t)bytes, cudaMemcpyDeviceToDevice, xt->stream[1]));
        DTRY(be, t, cudaEventRecord(xt->internal, xt->stream[1]));
        DTRY(be, s, cudaStreamWaitEvent(xs->stream[1], xt->internal, 0));
        return PL_OK;
    }
    NTRY(be, s, ncclGroupStart());
    ncclResult_t r1 = ncclSend(sptr, (size_t)bytes, ncclChar, xt->rank, c->comms[xs->rank], xs->stream[1]);
    ncclResult_t r2 = ncclRecv(dptr, (size_t)bytes, ncclChar, xs->rank, c->comms[xt->rank], xt->stream[1]);
    NTRY(be, s, ncclGroupEnd());
    NTRY(be, s, r1);
    NTRY(be, t, r2);
    return PL_OK;
}

static pl_status cuda_xfer_send(hw_backend *be, int s, int t, const void *ptr, int64_t bytes) {
    cu_impl *c = impl(be);
    SETDEV(be, s);
    NTRY(be, s, ncclSend(ptr, (size_t)bytes, ncclChar, c->dev[t].rank, c->comms[c->dev[s].rank], c->dev[s].stream[1]));
    return PL_OK;
}

static pl_status cuda_xfer_recv(hw_backend *be, int t, int s, void *ptr, int64_t bytes) {
    cu_impl *c = impl(be);
    SETDEV(be, t);
    NTRY(be, t, ncclRecv(ptr, (size_t)bytes, ncclChar, c->dev[s].rank, c->comms[c->dev[t].rank], c->dev[t].stream[1]));
    return PL_OK;
}

static int cuda_threads_ok(hw_backend *be) { return impl(be)->distinct; }

/* ---- timing ---- */

static pl_status cuda_step_begin(hw_backend *be, int d) {
    cu_dev *x = &impl(be)->dev[d];
    SETDEV(be, d);
    DTRY(be, d, cudaStreamSynchronize(x->stream[0]));
    DTRY(be, d, cudaStreamSynchronize(x->stream[1]));
    DTRY(be, d, cudaEventRecord(x->start, x->stream[0]));
    return PL_OK;
}

static pl_status cuda_step_end(hw_backend *be, int d) {
    cu_dev *x = &impl(be)->dev[d];
    SETDEV(be, d);
    DTRY(be, d, cudaEventRecord(x->end, x->stream[0]));
    return PL_OK;
}

static pl_status cuda_step_wait(hw_backend *be, int d, double *us) {
    cu_dev *x = &impl(be)->dev[d];
    SETDEV(be, d);
    DTRY(be, d, cudaEventSynchronize(x->end));
    float ms = 0.0f;
    DTRY(be, d, cudaEventElapsedTime(&ms, x->start, x->end));
    cu_kprof_collect(x->kprof);
    *us = ms * 1e3;
    return PL_OK;
}

static pl_status cuda_markers_reserve(hw_backend *be, int d, int n) {
    cu_dev *x = &impl(be)->dev[d];
    return grow_events(be, d, &x->mk, &x->n_mk, n, cudaEventDefault);
}

static pl_status cuda_mark(hw_backend *be, int d, int stream, int idx) {
    cu_dev *x = &impl(be)->dev[d];
    SETDEV(be, d);
    DTRY(be, d, cudaEventRecord(x->mk[idx], x->stream[stream]));
    return PL_OK;
}

static pl_status cuda_marker_us(hw_backend *be, int d, int idx, double *us) {
    cu_dev *x = &impl(be)->dev[d];
    SETDEV(be, d);
    float ms = 0.0f;
    DTRY(be, d, cudaEventElapsedTime(&ms, x->start, x->mk[idx]));
    *us = ms * 1e3;
    return PL_OK;
}

/* ---- graphs ---- */

static pl_status cuda_capture_begin(hw_backend *be, int d) {
    cu_dev *x = &impl(be)->dev[d];
    SETDEV(be, d);
    DTRY(be, d, cudaStreamBeginCapture(x->stream[0], cudaStreamCaptureModeThreadLocal));
    return PL_OK;
}

static pl_status cuda_capture_end(hw_backend *be, int d, void **graph) {
    cu_dev *x = &impl(be)->dev[d];
    *graph = NULL;
    SETDEV(be, d);
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(x->stream[0], &g);
    if (e != cudaSuccess || !g) {
        if (g) cudaGraphDestroy(g);
        cudaGetLastError();
        DTRY(be, d, e != cudaSuccess ? e : cudaErrorStreamCaptureInvalidated);
    }
    cudaGraphExec_t exec = NULL;
    e = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    DTRY(be, d, e);
    *graph = (void *)exec;
    return PL_OK;
}

static pl_status cuda_graph_launch(hw_backend *be, int d, void *graph) {
    cu_dev *x = &impl(be)->dev[d];
    SETDEV(be, d);
    DTRY(be, d, cudaGraphLaunch((cudaGraphExec_t)graph, x->stream[0]));
    return PL_OK;
}

static void cuda_graph_destroy(hw_backend *be, int d, void *graph) {
    if (!graph) return;
    cudaSetDevice(impl(be)->dev[d].gpu);
    cudaGraphExecDestroy((cudaGraphExec_t)graph);
}

static const hw_backend_ops CUDA_OPS = {
    "cuda",
    WS_BYTES,
    cuda_destroy,
    cuda_mem_alloc,
    cuda_mem_free,
    cuda_upload,
    cuda_download,
    cuda_set_workspace,
    cuda_zero,
    cuda_zero_comm,
    cuda_forward,
    cuda_backward,
    cuda_add,
    cuda_adamw,
    cuda_events_reserve,
    cuda_event_record,
    cuda_event_wait,
    cuda_xfer_pair,
    cuda_xfer_send,
    cuda_xfer_recv,
    cuda_threads_ok,
    cuda_step_begin,
    cuda_step_end,
    cuda_step_wait,
    cuda_markers_reserve,
    cuda_mark,
    cuda_marker_us,
    cuda_mem_free_bytes,
    cuda_capture_begin,
    cuda_capture_end,
    cuda_graph_launch,
    cuda_graph_destroy,
    NULL, /* host_now_us: wall time */
};

extern "C" int hw_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

#define CREATE_TRY(x)                                                                                   \
    do {                                                                                                \
        cudaError_t e_ = (x);                                                                           \
        if (e_ != cudaSuccess) {                                                                        \
            pl_fail(msg, len, PL_ERR_CUDA, "GPU %d: %s: %s", x_->gpu, #x, cudaGetErrorString(e_));     \
            st = PL_ERR_CUDA;                                                                           \
            goto fail;                                                                                  \
        }                                                                                               \
    } while (0)

extern "C" pl_status hw_backend_cuda_create(const int *gpus, int n, int strict_fp32, hw_backend **out, char *msg,
                                            size_t len) {
    *out = NULL;
    if (n < 1 || n > HW_MAX_DEVICES)
        return pl_fail(msg, len, PL_ERR_INVALID, "the CUDA backend takes 1 to %d devices", HW_MAX_DEVICES);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        cudaGetLastError();
        return pl_fail(msg, len, PL_ERR_NO_DEVICE, "no GPU found (%s); use --cpu N for the CPU reference backend",
                       e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount returned 0");
    }
    int deflt[1] = {0};
    if (!gpus) {
        if (n != 1) return pl_fail(msg, len, PL_ERR_INVALID, "no GPU list given");
        gpus = deflt;
    }
    for (int d = 0; d < n; d++)
        if (gpus[d] < 0 || gpus[d] >= count)
            return pl_fail(msg, len, PL_ERR_NO_DEVICE, "GPU %d does not exist (this machine has %d: 0..%d)", gpus[d],
                           count, count - 1);
    hw_backend *be = (hw_backend *)calloc(1, sizeof *be);
    cu_impl *c = (cu_impl *)calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    }
    be->ops = &CUDA_OPS;
    be->n_devices = n;
    be->copy_bytes = 2; /* the bf16 weight copy */
    be->impl = c;
    c->n = n;
    pl_status st = PL_OK;
    cu_dev *x_ = NULL;
    for (int d = 0; d < n; d++) {
        int r = -1;
        for (int k = 0; k < c->n_gpus; k++)
            if (c->gpus[k] == gpus[d]) r = k;
        if (r < 0) {
            r = c->n_gpus;
            c->gpus[c->n_gpus++] = gpus[d];
        }
        c->dev[d].gpu = gpus[d];
        c->dev[d].rank = r;
    }
    c->distinct = c->n_gpus == n;
    {
        const char *zc = getenv("PLACER_ZERO_COMM");
        c->zero_on_compute = zc && !strcmp(zc, "0");
    }
    for (int d = 0; d < n; d++) {
        cu_dev *x = x_ = &c->dev[d];
        CREATE_TRY(cudaSetDevice(x->gpu));
        x->ctx.err = x->err;
        x->ctx.err_len = sizeof x->err;
        if (getenv("PLACER_KPROF")) {
            x->kprof = (cu_kprof *)calloc(1, sizeof *x->kprof);
            if (x->kprof) x->kprof->on = 1;
            x->ctx.kprof = x->kprof;
        }
        if ((st = cu_side_create(&x->ctx, CUBLAS_DEFAULT_MATH)) != PL_OK) { /* side_stream.cu */
            pl_fail(msg, len, st, "GPU %d: %s", x->gpu, x->err);
            goto fail;
        }
        CREATE_TRY(cudaStreamCreateWithFlags(&x->stream[0], cudaStreamNonBlocking));
        CREATE_TRY(cudaStreamCreateWithFlags(&x->stream[1], cudaStreamNonBlocking));
        CREATE_TRY(cudaEventCreate(&x->start));
        CREATE_TRY(cudaEventCreate(&x->end));
        CREATE_TRY(cudaEventCreateWithFlags(&x->internal, cudaEventDisableTiming));
        cublasStatus_t bs = cublasCreate(&x->blas);
        if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasSetStream(x->blas, x->stream[0]);
        if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasSetMathMode(x->blas, CUBLAS_DEFAULT_MATH);
        if (bs != CUBLAS_STATUS_SUCCESS) {
            st = pl_fail(msg, len, PL_ERR_CUDA, "GPU %d: cuBLAS: %s", x->gpu, cublasGetStatusString(bs));
            goto fail;
        }
        x->ctx.stream = x->stream[0];
        x->ctx.blas = x->blas;
        x->ctx.compute = strict_fp32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
        if ((st = cu_nodes_init(&x->ctx)) != PL_OK) {
            pl_fail(msg, len, st, "GPU %d: %s", x->gpu, x->err);
            goto fail;
        }
        cudaDeviceProp prop;
        CREATE_TRY(cudaGetDeviceProperties(&prop, x->gpu));
        snprintf(be->info[d].name, sizeof be->info[d].name, "%.63s", prop.name);
        be->info[d].mem_bytes = (int64_t)prop.totalGlobalMem;
        be->info[d].physical = x->gpu;
    }
    if (c->n_gpus > 1) {
        setenv("NCCL_NVLS_ENABLE", "0", 1);
        ncclResult_t r = ncclCommInitAll(c->comms, c->n_gpus, c->gpus);
        if (r != ncclSuccess) {
            st = pl_fail(msg, len, PL_ERR_CUDA, "ncclCommInitAll over %d GPUs: %s", c->n_gpus, ncclGetErrorString(r));
            goto fail;
        }
        c->have_nccl = 1;
    }
    *out = be;
    return PL_OK;
fail:
    cuda_destroy(be);
    return st;
}

cu_ctx *cu_backend_ctx(hw_backend *be, int d) {
    cudaSetDevice(impl(be)->dev[d].gpu);
    return &impl(be)->dev[d].ctx;
}

int cu_backend_gpu(hw_backend *be, int d) { return impl(be)->dev[d].gpu; }
