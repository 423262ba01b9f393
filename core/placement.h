/*
 * placement.h: a placement is one device index per node (or per group when
 * a grouping is applied). Its text form is comma-separated indices,
 * "0,0,1,1". A wrong length, an index out of range, an empty field or junk
 * is an error with its own status, never a guess.
 */
#ifndef PLACER_CORE_PLACEMENT_H
#define PLACER_CORE_PLACEMENT_H

#include <stddef.h>

#include "status.h"

#define PLACEMENT_MAX_DEVICES 64

/* Parse text into out[0..expected_len). n_devices bounds the indices
 * (0 <= d < n_devices). Whitespace around fields is allowed.
 * Returns PL_OK, or one of PL_ERR_PLACEMENT_EMPTY, _JUNK, _LENGTH, _RANGE
 * (checked in that order, first offending field named in msg), or
 * PL_ERR_INVALID when text is NULL. out is untouched on failure. */
pl_status placement_parse(const char *text, int expected_len, int n_devices, int *out,
                          char *msg, size_t len);

/* Count the comma-separated fields of text (for callers that learn the
 * length from the input). Returns 0 for NULL or "". */
int placement_count_fields(const char *text);

/* Check an already-parsed placement. Returns PL_OK or PL_ERR_PLACEMENT_RANGE. */
pl_status placement_validate(const int *dev, int n, int n_devices, char *msg, size_t len);

/* Print "0,0,1" into buf. Returns the number of characters the full text
 * needs (excluding the NUL), like snprintf; truncated if buf is too small. */
int placement_format(const int *dev, int n, char *buf, size_t len);

/* Number of distinct devices used. */
int placement_devices_used(const int *dev, int n);

#endif
