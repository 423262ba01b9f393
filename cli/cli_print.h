/*
 * cli_print.h: printing shared by the subcommands of the layout path
 * (placer layout, placer plan, placer check-published): the one memory unit
 * and the time breakdown in JSON.
 *
 * Memory unit: every memory figure these commands print for people is in
 * GB = 10^9 bytes, the unit of GPU datasheets and of the cluster files'
 * sources; JSON and the exports carry bytes. (An "80 GB" H100 holds 80 GiB
 * = 85.9 GB, and is printed as 85.9 GB.)
 */
#ifndef PLACER_CLI_PRINT_H
#define PLACER_CLI_PRINT_H

#include <stdint.h>
#include <stdio.h>

#include "layout_sim.h"

#define CLI_GB 1e9

/* bytes in GB (10^9 bytes). */
static inline double cli_gb(int64_t bytes) { return (double)bytes / CLI_GB; }

/* The --help line that states the unit. */
#define CLI_UNITS_HELP "Memory is in GB = 10^9 bytes (GPU datasheets' unit: an \"80 GB\" GPU of 80 GiB is 85.9 GB).\n"

/* {"compute": x, ...} over every layout_time_part, each parts_us[i] * scale
 * with `decimals` digits (no newline). */
void cli_print_parts_json(FILE *f, const double *parts_us, double scale, int decimals);

#endif
