/*
 * test_serve_api.c: placer serve's requests and replies (cli/serve_api.h)
 * without the socket. POST /api/layout answers the bytes `placer layout
 * --json` prints for the same layout (the built binary is run for them);
 * every bad request is HTTP 400 with one line and the handler keeps
 * answering; a file path from the client is refused; a pasted config is
 * read like the shipped file and its temporary copy removed; the plan's
 * stream ends with placer plan --json's object, and a line writer that
 * returns non-zero cancels the plan.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_api.h"

static serve_ctx *ctx_new(void) {
    serve_options o = {NULL, NULL};
    serve_ctx *c = NULL;
    char msg[256];
    cr_assert_eq(serve_ctx_create(&o, &c, msg, sizeof msg), PL_OK, "%s", msg);
    return c;
}

static serve_reply post(serve_ctx *c, const char *path, const char *body) {
    serve_reply r;
    serve_handle(c, "POST", path, body, body ? strlen(body) : 0, &r);
    return r;
}

static const char *text_of(const serve_reply *r) { return r->body ? r->body : r->static_body; }

/* stdout of the built binary for args, heap. */
static char *run_placer(const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s", PLACER_BIN, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while ((k = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += k;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    pclose(p);
    return buf;
}

Test(serve, layout_answers_the_bytes_placer_layout_prints) {
    serve_ctx *c = ctx_new();
    serve_reply r = post(c, "/api/layout",
                         "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\", \"gpus\": 16, "
                         "\"layout\": \"tp=2,pp=2,mbs=1,gbs=64,recompute=selective\"}");
    cr_assert_eq(r.status, 200, "%s", text_of(&r));
    char *cli = run_placer("layout --model llama-3-8b --cluster dgx-h100 --gpus 16 "
                           "--layout tp=2,pp=2,mbs=1,gbs=64,recompute=selective --json");
    cr_assert_eq(r.len, strlen(cli));
    cr_assert(memcmp(r.body, cli, r.len) == 0, "server:\n%s\ncli:\n%s", r.body, cli);
    free(cli);
    serve_reply_free(&r);
    serve_ctx_destroy(c);
}

Test(serve, bad_requests_are_400_with_one_line_and_the_handler_keeps_answering) {
    static const struct {
        const char *path, *body, *says;
    } bad[] = {
        {"/api/layout", "", "no body"},
        {"/api/layout", "{nope", "not valid JSON"},
        {"/api/layout", "[1, 2]", "not a JSON object"},
        {"/api/layout", "{\"model\": 3, \"cluster\": \"dgx-h100\", \"layout\": \"tp=1\"}", "must be a string"},
        {"/api/layout", "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\", \"layout\": \"tp=1\", \"x\": 1}",
         "unknown key 'x'"},
        {"/api/layout", "{\"model\": \"/etc/passwd\", \"cluster\": \"dgx-h100\", \"layout\": \"tp=1\"}", "not a file path"},
        {"/api/layout", "{\"model\": \"llama-3-8b\", \"cluster\": \"../../x.json\", \"layout\": \"tp=1\"}", "not a file path"},
        {"/api/layout", "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\"}", "no layout"},
        {"/api/layout", "{\"model\": \"no-such-model\", \"cluster\": \"dgx-h100\", \"layout\": \"tp=1\"}", "no-such-model"},
        {"/api/layout", "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\", \"layout\": \"tp=3,dp=1,mbs=1,gbs=8\"}",
         "tp"},
        {"/api/layout", "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\", \"layout\": \"tp=1\", \"gpus\": -4}",
         "must be an integer in 1.."},
        {"/api/layout", "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\", \"layout\": \"tp=1\", \"framework\": "
                        "\"/tmp/f.json\"}", "not a file path"},
        {"/api/layout", "{\"config\": \"{\\\"hidden_size\\\": 1}\", \"cluster\": \"dgx-h100\", \"layout\": \"tp=1\"}",
         "pasted config"},
        {"/api/layout", "{\"check\": {\"set\": \"dense\", \"row\": \"no such row\"}}", "no simulated row"},
        {"/api/trace", "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\", \"layout\": \"tp=1,vp=2\", \"gpipe\": true}",
         "GPipe"},
        {"/api/validate", "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\", \"layout\": \"tp=1\", \"try\": 3}",
         "must be an object"},
        {"/api/export", "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\", \"layout\": \"tp=1,dp=8,mbs=1,gbs=8\", "
                        "\"format\": \"word\"}", "word"},
        {"/api/plan", "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\", \"precision\": \"fp9\"}", "fp9"},
        {"/api/plan", "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\", \"fix\": \"tq=2\"}", "fix:"},
        {"/api/plan", "{\"model\": \"llama-3-8b\"}", "no cluster"},
    };
    serve_ctx *c = ctx_new();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        serve_reply r = post(c, bad[i].path, bad[i].body);
        const char *t = text_of(&r);
        cr_assert_eq(r.status, 400, "%s %s -> %d %s", bad[i].path, bad[i].body, r.status, t);
        cr_assert(strstr(t, bad[i].says), "%s: '%s' not in %s", bad[i].body, bad[i].says, t);
        cr_assert(!strchr(t, '\n') || strchr(t, '\n') == t + r.len - 1, "one line: %s", t);
        cr_assert(!strstr(t, "placer-serve-"), "the server's own path leaks: %s", t);
        serve_reply_free(&r);
    }
    serve_reply r = post(c, "/api/layout", "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\", "
                                           "\"layout\": \"tp=1,dp=8,mbs=1,gbs=64\"}");
    cr_assert_eq(r.status, 200, "%s", text_of(&r));
    serve_reply_free(&r);
    serve_handle(c, "DELETE", "/api/layout", NULL, 0, &r);
    cr_assert_eq(r.status, 405);
    serve_reply_free(&r);
    serve_handle(c, "GET", "/../../etc/passwd", NULL, 0, &r);
    cr_assert_eq(r.status, 404);
    serve_reply_free(&r);
    serve_ctx_destroy(c);
}

Test(serve, a_pasted_config_reads_as_the_shipped_file_and_leaves_no_file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/data/models/llama-3-8b.json", PLACER_SOURCE_DIR);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    /* the body: the text as a JSON string */
    char *body = malloc(4 * n + 512), *o = body;
    o += sprintf(o, "{\"cluster\": \"dgx-h100\", \"layout\": \"tp=2,pp=2,dp=4,mbs=1,gbs=64\", \"config\": \"");
    for (size_t i = 0; i < n; i++) {
        if (text[i] == '"' || text[i] == '\\') *o++ = '\\';
        if (text[i] == '\n') { *o++ = '\\'; *o++ = 'n'; continue; }
        *o++ = text[i];
    }
    strcpy(o, "\"}");
    serve_ctx *c = ctx_new();
    serve_reply a = post(c, "/api/layout", body);
    serve_reply b = post(c, "/api/layout", "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\", "
                                           "\"layout\": \"tp=2,pp=2,dp=4,mbs=1,gbs=64\"}");
    cr_assert_eq(a.status, 200, "%s", text_of(&a));
    cr_assert_eq(b.status, 200, "%s", text_of(&b));
    const char *sa = strstr(a.body, "\"step_us\""), *sb = strstr(b.body, "\"step_us\"");
    cr_assert(sa && sb && !strncmp(sa, sb, 40), "pasted %.40s, shipped %.40s", sa, sb);
    serve_reply_free(&a);
    serve_reply_free(&b);
    free(body);
    serve_ctx_destroy(c); /* removes its folder: fails (stays) if a pasted file were left */
}

typedef struct {
    int lines, progress, cancel_at;
    char last[256];
} sink;

static int to_sink(void *ctx, const char *text, size_t n) {
    sink *s = ctx;
    s->lines++;
    s->progress += strncmp(text, "{\"progress\"", 11) == 0;
    snprintf(s->last, sizeof s->last, "%.*s", (int)(n < 255 ? n : 255), text);
    return s->cancel_at > 0 && s->progress >= s->cancel_at;
}

Test(serve, plan_stream_ends_with_the_plan_and_a_writer_that_stops_cancels_it) {
    serve_ctx *c = ctx_new();
    serve_reply err;
    serve_plan_job *job = NULL;
    const char *req = "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\", \"gpus\": 16, \"global_batch\": 64}";
    cr_assert_eq(serve_plan_parse(c, req, strlen(req), &job, &err), 0);
    sink s = {0};
    cr_assert_eq(serve_plan_run(c, job, to_sink, &s), 0);
    cr_assert_geq(s.progress, 1, "at least the end of the pass is reported");
    cr_assert(strstr(s.last, "{\"result\": \"plan\"}\n{\"model\": \"llama-3-8b\""), "%s", s.last);
    serve_plan_job_free(job);
    /* a bigger plan, cancelled at its first progress line */
    const char *big = "{\"model\": \"llama-3-405b\", \"cluster\": \"llama3-h100\", \"gpus\": 2048, \"global_batch\": 2048}";
    cr_assert_eq(serve_plan_parse(c, big, strlen(big), &job, &err), 0);
    sink t = {.cancel_at = 1};
    cr_assert_eq(serve_plan_run(c, job, to_sink, &t), 1, "the plan ran on: %s", t.last);
    cr_assert_eq(t.progress, 1);
    serve_plan_job_free(job);
    serve_ctx_destroy(c);
}

/* POST /api/export writes what placer plan --export writes for the same
 * layout: the README's plan (Llama 3 8B on 64 H100, its best layout
 * tp1 pp1 dp64 mbs1 zero 1 for Megatron), its architecture fields (RMSNorm, the rotary
 * base, ...) from the shipped model's file as the CLI reads them. */
Test(serve, export_answers_the_bytes_placer_plan_exports) {
    serve_ctx *c = ctx_new();
    serve_reply r = post(c, "/api/export",
                         "{\"model\": \"llama-3-8b\", \"cluster\": \"dgx-h100\", \"gpus\": 64, \"seq\": 8192, "
                         "\"layout\": \"tp=1,pp=1,dp=64,zero=1,mbs=1,gbs=512\", \"format\": \"megatron\"}");
    cr_assert_eq(r.status, 200, "%s", text_of(&r));
    char *cli = run_placer("plan --model llama-3-8b --cluster dgx-h100 --gpus 64 --global-batch 512 --seq 8192 "
                           "--export megatron 2>/dev/null");
    cr_assert(strstr(cli, "--rotary-base 500000"), "the CLI's export lacks the architecture:\n%s", cli);
    cr_assert_eq(r.len, strlen(cli), "server:\n%s\ncli:\n%s", r.body, cli);
    cr_assert(memcmp(r.body, cli, r.len) == 0, "server:\n%s\ncli:\n%s", r.body, cli);
    free(cli);
    serve_reply_free(&r);
    serve_ctx_destroy(c);
}
