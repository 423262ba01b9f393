/*
 * grouper.c: the learned grouper and EAGLE's link (see grouper.h).
 */
#include "grouper.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"

void node_features(const graph *g, double *out) {
    const int N = g->n_nodes;
    memset(out, 0, sizeof *out * (size_t)N * NODE_N_FEATURES);
    for (int i = 0; i < N; i++) {
        const graph_node *nd = &g->nodes[i];
        double *f = out + (size_t)i * NODE_N_FEATURES;
        f[nd->kind] = 1.0;
        f[OP_KIND_COUNT + 0] = log1p((double)nd->out_bytes_per_sample) / 20.0;
        f[OP_KIND_COUNT + 1] = log1p((double)nd->params) / 20.0;
        f[OP_KIND_COUNT + 2] = log1p(nd->fwd_flops_per_sample + nd->bwd_flops_per_sample) / 25.0;
        f[OP_KIND_COUNT + 3] = log1p((double)nd->act_bytes_per_sample) / 20.0;
        f[OP_KIND_COUNT + 4] = N > 1 ? (double)i / (double)(N - 1) : 0.0;
        f[OP_KIND_COUNT + 5] = nd->n_inputs / 2.0;
        f[OP_KIND_COUNT + 6] = graph_n_consumers(g, i) / 2.0;
    }
}

struct grouper_acts {
    int N, G, Fn, Hg, Hl, XH;
    double *prior;        /* (N,G) fixed logit offsets */
    double *hid;          /* (N,Hg) tanh */
    double *logits;       /* (N,G) */
    double *P;            /* (N,G) */
    double *lxh;          /* (N,XH) link inputs [P ; f ; l_prev] */
    double *lgates;       /* (N,4Hl) */
    double *lc, *ltc, *lh; /* (N,Hl) */
    double *dlogits;      /* (N,G) accumulated */
    double *dP;           /* (N,G) accumulated (EAGLE) */
    double *dlh;          /* (N,Hl) accumulated (EAGLE) */
    double *dhid;         /* (N,Hg) */
    double *dxh, *dz, *dhn, *dcn, *dcp, *zeros; /* link backward scratch */
    double *block;
};

void grouper_net_destroy(grouper_net *net) {
    if (!net) return;
    free(net->params);
    free(net->grads);
    free(net);
}

pl_status grouper_net_create(const grouper_config *cfg, uint64_t seed, grouper_net **out) {
    *out = NULL;
    const int Fn = cfg->n_features, G = cfg->n_groups, Hg = cfg->hidden, Hl = cfg->eagle ? cfg->link_hidden : 0;
    if (Fn <= 0 || G <= 0 || Hg <= 0 || (cfg->eagle && cfg->link_hidden <= 0) || !(cfg->prior >= 0) ||
        !isfinite(cfg->prior))
        return PL_ERR_INVALID;
    grouper_net *net = calloc(1, sizeof *net);
    if (!net) return PL_ERR_NOMEM;
    net->cfg = *cfg;
    const size_t XH = (size_t)(G + Fn + Hl);
    size_t sz[GR_N_TENSORS] = {[GR_W1] = (size_t)Hg * Fn, [GR_B1] = (size_t)Hg, [GR_W2] = (size_t)G * Hg,
                               [GR_B2] = (size_t)G, [GR_LW] = (size_t)4 * Hl * XH, [GR_LB] = (size_t)4 * Hl};
    size_t off = 0;
    for (int k = 0; k < GR_N_TENSORS; k++) {
        net->offset[k] = off;
        net->size[k] = sz[k];
        off += sz[k];
    }
    net->n_params = off;
    net->params = calloc(off, sizeof *net->params);
    net->grads = calloc(off, sizeof *net->grads);
    if (!net->params || !net->grads) {
        grouper_net_destroy(net);
        return PL_ERR_NOMEM;
    }
    pl_rng rng;
    pl_rng_seed(&rng, seed ^ 0x6a09e667f3bcc908ull);
    const double fan[GR_N_TENSORS] = {[GR_W1] = Fn, [GR_W2] = Hg, [GR_LW] = (double)XH};
    for (int k = 0; k < GR_N_TENSORS; k++) {
        if (fan[k] == 0) continue;
        double s = 1.0 / sqrt(fan[k]);
        if (k == GR_W2) s *= 0.1; /* the first grouper is (nearly) the prior */
        double *p = grouper_param(net, k);
        for (size_t i = 0; i < net->size[k]; i++) p[i] = s * (2.0 * pl_rng_uniform(&rng) - 1.0);
    }
    for (int j = 0; j < Hl; j++) grouper_param(net, GR_LB)[Hl + j] = 1.0; /* forget gate */
    *out = net;
    return PL_OK;
}

void grouper_net_zero_grad(grouper_net *net) { memset(net->grads, 0, sizeof *net->grads * net->n_params); }

void grouper_acts_destroy(grouper_acts *a) {
    if (!a) return;
    free(a->block);
    free(a);
}

pl_status grouper_acts_create(const grouper_net *net, int N, grouper_acts **out) {
    *out = NULL;
    if (N <= 0) return PL_ERR_INVALID;
    grouper_acts *a = calloc(1, sizeof *a);
    if (!a) return PL_ERR_NOMEM;
    a->N = N;
    a->G = net->cfg.n_groups;
    a->Fn = net->cfg.n_features;
    a->Hg = net->cfg.hidden;
    a->Hl = net->cfg.eagle ? net->cfg.link_hidden : 0;
    a->XH = a->G + a->Fn + a->Hl;
    const size_t n = (size_t)N, G = (size_t)a->G, Hg = (size_t)a->Hg, Hl = (size_t)a->Hl, XH = (size_t)a->XH;
    struct { double **p; size_t n; } slots[] = {
        {&a->prior, n * G}, {&a->hid, n * Hg}, {&a->logits, n * G}, {&a->P, n * G}, {&a->lxh, n * XH},
        {&a->lgates, n * 4 * Hl}, {&a->lc, n * Hl}, {&a->ltc, n * Hl}, {&a->lh, n * Hl}, {&a->dlogits, n * G},
        {&a->dP, n * G}, {&a->dlh, n * Hl}, {&a->dhid, n * Hg}, {&a->dxh, XH}, {&a->dz, 4 * Hl}, {&a->dhn, Hl},
        {&a->dcn, Hl}, {&a->dcp, Hl}, {&a->zeros, Hl}};
    size_t total = 0, ns = sizeof slots / sizeof slots[0];
    for (size_t i = 0; i < ns; i++) total += slots[i].n;
    a->block = calloc(total ? total : 1, sizeof *a->block);
    if (!a->block) {
        free(a);
        return PL_ERR_NOMEM;
    }
    double *p = a->block;
    for (size_t i = 0; i < ns; i++) {
        *slots[i].p = p;
        p += slots[i].n;
    }
    const double k = net->cfg.prior;
    for (int i = 0; i < N; i++) {
        double x = N > 1 ? (double)i / (double)(N - 1) : 0.0;
        for (int g = 0; g < a->G; g++) {
            double d = x * a->G - g - 0.5;
            a->prior[(size_t)i * G + g] = -k * d * d;
        }
    }
    *out = a;
    return PL_OK;
}

pl_status grouper_acts_set_positions(const grouper_net *net, grouper_acts *a, const double *w) {
    double total = 0;
    for (int i = 0; i < a->N; i++) {
        if (!(w[i] >= 0) || !isfinite(w[i])) return PL_ERR_INVALID;
        total += w[i];
    }
    if (!(total > 0)) return PL_ERR_INVALID;
    const double k = net->cfg.prior;
    double before = 0;
    for (int i = 0; i < a->N; i++) {
        const double x = (before + 0.5 * w[i]) / total;
        before += w[i];
        for (int g = 0; g < a->G; g++) {
            double d = x * a->G - g - 0.5;
            a->prior[(size_t)i * a->G + g] = -k * d * d;
        }
    }
    return PL_OK;
}

void grouper_forward(const grouper_net *net, grouper_acts *a, const double *nfeat) {
    const int N = a->N, G = a->G, Fn = a->Fn, Hg = a->Hg, Hl = a->Hl, XH = a->XH;
    linear_forward(a->hid, nfeat, grouper_param(net, GR_W1), grouper_param(net, GR_B1), N, Fn, Hg);
    for (size_t i = 0; i < (size_t)N * Hg; i++) a->hid[i] = tanh(a->hid[i]);
    linear_forward(a->logits, a->hid, grouper_param(net, GR_W2), grouper_param(net, GR_B2), N, Hg, G);
    for (size_t i = 0; i < (size_t)N * G; i++) a->logits[i] += a->prior[i];
    softmax_forward(a->P, a->logits, N, G);
    memset(a->dlogits, 0, sizeof *a->dlogits * (size_t)N * G);
    memset(a->dP, 0, sizeof *a->dP * (size_t)N * G);
    if (Hl > 0) {
        memset(a->dlh, 0, sizeof *a->dlh * (size_t)N * Hl);
        for (int n = 0; n < N; n++) {
            double *xh = a->lxh + (size_t)n * XH;
            memcpy(xh, a->P + (size_t)n * G, sizeof *xh * (size_t)G);
            memcpy(xh + G, nfeat + (size_t)n * Fn, sizeof *xh * (size_t)Fn);
            if (n == 0) memset(xh + G + Fn, 0, sizeof *xh * (size_t)Hl);
            else memcpy(xh + G + Fn, a->lh + (size_t)(n - 1) * Hl, sizeof *xh * (size_t)Hl);
            const double *c_prev = n == 0 ? a->zeros : a->lc + (size_t)(n - 1) * Hl;
            lstm_forward(a->lh + (size_t)n * Hl, a->lc + (size_t)n * Hl, a->lgates + (size_t)n * 4 * Hl,
                         a->ltc + (size_t)n * Hl, xh, c_prev, grouper_param(net, GR_LW), grouper_param(net, GR_LB), 1,
                         XH, Hl);
        }
    }
}

const double *grouper_probs(const grouper_acts *a) { return a->P; }

static double safe_log(double p) { return log(p > 1e-300 ? p : 1e-300); }

double grouper_sample(const grouper_acts *a, pl_rng *rng, int *labels) {
    double lp = 0;
    for (int n = 0; n < a->N; n++) {
        const double *p = a->P + (size_t)n * a->G;
        double r = pl_rng_uniform(rng), acc = 0;
        int g = a->G - 1;
        for (int j = 0; j < a->G - 1; j++) {
            acc += p[j];
            if (r < acc) { g = j; break; }
        }
        labels[n] = g;
        lp += safe_log(p[g]);
    }
    return lp;
}

double grouper_greedy(const grouper_acts *a, int *labels) {
    double lp = 0;
    for (int n = 0; n < a->N; n++) {
        const double *p = a->P + (size_t)n * a->G;
        int g = 0;
        for (int j = 1; j < a->G; j++)
            if (p[j] > p[g]) g = j;
        labels[n] = g;
        lp += safe_log(p[g]);
    }
    return lp;
}

double grouper_logp(const grouper_acts *a, const int *labels) {
    double lp = 0;
    for (int n = 0; n < a->N; n++) lp += safe_log(a->P[(size_t)n * a->G + labels[n]]);
    return lp;
}

int grouper_input_width(const grouper_net *net) {
    return GROUP_N_FEATURES + (net->cfg.eagle ? net->cfg.link_hidden : 0);
}

void grouper_group_inputs(const grouper_net *net, const grouper_acts *a, const grouping *gr, double *feat) {
    const int W = grouper_input_width(net), Hl = a->Hl;
    for (int t = 0; t < gr->n_groups; t++) {
        double *row = feat + (size_t)t * W;
        memcpy(row, gr->features + (size_t)t * GROUP_N_FEATURES, sizeof *row * GROUP_N_FEATURES);
        if (Hl == 0) continue;
        double *m = row + GROUP_N_FEATURES;
        memset(m, 0, sizeof *m * (size_t)Hl);
        int c = gr->group_start[t + 1] - gr->group_start[t];
        for (int q = gr->group_start[t]; q < gr->group_start[t + 1]; q++) {
            const double *h = a->lh + (size_t)gr->members[q] * Hl;
            for (int j = 0; j < Hl; j++) m[j] += h[j];
        }
        for (int j = 0; j < Hl; j++) m[j] /= c;
    }
}

void grouper_add_label_grad(grouper_acts *a, const int *labels, double w, double scale) {
    /* d(-w log P_l)/dz_d = w (P_d - [d == l]) */
    const double s = w * scale;
    if (s == 0.0) return;
    for (int n = 0; n < a->N; n++) {
        const double *p = a->P + (size_t)n * a->G;
        double *dz = a->dlogits + (size_t)n * a->G;
        for (int d = 0; d < a->G; d++) dz[d] += s * p[d];
        dz[labels[n]] -= s;
    }
}

double grouper_add_entropy_grad(grouper_acts *a, double beta, double scale) {
    double total = 0;
    for (int n = 0; n < a->N; n++) {
        const double *p = a->P + (size_t)n * a->G;
        double *dz = a->dlogits + (size_t)n * a->G;
        double H = 0;
        for (int d = 0; d < a->G; d++) H -= p[d] > 0 ? p[d] * log(p[d]) : 0.0;
        total += H;
        /* d(-beta H)/dz_d = beta p_d (log p_d + H) */
        if (beta != 0.0)
            for (int d = 0; d < a->G; d++) dz[d] += scale * beta * p[d] * (safe_log(p[d]) + H);
    }
    return total / a->N;
}

void grouper_add_input_grad(const grouper_net *net, grouper_acts *a, const grouping *gr, const double *dfeat) {
    const int W = grouper_input_width(net), Hl = a->Hl;
    if (Hl == 0) return;
    for (int t = 0; t < gr->n_groups; t++) {
        const double *dm = dfeat + (size_t)t * W + GROUP_N_FEATURES;
        int c = gr->group_start[t + 1] - gr->group_start[t];
        for (int q = gr->group_start[t]; q < gr->group_start[t + 1]; q++) {
            double *dh = a->dlh + (size_t)gr->members[q] * Hl;
            for (int j = 0; j < Hl; j++) dh[j] += dm[j] / c;
        }
    }
}

void grouper_backward(grouper_net *net, grouper_acts *a, const double *nfeat) {
    const int N = a->N, G = a->G, Fn = a->Fn, Hg = a->Hg, Hl = a->Hl, XH = a->XH;
    if (Hl > 0) {
        /* link LSTM backwards over the nodes; dhn/dcn carry from node n+1 */
        memset(a->dhn, 0, sizeof *a->dhn * (size_t)Hl);
        memset(a->dcn, 0, sizeof *a->dcn * (size_t)Hl);
        for (int n = N - 1; n >= 0; n--) {
            for (int j = 0; j < Hl; j++) a->dhn[j] += a->dlh[(size_t)n * Hl + j];
            const double *c_prev = n == 0 ? a->zeros : a->lc + (size_t)(n - 1) * Hl;
            lstm_backward(a->dxh, a->dcp, grouper_grad(net, GR_LW), grouper_grad(net, GR_LB), a->dz, a->dhn, a->dcn,
                          a->lgates + (size_t)n * 4 * Hl, a->ltc + (size_t)n * Hl, c_prev, a->lxh + (size_t)n * XH,
                          grouper_param(net, GR_LW), 1, XH, Hl);
            for (int g = 0; g < G; g++) a->dP[(size_t)n * G + g] += a->dxh[g];
            memcpy(a->dhn, a->dxh + G + Fn, sizeof *a->dhn * (size_t)Hl);
            memcpy(a->dcn, a->dcp, sizeof *a->dcn * (size_t)Hl);
        }
        /* through the softmax: dz_d += P_d (dP_d - sum_j P_j dP_j) */
        for (int n = 0; n < N; n++) {
            const double *p = a->P + (size_t)n * G, *dp = a->dP + (size_t)n * G;
            double *dz = a->dlogits + (size_t)n * G;
            double dot = 0;
            for (int g = 0; g < G; g++) dot += p[g] * dp[g];
            for (int g = 0; g < G; g++) dz[g] += p[g] * (dp[g] - dot);
        }
    }
    linear_backward(a->dhid, grouper_grad(net, GR_W2), grouper_grad(net, GR_B2), a->dlogits, a->hid,
                    grouper_param(net, GR_W2), N, Hg, G);
    for (size_t i = 0; i < (size_t)N * Hg; i++) a->dhid[i] *= 1.0 - a->hid[i] * a->hid[i];
    linear_backward(NULL, grouper_grad(net, GR_W1), grouper_grad(net, GR_B1), a->dhid, nfeat,
                    grouper_param(net, GR_W1), N, Fn, Hg);
}

/* ---- the joint policy ------------------------------------------------------ */

pl_status hier_sample(hier_batch *b, pl_rng *rng, int *node_dev, double *logp) {
    const int K = b->K, N = b->N, G = b->G, W = b->W;
    grouper_forward(b->gnet, b->gacts, b->nfeat);
    for (int k = 0; k < K; k++) logp[k] = grouper_sample(b->gacts, rng, b->labels + (size_t)k * N);
    for (int k = 0; k < K; k++) {
        grouping *gr = b->sgr[k];
        grouping_assign(gr, b->g, b->labels + (size_t)k * N, GROUPING_LEARNED);
        double *feat = b->sfeat + (size_t)k * G * W, lp = 0;
        grouper_group_inputs(b->gnet, b->gacts, gr, feat);
        pl_status st = placer_net_forward(b->pnet, b->sacts[k], feat, gr->n_groups, 1, PN_SAMPLE, rng,
                                          b->sdev + (size_t)k * G, &lp);
        if (st != PL_OK) return st;
        logp[k] += lp;
        grouping_expand(gr, b->sdev + (size_t)k * G, node_dev + (size_t)k * N);
    }
    return PL_OK;
}

pl_status hier_greedy(hier_batch *b, int *node_dev) {
    grouper_forward(b->gnet, b->gacts, b->nfeat);
    grouper_greedy(b->gacts, b->labels);
    grouping_assign(b->sgr[0], b->g, b->labels, GROUPING_LEARNED);
    grouper_group_inputs(b->gnet, b->gacts, b->sgr[0], b->sfeat);
    pl_status st = placer_net_forward(b->pnet, b->sacts[0], b->sfeat, b->sgr[0]->n_groups, 1, PN_GREEDY, NULL,
                                      b->sdev, NULL);
    if (st == PL_OK) grouping_expand(b->sgr[0], b->sdev, node_dev);
    return st;
}

pl_status hier_forward_given(hier_batch *b, double *logp) {
    const int K = b->K, N = b->N, G = b->G, W = b->W;
    grouper_forward(b->gnet, b->gacts, b->nfeat);
    for (int k = 0; k < K; k++) {
        const grouping *gr = b->sgr[k];
        double *feat = b->sfeat + (size_t)k * G * W, lp = 0;
        grouper_group_inputs(b->gnet, b->gacts, gr, feat); /* the link's part moves with the grouper */
        pl_status st = placer_net_forward(b->pnet, b->sacts[k], feat, gr->n_groups, 1, PN_GIVEN, NULL,
                                          b->sdev + (size_t)k * G, &lp);
        if (st != PL_OK) return st;
        if (logp) logp[k] = grouper_logp(b->gacts, b->labels + (size_t)k * N) + lp;
    }
    return PL_OK;
}

double hier_loss_backward(hier_batch *b, const double *w, double beta, double *entropy) {
    const int K = b->K, N = b->N, G = b->G, W = b->W;
    const int eagle = b->gnet->cfg.eagle;
    double loss = 0, ent = 0;
    int steps = 0;
    for (int k = 0; k < K; k++) {
        const grouping *gr = b->sgr[k];
        double e = 0;
        loss += placer_net_policy_loss(b->sacts[k], &w[k], beta, 1.0 / K, &e);
        ent += e * gr->n_groups;
        steps += gr->n_groups;
        const double *feat = b->sfeat + (size_t)k * G * W;
        placer_net_backward_input(b->pnet, b->sacts[k], feat, eagle ? b->dfeat : NULL);
        if (eagle) grouper_add_input_grad(b->gnet, b->gacts, gr, b->dfeat);
        const int *lab = b->labels + (size_t)k * N;
        loss -= w[k] / K * grouper_logp(b->gacts, lab);
        grouper_add_label_grad(b->gacts, lab, w[k], 1.0 / K);
    }
    double hg = grouper_add_entropy_grad(b->gacts, beta, 1.0);
    loss -= beta * hg * N;
    grouper_backward(b->gnet, b->gacts, b->nfeat);
    if (entropy) *entropy = steps > 0 ? ent / steps : 0.0;
    return loss;
}
