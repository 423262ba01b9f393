/* fuzz_frameworks.c: libFuzzer target for the framework-profile parser
 * (framework_parse_json) and the layout-runs CSV parser
 * (layout_runs_parse), the first byte choosing which. An accepted profile
 * must hold its constants in their documented ranges; an accepted runs
 * file must hold positive step times and GPU counts; a refusal must
 * explain itself in one line. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "framework_file.h"
#include "layout_runs_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char msg[512] = "";
    const char *text = (const char *)data + 1;
    const size_t n = size - 1;
    pl_status st;
    if (data[0] & 1) {
        framework_profile f;
        st = framework_parse_json(text, n, &f, msg, sizeof msg);
        if (st == PL_OK) {
            for (int k = 0; k < FW_K_COUNT; k++)
                if (!(f.k[k] > 0) || !isfinite(f.k[k])) abort();
            if (!(f.reserve_factor >= 1) || f.logits_bytes < 0 || !f.name[0]) abort();
        }
    } else {
        layout_run *runs = NULL;
        int nr = 0;
        st = layout_runs_parse(text, n, &runs, &nr, msg, sizeof msg);
        if (st == PL_OK) {
            if (nr < 1 || !runs) abort();
            for (int i = 0; i < nr; i++)
                if (!(runs[i].step_us > 0) || runs[i].gpus < 1 || runs[i].seq < 1) abort();
        } else if (runs || nr) {
            abort();
        }
        free(runs);
    }
    if (st != PL_OK && (!msg[0] || strchr(msg, '\n'))) abort();
    return 0;
}
