/*
 * print_confirm.h: `placer confirm`'s output: the head-to-head table of
 * placements (calib/confirm_session.h) and the table of layouts timed over
 * their ranks (calib/layout_confirm.h), with the progress line each prints
 * on stderr before it starts timing.
 */
#ifndef PLACER_CLI_PRINT_CONFIRM_H
#define PLACER_CLI_PRINT_CONFIRM_H

#include "confirm_session.h"
#include "layout_confirm.h"

/* stderr: the candidates, sides, rounds and timer about to run. */
void print_confirm_start(const calib_session *s);

/* The confirmation rounds' table, the differences to the fastest side and
 * what was stored. m and order: the schedule; layout: the layout whose
 * split is the side "layout", or NULL. */
void print_confirm(const calib_session *s, const calib_model *mo, const char *layout);

/* stderr: the layouts, rounds and backend about to run. */
void print_confirm_layouts_start(const calib_layouts_opts *o, int n);

/* One row per layout: the rounds' mean +- sd beside the prediction. */
void print_confirm_layouts(const calib_layouts_confirm *c, const calib_model *mo, const step_layout *sl,
                           const calib_layouts_opts *o);

#endif
