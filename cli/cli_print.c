/* cli_print.c: printing shared by the layout path's commands (cli_print.h). */
#include "cli_print.h"

#include <string.h>

#include "model_params.h"

void cli_moe_params_note(const gpt_config *cfg, char *buf, size_t len) {
    if (!buf || len == 0) return;
    buf[0] = 0;
    if (!cfg || !gpt_is_moe(cfg)) return;
    int64_t total = 0, active = 0;
    gpt_param_counts(cfg, 1, &total, &active);
    snprintf(buf, len, " (%.1fB parameters, %.1fB active)", total / 1e9, active / 1e9);
}

const char *cli_overlap_note(const layout *l) {
    switch (l->sched) {
    case SCHED_DUALPIPE: return "DualPipe's pairs, both directions";
    case SCHED_DUALPIPEV: return "DualPipeV's pairs";
    default: return l->ep_overlap ? "overlap=ep: the steady state's forward and backward paired" : "paired ops";
    }
}

void cli_warn_moe_stack(const char *cmd, const framework_profile *fw, const gpt_config *cfg) {
    if (fw && fw->moe_warning[0] && cfg && gpt_is_moe(cfg))
        fprintf(stderr, "placer %s: warning: %s: %s\n", cmd, fw->name, fw->moe_warning);
}

void cli_layout_keys(char *buf, size_t len) {
    if (!buf || len == 0) return;
    buf[0] = 0;
    size_t at = 0;
    for (int k = 0; k < LAYOUT_KEY_COUNT; k++) {
        const int w = snprintf(buf + at, len - at, "%s%s", k ? " " : "", layout_key_name((layout_key)k));
        if (w < 0 || (size_t)w >= len - at) return;
        at += (size_t)w;
    }
}

void cli_print_parts_json(FILE *f, const double *parts_us, double scale, int decimals) {
    fputc('{', f);
    for (int i = 0; i < LAYOUT_T_COUNT; i++) {
        if (layout_time_part_optional((layout_time_part)i) && parts_us[i] == 0) continue; /* ep, hidden: when any */
        fprintf(f, "%s\"%s\": %.*f", i ? ", " : "", layout_time_part_name((layout_time_part)i), decimals,
                parts_us[i] * scale);
    }
    fputc('}', f);
}
