/*
 * session.h: everything a placer command needs, set up from a profile
 * database and the usual options (graph config, grouping, schedule, memory
 * cap, device subset, threads), with the simulator parameters calibrated
 * for that machine and graph when the store has them. `placer train` and
 * `placer search` share it, so they always solve the same problem; the
 * benchmarks build sessions from spec profiles the same way.
 *
 * It also formats the closing table of both commands (a string: library
 * code does not print).
 */
#ifndef PLACER_POLICY_SESSION_H
#define PLACER_POLICY_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "evaluator.h"
#include "graph.h"
#include "grouping.h"
#include "profile_data.h"
#include "schedule.h"
#include "search.h"
#include "status.h"
#include "store.h"

typedef struct {
    const char *db_path;        /* profile database (required unless profile is given) */
    int write;                  /* open the database for writing (runs, checkpoints) */
    const char *config;         /* graph config text; NULL: the graph stored in the database */
    grouping_mode groups;       /* colocate (default) or none */
    int micro_batches;          /* m (default 1) */
    schedule_order order;       /* gpipe (default) or 1f1b */
    const char *mem_cap;        /* per-device cap text ("12GB", "50%"); NULL: device memory */
    int devices;                /* use only devices 0..devices-1 (0: all) */
    int threads;                /* evaluation threads (0: all online cores) */
    int calibrated;             /* 1: use the store's fitted simulator parameters when present */
} policy_session_options;

void policy_session_options_default(policy_session_options *o);

typedef struct {
    profile_db *db;             /* open database, or NULL for an in-memory profile */
    gpt_config cfg;             /* the graph's config */
    graph *g;                   /* owned */
    grouping *gr;               /* owned */
    profile_data *p;            /* owned (a subset when devices was given) */
    policy_problem pb;          /* the problem */
    policy_evaluator *ev;       /* owned */
    int n_sim_params;           /* simulator parameters found in the store (0: neutral) */
    int64_t cap_bytes;          /* cap applied to every device (0: each device's memory) */
} policy_session;

/* Open db_path, load the profile for the config (or the stored graph),
 * take the device subset, parse the cap, load calibrated simulator
 * parameters, build graph, grouping, problem and evaluator. Errors carry a
 * one-line message: PL_ERR_NOT_FOUND, PL_ERR_NOT_SQLITE, PL_ERR_INVALID,
 * PL_ERR_SCHEDULE, ... */
pl_status policy_session_open(const policy_session_options *o, policy_session **out, char *msg, size_t len);

/* The same from a profile in memory (copied); no database. cfg must be the
 * profile's graph config. */
pl_status policy_session_from_profile(const policy_session_options *o, const gpt_config *cfg,
                                      const profile_data *p, policy_session **out, char *msg, size_t len);

void policy_session_close(policy_session *s);

/* A copy of p restricted to its first n devices (1 <= n <= p->n_devices). */
pl_status policy_profile_subset(const profile_data *p, int n, profile_data **out);

/* Lowest-cost candidate whose label starts with prefix, or -1. */
int policy_cands_best_with_prefix(const policy_cands *c, const char *prefix);

/* The closing table: one row per candidate with its label, predicted step
 * time, largest per-device peak, speed-up against ref_us (the best single
 * device; <= 0 or NAN for none), the memory verdict, devices used and the
 * placement (group form when it respects the grouping, node form
 * otherwise). Returns a malloc'd string, or NULL on allocation failure. */
char *policy_format_table(const policy_cands *c, double ref_us);

#endif
