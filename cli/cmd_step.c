/*
 * cmd_step.c: `placer step` runs and times real training steps of a
 * placement on the engine: GPUs (--devices) or the CPU reference backend
 * (--cpu N virtual devices), in this process or over ranks (--procs, --tp,
 * --layout, mpirun). It prints the step time (median and spread of the
 * timed steps after warm-up), the loss, and each device's peak memory.
 *
 * The command only parses: options into step_opts, those into one job of
 * the engine's runner (hw/dist/dist_step.h, which runs it in process or
 * over the ranks), and the result through print_step.h.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dist_group.h"
#include "dist_mpi.h"
#include "dist_step.h"
#include "dist_tp.h"
#include "graph.h"
#include "hw.h"
#include "placement.h"
#include "placer_config.h"
#include "print_step.h"
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
            "                  weights and optimizer state, bf16 GEMMs and activations (hw/exec/hw.h); the CPU\n"
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
            "  --tp T          with --procs N: tensor parallelism over T of the N ranks (hw/dist/dist_tp.h): the\n"
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

/* The options as given (and, with --layout, as the layout sets them). */
typedef struct {
    const char *config, *placement, *sched_text, *cap_text, *devices, *trace_path, *issue_text, *prec_text;
    const char *layout;           /* --layout's text, or NULL */
    int m, m_given, cpu, warmup, steps, strict, json, seed, graphs, procs, tp, sp, zero, gpu_per_rank;
    double lr, timeout_s, bucket_mb;
    gpt_config cfg;               /* --config, its batch the layout's gbs */
    hw_precision prec;            /* --precision, or the layout's */
    hw_issue_mode issue;
    step_layout sl;               /* with --layout: the layout mapped onto the engine */
    char layout_placement[4096];  /* its pipeline stages as a placement */
    char layout_devices[4 * HW_MAX_DEVICES]; /* its GPUs 0..pp-1 when no --devices or --cpu */
} step_opts;

static void step_opts_default(step_opts *o) {
    memset(o, 0, sizeof *o);
    o->config = "default";
    o->sched_text = "1f1b";
    o->issue_text = "auto";
    o->m = 1;
    o->warmup = 2;
    o->steps = 5;
    o->seed = 1;
    o->tp = 1;
    o->lr = -1.0;
    o->timeout_s = 30.0;
}

static int parse_double_opt(const char *text, double lo_excl, double hi, double *out) {
    char *end = NULL;
    *out = strtod(text, &end);
    return !*text || *end || !(*out > lo_excl) || *out > hi;
}

/* argv into o. -1 to go on, else the exit code (--help: 0). */
static int step_parse(int argc, char **argv, step_opts *o) {
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
        case 'p': o->placement = optarg; break;
        case 'c': o->config = optarg; break;
        case 'm': {
            char msg[128];
            if (schedule_parse_micro_batches(optarg, &o->m, msg, sizeof msg) != PL_OK)
                return cli_usage_error("step", "%s", msg);
            o->m_given = 1;
            break;
        }
        case 's': o->sched_text = optarg; break;
        case 'M': o->cap_text = optarg; break;
        case 'd': o->devices = optarg; break;
        case 'C': if (parse_int_opt("cpu", optarg, 1, HW_MAX_DEVICES, &o->cpu)) return CLI_EXIT_USAGE; break;
        case 'w': if (parse_int_opt("warmup", optarg, 0, 1000, &o->warmup)) return CLI_EXIT_USAGE; break;
        case 'k': if (parse_int_opt("steps", optarg, 1, 10000, &o->steps)) return CLI_EXIT_USAGE; break;
        case 'f': o->strict = 1; break;
        case 'S': if (parse_int_opt("seed", optarg, 0, 2147483647, &o->seed)) return CLI_EXIT_USAGE; break;
        case 'l':
            if (parse_double_opt(optarg, 0.0, 10.0, &o->lr))
                return cli_usage_error("step", "--lr must be a positive number, got '%s'", optarg);
            break;
        case 'i': o->issue_text = optarg; break;
        case 't': o->trace_path = optarg; break;
        case 'j': o->json = 1; break;
        case 'g': o->graphs = 1; break;
        case 'P': o->prec_text = optarg; break;
        case 'N': if (parse_int_opt("procs", optarg, 1, DIST_MAX_RANKS, &o->procs)) return CLI_EXIT_USAGE; break;
        case 'T':
            if (parse_double_opt(optarg, 0.0, 3600.0, &o->timeout_s))
                return cli_usage_error("step", "--timeout must be seconds in (0, 3600], got '%s'", optarg);
            break;
        case 'R': if (parse_int_opt("tp", optarg, 1, DIST_MAX_RANKS, &o->tp)) return CLI_EXIT_USAGE; break;
        case 'Q': o->sp = 1; break;
        case 'Z': if (parse_int_opt("zero", optarg, 0, 1, &o->zero)) return CLI_EXIT_USAGE; break;
        case 'B':
            if (parse_double_opt(optarg, 0.0, 65536.0, &o->bucket_mb))
                return cli_usage_error("step", "--bucket-mb must be MiB in (0, 65536], got '%s'", optarg);
            break;
        case 'Y': o->layout = optarg; break;
        case 'G': o->gpu_per_rank = 1; break;
        case 'h': step_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("step", "unknown or incomplete option '%s'; see placer step --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("step", "unexpected argument '%s'; see placer step --help", argv[optind]);
    if (o->cpu && o->devices) return cli_usage_error("step", "give either --devices or --cpu, not both");
    if (o->sp && o->tp < 2) return cli_usage_error("step", "--sp needs --tp T with T >= 2");
    o->prec = HW_PREC_DEFAULT;
    if (o->prec_text) {
        char pmsg[128];
        if (hw_precision_parse(o->prec_text, &o->prec, pmsg, sizeof pmsg) != PL_OK)
            return cli_usage_error("step", "--precision: %s", pmsg);
        if (o->strict && o->prec != HW_PREC_FP32)
            return cli_usage_error("step", "--strict-fp32 contradicts --precision %s", o->prec_text);
    }
    if (!strcmp(o->issue_text, "auto")) o->issue = HW_ISSUE_AUTO;
    else if (!strcmp(o->issue_text, "single")) o->issue = HW_ISSUE_SINGLE;
    else if (!strcmp(o->issue_text, "threads")) o->issue = HW_ISSUE_THREADS;
    else return cli_usage_error("step", "--issue must be auto, single or threads, got '%s'", o->issue_text);
    char msg[512] = "";
    pl_status st = gpt_config_parse(o->config, &o->cfg, msg, sizeof msg);
    if (st != PL_OK) return cli_report("step", st, msg);
    return -1;
}

/* --layout: the same knobs as the options it replaces (step_layout.h) set
 * in o. -1 to go on, else the exit code. */
static int step_apply_layout(step_opts *o) {
    char msg[512] = "";
    step_layout *sl = &o->sl;
    pl_status st;
    if (o->placement || o->m_given || o->procs || o->tp > 1 || o->sp || o->zero)
        return cli_usage_error("step", "--layout sets the placement, micro-batches, processes, tp, sp and zero; "
                               "leave out --placement, --micro-batches, --procs, --tp, --sp and --zero");
    if ((st = step_layout_resolve(o->layout, &o->cfg, !o->cpu, sl, msg, sizeof msg)) != PL_OK)
        return cli_usage_error("step", "--layout: %s", msg);
    /* more than one process runs on the CPU backend: its default precision */
    if (sl->world > 1 && !o->cpu && !o->devices &&
        (st = step_layout_resolve(o->layout, &o->cfg, 0, sl, msg, sizeof msg)) != PL_OK)
        return cli_usage_error("step", "--layout: %s", msg);
    if (sl->has_precision) {
        if ((o->prec_text && o->prec != sl->prec) || (o->strict && sl->prec != HW_PREC_FP32))
            return cli_usage_error("step", "--layout says precision=%s; --precision/--strict-fp32 contradict it",
                                   hw_precision_name(sl->prec));
        o->prec = sl->prec;
    } else if (o->prec_text || o->strict) {
        step_layout_set_precision(sl, o->strict ? HW_PREC_FP32 : o->prec); /* the text says what runs */
    }
    int mpi_n = 0;
    if (dist_mpi_launched(NULL, &mpi_n) && mpi_n != sl->world)
        return cli_usage_error("step", "--layout runs tp x dp = %d processes, mpirun started %d", sl->world, mpi_n);
    o->cfg.batch = sl->batch;
    o->m = sl->micro_batches;
    o->procs = sl->world > 1 ? sl->world : 0;
    o->tp = sl->tp;
    o->sp = sl->sp;
    o->zero = sl->zero;
    if (o->cpu && o->cpu != sl->pp)
        return cli_usage_error("step", "--layout has pp=%d stages, one logical device each: give --cpu %d, not %d",
                               sl->pp, sl->pp, o->cpu);
    if (o->devices && placement_count_fields(o->devices) != sl->pp)
        return cli_usage_error("step", "--layout has pp=%d stages: --devices must list %d GPUs", sl->pp, sl->pp);
    if (o->procs && !o->cpu && !o->devices) o->cpu = sl->pp; /* ranks run on the CPU backend */
    if (!o->cpu && !o->devices)
        for (int d = 0; d < sl->pp; d++)
            snprintf(o->layout_devices + strlen(o->layout_devices), sizeof o->layout_devices - strlen(o->layout_devices),
                     "%s%d", d ? "," : "", d);
    if (!o->devices && o->layout_devices[0]) o->devices = o->layout_devices;
    graph *g0 = NULL;
    if ((st = graph_build_gpt(&o->cfg, &g0, msg, sizeof msg)) != PL_OK) return cli_report("step", st, msg);
    int *pl0 = calloc((size_t)g0->n_nodes, sizeof(int));
    st = pl0 ? step_layout_placement(sl, g0, pl0, msg, sizeof msg) : PL_ERR_NOMEM;
    if (st == PL_OK) placement_format(pl0, g0->n_nodes, o->layout_placement, sizeof o->layout_placement);
    free(pl0);
    graph_destroy(g0);
    if (st != PL_OK) return cli_usage_error("step", "--layout: %s", msg);
    o->placement = o->layout_placement;
    return -1;
}

/* Over ranks: the grid's checks, the GPUs, the failure injection of the
 * tests into j. -1 to go on, else the exit code. */
static int step_procs_job(const step_opts *o, int mpi_size, dist_step_job *j) {
    char msg[512] = "";
    if (o->devices && !PLACER_HAVE_CUDA)
        return cli_usage_error("step", "--procs with --devices runs the ranks on CUDA, and this placer was built "
                               "without it (rebuild with -Dcuda=enabled, or use --cpu N)");
    if (o->cap_text || o->trace_path || o->graphs)
        return cli_usage_error("step", "--procs does not take --mem-cap, --trace or --graphs yet");
    j->n_dev = o->cpu ? o->cpu : 1;
    if (o->devices) { /* the CUDA backend: each rank's logical devices on these GPUs */
        j->cuda = 1;
        j->n_dev = parse_devices(o->devices, j->gpus);
        if (j->n_dev < 0) return CLI_EXIT_USAGE;
        j->gpu_per_rank = o->gpu_per_rank;
        /* every GPU a rank will open must exist: one line, exit 2, before any rank starts
         * (under mpirun only the listed ordinals: the ranks per host are not known here) */
        const int ng = dist_step_gpu_count();
        if (ng == 0)
            return cli_usage_error("step", "--procs with --devices runs the ranks on CUDA, and this machine has no "
                                   "GPU (use --cpu N for the CPU reference backend)");
        for (int d = 0; d < j->n_dev && ng > 0; d++) {
            const int last = j->gpus[d] + (o->gpu_per_rank && !mpi_size ? (o->procs - 1) * j->n_dev : 0);
            if (last >= ng)
                return cli_usage_error("step", "GPU %d does not exist (this machine has %d: 0..%d)%s", last, ng, ng - 1,
                                       o->gpu_per_rank ? "; --gpu-per-rank gives rank r its own GPUs" : "");
        }
    }
    j->procs = o->procs;
    j->prec = o->strict ? HW_PREC_FP32 : o->prec;
    j->tp = o->tp;
    j->sp = o->sp;
    j->zero = o->zero;
    j->bucket_bytes = (int64_t)(o->bucket_mb * 1048576.0);
    j->one_rank_group = 1; /* --procs 1 times the data-parallel path over one rank */
    j->timeout_s = o->timeout_s;
    if (o->procs % o->tp != 0) return cli_usage_error("step", "--tp %d must divide --procs %d", o->tp, o->procs);
    const int dp = o->procs / o->tp;
    if (o->cfg.batch % dp != 0)
        return cli_usage_error("step", "the %d data-parallel replicas (--procs %d / --tp %d) must divide the batch of %d "
                               "samples", dp, o->procs, o->tp, o->cfg.batch);
    pl_status st = schedule_validate(&j->sched, o->cfg.batch / dp, msg, sizeof msg);
    if (st != PL_OK)
        return cli_usage_error("step", "with %d replicas each runs %d samples: %s", dp, o->cfg.batch / dp, msg);
    if (o->tp > 1) {
        const int64_t tokens = (int64_t)(o->cfg.batch / dp / j->sched.micro_batches) * o->cfg.seq_len;
        if (hw_tp_check(&o->cfg, o->tp, o->sp, tokens, msg, sizeof msg) != PL_OK)
            return cli_usage_error("step", "--tp: %s", msg);
    }
    const char *kr = getenv("PLACER_TEST_KILL_RANK"); /* failure tests only */
    j->kill_rank = kr && *kr ? atoi(kr) : -1;
    const char *hr = getenv("PLACER_TEST_HANG_RANK");
    j->hang_rank = hr && *hr ? atoi(hr) : -1;
    return -1;
}

/* The options into the runner's job. -1 to go on, else the exit code. */
static int step_job(step_opts *o, dist_step_job *j) {
    char msg[512] = "";
    pl_status st;
    int rc;
    if (o->layout && (rc = step_apply_layout(o)) >= 0) return rc;
    dist_step_job_default(j);
    j->cfg = o->cfg;
    j->placement = o->placement;
    j->sched = schedule_make(o->m, SCHED_1F1B);
    if ((st = schedule_parse_order(o->sched_text, &j->sched.order, msg, sizeof msg)) != PL_OK)
        return cli_report("step", st, msg);
    j->seed = (uint64_t)o->seed;
    j->lr = o->lr;
    j->warmup = o->warmup;
    j->steps = o->steps;
    j->issue = o->issue;
    int mpi_size = 0;
    if (dist_mpi_launched(NULL, &mpi_size)) { /* under mpirun: dp = the job's ranks */
        if (o->procs && o->procs != mpi_size)
            return cli_usage_error("step", "--procs %d contradicts mpirun's %d ranks (leave --procs out)", o->procs,
                                   mpi_size);
        if (mpi_size < 1 || mpi_size > DIST_MAX_RANKS)
            return cli_usage_error("step", "mpirun started %d ranks; placer takes 1 to %d", mpi_size, DIST_MAX_RANKS);
        o->procs = mpi_size;
    }
    if (o->tp > 1 && !o->procs) o->procs = o->tp; /* after mpirun's count, which --tp must divide */
    if ((o->zero || o->bucket_mb > 0) && !o->procs)
        return cli_usage_error("step", "--zero and --bucket-mb shard or bucket over data-parallel ranks: give --procs N "
                               "(or run under mpirun)");
    if (o->procs) return step_procs_job(o, mpi_size, j);
    if ((st = schedule_validate(&j->sched, o->cfg.batch, msg, sizeof msg)) != PL_OK) return cli_report("step", st, msg);
    j->strict_fp32 = o->strict;
    j->prec = o->prec;
    j->graphs = o->graphs;
    j->mem_cap = o->cap_text;
    j->trace_path = o->trace_path;
    j->n_dev = o->cpu ? o->cpu : 1;
    if (!o->cpu) {
        j->cuda = 1;
        j->n_dev = o->devices ? parse_devices(o->devices, j->gpus) : 1;
        if (j->n_dev < 0) return CLI_EXIT_USAGE;
    }
    return -1;
}

int cmd_step(int argc, char **argv) {
    step_opts o;
    step_opts_default(&o);
    int rc = step_parse(argc, argv, &o);
    if (rc >= 0) return rc;
    dist_step_job j;
    if ((rc = step_job(&o, &j)) >= 0) return rc;
    char msg[512] = "";
    dist_step_result r;
    pl_status st = dist_step_run(&j, &r, msg, sizeof msg);
    if (st != PL_OK) {
        if (r.failed == DIST_STEP_FAILED_PLACEMENT) {
            char full[640];
            snprintf(full, sizeof full, "--placement: %s (%d nodes, devices 0..%d)", msg, r.n_nodes, j.n_dev - 1);
            return cli_report("step", st, full);
        }
        if (r.failed == DIST_STEP_FAILED_CAP_COUNT) return cli_usage_error("step", "--mem-cap %s", msg);
        if (r.failed == DIST_STEP_FAILED_CAP) return cli_usage_error("step", "--mem-cap: %s", msg);
        if (st == PL_ERR_DEVICE_OOM && o.json && !j.procs) print_step_oom_json(&r, msg);
        return cli_report("step", st, msg);
    }
    if (r.here) print_step(&j, &r, o.layout ? o.sl.text : NULL, o.json);
    return CLI_EXIT_OK;
}
