/*
 * _core.h: what the files of the placer._core extension share (internal:
 * only the .c files beside it include it). _core.c holds the module (its
 * exceptions, the buffer checks, the method table and PyInit__core);
 * _session.c the Session type; _queries.c the functions that read profile
 * databases, graphs and presets; _layout.c simulate_layout and plan.
 */
#ifndef PLACER_PYTHON_CORE_H
#define PLACER_PYTHON_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baechi.h"
#include "cluster_file.h"
#include "evaluator.h"
#include "graph.h"
#include "grouping.h"
#include "layout.h"
#include "layout_sim.h"
#include "model_config.h"
#include "placement.h"
#include "plan.h"
#include "precision.h"
#include "reinforce.h"
#include "schedule.h"
#include "search.h"
#include "session.h"
#include "sim.h"
#include "spec.h"
#include "status.h"
#include "store.h"
#include "util.h"

#define MSG_LEN 1024

extern PyObject *PlacerError;   /* base of the package's exceptions */
extern PyObject *InputError;    /* bad input; also a ValueError */
extern PyObject *NotFoundError; /* missing file or nothing stored; also a FileNotFoundError */

/* Set the Python exception for status st with the C message msg (the
 * status's own description when msg is empty). Returns NULL, so callers
 * can `return pyc_raise_status(...)`. */
PyObject *pyc_raise_status(pl_status st, const char *msg);

/* Get a C-contiguous buffer of o with items of itemsize bytes and kind
 * 'i' (signed integer), 'u' (unsigned byte or bool) or 'f' (float), and
 * exactly n_items items (n_items < 0: any). Returns 0, or -1 with a
 * TypeError / ValueError set (nothing to release then). */
int pyc_get_buffer(PyObject *o, Py_buffer *v, int writable, char kind, Py_ssize_t itemsize, Py_ssize_t n_items,
                   const char *what);

/* Append v (a new reference; NULL: a constructor failed) to list, dropping
 * the reference. 0, or -1 with the exception set. */
int pyc_append_new(PyObject *list, PyObject *v);

/* A new tuple of the n ints of a, or NULL with the exception set. */
PyObject *pyc_int_tuple(const int *a, int n);

/* The Session type (_session.c). */
extern PyTypeObject SessionType;

/* Module functions (_queries.c, _layout.c); their docs are in _core.c's table. */
PyObject *mod_runs(PyObject *mod, PyObject *args);
PyObject *mod_run_samples(PyObject *mod, PyObject *args);
PyObject *mod_graph_info(PyObject *mod, PyObject *args);
PyObject *mod_spec_names(PyObject *mod, PyObject *unused);
PyObject *mod_rng_ints(PyObject *mod, PyObject *args);
PyObject *mod_simulate_layout(PyObject *mod, PyObject *args, PyObject *kwds);
PyObject *mod_plan(PyObject *mod, PyObject *args, PyObject *kwds);

#endif
