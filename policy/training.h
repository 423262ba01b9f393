/*
 * training.h: a `placer train` run set up and closed around
 * reinforce_train: the session checked read-only first (a write open turns
 * a portable file to WAL, and bad options must leave the file as it was),
 * then opened for writing; the placer created fresh with a new run row, or
 * restored from a run's last checkpoint; and, after training, the shortlist
 * next to the best single device, the best human split and the DP.
 */
#ifndef PLACER_POLICY_TRAINING_H
#define PLACER_POLICY_TRAINING_H

#include <stddef.h>
#include <stdint.h>

#include "reinforce.h"
#include "session.h"
#include "transfer.h"

typedef struct {
    policy_session *ss; /* the write session (owned) */
    reinforce *r;       /* the placer (owned) */
    int64_t run_id;     /* its run row */
    int start_update;   /* updates done before this process (0 for a fresh run) */
} policy_training;

/* Open so (its write flag is set here) and create the placer: from ro with
 * a new run row holding the canonical arguments (everything but the
 * database, --resume and --threads, as `placer train` options), which a
 * resume re-reads, when resume is 0, else from run resume's last checkpoint with updates as
 * the new target. On success *out is new (policy_training_close); on
 * failure it is NULL and msg holds one line. */
pl_status policy_training_start(policy_session_options *so, const reinforce_options *ro, int64_t resume, int updates, policy_training **out, char *msg, size_t len);

/* A fine-tune on this machine of a run trained on another (transfer.h):
 * so is this machine's problem (its write flag is set here; the caller
 * takes graph, grouping and schedule from the run, and this machine's cap);
 * src_path and src the source database and the run's stored problem there;
 * the placer is the run's last checkpoint, its devices relabelled by the
 * policy map (m) from the source's devices to these (ties among the
 * source's devices broken by the nodes its best sample puts on each), with Adam, baseline,
 * best list and update count afresh (reinforce_create_transferred) and
 * updates as its target; a new run row holds the canonical arguments, so
 * a later plain resume continues it. dev_map (SIM_MAX_DEVICES entries)
 * gets the map, src_machine the source's machine name. Errors, one line:
 * PL_ERR_NOT_FOUND (the source file, the run or its checkpoint missing;
 * this database without the run's graph), PL_ERR_INVALID (device counts
 * that differ, another shape), the store's. */
pl_status policy_training_start_transfer(policy_session_options *so, const char *src_path, int64_t src_run,
                                         const transfer_run_args *src, transfer_map m, int updates, int *dev_map,
                                         char *src_machine, size_t machine_len, policy_training **out, char *msg,
                                         size_t len);

/* The closing table's rows: the shortlist, then the best single device,
 * human split and DP; *ref_us the best single device's step (NAN when
 * every one runs out of memory). *rows is new (policy_cands_destroy). */
pl_status policy_training_shortlist(policy_training *t, policy_cands **rows, double *ref_us, char *msg, size_t len);

/* Free t and close its session; NULL is accepted. */
void policy_training_close(policy_training *t);

#endif
