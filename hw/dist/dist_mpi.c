/*
 * dist_mpi.c: the MPI transport (dist_mpi.h). Each group holds its own
 * communicator; every collective is the non-blocking MPI call polled to the
 * group's deadline (sched_yield between polls for the first few
 * milliseconds, then 0.2 ms sleeps, so waiting ranks leave the cores to the
 * ones still computing on a loaded host).
 */
#include "dist_mpi.h"

#include <stdlib.h>
#include <string.h>

#include "placer_config.h"

int dist_mpi_launched(int *rank, int *size) {
    const char *s = getenv("OMPI_COMM_WORLD_SIZE"), *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!s || !*s || !r || !*r) return 0;
    if (rank) *rank = atoi(r);
    if (size) *size = atoi(s);
    return 1;
}

#if PLACER_HAVE_MPI
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>

typedef struct {
    MPI_Comm comm;
    double timeout_s;
    void *tmp; /* a copy of the input when it overlaps the output */
    size_t tmp_cap;
} mpi_ctx;

static int g_we_initialised;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static pl_status mpi_fail(int rc, const char *call, char *msg, size_t len) {
    char s[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    MPI_Error_string(rc, s, &n);
    return pl_fail(msg, len, PL_ERR_IO, "%s failed: %s", call, s);
}

/* Poll a started request to the deadline. */
static pl_status wait_req(mpi_ctx *c, MPI_Request *req, int rc, const char *call, const char *what, char *msg,
                          size_t len) {
    if (rc != MPI_SUCCESS) return mpi_fail(rc, call, msg, len);
    const double t0 = now_s(), deadline = t0 + c->timeout_s;
    for (;;) {
        int done = 0;
        if ((rc = MPI_Test(req, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS) return mpi_fail(rc, "MPI_Test", msg, len);
        if (done) return PL_OK;
        double t = now_s();
        if (t >= deadline)
            return pl_fail(msg, len, PL_ERR_INTERRUPTED, "no word from the group for %.1f s during %s (MPI)",
                           c->timeout_s, what);
        if (t - t0 < 0.005) {
            sched_yield();
        } else {
            struct timespec ts = {0, 200000L};
            nanosleep(&ts, NULL);
        }
    }
}

static const void *no_overlap(mpi_ctx *c, const void *in, size_t in_bytes, const void *out, size_t out_bytes,
                              char *msg, size_t len, pl_status *st) {
    const char *a = in, *b = out;
    *st = PL_OK;
    if (a + in_bytes <= b || b + out_bytes <= a) return in;
    if (c->tmp_cap < in_bytes) {
        void *t = realloc(c->tmp, in_bytes);
        if (!t) {
            *st = pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory for a collective of %zu bytes", in_bytes);
            return NULL;
        }
        c->tmp = t;
        c->tmp_cap = in_bytes;
    }
    memcpy(c->tmp, in, in_bytes);
    return c->tmp;
}

static pl_status m_barrier(void *vc, char *msg, size_t len) {
    mpi_ctx *c = vc;
    MPI_Request r;
    return wait_req(c, &r, MPI_Ibarrier(c->comm, &r), "MPI_Ibarrier", "barrier", msg, len);
}

static pl_status m_allreduce(void *vc, void *buf, int64_t n, int esize, dist_op op, char *msg, size_t len) {
    mpi_ctx *c = vc;
    if (n > 0x7fffffff) return pl_fail(msg, len, PL_ERR_INVALID, "an MPI all-reduce of %lld elements", (long long)n);
    MPI_Request r;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, esize == 4 ? MPI_FLOAT : MPI_DOUBLE,
                            op == DIST_SUM ? MPI_SUM : MPI_MAX, c->comm, &r);
    return wait_req(c, &r, rc, "MPI_Iallreduce", "all-reduce", msg, len);
}

static pl_status m_reduce_scatter(void *vc, const float *in, float *out, int64_t n, char *msg, size_t len) {
    mpi_ctx *c = vc;
    int size = 1;
    MPI_Comm_size(c->comm, &size);
    if (n * size > 0x7fffffff)
        return pl_fail(msg, len, PL_ERR_INVALID, "an MPI reduce-scatter of %lld x %d", (long long)n, size);
    pl_status st;
    const void *src = no_overlap(c, in, (size_t)n * size * 4, out, (size_t)n * 4, msg, len, &st);
    if (!src) return st;
    MPI_Request r;
    int rc = MPI_Ireduce_scatter_block(src, out, (int)n, MPI_FLOAT, MPI_SUM, c->comm, &r);
    return wait_req(c, &r, rc, "MPI_Ireduce_scatter_block", "reduce-scatter", msg, len);
}

static pl_status m_allgather(void *vc, const float *in, float *out, int64_t n, char *msg, size_t len) {
    mpi_ctx *c = vc;
    int size = 1;
    MPI_Comm_size(c->comm, &size);
    if (n * size > 0x7fffffff)
        return pl_fail(msg, len, PL_ERR_INVALID, "an MPI all-gather of %lld x %d", (long long)n, size);
    pl_status st;
    const void *src = no_overlap(c, in, (size_t)n * 4, out, (size_t)n * size * 4, msg, len, &st);
    if (!src) return st;
    MPI_Request r;
    int rc = MPI_Iallgather(src, (int)n, MPI_FLOAT, out, (int)n, MPI_FLOAT, c->comm, &r);
    return wait_req(c, &r, rc, "MPI_Iallgather", "all-gather", msg, len);
}

static pl_status m_broadcast(void *vc, void *buf, int64_t bytes, int root, char *msg, size_t len) {
    mpi_ctx *c = vc;
    if (bytes > 0x7fffffff)
        return pl_fail(msg, len, PL_ERR_INVALID, "an MPI broadcast of %lld bytes", (long long)bytes);
    MPI_Request r;
    return wait_req(c, &r, MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, c->comm, &r), "MPI_Ibcast", "broadcast", msg,
                    len);
}

static void m_destroy(void *vc) {
    mpi_ctx *c = vc;
    if (!c) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    free(c->tmp);
    free(c);
}

static pl_status make_ctx(MPI_Comm comm, double timeout_s, mpi_ctx **out, char *msg, size_t len) {
    int rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
        MPI_Comm_free(&comm);
        return mpi_fail(rc, "MPI_Comm_set_errhandler", msg, len);
    }
    mpi_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        MPI_Comm_free(&comm);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    }
    c->comm = comm;
    c->timeout_s = timeout_s;
    *out = c;
    return PL_OK;
}

static pl_status m_split(void *vc, int color, int key, void **sub_ctx, int *sub_rank, int *sub_size, char *msg,
                         size_t len) {
    mpi_ctx *c = vc;
    MPI_Comm nc = MPI_COMM_NULL;
    *sub_ctx = NULL;
    int rc = MPI_Comm_split(c->comm, color < 0 ? MPI_UNDEFINED : color, key, &nc);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Comm_split", msg, len);
    if (nc == MPI_COMM_NULL) return PL_OK;
    MPI_Comm_rank(nc, sub_rank);
    MPI_Comm_size(nc, sub_size);
    mpi_ctx *s = NULL;
    pl_status st = make_ctx(nc, c->timeout_s, &s, msg, len);
    if (st == PL_OK) *sub_ctx = s;
    return st;
}

static const dist_transport mpi_transport = {"mpi",         m_barrier, m_allreduce, m_reduce_scatter, m_allgather,
                                             m_broadcast, m_split,   m_destroy};

int dist_mpi_built(void) { return 1; }

pl_status dist_mpi_world(double timeout_s, dist_group **out, char *msg, size_t len) {
    *out = NULL;
    if (!(timeout_s > 0)) return pl_fail(msg, len, PL_ERR_INVALID, "bad MPI group timeout %g s", timeout_s);
    int inited = 0, rc;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        if ((rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided)) != MPI_SUCCESS)
            return pl_fail(msg, len, PL_ERR_IO, "MPI_Init_thread failed (code %d)", rc);
        g_we_initialised = 1;
        if (provided < MPI_THREAD_SERIALIZED)
            return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "this MPI gives thread level %d, placer needs SERIALIZED",
                           provided);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm w = MPI_COMM_NULL;
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &w)) != MPI_SUCCESS) return mpi_fail(rc, "MPI_Comm_dup", msg, len);
    int rank = 0, size = 1;
    MPI_Comm_rank(w, &rank);
    MPI_Comm_size(w, &size);
    mpi_ctx *c = NULL;
    pl_status st = make_ctx(w, timeout_s, &c, msg, len);
    if (st != PL_OK) return st;
    return dist_group_from_transport(rank, size, timeout_s, &mpi_transport, c, out, msg, len);
}

void dist_mpi_finalize(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (g_we_initialised && !fin) MPI_Finalize();
}

#else /* no MPI in this build */

int dist_mpi_built(void) { return 0; }

pl_status dist_mpi_world(double timeout_s, dist_group **out, char *msg, size_t len) {
    (void)timeout_s;
    *out = NULL;
    return pl_fail(msg, len, PL_ERR_UNSUPPORTED,
                   "this placer was built without MPI (install libopenmpi-dev and rebuild), so it cannot run under "
                   "mpirun; use --procs N instead");
}

void dist_mpi_finalize(void) {}

#endif
