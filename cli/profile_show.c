/*
 * profile_show.c: `placer profile show`, a profile database printed for a
 * person or as JSON. The text puts the summary first (machine, devices,
 * links, collectives, totals), so that its first twenty lines read whole
 * when piped into head, then the node cost table and the collective curves;
 * --summary stops before them. A figure the profile does not hold (a
 * measured profile stores no peak FLOP/s, memory bandwidth or launch time)
 * is printed as "not measured", never as 0. The writing and checking subcommands are
 * cmd_profile.c's.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "graph.h"
#include "profile_data.h"
#include "store.h"
#include "util.h"

static void show_usage(FILE *f) {
    fprintf(f,
            "usage: placer profile show [--db FILE] [--config CFG] [--device N] [--summary] [--json]\n\n"
            "Prints a profile database, summary first: machine, devices (what the profile stores, \"not\n"
            "measured\" where it holds nothing, and the fastest node's FLOP/s from the profiled times),\n"
            "links (latency, bandwidth, curve points), the collective curves measured (placer profile\n"
            "--collectives N), totals per device; then the per-node cost table (forward and backward at\n"
            "each micro-batch size, optimizer, memory) and each collective curve (time, algorithm and\n"
            "bus bandwidth per size).\n\n"
            "  --db FILE     the profile database (default: $PLACER_DB or the shipped profile)\n"
            "  --config CFG  which graph to show when the file holds several (default: the latest)\n"
            "  --device N    device whose node costs are tabled (default 0; totals cover all)\n"
            "  --summary     the summary only: no node table, no collective curves\n"
            "  --json        machine-readable output with every device's costs\n");
}


/* ---- show ------------------------------------------------------------------ */

static void json_number(double v) {
    if (isfinite(v)) printf("%.6g", v);
    else printf("null");
}

static void show_json(const profile_coll_point *coll, int n_coll, const profile_db_machine_row *m,
                      const profile_data *p, const gpt_config *cfg,
                      const graph *g, profile_db *db) {
    printf("{\"machine\":{\"name\":");
    pl_json_string(stdout, m->name);
    printf(",\"source\":");
    pl_json_string(stdout, m->source);
    char prec[16] = "tf32";
    profile_db_precision(db, prec, sizeof prec);
    printf(",\"precision\":");
    pl_json_string(stdout, prec);
    printf(",\"created_at\":");
    pl_json_string(stdout, m->created_at);
    printf(",\"host\":");
    pl_json_string(stdout, m->host);
    printf(",\"driver\":");
    pl_json_string(stdout, m->driver);
    printf(",\"cuda\":");
    pl_json_string(stdout, m->cuda);
    printf(",\"topology\":");
    pl_json_string(stdout, m->topology);
    printf("},\"graph\":{\"key\":");
    pl_json_string(stdout, p->graph_key);
    printf(",\"vocab\":%d,\"d_model\":%d,\"heads\":%d,\"layers\":%d,\"seq\":%d,\"batch\":%d,\"params\":%lld},",
           cfg->vocab, cfg->d_model, cfg->n_heads, cfg->n_layers, cfg->seq_len, cfg->batch,
           (long long)g->total_params);
    printf("\"micro_batch_sizes\":[");
    for (int k = 0; k < p->n_mb; k++) printf("%s%d", k ? "," : "", p->mb_sizes[k]);
    printf("],\"devices\":[");
    for (int d = 0; d < p->n_devices; d++) {
        const profile_device *v = &p->devices[d];
        printf("%s{\"index\":%d,\"name\":", d ? "," : "", d);
        pl_json_string(stdout, v->name);
        printf(",\"mem_bytes\":%lld,\"peak_flops\":", (long long)v->mem_bytes);
        json_number(v->peak_flops);
        printf(",\"mem_bw\":");
        json_number(v->mem_bw);
        printf(",\"launch_us\":");
        json_number(v->launch_us);
        printf(",\"sm_count\":%d}", v->sm_count);
    }
    printf("],\"links\":[");
    int first = 1;
    for (int a = 0; a < p->n_devices; a++)
        for (int b = 0; b < p->n_devices; b++) {
            if (a == b) continue;
            const profile_link *l = &p->links[a * p->n_devices + b];
            char kind[64] = "";
            profile_db_link_kind(db, a, b, kind, sizeof kind);
            printf("%s{\"src\":%d,\"dst\":%d,\"kind\":", first ? "" : ",", a, b);
            pl_json_string(stdout, kind);
            printf(",\"latency_us\":");
            json_number(l->latency_us);
            printf(",\"bandwidth\":");
            json_number(l->bandwidth);
            printf(",\"points\":[");
            for (int j = 0; j < l->n_points; j++) {
                printf("%s[", j ? "," : "");
                json_number(l->bytes[j]);
                putchar(',');
                json_number(l->us[j]);
                putchar(']');
            }
            printf("]}");
            first = 0;
        }
    printf("],\"nodes\":[");
    for (int i = 0; i < p->n_nodes; i++) {
        const profile_node_mem *nm = &p->node_mem[i];
        printf("%s{\"index\":%d,\"name\":", i ? "," : "", i);
        pl_json_string(stdout, g->nodes[i].name);
        printf(",\"kind\":");
        pl_json_string(stdout, op_kind_name(g->nodes[i].kind));
        printf(",\"param_bytes\":%lld,\"act_bytes_per_sample\":%lld,\"out_bytes_per_sample\":%lld,"
               "\"workspace_bytes\":%lld,\"fwd_workspace_bytes\":%lld,\"bwd_workspace_bytes\":%lld",
               (long long)nm->param_bytes, (long long)nm->act_bytes_per_sample, (long long)nm->out_bytes_per_sample,
               (long long)nm->workspace_bytes, (long long)profile_node_call_workspace(nm, PHASE_FWD),
               (long long)profile_node_call_workspace(nm, PHASE_BWD));
        for (int ph = PHASE_FWD; ph <= PHASE_BWD; ph++) {
            printf(",\"%s_us\":[", ph == PHASE_FWD ? "fwd" : "bwd");
            for (int d = 0; d < p->n_devices; d++) {
                printf("%s[", d ? "," : "");
                for (int k = 0; k < p->n_mb; k++) {
                    if (k) putchar(',');
                    json_number(p->cost_us[profile_cost_index(p, d, k, i, ph)]);
                }
                putchar(']');
            }
            putchar(']');
        }
        printf(",\"opt_us\":[");
        for (int d = 0; d < p->n_devices; d++) {
            if (d) putchar(',');
            json_number(p->cost_us[profile_cost_index(p, d, 0, i, PHASE_OPT)]);
        }
        putchar(']');
        if (p->w_frac) { /* the backward's split, where the profile records B and W apart (schema 4) */
            const int measured = !isnan(p->w_frac[i]);
            printf(",\"w_frac\":");
            json_number(profile_w_frac(p, g, i));
            printf(",\"w_frac_measured\":%s", measured ? "true" : "false");
        }
        putchar('}');
    }
    printf("],\"totals\":[");
    for (int d = 0; d < p->n_devices; d++) {
        printf("%s{\"device\":%d", d ? "," : "", d);
        for (int ph = PHASE_FWD; ph <= PHASE_BWD; ph++) {
            printf(",\"%s_us\":[", ph == PHASE_FWD ? "fwd" : "bwd");
            for (int k = 0; k < p->n_mb; k++) {
                double sum = 0;
                for (int i = 0; i < p->n_nodes; i++) sum += p->cost_us[profile_cost_index(p, d, k, i, ph)];
                if (k) putchar(',');
                json_number(sum);
            }
            putchar(']');
        }
        double opt = 0;
        for (int i = 0; i < p->n_nodes; i++) opt += p->cost_us[profile_cost_index(p, d, 0, i, PHASE_OPT)];
        printf(",\"opt_us\":");
        json_number(opt);
        putchar('}');
    }
    printf("],\"collectives\":[");
    for (int i = 0; i < n_coll; i++) {
        const profile_coll_point *c = &coll[i];
        const double algbw = c->bytes / (c->us * 1e-6);
        printf("%s{\"op\":\"%s\",\"ranks\":%d,\"transport\":", i ? "," : "", profile_coll_op_name(c->op), c->ranks);
        pl_json_string(stdout, c->transport);
        printf(",\"bytes\":%.0f,\"us\":", c->bytes);
        json_number(c->us);
        printf(",\"spread_us\":");
        json_number(c->spread_us);
        printf(",\"reps\":%d,\"algbw\":", c->reps);
        json_number(algbw);
        printf(",\"busbw\":");
        json_number(algbw * profile_coll_busbw_factor(c->op, c->ranks));
        putchar('}');
    }
    printf("]}\n");
}

/* A buffer size exactly, in the largest binary unit that divides it. */
static void format_size_exact(double bytes, char *buf, size_t len) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    double v = bytes;
    while (u < 3 && v >= 1024.0 && fmod(v, 1024.0) == 0.0) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, len, "%.0f %s", v, unit[u]);
}

/* The collective curves, one table per (op, ranks, transport). */
static void show_collectives_text(const profile_coll_point *coll, int n_coll) {
    for (int i = 0; i < n_coll; i++) {
        const profile_coll_point *c = &coll[i];
        if (i == 0 || c->op != coll[i - 1].op || c->ranks != coll[i - 1].ranks ||
            strcmp(c->transport, coll[i - 1].transport) != 0)
            printf("\ncollective %s over %d ranks (%s; median of %d, slowest rank)\n  %10s %12s %10s %12s %12s\n",
                   profile_coll_op_name(c->op), c->ranks, c->transport, c->reps, "bytes", "time", "iqr", "algbw",
                   "busbw");
        char b[32], a[32], bb[32];
        const double algbw = c->bytes / (c->us * 1e-6);
        format_size_exact(c->bytes, b, sizeof b);
        pl_format_bytes(algbw, a, sizeof a);
        pl_format_bytes(algbw * profile_coll_busbw_factor(c->op, c->ranks), bb, sizeof bb);
        printf("  %10s %9.1f us %7.1f us %10s/s %10s/s\n", b, c->us, c->spread_us, a, bb);
    }
}

/* FLOP/s with a decimal prefix: "329 T", "6.21 G". */
static void format_flops(double v, char *buf, size_t len) {
    if (v >= 1e12) snprintf(buf, len, "%.3g T", v / 1e12);
    else if (v >= 1e9) snprintf(buf, len, "%.3g G", v / 1e9);
    else snprintf(buf, len, "%.3g M", v / 1e6);
}

/* Device d's fastest node, in FLOP/s: the graph's forward or backward FLOPs
 * over the profiled time, at the largest micro-batch size (where kernels run
 * fullest). Writes "-" when no node has FLOPs and a time. */
static void best_node_rate(const profile_data *p, const graph *g, int d, char *buf, size_t len) {
    const int k = p->n_mb - 1, mb = p->mb_sizes[k];
    double best = 0;
    int at = -1, at_ph = PHASE_FWD;
    for (int i = 0; i < p->n_nodes; i++)
        for (int ph = PHASE_FWD; ph <= PHASE_BWD; ph++) {
            const double flops = ph == PHASE_FWD ? g->nodes[i].fwd_flops_per_sample : g->nodes[i].bwd_flops_per_sample;
            const double us = p->cost_us[profile_cost_index(p, d, k, i, ph)];
            if (!(flops > 0) || !(us > 0)) continue;
            const double rate = flops * mb / (us * 1e-6);
            if (rate > best) {
                best = rate;
                at = i;
                at_ph = ph;
            }
        }
    char rate[32];
    if (at < 0) {
        snprintf(buf, len, "-");
        return;
    }
    format_flops(best, rate, sizeof rate);
    snprintf(buf, len, "%s (%s %s@%d)", rate, g->nodes[at].name, at_ph == PHASE_FWD ? "fwd" : "bwd", mb);
}

/* Machine, graph and micro-batch sizes. */
static void show_header(const char *path, const profile_db_machine_row *m, const profile_data *p,
                        const gpt_config *cfg, const graph *g, profile_db *db) {
    char b1[32];
    printf("profile %s\n", path);
    char prec[16] = "tf32";
    profile_db_precision(db, prec, sizeof prec);
    printf("machine   %s (%s), written %s, precision %s\n", m->name, m->source, m->created_at, prec);
    if (m->topology[0]) printf("topology  %s\n", m->topology);
    if (m->host[0] || m->driver[0] || m->cuda[0])
        printf("host      %s, driver %s, CUDA %s\n", m->host[0] ? m->host : "-", m->driver[0] ? m->driver : "-",
               m->cuda[0] ? m->cuda : "-");
    pl_format_bytes(4.0 * (double)g->total_params, b1, sizeof b1);
    printf("graph     %s: %d nodes, %lld parameters (%s fp32), batch %d x %d tokens\n", p->graph_key, p->n_nodes,
           (long long)g->total_params, b1, cfg->batch, cfg->seq_len);
    printf("micro-batch sizes:");
    for (int k = 0; k < p->n_mb; k++) printf(" %d", p->mb_sizes[k]);
    putchar('\n');
}

/* One line per device: the stored figures ("not measured" where the profile
 * holds 0: a measured profile times nodes and probes no peaks) and the best
 * rate its profiled nodes reached. */
static void show_devices(const profile_data *p, const graph *g) {
    char b1[32], b2[32], b3[32], b4[32], b5[96];
    printf("\ndevices (best node: the fastest node's FLOP/s, graph FLOPs over its profiled time)\n"
           "  %3s  %-20s %10s %13s %13s %13s %4s  %s\n",
           "idx", "name", "memory", "peak FLOP/s", "mem bw", "launch", "SMs", "best node");
    for (int d = 0; d < p->n_devices; d++) {
        const profile_device *v = &p->devices[d];
        pl_format_bytes((double)v->mem_bytes, b1, sizeof b1);
        if (v->peak_flops > 0 && isfinite(v->peak_flops)) format_flops(v->peak_flops, b2, sizeof b2);
        else snprintf(b2, sizeof b2, "not measured");
        if (v->mem_bw > 0 && isfinite(v->mem_bw)) {
            pl_format_bytes(v->mem_bw, b3, sizeof b3);
            strcat(b3, "/s");
        } else {
            snprintf(b3, sizeof b3, "not measured");
        }
        if (v->launch_us > 0 && isfinite(v->launch_us)) snprintf(b4, sizeof b4, "%.1f us", v->launch_us);
        else snprintf(b4, sizeof b4, "not measured");
        best_node_rate(p, g, d, b5, sizeof b5);
        printf("  %3d  %-20s %10s %13s %13s %13s %4d  %s\n", d, v->name, b1, b2, b3, b4, v->sm_count, b5);
    }
}

/* Each directed link: kind, fitted latency and bandwidth, and the stored
 * curve's time at three sizes. */
static void show_links(const profile_data *p, profile_db *db) {
    if (p->n_devices < 2) return;
    char b1[32];
    printf("\nlinks (transfer time from the stored curve)\n  %3s %3s  %-12s %10s %12s %6s %10s %10s %10s\n", "src",
           "dst", "kind", "latency", "bandwidth", "points", "4 KiB", "1 MiB", "100 MiB");
    for (int a = 0; a < p->n_devices; a++)
        for (int b = 0; b < p->n_devices; b++) {
            if (a == b) continue;
            const profile_link *l = &p->links[a * p->n_devices + b];
            char kind[64] = "";
            profile_db_link_kind(db, a, b, kind, sizeof kind);
            pl_format_bytes(l->bandwidth, b1, sizeof b1);
            printf("  %3d %3d  %-12s %7.1f us %10s/s %6d %7.1f us %7.1f us %7.1f us\n", a, b, kind[0] ? kind : "-",
                   l->latency_us, b1, l->n_points, profile_transfer_us(p, a, b, 4096.0),
                   profile_transfer_us(p, a, b, 1048576.0), profile_transfer_us(p, a, b, 104857600.0));
        }
}

/* One line per collective curve (op, ranks, transport): its sizes and the
 * best bus bandwidth; the full curves come last (show_collectives_text). */
static void show_collectives_summary(const profile_coll_point *coll, int n_coll) {
    if (n_coll == 0) {
        printf("\ncollectives: none measured (placer profile --cpu N --collectives R measures them)\n");
        return;
    }
    printf("\ncollectives (curves at the end)\n");
    for (int i = 0; i < n_coll;) {
        int j = i;
        double best = 0;
        for (; j < n_coll && coll[j].op == coll[i].op && coll[j].ranks == coll[i].ranks &&
               !strcmp(coll[j].transport, coll[i].transport);
             j++) {
            const double busbw = coll[j].bytes / (coll[j].us * 1e-6) * profile_coll_busbw_factor(coll[j].op, coll[j].ranks);
            if (busbw > best) best = busbw;
        }
        char lo[32], hi[32], bw[32];
        format_size_exact(coll[i].bytes, lo, sizeof lo);
        format_size_exact(coll[j - 1].bytes, hi, sizeof hi);
        pl_format_bytes(best, bw, sizeof bw);
        printf("  %-15s %2d ranks  %-8s %3d sizes, %s .. %s, best busbw %s/s\n", profile_coll_op_name(coll[i].op),
               coll[i].ranks, coll[i].transport, j - i, lo, hi, bw);
        i = j;
    }
}

/* Forward, backward and optimizer sums per device, and the 1-device step. */
static void show_totals(const profile_data *p, const gpt_config *cfg) {
    printf("\ntotals per device (us, sum over all nodes)\n  %3s", "dev");
    for (int k = 0; k < p->n_mb; k++) {
        char h1[16], h2[16];
        snprintf(h1, sizeof h1, "fwd@%d", p->mb_sizes[k]);
        snprintf(h2, sizeof h2, "bwd@%d", p->mb_sizes[k]);
        printf(" %10s %10s", h1, h2);
    }
    int kb = profile_mb_index(p, cfg->batch);
    printf(" %9s%s\n", "opt", kb >= 0 ? "   1-device step (m=1)" : "");
    for (int d = 0; d < p->n_devices; d++) {
        printf("  %3d", d);
        double opt = 0, step = 0;
        for (int i = 0; i < p->n_nodes; i++) opt += p->cost_us[profile_cost_index(p, d, 0, i, PHASE_OPT)];
        for (int k = 0; k < p->n_mb; k++) {
            double f = 0, b = 0;
            for (int i = 0; i < p->n_nodes; i++) {
                f += p->cost_us[profile_cost_index(p, d, k, i, PHASE_FWD)];
                b += p->cost_us[profile_cost_index(p, d, k, i, PHASE_BWD)];
            }
            if (k == kb) step = f + b + opt;
            printf(" %10.1f %10.1f", f, b);
        }
        printf(" %9.1f", opt);
        if (kb >= 0) printf("   %.1f us", step);
        putchar('\n');
    }
    int64_t params = 0;
    char b1[32], b2[32];
    for (int i = 0; i < p->n_nodes; i++) params += p->node_mem[i].param_bytes;
    pl_format_bytes((double)params, b1, sizeof b1);
    pl_format_bytes(4.0 * (double)params, b2, sizeof b2);
    printf("\nparameters: %s fp32; with gradients and AdamW m and v: %s\n", b1, b2);
}

/* The per-node cost table of device dev. */
static void show_nodes(const profile_data *p, const graph *g, int dev) {
    printf("\nnode costs on device %d (us; forward and backward per micro-batch size, optimizer once per step)\n",
           dev);
    if (p->w_frac)
        printf("  W/bwd: the weight gradient's share of the backward, B and W timed apart over every device and "
               "size (~: a node not timed apart, from its FLOPs)\n");
    printf("  %3s %-10s %-10s", "idx", "name", "kind");
    for (int k = 0; k < p->n_mb; k++) {
        char h1[16], h2[16];
        snprintf(h1, sizeof h1, "fwd@%d", p->mb_sizes[k]);
        snprintf(h2, sizeof h2, "bwd@%d", p->mb_sizes[k]);
        printf(" %9s %9s", h1, h2);
    }
    printf(" %8s %10s %10s %10s %10s %10s", "opt", "params", "act/smp", "out/smp", "ws fwd", "ws bwd");
    if (p->w_frac) printf(" %8s", "W/bwd"); /* the recorded split: W's share of the backward */
    putchar('\n');
    for (int i = 0; i < p->n_nodes; i++) {
        const profile_node_mem *nm = &p->node_mem[i];
        printf("  %3d %-10s %-10s", i, g->nodes[i].name, op_kind_name(g->nodes[i].kind));
        for (int k = 0; k < p->n_mb; k++)
            printf(" %9.1f %9.1f", p->cost_us[profile_cost_index(p, dev, k, i, PHASE_FWD)],
                   p->cost_us[profile_cost_index(p, dev, k, i, PHASE_BWD)]);
        char m1[32], m2[32], m3[32], m4[32], m5[32];
        pl_format_bytes((double)nm->param_bytes, m1, sizeof m1);
        pl_format_bytes((double)nm->act_bytes_per_sample, m2, sizeof m2);
        pl_format_bytes((double)nm->out_bytes_per_sample, m3, sizeof m3);
        pl_format_bytes((double)profile_node_call_workspace(nm, PHASE_FWD), m4, sizeof m4);
        pl_format_bytes((double)profile_node_call_workspace(nm, PHASE_BWD), m5, sizeof m5);
        printf(" %8.1f %10s %10s %10s %10s %10s", p->cost_us[profile_cost_index(p, dev, 0, i, PHASE_OPT)], m1, m2,
               m3, m4, m5);
        if (p->w_frac) {
            /* measured: B and W timed apart; '~': derived from FLOPs (profile_w_frac) */
            const int measured = !isnan(p->w_frac[i]);
            printf(" %6.1f%%%s", 100.0 * profile_w_frac(p, g, i), measured ? " " : "~");
        }
        putchar('\n');
    }
}

/* The text form, summary first so that its head reads whole: machine,
 * devices, links, collectives, totals; then (unless summary) the node table
 * and the collective curves. */
static void show_text(const char *path, const profile_db_machine_row *m, const profile_data *p,
                      const gpt_config *cfg, const graph *g, profile_db *db, int dev,
                      const profile_coll_point *coll, int n_coll, int summary) {
    show_header(path, m, p, cfg, g, db);
    show_devices(p, g);
    show_links(p, db);
    show_collectives_summary(coll, n_coll);
    show_totals(p, cfg);
    if (summary) return;
    show_nodes(p, g, dev);
    if (n_coll > 0) show_collectives_text(coll, n_coll);
}

int cmd_profile_show(int argc, char **argv) {
    const char *db_path = NULL, *config = NULL;
    int json = 0, dev = 0, summary = 0;
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"config", required_argument, 0, 'c'},
                                         {"device", required_argument, 0, 'D'},
                                         {"json", no_argument, 0, 'j'},
                                         {"summary", no_argument, 0, 's'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "d:c:D:jsh", opts, NULL)) != -1) {
        switch (c) {
        case 'd': db_path = optarg; break;
        case 'c': config = optarg; break;
        case 'D': {
            char *end = NULL;
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 0 || v > 1000)
                return cli_usage_error("profile show", "--device '%s' is not a device index", optarg);
            dev = (int)v;
            break;
        }
        case 'j': json = 1; break;
        case 's': summary = 1; break;
        case 'h': show_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("profile show", "unknown or incomplete option '%s'; see placer profile show --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("profile show", "unexpected argument '%s'; see placer profile show --help",
                               argv[optind]);
    if (summary && json)
        return cli_usage_error("profile show", "--summary shortens the text; --json always prints every part, pass one");
    if (!db_path) db_path = cli_default_db();
    if (!db_path)
        return cli_usage_error("profile show", "no profile database found; give --db FILE or set PLACER_DB");

    char msg[1024] = "";
    gpt_config cfg, stored;
    if (config) {
        pl_status st = gpt_config_parse(config, &cfg, msg, sizeof msg);
        if (st != PL_OK) return cli_report("profile show", st, msg);
    }
    profile_db *db = NULL;
    profile_data *p = NULL;
    graph *g = NULL;
    profile_coll_point *coll = NULL;
    int n_coll = 0;
    int code = CLI_EXIT_OK;
    pl_status st = profile_db_open(db_path, PROFILE_DB_READ, &db, msg, sizeof msg);
    if (st != PL_OK) return cli_report("profile show", st, msg);
    if ((st = profile_db_load_profile(db, config ? &cfg : NULL, &p, &stored, msg, sizeof msg)) != PL_OK) {
        code = cli_report("profile show", st, msg);
        goto out;
    }
    profile_db_machine_row m;
    if ((st = profile_db_machine(db, &m)) != PL_OK) {
        code = cli_report("profile show", st, profile_db_last_error(db));
        goto out;
    }
    if ((st = graph_build_gpt(&stored, &g, msg, sizeof msg)) != PL_OK) {
        code = cli_report("profile show", st, msg);
        goto out;
    }
    if (g->n_nodes != p->n_nodes) {
        code = cli_report("profile show", PL_ERR_INVALID, "the stored graph does not match its config");
        goto out;
    }
    if (dev >= p->n_devices) {
        code = cli_usage_error("profile show", "--device %d: the profile has devices 0..%d", dev, p->n_devices - 1);
        goto out;
    }
    if ((st = profile_db_collective_points(db, &coll, &n_coll)) != PL_OK) {
        code = cli_report("profile show", st, profile_db_last_error(db));
        goto out;
    }
    if (json) {
        show_json(coll, n_coll, &m, p, &stored, g, db);
    } else {
        show_text(db_path, &m, p, &stored, g, db, dev, coll, n_coll, summary);
    }
out:
    free(coll);
    graph_destroy(g);
    profile_data_destroy(p);
    profile_db_close(db);
    return code;
}
