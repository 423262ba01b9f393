/* cmd_confirm.c: placeholder until the 'confirm' subcommand lands. */
#include <stdio.h>

#include "cli.h"

int cmd_confirm(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "placer confirm: not available in this build yet\n");
    return CLI_EXIT_FAIL;
}
