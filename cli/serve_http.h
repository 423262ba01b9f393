/*
 * serve_http.h: `placer serve`'s HTTP server (serve_http.c): listens on
 * host:port with libmicrohttpd and answers every request through
 * serve_api.h, until SIGINT or SIGTERM.
 */
#ifndef PLACER_CLI_SERVE_HTTP_H
#define PLACER_CLI_SERVE_HTTP_H

#include <stddef.h>
#include <stdio.h>

#include "serve_api.h"

/* Serve ctx (borrowed) on host (an IPv4 address) and port (0: any free
 * one), writing the one start line ("placer serve: http://HOST:PORT/ ...")
 * and the stop line to log. Blocks until SIGINT / SIGTERM: 0. A bad host
 * is 2, a port that cannot be bound 1, each with one line in msg. */
int serve_http_run(serve_ctx *ctx, const char *host, int port, FILE *log, char *msg, size_t len);

#endif
