/*
 * dist_group.c: the process group of dist_group.h, its sockets transport
 * and the dispatch to a plugged-in transport (MPI). On sockets every
 * message is a header (tag, group id, sequence number, payload bytes) and
 * its payload; sockets are non-blocking and every wait is a poll()
 * bounded by the call's deadline. Every collective goes through the
 * group's rank 0 (gather, reduce in rank order, send back), so it needs
 * only the sockets between rank 0 and the others.
 */
#include "dist_group.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

struct dist_group {
    int rank, size;
    int fd[DIST_MAX_RANKS]; /* sockets: fd[r] to rank r of this group, -1 none (or fd[rank]) */
    uint32_t id;            /* sockets: carried in every header (sub-groups share sockets) */
    uint32_t seq;           /* collectives run so far */
    uint32_t splits;        /* splits made from this group (seeds the sub-groups' ids) */
    double timeout_s;
    int broken;             /* a call failed: later calls fail at once */
    char broken_msg[256];
    void *tmp, *tmp2;       /* rank 0: receive / accumulate buffers */
    size_t tmp_cap, tmp2_cap;
    const dist_transport *tr; /* NULL: sockets */
    void *tr_ctx;           /* the transport's state, owned */
};

typedef struct {
    uint32_t tag, group, seq, pad;
    uint64_t bytes;
} msg_header;

enum {
    TAG_ALLREDUCE = 0x41524431u,
    TAG_BCAST = 0x42434131u,
    TAG_RESULT = 0x52455331u,
    TAG_GATHER = 0x47415431u,
    TAG_RSCATTER = 0x52534331u
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void mark_broken(dist_group *g, const char *line) {
    if (!g->broken) {
        g->broken = 1;
        snprintf(g->broken_msg, sizeof g->broken_msg, "%s", line);
    }
}

static pl_status broken(dist_group *g, char *msg, size_t len, const char *fmt, int peer, const char *what) {
    char line[256];
    snprintf(line, sizeof line, fmt, peer, what);
    mark_broken(g, line);
    return pl_fail(msg, len, PL_ERR_INTERRUPTED, "%s", line);
}

/* Move exactly `bytes` to or from peer (send when out), by the deadline. */
static pl_status io_full(dist_group *g, int peer, void *buf, size_t bytes, int out, double deadline,
                         const char *what, char *msg, size_t len) {
    int fd = g->fd[peer];
    char *p = buf;
    if (fd < 0) return broken(g, msg, len, "no socket to rank %d for %s", peer, what);
    while (bytes > 0) {
        double left = deadline - now_s();
        if (left <= 0) {
            char fmt[96];
            snprintf(fmt, sizeof fmt, "no word from rank %%d for %.1f s during %%s", g->timeout_s);
            return broken(g, msg, len, fmt, peer, what);
        }
        struct pollfd pf = {fd, (short)(out ? POLLOUT : POLLIN), 0};
        int ms = (int)(left * 1000.0) + 1;
        int r = poll(&pf, 1, ms);
        if (r < 0) {
            if (errno == EINTR) continue;
            return broken(g, msg, len, "poll failed waiting for rank %d during %s", peer, what);
        }
        if (r == 0) continue; /* the deadline check above reports it */
        ssize_t k = out ? send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, p, bytes, MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            bytes -= (size_t)k;
            continue;
        }
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (pf.revents & (POLLHUP | POLLERR) && out)
                return broken(g, msg, len, "rank %d vanished (connection closed) during %s", peer, what);
            continue;
        }
        /* k == 0 (EOF) or EPIPE / ECONNRESET */
        return broken(g, msg, len, "rank %d vanished (connection closed) during %s", peer, what);
    }
    return PL_OK;
}

static pl_status send_msg(dist_group *g, int peer, uint32_t tag, const void *buf, size_t bytes, double deadline,
                          const char *what, char *msg, size_t len) {
    msg_header h = {tag, g->id, g->seq, 0, (uint64_t)bytes};
    pl_status st = io_full(g, peer, &h, sizeof h, 1, deadline, what, msg, len);
    if (st == PL_OK && bytes) st = io_full(g, peer, (void *)buf, bytes, 1, deadline, what, msg, len);
    return st;
}

static pl_status recv_msg(dist_group *g, int peer, uint32_t tag, void *buf, size_t bytes, double deadline,
                          const char *what, char *msg, size_t len) {
    msg_header h;
    pl_status st = io_full(g, peer, &h, sizeof h, 0, deadline, what, msg, len);
    if (st != PL_OK) return st;
    if (h.tag != tag || h.group != g->id || h.seq != g->seq || h.bytes != (uint64_t)bytes) {
        char fmt[200];
        snprintf(fmt, sizeof fmt,
                 "rank %%d is out of step during %%s (collective %u of %llu bytes in group %08x, it sent #%u of "
                 "%llu bytes in group %08x)",
                 (unsigned)g->seq, (unsigned long long)bytes, (unsigned)g->id, (unsigned)h.seq,
                 (unsigned long long)h.bytes, (unsigned)h.group);
        return broken(g, msg, len, fmt, peer, what);
    }
    return bytes ? io_full(g, peer, buf, bytes, 0, deadline, what, msg, len) : PL_OK;
}

static void close_fds(const int *fds, int size, int rank) {
    for (int i = 0; fds && i < size && i < DIST_MAX_RANKS; i++)
        if (i != rank && fds[i] >= 0) close(fds[i]);
}

pl_status dist_group_create(int rank, int size, const int *fds, double timeout_s, dist_group **out, char *msg,
                            size_t len) {
    *out = NULL;
    pl_status st = PL_OK;
    dist_group *g = NULL;
    if (size < 1 || size > DIST_MAX_RANKS || rank < 0 || rank >= size || !(timeout_s > 0) || (size > 1 && !fds)) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "bad process group: rank %d of %d, timeout %g s%s", rank, size,
                     timeout_s, size > 1 && !fds ? ", no sockets" : "");
        goto fail;
    }
    for (int i = 0; i < size; i++)
        if (i != rank && fds[i] < 0 && (rank == 0 || i == 0)) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "bad process group: rank %d of %d has no socket to rank %d", rank,
                         size, i);
            goto fail;
        }
    if (!(g = calloc(1, sizeof *g))) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
        goto fail;
    }
    g->rank = rank;
    g->size = size;
    g->timeout_s = timeout_s;
    g->id = 0x574f524cu; /* "WORL": every world group; sub-groups derive theirs */
    for (int i = 0; i < DIST_MAX_RANKS; i++) g->fd[i] = -1;
    for (int i = 0; i < size; i++) {
        if (i == rank || fds[i] < 0) continue;
        g->fd[i] = fds[i];
        int fl = fcntl(fds[i], F_GETFL);
        if (fl < 0 || fcntl(fds[i], F_SETFL, fl | O_NONBLOCK) < 0) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "rank %d: socket %d is not usable", rank, fds[i]);
            for (int k = i + 1; k < size; k++)
                if (k != rank && fds[k] >= 0) close(fds[k]);
            dist_group_destroy(g);
            return st;
        }
    }
    *out = g;
    return PL_OK;
fail:
    if (size > 0 && rank >= 0) close_fds(fds, size, rank);
    free(g);
    return st;
}

pl_status dist_group_from_transport(int rank, int size, double timeout_s, const dist_transport *tr, void *ctx,
                                    dist_group **out, char *msg, size_t len) {
    *out = NULL;
    if (!tr || size < 1 || rank < 0 || rank >= size || !(timeout_s > 0)) {
        if (tr && tr->destroy) tr->destroy(ctx);
        return pl_fail(msg, len, PL_ERR_INVALID, "bad process group: rank %d of %d, timeout %g s", rank, size,
                       timeout_s);
    }
    dist_group *g = calloc(1, sizeof *g);
    if (!g) {
        if (tr->destroy) tr->destroy(ctx);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    }
    g->rank = rank;
    g->size = size;
    g->timeout_s = timeout_s;
    for (int i = 0; i < DIST_MAX_RANKS; i++) g->fd[i] = -1;
    g->tr = tr;
    g->tr_ctx = ctx;
    *out = g;
    return PL_OK;
}

void dist_group_destroy(dist_group *g) {
    if (!g) return;
    if (g->tr && g->tr->destroy) g->tr->destroy(g->tr_ctx);
    for (int i = 0; i < DIST_MAX_RANKS; i++)
        if (g->fd[i] >= 0) close(g->fd[i]);
    free(g->tmp);
    free(g->tmp2);
    free(g);
}

int dist_rank(const dist_group *g) { return g->rank; }
int dist_size(const dist_group *g) { return g->size; }
double dist_timeout_s(const dist_group *g) { return g->timeout_s; }
const char *dist_transport_name(const dist_group *g) { return g->tr ? g->tr->name : "sockets"; }

static pl_status check_usable(dist_group *g, char *msg, size_t len) {
    if (g->broken) return pl_fail(msg, len, PL_ERR_INTERRUPTED, "%s", g->broken_msg);
    return PL_OK;
}

/* A transport call's status: a failure breaks the group. */
static pl_status tr_done(dist_group *g, pl_status st, char *msg, size_t len) {
    if (st != PL_OK) mark_broken(g, msg && len ? msg : "the transport failed");
    return st;
}

static pl_status reserve(void **buf, size_t *cap, size_t bytes, char *msg, size_t len) {
    if (*cap >= bytes) return PL_OK;
    void *t = realloc(*buf, bytes);
    if (!t) return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory for a collective of %zu bytes", bytes);
    *buf = t;
    *cap = bytes;
    return PL_OK;
}

/* y = y (op) x over n elements of esize bytes. */
static void reduce_into(void *y, const void *x, int64_t n, int esize, dist_op op) {
    if (esize == 4) {
        float *a = y;
        const float *b = x;
        for (int64_t i = 0; i < n; i++) a[i] = op == DIST_SUM ? a[i] + b[i] : (b[i] > a[i] ? b[i] : a[i]);
    } else {
        double *a = y;
        const double *b = x;
        for (int64_t i = 0; i < n; i++) a[i] = op == DIST_SUM ? a[i] + b[i] : (b[i] > a[i] ? b[i] : a[i]);
    }
}

/* The all-reduce of n elements of esize bytes (4: float, 8: double). */
static pl_status allreduce(dist_group *g, void *buf, int64_t n, int esize, dist_op op, char *msg, size_t len) {
    pl_status st = check_usable(g, msg, len);
    if (st != PL_OK || g->size == 1 || n <= 0) return st;
    if (g->tr) return tr_done(g, g->tr->allreduce(g->tr_ctx, buf, n, esize, op, msg, len), msg, len);
    const size_t bytes = (size_t)n * (size_t)esize;
    const double deadline = now_s() + g->timeout_s;
    g->seq++;
    if (g->rank != 0) {
        st = send_msg(g, 0, TAG_ALLREDUCE, buf, bytes, deadline, "all-reduce", msg, len);
        if (st == PL_OK) st = recv_msg(g, 0, TAG_RESULT, buf, bytes, deadline, "all-reduce", msg, len);
        return st;
    }
    if ((st = reserve(&g->tmp, &g->tmp_cap, bytes, msg, len)) != PL_OK) return st;
    for (int r = 1; r < g->size; r++) {
        if ((st = recv_msg(g, r, TAG_ALLREDUCE, g->tmp, bytes, deadline, "all-reduce", msg, len)) != PL_OK)
            return st;
        reduce_into(buf, g->tmp, n, esize, op);
    }
    for (int r = 1; r < g->size && st == PL_OK; r++)
        st = send_msg(g, r, TAG_RESULT, buf, bytes, deadline, "all-reduce", msg, len);
    return st;
}

pl_status dist_allreduce_f32(dist_group *g, float *buf, int64_t n, dist_op op, char *msg, size_t len) {
    return allreduce(g, buf, n, 4, op, msg, len);
}

pl_status dist_allreduce_f64(dist_group *g, double *buf, int64_t n, dist_op op, char *msg, size_t len) {
    return allreduce(g, buf, n, 8, op, msg, len);
}

pl_status dist_barrier(dist_group *g, char *msg, size_t len) {
    pl_status st = check_usable(g, msg, len);
    if (st != PL_OK || g->size == 1) return st;
    if (g->tr) return tr_done(g, g->tr->barrier(g->tr_ctx, msg, len), msg, len);
    double one = 1.0;
    st = allreduce(g, &one, 1, 8, DIST_SUM, msg, len);
    if (st == PL_OK && one != (double)g->size)
        return pl_fail(msg, len, PL_ERR_INTERRUPTED, "barrier counted %g ranks of %d", one, g->size);
    return st;
}

/* Sockets: root's bytes of buf to every rank (a root other than 0 sends to
 * rank 0, which forwards). */
static pl_status sock_broadcast(dist_group *g, void *buf, size_t bytes, int root, const char *what, char *msg,
                                size_t len) {
    pl_status st = PL_OK;
    const double deadline = now_s() + g->timeout_s;
    g->seq++;
    if (g->rank != 0) {
        if (g->rank == root) return send_msg(g, 0, TAG_BCAST, buf, bytes, deadline, what, msg, len);
        return recv_msg(g, 0, TAG_BCAST, buf, bytes, deadline, what, msg, len);
    }
    if (root != 0 && (st = recv_msg(g, root, TAG_BCAST, buf, bytes, deadline, what, msg, len)) != PL_OK) return st;
    for (int r = 1; r < g->size && st == PL_OK; r++)
        if (r != root) st = send_msg(g, r, TAG_BCAST, buf, bytes, deadline, what, msg, len);
    return st;
}

pl_status dist_broadcast(dist_group *g, void *buf, int64_t bytes, int root, char *msg, size_t len) {
    pl_status st = check_usable(g, msg, len);
    if (st != PL_OK) return st;
    if (root < 0 || root >= g->size)
        return pl_fail(msg, len, PL_ERR_INVALID, "broadcast from rank %d of %d", root, g->size);
    if (g->size == 1 || bytes <= 0) return PL_OK;
    if (g->tr) return tr_done(g, g->tr->broadcast(g->tr_ctx, buf, bytes, root, msg, len), msg, len);
    return sock_broadcast(g, buf, (size_t)bytes, root, "broadcast", msg, len);
}

/* Sockets: each rank's `each` bytes of in, in rank order, into out (size *
 * each bytes) on every rank: gathered at rank 0, then broadcast. in may be
 * out + rank * each. */
static pl_status sock_allgather(dist_group *g, const void *in, void *out, size_t each, const char *what, char *msg,
                                size_t len) {
    pl_status st = PL_OK;
    const double deadline = now_s() + g->timeout_s;
    g->seq++;
    if (g->rank != 0) {
        st = send_msg(g, 0, TAG_GATHER, in, each, deadline, what, msg, len);
        if (st == PL_OK) st = recv_msg(g, 0, TAG_RESULT, out, each * (size_t)g->size, deadline, what, msg, len);
        return st;
    }
    memmove(out, in, each);
    for (int r = 1; r < g->size && st == PL_OK; r++)
        st = recv_msg(g, r, TAG_GATHER, (char *)out + (size_t)r * each, each, deadline, what, msg, len);
    for (int r = 1; r < g->size && st == PL_OK; r++)
        st = send_msg(g, r, TAG_RESULT, out, each * (size_t)g->size, deadline, what, msg, len);
    return st;
}

pl_status dist_allgather_f32(dist_group *g, const float *in, float *out, int64_t n, char *msg, size_t len) {
    pl_status st = check_usable(g, msg, len);
    if (st != PL_OK || n <= 0) return st;
    if (g->size == 1) {
        memmove(out, in, (size_t)n * sizeof(float));
        return PL_OK;
    }
    if (g->tr) return tr_done(g, g->tr->allgather_f32(g->tr_ctx, in, out, n, msg, len), msg, len);
    return sock_allgather(g, in, out, (size_t)n * sizeof(float), "all-gather", msg, len);
}

pl_status dist_reduce_scatter_f32(dist_group *g, const float *in, float *out, int64_t n, char *msg, size_t len) {
    pl_status st = check_usable(g, msg, len);
    if (st != PL_OK || n <= 0) return st;
    if (g->size == 1) {
        memmove(out, in, (size_t)n * sizeof(float));
        return PL_OK;
    }
    if (g->tr) return tr_done(g, g->tr->reduce_scatter_f32(g->tr_ctx, in, out, n, msg, len), msg, len);
    const size_t shard = (size_t)n * sizeof(float), all = shard * (size_t)g->size;
    const double deadline = now_s() + g->timeout_s;
    g->seq++;
    if (g->rank != 0) {
        st = send_msg(g, 0, TAG_RSCATTER, in, all, deadline, "reduce-scatter", msg, len);
        if (st == PL_OK) st = recv_msg(g, 0, TAG_RESULT, out, shard, deadline, "reduce-scatter", msg, len);
        return st;
    }
    if ((st = reserve(&g->tmp, &g->tmp_cap, all, msg, len)) != PL_OK) return st;
    if ((st = reserve(&g->tmp2, &g->tmp2_cap, all, msg, len)) != PL_OK) return st;
    float *acc = g->tmp2; /* (x0 + x1) + x2 ..., as the all-reduce adds */
    memcpy(acc, in, all);
    for (int r = 1; r < g->size; r++) {
        if ((st = recv_msg(g, r, TAG_RSCATTER, g->tmp, all, deadline, "reduce-scatter", msg, len)) != PL_OK)
            return st;
        reduce_into(acc, g->tmp, n * g->size, 4, DIST_SUM);
    }
    for (int r = 1; r < g->size && st == PL_OK; r++)
        st = send_msg(g, r, TAG_RESULT, acc + (size_t)r * (size_t)n, shard, deadline, "reduce-scatter", msg, len);
    if (st == PL_OK) memmove(out, acc, shard);
    return st;
}

/* ---- split ---- */

typedef struct {
    int32_t color, key;
    uint64_t peers; /* bit r: this rank has a socket to rank r (its own bit set) */
} split_entry;

/* The members of color c in sub-group order (key, then rank in the parent). */
static int members_of(const split_entry *e, int size, int32_t c, int *out) {
    int n = 0;
    for (int r = 0; r < size; r++) {
        if (e[r].color != c) continue;
        int k = n++;
        while (k > 0 && (e[out[k - 1]].key > e[r].key)) {
            out[k] = out[k - 1];
            k--;
        }
        out[k] = r;
    }
    return n;
}

static uint32_t mix32(uint32_t h, uint32_t v) {
    h ^= v + 0x9e3779b9u + (h << 6) + (h >> 2);
    h *= 0x85ebca6bu;
    return h ^ (h >> 13);
}

pl_status dist_group_split(dist_group *g, int color, int key, dist_group **sub, char *msg, size_t len) {
    *sub = NULL;
    pl_status st = check_usable(g, msg, len);
    if (st != PL_OK) return st;
    if (color < DIST_UNDEFINED)
        return pl_fail(msg, len, PL_ERR_INVALID, "split color %d (>= 0, or DIST_UNDEFINED)", color);
    g->splits++;
    if (g->tr) {
        void *ctx = NULL;
        int r = 0, n = 0;
        st = tr_done(g, g->tr->split(g->tr_ctx, color, key, &ctx, &r, &n, msg, len), msg, len);
        if (st != PL_OK || !ctx) return st;
        return dist_group_from_transport(r, n, g->timeout_s, g->tr, ctx, sub, msg, len);
    }
    split_entry e[DIST_MAX_RANKS], me = {color, key, 0};
    for (int r = 0; r < g->size; r++)
        if (r == g->rank || g->fd[r] >= 0) me.peers |= (uint64_t)1 << r;
    if (g->size == 1) e[0] = me;
    else if ((st = sock_allgather(g, &me, e, sizeof me, "split", msg, len)) != PL_OK)
        return st;
    /* every rank checks every sub-group, so all fail alike */
    int mem[DIST_MAX_RANKS];
    for (int r = 0; r < g->size; r++) {
        if (e[r].color < 0) continue;
        int n = members_of(e, g->size, e[r].color, mem);
        if (mem[0] != r) continue; /* once per sub-group */
        for (int k = 1; k < n; k++)
            if (!(e[mem[0]].peers >> mem[k] & 1) || !(e[mem[k]].peers >> mem[0] & 1))
                return pl_fail(msg, len, PL_ERR_UNSUPPORTED,
                               "cannot split: rank %d (rank 0 of color %d) has no socket to rank %d (the sockets are a "
                               "star; the launcher makes a full mesh only up to %d ranks)",
                               mem[0], (int)e[r].color, mem[k], DIST_MESH_MAX);
    }
    if (color == DIST_UNDEFINED) return PL_OK;
    const int n = members_of(e, g->size, color, mem);
    int fds[DIST_MAX_RANKS], sub_rank = -1;
    for (int k = 0; k < n; k++) {
        fds[k] = -1;
        if (mem[k] == g->rank) {
            sub_rank = k;
            continue;
        }
        if (g->fd[mem[k]] >= 0 && (fds[k] = dup(g->fd[mem[k]])) < 0) {
            st = pl_fail(msg, len, PL_ERR_IO, "split: dup of the socket to rank %d: %s", mem[k], strerror(errno));
            close_fds(fds, k, -1);
            return st;
        }
    }
    if ((st = dist_group_create(sub_rank, n, fds, g->timeout_s, sub, msg, len)) != PL_OK) return st;
    (*sub)->id = mix32(mix32(g->id, g->splits), (uint32_t)color);
    return PL_OK;
}
