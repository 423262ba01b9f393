/*
 * cmd_serve.c: `placer serve` starts a local web server in the program
 * itself: one page (the layout explorer, the pipeline view, the planner,
 * the published runs and, with --db, the placement product's view) and a
 * JSON API that answers what `placer layout --json`, `plan --json` and
 * `check-published --json` print (serve_api.h says what each endpoint
 * takes). It binds 127.0.0.1 unless --host says otherwise, and its first
 * line says where it listens. This file parses the options and starts
 * serve_http_run.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opts.h"
#include "serve_api.h"
#include "serve_http.h"

#define CMD "serve"

static void serve_usage(FILE *f) {
    fprintf(f,
            "usage: placer serve [--port N] [--host ADDR] [--db FILE] [--published-dir DIR]\n\n"
            "Serves the layout explorer in a browser: choose a model, cluster and layout and see\n"
            "the step, MFU, time breakdown and memory per GPU change at once; the pipeline view\n"
            "(every rank's forwards, backwards and sends, animated for each order); the planner\n"
            "with its progress; the published runs against their predictions. The page's API\n"
            "answers what placer layout / plan / check-published print with --json\n"
            "(docs/serve.md).\n\n"
            "  --port N        TCP port (default 8080; 0: any free port, printed at start)\n"
            "  --host ADDR     IPv4 address to listen on (default 127.0.0.1: this machine only;\n"
            "                  0.0.0.0 listens on every interface: anyone who reaches it can use it)\n"
            "  --db FILE       a profile database: adds the placement product's view (the RL\n"
            "                  training curve, the shortlist against the baselines, as placer report)\n"
            "  --published-dir DIR  the published check sets (default: check-published's --dir)\n\n"
            "The client names no file: models, clusters and frameworks are shipped names, or a\n"
            "model's config.json text pasted into the page (at most %d KiB). Bad input is HTTP 400\n"
            "with one line; the server keeps serving. Ctrl-C stops it.\n"
            "Exit status: 0 stopped, 1 cannot listen or start, 2 bad option.\n",
            SERVE_MAX_CONFIG / 1024);
}

int cmd_serve(int argc, char **argv) {
    static const struct option opts[] = {{"port", required_argument, 0, 'p'}, {"host", required_argument, 0, 'H'},
                                         {"db", required_argument, 0, 'd'},   {"published-dir", required_argument, 0, 'P'},
                                         {"help", no_argument, 0, 'h'},       {0, 0, 0, 0}};
    const char *host = "127.0.0.1";
    long port = 8080;
    serve_options so = {NULL, NULL};
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'p':
            if (cli_long_arg(CMD, "--port", optarg, 0, 65535, &port)) return CLI_EXIT_USAGE;
            break;
        case 'H': host = strcmp(optarg, "localhost") ? optarg : "127.0.0.1"; break;
        case 'd': so.db = optarg; break;
        case 'P': so.published_dir = optarg; break;
        case 'h': serve_usage(stdout); return CLI_EXIT_OK;
        default: return cli_usage_error(CMD, "unknown or incomplete option '%s'; see placer serve --help", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'; see placer serve --help", argv[optind]);
    if (so.db && access(so.db, R_OK) != 0) return cli_usage_error(CMD, "--db '%s': no such readable file", so.db);
    char msg[512] = "";
    serve_ctx *ctx = NULL;
    pl_status st = serve_ctx_create(&so, &ctx, msg, sizeof msg);
    if (st != PL_OK) return cli_report(CMD, st, msg);
    int rc = serve_http_run(ctx, host, (int)port, stdout, msg, sizeof msg);
    serve_ctx_destroy(ctx);
    if (rc == 2) return cli_usage_error(CMD, "%s", msg);
    if (rc) return cli_report(CMD, PL_ERR_IO, msg);
    return CLI_EXIT_OK;
}
