/*
 * serve_http.c: `placer serve` on the wire (serve_http.h), with
 * libmicrohttpd (Debian's libmicrohttpd-dev): one thread per connection, a
 * request body gathered up to SERVE_MAX_BODY bytes, then serve_handle's
 * reply. POST /api/plan streams: a worker thread runs serve_plan_run and
 * appends its lines to a buffer the response's reader hands out as they
 * come; when the client goes away, libmicrohttpd frees the response, the
 * free callback marks the stream cancelled, and the plan's next progress
 * call returns non-zero, which stops the search (plan_progress_fn).
 *
 * Every reply says Cache-Control: no-store, nosniff, and a content
 * security policy of 'self' (the page loads nothing from elsewhere). A
 * request whose Host is not the address served is refused (403), so a page
 * of another site cannot reach a server bound to 127.0.0.1 through a DNS
 * name that resolves there.
 */
#include "serve_http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve_internal.h"

#if MHD_VERSION < 0x00097002
typedef int serve_mhd_result;
#else
typedef enum MHD_Result serve_mhd_result;
#endif

typedef struct {
    serve_ctx *ctx;
    char host_ok[3][80];     /* Host values accepted ("" unused; all empty: any) */
} http_state;

typedef struct {
    char *body;
    size_t n, cap;
    int too_big;
} request;

/* ---- the plan's stream ---- */

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t more;
    char *buf;               /* lines not yet handed out */
    size_t n, cap;
    int done;                /* the worker has finished */
    int cancelled;           /* the client has gone */
    pthread_t worker;
    serve_ctx *ctx;
    serve_plan_job *job;
} plan_stream;

static int stream_line(void *cls, const char *text, size_t n) {
    plan_stream *s = cls;
    pthread_mutex_lock(&s->lock);
    int cancelled = s->cancelled;
    if (!cancelled) {
        if (s->n + n > s->cap) {
            size_t cap = (s->n + n) * 2 + 4096;
            char *nb = realloc(s->buf, cap);
            if (nb) {
                s->buf = nb;
                s->cap = cap;
            }
        }
        if (s->n + n <= s->cap) {
            memcpy(s->buf + s->n, text, n);
            s->n += n;
        }
        pthread_cond_signal(&s->more);
    }
    pthread_mutex_unlock(&s->lock);
    return cancelled;
}

static void *plan_worker(void *cls) {
    plan_stream *s = cls;
    if (serve_plan_run(s->ctx, s->job, stream_line, s)) {
        fprintf(stderr, "placer serve: a plan was cancelled: its client went away\n");
        fflush(stderr);
    }
    pthread_mutex_lock(&s->lock);
    s->done = 1;
    pthread_cond_signal(&s->more);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    (void)pos;
    plan_stream *s = cls;
    pthread_mutex_lock(&s->lock);
    while (s->n == 0 && !s->done) pthread_cond_wait(&s->more, &s->lock);
    ssize_t k;
    if (s->n == 0) {
        k = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        size_t take = s->n < max ? s->n : max;
        memcpy(out, s->buf, take);
        memmove(s->buf, s->buf + take, s->n - take);
        s->n -= take;
        k = (ssize_t)take;
    }
    pthread_mutex_unlock(&s->lock);
    return k;
}

/* Plans running now, at most one a core (each plan runs its own threads):
 * one more is answered 503 with one line until one ends. */
static atomic_int plans_running;

static int plan_slots(void) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 && n <= 1024 ? (int)n : 1;
}

/* The response is gone (finished, or the client closed): cancel, wait for
 * the worker, free. */
static void stream_free(void *cls) {
    plan_stream *s = cls;
    pthread_mutex_lock(&s->lock);
    s->cancelled = 1;
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->worker, NULL);
    serve_plan_job_free(s->job);
    pthread_cond_destroy(&s->more);
    pthread_mutex_destroy(&s->lock);
    free(s->buf);
    free(s);
    atomic_fetch_sub(&plans_running, 1);
}

/* ---- replies ---- */

static void add_headers(struct MHD_Response *resp, const char *type) {
    MHD_add_response_header(resp, "Content-Type", type);
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Content-Security-Policy",
                            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:");
}

static serve_mhd_result send_reply(struct MHD_Connection *conn, serve_reply *r) {
    struct MHD_Response *resp;
    if (r->body) {
        resp = MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
        r->body = NULL; /* libmicrohttpd frees it */
    } else {
        resp = MHD_create_response_from_buffer(r->len, (void *)r->static_body, MHD_RESPMEM_PERSISTENT);
    }
    if (!resp) return MHD_NO;
    add_headers(resp, r->type ? r->type : "application/json");
    serve_mhd_result ret = MHD_queue_response(conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static serve_mhd_result start_plan(struct MHD_Connection *conn, serve_ctx *ctx, const char *body, size_t n) {
    serve_reply err;
    serve_plan_job *job = NULL;
    if (serve_plan_parse(ctx, body, n, &job, &err) != 0) {
        serve_mhd_result ret = send_reply(conn, &err);
        serve_reply_free(&err);
        return ret;
    }
    const int slots = plan_slots();
    if (atomic_fetch_add(&plans_running, 1) >= slots) {
        atomic_fetch_sub(&plans_running, 1);
        serve_plan_job_free(job);
        char line[160];
        snprintf(line, sizeof line, "%d plans are running (one a core): try again when one ends", slots);
        serve_error(&err, 503, line);
        serve_mhd_result ret = send_reply(conn, &err);
        serve_reply_free(&err);
        return ret;
    }
    plan_stream *s = calloc(1, sizeof *s);
    if (!s) {
        atomic_fetch_sub(&plans_running, 1);
        serve_plan_job_free(job);
        return MHD_NO;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->more, NULL);
    s->ctx = ctx;
    s->job = job;
    if (pthread_create(&s->worker, NULL, plan_worker, s) != 0) {
        pthread_cond_destroy(&s->more);
        pthread_mutex_destroy(&s->lock);
        serve_plan_job_free(job);
        free(s);
        atomic_fetch_sub(&plans_running, 1);
        return MHD_NO;
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, s, stream_free);
    if (!resp) {
        stream_free(s);
        return MHD_NO;
    }
    add_headers(resp, "application/x-ndjson");
    serve_mhd_result ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return ret;
}

static int host_allowed(const http_state *st, struct MHD_Connection *conn) {
    if (!st->host_ok[0][0]) return 1;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    if (!h) return 0;
    for (int i = 0; i < 3; i++)
        if (st->host_ok[i][0] && !strcmp(h, st->host_ok[i])) return 1;
    return 0;
}

static serve_mhd_result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                   const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    http_state *st = cls;
    request *q = *con_cls;
    if (!q) {
        q = calloc(1, sizeof *q);
        if (!q) return MHD_NO;
        *con_cls = q;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        if (!q->too_big && q->n + *upload_size <= SERVE_MAX_BODY) {
            if (q->n + *upload_size + 1 > q->cap) {
                size_t cap = (q->n + *upload_size + 1) * 2;
                char *nb = realloc(q->body, cap);
                if (!nb) return MHD_NO;
                q->body = nb;
                q->cap = cap;
            }
            memcpy(q->body + q->n, upload, *upload_size);
            q->n += *upload_size;
            q->body[q->n] = 0;
        } else {
            q->too_big = 1;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    serve_reply r;
    if (!host_allowed(st, conn)) {
        serve_error(&r, 403, "this server answers requests for its own address only (Host header)");
    } else if (q->too_big) {
        serve_error(&r, 413, "the request body is larger than 1 MiB");
    } else if (!strcmp(method, "POST") && !strcmp(url, "/api/plan")) {
        return start_plan(conn, st->ctx, q->body, q->n);
    } else {
        serve_handle(st->ctx, method, url, q->body, q->n, &r);
    }
    serve_mhd_result ret = send_reply(conn, &r);
    serve_reply_free(&r);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)conn;
    (void)toe;
    request *q = *con_cls;
    if (q) {
        free(q->body);
        free(q);
    }
    *con_cls = NULL;
}

int serve_http_run(serve_ctx *ctx, const char *host, int port, FILE *log, char *msg, size_t len) {
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        return snprintf(msg, len, "--host '%s' is not an IPv4 address (e.g. 127.0.0.1, or 0.0.0.0 for every "
                                  "interface)", host),
               2;
    /* the signals that stop the server go to this thread only (sigwait below) */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    http_state st;
    memset(&st, 0, sizeof st);
    st.ctx = ctx;
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, (uint16_t)port, NULL, NULL,
                         on_request, &st, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED,
                         on_completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600, MHD_OPTION_END);
    if (!d) return snprintf(msg, len, "cannot listen on %s:%d (in use, or not an address of this machine)", host, port), 1;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    const int bound = info ? (int)info->port : port;
    const int loopback = !strncmp(host, "127.", 4);
    if (loopback) { /* only requests for this address (DNS rebinding) */
        snprintf(st.host_ok[0], sizeof st.host_ok[0], "%s:%d", host, bound);
        snprintf(st.host_ok[1], sizeof st.host_ok[1], "localhost:%d", bound);
        snprintf(st.host_ok[2], sizeof st.host_ok[2], "%s", bound == 80 ? host : "");
    }
    fprintf(log, "placer serve: http://%s:%d/  (listening on %s%s; Ctrl-C stops)\n", host, bound, host,
            loopback ? " only: this machine; --host 0.0.0.0 listens on every interface" : ", every interface given");
    fflush(log);
    int sig = 0;
    sigwait(&stop, &sig);
    MHD_stop_daemon(d);
    fprintf(log, "placer serve: stopped\n");
    return 0;
}
