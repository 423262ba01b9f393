/*
 * cli_output.h: small printing and parsing helpers the thin commands share
 * (placer simulate, search, train, calibrate): plural endings, JSON
 * booleans, integer options in a range, and the problem header that search
 * and train both open with. Library code returns data; these print it.
 */
#ifndef PLACER_CLI_OUTPUT_H
#define PLACER_CLI_OUTPUT_H

#include "session.h"

/* "" for 1, "s" otherwise. */
const char *cli_plural(long n);

/* "true" or "false". */
const char *cli_json_bool(int v);

/* Parse text as a whole decimal integer in lo..hi into *out; 1 on success,
 * 0 (and *out untouched) for junk, an empty text or a value out of range. */
int cli_parse_int(const char *text, long lo, long hi, long *out);

/* The two lines search and train open with: "<prefix>profile M (S, N
 * devices), graph K" and "U units (G grouping), m=M ORDER, cap C, simulator
 * parameters calibrated|neutral". prefix may be "". */
void cli_print_session_header(const policy_session *ss, const policy_session_options *so, const char *prefix);

#endif
