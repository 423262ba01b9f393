/*
 * placer_run.h: the CLI tests' way to run the built binary (PLACER_BIN)
 * with a shell word list of arguments and keep what it prints.
 */
#ifndef PLACER_TESTS_PLACER_RUN_H
#define PLACER_TESTS_PLACER_RUN_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run `PLACER_BIN args` (in dir first when dir is not NULL); its stdout
 * and stderr into malloc'd strings *out and *err (each may be NULL: not
 * kept). Returns the exit code, -1 when it did not exit. */
static inline int placer_run(const char *dir, const char *args, char **out, char **err) {
    char cmd[8192], of[] = "/tmp/placer-test-out-XXXXXX", ef[] = "/tmp/placer-test-err-XXXXXX";
    close(mkstemp(of));
    close(mkstemp(ef));
    if (dir) snprintf(cmd, sizeof cmd, "cd %s && %s %s >%s 2>%s", dir, PLACER_BIN, args, of, ef);
    else snprintf(cmd, sizeof cmd, "%s %s >%s 2>%s", PLACER_BIN, args, of, ef);
    int rc = system(cmd);
    const char *files[2] = {of, ef};
    char **dst[2] = {out, err};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "r");
        size_t cap = 1 << 16, n = 0, k;
        char *buf = malloc(cap);
        while (f && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
            n += k;
            if (n + 1 >= cap) buf = realloc(buf, cap *= 2);
        }
        buf[n] = 0;
        if (f) fclose(f);
        unlink(files[i]);
        if (dst[i]) *dst[i] = buf;
        else free(buf);
    }
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

#endif
