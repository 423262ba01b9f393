/*
 * predict.h: one placement's prediction from a profile database, the library
 * half of `placer simulate`: open the file, load the profile and its graph,
 * check the placement, schedule and memory cap, pick the simulator
 * parameters (the store's calibrated ones unless neutral is asked for), run
 * the simulator with its event trace on, and summarise the events per link
 * and on the critical path. The command parses and prints; everything it
 * prints is in policy_prediction.
 */
#ifndef PLACER_POLICY_PREDICT_H
#define PLACER_POLICY_PREDICT_H

#include <stddef.h>

#include "graph.h"
#include "profile_data.h"
#include "schedule.h"
#include "sim.h"
#include "status.h"

typedef struct {
    const char *db_path;        /* profile database (required) */
    const char *placement;      /* placement text, one device per node: "0,0,1,1,..." (required) */
    schedule sched;             /* micro-batches, order, chunks (validated against the batch here) */
    const char *mem_cap;        /* per-device cap text ("40GiB", "0.5", "50%"); NULL: device memory */
    const gpt_config *config;   /* which graph; NULL: the database's only or latest one */
    int params;                 /* -1 calibrated when stored, else neutral; 0 neutral; 1 calibrated (required) */
} policy_predict_options;

typedef struct {
    int count;      /* transfers on the link */
    int acts;       /* of which activations */
    double bytes;   /* bytes carried */
    double busy_us; /* time the link was busy */
} policy_link_sum;

typedef struct {
    profile_data *p;                 /* the loaded profile (owned) */
    graph *g;                        /* its graph (owned) */
    sim_ctx *ctx;                    /* the simulator, holding the run's events (owned) */
    gpt_config cfg;                  /* the graph's config */
    char key[PROFILE_NAME_LEN];      /* and its key */
    int *dev;                        /* the placement, n_nodes entries (owned) */
    char *placement_text;            /* the placement in canonical text (owned) */
    schedule sched;                  /* as run */
    sim_params prm;                  /* the parameters used */
    int calibrated;                  /* 1: prm are the store's fitted ones */
    sim_result res;                  /* the prediction */
    int used[SIM_MAX_DEVICES];       /* 1 for each device the placement uses */
    policy_link_sum *links;          /* n_devices^2, [src * D + dst] (owned) */
    double crit_dev_us[SIM_MAX_DEVICES]; /* compute time on the critical path per device */
    int mb_size;                     /* samples per micro-batch */
    int mb_profiled;                 /* 1: mb_size is one of the profile's sizes (else interpolated) */
} policy_prediction;

/* Predict o's placement. On success *out is a new prediction (free with
 * policy_prediction_destroy). On failure *out is NULL and msg holds one
 * line: the status says whose fault it is (PL_ERR_PLACEMENT_*,
 * PL_ERR_SCHEDULE, PL_ERR_INVALID, PL_ERR_NOT_FOUND for bad input, including
 * calibrated parameters asked for but not stored; PL_ERR_DB, PL_ERR_NOMEM
 * otherwise). */
pl_status policy_predict(const policy_predict_options *o, policy_prediction **out, char *msg, size_t len);

/* Free a prediction; NULL is accepted. */
void policy_prediction_destroy(policy_prediction *r);

#endif
