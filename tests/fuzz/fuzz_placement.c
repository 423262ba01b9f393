/* fuzz_placement.c: libFuzzer target for placement_parse and
 * placement_format. The first byte picks the expected length and device
 * count so that every error path is reachable. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    int expected = 1 + data[0] % 64;
    int ndev = 1 + data[1] % 16;
    char *text = malloc(size - 1);
    if (!text) return 0;
    memcpy(text, data + 2, size - 2);
    text[size - 2] = 0;
    int out[64];
    char msg[256];
    pl_status st = placement_parse(text, expected, ndev, out, msg, sizeof msg);
    if (st == PL_OK) {
        if (placement_validate(out, expected, ndev, NULL, 0) != PL_OK) abort();
        char buf[64 * 4];
        int n = placement_format(out, expected, buf, sizeof buf);
        if (n < 0 || (size_t)n >= sizeof buf) abort();
        int back[64];
        if (placement_parse(buf, expected, ndev, back, NULL, 0) != PL_OK) abort();
        if (memcmp(back, out, sizeof(int) * (size_t)expected)) abort();
    } else if (strlen(msg) == 0) {
        abort(); /* every refusal must explain itself */
    }
    free(text);
    return 0;
}
