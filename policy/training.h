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

/* The closing table's rows: the shortlist, then the best single device,
 * human split and DP; *ref_us the best single device's step (NAN when
 * every one runs out of memory). *rows is new (policy_cands_destroy). */
pl_status policy_training_shortlist(policy_training *t, policy_cands **rows, double *ref_us, char *msg, size_t len);

/* Free t and close its session; NULL is accepted. */
void policy_training_close(policy_training *t);

#endif
