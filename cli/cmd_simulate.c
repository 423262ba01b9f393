/*
 * cmd_simulate.c: `placer simulate` predicts the step time and memory of one
 * placement under one pipeline schedule, from a profile database, without a
 * GPU. It prints the prediction for people (or as JSON) and can write a
 * Chrome trace of the simulated step.
 *
 * Everything the user typed is checked before the simulator runs: a bad
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
#include "graph.h"
#include "placement.h"
#include "profile_data.h"
#include "schedule.h"
#include "sim.h"
#include "store.h"
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
            "  --schedule S          gpipe, 1f1b or interleaved (default 1f1b)\n"
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

typedef struct {
    int count;      /* transfers on the link */
    int acts;       /* of which activations */
    double bytes;   /* bytes carried */
    double busy_us; /* time the link was busy */
} link_sum;

int cmd_simulate(int argc, char **argv) {
    const char *db_path = NULL, *placement_text = NULL, *placement_file = NULL, *mb_text = "1";
    const char *sched_text = "1f1b", *chunks_text = "1", *cap_text = NULL, *config = NULL;
    const char *params_text = NULL, *trace_path = NULL;
    int json = 0;
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},          {"placement", required_argument, 0, 'p'},
        {"placement-file", required_argument, 0, 'P'}, {"micro-batches", required_argument, 0, 'm'},
        {"schedule", required_argument, 0, 's'},    {"chunks", required_argument, 0, 'v'},
        {"mem-cap", required_argument, 0, 'c'},     {"config", required_argument, 0, 'g'},
        {"params", required_argument, 0, 'r'},      {"trace", required_argument, 0, 't'},
        {"json", no_argument, 0, 'j'},              {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "d:p:P:m:s:v:c:g:r:t:jh", opts, NULL)) != -1) {
        switch (ch) {
        case 'd': db_path = optarg; break;
        case 'p': placement_text = optarg; break;
        case 'P': placement_file = optarg; break;
        case 'm': mb_text = optarg; break;
        case 's': sched_text = optarg; break;
        case 'v': chunks_text = optarg; break;
        case 'c': cap_text = optarg; break;
        case 'g': config = optarg; break;
        case 'r': params_text = optarg; break;
        case 't': trace_path = optarg; break;
        case 'j': json = 1; break;
        case 'h': simulate_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error(CMD, "unknown or incomplete option '%s'; see placer simulate --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'; see placer simulate --help", argv[optind]);

    /* ---- everything that needs no database ---- */
    char msg[512] = "";
    schedule sched = {1, SCHED_1F1B, 1};
    pl_status st = schedule_parse_order(sched_text, &sched.order, msg, sizeof msg);
    if (st != PL_OK) return cli_report(CMD, st, msg);
    st = schedule_parse_micro_batches(mb_text, &sched.micro_batches, msg, sizeof msg);
    if (st != PL_OK) return cli_report(CMD, st, msg);
    {
        char *end = NULL;
        errno = 0;
        long v = strtol(chunks_text, &end, 10);
        if (!*chunks_text || *end || errno || v < 1 || v > 1024)
            return cli_usage_error(CMD, "chunks '%s' is not a positive integer", chunks_text);
        sched.chunks = (int)v;
    }
    if (sched.chunks > 1 && sched.order != SCHED_INTERLEAVED)
        return cli_usage_error(CMD, "--chunks %d needs --schedule interleaved", sched.chunks);
    int want_params = -1; /* -1 default, 0 neutral, 1 calibrated */
    if (params_text) {
        if (!strcmp(params_text, "neutral")) want_params = 0;
        else if (!strcmp(params_text, "calibrated")) want_params = 1;
        else return cli_usage_error(CMD, "unknown --params '%s' (use neutral or calibrated)", params_text);
    }
    if (!placement_text && !placement_file)
        return cli_usage_error(CMD, "no placement: pass --placement 0,0,1,... or --placement-file FILE");
    if (placement_text && placement_file)
        return cli_usage_error(CMD, "pass either --placement or --placement-file, not both");
    gpt_config want_cfg;
    if (config && (st = gpt_config_parse(config, &want_cfg, msg, sizeof msg)) != PL_OK)
        return cli_report(CMD, st, msg);
    if (!db_path) db_path = cli_default_db();
    if (!db_path)
        return cli_usage_error(CMD, "no profile database: pass --db FILE or set PLACER_DB "
                                    "(placer profile --spec NAME --out FILE makes one)");

    int rc = CLI_EXIT_FAIL;
    char *file_text = NULL;
    profile_db *db = NULL;
    profile_data *p = NULL;
    graph *g = NULL;
    sim_ctx *ctx = NULL;
    int *dev = NULL;
    int64_t *caps = NULL;
    link_sum *links = NULL;
    char *ptext = NULL;

    if (placement_file) {
        file_text = read_text_file(placement_file);
        if (!file_text) {
            rc = cli_usage_error(CMD, "cannot read placement file '%s': %s", placement_file, strerror(errno));
            goto out;
        }
        placement_text = file_text;
    }

    /* ---- profile ---- */
    st = profile_db_open(db_path, PROFILE_DB_READ, &db, msg, sizeof msg);
    if (st != PL_OK) {
        rc = cli_report(CMD, st, msg);
        goto out;
    }
    gpt_config cfg;
    st = profile_db_load_profile(db, config ? &want_cfg : NULL, &p, &cfg, msg, sizeof msg);
    if (st != PL_OK) {
        rc = cli_report(CMD, st, msg);
        goto out;
    }
    st = graph_build_gpt(&cfg, &g, msg, sizeof msg);
    if (st != PL_OK) {
        rc = cli_report(CMD, st, msg);
        goto out;
    }
    if (g->n_nodes != p->n_nodes) {
        rc = cli_report(CMD, PL_ERR_INVALID, "the stored profile does not match its graph's node count");
        goto out;
    }
    char key[PROFILE_NAME_LEN];
    gpt_config_key(&cfg, key, sizeof key);

    /* ---- placement, schedule, caps ---- */
    dev = malloc(sizeof *dev * (size_t)g->n_nodes);
    caps = malloc(sizeof *caps * (size_t)p->n_devices);
    links = calloc((size_t)p->n_devices * p->n_devices, sizeof *links);
    if (!dev || !caps || !links) {
        rc = cli_report(CMD, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    st = placement_parse(placement_text, g->n_nodes, p->n_devices, dev, msg, sizeof msg);
    if (st != PL_OK) {
        rc = cli_report(CMD, st, msg);
        goto out;
    }
    st = schedule_validate(&sched, cfg.batch, msg, sizeof msg);
    if (st != PL_OK) {
        rc = cli_report(CMD, st, msg);
        goto out;
    }
    for (int d = 0; d < p->n_devices; d++) {
        caps[d] = p->devices[d].mem_bytes;
        if (cap_text && (st = pl_parse_mem_cap(cap_text, p->devices[d].mem_bytes, &caps[d], msg, sizeof msg)) != PL_OK) {
            rc = cli_report(CMD, st, msg);
            goto out;
        }
    }

    /* ---- simulator parameters ---- */
    sim_params prm;
    sim_params_default(&prm);
    int calibrated = 0;
    if (want_params != 0) {
        const char *names[SIM_N_PARAMS];
        double vals[SIM_N_PARAMS];
        for (int i = 0; i < SIM_N_PARAMS; i++) {
            names[i] = sim_param_name(i);
            vals[i] = *sim_param_ptr(&prm, i);
        }
        int found = 0;
        st = profile_db_load_sim_params(db, key, SIM_N_PARAMS, names, vals, &found);
        if (st != PL_OK) {
            rc = cli_report(CMD, st, profile_db_last_error(db));
            goto out;
        }
        if (found > 0) {
            for (int i = 0; i < SIM_N_PARAMS; i++) *sim_param_ptr(&prm, i) = vals[i];
            calibrated = 1;
        } else if (want_params == 1) {
            rc = cli_usage_error(CMD, "no calibrated simulator parameters stored for %s in %s; run placer "
                                      "calibrate, or use --params neutral",
                                 key, db_path);
            goto out;
        }
    }

    /* ---- simulate ---- */
    st = sim_ctx_create(g, p, sched.micro_batches, &ctx);
    if (st != PL_OK) {
        rc = cli_report(CMD, st, "cannot create the simulator for this profile");
        goto out;
    }
    st = sim_ctx_set_trace(ctx, 1);
    if (st != PL_OK) {
        rc = cli_report(CMD, st, "out of memory for the simulator's event trace");
        goto out;
    }
    sim_result res;
    st = sim_run(ctx, dev, &sched, caps, &prm, &res);
    if (st != PL_OK) {
        rc = cli_report(CMD, st, sim_last_error(ctx));
        goto out;
    }
    if (trace_path) {
        FILE *tf = fopen(trace_path, "w");
        if (!tf) {
            snprintf(msg, sizeof msg, "cannot write trace '%s': %s", trace_path, strerror(errno));
            rc = cli_report(CMD, PL_ERR_IO, msg);
            goto out;
        }
        st = sim_write_chrome_trace(ctx, tf);
        if (fclose(tf) != 0 && st == PL_OK) st = PL_ERR_IO;
        if (st != PL_OK) {
            snprintf(msg, sizeof msg, "cannot write trace '%s'", trace_path);
            rc = cli_report(CMD, st, msg);
            goto out;
        }
    }

    /* per-link and critical-path summaries from the events */
    const int D = p->n_devices;
    int used[SIM_MAX_DEVICES] = {0};
    for (int i = 0; i < g->n_nodes; i++) used[dev[i]] = 1;
    int n_ev = 0;
    const sim_event *ev = sim_events(ctx, &n_ev);
    for (int e = 0; e < n_ev; e++) {
        if (ev[e].dst_device < 0) continue;
        link_sum *l = &links[ev[e].device * D + ev[e].dst_device];
        l->count++;
        l->acts += ev[e].kind == SIM_EV_SEND_ACT;
        l->bytes += (double)p->node_mem[ev[e].node].out_bytes_per_sample * (cfg.batch / sched.micro_batches);
        l->busy_us += ev[e].end_us - ev[e].start_us;
    }
    double crit_dev[SIM_MAX_DEVICES] = {0};
    int n_crit = 0;
    const sim_event *cp = sim_critical_path(ctx, &n_crit);
    for (int k = 0; k < n_crit; k++)
        if (cp[k].dst_device < 0) crit_dev[cp[k].device] += cp[k].end_us - cp[k].start_us;
    int mb_size = cfg.batch / sched.micro_batches;
    int mb_profiled = profile_mb_index(p, mb_size) >= 0;
    size_t plen = (size_t)placement_format(dev, g->n_nodes, NULL, 0) + 1;
    ptext = malloc(plen);
    if (!ptext) {
        rc = cli_report(CMD, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    placement_format(dev, g->n_nodes, ptext, plen);

    if (json) {
        printf("{\"db\":");
        pl_json_string(stdout, db_path);
        printf(",\"machine\":");
        pl_json_string(stdout, p->machine);
        printf(",\"source\":");
        pl_json_string(stdout, p->source);
        printf(",\"graph\":");
        pl_json_string(stdout, key);
        printf(",\"n_nodes\":%d,\"placement\":\"%s\",\"schedule\":{\"order\":\"%s\",\"micro_batches\":%d,"
               "\"chunks\":%d,\"micro_batch_size\":%d,\"micro_batch_size_profiled\":%s},",
               g->n_nodes, ptext, schedule_order_name(sched.order), sched.micro_batches, sched.chunks, mb_size,
               mb_profiled ? "true" : "false");
        printf("\"params\":{\"source\":\"%s\"", calibrated ? "calibrated" : "neutral");
        for (int i = 0; i < SIM_N_PARAMS; i++) printf(",\"%s\":%.17g", sim_param_name(i), *sim_param_ptr(&prm, i));
        /* step_us_exact round-trips the double (the Python tests compare bit for bit) */
        printf("},\"step_us\":%.3f,\"step_us_exact\":%.17g,\"bubble_fraction\":%.6f,\"devices_used\":%d,"
               "\"stages\":%d,\"oom\":%s,\"oom_device\":",
               res.step_us, res.step_us, res.bubble_fraction, res.n_used_devices, res.n_stages,
               res.oom ? "true" : "false");
        if (res.oom) printf("%d", res.oom_device);
        else printf("null");
        printf(",\"devices\":[");
        for (int d = 0; d < D; d++) {
            printf("%s{\"index\":%d,\"name\":", d ? "," : "", d);
            pl_json_string(stdout, p->devices[d].name);
            printf(",\"used\":%s,\"busy_us\":%.3f,\"idle_us\":%.3f,\"bubble\":%.6f,\"static_bytes\":%lld,"
                   "\"peak_bytes\":%lld,\"cap_bytes\":%lld,\"max_in_flight\":%d,\"oom\":%s,"
                   "\"critical_us\":%.3f}",
                   used[d] ? "true" : "false", res.busy_us[d], res.idle_us[d], res.bubble[d],
                   (long long)res.static_bytes[d], (long long)res.peak_bytes[d], (long long)res.cap_bytes[d],
                   res.max_in_flight[d],
                   res.cap_bytes[d] > 0 && res.peak_bytes[d] > res.cap_bytes[d] ? "true" : "false", crit_dev[d]);
        }
        printf("],\"transfers\":{\"count\":%d,\"bytes\":%.0f,\"links\":[", res.n_transfers, res.transfer_bytes);
        int first = 1;
        for (int s = 0; s < D; s++)
            for (int t = 0; t < D; t++) {
                const link_sum *l = &links[s * D + t];
                if (!l->count) continue;
                printf("%s{\"src\":%d,\"dst\":%d,\"count\":%d,\"activations\":%d,\"gradients\":%d,\"bytes\":%.0f,"
                       "\"busy_us\":%.3f}",
                       first ? "" : ",", s, t, l->count, l->acts, l->count - l->acts, l->bytes, l->busy_us);
                first = 0;
            }
        printf("]},\"critical_path\":{\"items\":%d,\"compute_us\":%.3f,\"transfer_us\":%.3f}}\n",
               res.critical_path_len, res.critical_compute_us, res.critical_transfer_us);
    } else {
        char b1[32], b2[32], b3[32];
        printf("profile    %s (%s), graph %s, %d nodes\n", p->machine, p->source, key, g->n_nodes);
        printf("placement  %s\n", ptext);
        printf("           %d device%s used, %d stage%s (runs of consecutive nodes on one device)\n",
               res.n_used_devices, res.n_used_devices == 1 ? "" : "s", res.n_stages, res.n_stages == 1 ? "" : "s");
        printf("schedule   %s, %d micro-batch%s of %d sample%s", schedule_order_name(sched.order),
               sched.micro_batches, sched.micro_batches == 1 ? "" : "es", mb_size, mb_size == 1 ? "" : "s");
        if (sched.order == SCHED_INTERLEAVED) printf(", %d chunk%s per device", sched.chunks, sched.chunks == 1 ? "" : "s");
        printf("%s\n", mb_profiled ? "" : " (size not profiled: costs interpolated)");
        printf("params     %s", calibrated ? "calibrated:" : "neutral");
        if (calibrated)
            for (int i = 0; i < SIM_N_PARAMS; i++) printf(" %s=%.4g", sim_param_name(i), *sim_param_ptr(&prm, i));
        printf("\n\nstep time  %.3f ms (predicted)\n\n", res.step_us / 1000.0);
        printf("%-6s %-20s %10s %10s %8s %9s %12s %12s  %s\n", "device", "name", "busy ms", "idle ms", "bubble",
               "in flight", "peak memory", "cap", "memory");
        for (int d = 0; d < D; d++) {
            char name[24];
            snprintf(name, sizeof name, "%.20s", p->devices[d].name);
            if (!used[d]) {
                printf("gpu%-3d %-20s %10s\n", d, name, "unused");
                continue;
            }
            pl_format_bytes((double)res.peak_bytes[d], b1, sizeof b1);
            if (res.cap_bytes[d] > 0) pl_format_bytes((double)res.cap_bytes[d], b2, sizeof b2);
            else snprintf(b2, sizeof b2, "none");
            int over = res.cap_bytes[d] > 0 && res.peak_bytes[d] > res.cap_bytes[d];
            printf("gpu%-3d %-20s %10.3f %10.3f %8.3f %9d %12s %12s  %s\n", d, name, res.busy_us[d] / 1000.0,
                   res.idle_us[d] / 1000.0, res.bubble[d], res.max_in_flight[d], b1, b2, over ? "OOM" : "ok");
        }
        printf("\nbubble     %.3f (mean idle / busy over used devices)\n", res.bubble_fraction);
        pl_format_bytes(res.transfer_bytes, b1, sizeof b1);
        printf("transfers  %d (%s)\n", res.n_transfers, b1);
        for (int s = 0; s < D; s++)
            for (int t = 0; t < D; t++) {
                const link_sum *l = &links[s * D + t];
                if (!l->count) continue;
                pl_format_bytes(l->bytes, b3, sizeof b3);
                printf("           gpu%d -> gpu%d: %d activations, %d gradients, %s, busy %.3f ms\n", s, t, l->acts,
                       l->count - l->acts, b3, l->busy_us / 1000.0);
            }
        printf("critical   %d items: %.3f ms compute, %.3f ms transfer", res.critical_path_len,
               res.critical_compute_us / 1000.0, res.critical_transfer_us / 1000.0);
        if (prm.step_fixed_us != 0) printf(", %.3f ms fixed per step", prm.step_fixed_us / 1000.0);
        printf("\n          ");
        for (int d = 0; d < D; d++)
            if (crit_dev[d] > 0) printf(" gpu%d %.3f ms", d, crit_dev[d] / 1000.0);
        printf("\n");
        if (res.oom) {
            pl_format_bytes((double)res.peak_bytes[res.oom_device], b1, sizeof b1);
            pl_format_bytes((double)res.cap_bytes[res.oom_device], b2, sizeof b2);
            printf("verdict    OOM: gpu%d needs %s, cap %s\n", res.oom_device, b1, b2);
        } else {
            printf("verdict    fits in memory\n");
        }
        if (trace_path) printf("trace      %s\n", trace_path);
    }
    rc = CLI_EXIT_OK;

out:
    free(ptext);
    free(links);
    free(caps);
    free(dev);
    sim_ctx_destroy(ctx);
    graph_destroy(g);
    profile_data_destroy(p);
    profile_db_close(db);
    free(file_text);
    return rc;
}
