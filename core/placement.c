/* placement.c: parse, print and validate placements. */
#include "placement.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int placement_count_fields(const char *text) {
    if (!text || !*text) return 0;
    int n = 1;
    for (const char *p = text; *p; p++) n += (*p == ',');
    return n;
}

pl_status placement_parse(const char *text, int expected_len, int n_devices, int *out,
                          char *msg, size_t len) {
    if (!text) return pl_fail(msg, len, PL_ERR_INVALID, "no placement given");
    int n = placement_count_fields(text);
    /* pass 1: syntax of every field, so "empty" and "junk" win over length */
    const char *p = text;
    for (int i = 0; i < (n ? n : 1); i++) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        const char *a = p, *b = end;
        while (a < b && isspace((unsigned char)*a)) a++;
        while (b > a && isspace((unsigned char)b[-1])) b--;
        if (a == b)
            return pl_fail(msg, len, PL_ERR_PLACEMENT_EMPTY,
                           "placement field %d is empty (expected a device index, e.g. 0,0,1)", i + 1);
        for (const char *q = a; q < b; q++)
            if (!isdigit((unsigned char)*q) && !(q == a && (*q == '-' || *q == '+')))
                return pl_fail(msg, len, PL_ERR_PLACEMENT_JUNK,
                               "placement field %d ('%.*s') is not a device index (expected e.g. 0,0,1)", i + 1,
                               (int)(b - a > 16 ? 16 : b - a), a);
        if (b - a == 1 && (*a == '-' || *a == '+'))
            return pl_fail(msg, len, PL_ERR_PLACEMENT_JUNK,
                           "placement field %d ('%c') is not a device index (expected e.g. 0,0,1)", i + 1, *a);
        p = *end ? end + 1 : end;
    }
    if (n != expected_len)
        return pl_fail(msg, len, PL_ERR_PLACEMENT_LENGTH,
                       "placement has %d entries but the graph needs %d", n, expected_len);
    /* pass 2: values and range */
    p = text;
    for (int i = 0; i < n; i++) {
        errno = 0;
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (errno || v < 0 || v >= n_devices)
            return pl_fail(msg, len, PL_ERR_PLACEMENT_RANGE,
                           "placement field %d names device %ld but only devices 0..%d exist",
                           i + 1, errno ? -1L : v, n_devices - 1);
        while (*end && *end != ',') end++;
        p = *end ? end + 1 : end;
    }
    p = text;
    for (int i = 0; i < n; i++) {
        char *end = NULL;
        out[i] = (int)strtol(p, &end, 10);
        while (*end && *end != ',') end++;
        p = *end ? end + 1 : end;
    }
    return PL_OK;
}

pl_status placement_validate(const int *dev, int n, int n_devices, char *msg, size_t len) {
    for (int i = 0; i < n; i++)
        if (dev[i] < 0 || dev[i] >= n_devices)
            return pl_fail(msg, len, PL_ERR_PLACEMENT_RANGE,
                           "placement entry %d is device %d but only devices 0..%d exist", i + 1,
                           dev[i], n_devices - 1);
    return PL_OK;
}

int placement_format(const int *dev, int n, char *buf, size_t len) {
    int total = 0;
    for (int i = 0; i < n; i++) {
        size_t off = (size_t)total < len ? (size_t)total : len;
        int w = snprintf(buf ? buf + off : NULL, buf ? len - off : 0, i ? ",%d" : "%d", dev[i]);
        total += w;
    }
    if (n == 0 && buf && len) buf[0] = 0;
    return total;
}

int placement_devices_used(const int *dev, int n) {
    unsigned long long seen = 0;
    int count = 0;
    for (int i = 0; i < n; i++) {
        if (dev[i] < 0 || dev[i] >= 64) continue;
        unsigned long long bit = 1ull << dev[i];
        if (!(seen & bit)) { seen |= bit; count++; }
    }
    return count;
}
