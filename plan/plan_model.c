/*
 * plan_model.c: a model and its training sequence length (plan_model.h).
 * model_config_load_seq reads the model and says what its text and file
 * state of the length (a preset or a file, a seq= override, the file's
 * length keys); this file applies plan_model.h's rules to that.
 */
#include "plan_model.h"

#include <stdio.h>
#include <string.h>

#include "model_config.h"

pl_status plan_model_load(const char *text, int seq, plan_model *m, char *msg, size_t len) {
    memset(m, 0, sizeof *m);
    const char *t = text && *text ? text : "default";
    model_seq_info info;
    pl_status st = model_config_load_seq(t, &m->cfg, m->name, sizeof m->name, &info, msg, len);
    if (st != PL_OK) return st;
    if (!m->name[0]) snprintf(m->name, sizeof m->name, "%s", t);
    if (seq > 0 || info.seq_override) {
        if (seq > 0) m->cfg.seq_len = seq;
        m->seq_source = PLAN_SEQ_GIVEN;
        return PL_OK;
    }
    m->seq_source = PLAN_SEQ_PRESET;
    if (!info.file) return PL_OK;
    m->positions = info.positions;
    if (info.seq_length) m->seq_source = PLAN_SEQ_CONFIG;
    else if (m->positions <= 0) m->seq_source = PLAN_SEQ_NONE;
    else if (m->cfg.seq_len <= PLAN_SEQ_DEFAULT_MAX) m->seq_source = PLAN_SEQ_POSITIONS;
    else {
        m->cfg.seq_len = PLAN_SEQ_DEFAULT_MAX;
        m->seq_source = PLAN_SEQ_CAPPED;
    }
    return PL_OK;
}

const char *plan_model_seq_note(const plan_model *m, char *buf, size_t n) {
    switch (m->seq_source) {
    case PLAN_SEQ_CONFIG: snprintf(buf, n, "the config's seq_length"); break;
    case PLAN_SEQ_POSITIONS: snprintf(buf, n, "the config's max_position_embeddings"); break;
    case PLAN_SEQ_CAPPED:
        snprintf(buf, n, "default, the config's max_position_embeddings %d capped at %d; --seq sets it", m->positions,
                 PLAN_SEQ_DEFAULT_MAX);
        break;
    case PLAN_SEQ_NONE: snprintf(buf, n, "default, the config states no length; --seq sets it"); break;
    default: snprintf(buf, n, "%s", "");
    }
    return buf;
}
