/*
 * transfer.h: placements and policies carried from one machine to another
 * (issue 36: train on one machine, evaluate on another).
 *
 * A placement names devices by index, and two machines need not agree on
 * what index d is: 4 x T4 and 2 x H200 + 2 x L40S both have a device 2.
 * The device map says which device of the target T takes the work of each
 * device of the source S. Two rules:
 *
 *   speed (the default)  devices ordered by their speed on the graph (1 /
 *                        their forward + backward time of every node at the
 *                        schedule's micro-batch size, from the profile),
 *                        fastest first; devices within 2% of a faster
 *                        one's speed form one type and keep index order
 *                        within it (so a measured pair of equal cards does
 *                        not swap on noise)
 *   rank                 devices in index order
 *
 * A placement is mapped over the devices it uses: its k used devices, in
 * the rule's order on S, go to T's first k devices in the rule's order on
 * T when k <= n_T; when k > n_T, used device j (0-based, in order) goes to
 * T's device floor(j n_T / k), so neighbouring stages merge and the order
 * of the stages is kept. On machines whose devices are listed fastest
 * first (every spec profile shipped), the two rules give the same map; they
 * part where a machine lists a slow device before a fast one.
 *
 * A policy (the placer network) is mapped by relabelling its outputs
 * (placer_net_permute_devices), which needs n_S = n_T: the rule's order on
 * S to the rule's order on T. Policies therefore fine-tune only between
 * equal device counts; between unequal counts only their placements
 * transfer (zero-shot).
 *
 * A run from another database is read through the store: its stored
 * arguments give the problem it solved (graph config, grouping, schedule,
 * cap), and its samples the shortlist: the top k distinct placements by
 * the source's predicted cost (an out-of-memory sample costs the penalty),
 * distinct up to relabelling the source's identical devices, the earlier
 * sample first on equal cost: the list `placer train` prints as "rl best
 * found", "rl top 2", ... (without the final favourite, which needs the
 * network).
 *
 * The measures of docs/transfer.md: gain retained and updates saved.
 */
#ifndef PLACER_POLICY_TRANSFER_H
#define PLACER_POLICY_TRANSFER_H

#include <stddef.h>
#include <stdint.h>

#include "evaluator.h"
#include "grouping.h"
#include "schedule.h"
#include "status.h"
#include "store.h"

typedef enum { TRANSFER_MAP_SPEED = 0, TRANSFER_MAP_RANK } transfer_map;

/* Parse "speed" / "rank". PL_ERR_INVALID with one line naming both. */
pl_status transfer_parse_map(const char *text, transfer_map *out, char *msg, size_t len);
/* "speed" or "rank" (static). */
const char *transfer_map_name(transfer_map m);

/* Each device's speed on pb's graph: 1 / (the sum over nodes of its forward
 * and backward time at the schedule's micro-batch size). speed has
 * n_devices entries; NAN for a device with a missing or zero cost. */
void transfer_device_speeds(const policy_problem *pb, double *speed);

/* The rule's order of n devices of the given speeds (speed may be NULL for
 * TRANSFER_MAP_RANK): order[0] first. use (NULL: none) breaks ties within
 * a speed type: more use first, then index (by speed only; rank order is
 * index order). */
void transfer_device_order(transfer_map m, int n, const double *speed, const double *use, int *order);

/* The device map from S (n_src devices) to T (n_dst): map[d] for each used
 * S device (used[d] != 0; used NULL: every device), -1 for the others.
 * PL_ERR_INVALID, with one line, for a count out of 1..SIM_MAX_DEVICES, no
 * used device, or (TRANSFER_MAP_SPEED) a speed that is not a positive
 * number. */
pl_status transfer_device_map(transfer_map m, int n_src, const double *src_speed, const int *used, int n_dst,
                              const double *dst_speed, int *map, char *msg, size_t len);

/* S's node placement src_node_dev on src's problem carried to dst's: the
 * map over the devices it uses (transfer_device_map, speeds from each
 * problem's profile) applied to every node. map (n_src entries, may be
 * NULL) gets the map. PL_ERR_INVALID, with one line, when the graphs'
 * node counts differ or a device index is out of range for S. */
pl_status transfer_map_placement(transfer_map m, const policy_problem *src, const policy_problem *dst,
                                 const int *src_node_dev, int *dst_node_dev, int *map, char *msg, size_t len);

/* The relabelling of a policy trained on src for dst: perm[d] is T's device
 * for S's device d (every device used). src_use (n_src entries, NULL:
 * none), the nodes the policy's best placement puts on each S device,
 * orders S's devices of one speed type (a policy trained on identical
 * devices uses arbitrary labels among them: those it uses go to T's
 * fastest). PL_ERR_INVALID, with one line, when the device counts differ
 * (a policy fine-tunes only between equal counts). */
pl_status transfer_policy_map(transfer_map m, const policy_problem *src, const policy_problem *dst,
                              const double *src_use, int *perm, char *msg, size_t len);

/* A copy of profile p with its devices relabelled: device d of p is device
 * perm[d] of *out (costs, memory figures, links and their curves move with
 * it): the same machine listed in another device order. PL_ERR_INVALID
 * when perm is not a permutation of p's devices, PL_ERR_NOMEM. */
pl_status transfer_profile_relabel(const profile_data *p, const int *perm, profile_data **out);

/* The problem a run solved, from its stored canonical arguments. */
typedef struct {
    char config[256];       /* --config text (a preset or key=value form) */
    grouping_mode groups;   /* --groups */
    int micro_batches;      /* --micro-batches (1) */
    schedule_order order;   /* --schedule (gpipe) */
    char mem_cap[64];       /* --mem-cap text, "" for none */
    int devices;            /* --devices (0: all) */
    int calibrated;         /* 0 with --uncalibrated */
    int updates;            /* --updates (0 when absent) */
} transfer_run_args;

/* Parse a run's stored arguments ("--config X --groups Y ..."); options it
 * does not need are skipped with their value. PL_ERR_INVALID, with one
 * line, for a value that does not parse or a missing --config. */
pl_status transfer_parse_run_args(const char *args, transfer_run_args *out, char *msg, size_t len);

/* Read run `run` of db: PL_ERR_NOT_FOUND (one line naming the run) when the
 * database has no such run, PL_ERR_INVALID when it is not a placer training
 * run ("reinforce") or its arguments do not parse. */
pl_status transfer_read_run(profile_db *db, int64_t run, transfer_run_args *out, char *msg, size_t len);

/* transfer_read_run on the database at src_path (opened read-only; the
 * line says what to give): PL_ERR_NOT_FOUND when the file or the run is
 * missing, the store's open errors for a file that is not a profile
 * database. */
pl_status transfer_source_run(const char *src_path, int64_t run, transfer_run_args *out, char *msg, size_t len);

/* A shortlist of node placements with the source's figures. */
typedef struct {
    int n;            /* placements */
    int n_nodes;      /* entries per placement */
    int *node_dev;    /* n * n_nodes */
    double *step_us;  /* n: the source's predicted step (NAN when not stored) */
    int *oom;         /* n: 1 when it ran out of memory on the source */
} transfer_shortlist;

/* The top top_k distinct placements of run `run` of db (see the file
 * comment), read against src, the problem the run solved (its node count,
 * devices and relabellings). PL_ERR_NOT_FOUND when the run is missing or
 * has no sample that parses on src's graph and devices. *out is filled on
 * success (transfer_shortlist_free). */
pl_status transfer_run_shortlist(profile_db *db, int64_t run, const policy_problem *src, int top_k,
                                 transfer_shortlist *out, char *msg, size_t len);
void transfer_shortlist_free(transfer_shortlist *s);

/* Below this fraction of the best baseline's time, the best placement's
 * lead over it is no gain to retain. */
#define TRANSFER_NA_FRACTION 0.005

/* Gain retained = (base - placed) / (base - best): 1 when the transferred
 * placement is as fast as T's best, 0 when it is as slow as T's best
 * baseline, negative when slower. NAN (n/a) when base - best <=
 * TRANSFER_NA_FRACTION * base or any argument is not finite. */
double transfer_gain_retained(double base_us, double placed_us, double best_us);

/* Updates saved by starting from S, at equal budgets. ft and scratch are
 * best-so-far curves (the lowest cost after update i + 1 at index i) of
 * the fine-tune from S's policy (n_ft updates) and of a run from scratch
 * on T (n_scratch updates, the same budget). L = scratch[n_scratch - 1],
 * what T reaches alone; *u_scratch and *u_ft get the first update count at
 * which each curve reaches L (*u_ft = -1 when the fine-tune never does).
 * Returns (u_scratch - u_ft) / max(u_scratch, u_ft), in (-1, 1): positive,
 * the fraction of T's updates saved; negative, the fraction of the
 * fine-tune's updates lost to the start. When the fine-tune never reaches
 * L, u_ft counts as n_ft + 1 and the value is an upper bound. NAN for empty
 * curves. */
double transfer_updates_saved(const double *ft, int n_ft, const double *scratch, int n_scratch, int *u_ft,
                              int *u_scratch);

#endif
