/* common.c: error reporting and defaults shared by the subcommands. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int cli_report(const char *cmd, pl_status st, const char *detail) {
    if (detail && *detail) fprintf(stderr, "placer %s: %s\n", cmd, detail);
    else fprintf(stderr, "placer %s: %s\n", cmd, pl_status_str(st));
    switch (st) {
    case PL_OK: return CLI_EXIT_OK;
    case PL_ERR_INVALID:
    case PL_ERR_NOT_FOUND:
    case PL_ERR_NOT_SQLITE:
    case PL_ERR_SCHEMA_NEWER:
    case PL_ERR_PLACEMENT_EMPTY:
    case PL_ERR_PLACEMENT_JUNK:
    case PL_ERR_PLACEMENT_LENGTH:
    case PL_ERR_PLACEMENT_RANGE:
    case PL_ERR_SCHEDULE:
    case PL_ERR_NO_DEVICE:
        return CLI_EXIT_USAGE;
    default:
        return CLI_EXIT_FAIL;
    }
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "placer %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_EXIT_USAGE;
}

int cli_stderr_is_tty(void) { return isatty(2); }

const char *cli_default_db(void) {
    const char *env = getenv("PLACER_DB");
    if (env && *env) return env;
    static const char *names[] = {"data/h200x2.db", "data/h200x1.db", "data/h200x2-spec.db",
                                  "data/t4x4-pcie.db"};
    static char buf[4096];
    for (int i = 0; i < 4; i++) {
        snprintf(buf, sizeof buf, "%s/%s", PLACER_SOURCE_DIR, names[i]);
        if (access(buf, R_OK) == 0) return buf;
        if (access(names[i], R_OK) == 0) return names[i];
    }
    return NULL;
}
