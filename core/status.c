/* status.c: status-code text and the pl_fail message helper. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>

const char *pl_status_str(pl_status s) {
    switch (s) {
    case PL_OK: return "ok";
    case PL_ERR_NOMEM: return "out of host memory";
    case PL_ERR_INVALID: return "invalid input";
    case PL_ERR_IO: return "I/O error";
    case PL_ERR_DB: return "database error";
    case PL_ERR_NOT_SQLITE: return "not an SQLite database";
    case PL_ERR_SCHEMA_NEWER: return "database schema is newer than this placer";
    case PL_ERR_NOT_FOUND: return "not found";
    case PL_ERR_PLACEMENT_EMPTY: return "placement has an empty field";
    case PL_ERR_PLACEMENT_JUNK: return "placement has a non-integer field";
    case PL_ERR_PLACEMENT_LENGTH: return "placement has the wrong length";
    case PL_ERR_PLACEMENT_RANGE: return "placement device index out of range";
    case PL_ERR_SCHEDULE: return "invalid schedule";
    case PL_ERR_DEVICE_OOM: return "out of device memory (cap exceeded)";
    case PL_ERR_NO_DEVICE: return "no such device";
    case PL_ERR_CUDA: return "CUDA error";
    case PL_ERR_UNSUPPORTED: return "not supported by this build";
    case PL_ERR_INTERRUPTED: return "interrupted";
    default: return "unknown status";
    }
}

pl_status pl_fail(char *msg, size_t len, pl_status s, const char *fmt, ...) {
    if (msg && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return s;
}

pl_status pl_one_line(pl_status st, char *msg, size_t len) {
    if (st != PL_OK && msg)
        for (size_t i = 0; i < len && msg[i]; i++)
            if ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f) msg[i] = '?';
    return st;
}
