/*
 * plan_model.c: a model and its training sequence length (plan_model.h).
 * model_config_load reads the model; this file finds which text it read
 * (a preset, a config file, a shipped name, each with overrides) by the
 * loader's own rules, and asks the config file which length key it has.
 */
#include "plan_model.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "model_config.h"

/* 1 when overrides (comma-separated key=value) set seq. */
static int sets_seq(const char *ov) {
    for (const char *p = ov; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, "seq=", 4)) return 1;
    return 0;
}

/* The config file that text names (model_config_load's rules) into path,
 * and its overrides into *ov; 0 when text is a preset. */
static int config_path(const char *text, char *path, size_t n, const char **ov) {
    const size_t tl = strlen(text);
    const char *j = strstr(text, ".json,");
    *ov = NULL;
    if (j) {
        snprintf(path, n, "%.*s", (int)(j - text) + 5, text);
        *ov = j + 6;
        return 1;
    }
    if (strchr(text, '/') || (tl >= 5 && !strcmp(text + tl - 5, ".json"))) {
        snprintf(path, n, "%s", text);
        return 1;
    }
    const char *comma = strchr(text, ',');
    const int bl = comma ? (int)(comma - text) : (int)tl;
    *ov = comma ? comma + 1 : NULL;
    if ((bl == 7 && !strncmp(text, "default", 7)) || (bl == 5 && !strncmp(text, "gpt12", 5)) ||
        (bl == 4 && !strncmp(text, "tiny", 4)))
        return 0;
    int nd = 0;
    const char *const *dirs = model_default_dirs(&nd);
    for (int d = 0; d < nd; d++) {
        snprintf(path, n, "%s/%.*s.json", dirs[d], bl, text);
        FILE *f = fopen(path, "rb");
        if (f) {
            fclose(f);
            return 1;
        }
    }
    return 0;
}

pl_status plan_model_load(const char *text, int seq, plan_model *m, char *msg, size_t len) {
    memset(m, 0, sizeof *m);
    const char *t = text && *text ? text : "default";
    pl_status st = model_config_load(t, &m->cfg, m->name, sizeof m->name, msg, len);
    if (st != PL_OK) return st;
    if (!m->name[0]) snprintf(m->name, sizeof m->name, "%s", t);
    char path[4096];
    const char *ov = NULL;
    const int file = config_path(t, path, sizeof path, &ov);
    if (seq > 0 || sets_seq(ov)) {
        if (seq > 0) m->cfg.seq_len = seq;
        m->seq_source = PLAN_SEQ_GIVEN;
        return PL_OK;
    }
    m->seq_source = PLAN_SEQ_PRESET;
    if (!file) return PL_OK;
    /* the loader read this file a moment ago; which length key it has */
    json_t *root = json_load_file(path, 0, NULL);
    json_t *pos = root ? json_object_get(root, "max_position_embeddings") : NULL;
    if (root && !json_is_integer(pos)) pos = json_object_get(root, "n_positions");
    m->positions = json_is_integer(pos) ? (int)json_integer_value(pos) : 0;
    if (root && json_object_get(root, "seq_length")) m->seq_source = PLAN_SEQ_CONFIG;
    else if (m->positions <= 0) m->seq_source = PLAN_SEQ_NONE;
    else if (m->cfg.seq_len <= PLAN_SEQ_DEFAULT_MAX) m->seq_source = PLAN_SEQ_POSITIONS;
    else {
        m->cfg.seq_len = PLAN_SEQ_DEFAULT_MAX;
        m->seq_source = PLAN_SEQ_CAPPED;
    }
    json_decref(root);
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
