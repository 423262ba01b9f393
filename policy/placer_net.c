/*
 * placer_net.c: the seq2seq placer network (see placer_net.h): parameter
 * layout, forward pass with sampling, REINFORCE loss, backward pass, Adam.
 */
#include "placer_net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"

struct placer_acts {
    int T_cap, B_cap;   /* capacity */
    int T, B;           /* sizes of the last forward pass */
    int D;              /* devices */
    /* encoder, B = 1 */
    double *X;          /* (T,E) embedded features */
    double *enc_xh;     /* (T,E+H) [x_t ; e_{t-1}] */
    double *enc_gates;  /* (T,4H) */
    double *enc_c;      /* (T,H) */
    double *enc_tc;     /* (T,H) tanh(c) */
    double *enc_h;      /* (T,H) encoder states E */
    double *K;          /* (T,A) attention keys */
    /* decoder, per step t a (B,.) slab */
    double *h0, *c0;    /* (B,H) initial state */
    double *dec_xh;     /* (T,B,De+2H) */
    double *dec_gates;  /* (T,B,4H) */
    double *dec_c;      /* (T,B,H) */
    double *dec_tc;     /* (T,B,H) */
    double *dec_h;      /* (T,B,H) */
    double *q;          /* (T,B,A) */
    double *u;          /* (T,B,T,A) */
    double *alpha;      /* (T,B,T) */
    double *cat;        /* (T,B,2H) [d_t ; ctx_t] */
    double *logits;     /* (T,B,D) */
    double *probs;      /* (T,B,D) */
    int *actions;       /* (T,B) devices chosen, step-major copy */
    double *dlogits;    /* (T,B,D) written by the loss */
    /* backward scratch */
    double *dE, *dK, *dEk;             /* (T,H), (T,A), (T,H) */
    double *dcat, *dh, *dctx, *dh_att; /* (B,2H), (B,H) x3 */
    double *dc, *dc_prev;              /* (B,H) x2 */
    double *dxh, *att_scratch;         /* (B,XHd), B*T+B*A+A */
    double *dz;                        /* (T,B,4H) gate gradients of every step, for the deferred dW */
    double *enc_dxh, *enc_dh, *enc_dc, *enc_dc_prev, *dX; /* (E+H), (H) x3, (T,E) */
    double *zeros;                     /* (H) */
    double *block;                     /* one allocation holding all of the above */
};

placer_net_config placer_net_default_config(int n_features, int n_devices) {
    placer_net_config c = {n_features, n_devices, 32, 64, 32, 8, 0.0, 0.0, 0.0};
    return c;
}

void placer_net_destroy(placer_net *net) {
    if (!net) return;
    free(net->params);
    free(net->grads);
    free(net);
}

pl_status placer_net_create(const placer_net_config *cfg, uint64_t seed, placer_net **out) {
    *out = NULL;
    const int F = cfg->n_features, D = cfg->n_devices, E = cfg->embed, H = cfg->hidden, A = cfg->attn,
              De = cfg->dev_embed;
    if (F <= 0 || D <= 0 || E <= 0 || H <= 0 || A <= 0 || De <= 0) return PL_ERR_INVALID;
    placer_net *net = calloc(1, sizeof *net);
    if (!net) return PL_ERR_NOMEM;
    net->cfg = *cfg;
    size_t sz[PN_N_TENSORS] = {
        [PN_WF] = (size_t)E * F, [PN_BF] = (size_t)E,
        [PN_ENC_W] = (size_t)4 * H * (E + H), [PN_ENC_B] = (size_t)4 * H,
        [PN_DEV_EMB] = (size_t)(D + 1) * De,
        [PN_DEC_W] = (size_t)4 * H * (De + 2 * H), [PN_DEC_B] = (size_t)4 * H,
        [PN_ATT_WQ] = (size_t)A * H, [PN_ATT_WK] = (size_t)A * H, [PN_ATT_V] = (size_t)A,
        [PN_OUT_W] = (size_t)D * (2 * H + D + 1), [PN_OUT_B] = (size_t)D};
    size_t off = 0;
    for (int k = 0; k < PN_N_TENSORS; k++) {
        net->offset[k] = off;
        net->size[k] = sz[k];
        off += sz[k];
    }
    net->n_params = off;
    net->params = calloc(off, sizeof *net->params);
    net->grads = calloc(off, sizeof *net->grads);
    if (!net->params || !net->grads) {
        placer_net_destroy(net);
        return PL_ERR_NOMEM;
    }
    /* initialisation: uniform +-1/sqrt(fan_in) for matrices */
    pl_rng rng;
    pl_rng_seed(&rng, seed);
    const int fan_in[PN_N_TENSORS] = {[PN_WF] = F, [PN_ENC_W] = E + H, [PN_DEV_EMB] = 1,
                                      [PN_DEC_W] = De + 2 * H, [PN_ATT_WQ] = H, [PN_ATT_WK] = H,
                                      [PN_ATT_V] = A, [PN_OUT_W] = 2 * H + D + 1};
    for (int k = 0; k < PN_N_TENSORS; k++) {
        if (fan_in[k] == 0) continue; /* biases start at zero */
        double s = 1.0 / sqrt((double)fan_in[k]);
        if (k == PN_OUT_W) s *= 0.1; /* near-uniform first policy */
        double *p = net->params + net->offset[k];
        for (size_t i = 0; i < net->size[k]; i++) p[i] = s * (2.0 * pl_rng_uniform(&rng) - 1.0);
    }
    /* the prior: logit of "same device as the previous unit" raised so that
     * it is drawn with probability `stay` (the rest uniform) */
    if (cfg->stay > 0 && cfg->stay < 1 && D > 1) {
        double s = log(cfg->stay * (D - 1) / (1.0 - cfg->stay));
        double *W = placer_net_param(net, PN_OUT_W);
        for (int d = 0; d < D; d++) W[(size_t)d * (2 * H + D + 1) + 2 * H + d] += s;
    }
    for (int d = 0; d < D && d < PN_MAX_PIPE_DEVICES; d++) net->pipe_share[d] = 1.0 / D;
    /* forget-gate biases 1: remember by default */
    for (int j = 0; j < H; j++) {
        placer_net_param(net, PN_ENC_B)[H + j] = 1.0;
        placer_net_param(net, PN_DEC_B)[H + j] = 1.0;
    }
    *out = net;
    return PL_OK;
}

pl_status placer_net_permute_devices(placer_net *net, const int *perm) {
    const int D = net->cfg.n_devices, H = net->cfg.hidden, De = net->cfg.dev_embed, CW = 2 * H + D + 1;
    int *seen = calloc((size_t)D, sizeof *seen);
    if (!seen) return PL_ERR_NOMEM;
    pl_status st = PL_OK;
    for (int d = 0; d < D && st == PL_OK; d++) {
        if (perm[d] < 0 || perm[d] >= D || seen[perm[d]]) st = PL_ERR_INVALID;
        else seen[perm[d]] = 1;
    }
    free(seen);
    if (st != PL_OK) return st;
    const size_t n_emb = net->size[PN_DEV_EMB], n_w = net->size[PN_OUT_W], n_b = net->size[PN_OUT_B];
    double *old = malloc(sizeof *old * (n_emb + n_w + n_b));
    if (!old) return PL_ERR_NOMEM;
    double *emb = placer_net_param(net, PN_DEV_EMB), *W = placer_net_param(net, PN_OUT_W),
           *b = placer_net_param(net, PN_OUT_B);
    memcpy(old, emb, sizeof *old * n_emb);
    memcpy(old + n_emb, W, sizeof *old * n_w);
    memcpy(old + n_emb + n_w, b, sizeof *old * n_b);
    const double *oe = old, *ow = old + n_emb, *ob = old + n_emb + n_w;
    for (int d = 0; d < D; d++) {
        const int p = perm[d];
        memcpy(emb + (size_t)p * De, oe + (size_t)d * De, sizeof *emb * (size_t)De);
        b[p] = ob[d];
        /* row d moves to row p: its [d_t ; ctx_t] part as it is, its
         * previous-device columns relabelled, the start token's in place */
        const double *src = ow + (size_t)d * CW;
        double *dst = W + (size_t)p * CW;
        memcpy(dst, src, sizeof *dst * (size_t)(2 * H));
        for (int e = 0; e < D; e++) dst[2 * H + perm[e]] = src[2 * H + e];
        dst[2 * H + D] = src[2 * H + D];
    }
    free(old);
    return PL_OK;
}

pl_status placer_net_set_pipe_shares(placer_net *net, const double *weights) {
    const int D = net->cfg.n_devices;
    if (D > PN_MAX_PIPE_DEVICES) return PL_ERR_INVALID;
    double sum = 0;
    for (int d = 0; d < D; d++) {
        if (!(weights[d] >= 0) || !isfinite(weights[d])) return PL_ERR_INVALID;
        sum += weights[d];
    }
    if (!(sum > 0)) return PL_ERR_INVALID;
    for (int d = 0; d < D; d++) net->pipe_share[d] = weights[d] / sum;
    return PL_OK;
}

void placer_acts_destroy(placer_acts *a) {
    if (!a) return;
    free(a->block);
    free(a->actions);
    free(a);
}

pl_status placer_acts_create(const placer_net *net, int T_cap, int B_cap, placer_acts **out) {
    *out = NULL;
    if (T_cap <= 0 || B_cap <= 0) return PL_ERR_INVALID;
    const size_t T = (size_t)T_cap, B = (size_t)B_cap;
    const size_t E = (size_t)net->cfg.embed, H = (size_t)net->cfg.hidden, A = (size_t)net->cfg.attn,
                 D = (size_t)net->cfg.n_devices, De = (size_t)net->cfg.dev_embed;
    const size_t XHd = De + 2 * H, CW = 2 * H + D + 1;
    placer_acts *a = calloc(1, sizeof *a);
    if (!a) return PL_ERR_NOMEM;
    a->T_cap = T_cap;
    a->B_cap = B_cap;
    a->D = (int)D;
    struct { double **p; size_t n; } slots[] = {
        {&a->X, T * E}, {&a->enc_xh, T * (E + H)}, {&a->enc_gates, T * 4 * H}, {&a->enc_c, T * H},
        {&a->enc_tc, T * H}, {&a->enc_h, T * H}, {&a->K, T * A},
        {&a->h0, B * H}, {&a->c0, B * H}, {&a->dec_xh, T * B * XHd}, {&a->dec_gates, T * B * 4 * H},
        {&a->dec_c, T * B * H}, {&a->dec_tc, T * B * H}, {&a->dec_h, T * B * H}, {&a->q, T * B * A},
        {&a->u, T * B * T * A}, {&a->alpha, T * B * T}, {&a->cat, T * B * CW}, {&a->logits, T * B * D},
        {&a->probs, T * B * D}, {&a->dlogits, T * B * D},
        {&a->dE, T * H}, {&a->dK, T * A}, {&a->dEk, T * H}, {&a->dcat, B * CW}, {&a->dh, B * H},
        {&a->dctx, B * H}, {&a->dh_att, B * H}, {&a->dc, B * H}, {&a->dc_prev, B * H}, {&a->dxh, B * XHd},
        {&a->dz, T * B * 4 * H}, {&a->att_scratch, B * T + B * A + A}, {&a->enc_dxh, E + H}, {&a->enc_dh, H},
        {&a->enc_dc, H}, {&a->enc_dc_prev, H}, {&a->dX, T * E}, {&a->zeros, H}};
    size_t n_slots = sizeof slots / sizeof slots[0], total = 0;
    for (size_t i = 0; i < n_slots; i++) total += slots[i].n;
    a->block = calloc(total, sizeof *a->block);
    a->actions = calloc(T * B, sizeof *a->actions);
    if (!a->block || !a->actions) {
        placer_acts_destroy(a);
        return PL_ERR_NOMEM;
    }
    double *p = a->block;
    for (size_t i = 0; i < n_slots; i++) {
        *slots[i].p = p;
        p += slots[i].n;
    }
    *out = a;
    return PL_OK;
}

const double *placer_acts_probs(const placer_acts *acts, int t) {
    return acts->probs + (size_t)t * (size_t)acts->B * (size_t)acts->D;
}

/* Index of the largest entry (first on ties). */
static int argmax(const double *p, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (p[i] > p[best]) best = i;
    return best;
}

/* Draw from a discrete distribution. */
static int draw(const double *p, int n, pl_rng *rng) {
    double r = pl_rng_uniform(rng), acc = 0.0;
    for (int i = 0; i < n - 1; i++) {
        acc += p[i];
        if (r < acc) return i;
    }
    return n - 1;
}

pl_status placer_net_forward(const placer_net *net, placer_acts *acts, const double *features, int T, int B,
                             placer_decode mode, pl_rng *rng, int *actions, double *logp) {
    if (T <= 0 || B <= 0 || T > acts->T_cap || B > acts->B_cap) return PL_ERR_INVALID;
    if (mode == PN_SAMPLE && !rng) return PL_ERR_INVALID;
    const int F = net->cfg.n_features, D = net->cfg.n_devices, E = net->cfg.embed, H = net->cfg.hidden,
              A = net->cfg.attn, De = net->cfg.dev_embed;
    const int XHe = E + H, XHd = De + 2 * H, CW = 2 * H + D + 1;
    acts->T = T;
    acts->B = B;

    /* encoder (one sequence: every sample shares the same input) */
    linear_forward(acts->X, features, placer_net_param(net, PN_WF), placer_net_param(net, PN_BF), T, F, E);
    for (int t = 0; t < T; t++) {
        double *xh = acts->enc_xh + (size_t)t * XHe;
        memcpy(xh, acts->X + (size_t)t * E, sizeof *xh * (size_t)E);
        if (t == 0) memset(xh + E, 0, sizeof *xh * (size_t)H);
        else memcpy(xh + E, acts->enc_h + (size_t)(t - 1) * H, sizeof *xh * (size_t)H);
        const double *c_prev = t == 0 ? acts->zeros : acts->enc_c + (size_t)(t - 1) * H;
        lstm_forward(acts->enc_h + (size_t)t * H, acts->enc_c + (size_t)t * H, acts->enc_gates + (size_t)t * 4 * H,
                     acts->enc_tc + (size_t)t * H, xh, c_prev, placer_net_param(net, PN_ENC_W),
                     placer_net_param(net, PN_ENC_B), 1, XHe, H);
    }
    linear_forward(acts->K, acts->enc_h, placer_net_param(net, PN_ATT_WK), NULL, T, H, A);

    /* decoder, B sequences at once */
    for (int b = 0; b < B; b++) {
        memcpy(acts->h0 + (size_t)b * H, acts->enc_h + (size_t)(T - 1) * H, sizeof(double) * (size_t)H);
        memcpy(acts->c0 + (size_t)b * H, acts->enc_c + (size_t)(T - 1) * H, sizeof(double) * (size_t)H);
    }
    if (logp)
        for (int b = 0; b < B; b++) logp[b] = 0.0;
    const double *dev_emb = placer_net_param(net, PN_DEV_EMB);
    for (int t = 0; t < T; t++) {
        double *xh = acts->dec_xh + (size_t)t * B * XHd;
        const double *h_prev = t == 0 ? acts->h0 : acts->dec_h + (size_t)(t - 1) * B * H;
        const double *c_prev = t == 0 ? acts->c0 : acts->dec_c + (size_t)(t - 1) * B * H;
        for (int b = 0; b < B; b++) {
            int prev = t == 0 ? D : acts->actions[(size_t)(t - 1) * B + b];
            double *row = xh + (size_t)b * XHd;
            memcpy(row, dev_emb + (size_t)prev * De, sizeof *row * (size_t)De);
            memcpy(row + De, acts->enc_h + (size_t)t * H, sizeof *row * (size_t)H);
            memcpy(row + De + H, h_prev + (size_t)b * H, sizeof *row * (size_t)H);
        }
        double *h = acts->dec_h + (size_t)t * B * H;
        lstm_forward(h, acts->dec_c + (size_t)t * B * H, acts->dec_gates + (size_t)t * B * 4 * H,
                     acts->dec_tc + (size_t)t * B * H, xh, c_prev, placer_net_param(net, PN_DEC_W),
                     placer_net_param(net, PN_DEC_B), B, XHd, H);
        double *ctx = acts->dctx; /* scratch for the context, copied into cat */
        attention_forward(ctx, acts->alpha + (size_t)t * B * T, acts->u + (size_t)t * B * T * A,
                          acts->q + (size_t)t * B * A, h, acts->enc_h, acts->K, placer_net_param(net, PN_ATT_WQ),
                          placer_net_param(net, PN_ATT_V), B, T, H, A);
        double *cat = acts->cat + (size_t)t * B * CW;
        for (int b = 0; b < B; b++) {
            double *row = cat + (size_t)b * CW;
            memcpy(row, h + (size_t)b * H, sizeof *cat * (size_t)H);
            memcpy(row + H, ctx + (size_t)b * H, sizeof *cat * (size_t)H);
            memset(row + 2 * H, 0, sizeof *cat * (size_t)(D + 1));
            row[2 * H + (t == 0 ? D : acts->actions[(size_t)(t - 1) * B + b])] = 1.0;
        }
        double *logits = acts->logits + (size_t)t * B * D, *probs = acts->probs + (size_t)t * B * D;
        linear_forward(logits, cat, placer_net_param(net, PN_OUT_W), placer_net_param(net, PN_OUT_B), B, CW, D);
        if (net->cfg.clip > 0)
            for (int i = 0; i < B * D; i++) logits[i] = net->cfg.clip * tanh(logits[i] / net->cfg.clip);
        if (net->cfg.pipe > 0) {
            /* the softmax reads logits + prior from the step's dlogits slab
             * (free until the loss writes it); logits stay as they are for
             * the clip's backward */
            double *zp = acts->dlogits + (size_t)t * B * D;
            const double x = ((double)t + 0.5) / (double)T;
            double c = 0, umax = 0;
            for (int d = 0; d < D; d++) {
                const double sd = D <= PN_MAX_PIPE_DEVICES ? net->pipe_share[d] : 1.0 / D;
                if (!(sd > 0)) continue; /* a device without a stage: below, once umax is known */
                const double u = (x - c - 0.5 * sd) / sd;
                c += sd;
                if (u * u > umax) umax = u * u;
                for (int b = 0; b < B; b++)
                    zp[(size_t)b * D + d] = logits[(size_t)b * D + d] - net->cfg.pipe * u * u;
            }
            for (int d = 0; d < D && d < PN_MAX_PIPE_DEVICES; d++)
                if (!(net->pipe_share[d] > 0))
                    for (int b = 0; b < B; b++)
                        zp[(size_t)b * D + d] = logits[(size_t)b * D + d] - net->cfg.pipe * (umax + 1.0);
            softmax_forward(probs, zp, B, D);
        } else {
            softmax_forward(probs, logits, B, D);
        }
        for (int b = 0; b < B; b++) {
            const double *p = probs + (size_t)b * D;
            int a;
            if (mode == PN_SAMPLE) a = draw(p, D, rng);
            else if (mode == PN_GREEDY) a = argmax(p, D);
            else {
                a = actions[(size_t)b * T + t];
                if (a < 0 || a >= D) return PL_ERR_INVALID;
            }
            actions[(size_t)b * T + t] = a;
            acts->actions[(size_t)t * B + b] = a;
            if (logp) logp[b] += log(p[a] > 1e-300 ? p[a] : 1e-300);
        }
    }
    return PL_OK;
}

double placer_net_policy_loss(placer_acts *acts, const double *w, double beta, double scale, double *entropy) {
    const int T = acts->T, B = acts->B, D = acts->D;
    double loss = 0.0, ent = 0.0;
    for (int t = 0; t < T; t++) {
        const double *p = acts->probs + (size_t)t * B * D;
        loss += policy_loss_backward(acts->dlogits + (size_t)t * B * D, p, acts->actions + (size_t)t * B, w, beta,
                                     scale, B, D);
        if (entropy)
            for (int i = 0; i < B * D; i++) ent -= p[i] > 0 ? p[i] * log(p[i]) : 0.0;
    }
    if (entropy) *entropy = ent / ((double)T * B);
    return loss;
}

void placer_net_backward(placer_net *net, placer_acts *acts, const double *features) {
    placer_net_backward_input(net, acts, features, NULL);
}

void placer_net_backward_input(placer_net *net, placer_acts *acts, const double *features, double *dfeatures) {
    const int T = acts->T, B = acts->B;
    const int F = net->cfg.n_features, D = net->cfg.n_devices, E = net->cfg.embed, H = net->cfg.hidden,
              A = net->cfg.attn, De = net->cfg.dev_embed;
    const int XHe = E + H, XHd = De + 2 * H, CW = 2 * H + D + 1;
    double *dE = acts->dE, *dK = acts->dK;
    memset(dE, 0, sizeof *dE * (size_t)T * H);
    memset(dK, 0, sizeof *dK * (size_t)T * A);
    /* dhn, dcn: gradients flowing into step t's h and c from step t+1 */
    double *dhn = acts->dh, *dcn = acts->dc;
    memset(dhn, 0, sizeof *dhn * (size_t)B * H);
    memset(dcn, 0, sizeof *dcn * (size_t)B * H);
    double *dev_demb = placer_net_grad(net, PN_DEV_EMB);
    for (int t = T - 1; t >= 0; t--) {
        const double *cat = acts->cat + (size_t)t * B * CW;
        if (net->cfg.clip > 0) { /* through C tanh(z / C), whose output the logits hold */
            double *dl = acts->dlogits + (size_t)t * B * D;
            const double *zc = acts->logits + (size_t)t * B * D;
            for (int i = 0; i < B * D; i++) {
                double th = zc[i] / net->cfg.clip;
                dl[i] *= 1.0 - th * th;
            }
        }
        linear_backward(acts->dcat, placer_net_grad(net, PN_OUT_W), placer_net_grad(net, PN_OUT_B),
                        acts->dlogits + (size_t)t * B * D, cat, placer_net_param(net, PN_OUT_W), B, CW, D);
        /* split dcat into dh (added to what flows from t+1) and dctx */
        for (int b = 0; b < B; b++) {
            const double *dc_row = acts->dcat + (size_t)b * CW;
            for (int j = 0; j < H; j++) {
                dhn[(size_t)b * H + j] += dc_row[j];
                acts->dctx[(size_t)b * H + j] = dc_row[H + j];
            }
        }
        const double *h = acts->dec_h + (size_t)t * B * H;
        attention_backward(acts->dh_att, dE, dK, placer_net_grad(net, PN_ATT_WQ), placer_net_grad(net, PN_ATT_V),
                           acts->att_scratch, acts->dctx, acts->alpha + (size_t)t * B * T,
                           acts->u + (size_t)t * B * T * A, h, acts->enc_h, placer_net_param(net, PN_ATT_WQ),
                           placer_net_param(net, PN_ATT_V), B, T, H, A);
        for (int i = 0; i < B * H; i++) dhn[i] += acts->dh_att[i];
        const double *c_prev = t == 0 ? acts->c0 : acts->dec_c + (size_t)(t - 1) * B * H;
        lstm_backward(acts->dxh, acts->dc_prev, NULL, placer_net_grad(net, PN_DEC_B),
                      acts->dz + (size_t)t * B * 4 * H, dhn, dcn, acts->dec_gates + (size_t)t * B * 4 * H, acts->dec_tc + (size_t)t * B * H,
                      c_prev, acts->dec_xh + (size_t)t * B * XHd, placer_net_param(net, PN_DEC_W), B, XHd, H);
        memcpy(dcn, acts->dc_prev, sizeof *dcn * (size_t)B * H);
        for (int b = 0; b < B; b++) {
            const double *row = acts->dxh + (size_t)b * XHd;
            int prev = t == 0 ? D : acts->actions[(size_t)(t - 1) * B + b];
            for (int j = 0; j < De; j++) dev_demb[(size_t)prev * De + j] += row[j];
            for (int j = 0; j < H; j++) dE[(size_t)t * H + j] += row[De + j];
            memcpy(dhn + (size_t)b * H, row + De + H, sizeof *dhn * (size_t)H);
        }
    }
    /* the decoder's weight gradient, every step at once (same sums, one pass) */
    linear_backward_dw_steps(placer_net_grad(net, PN_DEC_W), acts->dz, acts->dec_xh, T, B, XHd, 4 * H, XHd);
    /* the decoder's initial state is the encoder's final state, broadcast */
    double *enc_dh = acts->enc_dh, *enc_dc = acts->enc_dc;
    memset(enc_dh, 0, sizeof *enc_dh * (size_t)H);
    memset(enc_dc, 0, sizeof *enc_dc * (size_t)H);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < H; j++) {
            enc_dh[j] += dhn[(size_t)b * H + j];
            enc_dc[j] += dcn[(size_t)b * H + j];
        }
    /* keys: K = E Wk^T */
    linear_backward(acts->dEk, placer_net_grad(net, PN_ATT_WK), NULL, dK, acts->enc_h,
                    placer_net_param(net, PN_ATT_WK), T, H, A);
    for (int i = 0; i < T * H; i++) dE[i] += acts->dEk[i];
    /* encoder, backwards in time; enc_dh carries dh from step t+1 */
    for (int t = T - 1; t >= 0; t--) {
        for (int j = 0; j < H; j++) enc_dh[j] += dE[(size_t)t * H + j];
        const double *c_prev = t == 0 ? acts->zeros : acts->enc_c + (size_t)(t - 1) * H;
        lstm_backward(acts->enc_dxh, acts->enc_dc_prev, NULL, placer_net_grad(net, PN_ENC_B),
                      acts->dz + (size_t)t * 4 * H, enc_dh, enc_dc, acts->enc_gates + (size_t)t * 4 * H,
                      acts->enc_tc + (size_t)t * H, c_prev, acts->enc_xh + (size_t)t * XHe,
                      placer_net_param(net, PN_ENC_W), 1, XHe, H);
        memcpy(acts->dX + (size_t)t * E, acts->enc_dxh, sizeof(double) * (size_t)E);
        memcpy(enc_dh, acts->enc_dxh + E, sizeof *enc_dh * (size_t)H);
        memcpy(enc_dc, acts->enc_dc_prev, sizeof *enc_dc * (size_t)H);
    }
    linear_backward_dw_steps(placer_net_grad(net, PN_ENC_W), acts->dz, acts->enc_xh, T, 1, XHe, 4 * H, XHe);
    linear_backward(dfeatures, placer_net_grad(net, PN_WF), placer_net_grad(net, PN_BF), acts->dX, features,
                    placer_net_param(net, PN_WF), T, F, E);
}

void placer_net_zero_grad(placer_net *net) { memset(net->grads, 0, sizeof *net->grads * net->n_params); }

double placer_net_clip_grad(placer_net *net, double max_norm) {
    double ss = 0.0;
    for (size_t i = 0; i < net->n_params; i++) ss += net->grads[i] * net->grads[i];
    double norm = sqrt(ss);
    if (max_norm > 0 && norm > max_norm) {
        double s = max_norm / norm;
        for (size_t i = 0; i < net->n_params; i++) net->grads[i] *= s;
    }
    return norm;
}

void adam_destroy(adam_state *a) {
    if (!a) return;
    free(a->m);
    free(a->v);
    free(a);
}

pl_status adam_create(size_t n, double lr, adam_state **out) {
    *out = NULL;
    adam_state *a = calloc(1, sizeof *a);
    if (!a) return PL_ERR_NOMEM;
    a->lr = lr;
    a->beta1 = 0.9;
    a->beta2 = 0.999;
    a->eps = 1e-8;
    a->m = calloc(n ? n : 1, sizeof *a->m);
    a->v = calloc(n ? n : 1, sizeof *a->v);
    if (!a->m || !a->v) {
        adam_destroy(a);
        return PL_ERR_NOMEM;
    }
    *out = a;
    return PL_OK;
}

void adam_step(adam_state *a, double *params, const double *grads, size_t n) {
    a->t++;
    double bc1 = 1.0 - pow(a->beta1, (double)a->t), bc2 = 1.0 - pow(a->beta2, (double)a->t);
    for (size_t i = 0; i < n; i++) {
        double g = grads[i];
        a->m[i] = a->beta1 * a->m[i] + (1.0 - a->beta1) * g;
        a->v[i] = a->beta2 * a->v[i] + (1.0 - a->beta2) * g * g;
        double mh = a->m[i] / bc1, vh = a->v[i] / bc2;
        params[i] -= a->lr * mh / (sqrt(vh) + a->eps);
    }
}
