/* cmd_simulate.c: placeholder until the 'simulate' subcommand lands. */
#include <stdio.h>

#include "cli.h"

int cmd_simulate(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "placer simulate: not available in this build yet\n");
    return CLI_EXIT_FAIL;
}
