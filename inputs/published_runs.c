/*
 * published_runs.c: the published-runs check set as models and layouts
 * (published_runs.h).
 *
 * What each row becomes. Where the paper or its scripts do not say, the
 * choice is marked ASSUMED (docs/published-runs.md repeats the list).
 *
 * Megatron SC21 Table 1 (NVIDIA/Megatron-LM examples/sc21/run_table_1.sh):
 *   model   GPT with the row's hidden, heads and layers; sequence 2048,
 *           vocabulary 51,200 (padded to 128 * tp: already a multiple),
 *           FFN 4h, learned positions, layernorm with biases, GELU, tied
 *           embedding and head, dropout 0.1 (Megatron's default)
 *   layout  tp, pp from the row, dp = GPUs / (tp pp), the row's micro-batch
 *           and global batch, vp = the row's chunks (layers per stage / layers
 *           per virtual stage) or 1, full recomputation (--recompute-method
 *           uniform everywhere), fp16, no ZeRO, no sequence parallelism
 *           (2021), cp 1
 *   kernels unfused attention (2021: no FlashAttention; Megatron's fused
 *           scale-mask-softmax over the full score matrix)
 *   DDP     'torch' overlaps the gradient all-reduce with backward; 'local'
 *           reduces after the last backward (not overlapped); fp16 gradients
 *           (2 bytes) on the wire, ASSUMED (the fp32-accumulate flag is off
 *           by default in that code)
 *   FLOPs   F = 96 B s l h^2 (1 + s/6h + V/(16 l h)), the paper's count
 * Megatron SC21 Table 2 (same paper; ZeRO-3 from DeepSpeed):
 *   models  174.6B: h 12288, 96 heads, 96 layers; 529.6B: Table 1's 530B
 *           (h 20480, 128 heads, 105 layers); otherwise as Table 1
 *   zero3   tp = pp = 1, dp = GPUs, ZeRO stage 3 (gathered per module),
 *           full recomputation, gradient reduce-scatter overlapped with
 *           backward (DeepSpeed's overlap_comm), ASSUMED
 *   ptd-p   model-parallel size 96 = tp 8 x pp 12, 280 = tp 8 x pp 35 (the
 *           paper's text); vp 3 for 530B (as Table 1), vp 1 for 175B
 *           (ASSUMED: not published), 'local' DDP as Table 1's large rows
 * Llama 3 Table 4:
 *   model   Llama 3 405B as data/models/llama-3-405b.json gives it (126
 *           layers, h 16384, FFN 53248, 128 heads, 8 KV heads, SwiGLU, RoPE,
 *           RMSNorm, no biases, untied, no dropout) with the paper's
 *           vocabulary of 128,000, at the row's sequence length
 *   layout  tp, cp, pp, dp from the row; global batch = batch_per_dp * dp
 *           sequences; micro-batch 1 and vp 2 (ASSUMED: neither is
 *           published; with vp 2 the uniform split gives 3 layers to the first
 *           and the last chunk and 4 to the others, the paper's lighter first
 *           and last stage), sequence parallelism on (ASSUMED), no
 *           recomputation (the paper: 8K training ran without activation
 *           checkpointing; the 128K row is ASSUMED the same), bf16, FSDP
 *           (gradients and optimizer sharded, weights kept from forward to
 *           backward), gradients reduced in fp32 (4 bytes: the paper's
 *           numerical-stability section) and overlapped with backward
 *   kernels fused (flash) attention
 *   FLOPs   model FLOPs, PaLM's 6 N + 12 l h s per token (tflops_per_gpu =
 *           BF16 MFU x 989 TFLOP/s)
 */
#include "published_runs.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_file.h"
#include "model_config.h"

/* Largest table read (bytes; a table is a few KB). */
#define PUB_TABLE_FILE_MAX (16 << 20)

const char *pub_table_file(pub_table t) {
    switch (t) {
    case PUB_T1: return "megatron-sc21-table1.csv";
    case PUB_T2: return "megatron-sc21-table2.csv";
    case PUB_LLAMA: return "llama3-table4.csv";
    default: return "unknown";
    }
}

void pub_csv_free(pub_csv *c) {
    if (!c) return;
    if (c->cells) {
        int n = (c->n_rows + 1) * c->n_cols;
        for (int i = 0; i < n; i++) free(c->cells[i]);
        free(c->cells);
    }
    c->cells = NULL;
    c->n_rows = c->n_cols = 0;
}

int pub_csv_col(const pub_csv *c, const char *name) {
    for (int i = 0; i < c->n_cols; i++)
        if (!strcmp(c->cells[i], name)) return i;
    return -1;
}

const char *pub_csv_cell(const pub_csv *c, int r, int col) { return c->cells[(r + 1) * c->n_cols + col]; }

/* One parsed line: fields into f (count *nf). Advances *pos past the line.
 * Returns 0, or -1 with msg for a malformed line. */
static int parse_line(const char *t, size_t n, size_t *pos, char f[][PUB_CSV_MAX_FIELD], int *nf, int line,
                      char *msg, size_t len) {
    size_t i = *pos;
    int k = 0, flen = 0, quoted = 0, was_quoted = 0;
    *nf = 0;
    for (;;) {
        int end = i >= n;
        char ch = end ? '\n' : t[i];
        if (!end && ch == '\0') {
            pl_fail(msg, len, PL_ERR_INVALID, "line %d: NUL byte", line);
            return -1;
        }
        if (quoted) {
            if (end) {
                pl_fail(msg, len, PL_ERR_INVALID, "line %d: unterminated quote", line);
                return -1;
            }
            if (ch == '"') {
                if (i + 1 < n && t[i + 1] == '"') {
                    i++;
                } else {
                    quoted = 0;
                    i++;
                    continue;
                }
            }
        } else if (ch == '"') {
            if (flen != 0 || was_quoted) {
                pl_fail(msg, len, PL_ERR_INVALID, "line %d: quote inside an unquoted field", line);
                return -1;
            }
            quoted = was_quoted = 1;
            i++;
            continue;
        } else if (ch == ',' || ch == '\n' || ch == '\r') {
            if (k >= PUB_CSV_MAX_COLS) {
                pl_fail(msg, len, PL_ERR_INVALID, "line %d: more than %d columns", line, PUB_CSV_MAX_COLS);
                return -1;
            }
            f[k][flen] = 0;
            k++;
            flen = 0;
            was_quoted = 0;
            if (ch == ',') {
                i++;
                continue;
            }
            if (ch == '\r') {
                if (i + 1 < n && t[i + 1] == '\n') i++;
                else if (i + 1 < n) { /* a bare CR in the middle of the text */
                    pl_fail(msg, len, PL_ERR_INVALID, "line %d: stray carriage return", line);
                    return -1;
                }
            }
            *pos = end ? n : i + 1;
            *nf = k;
            return 0;
        } else if (was_quoted) {
            pl_fail(msg, len, PL_ERR_INVALID, "line %d: text after a closing quote", line);
            return -1;
        }
        if (flen + 1 >= PUB_CSV_MAX_FIELD) {
            pl_fail(msg, len, PL_ERR_INVALID, "line %d: field longer than %d bytes", line, PUB_CSV_MAX_FIELD - 1);
            return -1;
        }
        f[k < PUB_CSV_MAX_COLS ? k : PUB_CSV_MAX_COLS - 1][flen++] = ch;
        i++;
    }
}

pl_status pub_csv_parse(const char *text, size_t n, pub_csv *out, char *msg, size_t len) {
    if (!text || !out) return pl_fail(msg, len, PL_ERR_INVALID, "no CSV text");
    char f[PUB_CSV_MAX_COLS][PUB_CSV_MAX_FIELD]; /* 32 KiB: one line's fields */
    pub_csv c = {0, 0, NULL};
    size_t pos = 0, cap = 0, used = 0;
    int line = 0;
    pl_status st = PL_OK;
    while (pos < n) {
        line++;
        int nf;
        if (parse_line(text, n, &pos, f, &nf, line, msg, len) < 0) {
            st = PL_ERR_INVALID;
            goto fail;
        }
        if (nf == 1 && f[0][0] == 0) continue; /* blank line */
        if (c.n_cols == 0) {
            c.n_cols = nf;
            for (int i = 0; i < nf; i++)
                if (!f[i][0]) {
                    st = pl_fail(msg, len, PL_ERR_INVALID, "line %d: empty column name %d", line, i + 1);
                    goto fail;
                }
        } else {
            if (nf != c.n_cols) {
                st = pl_fail(msg, len, PL_ERR_INVALID, "line %d: %d fields, the header has %d", line, nf, c.n_cols);
                goto fail;
            }
            if (c.n_rows >= PUB_CSV_MAX_ROWS) {
                st = pl_fail(msg, len, PL_ERR_INVALID, "more than %d rows", PUB_CSV_MAX_ROWS);
                goto fail;
            }
            c.n_rows++;
        }
        if (used + (size_t)nf > cap) {
            size_t nc = cap ? cap * 2 : 64;
            while (nc < used + (size_t)nf) nc *= 2;
            char **ncells = realloc(c.cells, nc * sizeof *ncells);
            if (!ncells) {
                st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory reading CSV");
                goto fail;
            }
            c.cells = ncells;
            cap = nc;
        }
        for (int i = 0; i < nf; i++) {
            c.cells[used] = strdup(f[i]);
            if (!c.cells[used]) {
                st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory reading CSV");
                goto fail;
            }
            used++;
        }
    }
    if (c.n_cols == 0) return pl_fail(msg, len, PL_ERR_INVALID, "empty CSV: no header row");
    *out = c;
    return PL_OK;
fail:
    /* cells[0 .. used) are valid; pub_csv_free frees (n_rows + 1) * n_cols */
    for (size_t i = 0; i < used; i++) free(c.cells[i]);
    free(c.cells);
    return st;
}

/* ---- rows ---------------------------------------------------------------- */

typedef struct {
    const pub_csv *csv;
    int row;
    char *msg;
    size_t len;
    pl_status st;
} cell_reader;

static const char *cell(cell_reader *r, const char *col) {
    int c = pub_csv_col(r->csv, col);
    if (c < 0) {
        if (r->st == PL_OK) r->st = pl_fail(r->msg, r->len, PL_ERR_INVALID, "no column '%s'", col);
        return NULL;
    }
    return pub_csv_cell(r->csv, r->row, c);
}

static double num(cell_reader *r, const char *col, int allow_empty, double dflt) {
    const char *s = cell(r, col);
    if (!s) return dflt;
    if (!*s) {
        if (allow_empty) return dflt;
        if (r->st == PL_OK) r->st = pl_fail(r->msg, r->len, PL_ERR_INVALID, "row %d: empty '%s'", r->row + 1, col);
        return dflt;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end == 'M' && end[1] == 0) end++, v *= 1 << 20; /* "16M" tokens */
    if (errno || *end || !isfinite(v) || v < 0) {
        if (r->st == PL_OK) r->st = pl_fail(r->msg, r->len, PL_ERR_INVALID, "row %d: bad '%s': '%s'", r->row + 1, col, s);
        return dflt;
    }
    return v;
}

static int inum(cell_reader *r, const char *col, int allow_empty, int dflt) {
    double v = num(r, col, allow_empty, dflt);
    if (v != floor(v) || v < 1 || v > 1e7) { /* 1e7: products like 128 * tp stay in an int */
        if (r->st == PL_OK)
            r->st = pl_fail(r->msg, r->len, PL_ERR_INVALID, "row %d: '%s' is not a positive integer", r->row + 1, col);
        return dflt;
    }
    return (int)v;
}

static gpt_config megatron_gpt(int h, int a, int l, int tp) {
    gpt_config g;
    memset(&g, 0, sizeof g);
    g.vocab = 51200;
    g.vocab_multiple = 128 * tp;
    g.d_model = h;
    g.n_heads = a;
    g.n_layers = l;
    g.seq_len = 2048;
    g.batch = 1;
    g.tied = 1;
    return g;
}

/* Llama 3 405B from its shipped config (data/models/llama-3-405b.json: the
 * paper's Table 3), at the paper's vocabulary of 128,000 (the file's
 * 128,256 is the released tokenizer's) and the row's sequence length. */
static void llama405b(cell_reader *r, int seq, gpt_config *g) {
    char m[256] = "";
    pl_status st = model_config_load("llama-3-405b,vocab=128000", g, NULL, 0, m, sizeof m);
    if (st != PL_OK) {
        if (r->st == PL_OK) r->st = pl_fail(r->msg, r->len, st, "row %d: %s", r->row + 1, m);
        return;
    }
    g->seq_len = seq;
}

static void base_layout(layout *l) {
    layout_default(l);
    l->recompute = RECOMPUTE_FULL;
    l->prec = PRECISION_FP16;
}

static void label_of(pub_row *p) {
    const char *t = p->table == PUB_T1 ? "T1" : p->table == PUB_T2 ? "T2" : "L3";
    if (p->table == PUB_LLAMA)
        snprintf(p->label, sizeof p->label, "%s 405B %lld GPUs %dK", t, (long long)p->gpus, p->model.seq_len / 1024);
    else if (p->table == PUB_T2)
        snprintf(p->label, sizeof p->label, "%s %s %.1fB %lld GPUs", t, p->scheme, p->params_b, (long long)p->gpus);
    else
        snprintf(p->label, sizeof p->label, "%s %.1fB %lld GPUs", t, p->params_b, (long long)p->gpus);
}

static void row_t1(cell_reader *r, pub_row *p) {
    p->params_b = num(r, "params_b", 0, 0);
    int a = inum(r, "heads", 0, 1), h = inum(r, "hidden", 0, 1), l = inum(r, "layers", 0, 1);
    int tp = inum(r, "tp", 0, 1), pp = inum(r, "pp", 0, 1);
    p->gpus = inum(r, "gpus", 0, 1);
    p->model = megatron_gpt(h, a, l, tp);
    base_layout(&p->lay);
    p->lay.tp = tp;
    p->lay.pp = pp;
    p->lay.dp = (int)(p->gpus / ((int64_t)tp * pp));
    p->lay.vp = inum(r, "vp_chunks_derived", 1, 1);
    p->lay.micro_batch = inum(r, "micro_batch", 0, 1);
    p->lay.global_batch = inum(r, "global_batch", 0, 1);
    const char *ddp = cell(r, "ddp_impl");
    if (ddp && strcmp(ddp, "torch") && strcmp(ddp, "local") && r->st == PL_OK)
        r->st = pl_fail(r->msg, r->len, PL_ERR_INVALID, "row %d: ddp_impl '%s' is neither torch nor local", r->row + 1, ddp);
    p->dp_overlap = ddp && !strcmp(ddp, "torch");
    p->attention = ATTENTION_UNFUSED;
    p->grad_bytes = 2;
    p->flops = PUB_FLOPS_MEGATRON;
    p->published_tflops = num(r, "tflops_per_gpu", 0, 0);
    if (r->st == PL_OK && (int64_t)p->lay.dp * tp * pp != p->gpus)
        r->st = pl_fail(r->msg, r->len, PL_ERR_INVALID, "row %d: tp * pp does not divide the GPUs", r->row + 1);
}

static void row_t2(cell_reader *r, pub_row *p) {
    const char *scheme = cell(r, "scheme");
    p->params_b = num(r, "params_b", 0, 0);
    int mp = inum(r, "model_parallel_size", 0, 1);
    p->gpus = inum(r, "gpus", 0, 1);
    if (r->st != PL_OK) return;
    int is_530 = fabs(p->params_b - 529.6) < 0.5, is_175 = fabs(p->params_b - 174.6) < 0.5;
    if (!is_530 && !is_175) {
        r->st = pl_fail(r->msg, r->len, PL_ERR_INVALID, "row %d: no model of %.1fB parameters (174.6 or 529.6)",
                        r->row + 1, p->params_b);
        return;
    }
    int tp = 1, pp = 1;
    if (!strcmp(scheme, "zero3")) {
        if (mp != 1) {
            r->st = pl_fail(r->msg, r->len, PL_ERR_INVALID, "row %d: zero3 with model parallelism %d", r->row + 1, mp);
            return;
        }
    } else if (!strcmp(scheme, "ptd-p")) {
        tp = 8;
        pp = mp / 8;
        if (pp * 8 != mp) {
            r->st = pl_fail(r->msg, r->len, PL_ERR_INVALID, "row %d: model parallelism %d is not 8 x pp", r->row + 1, mp);
            return;
        }
    } else {
        r->st = pl_fail(r->msg, r->len, PL_ERR_INVALID, "row %d: scheme '%s' is neither zero3 nor ptd-p", r->row + 1, scheme);
        return;
    }
    snprintf(p->scheme, sizeof p->scheme, "%s", scheme);
    p->model = is_530 ? megatron_gpt(20480, 128, 105, tp) : megatron_gpt(12288, 96, 96, tp);
    base_layout(&p->lay);
    p->lay.tp = tp;
    p->lay.pp = pp;
    p->lay.dp = (int)(p->gpus / mp);
    p->lay.micro_batch = inum(r, "micro_batch", 0, 1);
    p->lay.global_batch = inum(r, "global_batch", 0, 1);
    if (tp == 1) {
        p->lay.zero = ZERO_3;
        p->dp_overlap = 1;
    } else {
        p->lay.vp = is_530 ? 3 : 1;
        p->dp_overlap = 0;
    }
    p->attention = ATTENTION_UNFUSED;
    p->grad_bytes = 2;
    p->flops = PUB_FLOPS_MEGATRON;
    p->published_tflops = num(r, "tflops_per_gpu", 0, 0);
    if (r->st == PL_OK && (int64_t)p->lay.dp * mp != p->gpus)
        r->st = pl_fail(r->msg, r->len, PL_ERR_INVALID, "row %d: model parallelism does not divide the GPUs", r->row + 1);
}

static void row_llama(cell_reader *r, pub_row *p) {
    p->params_b = 405;
    p->gpus = inum(r, "gpus", 0, 1);
    int seq = inum(r, "seq_len", 0, 1);
    llama405b(r, seq, &p->model);
    layout_default(&p->lay);
    p->lay.tp = inum(r, "tp", 0, 1);
    p->lay.cp = inum(r, "cp", 0, 1);
    p->lay.pp = inum(r, "pp", 0, 1);
    p->lay.dp = inum(r, "dp", 0, 1);
    p->lay.sp = 1;
    p->lay.vp = 2;
    p->lay.micro_batch = 1;
    int64_t gbs = (int64_t)inum(r, "batch_per_dp", 0, 1) * p->lay.dp;
    if (gbs > INT32_MAX) {
        if (r->st == PL_OK)
            r->st = pl_fail(r->msg, r->len, PL_ERR_INVALID, "row %d: batch_per_dp * dp is too large", r->row + 1);
        gbs = 1;
    }
    p->lay.global_batch = (int)gbs;
    p->lay.zero = ZERO_FSDP;
    p->lay.recompute = RECOMPUTE_NONE;
    p->lay.prec = PRECISION_BF16;
    p->attention = ATTENTION_FLASH;
    p->dp_overlap = 1;
    p->grad_bytes = 4;
    p->flops = PUB_FLOPS_MODEL;
    p->published_tflops = num(r, "tflops_per_gpu", 0, 0);
    if (r->st == PL_OK && (int64_t)p->lay.tp * p->lay.cp * p->lay.pp * p->lay.dp != p->gpus)
        r->st = pl_fail(r->msg, r->len, PL_ERR_INVALID, "row %d: tp * cp * pp * dp is not the GPU count", r->row + 1);
}

pl_status pub_rows_from_csv(pub_table t, const pub_csv *csv, pub_row **rows, int *n, char *msg, size_t len) {
    *rows = NULL;
    *n = 0;
    if (t < 0 || t >= PUB_TABLE_COUNT) return pl_fail(msg, len, PL_ERR_INVALID, "unknown table");
    if (csv->n_rows == 0) return pl_fail(msg, len, PL_ERR_INVALID, "%s: no rows", pub_table_file(t));
    pub_row *out = calloc((size_t)csv->n_rows, sizeof *out);
    if (!out) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    char inner[256] = "";
    cell_reader r = {csv, 0, inner, sizeof inner, PL_OK};
    for (int i = 0; i < csv->n_rows && r.st == PL_OK; i++) {
        r.row = i;
        pub_row *p = &out[i];
        p->table = t;
        if (t == PUB_T1) row_t1(&r, p);
        else if (t == PUB_T2) row_t2(&r, p);
        else row_llama(&r, p);
        if (r.st == PL_OK) label_of(p);
    }
    if (r.st != PL_OK) {
        free(out);
        return pl_fail(msg, len, r.st, "%s: %s", pub_table_file(t), inner);
    }
    *rows = out;
    *n = csv->n_rows;
    return PL_OK;
}

pl_status pub_table_load(const char *dir, pub_table t, pub_row **rows, int *n, char *msg, size_t len) {
    *rows = NULL;
    *n = 0;
    if (t < 0 || t >= PUB_TABLE_COUNT) return pl_fail(msg, len, PL_ERR_INVALID, "unknown table");
    char path[4096], m2[512];
    if (snprintf(path, sizeof path, "%s/%s", dir, pub_table_file(t)) >= (int)sizeof path)
        return pl_fail(msg, len, PL_ERR_INVALID, "--dir is too long");
    size_t sz = 0;
    char *text = NULL;
    if (data_file_read(path, PUB_TABLE_FILE_MAX, "check-set", &text, &sz, m2, sizeof m2) != PL_OK)
        return pl_fail(msg, len, PL_ERR_INVALID, "%s; --dir names the folder of the three CSV files", m2);
    pub_csv csv;
    pl_status st = pub_csv_parse(text, sz, &csv, m2, sizeof m2);
    free(text);
    if (st != PL_OK) return pl_fail(msg, len, PL_ERR_INVALID, "%s: %s", path, m2);
    st = pub_rows_from_csv(t, &csv, rows, n, msg, len);
    pub_csv_free(&csv);
    return st;
}
