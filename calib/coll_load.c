/* coll_load.c: measured collectives from a file or a profile database (coll_load.h). */
#include "coll_load.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "coll_file.h"
#include "coll_fit.h"

pl_status calib_coll_load(const char *path, coll_measured *m, char *msg, size_t len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return pl_fail(msg, len, errno == ENOENT ? PL_ERR_NOT_FOUND : PL_ERR_IO, "cannot read collectives '%s': %s",
                       path, strerror(errno));
    char head[16] = {0};
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    if (got < sizeof head || memcmp(head, "SQLite format 3", sizeof head) != 0) return coll_file_load(path, m, msg, len);
    profile_db *db = NULL;
    char m2[400] = "";
    pl_status st = profile_db_open(path, PROFILE_DB_READ, &db, m2, sizeof m2);
    if (st == PL_OK) {
        calib_coll_fit_result r;
        st = calib_coll_fit_db(db, NULL, m, &r, m2, sizeof m2);
        if (st == PL_OK) calib_coll_fit_free(&r);
    }
    profile_db_close(db);
    if (st != PL_OK) return pl_fail(msg, len, st, "collectives from %s: %s", path, m2);
    return PL_OK;
}
