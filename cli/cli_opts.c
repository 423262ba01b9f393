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
}

int cli_stack_option(const char *cmd, int ch, const char *arg, cli_stack *s) {
    long v;
    switch (ch) {
    case CLI_OPT_ATTENTION:
        if (!strcmp(arg, "flash")) s->params.compute.attention = ATTENTION_FLASH;
        else if (!strcmp(arg, "unfused")) s->params.compute.attention = ATTENTION_UNFUSED;
        else return cli_usage_error(cmd, "--attention must be flash or unfused, not '%s'", arg);
        break;
    case CLI_OPT_DP_OVERLAP:
        if (cli_long_arg(cmd, "--dp-overlap", arg, 0, 1, &v)) return CLI_EXIT_USAGE;
        s->params.dp_overlap_grad = (int)v;
        break;
    case CLI_OPT_GRAD_BYTES:
        if (cli_long_arg(cmd, "--grad-bytes", arg, 1, 8, &v)) return CLI_EXIT_USAGE;
        s->params.grad_comm_bytes = (double)v;
        break;
    case CLI_OPT_FRAMEWORK: {
        char msg[512] = "";
        if (s->fw_set) return cli_usage_error(cmd, "--framework given twice");
        if (framework_load(arg, &s->fw, msg, sizeof msg) != PL_OK) return cli_usage_error(cmd, "--framework: %s", msg);
        framework_apply_time(&s->fw, &s->params.compute, &s->params.step_fixed_us);
        s->params.framework = &s->fw;
        s->fw_set = 1;
        break;
    }
    default: return -1;
    }
    s->set = 1;
    return 0;
}
