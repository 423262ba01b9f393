/* dist_dp.c: the batch slice of a data-parallel rank, and the gradient sync
 * and AdamW update of a replica, plain or ZeRO-1 (dist_dp.h). */
#include "dist_dp.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/layout.h"
#include "dist_device.h"
#include "dist_program_state.h"
#include "program_internal.h"

pl_status hw_dp_slice(int dp, int rank, int global_batch, int *first, int *count, char *msg, size_t len) {
    if (dp < 1 || dp > 1 << 20 || global_batch < 1 || global_batch % dp != 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "dp = %d must divide the batch of %d samples", dp, global_batch);
    if (rank < 0 || rank >= dp) return pl_fail(msg, len, PL_ERR_INVALID, "rank %d is not in [0, %d)", rank, dp);
    layout l;
    layout_default(&l);
    l.dp = dp;
    l.global_batch = global_batch;
    l.micro_batch = global_batch / dp;
    layout_coords c = layout_rank_coords(&l, rank);
    int64_t group[1 << 10];
    if (dp > (int)(sizeof group / sizeof group[0]))
        return pl_fail(msg, len, PL_ERR_INVALID, "dp = %d is more replicas than supported", dp);
    int n = layout_group_ranks(&l, rank, LAYOUT_DIM_DP, group);
    if (n != dp) return pl_fail(msg, len, PL_ERR_INVALID, "the DP group of rank %d has %d ranks, not %d", rank, n, dp);
    for (int i = 0; i < n; i++)
        if (group[i] != i)
            return pl_fail(msg, len, PL_ERR_INVALID, "the DP group of rank %d is not ranks 0..%d", rank, dp - 1);
    const int idx = c.c[LAYOUT_DIM_DP];
    *count = global_batch / dp;
    *first = idx * *count;
    return PL_OK;
}

/* ---- the update of a replica (dist_dp.h) ---- */


pl_status hw_dp_check_opts(int zero, int64_t bucket_bytes, dist_group *dp, int bf16, int *zero_out,
                           int64_t *bucket_floats, char *msg, size_t len) {
    *zero_out = 0;
    *bucket_floats = HW_DP_BUCKET_DEFAULT / 4;
    if (zero < 0 || zero > 1) return pl_fail(msg, len, PL_ERR_INVALID, "zero = %d: the engine runs ZeRO 0 or 1", zero);
    if (bucket_bytes < 0) return pl_fail(msg, len, PL_ERR_INVALID, "a bucket of %lld bytes", (long long)bucket_bytes);
    if (bucket_bytes > 0) *bucket_floats = bucket_bytes / 4 > 0 ? bucket_bytes / 4 : 1;
    (void)bf16; /* ZeRO-1 runs in every precision: the bf16 copy is remade from the gathered weights */
    if (zero == 1 && dp && dist_size(dp) > 1) *zero_out = 1;
    return PL_OK;
}

/* ZeRO-1 on device buffers (CUDA: the device collectives, dist_device.h).
 * The same steps as the host path below, on a device buffer of dp S
 * floats: the program's, in the arena (off_zero1, so the peak counts it); a
 * program compiled without one (the collectives' choice changed under it)
 * falls back to the collectives' own scratch, outside the arena. Copies are
 * a zero and an add on the compute stream (the backend has no
 * device-to-device copy op; 0 + x is x). */
static pl_status zero1_device(struct hw_program *p, hw_parallel_state *s, int d, const hw_adamw_args *a, char *msg,
                              size_t len) {
    hw_backend *be = p->e->be;
    const hw_backend_ops *ops = be->ops;
    hw_program_dev *pd = &p->dev[d];
    dist_device *xd = s->xd_dp[d];
    char *base = pd->base;
    float *params = (float *)(base + pd->off_params), *grads = (float *)(base + pd->off_grads);
    float *m = (float *)(base + pd->off_m), *v = (float *)(base + pd->off_v);
    const int64_t n = pd->param_floats, S = pd->moment_floats;
    const int dp = dist_size(s->dp), rank = dist_rank(s->dp);
    const int64_t lo = (int64_t)rank * S, cnt = lo >= n ? 0 : (n - lo < S ? n - lo : S);
    void *scratch = pd->off_zero1 >= 0 ? (void *)(base + pd->off_zero1) : NULL;
    pl_status st = PL_OK;
    if (!scratch && (st = dist_device_scratch(xd, S * dp * 4, &scratch, msg, len)) != PL_OK) return st;
    float *buf = scratch, *mine = buf + lo;
    hw_adamw_args shard = *a;
    shard.p16 = NULL; /* the bf16 copy is remade below from the gathered weights */
#define DEV(x)                                                                       \
    do {                                                                             \
        if ((st = (x)) != PL_OK) return pl_fail(msg, len, st, "ZeRO-1: %s", be->err); \
    } while (0)
    DEV(ops->zero(be, d, buf, S * dp * 4));
    DEV(ops->add(be, d, buf, grads, n));
    if ((st = dist_device_reduce_scatter_f32(xd, buf, mine, S, 1, msg, len)) != PL_OK) return st;
    if (cnt > 0) {
        DEV(ops->zero(be, d, grads + lo, cnt * 4));
        DEV(ops->add(be, d, grads + lo, mine, cnt));
        DEV(ops->adamw(be, d, params + lo, grads + lo, m, v, cnt, &shard));
    } /* else no element of the shard is real: nothing to update (an empty launch is an error on CUDA) */
    DEV(ops->zero(be, d, mine, S * 4));
    if (cnt > 0) DEV(ops->add(be, d, mine, params + lo, cnt));
    if ((st = dist_device_allgather_f32(xd, mine, buf, S, msg, len)) != PL_OK) return st;
    DEV(ops->zero(be, d, params, n * 4));
    DEV(ops->add(be, d, params, buf, n));
    if (a->p16) {
        /* bf16: every rank's copy of the weights from the gathered fp32
         * weights, through the host (s->dp_buf holds n floats; a round trip
         * a step, simple rather than fast) */
        DEV(ops->download(be, d, s->dp_buf, params, n * 4));
        DEV(hw_upload_copy16(be, d, a->p16, s->dp_buf, n));
    }
#undef DEV
    return PL_OK;
}

pl_status hw_dp_update(struct hw_program *p, hw_parallel_state *s, int d, char *msg, size_t len) {
    hw_backend *be = p->e->be;
    const hw_backend_ops *ops = be->ops;
    hw_program_dev *pd = &p->dev[d];
    char *base = pd->base;
    float *buf = s->dp_buf;
    float *params = (float *)(base + pd->off_params), *grads = (float *)(base + pd->off_grads);
    float *m = (float *)(base + pd->off_m), *v = (float *)(base + pd->off_v);
    const int64_t n = pd->param_floats;
    const int dp = dist_size(s->dp), rank = dist_rank(s->dp);
    const float ranks = (float)dp;
    hw_adamw_args a = {p->adamw.lr, p->adamw.beta1, p->adamw.beta2, p->adamw.eps, p->adamw.weight_decay, p->t,
                       (int *)(base + pd->off_step),
                       pd->off_params16 >= 0 ? (void *)(base + pd->off_params16) : NULL};
    pl_status st = PL_OK;
    if (n <= 0) return PL_OK;
    if (!p->split.zero) {
        /* the program's HI_DP_REDUCE buckets reduced the gradients already
         * (overlap: the update hook joined them first, hw_dp_join) */
        if (s->dp_overlap > 0 && (st = hw_dp_join(p, s, d, msg, len)) != PL_OK) return st; /* a no-op when joined */
        return ops->adamw(be, d, params, grads, m, v, n, &a);
    }
    if (s->xd_dp[d]) return zero1_device(p, s, d, &a, msg, len);
    /* ZeRO-1: shard `rank` of S floats, [lo, lo + cnt) of the buffer */
    const int64_t S = pd->moment_floats, lo = (int64_t)rank * S;
    const int64_t cnt = lo >= n ? 0 : (n - lo < S ? n - lo : S);
    float *mine = buf + lo;
    if ((st = ops->download(be, d, buf, grads, n * 4)) != PL_OK) return st;
    memset(buf + n, 0, sizeof(float) * (size_t)(S * dp - n));
    if ((st = dist_reduce_scatter_f32(s->dp, buf, mine, S, msg, len)) != PL_OK) return st;
    for (int64_t i = 0; i < cnt; i++) mine[i] /= ranks;
    if (cnt > 0 && (st = ops->upload(be, d, grads + lo, mine, cnt * 4)) != PL_OK) return st;
    /* the update of the shard only (the step counter still counts once) */
    hw_adamw_args shard = a;
    shard.p16 = NULL; /* bf16: the copy is remade below from the gathered weights */
    if ((st = ops->adamw(be, d, params + (cnt > 0 ? lo : 0), grads + (cnt > 0 ? lo : 0), m, v, cnt, &shard)) != PL_OK)
        return st;
    if (cnt > 0 && (st = ops->download(be, d, mine, params + lo, cnt * 4)) != PL_OK) return st;
    memset(mine + cnt, 0, sizeof(float) * (size_t)(S - cnt));
    if ((st = dist_allgather_f32(s->dp, mine, buf, S, msg, len)) != PL_OK) return st;
    if ((st = ops->upload(be, d, params, buf, n * 4)) != PL_OK) return st;
    return a.p16 ? hw_upload_copy16(be, d, a.p16, buf, n) : PL_OK; /* bf16: every weight's copy, from the gathered */
}

/* ---- overlap: the comm thread (dist_dp.h) ---- */

typedef struct {
    int d;
    int64_t off, n; /* floats of device d's gradients; host copy at host + dev_off[d] + off */
} dp_job;

struct hw_dp_comm {
    dist_group *g;             /* the program's dp group (borrowed) */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* jobs queued / done / backward progress / quit */
    dp_job *jobs;              /* this step's buckets, in issue order */
    int n_jobs, cap_jobs;
    int next, done;            /* jobs taken by the thread, jobs finished */
    int dev_last[HW_MAX_DEVICES]; /* n_jobs when device d's last bucket was queued */
    int quit;
    pl_status st;              /* the step's first failure */
    char msg[256];
    float *host;               /* every used device's gradients, device d's at dev_off[d] */
    int64_t dev_off[HW_MAX_DEVICES];
    float ranks;
    /* the test hook (dist_dp.h) */
    int hold;                  /* PLACER_TEST_DP_HOLD=1 */
    int bwd_total, bwd_seen;   /* HI_BWD instructions of a step, issued so far this step */
    int joining;               /* the main thread has reached a join this step */
    int64_t tick;
    hw_dp_overlap_trace cur, last;
};

static void *comm_main(void *arg) {
    hw_dp_comm *c = arg;
    char msg[256];
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->quit && c->next == c->n_jobs) pthread_cond_wait(&c->cv, &c->mu);
        if (c->next == c->n_jobs) break; /* quit, nothing queued */
        const int k = c->next++;
        const dp_job j = c->jobs[k];
        if (k == 0 && c->hold) {
            /* the test hook: bucket 0 waits (at most 30 s) until the main
             * thread has issued the step's last backward call, or reached a
             * join (a pipeline's last stage updates before the first stage's
             * backward ends: its join needs bucket 0) */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 30;
            int rc = 0;
            while (c->bwd_seen < c->bwd_total && !c->joining && rc != ETIMEDOUT)
                rc = pthread_cond_timedwait(&c->cv, &c->mu, &until);
            c->cur.held = c->bwd_seen >= c->bwd_total ? 1 : c->joining ? 2 : -1;
        }
        pl_status st = c->st;
        if (k == 0) c->cur.start0 = ++c->tick;
        pthread_mutex_unlock(&c->mu);
        if (st == PL_OK) {
            /* after a failure the rest are skipped: the group is broken anyway */
            float *buf = c->host + c->dev_off[j.d] + j.off;
            msg[0] = '\0';
            st = dist_allreduce_f32(c->g, buf, j.n, DIST_SUM, msg, sizeof msg);
            if (st == PL_OK)
                for (int64_t i = 0; i < j.n; i++) buf[i] /= c->ranks;
        }
        pthread_mutex_lock(&c->mu);
        if (k == 0) c->cur.end0 = ++c->tick;
        if (st != PL_OK && c->st == PL_OK) {
            c->st = st;
            memcpy(c->msg, msg, sizeof c->msg);
        }
        c->done++;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

void hw_dp_comm_destroy(hw_dp_comm *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->quit = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->th, NULL); /* a collective in flight ends within the group's timeout */
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->jobs);
    free(c->host);
    free(c);
}

/* How program p's buckets overlap (decided at the first bucket): 1 the comm
 * thread (host path), 2 started NCCL all-reduces on the communicator's
 * stream (every device's dp collectives over NCCL), -1 not at all: the env
 * switch, or an MPI dp group beside a tp group (dist_mpi.c asks MPI for
 * MPI_THREAD_SERIALIZED only: the main thread's tp calls and the comm
 * thread's dp calls would be concurrent). */
static int want_overlap(const struct hw_program *p, const hw_parallel_state *s) {
    const char *e = getenv("PLACER_DP_OVERLAP");
    if (e && !strcmp(e, "0")) return -1;
    for (int d = 0; d < p->n_dev; d++)
        if (s->xd_dp[d] && strcmp(dist_device_transport(s->xd_dp[d]), "nccl") == 0) return 2;
    if (s->tp.g && !strcmp(dist_transport_name(s->dp), "mpi")) return -1;
    return 1;
}

static pl_status comm_create(struct hw_program *p, hw_parallel_state *s, char *msg, size_t len) {
    hw_dp_comm *c = calloc(1, sizeof *c);
    if (!c) return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    int64_t total = 0;
    for (int d = 0; d < p->n_dev; d++) {
        c->dev_off[d] = total;
        if (p->dev[d].used) total += p->dev[d].param_floats;
        for (int i = 0; i < p->dev[d].n_ins; i++) c->bwd_total += p->dev[d].ins[i].kind == HI_BWD;
    }
    c->host = malloc(sizeof(float) * (size_t)(total > 0 ? total : 1));
    c->g = s->dp;
    c->ranks = (float)dist_size(s->dp);
    const char *h = getenv("PLACER_TEST_DP_HOLD");
    c->hold = h && !strcmp(h, "1");
    if (!c->host) {
        free(c);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory for %lld staged gradients", (long long)total);
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (pthread_create(&c->th, NULL, comm_main, c) != 0) {
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
        free(c->host);
        free(c);
        return pl_fail(msg, len, PL_ERR_NOMEM, "could not start the dp communication thread");
    }
    s->dp_comm = c;
    return PL_OK;
}

/* The synchronous bucket: all-reduced before the instruction returns. */
static pl_status reduce_sync(struct hw_program *p, hw_parallel_state *s, int d, int64_t off, int64_t n, char *msg,
                             size_t len) {
    hw_backend *be = p->e->be;
    hw_program_dev *pd = &p->dev[d];
    float *grads = (float *)((char *)pd->base + pd->off_grads) + off, *buf = s->dp_buf;
    const float ranks = (float)dist_size(s->dp);
    if (s->xd_dp[d]) /* device buffers (CUDA) */
        return dist_device_allreduce_f32(s->xd_dp[d], grads, n, DIST_SUM, 1, msg, len);
    pl_status st = be->ops->download(be, d, buf, grads, n * 4);
    if (st == PL_OK) st = dist_allreduce_f32(s->dp, buf, n, DIST_SUM, msg, len);
    if (st != PL_OK) return st;
    for (int64_t i = 0; i < n; i++) buf[i] /= ranks;
    return be->ops->upload(be, d, grads, buf, n * 4);
}

pl_status hw_dp_reduce(struct hw_program *p, hw_parallel_state *s, int d, int64_t off, int64_t n, char *msg,
                       size_t len) {
    hw_backend *be = p->e->be;
    hw_program_dev *pd = &p->dev[d];
    if (off < 0 || n <= 0 || off + n > pd->param_floats)
        return pl_fail(msg, len, PL_ERR_INVALID, "a dp bucket [%lld, %lld) outside device %d's %lld gradients",
                       (long long)off, (long long)(off + n), d, (long long)pd->param_floats);
    if (s->dp_overlap == 0) s->dp_overlap = want_overlap(p, s);
    if (s->dp_overlap < 0) return reduce_sync(p, s, d, off, n, msg, len);
    if (s->dp_overlap == 2) { /* NCCL: on the comm stream, finished at the join */
        int started = 0;
        float *g = (float *)((char *)pd->base + pd->off_grads) + off;
        pl_status sst = dist_device_allreduce_start_f32(s->xd_dp[d], g, n, 1, &started, msg, len);
        if (sst == PL_OK && !started) sst = pl_fail(msg, len, PL_ERR_INVALID, "device %d's dp collectives are not NCCL's", d);
        return sst;
    }
    pl_status st = s->dp_comm ? PL_OK : comm_create(p, s, msg, len);
    if (st != PL_OK) return st;
    hw_dp_comm *c = s->dp_comm;
    /* the bucket's final gradients to the host (the backend's download waits for the device's work) */
    const float *grads = (const float *)((char *)pd->base + pd->off_grads) + off;
    if ((st = be->ops->download(be, d, c->host + c->dev_off[d] + off, grads, n * 4)) != PL_OK) return st;
    pthread_mutex_lock(&c->mu);
    if (c->n_jobs == c->cap_jobs) {
        int cap = c->cap_jobs ? 2 * c->cap_jobs : 64;
        dp_job *nj = realloc(c->jobs, sizeof *nj * (size_t)cap);
        if (!nj) {
            pthread_mutex_unlock(&c->mu);
            return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory for the dp buckets");
        }
        c->jobs = nj;
        c->cap_jobs = cap;
    }
    if (c->n_jobs == 0) c->cur.issued0 = ++c->tick;
    c->jobs[c->n_jobs++] = (dp_job){d, off, n};
    c->dev_last[d] = c->n_jobs;
    c->cur.buckets = c->n_jobs;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return PL_OK;
}

pl_status hw_dp_join(struct hw_program *p, hw_parallel_state *s, int d, char *msg, size_t len) {
    hw_dp_comm *c = s->dp_comm;
    hw_backend *be = p->e->be;
    if (s->dp_overlap == 2) return s->xd_dp[d] ? dist_device_finish(s->xd_dp[d], msg, len) : PL_OK;
    if (!c) return PL_OK;
    float *grads = (float *)((char *)p->dev[d].base + p->dev[d].off_grads);
    pthread_mutex_lock(&c->mu);
    if (!c->cur.join) c->cur.join = ++c->tick;
    c->joining = 1;
    pthread_cond_broadcast(&c->cv);
    while (c->done < c->dev_last[d]) pthread_cond_wait(&c->cv, &c->mu); /* each bounded by the group's timeout */
    pl_status st = c->st;
    if (st != PL_OK) pl_fail(msg, len, st, "%s", c->msg);
    const int n_jobs = c->dev_last[d];
    pthread_mutex_unlock(&c->mu);
    for (int k = 0; k < n_jobs && st == PL_OK; k++) {
        dp_job *j = &c->jobs[k]; /* jobs [0, n_jobs) are done: the main thread alone touches them now */
        if (j->d != d || j->n == 0) continue;
        st = be->ops->upload(be, d, grads + j->off, c->host + c->dev_off[d] + j->off, j->n * 4);
        j->n = 0; /* uploaded: a second join of d does nothing */
    }
    return st;
}

void hw_dp_note_bwd(hw_parallel_state *s) {
    hw_dp_comm *c = s->dp_comm;
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->cur.last_bwd = ++c->tick;
    if (++c->bwd_seen >= c->bwd_total) pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

pl_status hw_dp_drain(struct hw_program *p, hw_parallel_state *s, char *msg, size_t len) {
    hw_dp_comm *c = s->dp_comm;
    if (s->dp_overlap == 2) {
        pl_status st = PL_OK;
        for (int d = 0; d < p->n_dev; d++) {
            pl_status s2 = s->xd_dp[d] ? dist_device_finish(s->xd_dp[d], msg, len) : PL_OK;
            if (st == PL_OK) st = s2;
        }
        return st;
    }
    if (!c) return PL_OK;
    pthread_mutex_lock(&c->mu);
    c->joining = 1; /* a held bucket 0 (the test hook) goes now: a failed step may never reach a join */
    pthread_cond_broadcast(&c->cv);
    while (c->done < c->n_jobs) pthread_cond_wait(&c->cv, &c->mu);
    pl_status st = c->st;
    if (st != PL_OK) pl_fail(msg, len, st, "%s", c->msg);
    c->last = c->cur;
    memset(&c->cur, 0, sizeof c->cur);
    c->n_jobs = c->next = c->done = 0;
    memset(c->dev_last, 0, sizeof c->dev_last);
    c->bwd_seen = c->joining = 0;
    c->st = PL_OK;
    pthread_mutex_unlock(&c->mu);
    return st;
}

int hw_dp_overlap_get(const struct hw_program *p, hw_dp_overlap_trace *t) {
    memset(t, 0, sizeof *t);
    hw_dp_comm *c = p->par_state ? p->par_state->dp_comm : NULL;
    if (!c) return 0;
    pthread_mutex_lock(&c->mu);
    *t = c->last;
    pthread_mutex_unlock(&c->mu);
    return 1;
}
