/* cmd_search.c: placeholder until the 'search' subcommand lands. */
#include <stdio.h>

#include "cli.h"

int cmd_search(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "placer search: not available in this build yet\n");
    return CLI_EXIT_FAIL;
}
