/*
 * status.h: the status codes every library function in placer returns.
 *
 * Library code never exits and never prints; it returns one of these and,
 * where the caller passes a message buffer, a one-line detail. Only cli/
 * turns a status into text on stderr and an exit code.
 */
#ifndef PLACER_CORE_STATUS_H
#define PLACER_CORE_STATUS_H

#include <stddef.h>

typedef enum {
    PL_OK = 0,
    PL_ERR_NOMEM,            /* host allocation failed */
    PL_ERR_INVALID,          /* bad argument or bad input, see message */
    PL_ERR_IO,               /* file could not be read or written */
    PL_ERR_DB,               /* SQLite reported an error */
    PL_ERR_NOT_SQLITE,       /* the file exists but is not an SQLite database */
    PL_ERR_SCHEMA_NEWER,     /* the database was written by a newer placer */
    PL_ERR_NOT_FOUND,        /* missing file, or nothing stored for the request */
    PL_ERR_PLACEMENT_EMPTY,  /* placement text has an empty field */
    PL_ERR_PLACEMENT_JUNK,   /* placement text has a non-integer field */
    PL_ERR_PLACEMENT_LENGTH, /* placement has the wrong number of entries */
    PL_ERR_PLACEMENT_RANGE,  /* a device index is out of range */
    PL_ERR_SCHEDULE,         /* impossible schedule (m does not divide batch...) */
    PL_ERR_DEVICE_OOM,       /* a placement does not fit a device's memory cap */
    PL_ERR_NO_DEVICE,        /* no GPU, or the requested GPU does not exist */
    PL_ERR_CUDA,             /* CUDA, cuBLAS or NCCL failed */
    PL_ERR_UNSUPPORTED,      /* feature not built in (for example CUDA off) */
    PL_ERR_INTERRUPTED,      /* stopped on request; partial work was committed */
    PL_STATUS_COUNT
} pl_status;

/* Short English description of a status. Never NULL; unknown codes give
 * "unknown status". The string is static. */
const char *pl_status_str(pl_status s);

/* Write a formatted detail into msg (if msg != NULL and len > 0) and return s.
 * Lets library code do `return pl_fail(msg, len, PL_ERR_INVALID, "...", ...)`. */
/* Keeps a message on one line: when st is not PL_OK, every control character
 * of msg (a newline echoed from a value read from input) becomes '?'. msg may
 * be NULL. Returns st, so a parser can `return pl_one_line(st, msg, len)`. */
pl_status pl_one_line(pl_status st, char *msg, size_t len);

pl_status pl_fail(char *msg, size_t len, pl_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif
