/*
 * backend.h: the device operations the executor needs, as a table of
 * function pointers, so that one executor drives both the CPU reference
 * backend (virtual devices in host memory, synchronous) and the CUDA backend
 * (one compute stream and one comm stream per logical device, cuBLAS, NCCL).
 *
 * Devices are logical: 0..n_devices-1. Every operation names its device. A
 * backend may be called from several host threads at once, but never for the
 * same device from two threads at once.
 *
 * Streams: HW_STREAM_COMPUTE runs node kernels, AdamW, additions and
 * zeroing; HW_STREAM_COMM runs transfers. Work on one stream runs in issue
 * order; the executor orders streams against each other with events
 * (event_record / event_wait). The CPU backend runs everything at once, in
 * issue order, so its events are no-ops.
 *
 * Every function returns PL_OK or a status (PL_ERR_CUDA with the failing
 * call, file and line in the backend's last message; see last_error).
 */
#ifndef PLACER_HW_BACKEND_H
#define PLACER_HW_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "node_call.h"
#include "status.h"

#define HW_MAX_DEVICES 64
#define HW_STREAM_COMPUTE 0
#define HW_STREAM_COMM 1

typedef struct {
    char name[64];     /* "NVIDIA H200" or "cpu" */
    int64_t mem_bytes; /* card memory; the CPU backend's nominal HW_CPU_DEVICE_BYTES */
    int physical;      /* GPU ordinal; the CPU backend's device index */
} hw_device_info;

/* Nominal memory of one CPU virtual device, for caps given as a fraction. */
#define HW_CPU_DEVICE_BYTES (8LL << 30)

typedef struct hw_backend hw_backend;

typedef struct {
    const char *name;        /* "cpu" or "cuda" */
    int64_t workspace_bytes; /* per-device workspace the executor carves from the arena */

    void (*destroy)(hw_backend *be);
    /* the arena's single allocation and its release; upload/download are
     * synchronous with respect to the host and to the device's streams */
    pl_status (*mem_alloc)(hw_backend *be, int dev, int64_t bytes, void **ptr);
    void (*mem_free)(hw_backend *be, int dev, void *ptr);
    pl_status (*upload)(hw_backend *be, int dev, void *dst, const void *src, int64_t bytes);
    pl_status (*download)(hw_backend *be, int dev, void *dst, const void *src, int64_t bytes);
    /* bind the workspace (cuBLAS) for the next calls on dev */
    pl_status (*set_workspace)(hw_backend *be, int dev, void *ptr, int64_t bytes);

    /* compute-stream work */
    pl_status (*zero)(hw_backend *be, int dev, void *ptr, int64_t bytes);
    /* the same on the comm stream (the step's zeroing of the parameter
     * gradients runs there, beside the forward: program.c's setup_device) */
    pl_status (*zero_comm)(hw_backend *be, int dev, void *ptr, int64_t bytes);
    pl_status (*node_forward)(hw_backend *be, int dev, const hw_node_call *c);
    pl_status (*node_backward)(hw_backend *be, int dev, const hw_node_call *c);
    pl_status (*add)(hw_backend *be, int dev, float *y, const float *x, int64_t n);
    pl_status (*adamw)(hw_backend *be, int dev, float *p, const float *g, float *m, float *v, int64_t n,
                       const hw_adamw_args *a);

    /* events: each device has a pool of events 0..n-1 (reserve grows it) */
    pl_status (*events_reserve)(hw_backend *be, int dev, int n);
    pl_status (*event_record)(hw_backend *be, int dev, int stream, int ev);
    /* stream `stream` of dev waits for event ev of device ev_dev */
    pl_status (*event_wait)(hw_backend *be, int dev, int stream, int ev_dev, int ev);

    /* transfers: pair issues both halves from one thread; send and recv are
     * the halves for one thread per device (they rendezvous) */
    pl_status (*xfer_pair)(hw_backend *be, int src, int dst, const void *sptr, void *dptr, int64_t bytes);
    pl_status (*xfer_send)(hw_backend *be, int src, int dst, const void *ptr, int64_t bytes);
    pl_status (*xfer_recv)(hw_backend *be, int dst, int src, void *ptr, int64_t bytes);
    /* whether two devices may run their halves from separate threads */
    int (*threads_ok)(hw_backend *be);

    /* step timing: begin waits for the device to be idle and marks the start
     * on its compute stream; end marks the end; wait blocks until the end
     * mark has passed and returns the device's elapsed microseconds */
    pl_status (*step_begin)(hw_backend *be, int dev);
    pl_status (*step_end)(hw_backend *be, int dev);
    pl_status (*step_wait)(hw_backend *be, int dev, double *elapsed_us);

    /* trace markers: a pool per device; mark records marker idx on a stream;
     * marker_us gives its time since the device's step_begin */
    pl_status (*markers_reserve)(hw_backend *be, int dev, int n);
    pl_status (*mark)(hw_backend *be, int dev, int stream, int idx);
    pl_status (*marker_us)(hw_backend *be, int dev, int idx, double *us);

    /* free device memory now, in bytes (CUDA: cudaMemGetInfo; CPU: -1) */
    pl_status (*mem_free_bytes)(hw_backend *be, int dev, int64_t *free_bytes);

    /* graphs (NULL where unsupported): the work issued for dev between
     * capture_begin and capture_end (both streams) is recorded, not run, into
     * an executable graph; graph_launch runs it on the compute stream. After
     * a failed capture_end the device is out of capture mode. */
    pl_status (*capture_begin)(hw_backend *be, int dev);
    pl_status (*capture_end)(hw_backend *be, int dev, void **graph);
    pl_status (*graph_launch)(hw_backend *be, int dev, void *graph);
    void (*graph_destroy)(hw_backend *be, int dev, void *graph);

    /* the host clock the probes time the issuing of work with, in
     * microseconds; NULL: pl_now_us (wall time). A test backend that
     * simulates a device on the host's clock sets one that stops while the
     * process is descheduled (thread CPU time), so that a loaded machine
     * cannot make its simulated device wait for launches. */
    double (*host_now_us)(void);
} hw_backend_ops;

struct hw_backend {
    const hw_backend_ops *ops;
    int n_devices;                        /* logical devices */
    hw_device_info info[HW_MAX_DEVICES];  /* per logical device */
    char err[256];                        /* detail of the last failure */
    int copy_bytes;                       /* bytes of one element of the bf16 weight copy:
                                             2 (CUDA), 4 (CPU: rounded floats) */
    void *impl;                           /* backend state */
};

/* The CPU reference backend with n virtual devices (1..HW_MAX_DEVICES). */
pl_status hw_backend_cpu_create(int n, hw_backend **out, char *msg, size_t len);

/* The CUDA backend over logical devices mapped to GPU ordinals gpus[0..n)
 * (repeats allowed). strict_fp32 turns TF32 tensor-core math off.
 * PL_ERR_UNSUPPORTED when built without CUDA, PL_ERR_NO_DEVICE when there is
 * no GPU or an ordinal does not exist, PL_ERR_CUDA on other failures. */
pl_status hw_backend_cuda_create(const int *gpus, int n, int strict_fp32, hw_backend **out, char *msg,
                                 size_t len);

/* Number of GPUs visible (0 when built without CUDA or none is present). */
int hw_cuda_device_count(void);

/* Upload the bf16 weight copy of n master weights src to device memory
 * dst: bf16 bits (copy_bytes 2) or floats rounded to bf16 (copy_bytes 4).
 * PL_ERR_NOMEM or the upload's status, with be->err set. (engine.c) */
pl_status hw_upload_copy16(hw_backend *be, int d, void *dst, const float *src, int64_t n);

/* Destroy a backend. Accepts NULL. */
static inline void hw_backend_destroy(hw_backend *be) {
    if (be) be->ops->destroy(be);
}

#endif
