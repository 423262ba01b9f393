/*
 * dist_group.h: a process group for tensor and data parallelism (issue 17;
 * host buffers: NCCL and device buffers are hw/dist/dist_device.h, which uses a
 * group to hand out NCCL's id). n ranks, each its own process, behind
 * one API and two transports:
 *   sockets  AF_UNIX stream sockets made by the fork launcher
 *            (hw/dist/launcher.h): a full mesh (a socket between every pair of
 *            ranks) for up to DIST_MESH_MAX ranks, a star around rank 0
 *            beyond that (rank 0 holds a socket to every rank, rank r > 0
 *            one socket to rank 0)
 *   MPI      MPI_COMM_WORLD and MPI_Comm_split (hw/dist/dist_mpi.h, when the
 *            build found MPI); it plugs in through dist_transport below
 * Callers never see which one they have.
 *
 * Collectives (every rank of the group must call the same ones in the same
 * order, with the same counts; on sockets each message carries the
 * group's id, a tag and a sequence number, so a mismatch is an error, not
 * silent garbage):
 *   barrier         no rank leaves before every rank has entered
 *   all-reduce      sum or max of float or double vectors
 *   reduce-scatter  sum of float vectors, rank r keeps the r-th of size
 *                   equal shards
 *   all-gather      every rank's equal float shard, in rank order, to all
 *   broadcast       rank root's buffer to every rank
 * Same bits on every rank, independent of arrival order: the sockets
 * transport funnels each collective through the group's rank 0, which adds
 * the ranks' buffers in rank order ((x0 + x1) + x2) + ..., so the
 * reduce-scatter's shard r is bit for bit the all-reduce's elements
 * [r n, (r + 1) n). (Under MPI the library's reduction order applies; it
 * is the same on every rank for a given communicator and size.)
 *
 * Sub-groups: dist_group_split is MPI_Comm_split over the group (color,
 * key, collective over the parent). On sockets a sub-group reuses the
 * parent's sockets (duplicated, so it may outlive the parent); its rank 0
 * needs a socket to each of its members, which the mesh always has and
 * the star only when the sub-group's rank 0 is the star's centre: a split
 * that the star cannot carry fails on every rank with PL_ERR_UNSUPPORTED.
 * Collectives of a parent and its sub-groups may interleave as long as
 * every pair of ranks calls the groups they share in the same order (what
 * MPI programs must do anyway to avoid deadlock).
 *
 * Failure: every blocking call gives up after the group's timeout (per
 * call, from its start) with PL_ERR_INTERRUPTED and a one-line message
 * naming the peer: "rank 1 vanished (connection closed) during all-reduce"
 * or "no word from rank 0 for 5.0 s during barrier". A rank killed
 * mid-collective therefore never hangs the others. Writes use
 * MSG_NOSIGNAL: a dead peer is an error status, never SIGPIPE.
 * After a failure the group is broken: every later call fails at once.
 * Ranks in messages are the group's own ranks.
 */
#ifndef PLACER_HW_DIST_GROUP_H
#define PLACER_HW_DIST_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define DIST_MAX_RANKS 64
#define DIST_MESH_MAX 16   /* the fork launcher joins up to this many ranks in a full mesh */
#define DIST_UNDEFINED (-1) /* a split color: this rank joins no sub-group */

typedef struct dist_group dist_group;

typedef enum { DIST_SUM = 0, DIST_MAX } dist_op;

/* Make this process's group from its sockets: fds has `size` entries,
 * fds[i] the socket to rank i or -1 where there is none (fds[rank] is
 * ignored). Rank 0 needs a socket to every rank, rank r > 0 at least one
 * to rank 0. The group owns the sockets from then on (closed by destroy,
 * also on failure). size 1 needs no socket (fds may be NULL).
 * timeout_s > 0. */
pl_status dist_group_create(int rank, int size, const int *fds, double timeout_s, dist_group **out, char *msg,
                            size_t len);
/* Close the sockets (or free the transport) and free. Accepts NULL. */
void dist_group_destroy(dist_group *g);

int dist_rank(const dist_group *g);
int dist_size(const dist_group *g);
/* The per-call timeout the group was made with, in seconds. */
double dist_timeout_s(const dist_group *g);
/* "sockets" or "mpi". Static. */
const char *dist_transport_name(const dist_group *g);

/* Collective over g: the ranks giving the same color >= 0 form one new
 * group, ranked by (key, rank in g); *sub gets this rank's (NULL for
 * color DIST_UNDEFINED). Every rank of g must call it. The sub-group keeps
 * g's timeout and may outlive g. PL_ERR_UNSUPPORTED (on every rank) when
 * the sockets cannot carry one of the sub-groups (see above). */
pl_status dist_group_split(dist_group *g, int color, int key, dist_group **sub, char *msg, size_t len);

pl_status dist_barrier(dist_group *g, char *msg, size_t len);
/* In place over n elements of buf. */
pl_status dist_allreduce_f32(dist_group *g, float *buf, int64_t n, dist_op op, char *msg, size_t len);
pl_status dist_allreduce_f64(dist_group *g, double *buf, int64_t n, dist_op op, char *msg, size_t len);
/* in holds size * n floats (shard r at in + r n); out gets the sum over the
 * ranks of shard `rank` (n floats). out may alias in (e.g. out = in +
 * rank n). n >= 0. */
pl_status dist_reduce_scatter_f32(dist_group *g, const float *in, float *out, int64_t n, char *msg, size_t len);
/* in holds this rank's n floats; out gets size * n floats, rank r's at out
 * + r n. in may be out + rank n. n >= 0. */
pl_status dist_allgather_f32(dist_group *g, const float *in, float *out, int64_t n, char *msg, size_t len);
/* root's bytes of buf to every rank. */
pl_status dist_broadcast(dist_group *g, void *buf, int64_t bytes, int root, char *msg, size_t len);

/* ---- for transports (hw/dist/dist_mpi.c) ----
 * A transport implements the collectives for one group; the group keeps
 * the rank, size and broken state and calls these only while not broken.
 * Each returns PL_OK or a status with one line in msg (the group is then
 * marked broken). split returns *sub_ctx NULL for DIST_UNDEFINED. */
typedef struct {
    const char *name;
    pl_status (*barrier)(void *ctx, char *msg, size_t len);
    pl_status (*allreduce)(void *ctx, void *buf, int64_t n, int esize, dist_op op, char *msg, size_t len);
    pl_status (*reduce_scatter_f32)(void *ctx, const float *in, float *out, int64_t n, char *msg, size_t len);
    pl_status (*allgather_f32)(void *ctx, const float *in, float *out, int64_t n, char *msg, size_t len);
    pl_status (*broadcast)(void *ctx, void *buf, int64_t bytes, int root, char *msg, size_t len);
    pl_status (*split)(void *ctx, int color, int key, void **sub_ctx, int *sub_rank, int *sub_size, char *msg,
                       size_t len);
    void (*destroy)(void *ctx);
} dist_transport;

/* A group over transport tr with state ctx (owned by the group from then
 * on: tr->destroy(ctx) on destroy, also when this fails). */
pl_status dist_group_from_transport(int rank, int size, double timeout_s, const dist_transport *tr, void *ctx,
                                    dist_group **out, char *msg, size_t len);

#endif
