/*
 * cmd_layout.c: `placer layout` simulates one training step of one parallel
 * layout of one model on one cluster (sim/layout_sim.h): step time,
 * tokens/s, TFLOP/s per GPU (model FLOPs or with recomputation), MFU, the
 * time breakdown of the critical pipeline stage, memory per GPU with its
 * parts and the OOM verdict; --explain adds the collectives' algorithms and
 * figures, --trace a Chrome trace of one pipeline replica, --json all of it
 * for scripts.
 *
 * Everything the user typed is checked before the simulator runs: an
 * unknown or malformed model or cluster, a layout that does not parse or
 * cannot run on the model and cluster (layout_validate's reasons), a bad
 * --gpus, --seq or --flops: one line on stderr, exit 2.
 *
 * --collectives-from F takes the collective times of groups inside one
 * node from a machine's measurements (sim/coll_measured.h): F is a
 * collectives file (calib/coll_file.h, from placer calibrate --collectives
 * --write) or a profile database with collective curves, fitted on the spot
 * (calib/coll_fit.h); --measured-curves interpolates the measured curves
 * themselves where a group's size matches one.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "coll_file.h"
#include "coll_fit.h"
#include "cluster.h"
#include "cluster_file.h"
#include "graph.h"
#include "layout.h"
#include "layout_sim.h"
#include "model_config.h"
#include "util.h"

#define CMD "layout"

static void layout_usage(FILE *f) {
    fprintf(f,
            "usage: placer layout --model FILE|PRESET --cluster NAME|FILE --layout TEXT [options]\n\n"
            "Simulates one training step of a parallel layout (tensor x context x data x\n"
            "pipeline parallelism, interleaving, recomputation, optimizer sharding) of a model\n"
            "on a cluster: step time, tokens/s, TFLOP/s per GPU, MFU, the time breakdown,\n"
            "memory per GPU and the OOM verdict. docs/layouts.md describes the model.\n\n"
            "  --model M       a Hugging Face config.json (or any .json path), or a preset:\n"
            "                  default, gpt12, gpt12,layers=24, ...\n"
            "  --cluster C     a cluster name (data/clusters/C.json, or $PLACER_CLUSTERS) or a file\n"
            "  --layout TEXT   e.g. tp=8,sp=1,pp=16,vp=4,dp=128,zero=1,mbs=1,gbs=2048,\n"
            "                  recompute=none,precision=bf16 (keys: tp sp cp pp vp dp zero mbs gbs\n"
            "                  recompute precision stages)\n"
            "  --gpus N        use N GPUs of the cluster (whole nodes); without dp= in the\n"
            "                  layout, dp = N / (tp cp pp)\n"
            "  --seq S         sequence length (default: the model's)\n"
            "  --flops F       model (default: no recomputation, PaLM's MFU sense) or hardware\n"
            "                  (with recomputation) for the TFLOP/s headline\n"
            "  --collectives-from F  collective times of groups inside one node from measurements:\n"
            "                  F a collectives file (placer calibrate --collectives --write F) or a\n"
            "                  profile database with collective curves (fitted here); groups that\n"
            "                  span nodes keep the cluster's model\n"
            "  --measured-curves  with --collectives-from: a group whose size matches a measured\n"
            "                  curve takes its time from the curve (log-log between measured sizes,\n"
            "                  the fitted model beyond them); else the fitted model\n"
            "  --explain       print each collective's algorithm, bytes, algbw, busbw and link, and\n"
            "                  whether its time came from the cluster model, the fitted model or a\n"
            "                  measured curve\n"
            "  --trace FILE    write a Chrome trace of one pipeline replica (Perfetto)\n"
            "  --json          print the result as JSON\n\n"
            "Exit status: 0 ok (an OOM verdict is a result), 1 runtime failure, 2 bad input.\n");
}

static int parse_pos_int(const char *text, long max, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*text || *end || errno || v < 1 || v > max) return 0;
    *out = v;
    return 1;
}

/* Resize a cluster to n GPUs (whole nodes, taken group by group). */
static int cluster_take(cluster *c, int64_t n, char *msg, size_t len) {
    const int64_t total = cluster_n_gpus(c);
    if (n > total) {
        snprintf(msg, len, "--gpus %lld is more than cluster %s has (%lld)", (long long)n, c->name, (long long)total);
        return 0;
    }
    if (n % c->gpus_per_node != 0 && n > c->gpus_per_node) {
        snprintf(msg, len, "--gpus %lld is not a whole number of %d-GPU nodes", (long long)n, c->gpus_per_node);
        return 0;
    }
    int64_t nodes = (n + c->gpus_per_node - 1) / c->gpus_per_node;
    int g = 0;
    for (; g < c->n_groups && nodes > 0; g++) {
        if (c->groups[g].n_nodes > nodes) c->groups[g].n_nodes = (int)nodes;
        nodes -= c->groups[g].n_nodes;
    }
    c->n_groups = g > 0 ? g : 1;
    return 1;
}

/* Where a send between GPUs a and b goes: NVLink / the node's fabric, the
 * NIC inside a pod, or across pods. */
static const char *link_of(const cluster *c, int64_t a, int64_t b) {
    if (a == b) return "none";
    if (a / c->gpus_per_node == b / c->gpus_per_node) return "intra-node";
    if (c->pod_gpus > 0 && a / c->pod_gpus != b / c->pod_gpus) return "inter-pod";
    return "inter-node";
}

typedef struct {
    const char *what;      /* e.g. "tp all-reduce (per layer, x2 forward, x2 backward)" */
    const coll_estimate *e;
} explained;

static void print_coll_json(FILE *f, const char *key, const coll_estimate *e, int last) {
    fprintf(f, "    \"%s\": {\"algo\": ", key);
    pl_json_string(f, e->algo ? e->algo : "none");
    fprintf(f, ", \"source\": ");
    pl_json_string(f, e->source ? e->source : "model");
    fprintf(f,
            ", \"time_us\": %.3f, \"bytes\": %.0f, \"n_ranks\": %d, \"n_nodes\": %d, \"n_pods\": %d, "
            "\"algbw_gbs\": %.3f, \"busbw_gbs\": %.3f, \"link_bw_gbs\": %.3f, \"latency_us\": %.3f}%s\n",
            e->time_us, e->algbw * e->time_us * 1e-6, e->n_ranks, e->n_nodes, e->n_pods, e->algbw / 1e9,
            e->busbw / 1e9, e->link_bw / 1e9, e->latency_us, last ? "" : ",");
}

/* --collectives-from: a profile database (by its SQLite header) is fitted
 * here, anything else is read as a collectives file. */
static pl_status load_collectives(const char *path, coll_measured *m, char *msg, size_t len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return pl_fail(msg, len, errno == ENOENT ? PL_ERR_NOT_FOUND : PL_ERR_IO, "cannot read collectives '%s': %s",
                       path, strerror(errno));
    char head[16] = {0};
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    if (got < sizeof head || memcmp(head, "SQLite format 3", sizeof head) != 0) return coll_file_load(path, m, msg, len);
    profile_db *db = NULL;
    char m2[400] = "";
    pl_status st = profile_db_open(path, PROFILE_DB_READ, &db, m2, sizeof m2);
    if (st == PL_OK) {
        calib_coll_fit_result r;
        st = calib_coll_fit_db(db, NULL, m, &r, m2, sizeof m2);
        if (st == PL_OK) calib_coll_fit_free(&r);
    }
    profile_db_close(db);
    if (st != PL_OK) return pl_fail(msg, len, st, "collectives from %s: %s", path, m2);
    return PL_OK;
}

int cmd_layout(int argc, char **argv) {
    const char *model_text = NULL, *cluster_text = NULL, *layout_text = NULL, *gpus_text = NULL;
    const char *seq_text = NULL, *flops_text = "model", *trace_path = NULL;
    const char *coll_path = NULL;
    int json = 0, explain = 0, curves = 0;
    static const struct option opts[] = {
        {"collectives-from", required_argument, 0, 'C'}, {"measured-curves", no_argument, 0, 'M'},
        {"model", required_argument, 0, 'm'},   {"cluster", required_argument, 0, 'c'},
        {"layout", required_argument, 0, 'l'},  {"gpus", required_argument, 0, 'g'},
        {"seq", required_argument, 0, 's'},     {"flops", required_argument, 0, 'f'},
        {"trace", required_argument, 0, 't'},   {"explain", no_argument, 0, 'e'},
        {"json", no_argument, 0, 'j'},          {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "m:c:l:g:s:f:t:ejhC:M", opts, NULL)) != -1) {
        switch (ch) {
        case 'm': model_text = optarg; break;
        case 'c': cluster_text = optarg; break;
        case 'l': layout_text = optarg; break;
        case 'g': gpus_text = optarg; break;
        case 's': seq_text = optarg; break;
        case 'f': flops_text = optarg; break;
        case 't': trace_path = optarg; break;
        case 'e': explain = 1; break;
        case 'C': coll_path = optarg; break;
        case 'M': curves = 1; break;
        case 'j': json = 1; break;
        case 'h': layout_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error(CMD, "unknown or incomplete option '%s'; see placer layout --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'; see placer layout --help", argv[optind]);
    if (!model_text) return cli_usage_error(CMD, "no model: pass --model FILE or a preset (default, gpt12, ...)");
    if (!cluster_text) return cli_usage_error(CMD, "no cluster: pass --cluster NAME or FILE");
    if (!layout_text) return cli_usage_error(CMD, "no layout: pass --layout tp=..,pp=..,dp=..,mbs=..,gbs=..");
    if (curves && !coll_path)
        return cli_usage_error(CMD, "--measured-curves needs --collectives-from FILE (the curves to read)");
    int hw_flops = 0;
    if (!strcmp(flops_text, "hardware")) hw_flops = 1;
    else if (strcmp(flops_text, "model") != 0)
        return cli_usage_error(CMD, "unknown --flops '%s' (use model or hardware)", flops_text);
    long gpus = 0, seq = 0;
    if (gpus_text && !parse_pos_int(gpus_text, 100000000L, &gpus))
        return cli_usage_error(CMD, "--gpus '%s' is not a positive integer", gpus_text);
    if (seq_text && !parse_pos_int(seq_text, 1L << 24, &seq))
        return cli_usage_error(CMD, "--seq '%s' is not a positive integer", seq_text);

    char msg[512] = "";
    gpt_config cfg;
    char model_name[64] = "";
    pl_status st = model_config_load(model_text, &cfg, model_name, sizeof model_name, msg, sizeof msg);
    if (st != PL_OK) return cli_usage_error(CMD, "model '%s': %s", model_text, msg[0] ? msg : pl_status_str(st));
    if (seq > 0) cfg.seq_len = (int)seq;
    if (!model_name[0]) snprintf(model_name, sizeof model_name, "%s", model_text);
    cluster clu;
    st = cluster_load(cluster_text, NULL, &clu, msg, sizeof msg);
    if (st != PL_OK) return cli_usage_error(CMD, "cluster '%s': %s", cluster_text, msg[0] ? msg : pl_status_str(st));
    if (gpus > 0 && !cluster_take(&clu, gpus, msg, sizeof msg)) return cli_usage_error(CMD, "%s", msg);
    layout lay;
    st = layout_parse(layout_text, &lay, msg, sizeof msg);
    if (st != PL_OK) return cli_usage_error(CMD, "layout: %s", msg);
    if (gpus > 0) {
        const int64_t model_par = (int64_t)lay.tp * lay.cp * lay.pp;
        if (!strstr(layout_text, "dp=")) {
            if (gpus % model_par != 0)
                return cli_usage_error(CMD, "--gpus %ld is not a multiple of tp*cp*pp = %lld", gpus,
                                       (long long)model_par);
            lay.dp = (int)(gpus / model_par);
        } else if (layout_world_size(&lay) != gpus) {
            return cli_usage_error(CMD, "the layout uses %lld GPUs, --gpus says %ld",
                                   (long long)layout_world_size(&lay), gpus);
        }
    }

    int rc = CLI_EXIT_FAIL;
    layout_sim *sim = NULL;
    FILE *tf = NULL;
    coll_measured *meas = NULL;
    if (coll_path) {
        meas = calloc(1, sizeof *meas);
        if (!meas) return cli_report(CMD, PL_ERR_NOMEM, "out of memory");
        if ((st = load_collectives(coll_path, meas, msg, sizeof msg)) != PL_OK) {
            rc = cli_report(CMD, st == PL_ERR_IO ? st : PL_ERR_INVALID, msg);
            goto out;
        }
        meas->use_curves = curves;
    }
    st = layout_sim_create_measured(&cfg, &lay, &clu, meas, &sim, msg, sizeof msg);
    if (st != PL_OK) {
        rc = st == PL_ERR_INVALID ? cli_usage_error(CMD, "layout: %s", msg) : cli_report(CMD, st, msg);
        goto out;
    }
    layout_result r;
    st = layout_sim_run(sim, NULL, trace_path != NULL, &r, msg, sizeof msg);
    if (st != PL_OK) {
        rc = cli_report(CMD, st, msg);
        goto out;
    }
    if (trace_path) {
        tf = fopen(trace_path, "w");
        if (!tf) {
            rc = cli_usage_error(CMD, "cannot write trace '%s': %s", trace_path, strerror(errno));
            goto out;
        }
        st = layout_sim_write_chrome_trace(sim, tf);
        if (fclose(tf) != 0 && st == PL_OK) st = PL_ERR_IO;
        tf = NULL;
        if (st != PL_OK) {
            rc = cli_report(CMD, st, "writing the trace failed");
            goto out;
        }
    }

    char ltext[LAYOUT_MAX_CHUNKS * 5 + 256];
    layout_format(&lay, ltext, sizeof ltext);
    const cluster_gpu *gpu = cluster_gpu_of(&clu, 0);
    const double peak = gpu->peak_flops[lay.prec];
    const double tflops = hw_flops ? r.hw_tflops_per_gpu : r.model_tflops_per_gpu;
    const double mfu_hw = peak > 0 ? r.hw_tflops_per_gpu * 1e12 / peak : 0.0;
    layout_coords c0, c1;
    memset(&c0, 0, sizeof c0);
    memset(&c1, 0, sizeof c1);
    c1.c[LAYOUT_DIM_PP] = lay.pp > 1 ? 1 : 0;
    const int64_t r0 = layout_rank_of(&lay, &c0), r1 = layout_rank_of(&lay, &c1);
    const char *pp_link = link_of(&clu, r0, r1);
    if (json) {
        printf("{\n  \"model\": ");
        pl_json_string(stdout, model_name);
        printf(",\n  \"cluster\": ");
        pl_json_string(stdout, clu.name);
        printf(",\n  \"layout\": ");
        pl_json_string(stdout, ltext);
        printf(",\n  \"gpus\": %lld,\n  \"micro_batches\": %d,\n  \"seq_len\": %d,\n", (long long)r.world,
               r.micro_batches, cfg.seq_len);
        printf("  \"step_us\": %.3f,\n  \"tokens_per_s\": %.3f,\n", r.step_us, r.tokens_per_s);
        printf("  \"model_flops\": %.6e,\n  \"hw_flops\": %.6e,\n", r.model_flops, r.hw_flops);
        printf("  \"model_tflops_per_gpu\": %.4f,\n  \"hw_tflops_per_gpu\": %.4f,\n", r.model_tflops_per_gpu,
               r.hw_tflops_per_gpu);
        printf("  \"flops\": \"%s\",\n  \"tflops_per_gpu\": %.4f,\n", hw_flops ? "hardware" : "model", tflops);
        printf("  \"peak_tflops\": %.3f,\n  \"mfu\": %.6f,\n  \"hfu\": %.6f,\n", peak / 1e12, r.mfu, mfu_hw);
        printf("  \"critical_stage\": %d,\n  \"breakdown_us\": {", r.critical_stage);
        for (int i = 0; i < LAYOUT_T_COUNT; i++)
            printf("%s\"%s\": %.3f", i ? ", " : "", layout_time_part_name((layout_time_part)i), r.parts_us[i]);
        printf("},\n  \"memory\": {\"worst_stage\": %d, \"total\": %lld, \"params\": %lld, \"grads\": %lld, "
               "\"optimizer\": %lld, \"activations\": %lld, \"act_per_layer\": %lld, \"buffers\": %lld, "
               "\"embedding_head\": %lld, \"cap\": %lld, \"stash_layers\": %d, \"oom\": %s,\n    \"per_stage\": [",
               r.worst_stage, (long long)r.mem.total, (long long)r.mem.params, (long long)r.mem.grads,
               (long long)r.mem.optimizer, (long long)r.mem.activations, (long long)r.mem.act_per_layer,
               (long long)r.mem.buffers, (long long)r.mem.embedding_head, (long long)r.mem_cap, r.stash_layers,
               r.oom ? "true" : "false");
        for (int s = 0; s < lay.pp; s++) printf("%s%lld", s ? ", " : "", (long long)r.stage_mem[s]);
        printf("]},\n  \"collectives\": {\n");
        print_coll_json(stdout, "tp_allreduce", &r.tp_allreduce, 0);
        print_coll_json(stdout, "tp_allgather", &r.tp_allgather, 0);
        print_coll_json(stdout, "tp_reduce_scatter", &r.tp_reduce_scatter, 0);
        print_coll_json(stdout, "cp_allgather", &r.cp_allgather, 0);
        print_coll_json(stdout, "dp_reduce", &r.dp_reduce, 0);
        print_coll_json(stdout, "dp_allgather", &r.dp_allgather, 1);
        printf("  },\n  \"pp_send\": {\"time_us\": %.3f, \"bytes\": %.0f, \"link\": \"%s\"},\n", r.pp_send_us,
               r.pp_send_bytes, pp_link);
        int n_model, n_fitted, n_measured;
        layout_sim_coll_sources(sim, &n_model, &n_fitted, &n_measured);
        printf("  \"collective_sources\": {\"model\": %d, \"fitted\": %d, \"measured\": %d, \"from\": ", n_model,
               n_fitted, n_measured);
        if (meas) pl_json_string(stdout, meas->source);
        else printf("null");
        printf("},\n  \"dp_buckets\": %d\n}\n", r.dp_buckets);
        rc = CLI_EXIT_OK;
        goto out;
    }

    const double step_ms = r.step_us / 1e3;
    printf("%s on %s, %lld GPUs: %s\n", model_name, clu.name, (long long)r.world, ltext);
    printf("  step          %12.3f ms   (%d micro-batches per pipeline, seq %d)\n", step_ms, r.micro_batches,
           cfg.seq_len);
    printf("  tokens/s      %12.0f\n", r.tokens_per_s);
    printf("  TFLOP/s/GPU   %12.1f      (%s FLOPs; model %.1f, with recomputation %.1f)\n", tflops,
           hw_flops ? "hardware" : "model", r.model_tflops_per_gpu, r.hw_tflops_per_gpu);
    printf("  MFU           %11.1f%%      of %.0f TFLOP/s %s dense (with recomputation %.1f%%)\n", 100 * r.mfu,
           peak / 1e12, precision_name(lay.prec), 100 * mfu_hw);
    printf("\ntime of the critical stage (%d of %d):\n", r.critical_stage, lay.pp);
    static const layout_time_part order[] = {LAYOUT_T_COMPUTE, LAYOUT_T_TP, LAYOUT_T_CP, LAYOUT_T_DP,
                                             LAYOUT_T_PP,      LAYOUT_T_BUBBLE, LAYOUT_T_OPTIMIZER};
    static const char *const label[] = {"compute", "tp exposed", "cp exposed", "dp exposed",
                                        "pp exposed", "bubble", "optimizer"};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const double v = r.parts_us[order[i]];
        printf("  %-12s %12.3f ms  %5.1f%%", label[i], v / 1e3, r.step_us > 0 ? 100 * v / r.step_us : 0.0);
        if (order[i] == LAYOUT_T_COMPUTE && r.parts_us[LAYOUT_T_RECOMPUTE] > 0)
            printf("   (of which recomputation %.3f ms)", r.parts_us[LAYOUT_T_RECOMPUTE] / 1e3);
        printf("\n");
    }
    const double GiB = 1024.0 * 1024.0 * 1024.0; /* GiB: an "80 GB" GPU has 80 GiB */
    printf("\nmemory per GPU (stage %d, the largest): %.2f GiB of %.2f GiB: %s\n", r.worst_stage, r.mem.total / GiB,
           r.mem_cap / GiB, r.oom ? "OOM" : "fits");
    printf("  parameters   %9.2f GiB\n  gradients    %9.2f GiB\n  optimizer    %9.2f GiB\n", r.mem.params / GiB,
           r.mem.grads / GiB, r.mem.optimizer / GiB);
    printf("  activations  %9.2f GiB   (peak stash: %d layers' activations of in-flight micro-batches; %.3f GiB a layer)\n",
           r.mem.activations / GiB, r.stash_layers, r.mem.act_per_layer / GiB);
    printf("  emb./head    %9.2f GiB\n  buffers      %9.2f GiB\n", r.mem.embedding_head / GiB, r.mem.buffers / GiB);
    if (explain) {
        printf("\ncollectives (nccl-tests figures: algbw = bytes / time; busbw by the collective's factor):\n");
        const explained ex[] = {
            {lay.sp && lay.tp > 1 ? "tp all-gather (sp: x2 per layer fwd, x2 bwd)" : "tp all-gather (pipeline message, no sp)",
             &r.tp_allgather},
            {"tp reduce-scatter (sp: x2 per layer fwd, x2 bwd)", &r.tp_reduce_scatter},
            {"tp all-reduce (no sp: x2 per layer fwd, x2 bwd)", &r.tp_allreduce},
            {"cp key/value all-gather (per layer fwd)", &r.cp_allgather},
            {lay.zero == ZERO_NONE ? "dp all-reduce (one stage's gradients, as one)"
                                   : "dp reduce-scatter (one stage's gradients, as one)",
             &r.dp_reduce},
            {"dp parameter all-gather (one stage)", &r.dp_allgather},
        };
        for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
            const coll_estimate *e = ex[i].e;
            if (e->n_ranks <= 1 || !e->algo || !strcmp(e->algo, "none")) continue;
            if (i == 0 && !(lay.sp && lay.tp > 1) && lay.pp == 1) continue;
            if (i == 1 && !(lay.sp && lay.tp > 1)) continue;
            if (i == 2 && lay.sp && lay.tp > 1) continue;
            if (i == 5 && lay.zero == ZERO_NONE) continue;
            const char *src = e->source ? e->source : "model";
            printf("  %s\n    %s over %d ranks (%d nodes, %d pods): %.1f MB in %.3f ms; algbw %.1f GB/s, busbw %.1f "
                   "GB/s, %s %.1f GB/s, latency %.1f us; from %s\n",
                   ex[i].what, e->algo, e->n_ranks, e->n_nodes, e->n_pods, e->algbw * e->time_us * 1e-6 / 1e6,
                   e->time_us / 1e3, e->algbw / 1e9, e->busbw / 1e9,
                   strcmp(src, "model") ? "fitted busbw" : "slowest link", e->link_bw / 1e9, e->latency_us,
                   !strcmp(src, "measured") ? "a measured curve"
                   : !strcmp(src, "fitted") ? "the model fitted to measured curves"
                                            : "the cluster model");
        }
        if (lay.pp > 1)
            printf("  pipeline send stage 0 -> 1 (GPU %lld -> %lld, %s): %.1f MB in %.3f ms\n", (long long)r0,
                   (long long)r1, pp_link, r.pp_send_bytes / 1e6, r.pp_send_us / 1e3);
        if (lay.dp > 1) printf("  gradient buckets on the critical stage: %d per step\n", r.dp_buckets);
        int n_model, n_fitted, n_measured;
        layout_sim_coll_sources(sim, &n_model, &n_fitted, &n_measured);
        printf("  collective times computed: %d from measured curves, %d from the fitted model, %d from the cluster "
               "model%s\n",
               n_measured, n_fitted, n_model, meas ? "" : " (no --collectives-from)");
        if (meas) printf("  measurements: %s\n", meas->source);
    }
    rc = CLI_EXIT_OK;
out:
    if (tf) fclose(tf);
    layout_sim_destroy(sim);
    free(meas);
    return rc;
}
