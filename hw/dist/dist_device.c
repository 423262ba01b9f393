/* dist_device.c: collectives on device buffers (dist_device.h): the
 * transport choice, the host-staging transport, the device scratch; the
 * NCCL transport is hw/dist/dist_nccl.cu. */
#include "dist_device.h"

#include <stdlib.h>
#include <string.h>

struct dist_device {
    dist_group *g;      /* borrowed */
    hw_backend *be;     /* borrowed */
    int dev;            /* logical device of be */
    void *nccl;         /* the communicator (hw_nccl_create), or NULL: host staging */
    float *host;        /* staging buffer */
    int64_t host_floats;
    void *scratch;      /* dist_device_scratch's device memory (be->ops->mem_alloc) */
    int64_t scratch_bytes;
};

int dist_device_wanted(const hw_backend *be) {
    const char *tdc = getenv("PLACER_TEST_DEVICE_COLLECTIVES");
    return strcmp(be->ops->name, "cuda") == 0 || (tdc && !strcmp(tdc, "1"));
}

pl_status dist_device_create(dist_group *g, hw_backend *be, int dev, dist_device **out, char *msg, size_t len) {
    *out = NULL;
    if (!g || !be || dev < 0 || dev >= be->n_devices)
        return pl_fail(msg, len, PL_ERR_INVALID, "device collectives need a group and a device of the backend");
    dist_device *x = calloc(1, sizeof *x);
    if (!x) return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    x->g = g;
    x->be = be;
    x->dev = dev;
#if PLACER_HAVE_CUDA
    int use = 0;
    pl_status st = hw_nccl_wanted(g, be, dev, &use, msg, len);
    if (st == PL_OK && use) st = hw_nccl_create(g, be, dev, dist_timeout_s(g), &x->nccl, msg, len);
    if (st != PL_OK) {
        free(x);
        return st;
    }
#endif
    *out = x;
    return PL_OK;
}

void dist_device_destroy(dist_device *x) {
    if (!x) return;
#if PLACER_HAVE_CUDA
    hw_nccl_destroy(x->nccl);
#endif
    if (x->scratch) x->be->ops->mem_free(x->be, x->dev, x->scratch);
    free(x->host);
    free(x);
}

const char *dist_device_transport(const dist_device *x) { return x->nccl ? "nccl" : "host staging"; }
int dist_device_rank(const dist_device *x) { return dist_rank(x->g); }
int dist_device_size(const dist_device *x) { return dist_size(x->g); }

static pl_status host_buf(dist_device *x, int64_t n, char *msg, size_t len) {
    if (n <= x->host_floats) return PL_OK;
    float *b = realloc(x->host, sizeof(float) * (size_t)n);
    if (!b) return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory for %lld staged floats", (long long)n);
    x->host = b;
    x->host_floats = n;
    return PL_OK;
}

static pl_status be_fail(dist_device *x, pl_status st, const char *what, char *msg, size_t len) {
    return pl_fail(msg, len, st, "%s for a collective: %s", what, x->be->err);
}

pl_status dist_device_allreduce_f32(dist_device *x, float *buf, int64_t n, dist_op op, int mean, char *msg,
                                    size_t len) {
    if (n <= 0) return PL_OK;
#if PLACER_HAVE_CUDA
    if (x->nccl) return hw_nccl_collective(x->nccl, 0, buf, buf, n, op, mean, msg, len);
#endif
    hw_backend *be = x->be;
    pl_status st = host_buf(x, n, msg, len);
    if (st != PL_OK) return st;
    if ((st = be->ops->download(be, x->dev, x->host, buf, n * 4)) != PL_OK) return be_fail(x, st, "download", msg, len);
    if ((st = dist_allreduce_f32(x->g, x->host, n, op, msg, len)) != PL_OK) return st;
    if (mean) {
        const float ranks = (float)dist_size(x->g);
        for (int64_t i = 0; i < n; i++) x->host[i] /= ranks;
    }
    if ((st = be->ops->upload(be, x->dev, buf, x->host, n * 4)) != PL_OK) return be_fail(x, st, "upload", msg, len);
    return PL_OK;
}

pl_status dist_device_reduce_scatter_f32(dist_device *x, const float *in, float *out, int64_t n, int mean,
                                         char *msg, size_t len) {
    if (n <= 0) return PL_OK;
#if PLACER_HAVE_CUDA
    if (x->nccl) return hw_nccl_collective(x->nccl, 1, in, out, n, DIST_SUM, mean, msg, len);
#endif
    hw_backend *be = x->be;
    const int size = dist_size(x->g), rank = dist_rank(x->g);
    pl_status st = host_buf(x, n * size, msg, len);
    if (st != PL_OK) return st;
    float *mine = x->host + (int64_t)rank * n;
    if ((st = be->ops->download(be, x->dev, x->host, in, n * size * 4)) != PL_OK)
        return be_fail(x, st, "download", msg, len);
    if ((st = dist_reduce_scatter_f32(x->g, x->host, mine, n, msg, len)) != PL_OK) return st;
    if (mean) {
        const float ranks = (float)size;
        for (int64_t i = 0; i < n; i++) mine[i] /= ranks;
    }
    if ((st = be->ops->upload(be, x->dev, out, mine, n * 4)) != PL_OK) return be_fail(x, st, "upload", msg, len);
    return PL_OK;
}

pl_status dist_device_allgather_f32(dist_device *x, const float *in, float *out, int64_t n, char *msg, size_t len) {
    if (n <= 0) return PL_OK;
#if PLACER_HAVE_CUDA
    if (x->nccl) return hw_nccl_collective(x->nccl, 2, in, out, n, DIST_SUM, 0, msg, len);
#endif
    hw_backend *be = x->be;
    const int size = dist_size(x->g), rank = dist_rank(x->g);
    pl_status st = host_buf(x, n * size, msg, len);
    if (st != PL_OK) return st;
    float *mine = x->host + (int64_t)rank * n;
    if ((st = be->ops->download(be, x->dev, mine, in, n * 4)) != PL_OK) return be_fail(x, st, "download", msg, len);
    if ((st = dist_allgather_f32(x->g, mine, x->host, n, msg, len)) != PL_OK) return st;
    if ((st = be->ops->upload(be, x->dev, out, x->host, n * size * 4)) != PL_OK)
        return be_fail(x, st, "upload", msg, len);
    return PL_OK;
}

pl_status dist_device_allreduce_start_f32(dist_device *x, float *buf, int64_t n, int mean, int *started, char *msg,
                                          size_t len) {
    *started = 0;
#if PLACER_HAVE_CUDA
    if (x->nccl) {
        *started = 1;
        return n > 0 ? hw_nccl_start(x->nccl, buf, n, mean, msg, len) : PL_OK;
    }
#else
    (void)buf, (void)n, (void)mean, (void)msg, (void)len;
#endif
    return PL_OK;
}

pl_status dist_device_finish(dist_device *x, char *msg, size_t len) {
#if PLACER_HAVE_CUDA
    if (x->nccl) return hw_nccl_finish(x->nccl, msg, len);
#else
    (void)x, (void)msg, (void)len;
#endif
    return PL_OK;
}

pl_status dist_device_scratch(dist_device *x, int64_t bytes, void **ptr, char *msg, size_t len) {
    *ptr = NULL;
    if (bytes > x->scratch_bytes) {
        if (x->scratch) x->be->ops->mem_free(x->be, x->dev, x->scratch);
        x->scratch = NULL;
        x->scratch_bytes = 0;
        pl_status st = x->be->ops->mem_alloc(x->be, x->dev, bytes, &x->scratch);
        if (st != PL_OK) {
            x->scratch = NULL;
            return pl_fail(msg, len, st, "device %d: the collectives' scratch of %lld bytes: %s", x->dev,
                           (long long)bytes, x->be->err);
        }
        x->scratch_bytes = bytes;
    }
    *ptr = x->scratch;
    return PL_OK;
}
