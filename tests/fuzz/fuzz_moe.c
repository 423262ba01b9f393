/* fuzz_moe.c: libFuzzer target for the mixture-of-experts readers: the
 * MoE layer fit's JSON (moe_fit_parse_json) and the router histograms'
 * side file (moe_hist_parse_csv), the first byte choosing which. An
 * accepted fit must pass moe_fit_validate (finite constants in their
 * ranges, the parts the layer needs); accepted histograms must hold shares
 * in [0, 1] summing to 1 per layer; a refusal must explain itself in one
 * line and hand back nothing. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moe_fit_file.h"
#include "moe_hist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char msg[512] = "";
    const char *text = (const char *)data + 1;
    const size_t n = size - 1;
    pl_status st;
    if (data[0] & 1) {
        moe_fit f;
        st = moe_fit_parse_json(text, n, &f, msg, sizeof msg);
        if (st == PL_OK && moe_fit_validate(&f, NULL, 0) != PL_OK) abort();
    } else {
        moe_hist *h = NULL;
        int nh = 0;
        st = moe_hist_parse_csv(text, n, &h, &nh, msg, sizeof msg);
        if (st == PL_OK) {
            if (nh < 1 || !h) abort();
            for (int i = 0; i < nh; i++) {
                if (h[i].n_layers < 1 || h[i].n_experts < 1 || !h[i].run[0]) abort();
                for (int j = 0; j < h[i].n_layers; j++) {
                    double s = 0;
                    for (int e = 0; e < h[i].n_experts; e++) {
                        const double v = h[i].share[(size_t)j * h[i].n_experts + e];
                        if (!(v >= 0 && v <= 1)) abort();
                        s += v;
                    }
                    if (fabs(s - 1) > 1e-9) abort();
                }
            }
        } else if (h || nh) {
            abort();
        }
        moe_hist_free_all(h, nh);
    }
    if (st != PL_OK && (!msg[0] || strchr(msg, '\n'))) abort();
    return 0;
}
