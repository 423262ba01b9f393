/*
 * fuzz_cli.c: libFuzzer target for the command line. Each input becomes an
 * argument vector for one subcommand (graph, simulate, search, train,
 * profile and its show/compare/check modes, step, calibrate, confirm,
 * report, layout), which is then run in-process through its cmd_* entry point
 * against small profile databases made once in a scratch directory.
 *
 * The input is read as a stream of choices: the first byte picks the
 * subcommand, then each step adds one option of that subcommand (or an
 * unknown one, or a stray word) with a value drawn either from a list of
 * edge cases for that option's kind or from the input's own bytes. Options
 * whose value sets the amount of work (--updates, --count, --steps, --cpu,
 * --budget, ...) only ever get small values (never the next word, which may
 * be anything), and every run starts from options that keep it small (one
 * update, five synthetic timings (too few to fit), the tiny graph, no search
 * side in confirm, no CPU-engine timer), so that an execution takes
 * milliseconds; later options may override them with other small values.
 *
 * Every path the commands may write is inside the scratch directory (the
 * process also chdirs there; raw values lose their '/'), the databases are
 * restored from pristine copies before every run, and whatever a run
 * created is removed after it. PLACER_DB points at the scratch database so
 * the shipped profiles are never touched; gnuplot is kept out of PATH.
 *
 * A subcommand must return 0, 1 or 2 and never exit (libFuzzer reports an
 * exit as a crash). Run with -close_fd_mask=3 so that the commands' output
 * does not flood the terminal (scripts/fuzz.sh does). FUZZ_CLI_PRINT=1
 * prints the command line each input stands for; FUZZ_CLI_SLOW_MS=N
 * appends those of runs slower than N ms to /tmp/fuzz_cli_slow.log.
 */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "graph.h"
#include "spec.h"
#include "store.h"
#include "util.h"

/* ---- value kinds --------------------------------------------------------- */

enum {
    V_NONE,      /* no argument */
    V_DB,        /* a database path */
    V_OUT,       /* a path the command writes */
    V_IN,        /* a path the command reads */
    V_SMALL,     /* a count that sets the amount of work: small values only */
    V_INT,       /* any integer */
    V_NUM,       /* any number */
    V_CONFIG,    /* a graph config */
    V_CONFIG_SM, /* a graph config for the engine: small graphs only */
    V_PLACEMENT, /* placement text */
    V_SCHED,     /* schedule order */
    V_MB,        /* micro-batch count */
    V_CAP,       /* memory cap */
    V_DEVLIST,   /* comma-separated device list */
    V_TIMER,     /* cuda, cpu, synthetic */
    V_METHOD,    /* search methods */
    V_GROUPS,    /* grouping mode */
    V_BASELINE,  /* reinforce baseline */
    V_SPEC,      /* spec machine name */
    V_MBLIST,    /* micro-batch size list */
    V_WORD,      /* free text */
    V_MAXEVALS,  /* search --max-evals: bounded */
    V_PARAMS,    /* simulate --params */
    V_ISSUE,     /* step --issue */
    V_CPU,       /* profile --cpu: never a valid device count (no measuring) */
    V_FIT,       /* calibrate --fit: parameter names */
    V_CLUSTER,   /* layout --cluster: names and paths */
    V_LAYOUT,    /* layout --layout: layout texts */
};

typedef struct {
    const char *name; /* "--db"; NULL ends the table */
    int kind;
} opt_def;

typedef struct {
    const char *name;        /* subcommand as typed */
    const char *mode;        /* second word (profile show ...) or NULL */
    int (*fn)(int, char **); /* entry point */
    const char *const *pre;  /* options every run starts with (NULL-ended) */
    const opt_def *opts;     /* options the fuzzer may add */
} command_def;

static const opt_def GRAPH_OPTS[] = {{"--config", V_CONFIG}, {"--json", V_NONE}, {"--help", V_NONE}, {"-c", V_CONFIG},
                                     {"-j", V_NONE},         {NULL, 0}};
static const opt_def SIMULATE_OPTS[] = {
    {"--db", V_DB},          {"--placement", V_PLACEMENT}, {"--placement-file", V_IN}, {"--micro-batches", V_MB},
    {"--schedule", V_SCHED}, {"--chunks", V_INT},          {"--mem-cap", V_CAP},       {"--config", V_CONFIG},
    {"--params", V_PARAMS},  {"--trace", V_OUT},           {"--json", V_NONE},         {"--help", V_NONE},
    {"-p", V_PLACEMENT},     {"-m", V_MB},                 {"-s", V_SCHED},            {NULL, 0}};
static const opt_def SEARCH_OPTS[] = {
    {"--db", V_DB},         {"--method", V_METHOD},  {"--groups", V_GROUPS},      {"--micro-batches", V_MB},
    {"--schedule", V_SCHED}, {"--mem-cap", V_CAP},   {"--devices", V_INT},        {"--config", V_CONFIG},
    {"--budget", V_SMALL},  {"--seed", V_INT},       {"--max-evals", V_MAXEVALS}, {"--threads", V_SMALL},
    {"--uncalibrated", V_NONE}, {"--help", V_NONE},  {NULL, 0}};
static const opt_def TRAIN_OPTS[] = {
    {"--db", V_DB},           {"--groups", V_GROUPS},   {"--updates", V_SMALL},      {"--samples", V_SMALL},
    {"--baseline", V_BASELINE}, {"--entropy", V_NUM},   {"--lr", V_NUM},             {"--seed", V_INT},
    {"--micro-batches", V_MB}, {"--schedule", V_SCHED}, {"--mem-cap", V_CAP},        {"--devices", V_INT},
    {"--config", V_CONFIG},   {"--resume", V_SMALL},    {"--threads", V_SMALL},      {"--prior-stay", V_NUM},
    {"--logit-clip", V_NUM},  {"--hidden", V_SMALL},    {"--top-k", V_INT},          {"--uncalibrated", V_NONE},
    {"--help", V_NONE},       {NULL, 0}};
static const opt_def PROFILE_OPTS[] = {
    {"--from-spec", V_SPEC},  {"--db", V_DB},            {"--config", V_CONFIG},  {"--micro-batch-sizes", V_MBLIST},
    {"--devices", V_DEVLIST}, {"--portable", V_NONE},    {"--cpu", V_CPU},        {"--force", V_NONE},
    {"--machine", V_WORD},    {"--reps", V_SMALL},       {"--link-max-bytes", V_WORD}, {"--verbose", V_NONE},
    {"--help", V_NONE},       {NULL, 0}};
static const opt_def SHOW_OPTS[] = {{"--db", V_DB},      {"--config", V_CONFIG}, {"--device", V_INT},
                                    {"--json", V_NONE},  {"--help", V_NONE},     {NULL, 0}};
static const opt_def COMPARE_OPTS[] = {{"--db", V_DB}, {"--config", V_CONFIG}, {"--min-us", V_NUM}, {"--help", V_NONE},
                                       {NULL, 0}};
static const opt_def CHECK_OPTS[] = {{"--db", V_DB}, {"--config", V_CONFIG}, {"--help", V_NONE}, {NULL, 0}};
static const opt_def NODE_MEMORY_OPTS[] = {{"--db", V_DB},         {"--config", V_CONFIG}, {"--write", V_NONE},
                                           {"--portable", V_NONE}, {"--json", V_NONE},     {"--help", V_NONE},
                                           {NULL, 0}};
static const opt_def STEP_OPTS[] = {
    {"--placement", V_PLACEMENT}, {"--config", V_CONFIG_SM}, {"--micro-batches", V_MB}, {"--schedule", V_SCHED},
    {"--mem-cap", V_CAP},         {"--devices", V_DEVLIST},  {"--cpu", V_SMALL},        {"--warmup", V_SMALL},
    {"--steps", V_SMALL},         {"--strict-fp32", V_NONE}, {"--seed", V_INT},         {"--lr", V_NUM},
    {"--issue", V_ISSUE},         {"--trace", V_OUT},        {"--json", V_NONE},        {"--graphs", V_NONE},
    {"--help", V_NONE},           {NULL, 0}};
static const opt_def CALIBRATE_OPTS[] = {
    {"--db", V_DB},          {"--devices", V_DEVLIST}, {"--count", V_SMALL},      {"--seed", V_INT},
    {"--holdout", V_NUM},    {"--steps", V_SMALL},     {"--warmup", V_SMALL},     {"--from-measurements", V_NONE},
    {"--timer", V_TIMER},    {"--noise", V_NUM},       {"--config", V_CONFIG},    {"--no-save", V_NONE},
    {"--graphs", V_NONE},    {"--fit", V_FIT},         {"--help", V_NONE},        {NULL, 0}};
static const opt_def CONFIRM_OPTS[] = {
    {"--db", V_DB},          {"--run", V_SMALL},           {"--devices", V_DEVLIST},       {"--micro-batches", V_MB},
    {"--schedule", V_SCHED}, {"--mem-cap", V_CAP},         {"--selection-rounds", V_SMALL}, {"--confirm-rounds", V_SMALL},
    {"--steps", V_SMALL},    {"--warmup", V_SMALL},        {"--seed", V_INT},              {"--label", V_WORD},
    {"--top-k", V_SMALL},    {"--no-dp", V_NONE},          {"--no-search", V_NONE},        {"--timer", V_TIMER},
    {"--config", V_CONFIG},  {"--no-trace", V_NONE},       {"--graphs", V_NONE},           {"--help", V_NONE},
    {NULL, 0}};
static const opt_def REPORT_OPTS[] = {{"--db", V_DB},         {"--out", V_OUT},     {"--markdown", V_OUT},
                                      {"--image-prefix", V_WORD}, {"--run", V_SMALL}, {"--help", V_NONE},
                                      {NULL, 0}};

static const opt_def LAYOUT_OPTS[] = {
    {"--model", V_CONFIG}, {"--cluster", V_CLUSTER}, {"--layout", V_LAYOUT}, {"--gpus", V_INT},
    {"--seq", V_INT},      {"--flops", V_WORD},      {"--trace", V_OUT},     {"--explain", V_NONE},
    {"--json", V_NONE},    {"--help", V_NONE},       {NULL, 0}};

static const char *const PRE_NONE[] = {NULL};
static const char *const PRE_LAYOUT[] = {"--model", "tiny", "--cluster", "h200x2", "--layout", "tp=1,mbs=1,gbs=1",
                                         NULL};
static const char *const PRE_SEARCH[] = {"--budget", "40", "--threads", "1", "--max-evals", "2000", NULL};
static const char *const PRE_TRAIN[] = {"--updates", "1", "--samples", "2", "--threads", "1", "--hidden", "8", NULL};
static const char *const PRE_STEP[] = {"--cpu", "2", "--config", "tiny", "--steps", "1", "--warmup", "0", NULL};
static const char *const PRE_CALIBRATE[] = {"--timer", "synthetic", "--count", "5", "--steps", "1", "--warmup", "0",
                                            NULL};
static const char *const PRE_CONFIRM[] = {"--timer", "synthetic", "--selection-rounds", "1", "--confirm-rounds", "2",
                                          "--steps", "1", "--warmup", "0", "--run", "0", "--no-search", NULL};

static const command_def COMMANDS[] = {
    {"graph", NULL, cmd_graph, PRE_NONE, GRAPH_OPTS},
    {"simulate", NULL, cmd_simulate, PRE_NONE, SIMULATE_OPTS},
    {"search", NULL, cmd_search, PRE_SEARCH, SEARCH_OPTS},
    {"train", NULL, cmd_train, PRE_TRAIN, TRAIN_OPTS},
    {"profile", NULL, cmd_profile, PRE_NONE, PROFILE_OPTS},
    {"profile", "show", cmd_profile, PRE_NONE, SHOW_OPTS},
    {"profile", "compare", cmd_profile, PRE_NONE, COMPARE_OPTS},
    {"profile", "check", cmd_profile, PRE_NONE, CHECK_OPTS},
    {"profile", "node-memory", cmd_profile, PRE_NONE, NODE_MEMORY_OPTS},
    {"step", NULL, cmd_step, PRE_STEP, STEP_OPTS},
    {"calibrate", NULL, cmd_calibrate, PRE_CALIBRATE, CALIBRATE_OPTS},
    {"confirm", NULL, cmd_confirm, PRE_CONFIRM, CONFIRM_OPTS},
    {"report", NULL, cmd_report, PRE_NONE, REPORT_OPTS},
    {"layout", NULL, cmd_layout, PRE_LAYOUT, LAYOUT_OPTS},
};
#define N_COMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

/* Options no subcommand knows, and malformed ones. */
static const char *const STRAY[] = {"--bogus", "-x", "--", "-", "--db=", "--=", "---", "-h", "--he", "--c", "--m",
                                    "-jz", "x", "", "--json=1", "--help=no", "--conf", "--sched"};

/* ---- edge cases per kind -------------------------------------------------- */

static char scratch[PATH_MAX];   /* the process's working directory */
static char pristine[PATH_MAX];  /* the databases as made once */
static char db_tiny[PATH_MAX], db_h2[PATH_MAX], db_text[PATH_MAX], db_empty[PATH_MAX], db_newer[PATH_MAX],
    db_missing[PATH_MAX], placement_ok[PATH_MAX];

#define NV(a) (sizeof(a) / sizeof((a)[0]))
static const char *const K_SMALL[] = {"0", "1", "2", "3", "-1", "", "x", "1.5", "0x2", "+2", " 2", "2 ",
                                      "99999999999999999999", "-9223372036854775808", "4294967297", "1e1"};
static const char *const K_INT[] = {"0", "1", "2", "4", "-1", "16", "64", "65", "1024", "2147483647", "2147483648",
                                    "-2147483649", "9223372036854775807", "99999999999999999999", "", "1x", "0x10",
                                    " 1", "007"};
static const char *const K_NUM[] = {"0", "1", "0.5", "1e-3", "-1", "nan", "inf", "-inf", "1e308", "1e-320", "-0",
                                    "", "0x1p-3", "1,5", "0.999", "1000", "100"};
static const char *const K_CONFIG[] = {
    "tiny", "default", "gpt12", "tiny,layers=1", "tiny,layers=0", "tiny,heads=3", "tiny,batch=0", "tiny,batch=3",
    "tiny,vocab=99999999999", "tiny,seq=1,batch=1", "tiny,layers=3", "tiny,d_model=0", "tiny,", "tiny,,",
    "tiny,layers", "tiny,layers=", "tiny,foo=1", "", "TINY", "default,layers=200", "tiny,layers=-1",
    "tiny,d_model=18,heads=2", "tiny,layers=1,layers=2"};
static const char *const K_CONFIG_SM[] = {"tiny", "tiny,layers=1", "tiny,layers=0", "tiny,heads=3", "tiny,batch=0",
                                          "tiny,batch=2", "tiny,seq=1,batch=1", "tiny,foo=1", "tiny,d_model=0",
                                          "tiny,vocab=0", "nonesuch"};
static const char *const K_PLACEMENT[] = {
    "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0", "0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1", "0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3",
    "3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3", "0,0,0,0,0,0,0,0,4,4,4,4,4,4,4,4", "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0",
    "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0", "", ",", "0,,0", "a", "-1", "1e3", " 0 , 1 ", "0;1",
    "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,-1", "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,99999999999", "0,1", "0"};
static const char *const K_SCHED[] = {"gpipe", "1f1b", "interleaved", "zb", "", "GPIPE", "1F1B", "gpipe ", "x"};
static const char *const K_MB[] = {"1", "2", "4", "3", "0", "-4", "8", "16", "", "1.0", "2x", "99999999999"};
static const char *const K_CAP[] = {"0.5", "50%", "1GiB", "0", "1e-30", "100%", "101%", "1,2", "1KB", "nan", "",
                                    "1.5", "-1", "16GB", "0.000000001", "1e30", "512MiB,1GiB", "%", "5 GB"};
static const char *const K_DEVLIST[] = {"0", "0,1", "0,0", "-1", "99", "", "0,1,2,3", "0,1,2,3,4,5,6,7,8", ",", "a"};
/* no "cpu": the engine's CPU backend runs real steps, seconds in this build */
static const char *const K_TIMER[] = {"cuda", "synthetic", "x", "", "CPU", "cpu "};
static const char *const K_METHOD[] = {"single", "human", "dp", "random", "anneal", "local", "exhaustive", "all",
                                       "dp,random", "", ",", "single,,dp", "all,exhaustive", "magic"};
static const char *const K_GROUPS[] = {"colocate", "none", "", "x", "COLOCATE"};
static const char *const K_BASELINE[] = {"ema", "loo", "", "median"};
static const char *const K_SPEC[] = {"t4x4-pcie", "h200x2-nvlink", "h200x4-nvlink", "bogus", ""};
static const char *const K_CLUSTER[] = {"h200x2", "dgx-a100-80gb", "mixed-h100-a100", "bogus", "", "x.json",
                                        "/dev/null"};
static const char *const K_LAYOUT[] = {"tp=1,mbs=1,gbs=1", "tp=2,mbs=1,gbs=4", "pp=2,mbs=1,gbs=4", "tp=2,dp=2",
                                       "pp=2,vp=2,mbs=1,gbs=4", "cp=2,sp=1,tp=2", "dp=2,zero=3,mbs=2,gbs=8",
                                       "zero=fsdp,dp=2,gbs=2", "recompute=full,precision=fp8", "stages=1/1",
                                       "pp=2,stages=0/2,gbs=2", "tp=0", "gbs=2147483647", "pp=1024",
                                       "tp=1,tp=1", "", ",", "tp=", "=1", "bogus=1"};
static const char *const K_MBLIST[] = {"1", "1,2,4", "4,2,1", "3", "0", "", "1,,2", "1,1", "-1", "99999999999",
                                       "a", "1,2,4,8,16"};
/* bounded: an exhaustive search of 2^16 placements takes seconds in this build */
static const char *const K_MAXEVALS[] = {"1", "100", "2000", "0", "nan", "-1", "", "1e3", "-inf", "0x10"};
static const char *const K_PARAMS[] = {"neutral", "calibrated", "", "x"};
static const char *const K_ISSUE[] = {"auto", "single", "threads", "", "x"};
static const char *const K_FIT[] = {"compute_scale", "compute_scale,transfer_scale", "launch_overhead_us,", ",",
                                    "", "bogus", "compute_scale,,step_fixed_us", "compute_scale,compute_scale"};
static const char *const K_CPU[] = {"0", "-1", "x", "", "65", "1.5", "99999999999"};

/* ---- the input as a stream of choices ------------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t n;
} stream;

static unsigned take(stream *s) {
    if (!s->n) return 0;
    s->n--;
    return *s->p++;
}

/* A raw string from the input: a length byte, then that many bytes (NULs
 * dropped, '/' turned into '_' so that no path leaves the scratch dir). */
static void take_raw(stream *s, char *out, size_t cap) {
    size_t len = take(s) % 48, k = 0;
    for (size_t i = 0; i < len && s->n; i++) {
        char c = (char)take(s);
        if (c == 0) continue;
        if (c == '/') c = '_';
        if (k + 1 < cap) out[k++] = c;
    }
    out[k] = 0;
}

#define MAX_WORDS 48
#define WORD_LEN 512

typedef struct {
    char *argv[MAX_WORDS + 1];
    char buf[MAX_WORDS][WORD_LEN];
    int argc;
} argvec;

static char *add(argvec *a, const char *w) {
    if (a->argc >= MAX_WORDS) return NULL;
    char *dst = a->buf[a->argc];
    snprintf(dst, WORD_LEN, "%s", w);
    a->argv[a->argc++] = dst;
    a->argv[a->argc] = NULL;
    return dst;
}

static const char *pick(stream *s, const char *const *list, size_t n) { return list[take(s) % n]; }

/* A value of kind k into out. */
static void value(stream *s, int k, char *out, size_t cap) {
    unsigned sel = take(s);
    int raw = (sel & 3) == 0; /* a quarter of the values come from the input */
    char tmp[64];
    switch (k) {
    case V_DB: {
        const char *dbs[] = {db_tiny, db_h2, db_text, db_empty, db_newer, db_missing, "/dev/null", ""};
        if (raw) {
            take_raw(s, tmp, sizeof tmp);
            snprintf(out, cap, "%s/%s", scratch, tmp);
        } else {
            snprintf(out, cap, "%s", dbs[(sel >> 2) % NV(dbs)]);
        }
        return;
    }
    case V_OUT:
    case V_IN: {
        const char *files[] = {placement_ok, db_tiny, db_text, db_missing, "/dev/null", ""};
        if (raw || k == V_OUT) {
            take_raw(s, tmp, sizeof tmp);
            snprintf(out, cap, "%s/%s", scratch, *tmp ? tmp : "out");
        } else {
            snprintf(out, cap, "%s", files[(sel >> 2) % NV(files)]);
        }
        return;
    }
    case V_SMALL: snprintf(out, cap, "%s", pick(s, K_SMALL, NV(K_SMALL))); return;
    case V_CONFIG_SM: snprintf(out, cap, "%s", pick(s, K_CONFIG_SM, NV(K_CONFIG_SM))); return;
    case V_MAXEVALS: snprintf(out, cap, "%s", pick(s, K_MAXEVALS, NV(K_MAXEVALS))); return;
    case V_CPU: snprintf(out, cap, "%s", pick(s, K_CPU, NV(K_CPU))); return;
    case V_TIMER: snprintf(out, cap, "%s", pick(s, K_TIMER, NV(K_TIMER))); return;
    default: break;
    }
    if (raw) {
        take_raw(s, out, cap);
        return;
    }
    const char *const *list = K_INT;
    size_t n = NV(K_INT);
    switch (k) {
    case V_INT: list = K_INT, n = NV(K_INT); break;
    case V_NUM: list = K_NUM, n = NV(K_NUM); break;
    case V_CONFIG: list = K_CONFIG, n = NV(K_CONFIG); break;
    case V_PLACEMENT: list = K_PLACEMENT, n = NV(K_PLACEMENT); break;
    case V_SCHED: list = K_SCHED, n = NV(K_SCHED); break;
    case V_MB: list = K_MB, n = NV(K_MB); break;
    case V_CAP: list = K_CAP, n = NV(K_CAP); break;
    case V_DEVLIST: list = K_DEVLIST, n = NV(K_DEVLIST); break;
    case V_METHOD: list = K_METHOD, n = NV(K_METHOD); break;
    case V_GROUPS: list = K_GROUPS, n = NV(K_GROUPS); break;
    case V_BASELINE: list = K_BASELINE, n = NV(K_BASELINE); break;
    case V_SPEC: list = K_SPEC, n = NV(K_SPEC); break;
    case V_MBLIST: list = K_MBLIST, n = NV(K_MBLIST); break;
    case V_PARAMS: list = K_PARAMS, n = NV(K_PARAMS); break;
    case V_ISSUE: list = K_ISSUE, n = NV(K_ISSUE); break;
    case V_WORD: list = K_SPEC, n = NV(K_SPEC); break;
    case V_FIT: list = K_FIT, n = NV(K_FIT); break;
    case V_CLUSTER: list = K_CLUSTER, n = NV(K_CLUSTER); break;
    case V_LAYOUT: list = K_LAYOUT, n = NV(K_LAYOUT); break;
    }
    snprintf(out, cap, "%s", list[(sel >> 2) % n]);
}

/* Kinds whose values are drawn from a bounded list only: they never take
 * their value from the next word, which may be any stray word (an empty one
 * makes `step --config ''` the default 49M GPT, 2.4 GB of weights on the CPU
 * engine; a raw number makes `--steps` as large as it likes). */
static int bounded(int k) {
    return k == V_SMALL || k == V_CONFIG_SM || k == V_MAXEVALS || k == V_CPU || k == V_TIMER;
}

/* Build the argument vector of command c from the stream. */
static void build(stream *s, const command_def *c, argvec *a) {
    a->argc = 0;
    add(a, c->name);
    if (c->mode) add(a, c->mode);
    for (int i = 0; c->pre[i]; i++) add(a, c->pre[i]);
    int n_opts = 0;
    while (c->opts[n_opts].name) n_opts++;
    char val[WORD_LEN - 64];
    while (s->n && a->argc < MAX_WORDS - 2) {
        unsigned op = take(s);
        if (op % 16 == 15) { /* a stray word or option */
            if (op & 16) {
                take_raw(s, val, sizeof val);
                if (val[0] == '-') val[0] = '_'; /* no option of our own making */
                add(a, val);
            } else {
                add(a, STRAY[(op >> 5) % NV(STRAY)]);
            }
            continue;
        }
        const opt_def *o = &c->opts[take(s) % n_opts];
        if (o->kind == V_NONE) {
            add(a, o->name);
            continue;
        }
        value(s, o->kind, val, sizeof val);
        if (op % 16 == 14) { /* --opt=value in one word */
            char w[WORD_LEN];
            snprintf(w, sizeof w, "%s=%s", o->name, val);
            if (o->name[1] == '-') add(a, w);
        } else if (op % 16 == 13 && !bounded(o->kind)) { /* the value left out: the next word becomes it */
            add(a, o->name);
        } else {
            add(a, o->name);
            add(a, val);
        }
    }
}

/* ---- the scratch directory ------------------------------------------------- */

static void die(const char *what) {
    fprintf(stderr, "fuzz_cli: %s\n", what);
    abort();
}

static void copy_file(const char *from, const char *to) {
    int in = open(from, O_RDONLY);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0) die("cannot copy a fixture");
    char buf[65536];
    ssize_t k;
    while ((k = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)k) != k) die("short write");
    close(in);
    close(out);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) die("cannot write a fixture");
    fputs(text, f);
    fclose(f);
}

/* A spec profile of the tiny graph on machine spec, made portable (rollback
 * journal) so that read-only opens leave no -wal file behind. */
static void make_db(const char *path, const char *spec, int with_run) {
    gpt_config cfg;
    char msg[256];
    if (gpt_config_parse("tiny", &cfg, msg, sizeof msg) != PL_OK) die(msg);
    graph *g = NULL;
    if (graph_build_gpt(&cfg, &g, msg, sizeof msg) != PL_OK) die(msg);
    int mbs[3] = {1, 2, 4};
    profile_data *p = NULL;
    if (spec_profile_build(spec_find(spec), g, mbs, 3, &p) != PL_OK) die("spec");
    profile_db *db = NULL;
    if (profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg) != PL_OK) die(msg);
    if (profile_db_save_profile(db, &cfg, p, msg, sizeof msg) != PL_OK) die(msg);
    profile_db_close(db);
    profile_data_destroy(p);
    graph_destroy(g);
    if (with_run) {
        /* a finished training run (run 1) and a calibration, so that --resume,
         * confirm --run and report have something to read */
        char *tr[] = {"train", "--db", (char *)path, "--updates", "2", "--samples", "2", "--threads", "1", "--hidden",
                      "4", NULL};
        if (cmd_train(11, tr) != 0) die("fixture train run");
        /* five timings are too few to fit the simulator's parameters (even
         * with nothing held out): the measurements stay (each is stored as it
         * is made) but no fit runs, here or later in --from-measurements; a
         * fit takes seconds in this instrumented build and is not argument
         * handling */
        char *ca[] = {"calibrate", "--db", (char *)path, "--timer", "synthetic", "--count", "5", "--steps", "1",
                      "--warmup", "0", NULL};
        if (cmd_calibrate(11, ca) != 2) die("fixture calibration");
    }
    if (profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg) != PL_OK) die(msg);
    if (profile_db_make_portable(db, msg, sizeof msg) != PL_OK) die(msg);
    if (sqlite3_exec(profile_db_handle(db), "VACUUM", NULL, NULL, NULL) != SQLITE_OK) die("vacuum");
    profile_db_close(db);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static const char *const FIXTURES[] = {"tiny.db", "h2.db", "text.db", "empty.db", "newer.db", "placement.txt"};
#define N_FIXTURES NV(FIXTURES)
static struct stat fixture_stat[N_FIXTURES]; /* as restored last */

static int same_stat(const struct stat *a, const struct stat *b) {
    return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ino == b->st_ino;
}

/* Remove everything a run created in the scratch dir and restore the
 * fixtures it changed (most runs change nothing: copying only what changed
 * keeps executions fast). */
static void reset_scratch(void) {
    DIR *d = opendir(scratch);
    if (!d) die("opendir");
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        int fixture = 0;
        for (size_t i = 0; i < N_FIXTURES; i++) fixture |= !strcmp(e->d_name, FIXTURES[i]);
        if (fixture) continue;
        char path[PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", scratch, e->d_name);
        nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); /* -wal, -shm, traces, report dirs, new dbs */
    }
    closedir(d);
    for (size_t i = 0; i < N_FIXTURES; i++) {
        char from[PATH_MAX + 32], to[PATH_MAX + 32];
        snprintf(from, sizeof from, "%s/%s", pristine, FIXTURES[i]);
        snprintf(to, sizeof to, "%s/%s", scratch, FIXTURES[i]);
        struct stat now;
        if (stat(to, &now) == 0 && S_ISREG(now.st_mode) && same_stat(&now, &fixture_stat[i])) continue;
        nftw(to, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        copy_file(from, to);
        if (stat(to, &fixture_stat[i])) die("stat");
    }
}

static void remove_pristine(void) { nftw(pristine, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char tmpl[] = "/tmp/placer-fuzz-cli-XXXXXX";
    if (!mkdtemp(tmpl)) die("mkdtemp");
    snprintf(pristine, sizeof pristine, "%s", tmpl);
    snprintf(scratch, sizeof scratch, "%s/w", tmpl);
    if (mkdir(scratch, 0755)) die("mkdir");
    atexit(remove_pristine);
    setenv("PATH", "/nonexistent", 1); /* no gnuplot: report fails fast */
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/tiny.db", pristine);
    make_db(path, "t4x4-pcie", 1);
    snprintf(path, sizeof path, "%s/h2.db", pristine);
    make_db(path, "h200x2-nvlink", 0);
    snprintf(path, sizeof path, "%s/text.db", pristine);
    write_text(path, "this is not a database\n");
    snprintf(path, sizeof path, "%s/empty.db", pristine);
    write_text(path, "");
    snprintf(path, sizeof path, "%s/placement.txt", pristine);
    write_text(path, "0,0,0,0,0,0,0,0,\n1,1,1,1,1,1,1,1\n");
    /* newer schema: the tiny profile with its version bumped */
    snprintf(path, sizeof path, "%s/newer.db", pristine);
    make_db(path, "t4x4-pcie", 0);
    {
        profile_db *db = NULL;
        char msg[256];
        if (profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg) != PL_OK) die(msg);
        if (sqlite3_exec(profile_db_handle(db), "UPDATE meta SET value='99' WHERE key='schema_version'", NULL, NULL,
                         NULL) != SQLITE_OK)
            die("bump schema");
        profile_db_make_portable(db, msg, sizeof msg);
        profile_db_close(db);
    }
    snprintf(db_tiny, sizeof db_tiny, "%s/tiny.db", scratch);
    snprintf(db_h2, sizeof db_h2, "%s/h2.db", scratch);
    snprintf(db_text, sizeof db_text, "%s/text.db", scratch);
    snprintf(db_empty, sizeof db_empty, "%s/empty.db", scratch);
    snprintf(db_newer, sizeof db_newer, "%s/newer.db", scratch);
    snprintf(db_missing, sizeof db_missing, "%s/missing.db", scratch);
    snprintf(placement_ok, sizeof placement_ok, "%s/placement.txt", scratch);
    setenv("PLACER_DB", db_tiny, 1);
    if (chdir(scratch)) die("chdir");
    reset_scratch();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    stream s = {data, size};
    const command_def *c = &COMMANDS[take(&s) % N_COMMANDS];
    static argvec a; /* large; one input at a time */
    build(&s, c, &a);
    /* getopt keeps state between calls (the position inside a cluster of
     * short options); a call with optind = 0 resets it, as a fresh process
     * would start */
    char *reset_argv[] = {"x", NULL};
    optind = 0;
    getopt(1, reset_argv, "");
    if (getenv("FUZZ_CLI_PRINT")) { /* show the command an input stands for */
        fprintf(stderr, "placer");
        for (int i = 0; i < a.argc; i++) fprintf(stderr, " '%s'", a.argv[i]);
        fputc('\n', stderr);
    }
    double t0 = pl_now_us();
    int rc = c->fn(a.argc, a.argv);
    double ms = (pl_now_us() - t0) * 1e-3;
    const char *slow = getenv("FUZZ_CLI_SLOW_MS"); /* report slow inputs, to keep executions fast */
    if (slow && ms > atof(slow)) {
        char line[4096];
        size_t k = (size_t)snprintf(line, sizeof line, "slow %.0f ms: placer", ms);
        for (int i = 0; i < a.argc && k < sizeof line; i++)
            k += (size_t)snprintf(line + k, sizeof line - k, " '%s'", a.argv[i]);
        FILE *f = fopen("/tmp/fuzz_cli_slow.log", "a");
        if (f) {
            fprintf(f, "%s\n", line);
            fclose(f);
        }
    }
    fflush(stdout);
    fflush(stderr);
    if (rc < 0 || rc > 2) {
        fprintf(stderr, "fuzz_cli: %s returned %d\n", c->name, rc);
        abort();
    }
    reset_scratch();
    return 0;
}
