/* cmd_calibrate.c: placeholder until the 'calibrate' subcommand lands. */
#include <stdio.h>

#include "cli.h"

int cmd_calibrate(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "placer calibrate: not available in this build yet\n");
    return CLI_EXIT_FAIL;
}
