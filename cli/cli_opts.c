/* cli_opts.c: option parsing shared by the layout path's commands (cli_opts.h). */
#include "cli_opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "framework_file.h"

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
 * applied to the simulator's settings; for placer plan also what the stack
 * runs, where any and deepspeed name a stack without a profile. */
static int framework_option(const char *cmd, const char *arg, cli_stack *s) {
    char msg[512] = "";
    if (s->fw_set) return cli_usage_error(cmd, "--framework given twice%s", s->plans ? " (--for is the same option)" : "");
    plan_framework runs = PLAN_FRAMEWORK_ANY;
    if (s->plans && plan_framework_parse(arg, &runs) &&
        (runs == PLAN_FRAMEWORK_ANY || runs == PLAN_FRAMEWORK_DEEPSPEED)) {
        s->runs = runs; /* Megatron's figures: the simulator's settings stay as they are */
        s->fw_set = 1;
        return 0;
    }
    pl_status st = framework_load(arg, &s->fw, msg, sizeof msg);
    if (st == PL_ERR_NOT_FOUND && s->plans && !names_a_file(arg))
        return cli_usage_error(cmd, "--framework: unknown framework '%.60s' (megatron, torchtitan, deepspeed, hf, "
                                    "any, or a profile file path)", arg);
    if (st != PL_OK) return cli_usage_error(cmd, "--framework: %s", msg);
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

int cli_stack_option(const char *cmd, int ch, const char *arg, cli_stack *s) {
    long v;
    switch (ch) {
    case CLI_OPT_ATTENTION:
        if (!strcmp(arg, "flash")) s->params.compute.attention = ATTENTION_FLASH;
        else if (!strcmp(arg, "unfused")) s->params.compute.attention = ATTENTION_UNFUSED;
        else return cli_usage_error(cmd, "--attention must be flash or unfused, not '%s'", arg);
        s->attention_set = 1;
        break;
    case CLI_OPT_DP_OVERLAP:
        if (cli_long_arg(cmd, "--dp-overlap", arg, 0, 1, &v)) return CLI_EXIT_USAGE;
        s->params.dp_overlap_grad = (int)v;
        break;
    case CLI_OPT_GRAD_BYTES:
        if (cli_long_arg(cmd, "--grad-bytes", arg, 1, 8, &v)) return CLI_EXIT_USAGE;
        s->params.grad_comm_bytes = (double)v;
        break;
    case CLI_OPT_FRAMEWORK: return framework_option(cmd, arg, s);
    case CLI_OPT_EXPERTS: {
        if (s->experts_layers) return cli_usage_error(cmd, "--experts given twice");
        expert_map_file f;
        char msg[512] = "";
        const pl_status st = expert_map_file_read(arg, &f, msg, sizeof msg);
        if (st != PL_OK) return cli_report(cmd, st, msg);
        if (!f.busiest_over_mean) {
            expert_map_file_free(&f);
            return cli_usage_error(cmd, "--experts %s has no gpu_load or busiest_over_mean (write it with placer experts "
                                        "--out)", arg);
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
