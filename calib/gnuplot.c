/*
 * gnuplot.c: the reports' gnuplot (gnuplot.h).
 */
#include "gnuplot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *binary(const char *gnuplot) { return gnuplot ? gnuplot : "gnuplot"; }

pl_status gnuplot_probe(const char *gnuplot, int *cairo, char *msg, size_t len) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "%s -e 'set terminal' </dev/null 2>&1", binary(gnuplot));
    FILE *f = popen(cmd, "r");
    if (!f) return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "cannot run gnuplot");
    int pc = 0, png = 0, svg = 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char name[64];
        if (sscanf(line, " %63s", name) != 1) continue;
        pc |= !strcmp(name, "pngcairo");
        png |= !strcmp(name, "png");
        svg |= !strcmp(name, "svg");
    }
    int rc = pclose(f);
    if (rc != 0 || (!pc && !png) || !svg)
        return pl_fail(msg, len, PL_ERR_UNSUPPORTED,
                       "gnuplot with png and svg terminals is needed for the report; install gnuplot-nox "
                       "(scripts/install-deps.sh)");
    *cairo = pc;
    return PL_OK;
}

pl_status gnuplot_run(const char *gnuplot, const char *dir, const char *script, char *msg, size_t len) {
    if (strchr(dir, '\'')) return pl_fail(msg, len, PL_ERR_INVALID, "output directory has a quote");
    char cmd[3 * 4200];
    snprintf(cmd, sizeof cmd, "cd '%s' && %s '%s' </dev/null >>gnuplot.log 2>&1", dir, binary(gnuplot), script);
    if (system(cmd) != 0)
        return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "gnuplot failed on %s/%s (see %s/gnuplot.log)", dir, script,
                       dir);
    return PL_OK;
}
