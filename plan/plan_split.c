/*
 * plan_split.c: how layers are assigned to pipeline stages, without the
 * simulator: the planner's exact DP split over stage costs, and DeepSpeed's
 * `parameters` split reproduced for comparison (plan.h says what each
 * computes).
 *
 * The DP. State (s, j): stages 0..s-1 hold j layers. Every way of reaching
 * a state leaves a pair (M, S) = (heaviest stage so far, sum so far); the
 * objective w M + S is increasing in both, and later stages only raise M to
 * max(M, c) and S by c, so a pair dominated in both coordinates can never
 * lead to a better final objective and is dropped. What remains per state
 * is the Pareto front of (M, S), usually one or two pairs (with identical
 * middle stages the sum depends on j alone), and the minimum of w M + S
 * over the front of (S_stages, L) is the exact optimum.
 */
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double mx;   /* heaviest stage so far */
    double sum;  /* sum of the stages so far */
    int prev;    /* index in the front of (s - 1, j - n) */
    int n;       /* layers of stage s - 1 */
} split_pair;

typedef struct {
    split_pair *p; /* n entries */
    int n;
    int cap;
} split_front;

/* Insert (mx, sum) unless dominated; drop the pairs it dominates.
 * Returns 0, or -1 on allocation failure. */
static int front_insert(split_front *f, double mx, double sum, int prev, int n) {
    for (int i = 0; i < f->n; i++)
        if (f->p[i].mx <= mx && f->p[i].sum <= sum) return 0;
    int k = 0;
    for (int i = 0; i < f->n; i++)
        if (!(mx <= f->p[i].mx && sum <= f->p[i].sum)) f->p[k++] = f->p[i];
    f->n = k;
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 4;
        split_pair *q = realloc(f->p, sizeof *q * (size_t)cap);
        if (!q) return -1;
        f->p = q;
        f->cap = cap;
    }
    f->p[f->n++] = (split_pair){mx, sum, prev, n};
    return 0;
}

double plan_split_dp(int S, int L, int min_n, const double *cost, double w, int *n) {
    if (S < 1 || L < 1 || min_n < 0 || !cost || !n || !(w >= 0)) return INFINITY;
    if ((int64_t)S * min_n > L) return INFINITY;
    const int W = L + 1;
    split_front *fr = calloc((size_t)(S + 1) * (size_t)W, sizeof *fr);
    if (!fr) return NAN;
    double result = INFINITY;
    if (front_insert(&fr[0], 0.0, 0.0, -1, 0) != 0) goto nomem;
    for (int s = 0; s < S; s++) {
        const int rest = (S - s - 1) * min_n; /* layers the later stages need at least */
        for (int j = 0; j <= L; j++) {
            const split_front *src = &fr[(size_t)s * W + j];
            if (src->n == 0) continue;
            for (int k = (min_n > 0 ? min_n : 0); j + k + rest <= L; k++) {
                /* the last stage takes exactly what is left */
                if (s == S - 1 && j + k != L) continue;
                const double c = cost[(size_t)s * W + k];
                if (!isfinite(c)) continue;
                split_front *dst = &fr[(size_t)(s + 1) * W + j + k];
                for (int i = 0; i < src->n; i++) {
                    const split_pair *p = &src->p[i];
                    if (front_insert(dst, p->mx > c ? p->mx : c, p->sum + c, i, k) != 0) goto nomem;
                }
            }
        }
    }
    const split_front *last = &fr[(size_t)S * W + L];
    int best = -1;
    for (int i = 0; i < last->n; i++) {
        const double v = w * last->p[i].mx + last->p[i].sum;
        if (v < result) {
            result = v;
            best = i;
        }
    }
    if (best >= 0) {
        int j = L, i = best;
        for (int s = S; s >= 1; s--) {
            const split_pair *p = &fr[(size_t)s * W + j].p[i];
            n[s - 1] = p->n;
            j -= p->n;
            i = p->prev;
        }
    }
    goto out;
nomem:
    result = NAN;
out:
    for (size_t i = 0; i < (size_t)(S + 1) * (size_t)W; i++) free(fr[i].p);
    free(fr);
    return result;
}

/* ds_utils.partition_uniform */
static void partition_uniform(int n_items, int S, int *parts) {
    if (n_items <= S) {
        for (int p = 0; p <= S; p++) parts[p] = p < n_items ? p : n_items;
        return;
    }
    const int chunk = n_items / S, residual = n_items - chunk * S;
    for (int p = 0; p <= S; p++) parts[p] = p * chunk;
    for (int i = 0; i < residual; i++)
        for (int p = i + 1; p <= S; p++) parts[p] += 1;
}

pl_status plan_partition_balanced(const double *weights, int n_items, int S, int *parts) {
    if (S < 1 || n_items < 1 || !weights || !parts) return PL_ERR_INVALID;
    if (n_items <= S) {
        partition_uniform(n_items, S, parts);
        return PL_OK;
    }
    const int n = n_items, m = S;
    const size_t cols = (size_t)m + 1, cells = ((size_t)n + 1) * cols;
    double *dmax = malloc(sizeof *dmax * cells), *dmin = malloc(sizeof *dmin * cells);
    double *dcost = malloc(sizeof *dcost * cells), *prefix = malloc(sizeof *prefix * ((size_t)n + 1));
    int *pos = calloc(cells, sizeof *pos);
    pl_status st = PL_ERR_NOMEM;
    if (!dmax || !dmin || !dcost || !prefix || !pos) goto out;
    for (size_t i = 0; i < cells; i++) dmax[i] = dmin[i] = dcost[i] = INFINITY;
    prefix[0] = 0;
    for (int i = 0; i < n; i++) prefix[i + 1] = prefix[i] + weights[i]; /* np.cumsum */
    dmax[0] = 0;
    dcost[0] = 0;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= (i < m ? i : m); j++)
            for (int k = 0; k < i; k++) {
                const double seg = prefix[i] - prefix[k];
                const double a = dmax[(size_t)k * cols + j - 1], b = dmin[(size_t)k * cols + j - 1];
                const double mx = a > seg ? a : seg, mn = b < seg ? b : seg;
                const double cost = mx - mn;
                const size_t c = (size_t)i * cols + j;
                if (dcost[c] >= cost) { /* ">=": the last k of equal cost wins, as in DeepSpeed */
                    dcost[c] = cost;
                    dmax[c] = mx;
                    dmin[c] = mn;
                    pos[c] = k;
                }
            }
    parts[m] = n;
    for (int j = m; j >= 1; j--) parts[j - 1] = pos[(size_t)parts[j] * cols + j];
    st = PL_OK;
out:
    free(dmax);
    free(dmin);
    free(dcost);
    free(prefix);
    free(pos);
    return st;
}

/* Parameters of the pieces DeepSpeed's layer specs would hold, from the
 * config (the same formulas as the graph builder: biases unless no_bias,
 * layernorm with a bias, RMSNorm scale only, GQA key / value width). */
static void piece_params(const gpt_config *c, double *embed, double *layer, double *head) {
    const double d = c->d_model, hd = (double)c->d_model / c->n_heads;
    const double kv = c->n_kv_heads > 0 ? c->n_kv_heads : c->n_heads;
    const double dff = c->d_ff > 0 ? c->d_ff : 4.0 * c->d_model;
    double V = c->vocab;
    if (c->vocab_multiple > 0) V = ceil(V / c->vocab_multiple) * c->vocab_multiple;
    const int bias = !c->no_bias;
    const double norm = c->norm == NORM_RMSNORM ? d : 2 * d;
    const double qkv = d * (d + 2 * kv * hd) + (bias ? d + 2 * kv * hd : 0);
    const double proj = d * d + (bias ? d : 0);
    const double mlp = c->mlp == MLP_SWIGLU ? 3 * d * dff + (bias ? 2 * dff + d : 0)
                                            : 2 * d * dff + (bias ? dff + d : 0);
    *layer = 2 * norm + qkv + proj + mlp;
    *embed = V * d + (c->pos == POS_LEARNED ? (double)c->seq_len * d : 0);
    *head = norm + V * d; /* tied: TiedLayerSpec holds the matrix again */
}

pl_status plan_deepspeed_parameters_split(const gpt_config *cfg, int pp, int *stage_layers, char *msg, size_t len) {
    const int L = cfg->n_layers;
    if (pp < 1 || pp > L) return pl_fail(msg, len, PL_ERR_INVALID, "pp=%d must be in 1..%d layers", pp, L);
    double e, l, h;
    piece_params(cfg, &e, &l, &h);
    double *w = malloc(sizeof *w * (size_t)(L + 2));
    int *parts = malloc(sizeof *parts * (size_t)(pp + 1));
    pl_status st = PL_ERR_NOMEM;
    if (!w || !parts) goto out;
    w[0] = e;
    for (int i = 0; i < L; i++) w[1 + i] = l;
    w[L + 1] = h;
    st = plan_partition_balanced(w, L + 2, pp, parts);
    if (st != PL_OK) goto out;
    for (int s = 0; s < pp; s++) {
        /* transformer layers are items 1..L */
        int lo = parts[s] < 1 ? 1 : parts[s], hi = parts[s + 1] > L + 1 ? L + 1 : parts[s + 1];
        stage_layers[s] = hi > lo ? hi - lo : 0;
        if (stage_layers[s] == 0) {
            st = pl_fail(msg, len, PL_ERR_INVALID,
                         "DeepSpeed's parameters split leaves stage %d without a transformer layer", s);
            goto out;
        }
    }
    st = PL_OK;
out:
    free(w);
    free(parts);
    return st;
}
