/*
 * main.c: the `placer` command. Dispatches to one subcommand per workflow
 * step: profile once, simulate and train offline, confirm and calibrate on
 * hardware, report.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "placer_config.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} subcommand;

static const subcommand COMMANDS[] = {
    {"graph", cmd_graph, "print the model graph's node table"},
    {"profile", cmd_profile, "measure a machine (or a spec) into a profile database; show one"},
    {"simulate", cmd_simulate, "predict step time and memory of a placement from a profile"},
    {"layout", cmd_layout, "predict step time, MFU and memory of a parallel layout on a cluster"},
    {"step", cmd_step, "run and time real training steps on GPUs (or the CPU reference)"},
    {"train", cmd_train, "train the RL placer offline against the simulator"},
    {"search", cmd_search, "baseline and search placers (single, human, dp, random, anneal, exhaustive)"},
    {"plan", cmd_plan, "the fastest parallel layout of a model on a cluster, and its launch arguments"},
    {"confirm", cmd_confirm, "re-time a shortlist head to head on the real engine"},
    {"calibrate", cmd_calibrate, "fit the simulator to hardware timings and report its error"},
    {"report", cmd_report, "draw plots and traces from a profile database"},
    {"check-published", cmd_check_published, "predict the published large training runs and print the errors"},
    {"serve", cmd_serve, "the layout explorer, pipeline view and planner in a browser (a local web server)"},
    {"experts", cmd_experts, "place a mixture-of-experts model's experts and replicas on GPUs, against EPLB"},
};
#define N_COMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f) {
    fprintf(f, "usage: placer <command> [options]   (placer <command> --help for details)\n\n");
    fprintf(f, "Learns where each layer of a neural network should live across GPUs.\n\n");
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    fprintf(f, "\n  --version  print the version\n  --help     print this help\n");
}

int main(int argc, char **argv) {
    if (argc < 2) { /* one line, like every other usage error */
        fprintf(stderr, "placer: no command given; run 'placer --help' for the list of commands\n");
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("placer %s (CUDA engine %s)\n", PLACER_VERSION, PLACER_HAVE_CUDA ? "built" : "not built");
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "placer: unknown command '%s'; run 'placer --help' for the list\n", argv[1]);
    return CLI_EXIT_USAGE;
}
