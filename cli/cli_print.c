/* cli_print.c: printing shared by the layout path's commands (cli_print.h). */
#include "cli_print.h"

void cli_print_parts_json(FILE *f, const double *parts_us, double scale, int decimals) {
    fputc('{', f);
    for (int i = 0; i < LAYOUT_T_COUNT; i++) {
        if (i == LAYOUT_T_EP && parts_us[i] == 0) continue; /* dense models: no MoE dispatch part */
        fprintf(f, "%s\"%s\": %.*f", i ? ", " : "", layout_time_part_name((layout_time_part)i), decimals,
                parts_us[i] * scale);
    }
    fputc('}', f);
}
