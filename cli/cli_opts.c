/* cli_opts.c: option parsing shared by the layout path's commands (cli_opts.h). */
#include "cli_opts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "framework_file.h"
#include "moe_fit_file.h"

int cli_long_arg(const char *cmd, const char *name, const char *text, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*text || *end || errno || v < lo || v > hi)
        return cli_usage_error(cmd, "%s must be an integer in %ld..%ld, not '%s'", name, lo, hi, text);
    *out = v;
    return 0;
}

int cli_double_arg(const char *text, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (!*text || *end || errno) return 0;
    *out = v;
    return 1;
}

void cli_stack_default(cli_stack *s) {
    layout_sim_params_default(&s->params);
    s->set = 0;
    framework_default(&s->fw);
    s->fw_set = 0;
    s->attention_set = 0;
    s->plans = 0;
    s->runs = PLAN_FRAMEWORK_ANY;
    s->experts_layers = 0;
    s->experts_ep = 0;
}

/* 1 when --framework's value reads as a file path rather than a name
 * (framework_load's rule: a '/' or a .json ending). */
static int names_a_file(const char *arg) {
    size_t n = strlen(arg);
    return strchr(arg, '/') || (n >= 5 && !strcmp(arg + n - 5, ".json"));
}

/* --framework (or placer plan's --for) into s: a profile by name or file,
 * or (plan) a framework that needs none. 0, or CLI_EXIT_USAGE with the
 * line in msg. */
static int framework_option(const char *arg, cli_stack *s, char *msg, size_t len) {
    char m[512] = "";
    if (s->fw_set)
        return snprintf(msg, len, "--framework given twice%s", s->plans ? " (--for is the same option)" : ""),
               CLI_EXIT_USAGE;
    plan_framework runs = PLAN_FRAMEWORK_ANY;
    if (s->plans && plan_framework_parse(arg, &runs) &&
        (runs == PLAN_FRAMEWORK_ANY || runs == PLAN_FRAMEWORK_DEEPSPEED)) {
        s->runs = runs; /* Megatron's figures: the simulator's settings stay as they are */
        s->fw_set = 1;
        return 0;
    }
    pl_status st = framework_load(arg, &s->fw, m, sizeof m);
    if (st == PL_ERR_NOT_FOUND && s->plans && !names_a_file(arg))
        return snprintf(msg, len, "--framework: unknown framework '%.60s' (megatron, torchtitan, deepspeed, hf, "
                                  "any, or a profile file path)", arg),
               CLI_EXIT_USAGE;
    if (st != PL_OK) return snprintf(msg, len, "--framework: %s", m), CLI_EXIT_USAGE;
    const attention_impl given = s->params.compute.attention;
    framework_apply_time(&s->fw, &s->params.compute, &s->params.step_fixed_us);
    if (s->attention_set) s->params.compute.attention = given; /* an explicit --attention wins */
    s->params.framework = &s->fw;
    s->fw_set = 1;
    s->runs = PLAN_FRAMEWORK_ANY;
    plan_framework_parse(s->fw.name, &s->runs);
    s->set = 1;
    return 0;
}

/* text as an integer in lo..hi into *out: 0, or CLI_EXIT_USAGE with
 * cli_long_arg's line in msg. */
static int long_in(const char *name, const char *text, long lo, long hi, long *out, char *msg, size_t len) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*text || *end || errno || v < lo || v > hi)
        return snprintf(msg, len, "%s must be an integer in %ld..%ld, not '%s'", name, lo, hi, text), CLI_EXIT_USAGE;
    *out = v;
    return 0;
}

int cli_stack_set(cli_stack *s, int ch, const char *arg, char *msg, size_t len) {
    long v;
    switch (ch) {
    case CLI_OPT_ATTENTION:
        if (!strcmp(arg, "flash")) s->params.compute.attention = ATTENTION_FLASH;
        else if (!strcmp(arg, "unfused")) s->params.compute.attention = ATTENTION_UNFUSED;
        else return snprintf(msg, len, "--attention must be flash or unfused, not '%s'", arg), CLI_EXIT_USAGE;
        s->attention_set = 1;
        break;
    case CLI_OPT_DP_OVERLAP:
        if (long_in("--dp-overlap", arg, 0, 1, &v, msg, len)) return CLI_EXIT_USAGE;
        s->params.dp_overlap_grad = (int)v;
        break;
    case CLI_OPT_GRAD_BYTES:
        if (long_in("--grad-bytes", arg, 1, 8, &v, msg, len)) return CLI_EXIT_USAGE;
        s->params.grad_comm_bytes = (double)v;
        break;
    case CLI_OPT_FRAMEWORK: return framework_option(arg, s, msg, len);
    case CLI_OPT_MOE_FIT: {
        char m[512] = "";
        if (moe_fit_load(arg, &s->moe_fit, m, sizeof m) != PL_OK)
            return snprintf(msg, len, "--moe-fit: %s", m), CLI_EXIT_USAGE;
        s->params.moe.fit = &s->moe_fit;
        break;
    }
    case CLI_OPT_EXPERT_CV: {
        double x = -1;
        if (!cli_double_arg(arg, &x) || !(x >= 0 && x <= 10))
            return snprintf(msg, len, "--expert-cv takes a coefficient of variation from 0 to 10, not '%s'", arg),
                   CLI_EXIT_USAGE;
        s->params.moe.expert_cv = x;
        break;
    }
    case CLI_OPT_EXPERTS: {
        if (s->experts_layers) return snprintf(msg, len, "--experts given twice"), CLI_EXIT_USAGE;
        expert_map_file f;
        char m[512] = "";
        if (expert_map_file_read(arg, &f, m, sizeof m) != PL_OK) return snprintf(msg, len, "--experts: %s", m), CLI_EXIT_USAGE;
        if (!f.busiest_over_mean) {
            expert_map_file_free(&f);
            return snprintf(msg, len, "--experts %s has no gpu_load or busiest_over_mean (write it with placer experts "
                                      "--out)", arg),
                   CLI_EXIT_USAGE;
        }
        memcpy(s->moe_layer_load, f.busiest_over_mean, (size_t)f.n_layers * sizeof(double));
        s->experts_layers = f.n_layers;
        s->experts_ep = f.n_gpus;
        expert_map_file_free(&f);
        s->params.moe_layer_load = s->moe_layer_load;
        s->params.moe_layer_load_n = s->experts_layers;
        s->params.moe_layer_load_ep = s->experts_ep;
        break;
    }
    default: return -1;
    }
    s->set = 1;
    return 0;
}

int cli_stack_option(const char *cmd, int ch, const char *arg, cli_stack *s) {
    char msg[640] = "";
    const int rc = cli_stack_set(s, ch, arg, msg, sizeof msg);
    if (rc == CLI_EXIT_USAGE) return cli_usage_error(cmd, "%s", msg);
    return rc;
}
