/*
 * probe.h: measurements of single pieces of a training step on an engine's
 * devices, for the hardware profiler (profile/profiler.c): every node's
 * forward and backward, every node's AdamW update, one transfer between two
 * devices, and a description of the machine.
 *
 * The probes run the engine's own backend operations (the same kernels,
 * cuBLAS calls and NCCL transfers a step runs) on buffers of their own, laid
 * out with the engine's layout (layout.h). No plan is needed.
 *
 * How a node is timed (hw_probe_nodes): one repetition runs a whole
 * single-device training pass of one micro-batch of b samples, exactly in a
 * step's order (forward of nodes 0..N-1, then backward of N-1..0), on the
 * device's compute stream, with a timing marker (a device event) between
 * every two node calls. A node's time is the difference of the markers
 * around it: pure device time, with the caches in the state the step
 * leaves them (the node before it has just written its input; parameters
 * come from device memory).
 *
 * Launch gaps. On an asynchronous device the host issues the work while the
 * device runs it. Where the host is slower than the device (small nodes,
 * small micro-batches), the device would wait for launches and that wait
 * would be counted in a node's time. Each repetition therefore starts with
 * a pad: the device zeroes a large buffer (as many times as needed) while
 * the host issues the whole timed pass behind it. A repetition counts only
 * when the host finished issuing before the pad ended on the device (the
 * host's issue time is at most the pad's device time), which proves the
 * device never waited for the host inside the timed part; other
 * repetitions are discarded ("starved") and the pad grows. Within the
 * timed part the device runs back-to-back, as it does inside a real step
 * once the host is ahead.
 *
 * The report is the median over the kept repetitions and the spread is
 * their interquartile range (p75 - p25). The same pad scheme times AdamW
 * (one update per node shard, in node order) and transfers (K transfers
 * back to back between markers on the receiver's comm stream, divided by
 * K).
 *
 * On the CPU backend every operation completes when called, there are no
 * launch gaps, and the pad is a small constant.
 */
#ifndef PLACER_PROFILE_PROBE_H
#define PLACER_PROFILE_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "hw.h"
#include "status.h"

typedef struct {
    int warmup;        /* untimed repetitions first (they also size the pad) */
    int reps;          /* timed repetitions kept, >= 1 */
    int max_discard;   /* starved repetitions tolerated before giving up waiting
                          for clean ones (then the next ones are kept, flagged);
                          they are kept at once when the pad reached its cap of 64
                          zeroings (the host is then blocked, not slow) */
    int64_t pad_bytes; /* buffer zeroed ahead of the timed work; 0: 1 GiB on an
                          asynchronous device, 64 KiB on the CPU backend */
    uint64_t seed;     /* tokens, targets and (when no model is given) parameters */
} hw_probe_opts;

/* warmup 3, reps 60, max_discard 20, pad_bytes 0, seed 1. */
hw_probe_opts hw_probe_opts_default(void);

typedef struct {
    int kept;          /* repetitions the medians are over */
    int starved;       /* repetitions discarded: the device may have waited for the host */
    int unclean;       /* 1 when clean repetitions ran out and starved ones were kept */
    double total_us;   /* median device time of the whole timed part */
    double fastest_us; /* the fastest repetition's device time of the whole
                          timed part (the one least disturbed by the host) */
    double host_us;    /* median host time to issue the timed part */
    double pad_us;     /* median device time of the pad */
} hw_probe_stats;

/* Time every node's forward and backward on logical device dev at
 * micro-batch size b (1 <= b; any size, not only divisors of the batch).
 * model is a model view (hw_model_param_offsets floats) to start from, or
 * NULL to draw the parameters from o->seed. Outputs, g->n_nodes entries
 * each (the caller owns them): fwd_us, bwd_us medians and fwd_spread,
 * bwd_spread interquartile ranges, in microseconds. The loss has no
 * backward call (its forward writes the logits gradient), so its bwd_us and
 * bwd_spread are 0. stats may be NULL. Errors: PL_ERR_INVALID (bad device,
 * size or options), PL_ERR_DEVICE_OOM (the buffers do not fit the device),
 * PL_ERR_UNSUPPORTED (a graph the engine cannot run), PL_ERR_CUDA,
 * PL_ERR_NOMEM; every buffer taken is released on all paths. */
pl_status hw_probe_nodes(hw_engine *e, const graph *g, int dev, int b, const float *model,
                         const hw_probe_opts *o, double *fwd_us, double *fwd_spread, double *bwd_us,
                         double *bwd_spread, hw_probe_stats *stats, char *msg, size_t len);

/* hw_probe_nodes, and besides (b_us and w_us non-NULL, g->n_nodes entries
 * each) the backward of each node that splits (hw_bwd_splits: attention,
 * MLP, head) timed as its two parts, B (the input gradient) then W (the
 * weight gradient), through the same backend calls the split orders issue
 * (program.c): b_us, w_us medians; NAN for nodes whose backward stays one
 * call, and for every node where the engine does not run a split backward
 * in its precision (bf16; tf32 on CUDA: engine.c's rule for ZB-H1/ZB-H2),
 * so such a profile records no split. The whole backward (bwd_us) is timed
 * as before, in its own sweep; the parts follow it in the same repetition. */
pl_status hw_probe_nodes_split(hw_engine *e, const graph *g, int dev, int b, const float *model,
                               const hw_probe_opts *o, double *fwd_us, double *fwd_spread, double *bwd_us,
                               double *bwd_spread, double *b_us, double *w_us, hw_probe_stats *stats, char *msg,
                               size_t len);

/* Time every node's AdamW update (one call over the node's parameter shard,
 * as the engine's flat update covers it) on device dev. us and spread get
 * g->n_nodes entries; nodes without parameters get 0. Errors as above. */
pl_status hw_probe_adamw(hw_engine *e, const graph *g, int dev, const hw_probe_opts *o, double *us,
                         double *spread, hw_probe_stats *stats, char *msg, size_t len);

/* Time a transfer of bytes[i] bytes from device src to device dst
 * (src != dst) through the backend's transfer (the engine's path: NCCL
 * send/recv between GPUs, a device copy within one GPU, memcpy on the CPU
 * backend), for each of the n sizes (each >= 1). us[i] is the median time
 * of one transfer and spread[i] the interquartile range. stats (may be
 * NULL) describes the largest size. Errors as above. */
pl_status hw_probe_transfer(hw_engine *e, int src, int dst, int n, const int64_t *bytes,
                            const hw_probe_opts *o, double *us, double *spread, hw_probe_stats *stats,
                            char *msg, size_t len);

/* How two logical devices are connected. */
typedef enum {
    HW_LINK_UNKNOWN = 0,
    HW_LINK_HOST,     /* CPU backend: memcpy in host memory */
    HW_LINK_SAME_GPU, /* two logical devices on one GPU: device copy */
    HW_LINK_NVLINK,   /* NVLink between the GPUs (as NVML reports) */
    HW_LINK_PCIE_P2P, /* peer access without NVLink (PCIe, or NVML unavailable) */
    HW_LINK_PCIE      /* no peer access: staged through the host */
} hw_link_kind;

/* "host", "same-gpu", "nvlink", "pcie-p2p", "pcie" or "unknown". */
const char *hw_link_kind_name(hw_link_kind k);

typedef struct {
    char backend[16];   /* "cuda" or "cpu" */
    char host[64];      /* host name, "" when unknown */
    char driver[32];    /* driver version (NVML, e.g. "580.159.04"; else the
                           CUDA driver API version), "" on the CPU backend */
    char cuda[32];      /* CUDA runtime version, e.g. "13.0"; "" on the CPU backend */
    int nvml;           /* 1 when NVML answered (link kinds are then from it) */
    int n_devices;      /* logical devices */
    struct {
        char name[64];      /* "NVIDIA H200", "cpu" */
        int64_t mem_bytes;  /* device memory */
        int sm_count;       /* multiprocessors; 0 on the CPU backend */
        int gpu;            /* GPU ordinal (CPU backend: device index) */
        int cc_major, cc_minor; /* compute capability; 0 on the CPU backend */
        char pci_bus[32];   /* PCI bus id, "" on the CPU backend */
    } dev[HW_MAX_DEVICES];
} hw_machine_info;

/* Describe the engine's machine. Never fails for lack of NVML (it is
 * loaded at run time when present; without it link kinds come from CUDA's
 * peer attributes). Errors: PL_ERR_CUDA when a CUDA query fails. */
pl_status hw_probe_machine(hw_engine *e, hw_machine_info *m, char *msg, size_t len);

/* The link from logical device a to b (a != b): its kind, and for NVLink
 * the number of active links joining the two GPUs (*nvlinks, may be NULL;
 * 0 otherwise). *p2p_rank (may be NULL) gets CUDA's relative peer
 * performance rank (0 best) or -1. Errors: PL_ERR_INVALID, PL_ERR_CUDA. */
pl_status hw_probe_link(hw_engine *e, int a, int b, hw_link_kind *kind, int *nvlinks, int *p2p_rank, char *msg,
                        size_t len);

#endif
