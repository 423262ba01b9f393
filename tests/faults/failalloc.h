/*
 * failalloc.h: allocation-failure injection for tests.
 *
 * The test-faults binary is linked with -Wl,--wrap=malloc,--wrap=calloc,
 * --wrap=realloc,--wrap=free, so every allocation made by placer's own code
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
/* Blocks currently live (allocated through the wrappers, not yet freed). */
long failalloc_live(void);

#endif
