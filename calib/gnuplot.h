/*
 * gnuplot.h: the gnuplot binary the reports draw with (placer report and
 * report --transfer): which PNG terminal it has, and one script run in the
 * output directory.
 */
#ifndef PLACER_CALIB_GNUPLOT_H
#define PLACER_CALIB_GNUPLOT_H

#include <stddef.h>

#include "status.h"

/* Ask gnuplot (NULL: "gnuplot" on the PATH) for its terminals: *cairo 1
 * when it has pngcairo, 0 when only png. PL_ERR_UNSUPPORTED with one line
 * when it cannot run or lacks png or svg. */
pl_status gnuplot_probe(const char *gnuplot, int *cairo, char *msg, size_t len);

/* Run gnuplot on script (a file name in dir) with dir as the working
 * directory, its output appended to dir/gnuplot.log. PL_ERR_INVALID for a
 * dir holding a quote, PL_ERR_UNSUPPORTED when gnuplot fails. */
pl_status gnuplot_run(const char *gnuplot, const char *dir, const char *script, char *msg, size_t len);

#endif
