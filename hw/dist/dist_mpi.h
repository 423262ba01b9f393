/*
 * dist_mpi.h: the MPI transport of hw/dist/dist_group.h (issue 17): a process
 * group over MPI_COMM_WORLD (duplicated), sub-groups by MPI_Comm_split,
 * the collectives by MPI's own (non-blocking, so every wait is bounded).
 * Built when meson found MPI (Debian's Open MPI: libopenmpi-dev); without
 * it every call but dist_mpi_launched says so with PL_ERR_UNSUPPORTED.
 *
 * Failure contract, as on sockets, with what MPI allows:
 *   - the communicators use MPI_ERRORS_RETURN: an MPI error is a status
 *     and one line ("MPI_Iallreduce failed: <MPI's error string>"), never
 *     an abort inside the library;
 *   - every collective is started non-blocking and polled (MPI_Test) until
 *     the group's timeout; past it the call fails with PL_ERR_INTERRUPTED,
 *     "no word from the group for 5.0 s during all-reduce (MPI)", and the
 *     group is broken. MPI cannot cancel a started collective, so the
 *     caller's only way on is to exit (non-zero, without MPI_Finalize):
 *     mpirun then stops the job (hw/dist/launcher.h, hw_launch_mpi);
 *   - MPI_Init and MPI_Comm_split are blocking and cannot be bounded; a
 *     rank dying there is handled by mpirun alone.
 * Reduction order: MPI's (the same on every rank for one communicator and
 * size in Open MPI; the tests check that replicas stay bit-identical), not
 * necessarily the rank order of the sockets transport.
 */
#ifndef PLACER_HW_DIST_MPI_H
#define PLACER_HW_DIST_MPI_H

#include <stddef.h>

#include "dist_group.h"
#include "status.h"

/* 1 when this process was started by Open MPI's mpirun
 * (OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK in the environment),
 * whatever the build; *rank and *size (either may be NULL) from there. */
int dist_mpi_launched(int *rank, int *size);

/* 1 when this build has the MPI transport. */
int dist_mpi_built(void);

/* MPI_Init_thread (MPI_THREAD_SERIALIZED) once, then the world group
 * (a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN). PL_ERR_UNSUPPORTED
 * when built without MPI, PL_ERR_IO when MPI fails to start. */
pl_status dist_mpi_world(double timeout_s, dist_group **out, char *msg, size_t len);

/* MPI_Finalize, when dist_mpi_world initialised MPI; every group must be
 * destroyed first and every rank must call it (a collective). */
void dist_mpi_finalize(void);

#endif
