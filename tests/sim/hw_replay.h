/*
 * hw_replay.h: the engine's own plan, replayed on a clock. A test oracle
 * for the simulator and the core of benchmarks/sim/sim_fidelity.
 *
 * hw_replay_compile runs the engine's plan compiler (hw/exec/program.c, through its
 * internal interface) for a placement and schedule on an engine of the CPU
 * backend, with the arena workspace of the backend being modelled (the
 * CUDA backend carves 32 MiB of cuBLAS workspace from every arena), and
 * keeps the per-device instruction lists, the global issue order and each
 * device's arena high-water mark (what the engine reports as peak memory).
 * Nothing is allocated on any device.
 *
 * hw_replay_time then runs the instruction lists on a clock with the
 * simulator's cost model and the engine's stream semantics:
 *   - every device has a compute stream and a comm stream, each in order;
 *   - RECORD takes the stream's current end time, WAIT raises a stream's
 *     end time to the event's time;
 *   - a SEND and its RECV (adjacent in the global order) are one NCCL
 *     transfer: the receive ends at max(send posted, receive posted) +
 *     transfer time; the send ends at its post + transfer time when the
 *     message fits NCCL's buffer (eager), else with the receive
 *     (rendezvous);
 *   - compute instructions last their modelled cost.
 * It walks the global order once: each instruction's dependencies come
 * earlier in it. This is written independently of sim_core.c, so that a test
 * comparing the two checks the simulator's ordering, transfer and memory
 * logic against the engine's.
 */
#ifndef PLACER_TESTS_SIM_HW_REPLAY_H
#define PLACER_TESTS_SIM_HW_REPLAY_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "graph.h"
#include "hw.h"
#include "profile_data.h"
#include "schedule.h"
#include "sim.h"
#include "status.h"

typedef struct hw_replay hw_replay;

/* Compile placement under s for g on engine e (CPU backend; its device
 * count is the number of logical devices), as if the backend carved
 * ws_bytes of workspace from every arena. caps: per device, NULL = no cap.
 * On success *out owns the replay. PL_ERR_DEVICE_OOM passes through (with
 * msg); other errors as hw_program_create. */
pl_status hw_replay_compile(hw_engine *e, const graph *g, const int *placement, const schedule *s,
                            int64_t ws_bytes, const int64_t *caps, hw_replay **out, char *msg, size_t len);

/* Free. Accepts NULL. */
void hw_replay_destroy(hw_replay *r);

/* Arena high-water mark of device d (0 when unused). */
int64_t hw_replay_need_bytes(const hw_replay *r, int d);

/* Transfers (send/receive pairs) in the step. */
int hw_replay_transfers(const hw_replay *r);

/* Operations issued out of the strict schedule order (deadlock avoidance). */
int hw_replay_reorders(const hw_replay *r);

/* Device d's compute-stream work in its issue order, one token per
 * instruction, space separated: "F<node>.<mb>", "B<node>.<mb>",
 * "A<node>.<mb>" (gradient addition), "Z" (zeroing), "O" (AdamW). Returns
 * the length written (truncated to len - 1). */
size_t hw_replay_compute_order(const hw_replay *r, int d, char *buf, size_t len);

/* Same for the comm stream: "S<node>.<mb>><peer>" / "R<node>.<mb><<peer>",
 * with a 'g' after S or R for gradients. */
size_t hw_replay_comm_order(const hw_replay *r, int d, char *buf, size_t len);

/* Replay the step on a clock with profile p and simulator parameters prm
 * (the simulator's cost model, see sim_ctx.c). eager_bytes: largest message a
 * send completes without its receiver. dev_end_us (n devices) gets each
 * used device's compute-stream end (0 for unused); *step_us the largest
 * plus prm->step_fixed_us. */
pl_status hw_replay_time(const hw_replay *r, const profile_data *p, const sim_params *prm, int64_t eager_bytes,
                         double *dev_end_us, double *step_us);

/* hw_replay_time, also writing one line per instruction that takes time to
 * dump (when not NULL): "dev stream kind node mb start end". */
pl_status hw_replay_time_dump(const hw_replay *r, const profile_data *p, const sim_params *prm,
                              int64_t eager_bytes, double *dev_end_us, double *step_us, FILE *dump);

#endif
