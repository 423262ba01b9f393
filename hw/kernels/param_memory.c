/* param_memory.c: parameter shards (whole, and a tensor-parallel rank's
 * slice of one, with the copies between the two), activation sizes and
 * initial parameters (param_memory.h). */
#include "param_memory.h"

#include <math.h>
#include <string.h>

#include "util.h"

void hw_node_param_map(const graph *g, int i, hw_param_map *pl) { hw_node_param_map_tp(g, i, 1, pl); }

void hw_node_param_map_tp(const graph *g, int i, int tp, hw_param_map *pl) {
    const graph_node *n = &g->nodes[i];
    const int64_t V = g->cfg.vocab, C = g->cfg.d_model, T = g->cfg.seq_len;
    if (tp < 1) tp = 1;
    const int64_t Cl = C / tp, Fl = 4 * C / tp;
    int64_t sizes[HW_MAX_PARAM_TENSORS] = {0};
    int k = 0;
    switch (n->kind) {
    case OP_EMBEDDING: sizes[k++] = V * C; sizes[k++] = T * C; break;
    case OP_LAYERNORM: sizes[k++] = C; sizes[k++] = C; break;
    case OP_ATTENTION: sizes[k++] = 3 * Cl * C; sizes[k++] = 3 * Cl; sizes[k++] = C * Cl; sizes[k++] = C; break;
    case OP_MLP: sizes[k++] = Fl * C; sizes[k++] = Fl; sizes[k++] = C * Fl; sizes[k++] = C; break;
    case OP_HEAD: /* rows V..Vp-1 (V/tp..Vlp-1 of a rank's slice) stay 0 */
        sizes[k++] = (int64_t)hw_padded_vocab(hw_tp_vocab_slice((int)V, tp)) * C;
        break;
    default: break;
    }
    memset(pl, 0, sizeof *pl);
    pl->n = k;
    int64_t off = 0;
    for (int j = 0; j < k; j++) {
        pl->off[j] = off;
        pl->size[j] = sizes[j];
        off += hw_align_floats(sizes[j]);
    }
    pl->floats = off;
}

int64_t hw_model_param_offsets(const graph *g, int64_t *off) {
    int64_t total = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        hw_param_map pl;
        hw_node_param_map(g, i, &pl);
        if (off) off[i] = total;
        total += pl.floats;
    }
    if (off) off[g->n_nodes] = total;
    return total;
}

static void fill_normal(pl_rng *r, float *x, int64_t n, double std) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)(pl_rng_normal(r) * std);
}

void hw_params_init(const graph *g, uint64_t seed, float *model) {
    const double std = 0.02, proj_std = 0.02 / sqrt(2.0 * g->cfg.n_layers);
    int64_t off = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        hw_param_map pl;
        hw_node_param_map(g, i, &pl);
        float *shard = model + off;
        memset(shard, 0, sizeof(float) * (size_t)pl.floats);
        pl_rng r;
        pl_rng_seed(&r, seed * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0xD1B54A32D192ED03ull + 1);
        switch (g->nodes[i].kind) {
        case OP_EMBEDDING:
            fill_normal(&r, shard + pl.off[0], pl.size[0], std);
            fill_normal(&r, shard + pl.off[1], pl.size[1], std);
            break;
        case OP_LAYERNORM:
            for (int64_t c = 0; c < pl.size[0]; c++) shard[pl.off[0] + c] = 1.0f;
            break;
        case OP_ATTENTION:
        case OP_MLP:
            fill_normal(&r, shard + pl.off[0], pl.size[0], std);
            fill_normal(&r, shard + pl.off[2], pl.size[2], proj_std);
            break;
        case OP_HEAD:
            /* the padding rows (vocab V..Vp-1) stay zero: their logits are 0,
             * the loss gives them a zero gradient, so they never change */
            fill_normal(&r, shard + pl.off[0], (int64_t)g->cfg.vocab * g->cfg.d_model, std);
            break;
        default: break;
        }
        off += pl.floats;
    }
}

void hw_node_mem_floats(const graph *g, int i, int b, hw_node_mem *m) { hw_node_mem_floats_prec(g, i, b, 0, m); }

/* The saved block's layout: k tensors of sizes[j] floats, each aligned. */
static void set_saved(hw_node_mem *m, const int64_t *sizes, int k) {
    m->n_saved = k;
    int64_t off = 0;
    for (int j = 0; j < k; j++) {
        m->saved_off[j] = off;
        m->saved_size[j] = sizes[j];
        off += hw_align_floats(sizes[j]);
    }
    m->saved = off;
}

void hw_node_mem_floats_prec(const graph *g, int i, int b, int bf16, hw_node_mem *m) {
    const graph_node *n = &g->nodes[i];
    const int64_t C = g->cfg.d_model, T = g->cfg.seq_len, NH = g->cfg.n_heads;
    const int64_t Vp = hw_padded_vocab(g->cfg.vocab);
    const int64_t BT = (int64_t)b * T, BTC = BT * C;
    memset(m, 0, sizeof *m);
    int64_t sizes[HW_MAX_SAVED] = {0};
    int k = 0;
    m->out = BTC;
    switch (n->kind) {
    case OP_LAYERNORM: sizes[k++] = BT; sizes[k++] = BT; break;
    case OP_ATTENTION:
        sizes[k++] = 3 * BTC;
        sizes[k++] = (int64_t)b * NH * T * T;
        sizes[k++] = BTC;
        m->fwd_scratch = 4 * BTC;
        m->bwd_scratch = 8 * BTC + (int64_t)b * NH * T * T;
        break;
    case OP_MLP:
        sizes[k++] = 4 * BTC;
        sizes[k++] = 4 * BTC;
        m->bwd_scratch = 4 * BTC;
        break;
    case OP_HEAD: /* scratch: x^T for the TF32 weight gradient (kernels.cu) */
        m->out = BT * Vp;
        m->bwd_scratch = BTC;
        break;
    case OP_LOSS: m->out = BT; break;
    default: break;
    }
    if (bf16) {
        /* bf16 mode (hw.h): same outputs and saved slots (bf16 tensors use the
         * first half of theirs; the MLP's input copy sits in h's second half),
         * a little more saved for the input copies of attention and head, and
         * more scratch for the bf16 copies of GEMM inputs. Sized for the larger of the two backends: the CPU backend
         * keeps its "bf16" copies as rounded floats; the GPU's attention
         * without the flash kernel (kernels.cu) needs 8.5 BTC + b NH T T. */
        switch (n->kind) {
        case OP_ATTENTION:
            /* the GPU keeps the bf16 copy of its input (BTC / 2 floats) after the
             * second slot's T x T block (or lse) for the backward's GEMMs */
            sizes[1] = hw_align_floats(sizes[1]) + BTC / 2 + 1;
            m->fwd_scratch = 5 * BTC;
            m->bwd_scratch = 10 * BTC + (int64_t)b * NH * T * T;
            break;
        case OP_MLP:
            m->fwd_scratch = BTC;
            m->bwd_scratch = 7 * BTC;
            break;
        case OP_HEAD: /* the bf16 copy of its input, kept for the backward (GPU) */
            sizes[k++] = BTC / 2 + 1;
            m->fwd_scratch = BTC;
            m->bwd_scratch = BTC;
            break;
        default: break;
        }
    }
    set_saved(m, sizes, k);
}

int hw_kind_bwd_reads_input(op_kind k) {
    return k == OP_LAYERNORM || k == OP_ATTENTION || k == OP_MLP || k == OP_HEAD;
}

void hw_node_mem_floats_tp(const graph *g, int i, int b, int bf16, int tp, int sp, hw_node_mem *m) {
    if (tp <= 1) {
        hw_node_mem_floats_prec(g, i, b, bf16, m);
        return;
    }
    const graph_node *n = &g->nodes[i];
    const int64_t C = g->cfg.d_model, T = g->cfg.seq_len, NH = g->cfg.n_heads;
    const int64_t N = (int64_t)b * T, Ns = sp ? N / tp : N, NC = N * C;
    const int64_t Cl = C / tp, Fl = 4 * C / tp, nh = NH / tp;
    const int64_t Vlp = hw_padded_vocab(hw_tp_vocab_slice(g->cfg.vocab, tp));
    const int64_t X = bf16 ? NC : 0; /* bf16: the rounded copy of an (N, C) GEMM input (nodes.h) */
    memset(m, 0, sizeof *m);
    int64_t sizes[HW_MAX_SAVED] = {0};
    int k = 0;
    m->out = Ns * C;
    switch (n->kind) {
    case OP_LAYERNORM: sizes[k++] = Ns; sizes[k++] = Ns; break;
    case OP_ATTENTION:
        sizes[k++] = 3 * N * Cl;
        sizes[k++] = (int64_t)b * nh * T * T;
        sizes[k++] = N * Cl;
        /* qkv, yp; the partial output; the gathered input (sp) */
        m->fwd_scratch = 4 * N * Cl + X + NC + (sp ? NC : 0);
        /* dy, dyp, dqkvr, dqkv, datt; the partial input gradient; the
         * gathered input and output gradient (sp) */
        m->bwd_scratch = 8 * N * Cl + (int64_t)b * nh * T * T + 2 * X + NC + (sp ? 2 * NC : 0);
        break;
    case OP_MLP:
        sizes[k++] = N * Fl;
        sizes[k++] = N * Fl;
        m->fwd_scratch = X + NC + (sp ? NC : 0);              /* partial output, gathered input */
        m->bwd_scratch = N * Fl + 2 * X + NC + (sp ? 2 * NC : 0); /* dg; partial, gathered input and dout */
        break;
    case OP_HEAD:
        m->out = N * Vlp;
        m->fwd_scratch = X + (sp ? NC : 0);      /* gathered input */
        m->bwd_scratch = X + NC + (sp ? NC : 0); /* partial input gradient, gathered input */
        break;
    case OP_LOSS:
        m->out = N;
        m->fwd_scratch = 6 * N; /* three doubles a token: max, sum of exp, target logit */
        break;
    default: break;
    }
    set_saved(m, sizes, k);
}

/* ---- a tensor-parallel rank's shard and the model view ---- */

/* rows x cols floats between local (row stride ls) and full (row stride fs). */
static void copy_block(float *local, int64_t ls, float *full, int64_t fs, int64_t rows, int64_t cols, int to_full) {
    for (int64_t r = 0; r < rows; r++) {
        float *l = local + r * ls, *f = full + r * fs;
        if (to_full) memcpy(f, l, sizeof(float) * (size_t)cols);
        else memcpy(l, f, sizeof(float) * (size_t)cols);
    }
}

static void map_shard(const graph *g, int node, int rank, int size, float *local, float *full, int to_full) {
    hw_param_map fl, ll;
    hw_node_param_map(g, node, &fl);
    hw_node_param_map_tp(g, node, size, &ll);
    const int64_t C = g->cfg.d_model, Cl = C / size, F = 4 * C, Fl = F / size;
    switch (g->nodes[node].kind) {
    case OP_ATTENTION:
    case OP_MLP: {
        /* the rows of the first matmul: attention's q, k and v blocks of Cl
         * rows each, the MLP's one block of Fl rows */
        const int parts = g->nodes[node].kind == OP_ATTENTION ? 3 : 1;
        const int64_t W = parts == 3 ? C : F, Wl = parts == 3 ? Cl : Fl;
        for (int part = 0; part < parts; part++) {
            const int64_t fr = part * W + rank * Wl, lr = part * Wl;
            copy_block(local + ll.off[0] + lr * C, C, full + fl.off[0] + fr * C, C, Wl, C, to_full);
            copy_block(local + ll.off[1] + lr, 1, full + fl.off[1] + fr, 1, Wl, 1, to_full);
        }
        /* the projection's columns that read them: (C, Wl) of (C, W) */
        copy_block(local + ll.off[2], Wl, full + fl.off[2] + rank * Wl, W, C, Wl, to_full);
        copy_block(local + ll.off[3], C, full + fl.off[3], C, 1, C, to_full);
        break;
    }
    case OP_HEAD: {
        const int V = g->cfg.vocab;
        const int64_t Vs = hw_tp_vocab_slice(V, size), rows = hw_tp_vocab_rows(V, size, rank);
        const int64_t Vlp = hw_padded_vocab((int)Vs);
        copy_block(local + ll.off[0], C, full + fl.off[0] + rank * Vs * C, C, rows, C, to_full);
        if (!to_full) memset(local + ll.off[0] + rows * C, 0, sizeof(float) * (size_t)((Vlp - rows) * C));
        break;
    }
    default:
        for (int k = 0; k < fl.n; k++) copy_block(local + ll.off[k], 0, full + fl.off[k], 0, 1, fl.size[k], to_full);
        break;
    }
}

void hw_tp_shard_from_full(const graph *g, int node, int rank, int size, const float *full, float *local) {
    hw_param_map ll;
    hw_node_param_map_tp(g, node, size, &ll);
    memset(local, 0, sizeof(float) * (size_t)ll.floats); /* alignment padding */
    map_shard(g, node, rank, size, local, (float *)full, 0);
}

void hw_tp_shard_to_full(const graph *g, int node, int rank, int size, const float *local, float *full) {
    map_shard(g, node, rank, size, (float *)local, full, 1);
}
