/*
 * util.h: small shared helpers: a seeded random generator, a monotonic
 * clock, medians, and byte-size parsing for memory caps.
 *
 * Every random choice in placer takes an explicit seed; there is no global
 * generator.
 */
#ifndef PLACER_CORE_UTIL_H
#define PLACER_CORE_UTIL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "status.h"

/* xoshiro256** seeded through splitmix64. Copyable value type. */
typedef struct { uint64_t s[4]; } pl_rng;

void pl_rng_seed(pl_rng *r, uint64_t seed);
uint64_t pl_rng_next(pl_rng *r);
/* Uniform double in [0, 1). */
double pl_rng_uniform(pl_rng *r);
/* Uniform integer in [0, n), n >= 1. */
int pl_rng_int(pl_rng *r, int n);
/* Standard normal (Box-Muller). */
double pl_rng_normal(pl_rng *r);
/* Fisher-Yates shuffle of n ints. */
void pl_rng_shuffle(pl_rng *r, int *a, int n);

/* Monotonic wall clock in microseconds. */
double pl_now_us(void);

/* Median of n doubles (n >= 1); a sorts a scratch copy of the values.
 * Returns NAN for n <= 0. tmp must hold n doubles (may alias nothing). */
double pl_median(const double *a, int n, double *tmp);

/* Mean and sample standard deviation (sd = 0 for n < 2). */
void pl_mean_sd(const double *a, int n, double *mean, double *sd);

/* Parse a byte size: "123", "16GB", "16GiB", "512MiB", "1.5G" (G = GiB).
 * Returns PL_ERR_INVALID with a message on junk, zero or a negative size. */
pl_status pl_parse_bytes(const char *text, int64_t *out, char *msg, size_t len);

/* Parse a memory cap: a byte size, or a fraction of the device memory
 * written "50%" or "0.5" (a plain number <= 1.0 is a fraction).
 * device_bytes is the card's memory. */
pl_status pl_parse_mem_cap(const char *text, int64_t device_bytes, int64_t *out, char *msg,
                           size_t len);

/* Format bytes as "823.0 MB"-style text (powers of 1000 for readability
 * next to measured bandwidths: MB, GB). */
void pl_format_bytes(double bytes, char *buf, size_t len);

/* Write s on f as the inside of a JSON string: '"', '\\' and control
 * characters escaped, no quotes (for text that shares a string). */
void pl_json_text(FILE *f, const char *s);
/* Write s on f as a JSON string, in quotes. */
void pl_json_string(FILE *f, const char *s);

#endif
