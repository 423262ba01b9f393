/* cmd_train.c: placeholder until the 'train' subcommand lands. */
#include <stdio.h>

#include "cli.h"

int cmd_train(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "placer train: not available in this build yet\n");
    return CLI_EXIT_FAIL;
}
