/*
 * cmd_simulate.c: `placer simulate` predicts the step time and memory of one
 * placement under one pipeline schedule, from a profile database, without a
 * GPU. It prints the prediction for people (or as JSON) and can write a
 * Chrome trace of the simulated step.
 *
 * It parses (simulate_parse), calls policy_predict (policy/predict.h, which
 * loads, checks, simulates and sums the events) and prints. Everything the
 * user typed is checked before the simulator runs: a bad
 * placement (empty field, junk, wrong length, device out of range), an
 * unknown schedule, a micro-batch count that does not divide the batch, or a
 * bad memory cap each give one line on stderr and exit 2.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_output.h"
#include "graph.h"
#include "predict.h"
#include "schedule.h"
#include "sim.h"
#include "util.h"

#define CMD "simulate"

static void simulate_usage(FILE *f) {
    fprintf(f,
            "usage: placer simulate --placement TEXT | --placement-file FILE [options]\n\n"
            "Predicts the step time, per-device busy/idle time and bubble, peak memory\n"
            "and OOM verdict of a placement from a profile database, in microseconds.\n\n"
            "  --db FILE             profile database (default: $PLACER_DB or the shipped profile)\n"
            "  --placement TEXT      one device per node, comma-separated: 0,0,1,1,...\n"
            "  --placement-file F    read the placement text from F\n"
            "  --micro-batches M     micro-batches per step; must divide the batch (default 1)\n"
            "  --schedule S          gpipe, 1f1b (default), interleaved, or the zero-bubble orders\n"
            "                        zb-h1, zb-h2 (any placement), zb-v, dualpipev (a V placement:\n"
            "                        each device two runs of nodes, m >= 2 per device for dualpipev);\n"
            "                        dualpipe (two directions) is placer layout's (sched=dualpipe)\n"
            "  --chunks V            chunks per device for interleaved (default 1)\n"
            "  --mem-cap CAP         per-device cap: bytes (40GiB), a fraction (0.5) or 50%%;\n"
            "                        default: each device's memory\n"
            "  --config NAME         which graph of the database (default: the only or latest one),\n"
            "                        e.g. default, gpt12, default,layers=12\n"
            "  --params P            calibrated (default when the database has fitted simulator\n"
            "                        parameters) or neutral\n"
            "  --trace FILE          write a Chrome trace (Perfetto, chrome://tracing)\n"
            "  --json                print the prediction as JSON\n\n"
            "Exit status: 0 ok (an OOM verdict is a result), 1 runtime failure, 2 bad input.\n");
}

/* Read a small text file into a new NUL-terminated string (caller frees),
 * newlines turned into spaces. NULL with errno set on failure. */
static char *read_text_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            if (cap >= (64u << 20)) { /* a placement is never this long */
                free(buf);
                buf = NULL;
                errno = EFBIG;
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return NULL;
    if (err) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    buf[n] = 0;
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t') buf[i] = ' ';
    return buf;
}

/* What the user typed, checked as far as it can be without the database. */
typedef struct {
    policy_predict_options o; /* for the library */
    gpt_config config;        /* o.config points here when --config was given */
    const char *placement_file;
    const char *trace_path;
    int json;
} simulate_args;

/* Parse and check argv into a. Returns -1 after printing the usage error
 * (its exit code in *rc), 1 for --help, 0 to go on. */
static int simulate_parse(int argc, char **argv, simulate_args *a, int *rc) {
    const char *mb_text = "1", *sched_text = "1f1b", *chunks_text = "1", *config = NULL, *params_text = NULL;
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},          {"placement", required_argument, 0, 'p'},
        {"placement-file", required_argument, 0, 'P'}, {"micro-batches", required_argument, 0, 'm'},
        {"schedule", required_argument, 0, 's'},    {"chunks", required_argument, 0, 'v'},
        {"mem-cap", required_argument, 0, 'c'},     {"config", required_argument, 0, 'g'},
        {"params", required_argument, 0, 'r'},      {"trace", required_argument, 0, 't'},
        {"json", no_argument, 0, 'j'},              {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->o.sched = (schedule){1, SCHED_1F1B, 1};
    a->o.params = -1;
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "d:p:P:m:s:v:c:g:r:t:jh", opts, NULL)) != -1) {
        switch (ch) {
        case 'd': a->o.db_path = optarg; break;
        case 'p': a->o.placement = optarg; break;
        case 'P': a->placement_file = optarg; break;
        case 'm': mb_text = optarg; break;
        case 's': sched_text = optarg; break;
        case 'v': chunks_text = optarg; break;
        case 'c': a->o.mem_cap = optarg; break;
        case 'g': config = optarg; break;
        case 'r': params_text = optarg; break;
        case 't': a->trace_path = optarg; break;
        case 'j': a->json = 1; break;
        case 'h': return 1;
        default:
            *rc = cli_usage_error(CMD, "unknown or incomplete option '%s'; see placer simulate --help",
                                  argv[optind - 1]);
            return -1;
        }
    }
    char msg[512] = "";
    pl_status st;
    long chunks = 1;
    schedule *sc = &a->o.sched;
    if (optind < argc)
        *rc = cli_usage_error(CMD, "unexpected argument '%s'; see placer simulate --help", argv[optind]);
    else if ((st = schedule_parse_order(sched_text, &sc->order, msg, sizeof msg)) != PL_OK ||
             (st = schedule_parse_micro_batches(mb_text, &sc->micro_batches, msg, sizeof msg)) != PL_OK)
        *rc = cli_report(CMD, st, msg);
    else if (sc->order == SCHED_DUALPIPE)
        *rc = cli_usage_error(CMD, "--schedule dualpipe runs in placer layout only (sched=dualpipe); placer simulate "
                                   "runs dualpipev (the V half) on a V placement");
    else if (!cli_parse_int(chunks_text, 1, 1024, &chunks))
        *rc = cli_usage_error(CMD, "chunks '%s' is not a positive integer", chunks_text);
    else if ((sc->chunks = (int)chunks) > 1 && sc->order != SCHED_INTERLEAVED)
        *rc = cli_usage_error(CMD, "--chunks %d needs --schedule interleaved", sc->chunks);
    else if (params_text && strcmp(params_text, "neutral") && strcmp(params_text, "calibrated"))
        *rc = cli_usage_error(CMD, "unknown --params '%s' (use neutral or calibrated)", params_text);
    else if (!a->o.placement && !a->placement_file)
        *rc = cli_usage_error(CMD, "no placement: pass --placement 0,0,1,... or --placement-file FILE");
    else if (a->o.placement && a->placement_file)
        *rc = cli_usage_error(CMD, "pass either --placement or --placement-file, not both");
    else if (config && (st = gpt_config_parse(config, &a->config, msg, sizeof msg)) != PL_OK)
        *rc = cli_report(CMD, st, msg);
    else if (!a->o.db_path && !(a->o.db_path = cli_default_db()))
        *rc = cli_usage_error(CMD, "no profile database: pass --db FILE or set PLACER_DB "
                                   "(placer profile --spec NAME --out FILE makes one)");
    else {
        if (params_text) a->o.params = !strcmp(params_text, "calibrated");
        if (config) a->o.config = &a->config;
        return 0;
    }
    return -1;
}

/* Write the simulated step's Chrome trace to path; the exit code. */
static int simulate_write_trace(const policy_prediction *r, const char *path) {
    FILE *tf = fopen(path, "w");
    char msg[512];
    if (!tf) {
        snprintf(msg, sizeof msg, "cannot write trace '%s': %s", path, strerror(errno));
        return cli_report(CMD, PL_ERR_IO, msg);
    }
    pl_status st = sim_write_chrome_trace(r->ctx, tf);
    if (fclose(tf) != 0 && st == PL_OK) st = PL_ERR_IO;
    if (st != PL_OK) {
        snprintf(msg, sizeof msg, "cannot write trace '%s'", path);
        return cli_report(CMD, st, msg);
    }
    return CLI_EXIT_OK;
}

/* The prediction as one JSON document on one line. */
static void simulate_print_json(const policy_prediction *r, const char *db_path) {
    const profile_data *p = r->p;
    const sim_result *res = &r->res;
    const schedule *sc = &r->sched;
    const int D = p->n_devices;
    printf("{\"db\":");
    pl_json_string(stdout, db_path);
    printf(",\"machine\":");
    pl_json_string(stdout, p->machine);
    printf(",\"source\":");
    pl_json_string(stdout, p->source);
    printf(",\"graph\":");
    pl_json_string(stdout, r->key);
    printf(",\"n_nodes\":%d,\"placement\":\"%s\",\"schedule\":{\"order\":\"%s\",\"micro_batches\":%d,"
           "\"chunks\":%d,\"micro_batch_size\":%d,\"micro_batch_size_profiled\":%s},",
           r->g->n_nodes, r->placement_text, schedule_order_name(sc->order), sc->micro_batches, sc->chunks, r->mb_size,
           cli_json_bool(r->mb_profiled));
    sim_params prm = r->prm; /* sim_param_ptr takes a mutable one */
    printf("\"params\":{\"source\":\"%s\"", r->calibrated ? "calibrated" : "neutral");
    for (int i = 0; i < SIM_N_PARAMS; i++) printf(",\"%s\":%.17g", sim_param_name(i), *sim_param_ptr(&prm, i));
    /* step_us_exact round-trips the double (the Python tests compare bit for bit) */
    printf("},\"step_us\":%.3f,\"step_us_exact\":%.17g,\"bubble_fraction\":%.6f,\"devices_used\":%d,"
           "\"stages\":%d,\"oom\":%s,\"oom_device\":",
           res->step_us, res->step_us, res->bubble_fraction, res->n_used_devices, res->n_stages, cli_json_bool(res->oom));
    if (res->oom) printf("%d", res->oom_device);
    else printf("null");
    printf(",\"devices\":[");
    for (int d = 0; d < D; d++) {
        printf("%s{\"index\":%d,\"name\":", d ? "," : "", d);
        pl_json_string(stdout, p->devices[d].name);
        printf(",\"used\":%s,\"busy_us\":%.3f,\"idle_us\":%.3f,\"bubble\":%.6f,\"static_bytes\":%lld,"
               "\"peak_bytes\":%lld,\"cap_bytes\":%lld,\"max_in_flight\":%d,\"oom\":%s,"
               "\"critical_us\":%.3f}",
               cli_json_bool(r->used[d]), res->busy_us[d], res->idle_us[d], res->bubble[d],
               (long long)res->static_bytes[d], (long long)res->peak_bytes[d], (long long)res->cap_bytes[d],
               res->max_in_flight[d], cli_json_bool(res->cap_bytes[d] > 0 && res->peak_bytes[d] > res->cap_bytes[d]),
               r->crit_dev_us[d]);
    }
    printf("],\"transfers\":{\"count\":%d,\"bytes\":%.0f,\"links\":[", res->n_transfers, res->transfer_bytes);
    int first = 1;
    for (int s = 0; s < D; s++)
        for (int t = 0; t < D; t++) {
            const policy_link_sum *l = &r->links[s * D + t];
            if (!l->count) continue;
            printf("%s{\"src\":%d,\"dst\":%d,\"count\":%d,\"activations\":%d,\"gradients\":%d,\"bytes\":%.0f,"
                   "\"busy_us\":%.3f}",
                   first ? "" : ",", s, t, l->count, l->acts, l->count - l->acts, l->bytes, l->busy_us);
            first = 0;
        }
    printf("]},\"critical_path\":{\"items\":%d,\"compute_us\":%.3f,\"transfer_us\":%.3f}}\n", res->critical_path_len,
           res->critical_compute_us, res->critical_transfer_us);
}

/* Profile, placement, schedule and parameters: the text's opening lines. */
static void simulate_print_setup(const policy_prediction *r) {
    const sim_result *res = &r->res;
    const schedule *sc = &r->sched;
    printf("profile    %s (%s), graph %s, %d nodes\n", r->p->machine, r->p->source, r->key, r->g->n_nodes);
    printf("placement  %s\n", r->placement_text);
    printf("           %d device%s used, %d stage%s (runs of consecutive nodes on one device)\n", res->n_used_devices,
           cli_plural(res->n_used_devices), res->n_stages, cli_plural(res->n_stages));
    printf("schedule   %s, %d micro-batch%s of %d sample%s", schedule_order_name(sc->order), sc->micro_batches,
           sc->micro_batches == 1 ? "" : "es", r->mb_size, cli_plural(r->mb_size));
    if (sc->order == SCHED_INTERLEAVED) printf(", %d chunk%s per device", sc->chunks, cli_plural(sc->chunks));
    printf("%s\n", r->mb_profiled ? "" : " (size not profiled: costs interpolated)");
    sim_params prm = r->prm; /* sim_param_ptr takes a mutable one */
    printf("params     %s", r->calibrated ? "calibrated:" : "neutral");
    if (r->calibrated)
        for (int i = 0; i < SIM_N_PARAMS; i++) printf(" %s=%.4g", sim_param_name(i), *sim_param_ptr(&prm, i));
    printf("\n\nstep time  %.3f ms (predicted)\n\n", res->step_us / 1000.0);
}

/* The prediction for a person: setup, per-device table, transfers per link,
 * the critical path and the memory verdict. */
static void simulate_print_text(const policy_prediction *r, const char *trace_path) {
    const sim_result *res = &r->res;
    const int D = r->p->n_devices;
    char b1[32], b2[32], b3[32];
    simulate_print_setup(r);
    printf("%-6s %-20s %10s %10s %8s %9s %12s %12s  %s\n", "device", "name", "busy ms", "idle ms", "bubble",
           "in flight", "peak memory", "cap", "memory");
    for (int d = 0; d < D; d++) {
        char name[24];
        snprintf(name, sizeof name, "%.20s", r->p->devices[d].name);
        if (!r->used[d]) {
            printf("gpu%-3d %-20s %10s\n", d, name, "unused");
            continue;
        }
        pl_format_bytes((double)res->peak_bytes[d], b1, sizeof b1);
        if (res->cap_bytes[d] > 0) pl_format_bytes((double)res->cap_bytes[d], b2, sizeof b2);
        else snprintf(b2, sizeof b2, "none");
        int over = res->cap_bytes[d] > 0 && res->peak_bytes[d] > res->cap_bytes[d];
        printf("gpu%-3d %-20s %10.3f %10.3f %8.3f %9d %12s %12s  %s\n", d, name, res->busy_us[d] / 1000.0,
               res->idle_us[d] / 1000.0, res->bubble[d], res->max_in_flight[d], b1, b2, over ? "OOM" : "ok");
    }
    printf("\nbubble     %.3f (mean idle / busy over used devices)\n", res->bubble_fraction);
    pl_format_bytes(res->transfer_bytes, b1, sizeof b1);
    printf("transfers  %d (%s)\n", res->n_transfers, b1);
    for (int s = 0; s < D; s++)
        for (int t = 0; t < D; t++) {
            const policy_link_sum *l = &r->links[s * D + t];
            if (!l->count) continue;
            pl_format_bytes(l->bytes, b3, sizeof b3);
            printf("           gpu%d -> gpu%d: %d activations, %d gradients, %s, busy %.3f ms\n", s, t, l->acts,
                   l->count - l->acts, b3, l->busy_us / 1000.0);
        }
    printf("critical   %d items: %.3f ms compute, %.3f ms transfer", res->critical_path_len,
           res->critical_compute_us / 1000.0, res->critical_transfer_us / 1000.0);
    if (r->prm.step_fixed_us != 0) printf(", %.3f ms fixed per step", r->prm.step_fixed_us / 1000.0);
    printf("\n          ");
    for (int d = 0; d < D; d++)
        if (r->crit_dev_us[d] > 0) printf(" gpu%d %.3f ms", d, r->crit_dev_us[d] / 1000.0);
    printf("\n");
    if (res->oom) {
        pl_format_bytes((double)res->peak_bytes[res->oom_device], b1, sizeof b1);
        pl_format_bytes((double)res->cap_bytes[res->oom_device], b2, sizeof b2);
        printf("verdict    OOM: gpu%d needs %s, cap %s\n", res->oom_device, b1, b2);
    } else {
        printf("verdict    fits in memory\n");
    }
    if (trace_path) printf("trace      %s\n", trace_path);
}

int cmd_simulate(int argc, char **argv) {
    simulate_args a;
    int rc = CLI_EXIT_USAGE;
    int pr = simulate_parse(argc, argv, &a, &rc);
    if (pr < 0) return rc;
    if (pr > 0) {
        simulate_usage(stdout);
        return CLI_EXIT_OK;
    }
    char *file_text = NULL;
    if (a.placement_file) {
        if (!(file_text = read_text_file(a.placement_file)))
            return cli_usage_error(CMD, "cannot read placement file '%s': %s", a.placement_file, strerror(errno));
        a.o.placement = file_text;
    }
    char msg[512] = "";
    policy_prediction *r = NULL;
    pl_status st = policy_predict(&a.o, &r, msg, sizeof msg);
    if (st != PL_OK) rc = cli_report(CMD, st, msg);
    else rc = a.trace_path ? simulate_write_trace(r, a.trace_path) : CLI_EXIT_OK;
    if (rc == CLI_EXIT_OK && a.json) simulate_print_json(r, a.o.db_path);
    else if (rc == CLI_EXIT_OK) simulate_print_text(r, a.trace_path);
    policy_prediction_destroy(r);
    free(file_text);
    return rc;
}
