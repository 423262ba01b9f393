/*
 * serve_assets.h: the page's files (web/), embedded into the program at
 * build time by scripts/embed-web.py (cli/meson.build runs it), so that
 * `placer serve` needs no install path and the page no network.
 */
#ifndef PLACER_CLI_SERVE_ASSETS_H
#define PLACER_CLI_SERVE_ASSETS_H

#include <stddef.h>

typedef struct {
    const char *path;            /* "/web/index.html" */
    const char *type;            /* its content type */
    const unsigned char *data;   /* its bytes (NUL after the last) */
    size_t len;
} serve_asset;

extern const serve_asset serve_assets[];
extern const int serve_n_assets;

#endif
