/*
 * program_internal.h: what a compiled program holds, shared by the compiler
 * (program.c) and the runner (exec.c). Not a public interface.
 *
 * A program is a list of instructions per logical device plus one global issue
 * order over all of them. Every instruction's buffers are byte offsets into
 * its device's arena; the runner adds the arena's base address. The global
 * order is a valid sequential execution of the step: running it on one host
 * thread is correct, and so is running each device's list on its own thread
 * (each list is a subsequence of the global order, and the only cross-device
 * dependencies are the transfers, whose two halves sit side by side in it).
 */
#ifndef PLACER_HW_PROGRAM_INTERNAL_H
#define PLACER_HW_PROGRAM_INTERNAL_H

#include <pthread.h>

#include "backend.h"
#include "hw.h"
#include "parallel.h"

typedef enum {
    HI_ZERO = 0, /* zero n bytes at a (compute; the parameter gradients' on comm) */
    HI_FWD,      /* node forward, calls[call] (compute) */
    HI_BWD,      /* node backward, calls[call] (compute) */
    HI_ADD,      /* y at a += x at b, n floats (compute) */
    HI_ADAMW,    /* AdamW over the device's flat buffers (compute) */
    HI_RECORD,   /* record event ev on stream */
    HI_WAIT,     /* stream waits for event ev of device peer */
    HI_SEND,     /* send n bytes at a to device peer (comm) */
    HI_RECV,     /* receive n bytes at a from device peer (comm) */
    HI_DP_REDUCE /* data parallelism: all-reduce (mean) of the device's gradients
                    [a, a + n) in floats, once final: the bucket hook (parallel.h) (compute) */
} hi_kind;

typedef struct {
    uint8_t kind;   /* hi_kind */
    uint8_t stream; /* HW_STREAM_* the instruction runs on */
    uint8_t grad;   /* transfers: 1 for a gradient going back */
    int node, mb;   /* for traces; -1 where not applicable */
    int peer;       /* SEND/RECV: the other device; WAIT: the event's device */
    int ev;         /* RECORD/WAIT: event index */
    int call;       /* FWD/BWD: index into calls */
    int64_t a, b, n;/* see hi_kind */
} hw_instr;

/* One node call with arena offsets (bytes; -1 = none). */
typedef struct {
    int node, mb;
    int64_t in[2], out, saved, scratch, dout, din[2], tokens, targets;
    int acc[2];
    int part;        /* backward: HW_BWD_WHOLE, HW_BWD_INPUT (B) or HW_BWD_WEIGHT (W) */
    int64_t wstash;  /* B to W: what W needs (hw_bwd_wstash_floats), -1 none */
    hw_param_map pl; /* the node's shard layout */
    hw_node_mem mem;    /* the node's activation sizes for one micro-batch */
} hw_call_spec;

typedef struct {
    int dev, idx; /* instruction idx of device dev */
} hw_order_entry;

typedef struct {
    int used;                 /* any node placed here */
    int64_t param_floats;     /* floats in each flat buffer (params, grads; m, v without ZeRO) */
    int64_t moment_floats;    /* floats in m and in v: param_floats, or the ZeRO-1 shard's */
    int64_t off_params, off_grads, off_m, off_v; /* arena offsets, bytes */
    int64_t off_zero1;         /* ZeRO-1 on device buffers (hw_split.device_buffers): the update's
                                  dp x moment_floats floats (the update hook's), else -1 */
    int64_t off_params16;      /* bf16 mode: the weight copy (backend copy_bytes each), else -1 */
    int64_t off_ws, ws_bytes;  /* backend workspace */
    int64_t off_loss;          /* double loss accumulator, -1 if the loss is elsewhere */
    int64_t off_tokens, off_targets; /* full-batch ids, -1 where not needed */
    int64_t off_step;          /* AdamW step counter (int) on the device */
    int64_t static_bytes;      /* the above */
    int64_t need_bytes;        /* arena high-water mark */
    int64_t cap;               /* the cap */
    void *base;                /* the arena's device allocation */
    void *graph;               /* captured step (backend graph), or NULL */
    hw_instr *ins;             /* this device's instructions */
    int n_ins, cap_ins;
    int n_events;              /* events used */
} hw_program_dev;

/* The engine's persistent host threads (exec.c). */
typedef struct hw_pool hw_pool;
void hw_pool_destroy(hw_pool *pool);

struct hw_engine {
    hw_backend *be;      /* owned */
    hw_issue_mode issue; /* requested issue mode */
    int fail_at;         /* fault injection: fail the n-th arena allocation */
    int alloc_count;     /* arena allocations since fail_at was set */
    int live_arenas;     /* device arenas allocated and not yet freed */
    int graphs;          /* capture steps into graphs where the backend can */
    hw_precision prec;   /* resolved precision */
    hw_pool *pool;       /* host threads, one per device, from the first threaded step; or NULL */
};

struct hw_program {
    hw_engine *e;             /* borrowed */
    const graph *g;           /* borrowed */
    int n_dev;                /* logical devices of the engine */
    int *placement;           /* n_nodes */
    schedule sched;
    int b;                    /* samples per micro-batch */
    hw_adamw adamw;
    int t;                    /* AdamW steps taken */
    int threaded;             /* issue with one thread per used device */
    int bf16;                 /* the engine runs the bf16 mixed mode */
    int batch_set;            /* hw_program_set_batch was called */
    int reorders;             /* ops issued out of strict schedule order */
    int steps_run;            /* steps run so far */
    int graph_state;          /* 0 not captured, 1 replaying graphs, -1 capture failed */
    int loss_dev, emb_dev;
    hw_split split;           /* what the process groups split (parallel.h); hw_split_none()
                                 for one process */
    const hw_parallel *par;   /* the groups' hooks (hw_program_opts.parallel) when the split is
                                 active (hw_split_active), else NULL */
    hw_parallel_state *par_state; /* theirs, from the attach hook (NULL without par) */
    int64_t *model_off;       /* n_nodes + 1: model view offsets */
    int64_t *shard_off;       /* n_nodes: offset of node's shard in its device's flat buffers (floats) */
    hw_program_dev dev[HW_MAX_DEVICES];
    hw_call_spec *calls;
    int n_calls, cap_calls;
    hw_order_entry *order;
    int n_order, cap_order;
    /* tracing */
    int trace_on;
    hw_trace_event *trace;
    int n_trace;
};

/* Compile placement + schedule into p (instructions, offsets, needs).
 * caps: per device (never NULL here). On PL_ERR_DEVICE_OOM, *oom_dev names
 * the device and p->dev[].need_bytes holds what was reached. Implemented in
 * program.c. */
pl_status hw_program_compile(hw_program *p, const int64_t *caps, int *oom_dev, char *msg, size_t len);

/* Free the compiled instruction lists (not the device memory). */
void hw_program_free_code(hw_program *p);

/* The plain AdamW update of device d's flat buffers (HI_ADAMW without
 * process groups; the parallel update hook ends with it where no data
 * parallelism takes over). PL_OK at once for a device without parameters;
 * else the backend's status (its message in the backend's err). exec.c. */
pl_status hw_program_adamw(hw_program *p, int d);

#endif
