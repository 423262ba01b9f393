/*
 * transfer_report.c: the gain-retained matrix file parsed, drawn as
 * heatmaps with gnuplot and written as markdown tables
 * (transfer_report.h).
 */
#include "transfer_report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gnuplot.h"

#define PATH_LEN 4096
#define MAX_COLS 64
#define MAX_NAMES 32

enum { C_GRAPH, C_SETTING, C_PLACER, C_SOURCE, C_TARGET, C_SEEDS, C_STATUS, C_GAIN, C_LO, C_HI, C_OOM, C_ON, C_BASE,
       C_BEST, N_REQ };
static const char *const REQ[N_REQ] = {"graph", "setting", "placer", "source", "target", "seeds", "status", "gain",
                                       "gain_lo", "gain_hi", "oom", "on_target_ms", "baseline_ms", "best_ms"};

void transfer_matrix_free(transfer_matrix *m) {
    if (!m) return;
    free(m->cells);
    m->cells = NULL;
    m->n = 0;
}

/* Split line (modified in place) at tabs into at most MAX_COLS fields;
 * the count, or MAX_COLS + 1 when there are more. */
static int split(char *line, char **f) {
    int n = 0;
    for (char *p = line;;) {
        if (n == MAX_COLS) return MAX_COLS + 1;
        f[n++] = p;
        char *t = strchr(p, '\t');
        if (!t) break;
        *t = 0;
        p = t + 1;
    }
    return n;
}

static int parse_num(const char *s, double *out) {
    char *end = NULL;
    if (!*s) return 0;
    *out = strtod(s, &end);
    return *end == 0;
}

static int parse_name(const char *s, char *out) {
    size_t n = strlen(s);
    if (n == 0 || n >= TRANSFER_NAME_LEN) return 0;
    for (const char *c = s; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == '\'' || *c == '"' || *c == '\\' || *c == '|') return 0;
    memcpy(out, s, n + 1);
    return 1;
}

pl_status transfer_matrix_parse(const char *text, transfer_matrix *out, char *msg, size_t len) {
    memset(out, 0, sizeof *out);
    if (!text) return pl_fail(msg, len, PL_ERR_INVALID, "no matrix text");
    char *buf = strdup(text);
    if (!buf) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    pl_status st = PL_OK;
    int col[N_REQ], n_head = 0, line_no = 0, cap = 0;
    char *f[MAX_COLS + 1];
    char *save = buf;
    for (char *line = buf; line && st == PL_OK; line = save) {
        char *nl = strchr(line, '\n');
        save = nl ? nl + 1 : NULL;
        if (nl) *nl = 0;
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r') line[--l] = 0;
        line_no++;
        if (l == 0) continue;
        int n = split(line, f);
        if (n > MAX_COLS) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "line %d has more than %d columns", line_no, MAX_COLS);
            break;
        }
        if (!n_head) {
            n_head = n;
            for (int k = 0; k < N_REQ; k++) {
                col[k] = -1;
                for (int j = 0; j < n; j++)
                    if (!strcmp(f[j], REQ[k])) col[k] = j;
                if (col[k] < 0) {
                    st = pl_fail(msg, len, PL_ERR_INVALID, "line %d: the header has no column '%s' (a matrix of "
                                 "transfer_matrix, transfer-matrix.tsv, starts with its header)", line_no, REQ[k]);
                    break;
                }
            }
            continue;
        }
        if (n != n_head) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "line %d has %d columns, the header %d", line_no, n, n_head);
            break;
        }
        if (out->n == TRANSFER_MAX_ROWS) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "more than %d rows", TRANSFER_MAX_ROWS);
            break;
        }
        if (out->n == cap) {
            int nc = cap ? 2 * cap : 64;
            transfer_cell *c = realloc(out->cells, sizeof *c * (size_t)nc);
            if (!c) {
                st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
                break;
            }
            out->cells = c;
            cap = nc;
        }
        transfer_cell *c = &out->cells[out->n];
        memset(c, 0, sizeof *c);
        const char *bad = NULL;
        double x;
        if (!parse_name(f[col[C_GRAPH]], c->graph)) bad = "graph";
        else if (!parse_name(f[col[C_PLACER]], c->placer)) bad = "placer";
        else if (!parse_name(f[col[C_SOURCE]], c->source)) bad = "source";
        else if (!parse_name(f[col[C_TARGET]], c->target)) bad = "target";
        else if (strlen(f[col[C_SETTING]]) != 1 || f[col[C_SETTING]][0] < 'A' || f[col[C_SETTING]][0] > 'Z')
            bad = "setting";
        else if (!parse_num(f[col[C_SEEDS]], &x) || x < 1 || x > 1000 || x != floor(x)) bad = "seeds";
        else if (strcmp(f[col[C_STATUS]], "ok") && strcmp(f[col[C_STATUS]], "n/a")) bad = "status";
        else if (!parse_num(f[col[C_GAIN]], &c->gain)) bad = "gain";
        else if (!parse_num(f[col[C_LO]], &c->lo)) bad = "gain_lo";
        else if (!parse_num(f[col[C_HI]], &c->hi)) bad = "gain_hi";
        else if (!parse_num(f[col[C_ON]], &c->on_target_ms)) bad = "on_target_ms";
        else if (!parse_num(f[col[C_BASE]], &c->baseline_ms)) bad = "baseline_ms";
        else if (!parse_num(f[col[C_BEST]], &c->best_ms)) bad = "best_ms";
        if (!bad) {
            c->seeds = (int)x;
            c->setting = f[col[C_SETTING]][0];
            c->na = !strcmp(f[col[C_STATUS]], "n/a");
            double o;
            if (!parse_num(f[col[C_OOM]], &o) || o < 0 || o > c->seeds || o != floor(o)) bad = "oom";
            else c->oom = (int)o;
        }
        if (!bad && !c->na && !isfinite(c->gain)) bad = "gain (a status ok row needs a number)";
        if (bad) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "line %d: bad %s", line_no, bad);
            break;
        }
        if (c->na) c->gain = c->lo = c->hi = NAN;
        for (int i = 0; i < out->n; i++) {
            const transfer_cell *d = &out->cells[i];
            if (d->setting == c->setting && !strcmp(d->graph, c->graph) && !strcmp(d->placer, c->placer) &&
                !strcmp(d->source, c->source) && !strcmp(d->target, c->target)) {
                st = pl_fail(msg, len, PL_ERR_INVALID, "line %d repeats %s %c %s %s -> %s", line_no, c->graph,
                             c->setting, c->placer, c->source, c->target);
                break;
            }
        }
        if (st == PL_OK) out->n++;
    }
    free(buf);
    if (st == PL_OK && !n_head) st = pl_fail(msg, len, PL_ERR_INVALID, "the matrix is empty (no header)");
    if (st == PL_OK && out->n == 0) st = pl_fail(msg, len, PL_ERR_INVALID, "the matrix has a header but no rows");
    if (st != PL_OK) transfer_matrix_free(out);
    return st;
}

pl_status transfer_matrix_load(const char *path, transfer_matrix *out, char *msg, size_t len) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return pl_fail(msg, len, errno == ENOENT ? PL_ERR_NOT_FOUND : PL_ERR_IO, "cannot open %s: %s (give the "
                       "transfer-matrix.tsv of benchmarks/policy/transfer_matrix)", path, strerror(errno));
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap);
    while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (n + 1 >= cap) {
            if (cap > ((size_t)64 << 20)) {
                free(buf);
                fclose(f);
                return pl_fail(msg, len, PL_ERR_INVALID, "%s is larger than 64 MiB: not a matrix file", path);
            }
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    if (err) {
        free(buf);
        return pl_fail(msg, len, PL_ERR_IO, "cannot read %s", path);
    }
    buf[n] = 0;
    if (memchr(buf, 0, n)) {
        free(buf);
        return pl_fail(msg, len, PL_ERR_INVALID, "%s is not a text file: give the transfer-matrix.tsv of "
                       "transfer_matrix", path);
    }
    char m2[512] = "";
    pl_status st = transfer_matrix_parse(buf, out, m2, sizeof m2);
    free(buf);
    if (st != PL_OK) return pl_fail(msg, len, st, "%s: %s", path, m2);
    return PL_OK;
}

/* ---- drawing ---------------------------------------------------------------- */

typedef struct {
    const transfer_report_options *o;
    char png_term[128];
    char *msg;
    size_t len;
} ctx;

static pl_status probe(ctx *r) {
    int cairo = 0;
    pl_status st = gnuplot_probe(r->o->gnuplot, &cairo, r->msg, r->len);
    if (st != PL_OK) return st;
    snprintf(r->png_term, sizeof r->png_term, "%s", cairo ? "pngcairo" : "png");
    return PL_OK;
}

static FILE *open_out(ctx *r, const char *name) {
    char path[PATH_LEN];
    if (snprintf(path, sizeof path, "%s/%s", r->o->out_dir, name) >= (int)sizeof path) {
        pl_fail(r->msg, r->len, PL_ERR_IO, "output path too long: %s/%s", r->o->out_dir, name);
        return NULL;
    }
    FILE *f = fopen(path, "w");
    if (!f) pl_fail(r->msg, r->len, PL_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return f;
}

/* A file-name-safe copy of a name. */
static void slug(const char *in, char *out, size_t len) {
    size_t k = 0;
    for (const char *c = in; *c && k + 1 < len; c++)
        out[k++] = ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-')
                       ? *c : '_';
    out[k] = 0;
}

/* Distinct values of a field, in order of first appearance. */
typedef struct {
    int n;
    const char *v[MAX_NAMES];
} names;

static int add_name(names *ns, const char *v) {
    for (int i = 0; i < ns->n; i++)
        if (!strcmp(ns->v[i], v)) return i;
    if (ns->n == MAX_NAMES) return -1;
    ns->v[ns->n] = v;
    return ns->n++;
}

static const transfer_cell *find(const transfer_matrix *m, const char *graph, char setting, const char *placer,
                                 const char *s, const char *t) {
    for (int i = 0; i < m->n; i++) {
        const transfer_cell *c = &m->cells[i];
        if (c->setting == setting && !strcmp(c->graph, graph) && !strcmp(c->placer, placer) && !strcmp(c->source, s) &&
            !strcmp(c->target, t))
            return c;
    }
    return NULL;
}

static void pct(char *buf, size_t len, double g) {
    const double p = fabs(100 * g) < 0.5 ? 0.0 : 100 * g; /* no "-0%" */
    if (fabs(p) >= 999.5) snprintf(buf, len, "%.1fk%%", p / 1000);
    else snprintf(buf, len, "%.0f%%", p);
}

static const char *setting_name(char s) {
    return s == 'A' ? "m=1 gpipe" : s == 'B' ? "m=4 1f1b" : s == 'C' ? "m=1 gpipe, cap 3/4 of the single-device peak" : "";
}

/* The heatmap of one graph: a panel per placer (rows) and setting (columns). */
static pl_status draw_graph(ctx *r, const transfer_matrix *m, const char *graph, const names *placers,
                            const char *settings, int n_set, const names *machines) {
    char gs[TRANSFER_NAME_LEN], name[PATH_LEN];
    slug(graph, gs, sizeof gs);
    const int N = machines->n;
    for (int p = 0; p < placers->n; p++)
        for (int s = 0; s < n_set; s++) {
            char ps[TRANSFER_NAME_LEN];
            slug(placers->v[p], ps, sizeof ps);
            snprintf(name, sizeof name, "transfer-%s-%s-%c.dat", gs, ps, settings[s]);
            FILE *f = open_out(r, name);
            if (!f) return PL_ERR_IO;
            fprintf(f, "# target source gain(clipped to [-1,1]; NaN n/a) label\n");
            for (int a = 0; a < N; a++)
                for (int b = 0; b < N; b++) {
                    const transfer_cell *c = find(m, graph, settings[s], placers->v[p], machines->v[a], machines->v[b]);
                    char lab[32] = "-";
                    double v = NAN;
                    if (c && c->na) snprintf(lab, sizeof lab, "n/a");
                    else if (c && isnan(c->gain)) snprintf(lab, sizeof lab, "OOM");
                    else if (c) {
                        pct(lab, sizeof lab, c->gain);
                        v = c->gain < -1 ? -1 : c->gain > 1 ? 1 : c->gain;
                    }
                    char val[32] = "NaN";
                    if (!isnan(v)) snprintf(val, sizeof val, "%.4f", v);
                    fprintf(f, "%d %d %s \"%s\"\n", b, a, val, lab);
                }
            if (fclose(f)) return pl_fail(r->msg, r->len, PL_ERR_IO, "cannot write %s", name);
        }
    snprintf(name, sizeof name, "transfer-%s.gp", gs);
    FILE *f = open_out(r, name);
    if (!f) return PL_ERR_IO;
    const int W = 440 * n_set + 160, H = 400 * placers->n + 80;
    fprintf(f, "# transfer-%s.gp: written by placer report --transfer; run with gnuplot in this directory.\n", gs);
    fprintf(f, "set datafile missing 'NaN'\n");
    fprintf(f, "set palette defined (-1 '#b2182b', -0.5 '#ef8a62', 0 '#f7f7f7', 0.5 '#67a9cf', 1 '#2166ac')\n");
    fprintf(f, "set cbrange [-1:1]\nset cbtics ('-100%%%%' -1, '0' 0, '100%%%%' 1)\n");
    fprintf(f, "set xrange [-0.5:%d.5]\nset yrange [%d.5:-0.5]\nset size ratio -1\n", N - 1, N - 1);
    fprintf(f, "set xtics rotate by 35 right (");
    for (int b = 0; b < N; b++) fprintf(f, "%s'%s' %d", b ? ", " : "", machines->v[b], b);
    fprintf(f, ")\nset ytics (");
    for (int a = 0; a < N; a++) fprintf(f, "%s'%s' %d", a ? ", " : "", machines->v[a], a);
    fprintf(f, ")\nset xlabel 'evaluated on T'\nset ylabel 'trained on S'\nset tics scale 0\n");
    fprintf(f, "set object 1 rect from -0.5,-0.5 to %d.5,%d.5 behind fc rgb '#bdbdbd' fs solid noborder\n", N - 1,
            N - 1);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0) fprintf(f, "set terminal %s size %d,%d font ',9'\nset output 'transfer-%s.png'\n", r->png_term,
                               W, H, gs);
        else fprintf(f, "set terminal svg size %d,%d dynamic font ',9'\nset output 'transfer-%s.svg'\n", W, H, gs);
        fprintf(f, "set multiplot layout %d,%d title 'gain retained on T by S''s placements, %s (grey: n/a)'\n",
                placers->n, n_set, graph);
        for (int p = 0; p < placers->n; p++)
            for (int s = 0; s < n_set; s++) {
                char ps[TRANSFER_NAME_LEN];
                slug(placers->v[p], ps, sizeof ps);
                fprintf(f, "set title '%s, %c (%s)'\n", placers->v[p], settings[s], setting_name(settings[s]));
                fprintf(f, "%s colorbox\n", s == n_set - 1 ? "set" : "unset");
                fprintf(f, "plot 'transfer-%s-%s-%c.dat' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid "
                           "fc palette notitle, '' using 1:2:4 with labels font ',8' notitle\n",
                        gs, ps, settings[s]);
            }
        fprintf(f, "unset multiplot\nunset output\n");
    }
    if (fclose(f)) return pl_fail(r->msg, r->len, PL_ERR_IO, "cannot write %s", name);
    return gnuplot_run(r->o->gnuplot, r->o->out_dir, name, r->msg, r->len);
}

static void ms(char *buf, size_t len, double v) {
    if (isfinite(v)) snprintf(buf, len, "%.3f", v);
    else snprintf(buf, len, "-");
}

/* The tables of one graph. */
static void write_tables(FILE *md, const transfer_matrix *m, const char *graph, const names *placers,
                         const char *settings, int n_set, const names *machines, const char *img) {
    char gs[TRANSFER_NAME_LEN];
    slug(graph, gs, sizeof gs);
    fprintf(md, "\n## %s\n\n![gain retained, %s](%stransfer-%s.png)\n", graph, graph, img, gs);
    for (int s = 0; s < n_set; s++)
        for (int p = 0; p < placers->n; p++) {
            fprintf(md, "\n### %s, setting %c (%s), %s\n\n| S \\ T |", graph, settings[s], setting_name(settings[s]),
                    placers->v[p]);
            for (int b = 0; b < machines->n; b++) fprintf(md, " %s |", machines->v[b]);
            fprintf(md, "\n|---|");
            for (int b = 0; b < machines->n; b++) fprintf(md, "---|");
            fprintf(md, "\n");
            /* T's figures first */
            const char *row_name[2] = {"T's best baseline (ms)", "T's best (ms)"};
            for (int k = 0; k < 2; k++) {
                fprintf(md, "| *%s* |", row_name[k]);
                for (int b = 0; b < machines->n; b++) {
                    const transfer_cell *c = NULL;
                    for (int a = 0; a < machines->n && !c; a++)
                        c = find(m, graph, settings[s], placers->v[p], machines->v[a], machines->v[b]);
                    char t[32];
                    ms(t, sizeof t, c ? (k ? c->best_ms : c->baseline_ms) : NAN);
                    fprintf(md, " %s |", t);
                }
                fprintf(md, "\n");
            }
            for (int a = 0; a < machines->n; a++) {
                fprintf(md, "| %s |", machines->v[a]);
                for (int b = 0; b < machines->n; b++) {
                    const transfer_cell *c = find(m, graph, settings[s], placers->v[p], machines->v[a], machines->v[b]);
                    char g[64] = "-", t[32], lo[16], hi[16];
                    if (c && c->na) snprintf(g, sizeof g, "n/a");
                    else if (c && isnan(c->gain)) snprintf(g, sizeof g, "OOM");
                    else if (c && c->seeds > 1 && isfinite(c->lo)) {
                        pct(g, sizeof g, c->gain);
                        pct(lo, sizeof lo, c->lo);
                        pct(hi, sizeof hi, c->hi);
                        size_t k = strlen(g);
                        snprintf(g + k, sizeof g - k, " [%s, %s]", lo, hi);
                    } else if (c) {
                        pct(g, sizeof g, c->gain);
                    }
                    if (c && c->oom && !(c->na)) {
                        size_t k = strlen(g);
                        snprintf(g + k, sizeof g - k, ", %d OOM", c->oom);
                    }
                    ms(t, sizeof t, c ? c->on_target_ms : NAN);
                    fprintf(md, a == b ? " *%s* (%s) |" : " %s (%s) |", g, t);
                }
                fprintf(md, "\n");
            }
        }
}

static int cmp_char(const void *a, const void *b) { return *(const char *)a - *(const char *)b; }

pl_status transfer_report_write(const transfer_matrix *m, const transfer_report_options *o,
                                transfer_report_summary *sum, char *msg, size_t len) {
    transfer_report_summary dummy;
    if (!sum) sum = &dummy;
    memset(sum, 0, sizeof *sum);
    if (!m || m->n == 0 || !o || !o->out_dir) return pl_fail(msg, len, PL_ERR_INVALID, "nothing to report");
    ctx r = {o, "", msg, len};
    if (mkdir(o->out_dir, 0777) != 0 && errno != EEXIST)
        return pl_fail(msg, len, PL_ERR_IO, "cannot create %s: %s", o->out_dir, strerror(errno));
    pl_status st = probe(&r);
    if (st != PL_OK) return st;
    names graphs = {0};
    for (int i = 0; i < m->n; i++)
        if (add_name(&graphs, m->cells[i].graph) < 0)
            return pl_fail(msg, len, PL_ERR_INVALID, "more than %d graphs", MAX_NAMES);
    char path[PATH_LEN];
    if (o->markdown) snprintf(path, sizeof path, "%s", o->markdown);
    else snprintf(path, sizeof path, "%s/transfer.md", o->out_dir);
    FILE *md = fopen(path, "w");
    if (!md) return pl_fail(msg, len, PL_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    fprintf(md, "# Gain retained: train on one machine, evaluate on another\n\n"
                "Generated by `placer report --transfer%s%s`; every number below is read from that file. Gain "
                "retained = (T's best baseline - S's placement on T) / (T's best baseline - T's best placement): "
                "100%% keeps all of T's gain, 0%% none, negative is slower than T's best baseline. Mean [95%% "
                "interval] over the seeds, S's placement's step time on T in ms beside it; the diagonal (in "
                "italics) is T's own training. n/a: T's best is within 0.5%% of its best baseline, there is no "
                "gain to retain. OOM: seeds whose placements all ran out of memory on T.\n",
            o->source ? " " : "", o->source ? o->source : "");
    const char *img = o->image_prefix ? o->image_prefix : "";
    for (int g = 0; g < graphs.n && st == PL_OK; g++) {
        names placers = {0}, machines = {0};
        char settings[32];
        int n_set = 0;
        for (int i = 0; i < m->n; i++) {
            const transfer_cell *c = &m->cells[i];
            if (strcmp(c->graph, graphs.v[g]) != 0) continue;
            if (add_name(&placers, c->placer) < 0 || add_name(&machines, c->source) < 0 ||
                add_name(&machines, c->target) < 0) {
                st = pl_fail(msg, len, PL_ERR_INVALID, "graph %s has more than %d placers or machines", c->graph,
                             MAX_NAMES);
                break;
            }
            if (!memchr(settings, c->setting, (size_t)n_set)) settings[n_set++] = c->setting;
        }
        if (st != PL_OK) break;
        qsort(settings, (size_t)n_set, 1, cmp_char);
        st = draw_graph(&r, m, graphs.v[g], &placers, settings, n_set, &machines);
        if (st == PL_OK) {
            sum->n_figures++;
            write_tables(md, m, graphs.v[g], &placers, settings, n_set, &machines, img);
        }
    }
    if (fclose(md) && st == PL_OK) st = pl_fail(msg, len, PL_ERR_IO, "cannot write %s", path);
    if (st == PL_OK) {
        sum->n_graphs = graphs.n;
        sum->n_cells = m->n;
    }
    return st;
}
