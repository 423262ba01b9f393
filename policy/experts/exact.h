/*
 * exact.h: the best placement of one small layer, proven by a mixed-integer
 * program (GLPK), and lower bounds on the busiest GPU for any size.
 *
 * The program, for w[E] on G GPUs of S slots (P = G S), the even split:
 *   y_{e,c} in {0,1}   expert e has c replicas, c = 1 .. P - E + 1; sum_c y_{e,c} = 1
 *   z_{e,c,g} in Z+    its replicas on GPU g; sum_g z_{e,c,g} = c y_{e,c},
 *                      z_{e,c,g} <= min(c, S) y_{e,c}
 *   sum_{e,c} z_{e,c,g} = S for every g
 *   T >= sum_{e,c} (w_e / c) z_{e,c,g} for every g;  minimise T
 * with the GPUs' loads ordered (load_g >= load_{g+1}) to cut the symmetry of
 * interchangeable GPUs. Nodes do not enter: the busiest GPU is all it
 * minimises.
 *
 * It is solved without the GPUs' symmetry: a GPU's content is a pattern of
 * S (expert, count) items of load at most an upper bound (EPLB's global
 * policy's busiest GPU); the program picks how many GPUs hold each
 * pattern, one count per expert, c replicas of each. The optimum is the
 * least pattern load T such that the patterns of load <= T place the
 * layer: a binary search over T, each step a GLPK integer program, stopped
 * when T is within 0.1% of the largest T proven infeasible (the lower
 * bound below at first). Up to 150,000 patterns.
 *
 * Lower bounds (any size; valid for every placement of the shape):
 *   mean       sum_e w_e / G
 *   replica    min over replica counts of max_e w_e / c_e (the greedy
 *              replication of eplb.h step 2 attains it), since some GPU holds
 *              the heaviest replica
 *   pigeonhole with no spare slots (P = E): of the j G + 1 heaviest experts
 *              some GPU holds j + 1, so it carries at least the j + 1
 *              lightest of them (j = 1 .. S - 1)
 */
#ifndef PLACER_POLICY_EXPERTS_EXACT_H
#define PLACER_POLICY_EXPERTS_EXACT_H

#include <stdint.h>

#include "eplb.h"
#include "status.h"

/* 1 when GLPK was built in (it is required; 0 only in a build without it). */
int experts_exact_available(void);

/* Solve layer w under shape s (nodes ignored) within time_limit_s seconds:
 * phy2log[P] the best placement found, *busiest its busiest GPU's load,
 * *proven 1 when GLPK proved it optimal (0: the time ran out; the best found
 * is returned, *bound the largest load proven short: the optimum lies in
 * [*bound, *busiest]; proven means within 0.1%). PL_ERR_INVALID when the
 * program is too big (see above) or the shape is bad; PL_ERR_UNSUPPORTED
 * without GLPK; PL_ERR_NOT_FOUND when no integer solution was found in time. */
pl_status experts_exact(const eplb_shape *s, const double *w, double time_limit_s, int32_t *phy2log,
                        double *busiest, double *bound, int *proven, char *msg, size_t len);

/* The largest of the lower bounds above for layer w under shape s. */
double experts_lower_bound(const eplb_shape *s, const double *w);

#endif
