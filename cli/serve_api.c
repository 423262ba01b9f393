/*
 * serve_api.c: `placer serve`'s requests and replies (serve_api.h): the
 * dispatch by method and path, the page's embedded files, and the layout
 * endpoints (models, clusters, layout, validate, trace). Each layout
 * request is read into the options `placer layout` fills from its command
 * line (layout_eval_options, cli_stack) and run by the same library call;
 * the reply is the same writer's JSON (cli_json_layout).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_json.h"
#include "cluster_file.h"
#include "data_file.h"
#include "export_plan.h"
#include "model_config.h"
#include "serve_assets.h"
#include "serve_internal.h"
#include "util.h"

pl_status serve_ctx_create(const serve_options *o, serve_ctx **out, char *msg, size_t len) {
    *out = NULL;
    serve_ctx *c = calloc(1, sizeof *c);
    if (!c) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    c->opt = *o;
    const char *tmp = getenv("TMPDIR");
    snprintf(c->tmpdir, sizeof c->tmpdir, "%s/placer-serve-XXXXXX", tmp && *tmp && strlen(tmp) < 200 ? tmp : "/tmp");
    if (!mkdtemp(c->tmpdir)) {
        pl_status st = pl_fail(msg, len, PL_ERR_IO, "cannot make a temporary folder: %s", strerror(errno));
        free(c);
        return st;
    }
    if (o->published_dir) snprintf(c->published_dir, sizeof c->published_dir, "%s", o->published_dir);
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return PL_OK;
}

void serve_ctx_destroy(serve_ctx *c) {
    if (!c) return;
    rmdir(c->tmpdir); /* each pasted config is removed after its request */
    serve_published_free(c);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void serve_reply_free(serve_reply *r) {
    if (!r) return;
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* ---- GET /api/models, /api/clusters ---------------------------------------- */

/* Each comma-separated name of list through fn(f, name). */
static void each_name(const char *list, FILE *f, void (*fn)(FILE *, const char *, int)) {
    int k = 0;
    for (const char *p = list; p && *p;) {
        while (*p == ' ') p++;
        const char *e = strchr(p, ',');
        const size_t w = e ? (size_t)(e - p) : strlen(p);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(w < sizeof name ? w : sizeof name - 1), p);
        fn(f, name, k++);
        p = e ? e + 1 : NULL;
    }
}

static void model_entry(FILE *f, const char *name, int k) {
    gpt_config cfg;
    char title[64] = "", msg[256];
    if (model_config_load(name, &cfg, title, sizeof title, msg, sizeof msg) != PL_OK) return;
    fprintf(f, "%s\n  {\"name\": ", k ? "," : "");
    pl_json_string(f, name);
    fprintf(f,
            ", \"layers\": %d, \"d_model\": %d, \"heads\": %d, \"kv_heads\": %d, \"experts\": %d, \"top_k\": %d, "
            "\"params\": %lld, \"seq_len\": %d}",
            cfg.n_layers, cfg.d_model, cfg.n_heads, gpt_kv_heads(&cfg), cfg.n_experts, cfg.top_k,
            (long long)gpt_param_count(&cfg), cfg.seq_len);
}

static void cluster_entry(FILE *f, const char *name, int k) {
    cluster c;
    char msg[512];
    if (cluster_load(name, NULL, &c, msg, sizeof msg) != PL_OK) return;
    fprintf(f, "%s\n  {\"name\": ", k ? "," : "");
    pl_json_string(f, name);
    fprintf(f, ", \"gpus\": %lld, \"gpus_per_node\": %d, \"nvlink_domain_gpus\": %lld, \"gpu\": ",
            (long long)cluster_n_gpus(&c), c.gpus_per_node, (long long)cluster_domain_gpus(&c));
    pl_json_string(f, c.gpus[0].name);
    fprintf(f, ", \"hbm_bytes\": %lld, \"fp8\": %s}", (long long)c.gpus[0].hbm_bytes,
            c.gpus[0].peak_flops[PRECISION_FP8] > 0 ? "true" : "false");
}

static void api_list(serve_reply *r, const char *key) {
    char names[8192] = "";
    if (!strcmp(key, "models")) model_list_shipped(names, sizeof names);
    else {
        data_dirs d;
        data_dirs_of("PLACER_CLUSTERS", "clusters", &d);
        data_list(&d, names, sizeof names);
    }
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return serve_error(r, 500, "out of memory");
    fprintf(f, "{\"%s\": [", key);
    each_name(names, f, !strcmp(key, "models") ? model_entry : cluster_entry);
    fprintf(f, "\n ]%s}\n", !strcmp(key, "models") ? ", \"presets\": [\"default\", \"gpt12\"]" : "");
    fclose(f);
    serve_json(r, buf, n);
}

/* ---- POST /api/layout, /api/trace ------------------------------------------ */

static const char *const LAYOUT_KEYS[] = {"model", "config", "cluster", "layout", "gpus", "seq", "flops",
                                          "framework", "attention", "dp_overlap", "grad_bytes", "check",
                                          "ideal", "format", "gpipe", NULL};

/* What a layout request asks: the options placer layout fills. */
typedef struct {
    layout_eval_options eval;
    cli_stack stack;
    int hw_flops;
    char path[512];           /* a pasted config's file, or "" */
} layout_request;

/* Read root into *q: 0, or -1 with msg (q->path removed by the caller). */
static int read_layout(serve_ctx *c, json_t *root, layout_request *q, char *msg, size_t len) {
    memset(&q->eval, 0, sizeof q->eval);
    q->hw_flops = 0;
    if (serve_model(c, root, q->path, sizeof q->path, &q->eval.model, msg, len) < 0) return -1;
    long v = 0;
    const char *flops = NULL;
    int got;
    if (serve_string(root, "cluster", 200, &q->eval.cluster, msg, len) < 0) return -1;
    if (!q->eval.cluster) return snprintf(msg, len, "no cluster: give \"cluster\" (a shipped name)"), -1;
    if (!serve_shipped_name("cluster", q->eval.cluster, msg, len)) return -1;
    if (serve_string(root, "layout", 8000, &q->eval.layout, msg, len) < 0) return -1;
    if (!q->eval.layout) return snprintf(msg, len, "no layout: give \"layout\" (tp=..,pp=..,dp=..,mbs=..,gbs=..)"), -1;
    if ((got = serve_int(root, "gpus", 1, 100000000L, &v, msg, len)) < 0) return -1;
    if (got) q->eval.gpus = v;
    if ((got = serve_int(root, "seq", 1, 1L << 24, &v, msg, len)) < 0) return -1;
    if (got) q->eval.seq = (int)v;
    if (serve_string(root, "flops", 20, &flops, msg, len) < 0) return -1;
    if (flops && !strcmp(flops, "hardware")) q->hw_flops = 1;
    else if (flops && strcmp(flops, "model") != 0)
        return snprintf(msg, len, "unknown flops '%.20s' (use model or hardware)", flops), -1;
    if (serve_stack(root, &q->stack, 0, msg, len) < 0) return -1;
    json_t *ideal = json_object_get(root, "ideal");
    if (ideal && !json_is_boolean(ideal)) return snprintf(msg, len, "\"ideal\" must be true or false"), -1;
    if (ideal && json_is_true(ideal)) { /* free sends, no embedding or head: the closed forms' pipeline */
        q->stack.params.p2p_scale = 0;
        q->stack.params.emb_head_scale = 0;
        q->stack.set = 1;
    }
    json_t *gp = json_object_get(root, "gpipe");
    if (gp && !json_is_boolean(gp)) return snprintf(msg, len, "\"gpipe\" must be true or false"), -1;
    q->eval.gpipe = gp && json_is_true(gp);
    if (q->stack.set) q->eval.params = &q->stack.params;
    return 0;
}

/* Run a layout request: 0 and *x filled, or the reply set (400 / 500). */
static int run_layout(serve_ctx *c, const char *body, size_t n, int want_ops, layout_request *q,
                      layout_eval_result *x, serve_reply *r) {
    char msg[640] = "";
    json_t *root = serve_body(body, n, LAYOUT_KEYS, msg, sizeof msg);
    if (!root) return serve_error(r, 400, msg), -1;
    json_t *check = json_object_get(root, "check");
    if (check && !want_ops) {
        serve_check_layout(c, check, r);
        json_decref(root);
        return 1;
    }
    int rc = read_layout(c, root, q, msg, sizeof msg);
    if (rc == 0) {
        q->eval.want_ops = want_ops;
        pl_status st = layout_eval_run(&q->eval, x, msg, sizeof msg);
        if (st != PL_OK) {
            serve_hide_path(msg, sizeof msg, q->path);
            serve_error(r, serve_status_of(st), msg);
            free(x->ops);
            x->ops = NULL;
            rc = -1;
        }
    } else {
        serve_hide_path(msg, sizeof msg, q->path);
        serve_error(r, 400, msg);
    }
    serve_model_done(q->path);
    json_decref(root);
    return rc;
}

static void api_layout(serve_ctx *c, const char *body, size_t n, serve_reply *r) {
    layout_request *q = calloc(1, sizeof *q);
    layout_eval_result *x = calloc(1, sizeof *x);
    if (!q || !x) {
        free(q);
        free(x);
        return serve_error(r, 500, "out of memory");
    }
    if (run_layout(c, body, n, 0, q, x, r) == 0) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f) serve_error(r, 500, "out of memory");
        else {
            cli_json_layout(f, x, q->hw_flops, NULL);
            fclose(f);
            serve_json(r, buf, len);
        }
    }
    free(q);
    free(x);
}

/* The closed form of the bubble (idle over compute per rank) for the
 * orders that have one: (p - 1) / (v m) for gpipe, 1f1b and interleaved;
 * -1 else. */
static double bubble_closed_form(const layout *l, int m) {
    if (l->sched != SCHED_1F1B && l->sched != SCHED_INTERLEAVED && l->sched != SCHED_GPIPE) return -1;
    return l->pp > 0 && m > 0 ? (double)(l->pp - 1) / ((double)l->vp * m) : -1;
}

static void write_trace(FILE *f, const layout_eval_result *x) {
    const layout *l = &x->lay;
    const int p = l->pp, m = x->res.micro_batches;
    char lt[LAYOUT_MAX_CHUNKS * 5 + 256];
    layout_format(l, lt, sizeof lt);
    fprintf(f, "{\"model\": ");
    pl_json_string(f, x->model.name);
    fprintf(f, ", \"cluster\": ");
    pl_json_string(f, x->clu.name);
    fprintf(f, ", \"layout\": ");
    pl_json_string(f, lt);
    const schedule_order o = l->sched == SCHED_1F1B && l->vp > 1 ? SCHED_INTERLEAVED : l->sched;
    fprintf(f, ", \"order\": \"%s\", \"pp\": %d, \"vp\": %d, \"micro_batches\": %d, \"step_us\": %.3f", schedule_order_name(o),
            p, l->vp, m, x->res.step_us);
    /* per rank: busy (F + B + W) and the span of the pipeline's compute */
    double first = 0, last = 0;
    int any = 0;
    for (int i = 0; i < x->n_ops; i++) {
        const layout_op *op = &x->ops[i];
        if (op->kind > LAYOUT_OP_W) continue;
        if (!any || op->t0_us < first) first = op->t0_us;
        if (!any || op->t1_us > last) last = op->t1_us;
        any = 1;
    }
    layout probe = *l;
    probe.sched = o;
    const double cf = bubble_closed_form(&probe, m);
    fprintf(f, ", \"compute_span_us\": %.3f, \"bubble_closed_form\": ", last - first);
    if (cf >= 0) fprintf(f, "%.6f", cf);
    else fputs("null", f);
    fprintf(f, ", \"ranks\": [");
    double busy_sum = 0;
    for (int r = 0, i = 0; r < p; r++) {
        double busy = 0;
        fprintf(f, "%s\n  {\"rank\": %d, \"ops\": [", r ? "," : "", r);
        for (int k = 0; i < x->n_ops && x->ops[i].rank == r; i++, k++) {
            const layout_op *op = &x->ops[i];
            if (op->kind <= LAYOUT_OP_W) busy += op->t1_us - op->t0_us;
            fprintf(f, "%s[\"%s\", %d, %d, %d, %.3f, %.3f]", k ? ", " : "", layout_op_kind_name(op->kind), op->mb,
                    op->chunk, op->stage, op->t0_us, op->t1_us);
        }
        busy_sum += busy;
        fprintf(f, "], \"busy_us\": %.3f, \"idle_us\": %.3f}", busy, (last - first) - busy);
    }
    const double idle = p * (last - first) - busy_sum;
    fprintf(f, "\n ], \"idle_over_busy\": %.6f, \"idle_fraction\": %.6f}\n", busy_sum > 0 ? idle / busy_sum : 0.0,
            p > 0 && last > first ? idle / (p * (last - first)) : 0.0);
}

static void api_trace(serve_ctx *c, const char *body, size_t n, serve_reply *r) {
    layout_request *q = calloc(1, sizeof *q);
    layout_eval_result *x = calloc(1, sizeof *x);
    if (!q || !x) {
        free(q);
        free(x);
        return serve_error(r, 500, "out of memory");
    }
    if (run_layout(c, body, n, 1, q, x, r) == 0) {
        if (x->lay.pp > 256 || x->n_ops > 2000000)
            serve_error(r, 400, "the pipeline view draws at most 256 ranks and 2,000,000 ops");
        else {
            char *buf = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&buf, &len);
            if (!f) serve_error(r, 500, "out of memory");
            else {
                write_trace(f, x);
                fclose(f);
                serve_json(r, buf, len);
            }
        }
    }
    free(x->ops);
    free(q);
    free(x);
}

/* POST /api/export: a layout request with "format" (megatron, torchtitan,
 * deepspeed, json): the layout simulated as placer layout runs it, written
 * by the plan's exporter (placer plan --export's text for that layout). */
static void api_export(serve_ctx *c, const char *body, size_t n, serve_reply *r) {
    char msg[640] = "";
    json_t *root = serve_body(body, n, LAYOUT_KEYS, msg, sizeof msg);
    if (!root) return serve_error(r, 400, msg);
    const char *fmt_text = NULL;
    plan_export_format fmt;
    if (serve_string(root, "format", 40, &fmt_text, msg, sizeof msg) < 0 || !fmt_text ||
        plan_export_parse_format(fmt_text, &fmt, msg, sizeof msg) != PL_OK) {
        json_decref(root);
        return serve_error(r, 400, msg[0] ? msg : "no \"format\": megatron, torchtitan, deepspeed or json");
    }
    layout_request *q = calloc(1, sizeof *q);
    layout_eval_result *x = calloc(1, sizeof *x);
    if (!q || !x) {
        free(q);
        free(x);
        json_decref(root);
        return serve_error(r, 500, "out of memory");
    }
    if (run_layout(c, body, n, 0, q, x, r) == 0) {
        /* the architecture fields (norm, rotary base, ...) as placer plan --export reads them: from the shipped
         * model's file, or from the pasted config's text (run_layout has checked both) */
        const char *name = json_string_value(json_object_get(root, "model"));
        const char *config = json_string_value(json_object_get(root, "config"));
        model_arch arch;
        int chunks[LAYOUT_MAX_CHUNKS];
        pl_status st = name ? model_arch_load(name, &arch, msg, sizeof msg)
                            : model_arch_parse_json(config ? config : "", config ? strlen(config) : 0, &arch, msg,
                                                    sizeof msg);
        if (st == PL_OK) st = layout_chunk_layers(&x->lay, x->model.cfg.n_layers, chunks, msg, sizeof msg);
        const plan_export_in in = {&x->model.cfg, &arch, name, &x->lay, chunks, &x->res, PLAN_FRAMEWORK_ANY};
        plan_export_files out;
        memset(&out, 0, sizeof out);
        if (st == PL_OK) st = plan_export_build(fmt, &in, &out, msg, sizeof msg);
        if (st != PL_OK) serve_error(r, serve_status_of(st), msg);
        else {
            serve_json(r, out.text[0], strlen(out.text[0])); /* the reply owns the text */
            r->type = "text/plain; charset=utf-8";
            out.text[0] = NULL;
        }
        plan_export_files_free(&out);
    }
    json_decref(root);
    free(q);
    free(x);
}

/* ---- POST /api/validate ------------------------------------------------------ */

/* text with key's value replaced by val (appended when text has no key). */
static void with_value(const char *text, const char *key, const char *val, char *out, size_t len) {
    size_t off = 0, kl = strlen(key);
    int done = 0;
    out[0] = 0;
    for (const char *p = text; p && *p && off < len;) {
        const char *e = strchr(p, ',');
        const size_t w = e ? (size_t)(e - p) : strlen(p);
        const int same = w > kl && !strncmp(p, key, kl) && p[kl] == '=';
        if (same) {
            off += (size_t)snprintf(out + off, len - off, "%s%s=%s", off ? "," : "", key, val);
            done = 1;
        } else {
            off += (size_t)snprintf(out + off, len - off, "%s%.*s", off ? "," : "", (int)w, p);
        }
        p = e ? e + 1 : NULL;
    }
    if (!done && off < len) snprintf(out + off, len - off, "%s%s=%s", off ? "," : "", key, val);
}

/* {"model", "config", "cluster", "gpus", "seq", "layout", "try": {"tp": [1, 2, ...], ...}}:
 * for each key and value, the layout with that value substituted, checked
 * by layout_parse and layout_validate against the model and the GPU count:
 * null when valid, else the library's line. */
static void api_validate(serve_ctx *c, const char *body, size_t n, serve_reply *r) {
    static const char *const keys[] = {"model", "config", "cluster", "gpus", "seq", "layout", "try", NULL};
    char msg[640] = "", path[512] = "";
    json_t *root = serve_body(body, n, keys, msg, sizeof msg);
    if (!root) return serve_error(r, 400, msg);
    const char *model = NULL, *clu = NULL, *text = NULL;
    long gpus = 0, seq = 0;
    plan_model pm;
    cluster cl;
    json_t *tries = json_object_get(root, "try");
    int rc = serve_model(c, root, path, sizeof path, &model, msg, sizeof msg);
    if (!rc && serve_string(root, "cluster", 200, &clu, msg, sizeof msg) < 0) rc = -1;
    if (!rc && (!clu || !serve_shipped_name("cluster", clu, msg, sizeof msg)))
        rc = clu ? -1 : (snprintf(msg, sizeof msg, "no cluster: give \"cluster\""), -1);
    if (!rc && serve_string(root, "layout", 8000, &text, msg, sizeof msg) < 0) rc = -1;
    if (!rc && !text) rc = (snprintf(msg, sizeof msg, "no layout: give \"layout\""), -1);
    if (!rc && serve_int(root, "gpus", 1, 100000000L, &gpus, msg, sizeof msg) < 0) rc = -1;
    if (!rc && serve_int(root, "seq", 1, 1L << 24, &seq, msg, sizeof msg) < 0) rc = -1;
    if (!rc && (!tries || !json_is_object(tries))) rc = (snprintf(msg, sizeof msg, "\"try\" must be an object"), -1);
    pl_status st = PL_OK;
    if (!rc && (st = plan_model_load(model, (int)seq, &pm, msg, sizeof msg)) != PL_OK) rc = -1;
    if (!rc && (st = cluster_load(clu, NULL, &cl, msg, sizeof msg)) != PL_OK) rc = -1;
    if (rc) {
        serve_hide_path(msg, sizeof msg, path);
        serve_model_done(path);
        json_decref(root);
        return serve_error(r, 400, msg);
    }
    serve_model_done(path);
    const int64_t n_gpus = gpus > 0 ? gpus : cluster_n_gpus(&cl);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        json_decref(root);
        return serve_error(r, 500, "out of memory");
    }
    fputc('{', f);
    const char *key;
    json_t *vals;
    int k = 0, bad = 0;
    json_object_foreach(tries, key, vals) {
        if (!json_is_array(vals) || json_array_size(vals) > 64 || strlen(key) > 16 || strchr(key, '=') ||
            strchr(key, ',')) {
            snprintf(msg, sizeof msg, "\"try\".%.16s must be an array of at most 64 values", key);
            bad = 1;
            break;
        }
        fprintf(f, "%s\"%s\": {", k++ ? ", " : "", key);
        size_t i;
        json_t *v;
        json_array_foreach(vals, i, v) {
            char val[64];
            if (json_is_integer(v)) snprintf(val, sizeof val, "%lld", (long long)json_integer_value(v));
            else if (json_is_string(v) && json_string_length(v) < 40 && !strchr(json_string_value(v), ','))
                snprintf(val, sizeof val, "%s", json_string_value(v));
            else {
                snprintf(msg, sizeof msg, "\"try\".%s holds a value that is no integer or short name", key);
                bad = 1;
                break;
            }
            char lt[9000], why[512] = "";
            with_value(text, key, val, lt, sizeof lt);
            layout l;
            pl_status vs = layout_parse(lt, &l, why, sizeof why);
            if (vs == PL_OK) vs = layout_validate(&l, &pm.cfg, n_gpus, why, sizeof why);
            fprintf(f, "%s", i ? ", " : "");
            pl_json_string(f, val);
            fputs(": ", f);
            if (vs == PL_OK) fputs("null", f);
            else pl_json_string(f, why[0] ? why : pl_status_str(vs));
        }
        fputc('}', f);
        if (bad) break;
    }
    fputs("}\n", f);
    fclose(f);
    json_decref(root);
    if (bad) {
        free(buf);
        return serve_error(r, 400, msg);
    }
    serve_json(r, buf, len);
}

/* ---- dispatch ---------------------------------------------------------------- */

static void static_file(const char *url, serve_reply *r) {
    const char *want = !strcmp(url, "/") ? "/web/index.html" : url;
    for (int i = 0; i < serve_n_assets; i++)
        if (!strcmp(serve_assets[i].path, want)) {
            memset(r, 0, sizeof *r);
            r->status = 200;
            r->type = serve_assets[i].type;
            r->static_body = (const char *)serve_assets[i].data;
            r->len = serve_assets[i].len;
            return;
        }
    serve_error(r, 404, "no such page");
}

void serve_handle(serve_ctx *c, const char *method, const char *url, const char *body, size_t n, serve_reply *r) {
    memset(r, 0, sizeof *r);
    if (!c || !method || !url) return serve_error(r, 500, "no request");
    if (n > SERVE_MAX_BODY) return serve_error(r, 413, "the request body is larger than 1 MiB");
    const int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (!strncmp(url, "/api/", 5)) {
        const char *e = url + 5;
        if (get && !strcmp(e, "models")) return api_list(r, "models");
        if (get && !strcmp(e, "clusters")) return api_list(r, "clusters");
        if (get && !strcmp(e, "published")) return serve_published(c, r);
        if (get && !strcmp(e, "db")) return serve_db(c, r);
        if (post && !strcmp(e, "layout")) return api_layout(c, body, n, r);
        if (post && !strcmp(e, "trace")) return api_trace(c, body, n, r);
        if (post && !strcmp(e, "validate")) return api_validate(c, body, n, r);
        if (post && !strcmp(e, "export")) return api_export(c, body, n, r);
        if (post && !strcmp(e, "plan")) {
            serve_plan_job *job = NULL;
            if (serve_plan_parse(c, body, n, &job, r) != 0) return;
            char *buf = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&buf, &len);
            if (!f) {
                serve_plan_job_free(job);
                return serve_error(r, 500, "out of memory");
            }
            serve_plan_run(c, job, (serve_line_fn)NULL, f);
            serve_plan_job_free(job);
            fclose(f);
            serve_json(r, buf, len);
            r->type = "application/x-ndjson";
            return;
        }
        return serve_error(r, get || post ? 404 : 405, "no such endpoint (see docs/serve.md)");
    }
    if (!get) return serve_error(r, 405, "the page's files are read with GET");
    static_file(url, r);
}
