/*
 * cmd_step.c: `placer step` runs and times real training steps of a
 * placement on the engine: GPUs (--devices) or the CPU reference backend
 * (--cpu N virtual devices). It prints the step time (median and spread of
 * the timed steps after warm-up), the loss, and each device's peak memory.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "dist_dp.h"
#include "dist_group.h"
#include "dist_tp.h"
#include "dist_mpi.h"
#include "graph.h"
#include "hw.h"
#include "launcher.h"
#include "placement.h"
#include "placer_config.h"
#include "schedule.h"
#include "step_layout.h"
#include "util.h"

static void step_usage(FILE *f) {
    fprintf(f,
            "usage: placer step [--placement P] [--config NAME] [--micro-batches M] [--schedule gpipe|1f1b]\n"
            "                   [--mem-cap CAP] [--devices 0,1,... | --cpu N] [--warmup W] [--steps K]\n"
            "                   [--precision fp32|tf32|bf16] [--strict-fp32] [--graphs] [--seed S] [--lr LR]\n"
            "                   [--issue auto|single|threads] [--trace FILE] [--procs N [--tp T [--sp]] [--timeout S]\n"
            "                   [--gpu-per-rank]]\n"
            "                   [--zero 0|1] [--bucket-mb MB] [--layout TEXT] [--json]\n\n"
            "Runs W warm-up and K timed training steps of the GPT under a placement and prints the\n"
            "median step time (device events, host sync per step), the loss and each device's peak memory.\n\n"
            "  --placement     one logical device per graph node, \"0,0,1,...\" (default: all on device 0)\n"
            "  --config        default (49M GPT), gpt12 or tiny, with overrides (see placer graph --help)\n"
            "  --micro-batches micro-batches per step, dividing the batch (default 1)\n"
            "  --schedule      gpipe or 1f1b (default 1f1b)\n"
            "  --mem-cap       per-device cap: bytes (\"40GB\", \"512MiB\") or a fraction of the card (\"50%%\",\n"
            "                  \"0.5\"); one value for all devices or one per device, comma-separated\n"
            "  --devices       GPU ordinal of each logical device; repeats share a GPU (default 0)\n"
            "  --cpu N         N virtual devices on the CPU reference backend instead of GPUs\n"
            "  --warmup        untimed steps first (default 2)\n"
            "  --steps         timed steps (default 5)\n"
            "  --precision     fp32, tf32 (the CUDA default) or bf16: mixed precision with fp32 master\n"
            "                  weights and optimizer state, bf16 GEMMs and activations (hw/hw.h); the CPU\n"
            "                  backend emulates bf16 and computes tf32 as fp32\n"
            "  --strict-fp32   the same as --precision fp32\n"
            "  --graphs        from the second step on, replay each GPU's step as a captured CUDA graph\n"
            "  --seed          parameter and batch seed (default 1)\n"
            "  --lr            AdamW learning rate (default 3e-4)\n"
            "  --issue         host issue: one thread per GPU (auto, threads) or one thread (single)\n"
            "  --trace FILE    after timing, run one more step with per-operation timestamps and write\n"
            "                  it as Chrome trace JSON\n"
            "  --procs N       data parallelism over N processes on this host (each rank has --cpu devices,\n"
            "                  default 1, or with --devices the CUDA backend on those GPUs, and runs the\n"
            "                  placement on its 1/N of the batch; gradients are averaged over the ranks\n"
            "                  before AdamW). The loss printed is the ranks' mean, a step's time the slowest\n"
            "                  rank's. N must divide the batch. On CUDA every rank uses the --devices GPUs\n"
            "                  (ranks sharing a GPU: logical devices of one H200, collectives staged through\n"
            "                  host memory) unless --gpu-per-rank; ranks on distinct GPUs talk over NCCL\n"
            "  --gpu-per-rank  with --procs and --devices: rank r (under mpirun, its rank on its host) runs\n"
            "                  on the --devices ordinals plus r x (devices a rank): one process per GPU\n"
            "  --tp T          with --procs N: tensor parallelism over T of the N ranks (hw/dist_tp.h): the\n"
            "                  attention heads, MLP columns and vocabulary rows split over each group of T,\n"
            "                  with N / T data-parallel replicas of it (core/layout.h's rank grid, tp\n"
            "                  innermost); T divides N, the heads and 4 x d_model (the vocabulary is cut\n"
            "                  in slices of ceil(V / T) rows); any --precision. --tp T alone means --procs T\n"
            "  --sp            with --tp: sequence parallelism (activations between blocks split by token)\n"
            "  --zero Z        with --procs or mpirun: 1 shards AdamW's m and v over the data-parallel ranks\n"
            "                  (ZeRO-1: gradients reduce-scattered, each rank updates its shard, parameters\n"
            "                  all-gathered; bf16: the weight copy remade from them); 0 (default) all-reduces\n"
            "                  the gradients\n"
            "  --bucket-mb MB  with --zero 0: all-reduce the gradients in buckets of MB MiB (default 25,\n"
            "                  PyTorch DDP's); each started as backward finishes its nodes and waited for\n"
            "                  at AdamW (PLACER_DP_OVERLAP=0: synchronous)\n"
            "  --timeout S     with --procs: a rank that is silent for S seconds in a collective stops the\n"
            "                  run (default 30)\n"
            "  --layout TEXT   a parallel layout in placer layout's text form (e.g. from placer plan):\n"
            "                  tp, sp, dp and zero as --tp, --sp, --procs tp x dp and --zero; pp stages over\n"
            "                  pp logical devices a process (a contiguous split by the layout's stages=, else\n"
            "                  uniform by layers; --cpu pp or --devices with pp GPUs); gbs the batch (else\n"
            "                  the config's), gbs / (dp x mbs) micro-batches; precision as --precision when\n"
            "                  given. cp, vp, recompute and zero 2/3/fsdp are refused. Replaces --placement,\n"
            "                  --micro-batches, --procs, --tp, --sp and --zero\n"
            "  --json          machine-readable output\n");
}

static int parse_int_opt(const char *name, const char *text, int lo, int hi, int *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*text || *end || errno || v < lo || v > hi)
        return cli_usage_error("step", "--%s must be an integer in [%d, %d], got '%s'", name, lo, hi, text);
    *out = (int)v;
    return 0;
}

/* "0,1,1" -> gpus; returns count or -1 after printing the error. */
static int parse_devices(const char *text, int *gpus) {
    int n = placement_count_fields(text);
    if (n < 1 || n > HW_MAX_DEVICES) {
        cli_usage_error("step", "--devices needs 1 to %d GPU ordinals, e.g. 0,1", HW_MAX_DEVICES);
        return -1;
    }
    char msg[256];
    /* the placement parser checks integers and ranges the same way */
    if (placement_parse(text, n, 1 << 20, gpus, msg, sizeof msg) != PL_OK) {
        cli_usage_error("step", "--devices: %s", msg);
        return -1;
    }
    return n;
}

/* ---- --procs N: data-parallel ranks (hw/launcher.h, hw/dist_group.h) ---- */

typedef struct {
    gpt_config cfg;          /* the global model and batch */
    const char *placement;   /* or NULL: all on device 0 */
    schedule sched;          /* per rank (micro-batches divide the rank's slice) */
    int n_dev, procs, warmup, steps, seed, json;
    hw_precision prec;
    hw_issue_mode issue;
    double lr;
    int tp, sp;              /* tensor-parallel ranks of a replica (1: data parallelism only), sp */
    const char *layout;      /* --layout's canonical text, or NULL */
    int zero;                /* hw_program_opts.zero */
    double bucket_mb;        /* hw_program_opts.bucket_bytes in MiB, 0: the default */
    int cuda;                /* ranks on the CUDA backend (--devices), else the CPU one */
    int gpus[HW_MAX_DEVICES];/* with cuda: the GPU of each of a rank's n_dev logical devices */
    int gpu_per_rank;        /* with cuda: rank r adds r * n_dev to every ordinal (one process per GPU) */
    int kill_rank;           /* tests: this rank dies (SIGKILL) after its first step; -1 off */
    int hang_rank;           /* tests: this rank hangs (pause) after its first step; -1 off */
} procs_job;

/* One rank: its slice of the batch, the plan with the group, the timing
 * protocol; rank 0 prints. Returns 0 or 1 with a one-line reason in err. */
static int procs_rank(dist_group *grp, int rank, void *vjob, char *err, size_t errlen) {
    const procs_job *j = vjob;
    const gpt_config *cfg = &j->cfg;
    int first = 0, count = 0, rc = 1;
    graph *g = NULL;
    hw_engine *e = NULL;
    hw_program *p = NULL;
    int *tok = NULL, *tgt = NULL, *pl = NULL;
    dist_group *tg = NULL, *dg = NULL;
    const int dp = j->procs / j->tp;
    int replica = rank;
    /* tp > 1: the tp and dp groups of the tp x dp grid (core/layout.h's rank grid);
     * else the launcher's group is the dp group */
    if (j->tp > 1 && hw_tp_dp_groups(grp, j->tp, dp, &tg, &dg, &replica, err, errlen) != PL_OK) goto out;
    if (hw_dp_slice(dp, replica, cfg->batch, &first, &count, err, errlen) != PL_OK) goto out;
    gpt_config local = *cfg;
    local.batch = count;
    if (graph_build_gpt(&local, &g, err, errlen) != PL_OK) goto out;
    pl = calloc((size_t)g->n_nodes, sizeof(int));
    const int ntok = cfg->batch * cfg->seq_len;
    tok = malloc(sizeof(int) * (size_t)ntok);
    tgt = malloc(sizeof(int) * (size_t)ntok);
    if (!pl || !tok || !tgt) {
        snprintf(err, errlen, "out of host memory");
        goto out;
    }
    if (j->placement && placement_parse(j->placement, g->n_nodes, j->n_dev, pl, err, errlen) != PL_OK) goto out;
    hw_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.backend = j->cuda ? HW_BACKEND_CUDA : HW_BACKEND_CPU;
    eo.n_devices = j->n_dev;
    eo.precision = j->prec;
    eo.issue = j->issue;
    if (j->cuda) {
        /* the rank's GPUs: the same for every rank (several ranks share a GPU, host-staged
         * collectives), or with --gpu-per-rank its own ones (under mpirun, by the rank on its host) */
        const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        const int local = lr && *lr ? atoi(lr) : rank;
        for (int d = 0; d < j->n_dev; d++) eo.gpus[d] = j->gpus[d] + (j->gpu_per_rank ? local * j->n_dev : 0);
    }
    if (hw_engine_create(&eo, &e, err, errlen) != PL_OK) goto out;
    hw_program_opts po;
    memset(&po, 0, sizeof po);
    po.placement = pl;
    po.sched = j->sched;
    po.seed = (uint64_t)j->seed;
    po.adamw = hw_adamw_default();
    if (j->lr > 0) po.adamw.lr = (float)j->lr;
    po.dp = j->tp > 1 ? dg : grp;
    po.tp = tg;
    po.seq_parallel = j->sp;
    po.zero = j->zero;
    po.bucket_bytes = (int64_t)(j->bucket_mb * 1048576.0);
    hw_mem_report mem;
    if (hw_program_create(e, g, &po, &p, &mem, err, errlen) != PL_OK) goto out;
    /* the global batch, as the single-process run makes it; this rank's rows */
    hw_make_batch(cfg, (uint64_t)j->seed, tok, tgt);
    if (hw_program_set_batch(p, tok + (size_t)first * cfg->seq_len, tgt + (size_t)first * cfg->seq_len, err, errlen) !=
        PL_OK)
        goto out;
    if (rank == j->kill_rank || rank == j->hang_rank) {
        hw_step_result r;
        if (hw_program_step(p, &r, err, errlen) != PL_OK) goto out;
        if (rank == j->kill_rank) raise(SIGKILL);
        pause(); /* until mpirun or the launcher ends it */
    }
    hw_timing t;
    if (hw_program_time(p, j->warmup, j->steps, &t, err, errlen) != PL_OK) goto out;
    if (rank == 0) {
        char key[128], pls[4096];
        gpt_config_key(cfg, key, sizeof key);
        placement_format(pl, g->n_nodes, pls, sizeof pls);
        const double tokens_per_s = t.median_us > 0 ? ntok / (t.median_us * 1e-6) : 0.0;
        const char *order = schedule_order_name(j->sched.order);
        if (j->json) {
            printf("{\"status\":\"ok\",");
            if (j->layout) printf("\"layout\":\"%s\",", j->layout);
            printf("\"config\":\"%s\",\"backend\":\"%s\",\"procs\":%d,\"tp\":%d,"
                   "\"sp\":%d,\"dp\":%d,"
                   "\"devices_per_rank\":%d,\"global_batch\":%d,\"rank_batch\":%d,\"placement\":\"%s\","
                   "\"schedule\":\"%s\",\"micro_batches\":%d,\"precision\":\"%s\",\"warmup\":%d,\"steps\":%d,"
                   "\"step_ms\":{\"median\":%.4f,\"min\":%.4f,\"max\":%.4f,\"mean\":%.4f,\"sd\":%.4f,\"all\":[",
                   key, j->cuda ? "cuda" : "cpu", j->procs, j->tp, j->sp, dp, j->n_dev, cfg->batch, count, pls, order,
                   j->sched.micro_batches,
                   hw_precision_name(hw_engine_precision(e)), j->warmup, j->steps, t.median_us / 1e3, t.min_us / 1e3,
                   t.max_us / 1e3, t.mean_us / 1e3, t.sd_us / 1e3);
            for (int i = 0; i < j->steps && i < 64; i++) printf("%s%.4f", i ? "," : "", t.step_us[i] / 1e3);
            printf("]},\"loss\":{\"first\":%.6f,\"last\":%.6f},\"tokens_per_s\":%.0f,\"peak_bytes_rank0\":[", t.first_loss,
                   t.last_loss, tokens_per_s);
            for (int d = 0; d < j->n_dev; d++) printf("%s%lld", d ? "," : "", (long long)hw_program_peak_bytes(p, d));
            printf("],\"zero\":%d,\"static_bytes_rank0\":[", j->zero);
            for (int d = 0; d < j->n_dev; d++) printf("%s%lld", d ? "," : "", (long long)mem.static_bytes[d]);
            printf("],\"transport\":\"%s\",\"collectives\":\"%s\"}\n", dist_transport_name(grp),
                   hw_program_collectives(p));
        } else {
            printf("placer step: %s, %s m=%d, %d processes x %d device%s (%s, %s), %s\n",
                   key, order, j->sched.micro_batches, j->procs, j->n_dev, j->n_dev > 1 ? "s" : "",
                   j->cuda ? "CUDA" : "CPU reference backend", hw_precision_name(hw_engine_precision(e)),
                   j->tp > 1 ? "tensor x data parallel" : "data parallel");
            if (j->cuda) {
                printf("devices     rank 0 on GPU");
                for (int d = 0; d < j->n_dev; d++) printf("%s%d", d ? "," : " ", eo.gpus[d]);
                printf("%s; collectives %s\n",
                       j->gpu_per_rank ? " (rank r on its own GPUs)" : " (every rank: logical devices sharing them)",
                       hw_program_collectives(p));
            }
            if (j->layout) printf("layout      %s\n", j->layout);
            if (j->tp > 1)
                printf("parallel    tp %d%s x dp %d: heads, MLP columns and vocabulary split over each %d ranks\n",
                       j->tp, j->sp ? " (sequence parallel)" : "", dp, j->tp);
            printf("placement   %s (every rank)\n", pls);
            if (j->tp > 1)
                printf("batch       %d samples, %d per replica (each of its %d tp ranks sees them all); gradients "
                       "averaged over the %d replicas before AdamW\n",
                       cfg->batch, count, j->tp, dp);
            else
                printf("batch       %d samples, %d per rank; gradients averaged over %d ranks before AdamW\n",
                       cfg->batch, count, dp);
            if (j->zero)
                printf("optimizer   ZeRO-1: AdamW m and v sharded over the %d data-parallel ranks\n", dp);
            printf("step time   median %.3f ms  (min %.3f, max %.3f, sd %.3f; slowest rank; %d steps after %d warm-up)\n",
                   t.median_us / 1e3, t.min_us / 1e3, t.max_us / 1e3, t.sd_us / 1e3, j->steps, j->warmup);
            printf("loss        %.4f (first step) -> %.4f (last step), mean over the ranks\n", t.first_loss, t.last_loss);
            printf("throughput  %.0f tokens/s\n", tokens_per_s);
        }
        fflush(stdout);
    }
    rc = 0;
out:
    hw_program_destroy(p);
    hw_engine_destroy(e);
    graph_destroy(g);
    free(pl);
    free(tok);
    free(tgt);
    dist_group_destroy(tg);
    dist_group_destroy(dg);
    return rc;
}

static int step_procs(procs_job *j, double timeout_s) {
    char msg[512] = "";
    if (j->procs % j->tp != 0)
        return cli_usage_error("step", "--tp %d must divide --procs %d", j->tp, j->procs);
    const int dp = j->procs / j->tp;
    if (j->cfg.batch % dp != 0)
        return cli_usage_error("step", "the %d data-parallel replicas (--procs %d / --tp %d) must divide the batch of %d "
                               "samples", dp, j->procs, j->tp, j->cfg.batch);
    pl_status st = schedule_validate(&j->sched, j->cfg.batch / dp, msg, sizeof msg);
    if (st != PL_OK)
        return cli_usage_error("step", "with %d replicas each runs %d samples: %s", dp, j->cfg.batch / dp, msg);
    if (j->tp > 1) {
        const int64_t tokens = (int64_t)(j->cfg.batch / dp / j->sched.micro_batches) * j->cfg.seq_len;
        if (hw_tp_check(&j->cfg, j->tp, j->sp, tokens, msg, sizeof msg) != PL_OK)
            return cli_usage_error("step", "--tp: %s", msg);
    }
    const char *kr = getenv("PLACER_TEST_KILL_RANK"); /* failure tests only */
    j->kill_rank = kr && *kr ? atoi(kr) : -1;
    const char *hr = getenv("PLACER_TEST_HANG_RANK");
    j->hang_rank = hr && *hr ? atoi(hr) : -1;
    if (dist_mpi_launched(NULL, NULL)) { /* mpirun started this process: one rank of the job */
        int rank = -1, rc = 0;
        st = hw_launch_mpi(timeout_s, procs_rank, j, &rank, &rc, msg, sizeof msg);
    } else {
        st = hw_launch(j->procs, timeout_s, procs_rank, j, NULL, msg, sizeof msg);
    }
    if (st != PL_OK) return cli_report("step", st, msg);
    return CLI_EXIT_OK;
}

/* The number of GPUs, counted in a child process: a CUDA driver initialized
 * in this process before the ranks fork would be unusable in them. -1 when
 * the count could not be taken (then the ranks report it themselves). */
static int gpu_count_in_child(void) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        const int n = hw_cuda_device_count();
        _exit(n > 250 ? 250 : n);
    }
    int ws = 0;
    if (waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws)) return -1;
    return WEXITSTATUS(ws);
}

int cmd_step(int argc, char **argv) {
    const char *config = "default", *placement_text = NULL, *sched_text = "1f1b", *cap_text = NULL;
    const char *devices_text = NULL, *trace_path = NULL, *issue_text = "auto", *prec_text = NULL;
    int m = 1, cpu = 0, warmup = 2, steps = 5, strict = 0, json = 0, seed = 1, graphs = 0, procs = 0;
    int tp = 1, sp = 0, zero = 0, m_given = 0, gpu_per_rank = 0;
    const char *layout_arg = NULL;
    double lr = -1.0, timeout_s = 30.0, bucket_mb = 0.0;
    static const struct option opts[] = {
        {"placement", required_argument, 0, 'p'}, {"config", required_argument, 0, 'c'},
        {"micro-batches", required_argument, 0, 'm'}, {"schedule", required_argument, 0, 's'},
        {"mem-cap", required_argument, 0, 'M'}, {"devices", required_argument, 0, 'd'},
        {"cpu", required_argument, 0, 'C'}, {"warmup", required_argument, 0, 'w'},
        {"steps", required_argument, 0, 'k'}, {"strict-fp32", no_argument, 0, 'f'},
        {"seed", required_argument, 0, 'S'}, {"lr", required_argument, 0, 'l'},
        {"issue", required_argument, 0, 'i'}, {"trace", required_argument, 0, 't'},
        {"json", no_argument, 0, 'j'}, {"graphs", no_argument, 0, 'g'}, {"help", no_argument, 0, 'h'},
        {"precision", required_argument, 0, 'P'}, {"procs", required_argument, 0, 'N'},
        {"timeout", required_argument, 0, 'T'}, {"tp", required_argument, 0, 'R'}, {"sp", no_argument, 0, 'Q'},
        {"zero", required_argument, 0, 'Z'}, {"bucket-mb", required_argument, 0, 'B'},
        {"layout", required_argument, 0, 'Y'}, {"gpu-per-rank", no_argument, 0, 'G'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "p:c:m:s:M:d:C:w:k:fS:l:i:t:jghP:N:T:R:QZ:B:Y:G", opts, NULL)) != -1) {
        switch (c) {
        case 'p': placement_text = optarg; break;
        case 'c': config = optarg; break;
        case 'm': {
            char msg[128];
            if (schedule_parse_micro_batches(optarg, &m, msg, sizeof msg) != PL_OK)
                return cli_usage_error("step", "%s", msg);
            m_given = 1;
            break;
        }
        case 's': sched_text = optarg; break;
        case 'M': cap_text = optarg; break;
        case 'd': devices_text = optarg; break;
        case 'C': if (parse_int_opt("cpu", optarg, 1, HW_MAX_DEVICES, &cpu)) return CLI_EXIT_USAGE; break;
        case 'w': if (parse_int_opt("warmup", optarg, 0, 1000, &warmup)) return CLI_EXIT_USAGE; break;
        case 'k': if (parse_int_opt("steps", optarg, 1, 10000, &steps)) return CLI_EXIT_USAGE; break;
        case 'f': strict = 1; break;
        case 'S': if (parse_int_opt("seed", optarg, 0, 2147483647, &seed)) return CLI_EXIT_USAGE; break;
        case 'l': {
            char *end = NULL;
            lr = strtod(optarg, &end);
            if (!*optarg || *end || !(lr > 0.0) || lr > 10.0)
                return cli_usage_error("step", "--lr must be a positive number, got '%s'", optarg);
            break;
        }
        case 'i': issue_text = optarg; break;
        case 't': trace_path = optarg; break;
        case 'j': json = 1; break;
        case 'g': graphs = 1; break;
        case 'P': prec_text = optarg; break;
        case 'N': if (parse_int_opt("procs", optarg, 1, DIST_MAX_RANKS, &procs)) return CLI_EXIT_USAGE; break;
        case 'T': {
            char *end = NULL;
            timeout_s = strtod(optarg, &end);
            if (!*optarg || *end || !(timeout_s > 0.0) || timeout_s > 3600.0)
                return cli_usage_error("step", "--timeout must be seconds in (0, 3600], got '%s'", optarg);
            break;
        }
        case 'R': if (parse_int_opt("tp", optarg, 1, DIST_MAX_RANKS, &tp)) return CLI_EXIT_USAGE; break;
        case 'Q': sp = 1; break;
        case 'Z': if (parse_int_opt("zero", optarg, 0, 1, &zero)) return CLI_EXIT_USAGE; break;
        case 'B': {
            char *end = NULL;
            bucket_mb = strtod(optarg, &end);
            if (!*optarg || *end || !(bucket_mb > 0.0) || bucket_mb > 65536.0)
                return cli_usage_error("step", "--bucket-mb must be MiB in (0, 65536], got '%s'", optarg);
            break;
        }
        case 'Y': layout_arg = optarg; break;
        case 'G': gpu_per_rank = 1; break;
        case 'h': step_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("step", "unknown or incomplete option '%s'; see placer step --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("step", "unexpected argument '%s'; see placer step --help", argv[optind]);
    if (cpu && devices_text) return cli_usage_error("step", "give either --devices or --cpu, not both");
    if (sp && tp < 2) return cli_usage_error("step", "--sp needs --tp T with T >= 2");
    hw_precision prec = HW_PREC_DEFAULT;
    if (prec_text) {
        char pmsg[128];
        if (hw_precision_parse(prec_text, &prec, pmsg, sizeof pmsg) != PL_OK)
            return cli_usage_error("step", "--precision: %s", pmsg);
        if (strict && prec != HW_PREC_FP32)
            return cli_usage_error("step", "--strict-fp32 contradicts --precision %s", prec_text);
    }
    hw_issue_mode issue;
    if (!strcmp(issue_text, "auto")) issue = HW_ISSUE_AUTO;
    else if (!strcmp(issue_text, "single")) issue = HW_ISSUE_SINGLE;
    else if (!strcmp(issue_text, "threads")) issue = HW_ISSUE_THREADS;
    else return cli_usage_error("step", "--issue must be auto, single or threads, got '%s'", issue_text);

    char msg[512] = "";
    gpt_config cfg;
    pl_status st = gpt_config_parse(config, &cfg, msg, sizeof msg);
    if (st != PL_OK) return cli_report("step", st, msg);
    /* --layout: the same knobs as the options it replaces (step_layout.h) */
    step_layout sl;
    char layout_pls[4096] = "", layout_devs[4 * HW_MAX_DEVICES] = "";
    if (layout_arg) {
        if (placement_text || m_given || procs || tp > 1 || sp || zero)
            return cli_usage_error("step", "--layout sets the placement, micro-batches, processes, tp, sp and zero; "
                                   "leave out --placement, --micro-batches, --procs, --tp, --sp and --zero");
        if ((st = step_layout_resolve(layout_arg, &cfg, !cpu, &sl, msg, sizeof msg)) != PL_OK)
            return cli_usage_error("step", "--layout: %s", msg);
        /* more than one process runs on the CPU backend: its default precision */
        if (sl.world > 1 && !cpu && !devices_text &&
            (st = step_layout_resolve(layout_arg, &cfg, 0, &sl, msg, sizeof msg)) != PL_OK)
            return cli_usage_error("step", "--layout: %s", msg);
        if (sl.has_precision) {
            if ((prec_text && prec != sl.prec) || (strict && sl.prec != HW_PREC_FP32))
                return cli_usage_error("step", "--layout says precision=%s; --precision/--strict-fp32 contradict it",
                                       hw_precision_name(sl.prec));
            prec = sl.prec;
        } else if (prec_text || strict) {
            step_layout_set_precision(&sl, strict ? HW_PREC_FP32 : prec); /* the text says what runs */
        }
        int mpi_n = 0;
        if (dist_mpi_launched(NULL, &mpi_n) && mpi_n != sl.world)
            return cli_usage_error("step", "--layout runs tp x dp = %d processes, mpirun started %d", sl.world, mpi_n);
        cfg.batch = sl.batch;
        m = sl.micro_batches;
        procs = sl.world > 1 ? sl.world : 0;
        tp = sl.tp;
        sp = sl.sp;
        zero = sl.zero;
        if (cpu && cpu != sl.pp)
            return cli_usage_error("step", "--layout has pp=%d stages, one logical device each: give --cpu %d, not %d",
                                   sl.pp, sl.pp, cpu);
        if (devices_text && placement_count_fields(devices_text) != sl.pp)
            return cli_usage_error("step", "--layout has pp=%d stages: --devices must list %d GPUs", sl.pp, sl.pp);
        if (procs && !cpu && !devices_text) cpu = sl.pp; /* ranks run on the CPU backend */
        if (!cpu && !devices_text)
            for (int d = 0; d < sl.pp; d++)
                snprintf(layout_devs + strlen(layout_devs), sizeof layout_devs - strlen(layout_devs), "%s%d",
                         d ? "," : "", d);
        if (!devices_text && layout_devs[0]) devices_text = layout_devs;
        graph *g0 = NULL;
        if ((st = graph_build_gpt(&cfg, &g0, msg, sizeof msg)) != PL_OK) return cli_report("step", st, msg);
        int *pl0 = calloc((size_t)g0->n_nodes, sizeof(int));
        st = pl0 ? step_layout_placement(&sl, g0, pl0, msg, sizeof msg) : PL_ERR_NOMEM;
        if (st == PL_OK) placement_format(pl0, g0->n_nodes, layout_pls, sizeof layout_pls);
        free(pl0);
        graph_destroy(g0);
        if (st != PL_OK) return cli_usage_error("step", "--layout: %s", msg);
        placement_text = layout_pls;
    }
    schedule sched = schedule_make(m, SCHED_1F1B);
    if ((st = schedule_parse_order(sched_text, &sched.order, msg, sizeof msg)) != PL_OK)
        return cli_report("step", st, msg);
    int mpi_size = 0;
    if (dist_mpi_launched(NULL, &mpi_size)) { /* under mpirun: dp = the job's ranks */
        if (procs && procs != mpi_size)
            return cli_usage_error("step", "--procs %d contradicts mpirun's %d ranks (leave --procs out)", procs, mpi_size);
        if (mpi_size < 1 || mpi_size > DIST_MAX_RANKS)
            return cli_usage_error("step", "mpirun started %d ranks; placer takes 1 to %d", mpi_size, DIST_MAX_RANKS);
        procs = mpi_size;
    }
    if (tp > 1 && !procs) procs = tp; /* after mpirun's count, which --tp must divide */
    if ((zero || bucket_mb > 0) && !procs)
        return cli_usage_error("step", "--zero and --bucket-mb shard or bucket over data-parallel ranks: give --procs N "
                               "(or run under mpirun)");
    if (procs) {
        if (devices_text && !PLACER_HAVE_CUDA)
            return cli_usage_error("step", "--procs with --devices runs the ranks on CUDA, and this placer was built "
                                   "without it (rebuild with -Dcuda=enabled, or use --cpu N)");
        if (cap_text || trace_path || graphs)
            return cli_usage_error("step", "--procs does not take --mem-cap, --trace or --graphs yet");
        procs_job j;
        memset(&j, 0, sizeof j);
        j.cfg = cfg;
        j.placement = placement_text;
        j.sched = sched;
        j.n_dev = cpu ? cpu : 1;
        if (devices_text) { /* the CUDA backend: each rank's logical devices on these GPUs */
            j.cuda = 1;
            j.n_dev = parse_devices(devices_text, j.gpus);
            if (j.n_dev < 0) return CLI_EXIT_USAGE;
            j.gpu_per_rank = gpu_per_rank;
            /* every GPU a rank will open must exist: one line, exit 2, before any rank starts
             * (under mpirun only the listed ordinals: the ranks per host are not known here) */
            const int ng = gpu_count_in_child();
            if (ng == 0)
                return cli_usage_error("step", "--procs with --devices runs the ranks on CUDA, and this machine has no "
                                       "GPU (use --cpu N for the CPU reference backend)");
            for (int d = 0; d < j.n_dev && ng > 0; d++) {
                const int last = j.gpus[d] + (gpu_per_rank && !mpi_size ? (procs - 1) * j.n_dev : 0);
                if (last >= ng)
                    return cli_usage_error("step", "GPU %d does not exist (this machine has %d: 0..%d)%s", last, ng,
                                           ng - 1, gpu_per_rank ? "; --gpu-per-rank gives rank r its own GPUs" : "");
            }
        }
        j.procs = procs;
        j.warmup = warmup;
        j.steps = steps;
        j.seed = seed;
        j.json = json;
        j.prec = strict ? HW_PREC_FP32 : prec;
        j.issue = issue;
        j.lr = lr;
        j.tp = tp;
        j.sp = sp;
        j.zero = zero;
        j.layout = layout_arg ? sl.text : NULL;
        j.bucket_mb = bucket_mb;
        if (placement_text) {
            /* check the placement here, so bad input is exit 2 before any fork */
            graph *g0 = NULL;
            if ((st = graph_build_gpt(&cfg, &g0, msg, sizeof msg)) != PL_OK) return cli_report("step", st, msg);
            int *pl0 = calloc((size_t)g0->n_nodes, sizeof(int));
            st = pl0 ? placement_parse(placement_text, g0->n_nodes, j.n_dev, pl0, msg, sizeof msg) : PL_ERR_NOMEM;
            int nn = g0->n_nodes;
            free(pl0);
            graph_destroy(g0);
            if (st != PL_OK) {
                char full[640];
                snprintf(full, sizeof full, "--placement: %s (%d nodes, devices 0..%d)", msg, nn, j.n_dev - 1);
                return cli_report("step", st, full);
            }
        }
        return step_procs(&j, timeout_s);
    }
    if ((st = schedule_validate(&sched, cfg.batch, msg, sizeof msg)) != PL_OK) return cli_report("step", st, msg);

    hw_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.strict_fp32 = strict;
    eo.precision = prec;
    eo.issue = issue;
    eo.graphs = graphs;
    if (cpu) {
        eo.backend = HW_BACKEND_CPU;
        eo.n_devices = cpu;
    } else {
        eo.backend = HW_BACKEND_CUDA;
        eo.n_devices = devices_text ? parse_devices(devices_text, eo.gpus) : 1;
        if (eo.n_devices < 0) return CLI_EXIT_USAGE;
    }
    const int nd = eo.n_devices;

    graph *g = NULL;
    if ((st = graph_build_gpt(&cfg, &g, msg, sizeof msg)) != PL_OK) return cli_report("step", st, msg);
    int rc = CLI_EXIT_FAIL;
    hw_engine *e = NULL;
    hw_program *p = NULL;
    int *pl = calloc((size_t)g->n_nodes, sizeof(int));
    int *tok = NULL, *tgt = NULL;
    if (!pl) { rc = cli_report("step", PL_ERR_NOMEM, NULL); goto out; }
    if (placement_text) {
        if ((st = placement_parse(placement_text, g->n_nodes, nd, pl, msg, sizeof msg)) != PL_OK) {
            char full[640];
            snprintf(full, sizeof full, "--placement: %s (%d nodes, devices 0..%d)", msg, g->n_nodes, nd - 1);
            rc = cli_report("step", st, full);
            goto out;
        }
    }
    if ((st = hw_engine_create(&eo, &e, msg, sizeof msg)) != PL_OK) { rc = cli_report("step", st, msg); goto out; }

    int64_t caps[HW_MAX_DEVICES];
    for (int d = 0; d < nd; d++) caps[d] = hw_engine_device(e, d)->mem_bytes;
    if (cap_text) {
        int nc = placement_count_fields(cap_text);
        if (nc != 1 && nc != nd) {
            rc = cli_usage_error("step", "--mem-cap takes one cap or one per device (%d), got %d", nd, nc);
            goto out;
        }
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", cap_text);
        char *save = NULL, *tok_s = strtok_r(buf, ",", &save);
        for (int d = 0; d < nd; d++) {
            const char *t = tok_s ? tok_s : "";
            if ((st = pl_parse_mem_cap(t, hw_engine_device(e, d)->mem_bytes, &caps[d], msg, sizeof msg)) != PL_OK) {
                rc = cli_usage_error("step", "--mem-cap: %s", msg);
                goto out;
            }
            if (nc > 1) tok_s = strtok_r(NULL, ",", &save);
        }
    }

    hw_program_opts po;
    memset(&po, 0, sizeof po);
    po.placement = pl;
    po.sched = sched;
    po.caps = caps;
    po.seed = (uint64_t)seed;
    po.adamw = hw_adamw_default();
    if (lr > 0) po.adamw.lr = (float)lr;
    hw_mem_report mem;
    st = hw_program_create(e, g, &po, &p, &mem, msg, sizeof msg);
    if (st == PL_ERR_DEVICE_OOM && json) {
        printf("{\"status\":\"oom\",\"oom_device\":%d,\"message\":", mem.oom_device);
        pl_json_string(stdout, msg);
        printf(",\"memory\":[");
        for (int d = 0; d < nd; d++)
            printf("%s{\"device\":%d,\"need_bytes\":%lld,\"static_bytes\":%lld,\"cap_bytes\":%lld}", d ? "," : "", d,
                   (long long)mem.need_bytes[d], (long long)mem.static_bytes[d], (long long)mem.cap_bytes[d]);
        printf("]}\n");
    }
    if (st != PL_OK) { rc = cli_report("step", st, msg); goto out; }

    const int ntok = cfg.batch * cfg.seq_len;
    tok = malloc(sizeof(int) * (size_t)ntok);
    tgt = malloc(sizeof(int) * (size_t)ntok);
    if (!tok || !tgt) { rc = cli_report("step", PL_ERR_NOMEM, NULL); goto out; }
    hw_make_batch(&cfg, (uint64_t)seed, tok, tgt);
    if ((st = hw_program_set_batch(p, tok, tgt, msg, sizeof msg)) != PL_OK) { rc = cli_report("step", st, msg); goto out; }
    hw_timing t;
    if ((st = hw_program_time(p, warmup, steps, &t, msg, sizeof msg)) != PL_OK) { rc = cli_report("step", st, msg); goto out; }
    if (trace_path) {
        FILE *f = fopen(trace_path, "w");
        if (!f) {
            rc = cli_report("step", PL_ERR_IO, "cannot write the trace file");
            goto out;
        }
        hw_step_result r;
        st = hw_program_set_trace(p, 1);
        if (st == PL_OK) st = hw_program_step(p, &r, msg, sizeof msg);
        if (st == PL_OK) st = hw_program_write_chrome_trace(p, f);
        if (fclose(f) != 0 && st == PL_OK) st = PL_ERR_IO;
        if (st != PL_OK) { rc = cli_report("step", st, msg[0] ? msg : "writing the trace failed"); goto out; }
    }

    char key[128], pls[4096];
    gpt_config_key(&cfg, key, sizeof key);
    placement_format(pl, g->n_nodes, pls, sizeof pls);
    const double tokens_per_s = t.median_us > 0 ? ntok / (t.median_us * 1e-6) : 0.0;
    if (json) {
        printf("{\"status\":\"ok\",");
        if (layout_arg) printf("\"layout\":\"%s\",", sl.text);
        printf("\"config\":\"%s\",\"backend\":\"%s\",\"devices\":[", key, cpu ? "cpu" : "cuda");
        for (int d = 0; d < nd; d++) {
            const hw_device_info *di = hw_engine_device(e, d);
            printf("%s{\"device\":%d,\"name\":\"%s\",\"physical\":%d,\"peak_bytes\":%lld,\"static_bytes\":%lld,"
                   "\"cap_bytes\":%lld}",
                   d ? "," : "", d, di->name, di->physical, (long long)hw_program_peak_bytes(p, d),
                   (long long)(hw_program_peak_bytes(p, d) ? mem.static_bytes[d] : 0), (long long)caps[d]);
        }
        printf("],\"placement\":\"%s\",\"schedule\":\"%s\",\"micro_batches\":%d,\"strict_fp32\":%s,\"precision\":\"%s\","
               "\"warmup\":%d,\"steps\":%d,\"step_ms\":{\"median\":%.4f,\"min\":%.4f,\"max\":%.4f,\"mean\":%.4f,"
               "\"sd\":%.4f,\"all\":[",
               pls, schedule_order_name(sched.order), m, strict || prec == HW_PREC_FP32 ? "true" : "false",
               hw_precision_name(hw_engine_precision(e)), warmup, steps,
               t.median_us / 1e3, t.min_us / 1e3, t.max_us / 1e3, t.mean_us / 1e3, t.sd_us / 1e3);
        for (int i = 0; i < steps && i < 64; i++) printf("%s%.4f", i ? "," : "", t.step_us[i] / 1e3);
        printf("]},\"loss\":{\"first\":%.6f,\"last\":%.6f},\"tokens_per_s\":%.0f,\"reorders\":%d,\"graphs\":%d}\n",
               t.first_loss, t.last_loss, tokens_per_s, hw_program_reorders(p), hw_program_graph_state(p));
    } else {
        printf("placer step: %s, %s m=%d, %d device%s (%s), %s\n", key, schedule_order_name(sched.order), m, nd,
               nd > 1 ? "s" : "", cpu ? "CPU reference backend" : "CUDA", hw_precision_name(hw_engine_precision(e)));
        if (layout_arg) printf("layout      %s\n", sl.text);
        printf("placement   %s\n", pls);
        printf("step time   median %.3f ms  (min %.3f, max %.3f, sd %.3f; %d steps after %d warm-up)\n",
               t.median_us / 1e3, t.min_us / 1e3, t.max_us / 1e3, t.sd_us / 1e3, steps, warmup);
        printf("loss        %.4f (first step) -> %.4f (last step)\n", t.first_loss, t.last_loss);
        printf("throughput  %.0f tokens/s\n", tokens_per_s);
        for (int d = 0; d < nd; d++) {
            const hw_device_info *di = hw_engine_device(e, d);
            int64_t peak = hw_program_peak_bytes(p, d);
            char a[32], b[32], s2[32];
            pl_format_bytes((double)peak, a, sizeof a);
            pl_format_bytes((double)caps[d], b, sizeof b);
            pl_format_bytes((double)(peak ? mem.static_bytes[d] : 0), s2, sizeof s2);
            if (peak)
                printf("device %-3d  %s %d: peak %s (static %s) of cap %s\n", d, di->name, di->physical, a, s2, b);
            else
                printf("device %-3d  %s %d: unused\n", d, di->name, di->physical);
        }
        if (hw_program_reorders(p) > 0)
            printf("note        %d operations ran ahead of strict schedule order (non-contiguous placement)\n",
                   hw_program_reorders(p));
        if (graphs)
            printf("graphs      %s\n", hw_program_graph_state(p) == 1 ? "steps replayed as CUDA graphs"
                                   : hw_program_graph_state(p) < 0 ? "capture failed; steps issued op by op"
                                                                : "not used (CPU backend, or one thread issues several devices)");
        if (trace_path) printf("trace       %s\n", trace_path);
    }
    rc = CLI_EXIT_OK;
out:
    free(tok);
    free(tgt);
    hw_program_destroy(p);
    hw_engine_destroy(e);
    free(pl);
    graph_destroy(g);
    return rc;
}
