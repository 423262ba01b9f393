/*
 * coll_file.h: a collectives file, the JSON form of coll_curves.h's data
 * that `placer calibrate --collectives --write FILE` writes and
 * `placer layout --collectives-from FILE` reads (docs/layouts.md,
 * "Collectives from measurements"):
 *
 *   {
 *     "format": "placer-collectives",      required, exactly this
 *     "version": 1,                        required
 *     "source": "...",                     required, non-empty: where the figures come from
 *     "link": "intra-node",                required: what the curves measured (the only link
 *                                          the profiler measures: processes of one host)
 *     "model": "...",                      optional free text
 *     "kinds": {                           required, 1-3 of all_reduce, all_gather, reduce_scatter
 *       "all_reduce": {"base_us": 0, "alpha_us": 21.5, "busbw_gb_s": 1.9,
 *                      "fit": {...}},      fit: optional, free-form (what the fit reported)
 *       ...
 *     },
 *     "curves": [                          optional (absent: the fitted model only)
 *       {"kind": "all_reduce", "ranks": 2, "bytes": [4, 16, ...], "us": [30.1, 31.0, ...]}
 *     ]
 *   }
 * Units: microseconds, bytes, GB/s (1e9 bytes/s) of bus bandwidth. No
 * unknown keys (a misspelt key is an error naming it); every error is one
 * line naming the key by its path, as cluster files do.
 */
#ifndef PLACER_INPUTS_COLL_FILE_H
#define PLACER_INPUTS_COLL_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "coll_curves.h"
#include "status.h"

/* Largest file read (bytes). */
#define COLL_FILE_MAX (1 << 20)

/* Parse a collectives file's text into *out (use_curves 0; validated with
 * coll_measured_validate). PL_OK, or PL_ERR_INVALID with one line in msg;
 * *out untouched on failure. */
pl_status coll_file_parse(const char *text, size_t n, coll_measured *out, char *msg, size_t len);

/* Read and parse path. PL_ERR_NOT_FOUND / PL_ERR_IO for a file that cannot
 * be read; as coll_file_parse otherwise (the message names the path). */
pl_status coll_file_load(const char *path, coll_measured *out, char *msg, size_t len);

/* Write m as a collectives file to f. fit_json may be NULL, else an array
 * of COLL_KIND_COUNT JSON object texts (NULL entries: none) written as each
 * kind's "fit". PL_ERR_INVALID when m does not validate, PL_ERR_IO when a
 * write fails. */
pl_status coll_file_write(FILE *f, const coll_measured *m, const char *const *fit_json);

/* The file's name of kind k: "all_reduce", "all_gather", "reduce_scatter". */
const char *coll_file_kind_name(coll_kind k);

#endif
