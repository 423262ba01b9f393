/*
 * hw.h: the real engine. It runs training steps of the GPT graph under any
 * placement over N logical devices and any micro-batch schedule, with a
 * per-device memory cap, and times them.
 *
 *   hw_engine  the devices: a backend (CUDA GPUs, or CPU virtual devices
 *              for CI) with its streams, library handles and NCCL
 *              communicator. Create once, use for many placements.
 *   hw_program    one placement + schedule + caps compiled for an engine: the
 *              parameters live on their devices (flat buffers per device),
 *              every buffer of a step has its offset in the device's arena,
 *              and each device has its list of instructions. Creating a program
 *              is where an OOM is found, before any device memory is taken.
 *   step       zero gradients (on each device's comm stream beside the
 *              forward, except in bf16: hw/exec/program.c's setup_device); forward
 *              and backward of every micro-batch in the schedule's order,
 *              with activations sent across cut edges and gradients sent
 *              back; AdamW on every device; one host synchronisation at the
 *              end.
 *
 * Timing protocol (hw_program_time): `warmup` untimed steps, then `steps`
 * timed steps. Each timed step starts from idle devices (host sync), is
 * bracketed by device events on every used device's compute stream, and
 * its time is the largest device's elapsed time; the report is the median
 * (plus min, max, mean, sd) over the timed steps.
 *
 * Inside one node call on CUDA, the weight and bias gradients of a backward
 * run on a second stream of the device (hw/kernels/side_stream.cu) beside the
 * input-gradient chain, and the compute stream waits for them before the
 * call returns: to the program a node call is still one unit of the compute
 * stream (PLACER_SIDE=0 keeps everything on one).
 *
 * Memory: each device's peak is the high-water mark of its arena, which
 * holds the parameters, gradients, AdamW moments, ZeRO-1's buffer of the
 * update where the dp collectives run on device buffers (dp shards of the
 * moments' size, hw/dist/dist_dp.h), cuBLAS workspace (split between the two
 * streams), activations kept for backward, received tensors, gradient
 * buffers and per-call scratch. It excludes what the CUDA context and NCCL
 * allocate for themselves.
 *
 * Schedules (the order each device's compute stream runs its work):
 *   gpipe  forwards of micro-batches 0..m-1, then backwards of 0..m-1; within
 *          a micro-batch, forward in node order and backward in reverse.
 *   1f1b   devices are ranked r = 0..S-1 by their first node; device r runs
 *          w = min(m, S-1-r) forwards, then alternates one forward and one
 *          backward, then drains the backwards (PipeDream-Flush).
 *   Each device follows its order strictly. Only when a placement that is
 *   not contiguous would deadlock under strict 1f1b (every device waiting
 *   on another) does the device with the lowest index run its first ready
 *   operation early; this is deterministic and recorded in the program.
 */
/*
 * Precision (hw_engine_opts.precision). Three modes; fp32 and tf32 differ
 * only in the GEMMs' math:
 *   fp32  fp32 storage, fp32 math everywhere (CUBLAS_COMPUTE_32F).
 *   tf32  fp32 storage, TF32 tensor-core GEMMs (the CUDA default).
 *   bf16  mixed precision, the llm.c / torch.autocast conventions:
 *     - master weights, gradients and AdamW's m and v are fp32, and the
 *       update is computed in fp32; the AdamW pass also writes a bf16 copy
 *       of the weights (params16: the same flat layout, 2 bytes an element),
 *       which is what the GEMMs read. The copy is made from the master
 *       weights when a program is created.
 *     - every GEMM takes bf16 inputs and accumulates in fp32 (cuBLASLt,
 *       CUBLAS_COMPUTE_32F). An fp32 activation that feeds a GEMM is
 *       rounded to bf16 first (round to nearest even).
 *     - the tensors autocast keeps in bf16 are bf16: the attention's qkv
 *       and its heads' output y, the MLP's pre-activation h and GELU output
 *       g, the head's logits and the logits gradient, and the gradients
 *       inside a node that feed its GEMMs (dy, dqkv, dh).
 *     - the tensors autocast keeps in fp32 are fp32: the residual stream,
 *       the embedding, the layernorms (statistics and outputs), the outputs
 *       of the attention and MLP projections (bias added in fp32), every
 *       gradient between nodes but the logits', the softmax of attention (its statistics
 *       and probabilities are computed in fp32), and the loss: each logits
 *       row is read as bf16, its max, sum and log-sum-exp are fp32, and the
 *       loss sum is a double.
 *     - bias gradients are column sums in fp32.
 *   Buffers between nodes keep their fp32 sizes (param_memory.h); a bf16 tensor
 *   fills the first half of its buffer. Only the logits and their gradient
 *   cross nodes as bf16.
 *   The CPU backend runs the same mode by rounding the same tensors to bf16
 *   values (stored as floats), so CI tests it (nodes.h: the bf16 reference).
 */
/*
 * Tensor parallelism (dist_parallel.tp, hw/dist/dist_program.h; hw/dist/dist_tp.h
 * has the details). A program with a tp group of t ranks is one rank of the Megatron split: each
 * attention node holds nh/t heads (their columns of the qkv weight and bias
 * and the matching rows of the projection, i.e. wproj's columns in this
 * engine's (out, in) storage); the MLP's fc holds F/t columns and its proj
 * the matching rows; the head holds ceil(V/t) vocabulary rows and the loss is
 * vocabulary-parallel (all-reduce max, then sum, the target's logit from
 * its owner). Layernorms, residuals, the embedding and the projections'
 * biases are replicated. A row-parallel output is all-reduced (sum) before
 * its bias is added; a column-parallel matmul's input gradient is
 * all-reduced in backward; replicated gradients are identical on every
 * rank and are not reduced. With seq_parallel the activations between
 * blocks are split by token (reduce-scatter / all-gather around the
 * blocks) and the replicated gradients are summed over the group. t must
 * divide the heads and 4 C; the vocabulary is cut in slices of ceil(V/t)
 * rows, the last ones padded. hw_program_get_params/_grads of
 * a tp rank write only its slices into the model view. The CPU backend
 * runs it on host buffers, the CUDA backend on device buffers
 * (hw/dist/dist_tp_cuda.cu), both in every precision, the CUDA one with its
 * collectives through hw/dist/dist_device.h: NCCL when every rank has its own
 * GPU, staged through host memory when ranks share one (several processes
 * on one H200: logical devices that check the math, not a speed-up).
 */
#ifndef PLACER_HW_HW_H
#define PLACER_HW_HW_H

#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "graph.h"
#include "parallel.h"
#include "schedule.h"
#include "status.h"

typedef enum { HW_BACKEND_CPU = 0, HW_BACKEND_CUDA } hw_backend_kind;

/* How the host issues a step's work. */
typedef enum {
    HW_ISSUE_AUTO = 0, /* one thread per device when every device is its own GPU, else one */
    HW_ISSUE_SINGLE,   /* one host thread issues every device's work */
    HW_ISSUE_THREADS   /* one host thread per device (if the backend allows it); the threads
                          are started by the engine's first threaded step and live until
                          hw_engine_destroy, so a step only wakes them */
} hw_issue_mode;

typedef enum {
    HW_PREC_DEFAULT = 0, /* strict_fp32 decides: fp32 when set, else tf32 (CUDA); fp32 on the CPU */
    HW_PREC_FP32,
    HW_PREC_TF32,        /* CUDA only; the CPU backend computes it as fp32 */
    HW_PREC_BF16         /* the mixed mode above; the CPU backend emulates it */
} hw_precision;

/* "fp32", "tf32", "bf16" (HW_PREC_DEFAULT gives "default"). */
const char *hw_precision_name(hw_precision p);
/* Parse "fp32", "tf32" or "bf16". PL_ERR_INVALID with a message otherwise. */
pl_status hw_precision_parse(const char *s, hw_precision *out, char *msg, size_t len);

typedef struct {
    hw_backend_kind backend; /* CPU virtual devices or CUDA GPUs */
    int n_devices;           /* logical devices, 1..HW_MAX_DEVICES */
    int gpus[HW_MAX_DEVICES];/* CUDA: GPU ordinal of each logical device (repeats allowed) */
    int strict_fp32;         /* CUDA: no TF32 tensor-core math (precision DEFAULT only) */
    hw_precision precision;  /* DEFAULT: by strict_fp32; FP32 / TF32 / BF16 override it */
    hw_issue_mode issue;     /* host issue mode */
    int graphs;              /* CUDA: from a program's second step on, replay each device's
                                step as a captured CUDA graph (one device, or one host
                                thread per GPU); traced steps are never captured */
} hw_engine_opts;

typedef struct hw_engine hw_engine;
typedef struct hw_program hw_program;

/* Create an engine. On success *out owns it (hw_engine_destroy). Errors:
 * PL_ERR_INVALID (bad device count), PL_ERR_UNSUPPORTED (CUDA asked for but
 * not built), PL_ERR_NO_DEVICE (no GPU, or an ordinal past the GPU count),
 * PL_ERR_CUDA, PL_ERR_NOMEM; msg says which. */
pl_status hw_engine_create(const hw_engine_opts *o, hw_engine **out, char *msg, size_t len);

/* Destroy an engine. Every program made on it must be destroyed first. Accepts NULL. */
void hw_engine_destroy(hw_engine *e);

int hw_engine_n_devices(const hw_engine *e);
/* The engine's resolved precision (never HW_PREC_DEFAULT). */
hw_precision hw_engine_precision(const hw_engine *e);
const hw_device_info *hw_engine_device(const hw_engine *e, int dev);
/* The backend, for tests and tools that run single node calls. Borrowed. */
hw_backend *hw_engine_backend(hw_engine *e);

/* Fault injection for tests: the n-th device arena allocation from now on
 * (1-based) fails as if the device were out of memory; 0 turns it off. */
void hw_engine_fail_alloc_at(hw_engine *e, int n);

/* Device arenas currently allocated by this engine's programs (0 once every
 * program is destroyed, and after every failed hw_program_create). */
int hw_engine_live_arenas(const hw_engine *e);

/* Free memory of a device now (CUDA), or -1 where the backend cannot tell. */
int64_t hw_engine_free_bytes(hw_engine *e, int dev);

typedef struct {
    float lr;           /* learning rate */
    float beta1, beta2; /* moment decay */
    float eps;          /* denominator epsilon */
    float weight_decay; /* decoupled, applied to every parameter */
} hw_adamw;

/* lr 3e-4, betas 0.9 / 0.95, eps 1e-8, weight decay 0.1. */
hw_adamw hw_adamw_default(void);

typedef struct {
    const int *placement;      /* one logical device per graph node */
    schedule sched;            /* micro-batches and order (gpipe or 1f1b) */
    const int64_t *caps;       /* per logical device byte cap, or NULL: each
                                  device's own memory */
    uint64_t seed;             /* parameter initialisation (hw_params_init) */
    const float *init_params;  /* or the model view to start from (copied); NULL: from seed */
    hw_adamw adamw;            /* optimizer settings */
    const hw_parallel *parallel; /* or NULL: one process. The process groups this program is
                                  one rank of (tensor and data parallelism over processes,
                                  with their options): hw/dist/dist_program.h's
                                  dist_parallel_hooks fills it; parallel.h says when the
                                  executor calls its hooks. Borrowed: must outlive the program. */
} hw_program_opts;

/* Per-device memory of a program, also filled when program creation fails with
 * PL_ERR_DEVICE_OOM. */
typedef struct {
    int n_devices;                       /* logical devices of the engine */
    int64_t static_bytes[HW_MAX_DEVICES];/* params, grads, AdamW m and v (ZeRO-1's update buffer
                                            on device buffers), workspace, inputs */
    int64_t need_bytes[HW_MAX_DEVICES];  /* the arena's high-water mark for one step */
    int64_t cap_bytes[HW_MAX_DEVICES];   /* the cap applied */
    int oom_device;                      /* first device over its cap, -1 if none */
} hw_mem_report;

/* Compile a program. g is borrowed and must outlive the program. On success *out
 * owns the program (hw_program_destroy). Errors: placement and schedule statuses
 * (PL_ERR_PLACEMENT_*, PL_ERR_SCHEDULE), PL_ERR_DEVICE_OOM when a device's
 * need exceeds its cap or its memory could not be allocated (everything
 * taken so far is released), PL_ERR_UNSUPPORTED for a graph the executor
 * cannot run, PL_ERR_CUDA, PL_ERR_NOMEM. mem may be NULL. */
pl_status hw_program_create(hw_engine *e, const graph *g, const hw_program_opts *o, hw_program **out,
                         hw_mem_report *mem, char *msg, size_t len);

/* Release a program and all its device memory. Accepts NULL. */
void hw_program_destroy(hw_program *p);

/* Set the batch: tokens and targets, batch * seq_len ids each, in [0, vocab).
 * Uploaded to the devices that hold the embedding and the loss. */
pl_status hw_program_set_batch(hw_program *p, const int *tokens, const int *targets, char *msg, size_t len);

/* Fill tokens and targets with a deterministic batch: random tokens, and
 * targets = the next token (the last one wraps to a random token). */
void hw_make_batch(const gpt_config *cfg, uint64_t seed, int *tokens, int *targets);

typedef struct {
    double loss;                         /* mean token loss of the step (before the update) */
    double step_us;                      /* largest device elapsed time (events) */
    double wall_us;                      /* host wall time of the step */
    double device_us[HW_MAX_DEVICES];    /* each used device's elapsed time */
} hw_step_result;

/* Run one training step. The batch must be set. */
pl_status hw_program_step(hw_program *p, hw_step_result *r, char *msg, size_t len);

typedef struct {
    int steps;            /* timed steps */
    double median_us, min_us, max_us, mean_us, sd_us;
    double first_loss;    /* loss of the first (warm-up) step */
    double last_loss;     /* loss of the last step */
    double step_us[64];   /* the timed steps (first 64) */
} hw_timing;

/* The timing protocol: warmup steps, then `steps` (>= 1) timed steps. */
pl_status hw_program_time(hw_program *p, int warmup, int steps, hw_timing *t, char *msg, size_t len);

/* Each logical device's arena high-water mark (0 for unused devices). */
int64_t hw_program_peak_bytes(const hw_program *p, int dev);

/* Copy the parameters (or the gradients of the last step) of every node into
 * a model view (hw_model_param_offsets floats). */
pl_status hw_program_get_params(hw_program *p, float *model, char *msg, size_t len);
pl_status hw_program_get_grads(hw_program *p, float *model, char *msg, size_t len);

/* Number of operations issued out of the schedule's strict order to avoid a
 * deadlock (0 for contiguous placements). */
int hw_program_reorders(const hw_program *p);

/* 1 when the program's steps now replay captured CUDA graphs, 0 when they are
 * issued op by op, -1 when capture was tried and failed (the program then
 * keeps issuing op by op). */
int hw_program_graph_state(const hw_program *p);

/* How the program's tp and dp collectives move data: "none" (no group),
 * "host" (CPU backend: host buffers), "nccl" or "host staging" (CUDA:
 * hw/dist/dist_device.h; the first used device's, the tp group's if any).
 * Static. */
const char *hw_program_collectives(const hw_program *p);

/* Tracing: when on, the next steps record a start and end time for every
 * node call, addition, optimizer step and transfer. */
pl_status hw_program_set_trace(hw_program *p, int on);

/* HW_EV_WGRAD: a weight-gradient call (W) of an order that splits the
 * backward (zb-h1, zb-h2); HW_EV_BWD is then the input-gradient call (B). */
typedef enum { HW_EV_FWD = 0, HW_EV_BWD, HW_EV_OPT, HW_EV_SEND, HW_EV_RECV, HW_EV_ADD, HW_EV_ZERO, HW_EV_WGRAD } hw_event_kind;

typedef struct {
    hw_event_kind kind; /* what ran */
    int node;           /* graph node (the producer for transfers; -1 for opt/zero) */
    int micro_batch;    /* -1 for opt/zero */
    int device;         /* logical device */
    int stream;         /* HW_STREAM_COMPUTE or HW_STREAM_COMM */
    int peer;           /* transfers: the other device; else -1 */
    int grad;           /* transfers: 1 when a gradient goes back */
    int64_t bytes;      /* transfers: bytes moved */
    double start_us;    /* since the device's step start */
    double end_us;
} hw_trace_event;

/* Events of the last traced step (owned by the program, valid until the next
 * step); *n gets their count. NULL when the last step was not traced. */
const hw_trace_event *hw_program_trace(const hw_program *p, int *n);

/* Write the last traced step as Chrome Trace Event JSON: one process per
 * device, one thread per stream. PL_ERR_INVALID when nothing was traced. */
pl_status hw_program_write_chrome_trace(const hw_program *p, FILE *f);

#endif
