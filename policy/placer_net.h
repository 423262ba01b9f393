/*
 * placer_net.h: the seq2seq placer network of Mirhoseini et al. (2017), in C.
 *
 * For a sequence of T units (co-location groups or nodes), each described
 * by GROUP_N_FEATURES numbers (grouping.h), it writes one device per unit:
 *
 *   x_t   = Wf f_t + bf                                   (T,E) embedding
 *   e_t   = LSTM_enc(x_t, e_{t-1})                        (T,H) encoder states
 *   d_t   = LSTM_dec([dev_emb(a_{t-1}) ; e_t], d_{t-1})   decoder, d_{-1} = e_{T-1}
 *   ctx_t = attention(d_t over e_0..e_{T-1})              content (additive) attention
 *   z_t   = Wo [d_t ; ctx_t ; onehot(a_{t-1})] + bo
 *   p_t   = softmax(C tanh(z_t / C))                       over the D devices
 *
 * a_{-1} is a start token (row D of the device embedding). The one-hot of
 * the previous device also reaches the output layer directly, so "stay on
 * the previous device" is one weight, and the initial policy can be given a
 * prior (cfg.stay) of repeating the previous device. Logit clipping (Bello
 * et al. 2016) bounds how deterministic the policy can get (with C = 3 on
 * 2 devices the likeliest device has p <= 0.9975), so the neighbourhood of
 * the favourite stays sampled. The decoder also
 * reads e_t, the encoder state of the unit it is placing, in its input: the
 * paper's decoder "outputs the device for the op at the same encoder step";
 * feeding that state directly spares the attention from having to learn
 * positional lookup within a few hundred updates.
 *
 * The pipeline prior (cfg.pipe = k > 0) adds a fixed term to the logits
 * that feed the softmax: device d owns the share s_d of the unit sequence,
 * the interval [c_d, c_d + s_d) of [0, 1) with c_d = s_0 + ... + s_{d-1},
 * and for unit t of T
 *   prior[t][d] = -k ((x_t - c_d - s_d / 2) / s_d)^2,  x_t = (t + 1/2) / T,
 * so the first policy prefers to cut the unit sequence into D consecutive
 * stages on devices 0, 1, ..., D-1 in order, of sizes proportional to the
 * shares (the shape of a pipeline, as the grouper's contiguity prior
 * prefers contiguous chunks). Equal shares (the default) give
 * -k (x_t D - d - 1/2)^2; the trainer sets the shares to the devices'
 * speeds (placer_net_set_pipe_shares), so a slow device starts with a
 * short stage. A device of share 0 has no stage: its prior at unit t is
 * -k (1 + max_d u_d^2) over the devices d with a share (u_d the bracket
 * above), below every device that has one, so the first policy leaves it
 * out (the trainer's pipe_devices rule, reinforce.h). The prior has no parameters and leaves every gradient
 * formula as it is (the softmax's gradient with respect to its input is
 * the same for a shifted input).
 *
 * Parameters live in one flat buffer (and gradients in another) with a
 * table of offsets, llm.c style; Adam's moments are two more flat buffers.
 * The forward pass runs B sequences in parallel (the K samples of one
 * REINFORCE update share one encoder pass) and saves what the backward
 * pass needs in a placer_acts workspace. Gradients are checked against
 * finite differences in tests/policy.
 */
#ifndef PLACER_POLICY_PLACER_NET_H
#define PLACER_POLICY_PLACER_NET_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "util.h"

typedef struct {
    int n_features; /* F, inputs per unit */
    int n_devices;  /* D, outputs per unit */
    int embed;      /* E, feature embedding width */
    int hidden;     /* H, LSTM width (encoder and decoder) */
    int attn;       /* A, attention width */
    int dev_embed;  /* De, device embedding width */
    double stay;    /* initial probability of repeating the previous device (0: uniform start) */
    double clip;    /* logit clipping C: logits = C tanh(z / C) (0: none) */
    double pipe;    /* pipeline prior strength k (0: none), see below */
} placer_net_config;

enum {
    PN_WF = 0,  /* (E,F) feature embedding */
    PN_BF,      /* (E) */
    PN_ENC_W,   /* (4H, E+H) encoder LSTM */
    PN_ENC_B,   /* (4H) */
    PN_DEV_EMB, /* (D+1, De) device embedding, row D = start token */
    PN_DEC_W,   /* (4H, De+2H) decoder LSTM, input [dev_emb ; e_t ; d_prev] */
    PN_DEC_B,   /* (4H) */
    PN_ATT_WQ,  /* (A,H) query projection */
    PN_ATT_WK,  /* (A,H) key projection */
    PN_ATT_V,   /* (A) score vector */
    PN_OUT_W,   /* (D, 2H) output over [d_t ; ctx_t] */
    PN_OUT_B,   /* (D) */
    PN_N_TENSORS
};

#define PN_MAX_PIPE_DEVICES 64 /* devices beyond this get equal pipeline shares */

typedef struct {
    placer_net_config cfg;          /* sizes */
    double pipe_share[PN_MAX_PIPE_DEVICES]; /* pipeline prior shares s_d, summing to 1 */
    size_t n_params;                /* total doubles */
    size_t offset[PN_N_TENSORS];    /* start of each tensor in params/grads */
    size_t size[PN_N_TENSORS];      /* doubles in each tensor */
    double *params;                 /* n_params */
    double *grads;                  /* n_params, accumulated by backward */
} placer_net;

typedef struct placer_acts placer_acts;

typedef enum { PN_SAMPLE = 0, PN_GIVEN, PN_GREEDY } placer_decode;

/* Default sizes for F features and D devices: E 32, H 64, A 32, De 8. */
placer_net_config placer_net_default_config(int n_features, int n_devices);

/* Allocate a network and initialise it from seed (uniform +-1/sqrt(fan_in),
 * forget-gate biases 1, a small output layer so the first policy is near
 * uniform). *out owns it (placer_net_destroy). PL_ERR_INVALID for
 * non-positive sizes, PL_ERR_NOMEM. */
pl_status placer_net_create(const placer_net_config *cfg, uint64_t seed, placer_net **out);

/* Set the pipeline prior's shares from n_devices non-negative weights
 * (scaled to sum to 1; a weight 0 gives that device no stage). Returns
 * PL_ERR_INVALID, leaving the shares as they were, when a weight is
 * negative or not finite, all are 0, or there are more than
 * PN_MAX_PIPE_DEVICES devices. */
pl_status placer_net_set_pipe_shares(placer_net *net, const double *weights);
void placer_net_destroy(placer_net *net);

/* Relabel the network's devices: device d of the network as it is becomes
 * device perm[d] (perm: a permutation of 0..D-1). The device embedding's
 * rows, the output layer's rows and bias and its previous-device columns
 * move with their device, the start token's row and column stay, so that
 * on any input the relabelled network gives device perm[d] the probability
 * the original gave d (tests/policy/test_transfer.c checks it). The
 * pipeline shares are the problem's, not the network's, and are left
 * alone. PL_ERR_INVALID, leaving the network as it was, when perm is not a
 * permutation; PL_ERR_NOMEM. */
pl_status placer_net_permute_devices(placer_net *net, const int *perm);

/* Pointer to tensor k of params or grads. */
static inline double *placer_net_param(const placer_net *net, int k) { return net->params + net->offset[k]; }
static inline double *placer_net_grad(const placer_net *net, int k) { return net->grads + net->offset[k]; }

/* Workspace for sequences of up to T_cap units and B_cap samples. */
pl_status placer_acts_create(const placer_net *net, int T_cap, int B_cap, placer_acts **out);
void placer_acts_destroy(placer_acts *a);

/* Forward pass over T units (features is (T,F)) for B sequences.
 *   PN_SAMPLE  draws a[b][t] from p_t with rng (order: t outer, b inner)
 *   PN_GIVEN   uses the devices already in actions
 *   PN_GREEDY  takes the most likely device at each step
 * actions is (B,T), row b is sample b's placement. logp (B), when not NULL,
 * gets each sequence's log-probability. PL_ERR_INVALID when T or B exceed
 * the workspace. */
pl_status placer_net_forward(const placer_net *net, placer_acts *acts, const double *features, int T, int B,
                             placer_decode mode, pl_rng *rng, int *actions, double *logp);

/* Probabilities of step t of the last forward pass, (B,D). */
const double *placer_acts_probs(const placer_acts *acts, int t);

/* REINFORCE loss of the last forward pass:
 *   L = scale * sum_b sum_t [ -w[b] log p_t(a_bt) - beta H(p_t) ]
 * Fills the workspace's dlogits and returns L; call placer_net_backward next.
 * Also returns the mean per-step entropy in *entropy when not NULL. */
double placer_net_policy_loss(placer_acts *acts, const double *w, double beta, double scale, double *entropy);

/* Backward pass of the last forward pass using the dlogits the loss wrote;
 * gradients accumulate into net->grads (zero them first for a fresh step). */
void placer_net_backward(placer_net *net, placer_acts *acts, const double *features);

/* The same, also writing the loss's gradient with respect to the input
 * features into dfeatures (T,F) (assigned; NULL: skipped). */
void placer_net_backward_input(placer_net *net, placer_acts *acts, const double *features, double *dfeatures);

/* Zero the gradients. */
void placer_net_zero_grad(placer_net *net);

/* Scale gradients so that their global L2 norm is at most max_norm (when
 * max_norm > 0). Returns the norm before clipping. */
double placer_net_clip_grad(placer_net *net, double max_norm);

/* Adam (no weight decay). m and v have n entries; t counts steps taken. */
typedef struct {
    double lr;     /* step size */
    double beta1;  /* 0.9 */
    double beta2;  /* 0.999 */
    double eps;    /* 1e-8 */
    int64_t t;     /* steps taken so far */
    double *m;     /* first moments, n entries */
    double *v;     /* second moments, n entries */
} adam_state;

pl_status adam_create(size_t n, double lr, adam_state **out);
void adam_destroy(adam_state *a);
void adam_step(adam_state *a, double *params, const double *grads, size_t n);

#endif
