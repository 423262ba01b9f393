/*
 * plan_framework.h: the training frameworks a plan is predicted for and
 * exported to, and what each of them runs (a filter the search applies).
 */
#ifndef PLACER_PLAN_FRAMEWORK_H
#define PLACER_PLAN_FRAMEWORK_H

#include "layout.h"

/* The software stack a plan is predicted for and exported to (one option,
 * --framework, sets it; --for is its older name), as what it can run: a
 * filter on the layout space (the exports write any layout, with notes for
 * what the framework lacks; with a framework set the search keeps only
 * what it runs as planned). The figures the stack is predicted with are
 * its framework profile (sim/layout/framework.h), which travels in
 * plan_options.sim; any and deepspeed have none (Megatron's are used):
 *   megatron    with pp > 1 no ZeRO beyond 1 (the distributed optimizer;
 *               --use-torch-fsdp2 does not support pipelines)
 *   torchtitan  no ZeRO 1 or 2 (DDP, or FSDP2: zero 3 / fsdp), no fp16
 *   deepspeed   its pipeline engine: no interleaving (vp = 1), no context
 *               parallelism, ZeRO 0 or 1 with pp > 1 */
typedef enum {
    PLAN_FRAMEWORK_ANY = 0,
    PLAN_FRAMEWORK_MEGATRON,
    PLAN_FRAMEWORK_TORCHTITAN,
    PLAN_FRAMEWORK_DEEPSPEED,
    PLAN_FRAMEWORK_COUNT
} plan_framework;

/* "any", "megatron", "torchtitan", "deepspeed". Static. */
const char *plan_framework_name(plan_framework f);
/* The framework named name (plan_framework_name's names) into *out: 1, or
 * 0 with *out untouched for any other name (hf, a fitted profile's). */
int plan_framework_parse(const char *name, plan_framework *out);
/* 1 when framework f runs layout l as planned. */
int plan_framework_accepts(plan_framework f, const layout *l);

#endif
