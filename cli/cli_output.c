/* cli_output.c: printing and parsing helpers the thin commands share (cli_output.h). */
#include "cli_output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "util.h"

const char *cli_plural(long n) { return n == 1 ? "" : "s"; }

const char *cli_json_bool(int v) { return v ? "true" : "false"; }

int cli_parse_int(const char *text, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*text || *end || errno || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

void cli_print_session_header(const policy_session *ss, const policy_session_options *so, const char *prefix) {
    char key[128], cap[32] = "device memory";
    gpt_config_key(&ss->cfg, key, sizeof key);
    if (ss->cap_bytes > 0) pl_format_bytes((double)ss->cap_bytes, cap, sizeof cap);
    printf("%sprofile %s (%s, %d device%s), graph %s\n", prefix, ss->p->machine, ss->p->source, ss->p->n_devices,
           cli_plural(ss->p->n_devices), key);
    printf("%d units (%s grouping), m=%d %s, cap %s, simulator parameters %s\n", ss->gr->n_groups,
           grouping_mode_name(ss->gr->mode), so->micro_batches, schedule_order_name(so->order), cap,
           ss->n_sim_params ? "calibrated" : "neutral");
}
