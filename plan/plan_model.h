/*
 * plan_model.h: the model a layout is simulated or planned for, with the
 * sequence length it trains at (placer layout and placer plan share it).
 *
 * The sequence length, first rule that applies:
 *   1. the caller's (--seq), or a "seq=" override in the model text;
 *   2. a preset's own;
 *   3. a config file's "seq_length" (the training sequence it states);
 *   4. a config file's max_position_embeddings (n_positions) when at most
 *      PLAN_SEQ_DEFAULT_MAX: the context window is the training length;
 *   5. else PLAN_SEQ_DEFAULT_MAX. A Hugging Face config gives the context
 *      window, not the training sequence: Qwen2.5-14B says 131,072, which
 *      would plan for a length it was not pre-trained at and make every
 *      layout look activation-bound. 4,096 is a common pre-training length;
 *      the first line of the output says which rule gave the length.
 * A config with neither key keeps the reader's 2,048 (rule 5 does not
 * raise it).
 */
#ifndef PLACER_PLAN_MODEL_H
#define PLACER_PLAN_MODEL_H

#include <stddef.h>

#include "graph.h"
#include "status.h"

#define PLAN_SEQ_DEFAULT_MAX 4096

typedef enum {
    PLAN_SEQ_GIVEN = 0,  /* rule 1 */
    PLAN_SEQ_PRESET,     /* rule 2 */
    PLAN_SEQ_CONFIG,     /* rule 3 */
    PLAN_SEQ_POSITIONS,  /* rule 4 */
    PLAN_SEQ_CAPPED,     /* rule 5: positions > PLAN_SEQ_DEFAULT_MAX */
    PLAN_SEQ_NONE,       /* the config states no length: the reader's default */
} plan_seq_source;

typedef struct {
    gpt_config cfg;             /* seq_len as the rules above say */
    char name[64];              /* the model's name (the config's, the preset's, or the text) */
    plan_seq_source seq_source;
    int positions;              /* the config's max_position_embeddings, or 0 */
} plan_model;

/* Load text (model_config_load's forms) into *m; seq > 0 is rule 1. The
 * loader's status and message on failure (msg untouched otherwise). */
pl_status plan_model_load(const char *text, int seq, plan_model *m, char *msg, size_t len);

/* Where the length came from, for the first output line: "" for rules 1
 * and 2, else e.g. "default, the config's max_position_embeddings
 * 131072 capped at 4096; --seq sets it". Writes buf (NUL-terminated),
 * returns it. */
const char *plan_model_seq_note(const plan_model *m, char *buf, size_t n);

#endif
