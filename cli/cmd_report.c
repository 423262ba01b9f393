/* cmd_report.c: placeholder until the 'report' subcommand lands. */
#include <stdio.h>

#include "cli.h"

int cmd_report(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "placer report: not available in this build yet\n");
    return CLI_EXIT_FAIL;
}
