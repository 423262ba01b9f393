/* failalloc.c: the --wrap allocation wrappers (see failalloc.h). */
#include "failalloc.h"

#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);

static long fail_at = -1; /* test-process state: tests run one per process */
static long count;
static int fired;
static long live;

void failalloc_arm(long n) {
    fail_at = n;
    count = 0;
    fired = 0;
}
long failalloc_count(void) { return count; }
int failalloc_fired(void) { return fired; }
long failalloc_live(void) { return live; }

static int should_fail(void) {
    long i = count++;
    if (fail_at >= 0 && i == fail_at) {
        fired = 1;
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
