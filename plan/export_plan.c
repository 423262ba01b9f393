/*
 * export_plan.c: the format table of export_plan.h, the dispatcher with
 * the checks every export passes first (the chunks add up, the framework
 * runs the model and the layout), saving a file set into a directory; the
 * writers live in export_megatron.c, export_torchtitan.c,
 * export_deepspeed.c and export_json.c, the pieces they share (memory
 * streams, notes, the README) in export_files.c.
 */
#include "export_plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

plan_framework plan_export_framework(plan_export_format f) {
    switch (f) {
    case PLAN_EXPORT_MEGATRON: return PLAN_FRAMEWORK_MEGATRON;
    case PLAN_EXPORT_TORCHTITAN: return PLAN_FRAMEWORK_TORCHTITAN;
    case PLAN_EXPORT_DEEPSPEED: return PLAN_FRAMEWORK_DEEPSPEED;
    default: return PLAN_FRAMEWORK_ANY;
    }
}

pl_status export_check_chunks(const gpt_config *cfg, const layout *l, const int *chunk_layers, char *msg,
                              size_t len) {
    if (l->pp < 1 || l->vp < 1 || (int64_t)l->pp * l->vp > LAYOUT_MAX_CHUNKS)
        return pl_fail(msg, len, PL_ERR_INVALID, "pp=%d vp=%d is no pipeline", l->pp, l->vp);
    const int C = l->pp * l->vp;
    int sum = 0;
    for (int c = 0; c < C; c++) {
        if (chunk_layers[c] < 0 || (chunk_layers[c] == 0 && c != 0 && c != C - 1) || (C == 1 && chunk_layers[c] < 1))
            return pl_fail(msg, len, PL_ERR_INVALID, "chunk %d has %d layers (only the first and last may have none)",
                           c, chunk_layers[c]);
        sum += chunk_layers[c];
    }
    if (sum != cfg->n_layers)
        return pl_fail(msg, len, PL_ERR_INVALID, "the chunks hold %d layers, the model has %d", sum, cfg->n_layers);
    return PL_OK;
}

void plan_export_files_free(plan_export_files *f) {
    for (int i = 0; i < f->n; i++) free(f->text[i]);
    f->n = 0;
}

pl_status plan_export_build(plan_export_format fmt, const plan_export_in *in, plan_export_files *out, char *msg,
                            size_t len) {
    memset(out, 0, sizeof *out);
    pl_status st = export_check_chunks(in->cfg, in->l, in->chunk_layers, msg, len);
    if (st != PL_OK) return st;
    const plan_framework fw = plan_export_framework(fmt);
    if (fw != PLAN_FRAMEWORK_ANY) {
        char why[320];
        if (!plan_framework_model_runs(fw, in->cfg, in->arch, why, sizeof why) ||
            !plan_framework_layout_runs(fw, in->cfg, in->l, why, sizeof why))
            return pl_fail(msg, len, PL_ERR_INVALID, "%s", why);
    }
    switch (fmt) {
    case PLAN_EXPORT_MEGATRON: st = export_megatron_build(in, out, msg, len); break;
    case PLAN_EXPORT_TORCHTITAN: st = export_torchtitan_build(in, out, msg, len); break;
    case PLAN_EXPORT_DEEPSPEED: st = export_deepspeed_build(in, out, msg, len); break;
    case PLAN_EXPORT_JSON: st = export_json_build(in, out, msg, len); break;
    default: return pl_fail(msg, len, PL_ERR_INVALID, "unknown export format %d", (int)fmt);
    }
    /* every framework's set carries the plan itself, as the json export writes it */
    if (st == PL_OK && fmt != PLAN_EXPORT_JSON) st = export_json_build(in, out, msg, len);
    return st;
}

pl_status plan_export_save(const plan_export_files *out, const char *dir, char *msg, size_t len) {
    if (!dir || !*dir) return pl_fail(msg, len, PL_ERR_INVALID, "no directory to write the export into");
    char part[4096];
    if (strlen(dir) >= sizeof part) return pl_fail(msg, len, PL_ERR_INVALID, "the directory name is too long");
    /* as mkdir -p: each missing component in turn */
    for (size_t i = 1, n = strlen(dir); i <= n; i++) {
        if (dir[i] != '/' && dir[i] != 0) continue;
        memcpy(part, dir, i);
        part[i] = 0;
        struct stat st;
        if (mkdir(part, 0777) != 0 && errno != EEXIST)
            return pl_fail(msg, len, PL_ERR_IO, "cannot create directory '%s': %s (--out names a directory to "
                                                "write the export into)", part, strerror(errno));
        if (dir[i] == 0 && (stat(part, &st) != 0 || !S_ISDIR(st.st_mode)))
            return pl_fail(msg, len, PL_ERR_IO, "cannot create directory '%s': a file of that name is there (--out "
                                                "names a directory to write the export into)", part);
    }
    for (int i = 0; i < out->n; i++) {
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, out->name[i]) >= sizeof path)
            return pl_fail(msg, len, PL_ERR_INVALID, "the directory name is too long");
        FILE *f = fopen(path, "w");
        if (!f) return pl_fail(msg, len, PL_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        const size_t n = strlen(out->text[i]);
        const int bad = fwrite(out->text[i], 1, n, f) != n;
        if (fclose(f) != 0 || bad) return pl_fail(msg, len, PL_ERR_IO, "writing '%s' failed", path);
    }
    return PL_OK;
}

pl_status plan_export_write(FILE *f, plan_export_format fmt, const gpt_config *cfg, const layout *l,
                            const int *chunk_layers, const layout_result *res, char *msg, size_t len) {
    plan_export_in in = {cfg, NULL, NULL, l, chunk_layers, res, PLAN_FRAMEWORK_ANY};
    plan_export_files out;
    pl_status st = plan_export_build(fmt, &in, &out, msg, len);
    if (st == PL_OK && (fputs(out.text[0], f) == EOF || ferror(f)))
        st = pl_fail(msg, len, PL_ERR_IO, "writing the %s export failed", NAMES[fmt]);
    plan_export_files_free(&out);
    return st;
}

pl_status plan_export_string(plan_export_format fmt, const gpt_config *cfg, const layout *l,
                             const int *chunk_layers, const layout_result *res, char **out_text, char *msg,
                             size_t len) {
    *out_text = NULL;
    plan_export_in in = {cfg, NULL, NULL, l, chunk_layers, res, PLAN_FRAMEWORK_ANY};
    plan_export_files out;
    pl_status st = plan_export_build(fmt, &in, &out, msg, len);
    if (st == PL_OK) {
        *out_text = out.text[0];
        out.text[0] = NULL;
    }
    plan_export_files_free(&out);
    return st;
}
