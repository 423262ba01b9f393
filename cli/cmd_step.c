/* cmd_step.c: placeholder until the 'step' subcommand lands. */
#include <stdio.h>

#include "cli.h"

int cmd_step(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "placer step: not available in this build yet\n");
    return CLI_EXIT_FAIL;
}
