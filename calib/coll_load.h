/*
 * coll_load.h: measured collective times from wherever a user keeps them
 * (placer layout --collectives-from): a collectives file (inputs/coll_file.h,
 * written by placer calibrate --collectives --write) or a profile database
 * with collective curves, fitted on the spot (coll_fit.h). A file is a
 * database when it starts with SQLite's 16-byte header.
 */
#ifndef PLACER_CALIB_COLL_LOAD_H
#define PLACER_CALIB_COLL_LOAD_H

#include <stddef.h>

#include "coll_curves.h"
#include "status.h"

/* Fill *m from path (m's memory is the caller's). PL_ERR_NOT_FOUND or
 * PL_ERR_IO when path cannot be read ("cannot read collectives '...'"), the
 * file reader's or the fit's status otherwise (a database's message starts
 * "collectives from PATH: "). */
pl_status calib_coll_load(const char *path, coll_measured *m, char *msg, size_t len);

#endif
