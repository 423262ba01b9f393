/*
 * plan_threads.c: the planner's parallel loop. The search simulates its
 * candidates in waves of a fixed size (plan_search.c); a wave's jobs are
 * independent (each writes only its own result slot) and are handed out
 * one at a time from a shared counter to the caller's thread and up to
 * threads - 1 helpers, created per wave and joined before it returns. The
 * search then reads the slots in order, so what it finds does not depend
 * on the thread count or on which thread ran which job.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "plan_search_internal.h"

int plan_threads_resolve(int threads_opt) {
    if (threads_opt >= 1) return threads_opt;
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (n > 1024 ? 1024 : (int)n) : 1;
}

typedef struct {
    plan_job_fn fn;
    void *ctx;
    int64_t n;
    atomic_llong next;
} loop;

static void *worker(void *arg) {
    loop *w = arg;
    for (;;) {
        const int64_t i = (int64_t)atomic_fetch_add(&w->next, 1);
        if (i >= w->n) break;
        w->fn(w->ctx, i);
    }
    return NULL;
}

pl_status plan_parallel_for(int threads, int64_t n, plan_job_fn fn, void *ctx) {
    loop w = {fn, ctx, n, 0};
    int helpers = threads - 1;
    if ((int64_t)helpers > n - 1) helpers = n > 1 ? (int)(n - 1) : 0;
    pthread_t tid[64];
    if (helpers > 64) helpers = 64;
    int started = 0;
    for (; started < helpers; started++)
        if (pthread_create(&tid[started], NULL, worker, &w) != 0) break; /* fewer helpers: still correct */
    worker(&w);
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    return PL_OK;
}
