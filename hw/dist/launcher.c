/*
 * launcher.c: fork, supervise and clean up the ranks of launcher.h. The
 * ranks' one-line reasons come back through an anonymous shared mapping
 * (one slot a rank), so only the parent prints.
 */
#include "launcher.h"

#include "dist_mpi.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ERR_SLOT 256
/* After the first rank fails, the others get this long to fail on their own
 * (a peer's death reaches them as a closed socket at once) before SIGKILL:
 * a rank that died of its own signal is then not mistaken for one we killed. */
#define KILL_GRACE_S 0.2

/* sock[i][j]: the end rank i holds of its socket to rank j, -1 none. */
typedef int sock_table[DIST_MAX_RANKS][DIST_MAX_RANKS];

static void close_all(sock_table sock, int n, int keep) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != keep && sock[i][j] >= 0) {
                close(sock[i][j]);
                sock[i][j] = -1;
            }
}

/* The child's side: keep only its own sockets, run fn, leave. */
static void run_child(int rank, int n, sock_table sock, pid_t parent, double timeout_s, hw_rank_fn fn, void *ctx,
                      char *err) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(120); /* the parent died before prctl */
    int fds[DIST_MAX_RANKS];
    close_all(sock, n, rank);
    for (int j = 0; j < n; j++) fds[j] = sock[rank][j];
    dist_group *g = NULL;
    if (dist_group_create(rank, n, fds, timeout_s, &g, err, ERR_SLOT) != PL_OK) _exit(121);
    int rc = fn(g, rank, ctx, err, ERR_SLOT);
    dist_group_destroy(g);
    fflush(stdout);
    fflush(stderr);
    _exit(rc < 0 || rc > 125 ? 125 : rc);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_ms(int ms) {
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

pl_status hw_launch(int n, double timeout_s, hw_rank_fn fn, void *ctx, hw_launch_report *rep, char *msg,
                    size_t len) {
    hw_launch_report local;
    if (!rep) rep = &local;
    memset(rep, 0, sizeof *rep);
    rep->failed_rank = -1;
    if (n < 1 || n > DIST_MAX_RANKS || !fn || !(timeout_s > 0))
        return pl_fail(msg, len, PL_ERR_INVALID, "the launcher takes 1 to %d ranks and a positive timeout",
                       DIST_MAX_RANKS);
    sock_table sock; /* 16 KiB */
    for (int i = 0; i < DIST_MAX_RANKS; i++)
        for (int j = 0; j < DIST_MAX_RANKS; j++) sock[i][j] = -1;
    pl_status st = PL_OK;
    char *errs = mmap(NULL, (size_t)n * ERR_SLOT, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (errs == MAP_FAILED) return pl_fail(msg, len, PL_ERR_NOMEM, "cannot map the ranks' message slots");
    memset(errs, 0, (size_t)n * ERR_SLOT);
    /* a full mesh up to DIST_MESH_MAX ranks (sub-groups need it), a star beyond */
    const int mesh = n <= DIST_MESH_MAX;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            if (!mesh && i != 0) continue;
            int sv[2];
            if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
                st = pl_fail(msg, len, PL_ERR_IO, "socketpair for ranks %d and %d: %s", i, j, strerror(errno));
                close_all(sock, n, -1);
                munmap(errs, (size_t)n * ERR_SLOT);
                return st;
            }
            sock[i][j] = sv[0];
            sock[j][i] = sv[1];
        }
    fflush(stdout);
    fflush(stderr);
    const pid_t parent = getpid();
    int started = 0;
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid == 0) run_child(r, n, sock, parent, timeout_s, fn, ctx, errs + (size_t)r * ERR_SLOT);
        if (pid < 0) {
            st = pl_fail(msg, len, PL_ERR_IO, "fork of rank %d: %s", r, strerror(errno));
            break;
        }
        rep->pid[r] = pid;
        started++;
    }
    rep->n = started;
    close_all(sock, n, -1);

    /* supervise: reap as they finish; on the first failure kill the rest */
    int live[DIST_MAX_RANKS], n_live = started, killing = st != PL_OK, failing = killing;
    double kill_at = 0.0;
    for (int r = 0; r < started; r++) live[r] = 1;
    if (killing)
        for (int r = 0; r < started; r++) {
            kill(rep->pid[r], SIGKILL);
            rep->killed_by_us[r] = 1;
        }
    while (n_live > 0) {
        int reaped = 0;
        for (int r = 0; r < started; r++) {
            if (!live[r]) continue;
            int ws = 0;
            pid_t w = waitpid(rep->pid[r], &ws, WNOHANG);
            if (w == 0) continue;
            if (w < 0 && errno == EINTR) continue;
            live[r] = 0;
            n_live--;
            reaped = 1;
            if (w < 0) { /* not ours any more (cannot happen unless SIGCHLD is ignored) */
                rep->exit_code[r] = -1;
                continue;
            }
            rep->exit_code[r] = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
            rep->signal[r] = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
            if (rep->exit_code[r] != 0 && !failing) {
                failing = 1;
                kill_at = now_s() + KILL_GRACE_S;
            }
        }
        if (failing && !killing && now_s() >= kill_at) {
            killing = 1;
            for (int k = 0; k < started; k++)
                if (live[k] && kill(rep->pid[k], SIGKILL) == 0) rep->killed_by_us[k] = 1;
        }
        if (!reaped) sleep_ms(2);
    }
    if (st == PL_OK) {
        /* blame: a rank that died of a signal we did not send, else the first failing rank */
        int blame = -1;
        for (int r = 0; r < started && blame < 0; r++)
            if (rep->signal[r] && !rep->killed_by_us[r]) blame = r;
        for (int r = 0; r < started && blame < 0; r++)
            if (rep->exit_code[r] != 0 && !rep->killed_by_us[r]) blame = r;
        if (blame >= 0) {
            rep->failed_rank = blame;
            char what[64];
            if (rep->signal[blame])
                snprintf(what, sizeof what, "was killed by signal %d", rep->signal[blame]);
            else
                snprintf(what, sizeof what, "exited with status %d", rep->exit_code[blame]);
            /* the reason: the blamed rank's own, else the first other rank's */
            int why = errs[(size_t)blame * ERR_SLOT] ? blame : -1;
            for (int r = 0; r < started && why < 0; r++)
                if (errs[(size_t)r * ERR_SLOT]) why = r;
            if (why >= 0) {
                char *e = errs + (size_t)why * ERR_SLOT;
                e[ERR_SLOT - 1] = 0;
                char *nl = strchr(e, '\n');
                if (nl) *nl = 0;
                st = pl_fail(msg, len, PL_ERR_INTERRUPTED, "rank %d %s; rank %d: %s", blame, what, why, e);
            } else {
                st = pl_fail(msg, len, PL_ERR_INTERRUPTED, "rank %d %s", blame, what);
            }
        }
    }
    munmap(errs, (size_t)n * ERR_SLOT);
    return st;
}

/* ---- under mpirun ---- */

static char g_term_line[96];
static size_t g_term_len;

static void on_sigterm(int sig) {
    (void)sig;
    ssize_t k = write(2, g_term_line, g_term_len);
    (void)k;
    _exit(1);
}

pl_status hw_launch_mpi(double timeout_s, hw_rank_fn fn, void *ctx, int *rank, int *rc, char *msg, size_t len) {
    *rank = -1;
    *rc = 1;
    if (!fn || !(timeout_s > 0))
        return pl_fail(msg, len, PL_ERR_INVALID, "hw_launch_mpi takes a function and a positive timeout");
    int r = 0, n = 0;
    dist_mpi_launched(&r, &n);
    snprintf(g_term_line, sizeof g_term_line, "placer: rank %d: stopped by mpirun: another rank failed\n", r);
    g_term_len = strlen(g_term_line);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    dist_group *g = NULL;
    pl_status st = dist_mpi_world(timeout_s, &g, msg, len);
    if (st != PL_OK) return st;
    *rank = dist_rank(g);
    char err[ERR_SLOT] = "";
    *rc = fn(g, *rank, ctx, err, sizeof err);
    if (*rc != 0) {
        char *nl = strchr(err, '\n');
        if (nl) *nl = 0;
        return pl_fail(msg, len, PL_ERR_INTERRUPTED, "rank %d: %s", *rank, *err ? err : "failed");
    }
    dist_group_destroy(g);
    dist_mpi_finalize();
    return PL_OK;
}
