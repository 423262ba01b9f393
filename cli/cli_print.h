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

/* For an MoE model, " (671.0B parameters, 37.6B active)" (with the
 * embedding and head: gpt_param_counts); "" for a dense one. */
void cli_moe_params_note(const gpt_config *cfg, char *buf, size_t len);

/* What l's paired ops hide, for the breakdown's hidden line (static text). */
const char *cli_overlap_note(const layout *l);

/* A stack's known pathological MoE path (its profile's moe_warning) when
 * an MoE model is predicted with it: "placer CMD: warning: NAME: TEXT" on
 * stderr; nothing otherwise. */
void cli_warn_moe_stack(const char *cmd, const framework_profile *fw, const gpt_config *cfg);

/* The layout text's keys, as --help lists them ("tp sp cp ... mem"), into buf. */
void cli_layout_keys(char *buf, size_t len);

#endif
