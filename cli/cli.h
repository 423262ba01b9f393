/*
 * cli.h: the `placer` command's subcommands and shared helpers.
 *
 * Each subcommand lives in cmd_<name>.c as `int cmd_<name>(int argc, char **argv)`
 * where argv[0] is the subcommand name. It returns the process exit code:
 *   0  success
 *   1  runtime failure (a GPU error, a database that cannot be written, ...)
 *   2  usage error or bad input (malformed placement, unknown option, ...)
 * Errors are one line on stderr, "placer <cmd>: <what is wrong>[; <fix>]".
 */
#ifndef PLACER_CLI_H
#define PLACER_CLI_H

#include "status.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

int cmd_graph(int argc, char **argv);
int cmd_profile(int argc, char **argv);
/* `placer profile show` (profile_show.c); argv[0] is "show" */
int cmd_profile_show(int argc, char **argv);
/* `placer profile node-memory` (profile_node_memory.c); argv[0] is "node-memory" */
int cmd_profile_node_memory(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_layout(int argc, char **argv);
int cmd_step(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_search(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_confirm(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
/* placer calibrate --layout-runs (cmd_calibrate_layout.c), dispatched by cmd_calibrate. */
int calibrate_layout_runs(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_check_published(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_experts(int argc, char **argv);

/* Print "placer <cmd>: <detail or status text>" on stderr and return the
 * exit code for st: 2 for bad input (invalid, placement, schedule, not found,
 * not SQLite, schema newer), 1 otherwise. detail may be NULL or empty. */
int cli_report(const char *cmd, pl_status st, const char *detail);

/* The exit code cli_report returns for st, without printing: 0 for PL_OK,
 * 2 for the bad-input statuses it lists, 1 otherwise. */
int cli_exit_code(pl_status st);

/* Print "placer <cmd>: <formatted>" on stderr and return CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* True when stderr is a terminal (progress bars go there only then). */
int cli_stderr_is_tty(void);

/* The default profile database: $PLACER_DB if set, else the first of
 * data/h200x2.db, data/h200x1.db, data/h200x2-spec.db, data/t4x4-pcie.db that exists under the
 * source tree or the current directory. Returns a static string, or NULL. */
const char *cli_default_db(void);

/* For commands that write runs (placer train) when no --db was given: the
 * shipped profiles stay untouched, so the run goes into ./placer-runs.db,
 * made as a copy of cli_default_db() when it does not exist yet. $PLACER_DB,
 * when set, is used as it is. On success *path is a static string and a
 * one-line note naming the file goes to stderr; on failure it returns the
 * exit code after reporting one line (cmd names the command). */
int cli_working_db(const char *cmd, const char **path);

#endif
