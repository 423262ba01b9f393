/*
 * dist_group.c: the socket star of dist_group.h. Every message is a header
 * (tag, sequence number, payload bytes) and its payload; sockets are
 * non-blocking and every wait is a poll() bounded by the call's deadline.
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
    int fd[DIST_MAX_RANKS]; /* rank 0: fd[r] to rank r; rank r > 0: fd[0] to rank 0; -1 unused */
    double timeout_s;
    uint32_t seq;           /* collectives run so far */
    int broken;             /* a call failed: later calls fail at once */
    char broken_msg[256];
    void *tmp;              /* rank 0: receive buffer of the all-reduce */
    size_t tmp_cap;
};

typedef struct {
    uint32_t tag, seq;
    uint64_t bytes;
} msg_header;

enum { TAG_ALLREDUCE = 0x41524431u, TAG_BCAST = 0x42434131u, TAG_RESULT = 0x52455331u };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static pl_status broken(dist_group *g, char *msg, size_t len, const char *fmt, int peer, const char *what) {
    char line[256];
    snprintf(line, sizeof line, fmt, peer, what);
    if (!g->broken) {
        g->broken = 1;
        snprintf(g->broken_msg, sizeof g->broken_msg, "%s", line);
    }
    return pl_fail(msg, len, PL_ERR_INTERRUPTED, "%s", line);
}

/* Move exactly `bytes` to or from peer (send when out), by the deadline. */
static pl_status io_full(dist_group *g, int peer, void *buf, size_t bytes, int out, double deadline,
                         const char *what, char *msg, size_t len) {
    int fd = g->fd[g->rank == 0 ? peer : 0];
    char *p = buf;
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
    msg_header h = {tag, g->seq, (uint64_t)bytes};
    pl_status st = io_full(g, peer, &h, sizeof h, 1, deadline, what, msg, len);
    if (st == PL_OK && bytes) st = io_full(g, peer, (void *)buf, bytes, 1, deadline, what, msg, len);
    return st;
}

static pl_status recv_msg(dist_group *g, int peer, uint32_t tag, void *buf, size_t bytes, double deadline,
                          const char *what, char *msg, size_t len) {
    msg_header h;
    pl_status st = io_full(g, peer, &h, sizeof h, 0, deadline, what, msg, len);
    if (st != PL_OK) return st;
    if (h.tag != tag || h.seq != g->seq || h.bytes != (uint64_t)bytes) {
        char fmt[160];
        snprintf(fmt, sizeof fmt,
                 "rank %%d is out of step during %%s (collective %u of %llu bytes, it sent #%u of %llu bytes)",
                 (unsigned)g->seq, (unsigned long long)bytes, (unsigned)h.seq, (unsigned long long)h.bytes);
        return broken(g, msg, len, fmt, peer, what);
    }
    return bytes ? io_full(g, peer, buf, bytes, 0, deadline, what, msg, len) : PL_OK;
}

pl_status dist_group_create(int rank, int size, const int *fds, double timeout_s, dist_group **out, char *msg,
                            size_t len) {
    *out = NULL;
    int nfd = size <= 1 ? 0 : rank == 0 ? size : 1;
    pl_status st = PL_OK;
    dist_group *g = NULL;
    if (size < 1 || size > DIST_MAX_RANKS || rank < 0 || rank >= size || !(timeout_s > 0) || (nfd > 0 && !fds)) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "bad process group: rank %d of %d, timeout %g s%s", rank, size,
                     timeout_s, nfd > 0 && !fds ? ", no sockets" : "");
        goto fail;
    }
    if (!(g = calloc(1, sizeof *g))) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
        goto fail;
    }
    g->rank = rank;
    g->size = size;
    g->timeout_s = timeout_s;
    for (int i = 0; i < DIST_MAX_RANKS; i++) g->fd[i] = -1;
    for (int i = rank == 0 ? 1 : 0; i < nfd; i++) {
        g->fd[i] = fds[i];
        int fl = fcntl(fds[i], F_GETFL);
        if (fl < 0 || fcntl(fds[i], F_SETFL, fl | O_NONBLOCK) < 0) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "rank %d: socket %d is not usable", rank, fds[i]);
            dist_group_destroy(g);
            return st;
        }
    }
    *out = g;
    return PL_OK;
fail:
    for (int i = rank == 0 ? 1 : 0; fds && i < nfd && i < DIST_MAX_RANKS; i++)
        if (fds[i] >= 0) close(fds[i]);
    free(g);
    return st;
}

void dist_group_destroy(dist_group *g) {
    if (!g) return;
    for (int i = 0; i < DIST_MAX_RANKS; i++)
        if (g->fd[i] >= 0) close(g->fd[i]);
    free(g->tmp);
    free(g);
}

int dist_rank(const dist_group *g) { return g->rank; }
int dist_size(const dist_group *g) { return g->size; }

static pl_status check_usable(dist_group *g, char *msg, size_t len) {
    if (g->broken) return pl_fail(msg, len, PL_ERR_INTERRUPTED, "%s", g->broken_msg);
    return PL_OK;
}

/* The all-reduce of n elements of esize bytes (4: float, 8: double). */
static pl_status allreduce(dist_group *g, void *buf, int64_t n, int esize, dist_op op, char *msg, size_t len) {
    pl_status st = check_usable(g, msg, len);
    if (st != PL_OK || g->size == 1 || n <= 0) return st;
    const size_t bytes = (size_t)n * (size_t)esize;
    const double deadline = now_s() + g->timeout_s;
    g->seq++;
    if (g->rank != 0) {
        st = send_msg(g, 0, TAG_ALLREDUCE, buf, bytes, deadline, "all-reduce", msg, len);
        if (st == PL_OK) st = recv_msg(g, 0, TAG_RESULT, buf, bytes, deadline, "all-reduce", msg, len);
        return st;
    }
    if (g->tmp_cap < bytes) {
        void *t = realloc(g->tmp, bytes);
        if (!t) return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory for the all-reduce");
        g->tmp = t;
        g->tmp_cap = bytes;
    }
    for (int r = 1; r < g->size; r++) {
        if ((st = recv_msg(g, r, TAG_ALLREDUCE, g->tmp, bytes, deadline, "all-reduce", msg, len)) != PL_OK)
            return st;
        if (esize == 4) {
            float *y = buf;
            const float *x = g->tmp;
            for (int64_t i = 0; i < n; i++) y[i] = op == DIST_SUM ? y[i] + x[i] : (x[i] > y[i] ? x[i] : y[i]);
        } else {
            double *y = buf;
            const double *x = g->tmp;
            for (int64_t i = 0; i < n; i++) y[i] = op == DIST_SUM ? y[i] + x[i] : (x[i] > y[i] ? x[i] : y[i]);
        }
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
    double one = 1.0;
    pl_status st = allreduce(g, &one, 1, 8, DIST_SUM, msg, len);
    if (st == PL_OK && one != (double)g->size)
        return pl_fail(msg, len, PL_ERR_INTERRUPTED, "barrier counted %g ranks of %d", one, g->size);
    return st;
}

pl_status dist_broadcast(dist_group *g, void *buf, int64_t bytes, int root, char *msg, size_t len) {
    pl_status st = check_usable(g, msg, len);
    if (st != PL_OK) return st;
    if (root < 0 || root >= g->size) return pl_fail(msg, len, PL_ERR_INVALID, "broadcast from rank %d of %d", root, g->size);
    if (g->size == 1 || bytes <= 0) return PL_OK;
    const double deadline = now_s() + g->timeout_s;
    g->seq++;
    if (g->rank != 0) {
        /* a root other than 0 sends to rank 0, which forwards */
        if (g->rank == root) return send_msg(g, 0, TAG_BCAST, buf, (size_t)bytes, deadline, "broadcast", msg, len);
        return recv_msg(g, 0, TAG_BCAST, buf, (size_t)bytes, deadline, "broadcast", msg, len);
    }
    if (root != 0 && (st = recv_msg(g, root, TAG_BCAST, buf, (size_t)bytes, deadline, "broadcast", msg, len)) != PL_OK)
        return st;
    for (int r = 1; r < g->size && st == PL_OK; r++)
        if (r != root) st = send_msg(g, r, TAG_BCAST, buf, (size_t)bytes, deadline, "broadcast", msg, len);
    return st;
}
