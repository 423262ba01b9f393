/* util.c: random numbers, clock, statistics and size parsing. */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void pl_rng_seed(pl_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t pl_rng_next(pl_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double pl_rng_uniform(pl_rng *r) { return (double)(pl_rng_next(r) >> 11) * 0x1.0p-53; }

int pl_rng_int(pl_rng *r, int n) {
    if (n <= 1) return 0;
    return (int)(((pl_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

double pl_rng_normal(pl_rng *r) {
    double u1 = pl_rng_uniform(r), u2 = pl_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

void pl_rng_shuffle(pl_rng *r, int *a, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = pl_rng_int(r, i + 1);
        int t = a[i]; a[i] = a[j]; a[j] = t;
    }
}

double pl_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double pl_median(const double *a, int n, double *tmp) {
    if (n <= 0) return NAN;
    memcpy(tmp, a, sizeof *a * (size_t)n);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    return (n & 1) ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

void pl_mean_sd(const double *a, int n, double *mean, double *sd) {
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += a[i];
    double m = n > 0 ? s / n : NAN;
    for (int i = 0; i < n; i++) ss += (a[i] - m) * (a[i] - m);
    *mean = m;
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
}

pl_status pl_parse_bytes(const char *text, int64_t *out, char *msg, size_t len) {
    if (!text || !*text) return pl_fail(msg, len, PL_ERR_INVALID, "empty size (use e.g. 16GiB or 512MB)");
    errno = 0;
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || errno || !isfinite(v) || v <= 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "size '%s' is not a positive number of bytes (use e.g. 16GiB)", text);
    while (isspace((unsigned char)*end)) end++;
    double mult = 1;
    char unit[8] = {0};
    size_t ul = strlen(end);
    if (ul >= sizeof unit)
        return pl_fail(msg, len, PL_ERR_INVALID, "unknown size unit in '%s' (use B, KB, MB, GB, KiB, MiB, GiB)", text);
    for (size_t i = 0; i < ul; i++) unit[i] = (char)toupper((unsigned char)end[i]);
    if (!*unit || !strcmp(unit, "B")) mult = 1;
    else if (!strcmp(unit, "K") || !strcmp(unit, "KIB")) mult = 1024.0;
    else if (!strcmp(unit, "M") || !strcmp(unit, "MIB")) mult = 1024.0 * 1024;
    else if (!strcmp(unit, "G") || !strcmp(unit, "GIB")) mult = 1024.0 * 1024 * 1024;
    else if (!strcmp(unit, "KB")) mult = 1e3;
    else if (!strcmp(unit, "MB")) mult = 1e6;
    else if (!strcmp(unit, "GB")) mult = 1e9;
    else if (!strcmp(unit, "T") || !strcmp(unit, "TIB")) mult = 1024.0 * 1024 * 1024 * 1024;
    else if (!strcmp(unit, "TB")) mult = 1e12;
    else return pl_fail(msg, len, PL_ERR_INVALID, "unknown size unit in '%s' (use B, KB, MB, GB, KiB, MiB, GiB)", text);
    double b = v * mult;
    if (b < 1 || b > 9.0e18) return pl_fail(msg, len, PL_ERR_INVALID, "size '%s' is out of range", text);
    *out = (int64_t)b;
    return PL_OK;
}

pl_status pl_parse_mem_cap(const char *text, int64_t device_bytes, int64_t *out, char *msg, size_t len) {
    if (!text || !*text) return pl_fail(msg, len, PL_ERR_INVALID, "empty memory cap (use e.g. 8GiB or 50%%)");
    size_t n = strlen(text);
    if (text[n - 1] == '%') {
        char *end = NULL;
        errno = 0;
        double p = strtod(text, &end);
        if (end != text + n - 1 || errno || !(p > 0) || p > 100)
            return pl_fail(msg, len, PL_ERR_INVALID, "memory cap '%s' must be a percentage in (0, 100]", text);
        int64_t b = (int64_t)(p / 100.0 * (double)device_bytes);
        if (b < 1) return pl_fail(msg, len, PL_ERR_INVALID, "memory cap '%s' rounds to zero bytes", text);
        *out = b;
        return PL_OK;
    }
    char *end = NULL;
    errno = 0;
    double f = strtod(text, &end);
    if (end != text && *end == 0 && !errno && f > 0 && f <= 1.0) {
        int64_t b = (int64_t)(f * (double)device_bytes);
        if (b < 1) return pl_fail(msg, len, PL_ERR_INVALID, "memory cap '%s' rounds to zero bytes", text);
        *out = b;
        return PL_OK;
    }
    return pl_parse_bytes(text, out, msg, len);
}

void pl_format_bytes(double b, char *buf, size_t len) {
    const char *u[] = {"B", "kB", "MB", "GB", "TB"};
    int i = 0;
    while (fabs(b) >= 1000 && i < 4) { b /= 1000; i++; }
    snprintf(buf, len, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

void pl_json_text(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
}

void pl_json_string(FILE *f, const char *s) {
    fputc('"', f);
    pl_json_text(f, s);
    fputc('"', f);
}
