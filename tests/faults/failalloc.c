/* failalloc.c: the --wrap allocation wrappers (see failalloc.h). */
#include "failalloc.h"

#include <execinfo.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);

static long fail_at = -1; /* test-process state: tests run one per process */
static long count;
static int fired;
static long live;
static int in_gsl;       /* the delivered failure was inside GSL */
static int skipped;      /* the armed failure was not delivered (see GSL_UNCHECKED) */

void failalloc_arm(long n) {
    fail_at = n;
    count = 0;
    fired = 0;
    in_gsl = 0;
    skipped = 0;
}
int failalloc_fired_in_gsl(void) { return in_gsl; }
int failalloc_skipped(void) { return skipped; }

/* GSL functions that allocate scratch space and use it without checking
 * (gsl_multifit_nlinear_covar, GSL 2.7: four allocations, then memcpy into
 * the first): a failure inside them crashes in GSL, so it is not delivered. */
static const char *const GSL_UNCHECKED[] = {"(gsl_multifit_nlinear_covar+"};

/* Look at the stack of the allocation about to fail: note whether it is
 * inside GSL, whose allocators do not unwind a half-built object when a
 * later allocation fails (gsl_matrix_alloc keeps the struct when its block
 * fails; the multifit trust-region state keeps what it had), so such a
 * failure leaks inside GSL whatever the caller does; and whether it is
 * inside a GSL function that would crash on it. Returns 1 to skip the
 * failure. The binary is linked -rdynamic so that GSL's functions (linked
 * statically) have names. */
static int note_gsl(void) {
    void *frames[32];
    int n = backtrace(frames, 32), skip = 0;
    char **names = backtrace_symbols(frames, n); /* libc's malloc: not counted */
    if (!names) return 0;
    for (int i = 0; i < n; i++) {
        if (strstr(names[i], "(gsl_")) in_gsl = 1;
        for (size_t k = 0; k < sizeof GSL_UNCHECKED / sizeof GSL_UNCHECKED[0]; k++)
            if (strstr(names[i], GSL_UNCHECKED[k])) skip = 1;
    }
    __real_free(names); /* allocated by libc, never counted */
    return skip;
}
long failalloc_count(void) { return count; }
int failalloc_fired(void) { return fired; }
long failalloc_live(void) { return live; }

static int should_fail(void) {
    long i = count++;
    if (fail_at >= 0 && i == fail_at) {
        fired = 1;
        if (note_gsl()) {
            skipped = 1;
            return 0;
        }
        if (getenv("FAILALLOC_TRACE")) { /* where the failure was delivered */
            void *frames[32];
            backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
        }
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t n) {
    if (should_fail()) return NULL;
    void *p = __real_malloc(n);
    if (p) live++;
    return p;
}

void *__wrap_calloc(size_t n, size_t m) {
    if (should_fail()) return NULL;
    void *p = __real_calloc(n, m);
    if (p) live++;
    return p;
}

void *__wrap_realloc(void *old, size_t n) {
    if (should_fail()) return NULL;
    void *p = __real_realloc(old, n);
    if (p && !old) live++;
    return p;
}

void __wrap_free(void *p) {
    if (p) live--;
    __real_free(p);
}

/* strdup allocates inside libc, out of reach of --wrap=malloc; wrapped
 * itself so that its blocks are counted (and can fail) like the others. */
char *__wrap_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = __wrap_malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* SQLite's allocator, counted with ours (see failalloc_hook_sqlite). */
static sqlite3_mem_methods sqlite_real;

static void *sq_malloc(int n) { return should_fail() ? NULL : sqlite_real.xMalloc(n); }
static void *sq_realloc(void *p, int n) { return should_fail() ? NULL : sqlite_real.xRealloc(p, n); }
static void sq_free(void *p) { sqlite_real.xFree(p); }
static int sq_size(void *p) { return sqlite_real.xSize(p); }
static int sq_roundup(int n) { return sqlite_real.xRoundup(n); }
static int sq_init(void *a) { return sqlite_real.xInit(a); }
static void sq_shutdown(void *a) { sqlite_real.xShutdown(a); }

int failalloc_hook_sqlite(void) {
    sqlite3_shutdown();
    if (sqlite3_config(SQLITE_CONFIG_GETMALLOC, &sqlite_real) != SQLITE_OK) return -1;
    sqlite3_mem_methods m = {sq_malloc, sq_free, sq_realloc, sq_size, sq_roundup, sq_init, sq_shutdown, NULL};
    if (sqlite3_config(SQLITE_CONFIG_MALLOC, &m) != SQLITE_OK) return -1;
    /* no lookaside: every small allocation of SQLite's goes through the hook */
    if (sqlite3_config(SQLITE_CONFIG_LOOKASIDE, 0, 0) != SQLITE_OK) return -1;
    return sqlite3_initialize() == SQLITE_OK ? 0 : -1;
}
