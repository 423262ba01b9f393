/*
 * failalloc.h: allocation-failure injection for tests.
 *
 * The test-faults binary is linked with -Wl,--wrap=malloc,--wrap=calloc,
 * --wrap=realloc,--wrap=free,--wrap=strdup, so every allocation made by placer's own code
 * (static libraries linked into that binary) goes through these wrappers;
 * libraries linked dynamically (SQLite, libc internals) are not affected.
 *
 * failalloc_arm(n) makes the n-th allocation from now (0-based) fail, and
 * every one after it succeed again. failalloc_live() counts blocks handed
 * out by the wrappers and not yet freed, so a test can assert that an
 * operation that failed half-way released everything.
 */
#ifndef PLACER_TESTS_FAILALLOC_H
#define PLACER_TESTS_FAILALLOC_H

/* Fail the n-th allocation from now; n < 0 disarms. Resets the counter. */
void failalloc_arm(long n);
/* Allocations attempted since the last arm. */
long failalloc_count(void);
/* 1 if the armed failure was delivered. */
int failalloc_fired(void);
/* 1 when the failure delivered since the last arm hit an allocation made
 * inside GSL, whose allocators leak their half-built objects on failure. */
int failalloc_fired_in_gsl(void);
/* 1 when the armed allocation was reached but not failed, because it was
 * inside a GSL function that uses its scratch space unchecked (a failure
 * there crashes inside GSL). failalloc_fired() is 1 then too. */
int failalloc_skipped(void);
/* Blocks currently live (allocated through the wrappers, not yet freed). */
long failalloc_live(void);

/* Route SQLite's own allocations (it is a shared library, so --wrap does
 * not reach it) through the same counter, so that the n-th allocation may
 * be SQLite's. Call before SQLite is used (it shuts SQLite down first).
 * SQLite's blocks are not in failalloc_live: use sqlite3_memory_used().
 * Returns 0 on success. */
int failalloc_hook_sqlite(void);

#endif
