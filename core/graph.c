/*
 * graph.c: the GPT graph builder.
 *
 * FLOP counts follow the usual convention of 2 FLOPs per multiply-add; the
 * backward pass of a matmul costs twice its forward. Byte counts are rough
 * DRAM traffic estimates for a spec (roofline) profile; measured profiles
 * replace them with real timings, so they only need the right magnitude.
 */
#include "graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *op_kind_name(op_kind k) {
    static const char *names[OP_KIND_COUNT] = {
        "embedding", "layernorm", "attention", "residual", "mlp", "head", "loss"};
    return (k >= 0 && k < OP_KIND_COUNT) ? names[k] : "unknown";
}

static const gpt_config PRESET_DEFAULT = {50257, 384, 6, 6, 256, 16};
static const gpt_config PRESET_GPT12 = {50257, 768, 12, 12, 256, 16};
static const gpt_config PRESET_TINY = {64, 16, 2, 2, 8, 4};

pl_status gpt_config_validate(const gpt_config *c, char *msg, size_t len) {
    if (c->vocab <= 0 || c->d_model <= 0 || c->n_heads <= 0 || c->n_layers <= 0 ||
        c->seq_len <= 0 || c->batch <= 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "config values must all be positive");
    if (c->d_model % c->n_heads != 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "heads (%d) must divide d_model (%d)",
                       c->n_heads, c->d_model);
    return PL_OK;
}

pl_status gpt_config_parse(const char *text, gpt_config *cfg, char *msg, size_t len) {
    if (!text || !*text) text = "default";
    char buf[256];
    if (strlen(text) >= sizeof buf)
        return pl_fail(msg, len, PL_ERR_INVALID, "config string too long");
    strcpy(buf, text);
    char *save = NULL;
    char *tok = strtok_r(buf, ",", &save);
    if (!tok) return pl_fail(msg, len, PL_ERR_INVALID, "empty config");
    if (strcmp(tok, "default") == 0) *cfg = PRESET_DEFAULT;
    else if (strcmp(tok, "gpt12") == 0) *cfg = PRESET_GPT12;
    else if (strcmp(tok, "tiny") == 0) *cfg = PRESET_TINY;
    else
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "unknown config '%s' (use default, gpt12 or tiny, then key=value overrides)",
                       tok);
    while ((tok = strtok_r(NULL, ",", &save))) {
        char *eq = strchr(tok, '=');
        if (!eq) return pl_fail(msg, len, PL_ERR_INVALID, "config override '%s' is not key=value", tok);
        *eq = 0;
        char *end = NULL;
        long v = strtol(eq + 1, &end, 10);
        if (!*(eq + 1) || *end || v <= 0 || v > 1000000000L)
            return pl_fail(msg, len, PL_ERR_INVALID, "config value for '%s' must be a positive integer", tok);
        int *field = NULL;
        if (!strcmp(tok, "vocab")) field = &cfg->vocab;
        else if (!strcmp(tok, "d_model")) field = &cfg->d_model;
        else if (!strcmp(tok, "heads")) field = &cfg->n_heads;
        else if (!strcmp(tok, "layers")) field = &cfg->n_layers;
        else if (!strcmp(tok, "seq")) field = &cfg->seq_len;
        else if (!strcmp(tok, "batch")) field = &cfg->batch;
        else
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "unknown config key '%s' (vocab, d_model, heads, layers, seq, batch)", tok);
        *field = (int)v;
    }
    return gpt_config_validate(cfg, msg, len);
}

void gpt_config_key(const gpt_config *c, char *buf, size_t len) {
    snprintf(buf, len, "gpt-L%d-C%d-H%d-V%d-T%d-B%d", c->n_layers, c->d_model, c->n_heads,
             c->vocab, c->seq_len, c->batch);
}

/* Fill one node. Shapes are (B,T,C)-like for the full batch. */
static void set_node(graph_node *n, op_kind k, const char *name, int layer, int in0, int in1) {
    memset(n, 0, sizeof *n);
    n->kind = k;
    snprintf(n->name, sizeof n->name, "%s", name);
    n->layer = layer;
    if (in0 >= 0) n->inputs[n->n_inputs++] = in0;
    if (in1 >= 0) n->inputs[n->n_inputs++] = in1;
}

static void set_shape3(graph_node *n, int64_t a, int64_t b, int64_t c) {
    n->out_rank = 3;
    n->out_shape[0] = a; n->out_shape[1] = b; n->out_shape[2] = c;
}

pl_status graph_build_gpt(const gpt_config *cfg, graph **out, char *msg, size_t len) {
    *out = NULL;
    pl_status st = gpt_config_validate(cfg, msg, len);
    if (st != PL_OK) return st;
    const int64_t V = cfg->vocab, C = cfg->d_model, NH = cfg->n_heads, L = cfg->n_layers;
    const int64_t T = cfg->seq_len, B = cfg->batch;
    const double f = 4.0; /* bytes per float */
    const int n = (int)(4 + 6 * L);

    graph *g = calloc(1, sizeof *g);
    if (!g) return PL_ERR_NOMEM;
    g->cfg = *cfg;
    g->n_nodes = n;
    g->nodes = calloc((size_t)n, sizeof *g->nodes);
    g->cons_start = calloc((size_t)n + 1, sizeof *g->cons_start);
    if (!g->nodes || !g->cons_start) goto out_nomem;

    char name[GRAPH_NAME_LEN];
    graph_node *nd;
    /* embedding: out = wte[tok] + wpe[pos]; saves nothing but its output */
    nd = &g->nodes[0];
    set_node(nd, OP_EMBEDDING, "embedding", -1, -1, -1);
    set_shape3(nd, B, T, C);
    nd->params = V * C + T * C;
    nd->fwd_flops_per_sample = (double)T * C;
    nd->bwd_flops_per_sample = 2.0 * T * C;
    nd->fwd_bytes_per_sample = f * 3.0 * T * C + 4.0 * T;
    nd->bwd_bytes_per_sample = f * 5.0 * T * C;
    nd->fwd_kernels = 1; nd->bwd_kernels = 1;

    int prev = 0; /* the residual stream entering the next block */
    for (int l = 0; l < L; l++) {
        int base = 1 + 6 * l;
        /* layernorm 1: saves mean and rstd (2 floats per token) */
        nd = &g->nodes[base + 0];
        snprintf(name, sizeof name, "ln1.%d", l);
        set_node(nd, OP_LAYERNORM, name, l, prev, -1);
        set_shape3(nd, B, T, C);
        nd->params = 2 * C;
        nd->fwd_flops_per_sample = 8.0 * T * C;
        nd->bwd_flops_per_sample = 16.0 * T * C;
        nd->fwd_bytes_per_sample = f * (2.0 * T * C + 2.0 * T);
        nd->bwd_bytes_per_sample = f * (4.0 * T * C + 2.0 * T);
        nd->fwd_kernels = 1; nd->bwd_kernels = 1;

        /* attention: qkv (T,3C), pre-softmax and softmax (NH,T,T), y (T,C) */
        nd = &g->nodes[base + 1];
        snprintf(name, sizeof name, "attn.%d", l);
        set_node(nd, OP_ATTENTION, name, l, base + 0, -1);
        set_shape3(nd, B, T, C);
        nd->params = C * 3 * C + 3 * C + C * C + C;
        double mm = 2.0 * T * C * 3 * C + 2.0 * T * C * C;   /* qkv and proj */
        double att = 2.0 * 2.0 * T * T * C;                  /* q@k^T and att@v */
        nd->fwd_flops_per_sample = mm + att + 5.0 * NH * T * T;
        nd->bwd_flops_per_sample = 2.0 * (mm + att) + 5.0 * NH * T * T;
        nd->fwd_bytes_per_sample = f * (6.0 * T * C + 3.0 * NH * T * T + 4.0 * C * C);
        nd->bwd_bytes_per_sample = f * (12.0 * T * C + 5.0 * NH * T * T + 8.0 * C * C);
        nd->fwd_kernels = 6; nd->bwd_kernels = 8;

        /* residual add: out = stream + attn */
        nd = &g->nodes[base + 2];
        snprintf(name, sizeof name, "res1.%d", l);
        set_node(nd, OP_RESIDUAL, name, l, prev, base + 1);
        set_shape3(nd, B, T, C);
        nd->fwd_flops_per_sample = (double)T * C;
        nd->bwd_flops_per_sample = 0.0;
        nd->fwd_bytes_per_sample = f * 3.0 * T * C;
        nd->bwd_bytes_per_sample = f * 3.0 * T * C;
        nd->fwd_kernels = 1; nd->bwd_kernels = 1;

        nd = &g->nodes[base + 3];
        snprintf(name, sizeof name, "ln2.%d", l);
        set_node(nd, OP_LAYERNORM, name, l, base + 2, -1);
        set_shape3(nd, B, T, C);
        nd->params = 2 * C;
        nd->fwd_flops_per_sample = 8.0 * T * C;
        nd->bwd_flops_per_sample = 16.0 * T * C;
        nd->fwd_bytes_per_sample = f * (2.0 * T * C + 2.0 * T);
        nd->bwd_bytes_per_sample = f * (4.0 * T * C + 2.0 * T);
        nd->fwd_kernels = 1; nd->bwd_kernels = 1;

        /* mlp: saves fc pre-activation and GELU output, (T,4C) each */
        nd = &g->nodes[base + 4];
        snprintf(name, sizeof name, "mlp.%d", l);
        set_node(nd, OP_MLP, name, l, base + 3, -1);
        set_shape3(nd, B, T, C);
        nd->params = C * 4 * C + 4 * C + 4 * C * C + C;
        double mlp = 2.0 * 2.0 * T * C * 4 * C;
        nd->fwd_flops_per_sample = mlp + 8.0 * T * 4 * C;
        nd->bwd_flops_per_sample = 2.0 * mlp + 10.0 * T * 4 * C;
        nd->fwd_bytes_per_sample = f * (2.0 * T * C + 12.0 * T * C + 8.0 * C * C);
        nd->bwd_bytes_per_sample = f * (4.0 * T * C + 24.0 * T * C + 16.0 * C * C);
        nd->fwd_kernels = 3; nd->bwd_kernels = 5;

        nd = &g->nodes[base + 5];
        snprintf(name, sizeof name, "res2.%d", l);
        set_node(nd, OP_RESIDUAL, name, l, base + 2, base + 4);
        set_shape3(nd, B, T, C);
        nd->fwd_flops_per_sample = (double)T * C;
        nd->bwd_flops_per_sample = 0.0;
        nd->fwd_bytes_per_sample = f * 3.0 * T * C;
        nd->bwd_bytes_per_sample = f * 3.0 * T * C;
        nd->fwd_kernels = 1; nd->bwd_kernels = 1;
        prev = base + 5;
    }
    int lnf = (int)(1 + 6 * L);
    nd = &g->nodes[lnf];
    set_node(nd, OP_LAYERNORM, "ln_f", (int)L, prev, -1);
    set_shape3(nd, B, T, C);
    nd->params = 2 * C;
    nd->fwd_flops_per_sample = 8.0 * T * C;
    nd->bwd_flops_per_sample = 16.0 * T * C;
    nd->fwd_bytes_per_sample = f * (2.0 * T * C + 2.0 * T);
    nd->bwd_bytes_per_sample = f * (4.0 * T * C + 2.0 * T);
    nd->fwd_kernels = 1; nd->bwd_kernels = 1;

    nd = &g->nodes[lnf + 1];
    set_node(nd, OP_HEAD, "head", (int)L, lnf, -1);
    set_shape3(nd, B, T, V);
    nd->params = C * V;
    nd->fwd_flops_per_sample = 2.0 * T * C * V;
    nd->bwd_flops_per_sample = 4.0 * T * C * V;
    nd->fwd_bytes_per_sample = f * (T * C + C * V + T * V);
    nd->bwd_bytes_per_sample = f * (2.0 * T * C + 2.0 * C * V + 2.0 * T * V);
    nd->fwd_kernels = 1; nd->bwd_kernels = 2;

    /* loss: per-token loss (B,T); keeps softmax probabilities (T,V) for backward */
    nd = &g->nodes[lnf + 2];
    set_node(nd, OP_LOSS, "loss", (int)L, lnf + 1, -1);
    nd->out_rank = 2; nd->out_shape[0] = B; nd->out_shape[1] = T;
    nd->fwd_flops_per_sample = 5.0 * T * V;
    nd->bwd_flops_per_sample = 2.0 * T * V;
    nd->fwd_bytes_per_sample = f * 2.0 * T * V;
    nd->bwd_bytes_per_sample = f * 2.0 * T * V;
    nd->fwd_kernels = 1; nd->bwd_kernels = 1;

    /* output and saved bytes, consumers, total params */
    for (int i = 0; i < n; i++) {
        graph_node *x = &g->nodes[i];
        int64_t per = 1;
        for (int d = 1; d < x->out_rank; d++) per *= x->out_shape[d];
        x->out_bytes_per_sample = 4 * per;
        switch (x->kind) {
        case OP_LAYERNORM: x->act_bytes_per_sample = 4 * (T * C + 2 * T); break;
        case OP_ATTENTION: x->act_bytes_per_sample = 4 * (3 * T * C + 2 * NH * T * T + 2 * T * C); break;
        case OP_MLP: x->act_bytes_per_sample = 4 * (2 * T * 4 * C + T * C); break;
        case OP_LOSS: x->act_bytes_per_sample = 4 * (T * V + T); break;
        default: x->act_bytes_per_sample = x->out_bytes_per_sample; break;
        }
        g->total_params += x->params;
        for (int j = 0; j < x->n_inputs; j++) g->cons_start[x->inputs[j] + 1]++;
    }
    for (int i = 0; i < n; i++) g->cons_start[i + 1] += g->cons_start[i];
    g->cons = malloc(sizeof *g->cons * (size_t)(g->cons_start[n] > 0 ? g->cons_start[n] : 1));
    int *fill = calloc((size_t)n, sizeof *fill);
    if (!g->cons || !fill) { free(fill); goto out_nomem; }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < g->nodes[i].n_inputs; j++) {
            int p = g->nodes[i].inputs[j];
            g->cons[g->cons_start[p] + fill[p]++] = i;
        }
    free(fill);
    *out = g;
    return PL_OK;

out_nomem:
    graph_destroy(g);
    return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory building the graph");
}

void graph_destroy(graph *g) {
    if (!g) return;
    free(g->nodes);
    free(g->cons_start);
    free(g->cons);
    free(g);
}
