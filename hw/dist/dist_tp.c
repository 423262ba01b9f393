/*
 * dist_tp.c: the tensor-parallel node calls and the shard maps (see
 * dist_tp.h for the split and its collectives). The node math is nodes.h's
 * (double accumulation, fp32 storage); what this file adds is the slicing,
 * the collectives between the partial products and the biases, and the
 * vocabulary-parallel loss.
 *
 * Scratch layout of a call (hw_node_mem_floats_tp sizes it): the node's
 * own scratch first (attention 4 N Cl forward, 8 N Cl + b nh T T backward;
 * MLP N F/t backward; in bf16 also its rounded (N, C) copies, X below,
 * nodes.h), then full-width (N, C) blocks: the partial product
 * (not in the head's forward, which writes its logits directly), and with
 * sp only the gathered input and the gathered output gradient.
 */
#include "dist_tp.h"

#include <math.h>
#include <string.h>

#include "../core/layout.h"
#include "dist_group.h"
#include "nodes.h"
#include "param_memory.h"
#include "util.h"

pl_status hw_tp_check(const gpt_config *cfg, int t, int sp, int64_t tokens, char *msg, size_t len) {
    if (t < 1 || t > DIST_MAX_RANKS)
        return pl_fail(msg, len, PL_ERR_INVALID, "tensor parallelism over %d ranks (1 to %d)", t, DIST_MAX_RANKS);
    if (cfg->n_heads % t != 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "tp = %d must divide the %d attention heads", t, cfg->n_heads);
    if ((4 * (int64_t)cfg->d_model) % t != 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "tp = %d must divide the MLP's %lld hidden units", t,
                       (long long)(4 * (int64_t)cfg->d_model));
    if (sp && t > 1 && tokens % t != 0)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "with sequence parallelism tp = %d must divide the %lld tokens of a micro-batch", t,
                       (long long)tokens);
    return PL_OK;
}

pl_status hw_tp_dp_groups(dist_group *world, int tp, int dp, dist_group **tp_g, dist_group **dp_g, int *dp_index,
                          char *msg, size_t len) {
    *tp_g = *dp_g = NULL;
    *dp_index = 0;
    const int n = dist_size(world), rank = dist_rank(world);
    if (tp < 1 || dp < 1 || (int64_t)tp * dp != n)
        return pl_fail(msg, len, PL_ERR_INVALID, "tp = %d times dp = %d is not the %d ranks launched", tp, dp, n);
    layout l;
    layout_default(&l);
    l.tp = tp;
    l.dp = dp;
    const layout_coords co = layout_rank_coords(&l, rank);
    *dp_index = co.c[LAYOUT_DIM_DP];
    int64_t peers[DIST_MAX_RANKS];
    pl_status st = PL_OK;
    if (tp > 1) {
        /* the group's colour: its first rank in the grid, the same for all its members */
        layout_group_ranks(&l, rank, LAYOUT_DIM_TP, peers);
        st = dist_group_split(world, (int)peers[0], co.c[LAYOUT_DIM_TP], tp_g, msg, len);
    }
    if (st == PL_OK && dp > 1) {
        layout_group_ranks(&l, rank, LAYOUT_DIM_DP, peers);
        st = dist_group_split(world, (int)peers[0], co.c[LAYOUT_DIM_DP], dp_g, msg, len);
    }
    if (st != PL_OK) {
        dist_group_destroy(*tp_g);
        dist_group_destroy(*dp_g);
        *tp_g = *dp_g = NULL;
    }
    return st;
}

/* ---- the replicated tensors of a shard ---- */

int hw_tp_replicated(const graph *g, int node, int size, int64_t *off, int64_t *n) {
    hw_param_map ll;
    hw_node_param_map_tp(g, node, size, &ll);
    switch (g->nodes[node].kind) {
    case OP_EMBEDDING:
    case OP_LAYERNORM:
        for (int k = 0; k < ll.n; k++) {
            off[k] = ll.off[k];
            n[k] = ll.size[k];
        }
        return ll.n;
    case OP_ATTENTION:
    case OP_MLP:
        off[0] = ll.off[3];
        n[0] = ll.size[3];
        return 1;
    default: return 0;
    }
}

/* ---- collectives between the partial products ---- */

/* The group's all-gather of the rank's Ns x C rows of x into full (N x C). */
static pl_status tp_allgather(const hw_tp *tp, float *full, const float *x, int64_t slice, char *msg, size_t len) {
    return dist_allgather_f32(tp->g, x, full, slice, msg, len);
}

/* The sum over the group of part (size * slice floats), this rank's slice
 * of it left at part + rank * slice (*mine points there). */
static pl_status tp_reduce_scatter(const hw_tp *tp, float *part, int64_t slice, const float **mine, char *msg,
                                   size_t len) {
    float *out = part + (int64_t)tp->rank * slice;
    *mine = out;
    return dist_reduce_scatter_f32(tp->g, part, out, slice, msg, len);
}

/* The input of a column-parallel matmul, all tokens: x itself without sp,
 * else gathered into buf. */
static pl_status gather_input(const hw_tp *tp, const float *x, float *buf, int64_t N, int C, const float **full,
                              char *msg, size_t len) {
    if (!tp->sp) {
        *full = x;
        return PL_OK;
    }
    *full = buf;
    return tp_allgather(tp, buf, x, N / tp->size * C, msg, len);
}

/* Reduce the partial (N, C) product over the group into out: all tokens
 * (all-reduce) or the rank's (reduce-scatter, sp); out = (acc ? out + : )
 * that, plus bias (C) or NULL on every row. */
static pl_status reduce_partial(const hw_tp *tp, float *out, float *part, int64_t N, int C, const float *bias, int acc,
                                char *msg, size_t len) {
    const int64_t rows = tp->sp ? N / tp->size : N;
    const float *src = part;
    pl_status st = tp->sp ? tp_reduce_scatter(tp, part, rows * C, &src, msg, len)
                          : dist_allreduce_f32(tp->g, part, N * C, DIST_SUM, msg, len);
    if (st != PL_OK) return st;
    for (int64_t r = 0; r < rows; r++) {
        const float *s = src + r * C;
        float *o = out + r * C;
        for (int c = 0; c < C; c++) {
            float v = bias ? s[c] + bias[c] : s[c];
            o[c] = acc ? o[c] + v : v;
        }
    }
    return PL_OK;
}

/* dbias (C) += column sums of d (rows x C), in double. */
static void bias_grad(float *dbias, const float *d, int64_t rows, int C) {
    for (int c = 0; c < C; c++) {
        double s = 0.0;
        for (int64_t r = 0; r < rows; r++) s += d[r * C + c];
        dbias[c] += (float)s;
    }
}

#define P(c, k) ((c)->params + (c)->pl.off[k])
#define P16(c, k) ((const float *)(c)->params16 + (c)->pl.off[k]) /* bf16: the rounded copy (CPU) */
#define G(c, k) ((c)->grads + (c)->pl.off[k])
#define S(c, k) ((c)->saved + (c)->mem.saved_off[k])

/* ---- the vocabulary-parallel loss ---- */

static pl_status loss_forward(const hw_tp *tp, const hw_node_call *c, char *msg, size_t len) {
    const hw_dims *d = &c->d;
    /* Vl real columns of the slice's Vlp; the slice starts at vocabulary row v0 */
    const int Vs = hw_tp_vocab_slice(d->V, tp->size), Vl = hw_tp_vocab_rows(d->V, tp->size, tp->rank);
    const int N = d->B * d->T, Vlp = hw_padded_vocab(Vs), v0 = tp->rank * Vs;
    double *mx = (double *)c->scratch, *sum = mx + N, *xt = sum + N;
    for (int n = 0; n < N; n++) {
        const float *x = c->in[0] + (int64_t)n * Vlp;
        double m = -INFINITY;
        for (int v = 0; v < Vl; v++)
            if (x[v] > m) m = x[v];
        mx[n] = m;
    }
    pl_status st = dist_allreduce_f64(tp->g, mx, N, DIST_MAX, msg, len);
    if (st != PL_OK) return st;
    for (int n = 0; n < N; n++) {
        const float *x = c->in[0] + (int64_t)n * Vlp;
        double s = 0.0;
        for (int v = 0; v < Vl; v++) s += exp((double)x[v] - mx[n]);
        sum[n] = s;
        const int t = c->targets[n] - v0;
        xt[n] = t >= 0 && t < Vl ? (double)x[t] : 0.0;
    }
    /* sum and the target's logit in one all-reduce: they are adjacent */
    if ((st = dist_allreduce_f64(tp->g, sum, 2 * (int64_t)N, DIST_SUM, msg, len)) != PL_OK) return st;
    double total = 0.0;
    for (int n = 0; n < N; n++) {
        const float *x = c->in[0] + (int64_t)n * Vlp;
        float *dl = c->din[0] + (int64_t)n * Vlp;
        const double loss = log(sum[n]) + mx[n] - xt[n];
        c->out[n] = (float)loss;
        total += loss;
        const int t = c->targets[n] - v0;
        /* x and dl may alias: each element is read before it is written */
        for (int v = 0; v < Vl; v++) {
            double p = exp((double)x[v] - mx[n]) / sum[n];
            dl[v] = (float)((p - (v == t ? 1.0 : 0.0)) * c->inv_norm);
        }
        for (int v = Vl; v < Vlp; v++) dl[v] = 0.0f;
        if (c->bf16) cpu_round_bf16(dl, dl, Vl); /* the logits gradient is bf16 (hw.h) */
    }
    if (c->loss_sum) *c->loss_sum += total;
    return PL_OK;
}

/* ---- embedding on the rank's tokens (sp) ---- */

static void embedding_forward_slice(float *out, const int *tokens, const float *wte, const float *wpe, int64_t n0,
                                    int64_t ns, int T, int C) {
    for (int64_t i = 0; i < ns; i++) {
        const int64_t n = n0 + i;
        const float *te = wte + (int64_t)tokens[n] * C, *pe = wpe + (n % T) * C;
        float *o = out + i * C;
        for (int c = 0; c < C; c++) o[c] = te[c] + pe[c];
    }
}

static void embedding_backward_slice(float *dwte, float *dwpe, const float *dout, const int *tokens, int64_t n0,
                                     int64_t ns, int T, int C) {
    for (int64_t i = 0; i < ns; i++) {
        const float *d = dout + i * C;
        float *te = dwte + (int64_t)tokens[n0 + i] * C;
        for (int c = 0; c < C; c++) te[c] += d[c];
    }
    /* dwpe per position over the slice's tokens at that position, in double */
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            double s = 0.0;
            int any = 0;
            for (int64_t n = n0 + ((t - n0 % T) % T + T) % T; n < n0 + ns; n += T) {
                s += dout[(n - n0) * C + c];
                any = 1;
            }
            if (any) dwpe[(int64_t)t * C + c] += (float)s;
        }
}

/* ---- the calls ---- */

pl_status hw_tp_forward(const hw_tp *tp, const hw_node_call *c, char *msg, size_t len) {
    const hw_dims *d = &c->d;
    const int C = d->C, t = tp->size;
    const int64_t N = (int64_t)d->B * d->T, Ns = tp->sp ? N / t : N, n0 = tp->sp ? tp->rank * Ns : 0;
    const int nh = d->NH / t, Cl = C / t, Fl = 4 * C / t;
    const int64_t X = c->bf16 ? N * C : 0; /* bf16: the node's rounded input copy comes first */
    const float *x = NULL;
    pl_status st = PL_OK;
    switch (c->kind) {
    case OP_EMBEDDING: embedding_forward_slice(c->out, c->tokens, P(c, 0), P(c, 1), n0, Ns, d->T, C); break;
    case OP_LAYERNORM: cpu_layernorm_forward(c->out, S(c, 0), S(c, 1), c->in[0], P(c, 0), P(c, 1), (int)Ns, C); break;
    case OP_RESIDUAL: cpu_residual_forward(c->out, c->in[0], c->in[1], Ns * C); break;
    case OP_ATTENTION: {
        float *part = c->scratch + 4 * N * Cl + X, *gx = part + N * C;
        if ((st = gather_input(tp, c->in[0], gx, N, C, &x, msg, len)) != PL_OK) return st;
        if (c->bf16)
            cpu_attention_forward_heads_bf16(part, S(c, 0), S(c, 1), S(c, 2), c->scratch, x, P16(c, 0), P16(c, 1),
                                             P16(c, 2), NULL, d->B, d->T, C, d->NH, nh);
        else
            cpu_attention_forward_heads(part, S(c, 0), S(c, 1), S(c, 2), c->scratch, x, P(c, 0), P(c, 1), P(c, 2),
                                        NULL, d->B, d->T, C, d->NH, nh);
        return reduce_partial(tp, c->out, part, N, C, P(c, 3), 0, msg, len);
    }
    case OP_MLP: {
        float *part = c->scratch + X, *gx = part + N * C;
        if ((st = gather_input(tp, c->in[0], gx, N, C, &x, msg, len)) != PL_OK) return st;
        if (c->bf16)
            cpu_mlp_forward_cols_bf16(part, S(c, 0), S(c, 1), c->scratch, x, P16(c, 0), P16(c, 1), P16(c, 2), NULL,
                                      (int)N, C, Fl);
        else
            cpu_mlp_forward_cols(part, S(c, 0), S(c, 1), x, P(c, 0), P(c, 1), P(c, 2), NULL, (int)N, C, Fl);
        return reduce_partial(tp, c->out, part, N, C, P(c, 3), 0, msg, len);
    }
    case OP_HEAD: {
        const int Vl = hw_tp_vocab_rows(d->V, t, tp->rank), Vlp = hw_padded_vocab(hw_tp_vocab_slice(d->V, t));
        float *gx = c->scratch ? c->scratch + X : NULL;
        if ((st = gather_input(tp, c->in[0], gx, N, C, &x, msg, len)) != PL_OK) return st;
        if (c->bf16) cpu_head_forward_bf16(c->out, c->scratch, x, P16(c, 0), (int)N, C, Vl, Vlp);
        else cpu_head_forward(c->out, x, P(c, 0), (int)N, C, Vl, Vlp);
        break;
    }
    case OP_LOSS: return loss_forward(tp, c, msg, len);
    default: return pl_fail(msg, len, PL_ERR_INVALID, "unknown node kind %d", (int)c->kind);
    }
    return PL_OK;
}

pl_status hw_tp_backward(const hw_tp *tp, const hw_node_call *c, char *msg, size_t len) {
    const hw_dims *d = &c->d;
    const int C = d->C, t = tp->size;
    const int64_t N = (int64_t)d->B * d->T, Ns = tp->sp ? N / t : N, n0 = tp->sp ? tp->rank * Ns : 0;
    const int nh = d->NH / t, Cl = C / t, Fl = 4 * C / t;
    const int64_t X = c->bf16 ? N * C : 0; /* bf16: the node's rounded copies come first */
    const float *x = NULL, *dout = NULL;
    pl_status st;
    switch (c->kind) {
    case OP_EMBEDDING: embedding_backward_slice(G(c, 0), G(c, 1), c->dout, c->tokens, n0, Ns, d->T, C); break;
    case OP_LAYERNORM:
        cpu_layernorm_backward(c->din[0], G(c, 0), G(c, 1), c->dout, c->in[0], P(c, 0), S(c, 0), S(c, 1), (int)Ns, C,
                               c->acc[0]);
        break;
    case OP_RESIDUAL: cpu_residual_backward(c->din[0], c->din[1], c->dout, Ns * C, c->acc[0], c->acc[1]); break;
    case OP_ATTENTION:
    case OP_MLP: {
        const int attn = c->kind == OP_ATTENTION;
        const int64_t own = (attn ? 8 * N * Cl + (int64_t)d->B * nh * d->T * d->T : N * Fl) + 2 * X;
        float *part = c->scratch + own, *gx = part + N * C, *gd = gx + N * C;
        if ((st = gather_input(tp, c->in[0], gx, N, C, &x, msg, len)) != PL_OK) return st;
        if ((st = gather_input(tp, c->dout, gd, N, C, &dout, msg, len)) != PL_OK) return st;
        /* bproj is applied on the rank's rows (all of them without sp) */
        bias_grad(G(c, 3), c->dout, Ns, C);
        if (attn && c->bf16)
            cpu_attention_backward_heads_bf16(part, G(c, 0), G(c, 1), G(c, 2), NULL, c->scratch, dout, x, S(c, 0),
                                              S(c, 1), S(c, 2), P16(c, 0), P16(c, 2), d->B, d->T, C, d->NH, nh, 0);
        else if (attn)
            cpu_attention_backward_heads(part, G(c, 0), G(c, 1), G(c, 2), NULL, c->scratch, dout, x, S(c, 0), S(c, 1),
                                         S(c, 2), P(c, 0), P(c, 2), d->B, d->T, C, d->NH, nh, 0);
        else if (c->bf16)
            cpu_mlp_backward_cols_bf16(part, G(c, 0), G(c, 1), G(c, 2), NULL, c->scratch, dout, x, S(c, 0), S(c, 1),
                                       P16(c, 0), P16(c, 2), (int)N, C, Fl, 0);
        else
            cpu_mlp_backward_cols(part, G(c, 0), G(c, 1), G(c, 2), NULL, c->scratch, dout, x, S(c, 0), S(c, 1),
                                  P(c, 0), P(c, 2), (int)N, C, Fl, 0);
        return reduce_partial(tp, c->din[0], part, N, C, NULL, c->acc[0], msg, len);
    }
    case OP_HEAD: {
        const int Vl = hw_tp_vocab_rows(d->V, t, tp->rank), Vlp = hw_padded_vocab(hw_tp_vocab_slice(d->V, t));
        float *part = c->scratch + X, *gx = part + N * C;
        if ((st = gather_input(tp, c->in[0], gx, N, C, &x, msg, len)) != PL_OK) return st;
        if (c->bf16)
            cpu_head_backward_bf16(part, G(c, 0), c->scratch, c->dout, x, P16(c, 0), (int)N, C, Vl, Vlp, 0);
        else
            cpu_head_backward(part, G(c, 0), c->dout, x, P(c, 0), (int)N, C, Vl, Vlp, 0);
        return reduce_partial(tp, c->din[0], part, N, C, NULL, c->acc[0], msg, len);
    }
    case OP_LOSS: break; /* fused into the forward */
    default: return pl_fail(msg, len, PL_ERR_INVALID, "unknown node kind %d", (int)c->kind);
    }
    return PL_OK;
}
