/*
 * export_plan.c: the format table of export_plan.h and the dispatcher; the
 * writers live in export_megatron.c, export_torchtitan.c,
 * export_deepspeed.c and export_json.c.
 */
#include "export_plan.h"

#include <stdlib.h>
#include <string.h>

#include "export_internal.h"

static const char *const NAMES[PLAN_EXPORT_COUNT] = {"megatron", "torchtitan", "deepspeed", "json"};

const char *plan_export_format_name(plan_export_format f) {
    return f >= 0 && f < PLAN_EXPORT_COUNT ? NAMES[f] : "unknown";
}

pl_status plan_export_parse_format(const char *text, plan_export_format *out, char *msg, size_t len) {
    for (int i = 0; i < PLAN_EXPORT_COUNT; i++)
        if (text && !strcmp(text, NAMES[i])) {
            *out = (plan_export_format)i;
            return PL_OK;
        }
    return pl_fail(msg, len, PL_ERR_INVALID, "unknown export format '%s' (use megatron, torchtitan, deepspeed or json)",
                   text ? text : "");
}

pl_status export_check_chunks(const gpt_config *cfg, const layout *l, const int *chunk_layers, char *msg,
                              size_t len) {
    if (l->pp < 1 || l->vp < 1 || (int64_t)l->pp * l->vp > LAYOUT_MAX_CHUNKS)
        return pl_fail(msg, len, PL_ERR_INVALID, "pp=%d vp=%d is no pipeline", l->pp, l->vp);
    int sum = 0;
    for (int c = 0; c < l->pp * l->vp; c++) {
        if (chunk_layers[c] < 1)
            return pl_fail(msg, len, PL_ERR_INVALID, "chunk %d has %d layers (each needs at least one)", c,
                           chunk_layers[c]);
        sum += chunk_layers[c];
    }
    if (sum != cfg->n_layers)
        return pl_fail(msg, len, PL_ERR_INVALID, "the chunks hold %d layers, the model has %d", sum, cfg->n_layers);
    return PL_OK;
}

pl_status plan_export_write(FILE *f, plan_export_format fmt, const gpt_config *cfg, const layout *l,
                            const int *chunk_layers, const layout_result *res, char *msg, size_t len) {
    pl_status st = export_check_chunks(cfg, l, chunk_layers, msg, len);
    if (st != PL_OK) return st;
    int rc;
    switch (fmt) {
    case PLAN_EXPORT_MEGATRON: rc = plan_export_megatron(f, cfg, l, chunk_layers); break;
    case PLAN_EXPORT_TORCHTITAN: rc = plan_export_torchtitan(f, cfg, l, chunk_layers); break;
    case PLAN_EXPORT_DEEPSPEED: rc = plan_export_deepspeed(f, cfg, l, chunk_layers); break;
    case PLAN_EXPORT_JSON:
        rc = plan_export_json(f, cfg, l, chunk_layers, res);
        if (rc >= 0 && fputc('\n', f) == EOF) rc = -1;
        break;
    default: return pl_fail(msg, len, PL_ERR_INVALID, "unknown export format %d", (int)fmt);
    }
    if (rc < 0 || ferror(f)) return pl_fail(msg, len, PL_ERR_IO, "writing the %s export failed", NAMES[fmt]);
    return PL_OK;
}

pl_status plan_export_string(plan_export_format fmt, const gpt_config *cfg, const layout *l,
                             const int *chunk_layers, const layout_result *res, char **out, char *msg,
                             size_t len) {
    *out = NULL;
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return pl_fail(msg, len, PL_ERR_NOMEM, "no memory for the export");
    pl_status st = plan_export_write(f, fmt, cfg, l, chunk_layers, res, msg, len);
    if (fclose(f) != 0 && st == PL_OK) st = pl_fail(msg, len, PL_ERR_NOMEM, "no memory for the export");
    if (st != PL_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    return PL_OK;
}
