/*
 * plan_framework.c: the framework names and what each framework runs
 * (plan_framework.h).
 */
#include "plan_framework.h"

#include <string.h>

const char *plan_framework_name(plan_framework f) {
    static const char *names[PLAN_FRAMEWORK_COUNT] = {"any", "megatron", "torchtitan", "deepspeed"};
    return f >= 0 && f < PLAN_FRAMEWORK_COUNT ? names[f] : "unknown";
}

int plan_framework_parse(const char *name, plan_framework *out) {
    for (int i = 0; name && i < PLAN_FRAMEWORK_COUNT; i++)
        if (!strcmp(name, plan_framework_name((plan_framework)i))) {
            *out = (plan_framework)i;
            return 1;
        }
    return 0;
}

int plan_framework_accepts(plan_framework f, const layout *l) {
    const int sharded = l->dp > 1 ? (int)l->zero : 0;
    switch (f) {
    case PLAN_FRAMEWORK_MEGATRON: return l->pp == 1 || sharded <= ZERO_1;
    case PLAN_FRAMEWORK_TORCHTITAN:
        return sharded != ZERO_1 && sharded != ZERO_2 && l->prec != PRECISION_FP16;
    case PLAN_FRAMEWORK_DEEPSPEED: return l->vp == 1 && l->cp == 1 && (l->pp == 1 || sharded <= ZERO_1);
    default: return 1;
    }
}
