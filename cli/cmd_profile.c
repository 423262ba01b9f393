/* cmd_profile.c: placeholder until the 'profile' subcommand lands. */
#include <stdio.h>

#include "cli.h"

int cmd_profile(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "placer profile: not available in this build yet\n");
    return CLI_EXIT_FAIL;
}
