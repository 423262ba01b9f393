/* common.c: error reporting and defaults shared by the subcommands. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_report(const char *cmd, pl_status st, const char *detail) {
    if (detail && *detail) fprintf(stderr, "placer %s: %s\n", cmd, detail);
    else fprintf(stderr, "placer %s: %s\n", cmd, pl_status_str(st));
    return cli_exit_code(st);
}

int cli_exit_code(pl_status st) {
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

int cli_working_db(const char *cmd, const char **path) {
    static const char work[] = "placer-runs.db";
    const char *env = getenv("PLACER_DB");
    *path = NULL;
    if (env && *env) {
        *path = env;
        return CLI_EXIT_OK;
    }
    if (access(work, F_OK) == 0) {
        fprintf(stderr, "placer %s: no --db given: writing into ./%s\n", cmd, work);
        *path = work;
        return CLI_EXIT_OK;
    }
    const char *src = cli_default_db();
    if (!src)
        return cli_usage_error(cmd, "no profile database found; give --db FILE (placer profile --from-spec "
                                    "t4x4-pcie --db FILE makes one)");
    /* copy into a temporary name, then rename: a kill leaves no half file */
    errno = 0;
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", work, (long)getpid());
    FILE *in = fopen(src, "rb"), *out = in ? fopen(tmp, "wb") : NULL;
    int ok = in && out;
    char buf[1 << 16];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    if (in && ferror(in)) ok = 0;
    if (in) fclose(in);
    if (out && fclose(out)) ok = 0;
    if (!ok || rename(tmp, work) != 0) {
        remove(tmp);
        fprintf(stderr, "placer %s: cannot copy %s to ./%s (%s); give --db FILE\n", cmd, src, work,
                errno ? strerror(errno) : "read or write error");
        return CLI_EXIT_FAIL;
    }
    fprintf(stderr, "placer %s: no --db given: writing into ./%s, a copy of %s (the shipped profile stays as it is)\n",
            cmd, work, src);
    *path = work;
    return CLI_EXIT_OK;
}
