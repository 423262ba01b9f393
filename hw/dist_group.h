/*
 * dist_group.h: a process group for data parallelism on one host (issue
 * 17, the CPU path; NCCL and MPI are not here). n ranks, each its own
 * process, joined by a star of AF_UNIX stream sockets set up by the
 * launcher (hw/launcher.h): rank 0 holds one socket to every other rank,
 * rank r > 0 holds one socket to rank 0.
 *
 * Collectives (every rank must call the same ones in the same order, with
 * the same counts; each message carries a tag and a sequence number, so a
 * mismatch is an error, not silent garbage):
 *   barrier     no rank leaves before every rank has entered
 *   all-reduce  sum or max of float or double vectors; rank 0 adds the
 *               ranks' buffers in rank order (0 + 1 + 2 + ...) and sends
 *               the result back, so every rank gets the same bits and the
 *               result does not depend on arrival order
 *   broadcast   rank root's buffer to every rank
 *
 * Failure: every blocking call gives up after the group's timeout (per
 * call, from its start) with PL_ERR_INTERRUPTED and a one-line message
 * naming the peer: "rank 1 vanished (connection closed) during all-reduce"
 * or "no word from rank 0 for 5.0 s during barrier". A rank killed
 * mid-collective therefore never hangs the others. Writes use
 * MSG_NOSIGNAL: a dead peer is an error status, never SIGPIPE.
 * After a failure the group is broken: every later call fails at once.
 */
#ifndef PLACER_HW_DIST_GROUP_H
#define PLACER_HW_DIST_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define DIST_MAX_RANKS 64

typedef struct dist_group dist_group;

typedef enum { DIST_SUM = 0, DIST_MAX } dist_op;

/* Make this process's group from its sockets: for rank 0, fds[r] is the
 * socket to rank r (fds[0] unused); for rank r > 0, fds[0] is the socket
 * to rank 0. The group owns the sockets from then on (closed by destroy,
 * also on failure). size 1 needs no socket. timeout_s > 0. */
pl_status dist_group_create(int rank, int size, const int *fds, double timeout_s, dist_group **out, char *msg,
                            size_t len);
/* Close the sockets and free. Accepts NULL. */
void dist_group_destroy(dist_group *g);

int dist_rank(const dist_group *g);
int dist_size(const dist_group *g);

pl_status dist_barrier(dist_group *g, char *msg, size_t len);
/* In place over n elements of buf. */
pl_status dist_allreduce_f32(dist_group *g, float *buf, int64_t n, dist_op op, char *msg, size_t len);
pl_status dist_allreduce_f64(dist_group *g, double *buf, int64_t n, dist_op op, char *msg, size_t len);
/* root's bytes of buf to every rank. */
pl_status dist_broadcast(dist_group *g, void *buf, int64_t bytes, int root, char *msg, size_t len);

#endif
