/* fuzz_serve.c: libFuzzer target for placer serve's request handler
 * (cli/serve_api.h: serve_handle, serve_plan_parse), not the socket. The
 * first byte picks the endpoint, the rest is the request body (or, for a
 * GET of the page's files, the path). Every reply must be a status the API
 * gives (200, 400, 404, 405, 413); a 400 carries {"error": ...} on one
 * line; no 500 but for running out of memory; and the handler must answer
 * a good request after any bad one. A plan request is parsed, not run (a
 * search takes seconds). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_api.h"

static serve_ctx *ctx;

static void check(const serve_reply *r) {
    const char *t = r->body ? r->body : r->static_body;
    if (!t) abort();
    switch (r->status) {
    case 200: case 404: case 405: case 413: break;
    case 400: {
        if (strncmp(t, "{\"error\": \"", 11) != 0) abort();
        const char *nl = memchr(t, '\n', r->len);
        if (!nl || nl != t + r->len - 1) abort();
        break;
    }
    case 500:
        if (!strstr(t, "out of memory")) abort();
        break;
    default: abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!ctx) {
        serve_options o = {NULL, NULL};
        char msg[256];
        if (serve_ctx_create(&o, &ctx, msg, sizeof msg) != PL_OK) abort();
    }
    static const char *const post[] = {"/api/layout", "/api/validate", "/api/trace", "/api/export"};
    const char *body = (const char *)data + 1;
    const size_t n = size - 1;
    serve_reply r;
    const int k = data[0] % 7;
    if (k < 4) {
        serve_handle(ctx, "POST", post[k], body, n, &r);
        check(&r);
        serve_reply_free(&r);
    } else if (k == 4) {
        serve_plan_job *job = NULL;
        if (serve_plan_parse(ctx, body, n, &job, &r) == 0) serve_plan_job_free(job);
        else {
            check(&r);
            serve_reply_free(&r);
        }
    } else {
        char path[256];
        snprintf(path, sizeof path, "%s%.*s", k == 5 ? "/api/" : "/web/", (int)(n < 200 ? n : 200), body);
        if (memchr(body, 0, n < 200 ? n : 200)) return 0;
        if (strstr(path, "published") || strstr(path, "models") || strstr(path, "clusters")) return 0; /* slow, fixed */
        serve_handle(ctx, "GET", path, NULL, 0, &r);
        check(&r);
        serve_reply_free(&r);
    }
    static const char good[] = "{\"model\": \"gpt12\", \"cluster\": \"dgx-h100\", \"layout\": \"tp=1,dp=8,mbs=1,gbs=8\"}";
    serve_handle(ctx, "POST", "/api/layout", good, sizeof good - 1, &r);
    if (r.status != 200) abort();
    serve_reply_free(&r);
    return 0;
}
