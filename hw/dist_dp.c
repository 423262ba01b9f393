/* dist_dp.c: the batch slice of a data-parallel rank, and the gradient sync
 * and AdamW update of a replica, plain or ZeRO-1 (dist_dp.h). */
#include "dist_dp.h"

#include <stdint.h>
#include <string.h>

#include "../core/layout.h"
#include "dist_device.h"
#include "plan_internal.h"

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


int64_t hw_dp_shard_floats(int64_t n, int dp) { return dp > 1 ? (n + dp - 1) / dp : n; }

pl_status hw_dp_check_opts(const hw_plan_opts *o, int bf16, int *zero, int64_t *bucket_floats, char *msg,
                           size_t len) {
    *zero = 0;
    *bucket_floats = HW_DP_BUCKET_DEFAULT / 4;
    if (o->zero < 0 || o->zero > 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "zero = %d: the engine runs ZeRO 0 or 1", o->zero);
    if (o->bucket_bytes < 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "a bucket of %lld bytes", (long long)o->bucket_bytes);
    if (o->bucket_bytes > 0) *bucket_floats = o->bucket_bytes / 4 > 0 ? o->bucket_bytes / 4 : 1;
    if (o->zero == 1 && o->dp && dist_size(o->dp) > 1) {
        if (bf16)
            return pl_fail(msg, len, PL_ERR_UNSUPPORTED,
                           "ZeRO-1 runs in fp32 only (the bf16 weight copy of the gathered shards is not wired)");
        *zero = 1;
    }
    return PL_OK;
}

/* ZeRO-1 on device buffers (CUDA: the device collectives, dist_device.h).
 * The same steps as the host path below, on a device scratch of dp S
 * floats; copies are a zero and an add on the compute stream (the backend
 * has no device-to-device copy op; 0 + x is x). */
static pl_status zero1_device(struct hw_plan *p, int d, const hw_adamw_args *a, char *msg, size_t len) {
    hw_backend *be = p->e->be;
    const hw_backend_ops *ops = be->ops;
    hw_plan_dev *pd = &p->dev[d];
    dist_device *xd = p->xd_dp[d];
    char *base = pd->base;
    float *params = (float *)(base + pd->off_params), *grads = (float *)(base + pd->off_grads);
    float *m = (float *)(base + pd->off_m), *v = (float *)(base + pd->off_v);
    const int64_t n = pd->param_floats, S = pd->moment_floats;
    const int dp = dist_size(p->dp), rank = dist_rank(p->dp);
    const int64_t lo = (int64_t)rank * S, cnt = lo >= n ? 0 : (n - lo < S ? n - lo : S);
    void *scratch = NULL;
    pl_status st = dist_device_scratch(xd, S * dp * 4, &scratch, msg, len);
    if (st != PL_OK) return st;
    float *buf = scratch, *mine = buf + lo;
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
        DEV(ops->adamw(be, d, params + lo, grads + lo, m, v, cnt, a));
    } /* else no element of the shard is real: nothing to update (an empty launch is an error on CUDA) */
    DEV(ops->zero(be, d, mine, S * 4));
    if (cnt > 0) DEV(ops->add(be, d, mine, params + lo, cnt));
    if ((st = dist_device_allgather_f32(xd, mine, buf, S, msg, len)) != PL_OK) return st;
    DEV(ops->zero(be, d, params, n * 4));
    DEV(ops->add(be, d, params, buf, n));
#undef DEV
    return PL_OK;
}

pl_status hw_dp_update(struct hw_plan *p, int d, char *msg, size_t len) {
    hw_backend *be = p->e->be;
    const hw_backend_ops *ops = be->ops;
    hw_plan_dev *pd = &p->dev[d];
    char *base = pd->base;
    float *buf = p->dp_buf;
    float *params = (float *)(base + pd->off_params), *grads = (float *)(base + pd->off_grads);
    float *m = (float *)(base + pd->off_m), *v = (float *)(base + pd->off_v);
    const int64_t n = pd->param_floats;
    const int dp = dist_size(p->dp), rank = dist_rank(p->dp);
    const float ranks = (float)dp;
    hw_adamw_args a = {p->adamw.lr, p->adamw.beta1, p->adamw.beta2, p->adamw.eps, p->adamw.weight_decay, p->t,
                       (int *)(base + pd->off_step),
                       pd->off_params16 >= 0 ? (void *)(base + pd->off_params16) : NULL};
    pl_status st = PL_OK;
    if (n <= 0) return PL_OK;
    if (!p->zero) /* the plan's HI_DP_REDUCE buckets reduced the gradients already */
        return ops->adamw(be, d, params, grads, m, v, n, &a);
    if (p->xd_dp[d]) return zero1_device(p, d, &a, msg, len);
    /* ZeRO-1: shard `rank` of S floats, [lo, lo + cnt) of the buffer */
    const int64_t S = pd->moment_floats, lo = (int64_t)rank * S;
    const int64_t cnt = lo >= n ? 0 : (n - lo < S ? n - lo : S);
    float *mine = buf + lo;
    if ((st = ops->download(be, d, buf, grads, n * 4)) != PL_OK) return st;
    memset(buf + n, 0, sizeof(float) * (size_t)(S * dp - n));
    if ((st = dist_reduce_scatter_f32(p->dp, buf, mine, S, msg, len)) != PL_OK) return st;
    for (int64_t i = 0; i < cnt; i++) mine[i] /= ranks;
    if (cnt > 0 && (st = ops->upload(be, d, grads + lo, mine, cnt * 4)) != PL_OK) return st;
    /* the update of the shard only (the step counter still counts once) */
    if ((st = ops->adamw(be, d, params + (cnt > 0 ? lo : 0), grads + (cnt > 0 ? lo : 0), m, v, cnt, &a)) != PL_OK)
        return st;
    if (cnt > 0 && (st = ops->download(be, d, mine, params + lo, cnt * 4)) != PL_OK) return st;
    memset(mine + cnt, 0, sizeof(float) * (size_t)(S - cnt));
    if ((st = dist_allgather_f32(p->dp, mine, buf, S, msg, len)) != PL_OK) return st;
    return ops->upload(be, d, params, buf, n * 4);
}

pl_status hw_dp_reduce(struct hw_plan *p, int d, int64_t off, int64_t n, char *msg, size_t len) {
    hw_backend *be = p->e->be;
    hw_plan_dev *pd = &p->dev[d];
    float *grads = (float *)((char *)pd->base + pd->off_grads) + off, *buf = p->dp_buf;
    const float ranks = (float)dist_size(p->dp);
    if (off < 0 || n <= 0 || off + n > pd->param_floats)
        return pl_fail(msg, len, PL_ERR_INVALID, "a dp bucket [%lld, %lld) outside device %d's %lld gradients",
                       (long long)off, (long long)(off + n), d, (long long)pd->param_floats);
    if (p->xd_dp[d]) /* device buffers (CUDA) */
        return dist_device_allreduce_f32(p->xd_dp[d], grads, n, DIST_SUM, 1, msg, len);
    pl_status st = be->ops->download(be, d, buf, grads, n * 4);
    if (st == PL_OK) st = dist_allreduce_f32(p->dp, buf, n, DIST_SUM, msg, len);
    if (st != PL_OK) return st;
    for (int64_t i = 0; i < n; i++) buf[i] /= ranks;
    return be->ops->upload(be, d, grads, buf, n * 4);
}
