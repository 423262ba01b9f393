/*
 * launcher.h: fork N ranks of one job on this host, each with its process
 * group (hw/dist/dist_group.h), and supervise them (`placer step --procs N`).
 *
 * hw_launch flushes stdio, makes the sockets (a full mesh, one socketpair
 * per pair of ranks, up to DIST_MESH_MAX ranks, so that sub-groups from
 * dist_group_split work; a star around rank 0 beyond), forks N children (rank 0
 * included: the calling process only supervises), and in each child builds
 * the group, calls fn(group, rank, ctx, err, errlen) and leaves with
 * _exit(fn's return value). The parent polls its own children (never
 * waitpid(-1), so a caller's other children are left alone). As soon as
 * one rank exits non-zero or dies from a signal, the parent gives the
 * others 0.2 s to fail on their own, then sends SIGKILL to every rank
 * still running, reaps them all, and returns
 * PL_ERR_INTERRUPTED with one line: the first failing rank (a rank killed
 * by a signal the launcher did not send is preferred: it is the cause, the
 * others' errors are its consequence) and the message that rank left in
 * err, e.g. "rank 1 was killed by signal 9; rank 0: rank 1 vanished
 * (connection closed) during all-reduce".
 * Children get PR_SET_PDEATHSIG SIGKILL, so killing the parent kills them;
 * no rank outlives hw_launch. Library code never exits; only the children,
 * which are the launcher's own processes, call _exit.
 */
#ifndef PLACER_HW_LAUNCHER_H
#define PLACER_HW_LAUNCHER_H

#include <stddef.h>
#include <sys/types.h>

#include "dist_group.h"
#include "status.h"

/* A rank's work. Returns 0 on success, else the rank's exit status (1..125)
 * after writing a one-line reason into err. */
typedef int (*hw_rank_fn)(dist_group *g, int rank, void *ctx, char *err, size_t errlen);

typedef struct {
    int n;                           /* ranks launched */
    pid_t pid[DIST_MAX_RANKS];       /* their process ids (all reaped on return) */
    int exit_code[DIST_MAX_RANKS];   /* exit status, or -1 when a signal ended it */
    int signal[DIST_MAX_RANKS];      /* the signal that ended it, or 0 */
    int killed_by_us[DIST_MAX_RANKS];/* 1 when the launcher sent that signal */
    int failed_rank;                 /* the rank blamed, -1 when all succeeded */
} hw_launch_report;

/* Run fn on n ranks (1..DIST_MAX_RANKS) with a collective timeout of
 * timeout_s seconds. rep may be NULL. PL_OK when every rank returned 0;
 * PL_ERR_INTERRUPTED (one line in msg) when one failed or died;
 * PL_ERR_INVALID / PL_ERR_NOMEM / PL_ERR_IO when the ranks could not be
 * started (any already started are killed and reaped). */
pl_status hw_launch(int n, double timeout_s, hw_rank_fn fn, void *ctx, hw_launch_report *rep, char *msg,
                    size_t len);

/* Under mpirun (dist_mpi_launched): this process is one rank of the job.
 * Makes the MPI world group (hw/dist/dist_mpi.h), runs fn on it once, and on
 * success destroys the group and calls MPI_Finalize. *rank gets the MPI
 * rank (-1 before it is known), *rc fn's return value. Returns PL_OK when
 * fn returned 0; PL_ERR_INTERRUPTED with "rank R: <fn's reason>" when it
 * did not (MPI is then left unfinalised: the caller must exit non-zero at
 * once, and mpirun stops the other ranks); PL_ERR_UNSUPPORTED in a build
 * without MPI; PL_ERR_IO when MPI would not start.
 * Also installs a SIGTERM handler for the rest of the process: Open MPI's
 * mpirun sends SIGTERM to the surviving ranks when one fails, and each
 * then writes one line ("rank R: stopped by mpirun: another rank failed")
 * to stderr and _exits with status 1. mpirun follows with SIGKILL after
 * odls_base_sigkill_timeout (1 s by default): on a loaded host a rank can
 * be killed before it writes its line (it still ends; `mpirun --mca
 * odls_base_sigkill_timeout 3` leaves it the time). */
pl_status hw_launch_mpi(double timeout_s, hw_rank_fn fn, void *ctx, int *rank, int *rc, char *msg, size_t len);

#endif
