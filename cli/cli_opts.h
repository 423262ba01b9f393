/*
 * cli_opts.h: option parsing shared by the subcommands of the layout path
 * (placer layout, placer plan, placer check-published): numbers in a range
 * with one message form, and the software-stack options that describe how
 * the layout simulator models the framework (--attention, --dp-overlap,
 * --grad-bytes, --framework), declared once so that both commands take the
 * same flags, with the same help text and the same messages.
 *
 * --framework names the stack a prediction is for; in placer plan the same
 * value is also what the plan is exported to, and the search keeps only the
 * layouts that stack runs (plan.h: plan_framework). plan takes --for as an
 * alias of it (the option's older name).
 *
 * Each helper that reports prints one line "placer <cmd>: ..." on stderr
 * (cli_usage_error) and returns CLI_EXIT_USAGE; 0 means parsed.
 */
#ifndef PLACER_CLI_OPTS_H
#define PLACER_CLI_OPTS_H

#include <getopt.h>

#include "expert_map_file.h"
#include "framework.h"
#include "layout_sim.h"
#include "moe_fit.h"
#include "plan.h"

/* text as a decimal integer in lo..hi into *out: 0, or CLI_EXIT_USAGE after
 * "<name> must be an integer in lo..hi, not '<text>'". */
int cli_long_arg(const char *cmd, const char *name, const char *text, long lo, long hi, long *out);

/* text as a whole decimal number (no trailing junk, no overflow) into *out:
 * 1, else 0 (nothing printed: each option words its own range). */
int cli_double_arg(const char *text, double *out);

/* getopt_long codes of the stack options (outside the ASCII range, so any
 * command's short codes stay free). */
enum { CLI_OPT_ATTENTION = 0x1000, CLI_OPT_DP_OVERLAP, CLI_OPT_GRAD_BYTES, CLI_OPT_FRAMEWORK, CLI_OPT_MOE_FIT,
       CLI_OPT_EXPERT_CV, CLI_OPT_EXPERTS };

/* The three entries for a command's struct option table. */
#define CLI_STACK_OPTIONS                                                                                            \
    {"attention", required_argument, 0, CLI_OPT_ATTENTION}, {"dp-overlap", required_argument, 0, CLI_OPT_DP_OVERLAP}, \
        {"grad-bytes", required_argument, 0, CLI_OPT_GRAD_BYTES}, {"framework", required_argument, 0, CLI_OPT_FRAMEWORK}, \
        {"moe-fit", required_argument, 0, CLI_OPT_MOE_FIT}, {"expert-cv", required_argument, 0, CLI_OPT_EXPERT_CV}, \
        {"experts", required_argument, 0, CLI_OPT_EXPERTS}

/* Their --help lines (16-column option field, as the commands' own): the
 * simulator's settings, then --framework as placer layout reads it
 * (placer plan words its own: CLI_PLAN_FRAMEWORK_HELP). */
#define CLI_STACK_SIM_HELP                                                                                           \
    "  --attention     flash (default) or unfused attention kernels (2021's Megatron); given,\n"                     \
    "                  it wins over --framework's kernel\n"                                                        \
    "  --dp-overlap    1 (default): gradient buckets reduced during backward; 0: after it\n"                          \
    "                  (Megatron's 'local' DDP of SC21)\n"                                                            \
    "  --grad-bytes    bytes per gradient element on the wire (default 4: fp32)\n"                               \
    "  --moe-fit F     the MoE layer's constants from F, a file fit_sweeps.py moe --json wrote\n"                  \
    "                  (default: the compiled-in H100 fit; docs/moe.md says how to refit)\n"                        \
    "  --expert-cv X   spread of routed tokens over experts (coefficient of variation, default\n"                  \
    "                  0.1, the stated figure for a trained router; 0: balanced): the busiest\n"                    \
    "                  expert rank's load follows from it (docs/moe.md)\n" \
    "  --experts FILE  an expert placement (placer experts --out FILE): each MoE layer's busiest GPU\n"               \
    "                  over the mean becomes that layer's load factor, for layouts of the placement's\n"             \
    "                  ep (docs/experts.md)\n"
#define CLI_STACK_HELP                                                                                               \
    CLI_STACK_SIM_HELP                                                                                               \
    "  --framework F   the software stack: megatron (default), torchtitan, hf, or a profile\n"              \
    "                  file (placer calibrate --layout-runs writes one; docs/frameworks.md)\n"
#define CLI_PLAN_FRAMEWORK_HELP                                                                                      \
    "  --framework F   the software stack the plan is predicted for and exported to: megatron,\n"                    \
    "                  torchtitan, deepspeed, hf, any (default), or a profile file\n"                                \
    "                  (docs/frameworks.md). Its profile gives the prediction's figures\n"                          \
    "                  (deepspeed and any have none: Megatron's); the search keeps only the\n"                      \
    "                  layouts it runs as planned (megatron, torchtitan, deepspeed; a profile\n"                    \
    "                  file by its name; hf and any: all)\n"                                                        \
    "  --for F         an alias of --framework (its older name)\n"

/* The stack as the options describe it. */
typedef struct {
    layout_sim_params params; /* layout_sim_params_default, then the options */
    int set;                  /* 1: a stack option was given */
    framework_profile fw;     /* --framework (framework_default when none); params.framework
                                 points here once given, so the struct must not move after */
    int fw_set;               /* 1: --framework was given */
    int attention_set;        /* 1: --attention was given: it wins over the profile's kernel,
                                 whichever comes first */
    int plans;                /* set by placer plan before parsing: --framework also names
                                 what the plan runs on (any and deepspeed need no profile) */
    plan_framework runs;      /* placer plan: what the named stack runs (ANY when not given,
                                 or for a profile whose name is no plan_framework's) */
    moe_fit moe_fit;          /* --moe-fit: params.moe.fit points here once given */
    double moe_layer_load[EXPERT_MAP_MAX_LAYERS]; /* --experts: the placement's busiest/mean per MoE layer;
                                 params.moe_layer_load points here once given */
    int experts_layers;       /* --experts: its MoE layers (0: none given) */
    int experts_ep;           /* --experts: its expert-parallel size */
} cli_stack;

void cli_stack_default(cli_stack *s);

/* If ch is a stack option code, parse arg into s: 0 parsed, CLI_EXIT_USAGE
 * after one line for a bad value or a second --framework. -1 when ch is no
 * stack option. */
int cli_stack_option(const char *cmd, int ch, const char *arg, cli_stack *s);

/* cli_stack_option without printing, for callers that report elsewhere
 * (placer serve answers HTTP 400): 0 parsed, -1 no stack option,
 * CLI_EXIT_USAGE with the same line (no "placer <cmd>: " prefix) in msg. */
int cli_stack_set(cli_stack *s, int ch, const char *arg, char *msg, size_t len);

#endif
