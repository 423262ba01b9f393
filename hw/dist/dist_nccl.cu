/*
 * dist_nccl.cu: the NCCL transport of the device collectives
 * (dist_device.h): the distinct-GPU check, a communicator per group and
 * device from rank 0's ncclUniqueId broadcast over the group, and the
 * collectives on the device's compute stream with a bounded wait.
 *
 * Bounded wait: communicators are non-blocking (config.blocking = 0), so
 * neither ncclCommInitRankConfig nor a collective's enqueue can block the
 * host; the host then polls ncclCommGetAsyncError and cudaStreamQuery
 * every 50 us. A peer that died or hangs leaves the collective unfinished:
 * after the group's timeout the communicator is aborted (ncclCommAbort
 * also releases the kernels waiting in it) and the call fails with one
 * line; the communicator is broken from then on.
 *
 * Started collectives (hw_nccl_start / hw_nccl_finish: the overlapped dp
 * buckets, dist_dp.h): each all-reduce goes on a comm stream of the
 * communicator's own, after an event recorded on the compute stream (the
 * bucket's gradients are final there); finish records the comm stream's
 * last event, makes the compute stream wait for it (AdamW follows) and
 * does the bounded wait above on the comm stream, so a dead peer is found
 * at the join instead of at each bucket.
 *
 * Not run this session (the machine at hand has one GPU, and NCCL refuses
 * two ranks on one GPU): compile-only until a 2-GPU machine runs it.
 */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_cuda.h"
extern "C" {
#include "dist_device.h"
}

typedef struct {
    ncclComm_t comm;
    cudaStream_t stream; /* the logical device's compute stream (borrowed) */
    cudaStream_t cstream; /* started collectives' stream (hw_nccl_start), made at the first, or NULL */
    cudaEvent_t ev_ready, ev_done; /* compute -> cstream before each start; cstream's last, for finish */
    int pending;          /* collectives started since the last finish */
    int gpu;
    double timeout_s;
    int broken;          /* aborted: every later call fails */
    int rank, size;
} nccl_dev;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void pause_us(long us) {
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

extern "C" pl_status hw_nccl_wanted(dist_group *g, hw_backend *be, int dev, int *use, char *msg, size_t len) {
    *use = 0;
    /* what every rank offers: [0] 1 when it can run NCCL, [1..16] its GPU's UUID */
    unsigned char me[17] = {0};
    const char *env = getenv("PLACER_DIST_DEVICE");
    if (strcmp(be->ops->name, "cuda") == 0 && !(env && strcmp(env, "staging") == 0)) {
        cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, cu_backend_gpu(be, dev)) == cudaSuccess) {
            me[0] = 1;
            memcpy(me + 1, &prop.uuid, 16);
        } else {
            cudaGetLastError();
        }
    }
    const int size = dist_size(g), rank = dist_rank(g);
    unsigned char *all = (unsigned char *)calloc((size_t)size, 17);
    if (!all) return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    pl_status st = PL_OK;
    for (int r = 0; r < size && st == PL_OK; r++) {
        if (r == rank) memcpy(all + 17 * r, me, 17);
        st = dist_broadcast(g, all + 17 * r, 17, r, msg, len);
    }
    if (st == PL_OK) {
        int ok = 1;
        for (int r = 0; r < size; r++) {
            if (!all[17 * r]) ok = 0;
            for (int q = 0; q < r; q++)
                if (memcmp(all + 17 * r + 1, all + 17 * q + 1, 16) == 0) ok = 0; /* two ranks share a GPU */
        }
        *use = ok && size > 1;
    }
    free(all);
    return st;
}

/* Poll until the communicator's pending work is done (stream NULL: only
 * its async state, for init). On timeout or error: abort. */
static pl_status wait_done(nccl_dev *x, cudaStream_t stream, const char *what, char *msg, size_t len) {
    const double t0 = now_s();
    for (;;) {
        ncclResult_t as = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(x->comm, &as);
        if (r != ncclSuccess || (as != ncclSuccess && as != ncclInProgress)) {
            ncclCommAbort(x->comm);
            x->broken = 1;
            return pl_fail(msg, len, PL_ERR_INTERRUPTED, "rank %d: NCCL error during %s: %s (communicator aborted)",
                           x->rank, what, ncclGetErrorString(r != ncclSuccess ? r : as));
        }
        if (as == ncclSuccess) {
            if (!stream) return PL_OK;
            cudaError_t e = cudaStreamQuery(stream);
            if (e == cudaSuccess) return PL_OK;
            if (e != cudaErrorNotReady) {
                ncclCommAbort(x->comm);
                x->broken = 1;
                return pl_fail(msg, len, PL_ERR_CUDA, "rank %d: %s: %s", x->rank, what, cudaGetErrorString(e));
            }
        }
        if (now_s() - t0 > x->timeout_s) {
            ncclCommAbort(x->comm);
            x->broken = 1;
            return pl_fail(msg, len, PL_ERR_INTERRUPTED,
                           "rank %d: no progress for %.1f s during NCCL %s (a peer died or hangs; "
                           "communicator aborted)",
                           x->rank, x->timeout_s, what);
        }
        pause_us(50);
    }
}

extern "C" pl_status hw_nccl_create(dist_group *g, hw_backend *be, int dev, double timeout_s, void **comm, char *msg,
                                    size_t len) {
    *comm = NULL;
    nccl_dev *x = (nccl_dev *)calloc(1, sizeof *x);
    if (!x) return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    x->gpu = cu_backend_gpu(be, dev);
    x->stream = cu_backend_ctx(be, dev)->stream;
    x->timeout_s = timeout_s;
    x->rank = dist_rank(g);
    x->size = dist_size(g);
    setenv("NCCL_NVLS_ENABLE", "0", 1); /* NVLink multicast stays off on shared machines */
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    pl_status st = PL_OK;
    if (x->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            st = pl_fail(msg, len, PL_ERR_CUDA, "ncclGetUniqueId: %s", ncclGetErrorString(r));
    }
    /* a failing rank 0 still broadcasts (zeros), so no rank waits for it; it then fails alone */
    pl_status bst = dist_broadcast(g, &id, (int64_t)sizeof id, 0, msg, len);
    if (st == PL_OK) st = bst;
    if (st == PL_OK && cudaSetDevice(x->gpu) != cudaSuccess) {
        cudaGetLastError();
        st = pl_fail(msg, len, PL_ERR_CUDA, "cudaSetDevice(%d) for NCCL", x->gpu);
    }
    if (st == PL_OK) {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclResult_t r = ncclCommInitRankConfig(&x->comm, x->size, id, x->rank, &config);
        if (r != ncclSuccess && r != ncclInProgress) {
            st = pl_fail(msg, len, PL_ERR_CUDA, "ncclCommInitRankConfig (rank %d of %d): %s", x->rank, x->size,
                         ncclGetErrorString(r));
            if (x->comm) ncclCommAbort(x->comm);
            x->comm = NULL;
        } else {
            st = wait_done(x, NULL, "communicator init", msg, len);
            if (st != PL_OK) x->comm = NULL; /* aborted */
        }
    }
    if (st != PL_OK) {
        free(x);
        return st;
    }
    *comm = x;
    return PL_OK;
}

extern "C" void hw_nccl_destroy(void *comm) {
    nccl_dev *x = (nccl_dev *)comm;
    if (!x) return;
    if (x->cstream) {
        cudaSetDevice(x->gpu);
        if (!x->broken) cudaStreamSynchronize(x->cstream); /* finished (hw_nccl_finish) unless a step failed */
        cudaStreamDestroy(x->cstream);
        cudaEventDestroy(x->ev_ready);
        cudaEventDestroy(x->ev_done);
        cudaGetLastError();
    }
    if (x->comm && !x->broken) {
        cudaSetDevice(x->gpu);
        /* non-blocking: finalize may still be in progress; wait (bounded; aborts on timeout) */
        char msg[256];
        ncclResult_t r = ncclCommFinalize(x->comm);
        if (r != ncclSuccess && r != ncclInProgress) {
            ncclCommAbort(x->comm);
        } else if (wait_done(x, NULL, "communicator finalize", msg, sizeof msg) == PL_OK) {
            ncclCommDestroy(x->comm);
        } /* else wait_done aborted it */
    }
    free(x);
}

extern "C" pl_status hw_nccl_collective(void *comm, int kind, const float *in, float *out, int64_t n, dist_op op,
                                        int mean, char *msg, size_t len) {
    nccl_dev *x = (nccl_dev *)comm;
    static const char *names[] = {"all-reduce", "reduce-scatter", "all-gather"};
    if (x->broken)
        return pl_fail(msg, len, PL_ERR_INTERRUPTED, "rank %d: the NCCL communicator was aborted earlier", x->rank);
    if (cudaSetDevice(x->gpu) != cudaSuccess) {
        cudaGetLastError();
        return pl_fail(msg, len, PL_ERR_CUDA, "cudaSetDevice(%d) for NCCL", x->gpu);
    }
    ncclRedOp_t rop = op == DIST_MAX ? ncclMax : (mean ? ncclAvg : ncclSum);
    ncclResult_t r;
    switch (kind) {
    case 0: r = ncclAllReduce(in, out, (size_t)n, ncclFloat, rop, x->comm, x->stream); break;
    case 1: r = ncclReduceScatter(in, out, (size_t)n, ncclFloat, rop, x->comm, x->stream); break;
    default: r = ncclAllGather(in, out, (size_t)n, ncclFloat, x->comm, x->stream); break;
    }
    if (r != ncclSuccess && r != ncclInProgress) {
        ncclCommAbort(x->comm);
        x->broken = 1;
        return pl_fail(msg, len, PL_ERR_CUDA, "rank %d: NCCL %s of %lld floats: %s", x->rank, names[kind],
                       (long long)n, ncclGetErrorString(r));
    }
    return wait_done(x, x->stream, names[kind], msg, len);
}

/* Poll (bounded) until an enqueue of a non-blocking communicator is no
 * longer in progress: the call is then queued on its stream. */
static pl_status enqueued(nccl_dev *x, const char *what, char *msg, size_t len) {
    const double t0 = now_s();
    for (;;) {
        ncclResult_t as = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(x->comm, &as);
        if (r != ncclSuccess || (as != ncclSuccess && as != ncclInProgress)) {
            ncclCommAbort(x->comm);
            x->broken = 1;
            return pl_fail(msg, len, PL_ERR_INTERRUPTED, "rank %d: NCCL error during %s: %s (communicator aborted)",
                           x->rank, what, ncclGetErrorString(r != ncclSuccess ? r : as));
        }
        if (as == ncclSuccess) return PL_OK;
        if (now_s() - t0 > x->timeout_s) {
            ncclCommAbort(x->comm);
            x->broken = 1;
            return pl_fail(msg, len, PL_ERR_INTERRUPTED, "rank %d: NCCL %s not enqueued after %.1f s (communicator aborted)",
                           x->rank, what, x->timeout_s);
        }
        pause_us(50);
    }
}

extern "C" pl_status hw_nccl_start(void *comm, float *buf, int64_t n, int mean, char *msg, size_t len) {
    nccl_dev *x = (nccl_dev *)comm;
    if (x->broken)
        return pl_fail(msg, len, PL_ERR_INTERRUPTED, "rank %d: the NCCL communicator was aborted earlier", x->rank);
    if (cudaSetDevice(x->gpu) != cudaSuccess) {
        cudaGetLastError();
        return pl_fail(msg, len, PL_ERR_CUDA, "cudaSetDevice(%d) for NCCL", x->gpu);
    }
    cudaError_t e = cudaSuccess;
    if (!x->cstream) {
        e = cudaStreamCreateWithFlags(&x->cstream, cudaStreamNonBlocking);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&x->ev_ready, cudaEventDisableTiming);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&x->ev_done, cudaEventDisableTiming);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return pl_fail(msg, len, PL_ERR_CUDA, "rank %d: the NCCL stream: %s", x->rank, cudaGetErrorString(e));
        }
    }
    /* the bucket's gradients are final on the compute stream: the comm stream waits for them */
    e = cudaEventRecord(x->ev_ready, x->stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(x->cstream, x->ev_ready, 0);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return pl_fail(msg, len, PL_ERR_CUDA, "rank %d: ordering a bucket: %s", x->rank, cudaGetErrorString(e));
    }
    ncclResult_t r = ncclAllReduce(buf, buf, (size_t)n, ncclFloat, mean ? ncclAvg : ncclSum, x->comm, x->cstream);
    if (r != ncclSuccess && r != ncclInProgress) {
        ncclCommAbort(x->comm);
        x->broken = 1;
        return pl_fail(msg, len, PL_ERR_CUDA, "rank %d: NCCL all-reduce of %lld floats: %s", x->rank, (long long)n,
                       ncclGetErrorString(r));
    }
    x->pending++;
    return r == ncclInProgress ? enqueued(x, "all-reduce", msg, len) : PL_OK;
}

extern "C" pl_status hw_nccl_finish(void *comm, char *msg, size_t len) {
    nccl_dev *x = (nccl_dev *)comm;
    if (!x->pending) return PL_OK;
    x->pending = 0;
    if (x->broken)
        return pl_fail(msg, len, PL_ERR_INTERRUPTED, "rank %d: the NCCL communicator was aborted earlier", x->rank);
    if (cudaSetDevice(x->gpu) != cudaSuccess) {
        cudaGetLastError();
        return pl_fail(msg, len, PL_ERR_CUDA, "cudaSetDevice(%d) for NCCL", x->gpu);
    }
    /* the compute stream (AdamW next) waits for the comm stream's last all-reduce */
    cudaError_t e = cudaEventRecord(x->ev_done, x->cstream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(x->stream, x->ev_done, 0);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return pl_fail(msg, len, PL_ERR_CUDA, "rank %d: joining the buckets: %s", x->rank, cudaGetErrorString(e));
    }
    /* and the bounded wait: the comm stream's work done, or the group's timeout and an abort */
    return wait_done(x, x->cstream, "bucketed all-reduce", msg, len);
}
