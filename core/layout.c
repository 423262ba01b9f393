/*
 * layout.c: the parallel layout's text form, its validation against a model
 * and a GPU count, the split of layers into pipeline chunks, and the rank
 * grid (tp innermost, then cp, dp, pp: Megatron-Core's order). layout.h has
 * the contracts; this file keeps every rule about what a layout may be in
 * one place, so the simulator, the planner and the engine refuse the same
 * layouts with the same words.
 */
#include "layout.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_params.h"

/* Largest accepted size of one grid dimension, and of the batch sizes. */
#define LAYOUT_MAX_DIM 1048576
#define LAYOUT_MAX_BATCH 1000000000


const char *zero_kind_name(zero_kind z) {
    static const char *names[] = {"none", "1", "2", "3", "fsdp"};
    return ((unsigned)z <= ZERO_FSDP) ? names[z] : "unknown";
}

const char *recompute_kind_name(recompute_kind r) {
    static const char *names[] = {"none", "selective", "full"};
    return ((unsigned)r <= RECOMPUTE_FULL) ? names[r] : "unknown";
}

int recompute_kind_from_name(const char *name) {
    for (int r = RECOMPUTE_NONE; name && r <= RECOMPUTE_FULL; r++)
        if (!strcmp(name, recompute_kind_name((recompute_kind)r))) return r;
    return -1;
}

void layout_default(layout *l) {
    memset(l, 0, sizeof *l);
    l->tp = l->cp = l->pp = l->vp = l->dp = 1;
    l->sp = 0;
    l->zero = ZERO_NONE;
    l->micro_batch = l->global_batch = 1;
    l->recompute = RECOMPUTE_NONE;
    l->prec = PRECISION_BF16;
    l->n_stage_layers = 0;
    l->fp8 = FP8_RECIPE_DELAYED;
    l->sched = SCHED_1F1B;
    l->ep = l->etp = 1;
    l->dispatcher = MOE_DISPATCH_ALLTOALL;
}

const char *moe_dispatcher_name(moe_dispatcher d) {
    return d == MOE_DISPATCH_ALLGATHER ? "allgather"
           : d == MOE_DISPATCH_ALLTOALL ? "alltoall"
           : d == MOE_DISPATCH_FLEX     ? "flex"
                                        : "unknown";
}

/* A decimal integer in [lo, hi] filling all of s (no sign, no spaces). */
static int parse_int(const char *s, long lo, long hi, int *out) {
    if (!*s) return 0;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p)) return 0;
    errno = 0;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

/* Trim spaces in place; returns the trimmed start. */
static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

static const char *const KEYS[] = {"tp",  "sp",  "cp",        "pp",        "vp",     "dp",
                                   "zero", "mbs", "gbs", "recompute", "precision", "stages", "fp8", "sched",
                                   "ep",  "etp", "dispatcher", "overlap", "mem"};
static const char *const MEM_NAMES[LAYOUT_MEM_COUNT] = {"norm_mla", "fp8_act", "bf16_moments", "mtp_last",
                                                         "fp32_grads"};

const char *layout_key_name(layout_key k) { return (unsigned)k < LAYOUT_KEY_COUNT ? KEYS[k] : "unknown"; }
const char *layout_mem_name(int i) { return i >= 0 && i < LAYOUT_MEM_COUNT ? MEM_NAMES[i] : "unknown"; }

/* mem=: none, or names of MEM_NAMES joined by '+' (each once). */
static pl_status parse_mem(const char *val, layout *l, char *msg, size_t len) {
    if (!strcmp(val, "none")) {
        l->mem = 0;
        return PL_OK;
    }
    unsigned bits = 0;
    const char *p = val;
    for (;;) {
        const char *e = strchr(p, '+');
        const size_t w = e ? (size_t)(e - p) : strlen(p);
        int i = 0;
        while (i < LAYOUT_MEM_COUNT && !(strlen(MEM_NAMES[i]) == w && !strncmp(p, MEM_NAMES[i], w))) i++;
        if (i == LAYOUT_MEM_COUNT)
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "layout mem must be none or norm_mla, fp8_act, bf16_moments, mtp_last, fp32_grads joined by "
                           "'+', not "
                           "'%.40s'", val);
        if (bits & 1u << i) return pl_fail(msg, len, PL_ERR_INVALID, "layout mem names %s twice", MEM_NAMES[i]);
        bits |= 1u << i;
        if (!e) break;
        p = e + 1;
    }
    l->mem = bits;
    return PL_OK;
}
#define N_KEYS ((int)(sizeof KEYS / sizeof KEYS[0]))
_Static_assert(sizeof KEYS / sizeof KEYS[0] == LAYOUT_KEY_COUNT, "KEYS follows layout_key");

pl_status layout_parse(const char *text, layout *out, char *msg, size_t len) {
    return layout_parse_given(text, out, NULL, msg, len);
}

/* The value of an integer key (tp, cp, pp, vp, dp, ep, etp, mbs, gbs) into
 * its field of l. PL_ERR_INVALID with the key's range when val is not an
 * integer in it. */
static pl_status parse_int_key(layout_key k, const char *val, layout *l, char *msg, size_t len) {
    long hi = LAYOUT_MAX_DIM;
    int *field = NULL;
    switch (k) {
    case LAYOUT_KEY_TP: field = &l->tp; break;
    case LAYOUT_KEY_CP: field = &l->cp; break;
    case LAYOUT_KEY_DP: field = &l->dp; break;
    case LAYOUT_KEY_EP: field = &l->ep; break;
    case LAYOUT_KEY_ETP: field = &l->etp; break;
    case LAYOUT_KEY_PP: field = &l->pp; hi = LAYOUT_MAX_CHUNKS; break;
    case LAYOUT_KEY_VP: field = &l->vp; hi = LAYOUT_MAX_CHUNKS; break;
    case LAYOUT_KEY_MBS: field = &l->micro_batch; hi = LAYOUT_MAX_BATCH; break;
    case LAYOUT_KEY_GBS: field = &l->global_batch; hi = LAYOUT_MAX_BATCH; break;
    default: return pl_fail(msg, len, PL_ERR_INVALID, "layout %s is not an integer key", KEYS[k]);
    }
    if (!parse_int(val, 1, hi, field))
        return pl_fail(msg, len, PL_ERR_INVALID, "layout %s must be an integer from 1 to %ld, not '%.32s'", KEYS[k],
                       hi, val);
    return PL_OK;
}

/* The value of a named key (sp, zero, recompute, dispatcher, precision, fp8,
 * sched) into its field of l. PL_ERR_INVALID listing the accepted names. */
static pl_status parse_named_key(layout_key k, const char *val, layout *l, char *msg, size_t len) {
    char pm[160];
    schedule_order o;
    switch (k) {
    case LAYOUT_KEY_SP:
        if (strcmp(val, "0") && strcmp(val, "1"))
            return pl_fail(msg, len, PL_ERR_INVALID, "layout sp must be 0 or 1, not '%.32s'", val);
        l->sp = val[0] == '1';
        return PL_OK;
    case LAYOUT_KEY_ZERO:
        if (!strcmp(val, "0") || !strcmp(val, "none")) l->zero = ZERO_NONE;
        else if (!strcmp(val, "1")) l->zero = ZERO_1;
        else if (!strcmp(val, "2")) l->zero = ZERO_2;
        else if (!strcmp(val, "3")) l->zero = ZERO_3;
        else if (!strcmp(val, "fsdp")) l->zero = ZERO_FSDP;
        else return pl_fail(msg, len, PL_ERR_INVALID, "layout zero must be 0, 1, 2, 3 or fsdp, not '%.32s'", val);
        return PL_OK;
    case LAYOUT_KEY_RECOMPUTE: {
        const int rk = recompute_kind_from_name(val);
        if (rk < 0)
            return pl_fail(msg, len, PL_ERR_INVALID, "layout recompute must be none, selective or full, not '%.32s'",
                           val);
        l->recompute = (recompute_kind)rk;
        return PL_OK;
    }
    case LAYOUT_KEY_DISPATCHER:
        if (!strcmp(val, "alltoall")) l->dispatcher = MOE_DISPATCH_ALLTOALL;
        else if (!strcmp(val, "allgather")) l->dispatcher = MOE_DISPATCH_ALLGATHER;
        else if (!strcmp(val, "flex")) l->dispatcher = MOE_DISPATCH_FLEX;
        else
            return pl_fail(msg, len, PL_ERR_INVALID, "layout dispatcher must be alltoall, allgather or flex, not '%.32s'",
                           val);
        return PL_OK;
    case LAYOUT_KEY_PRECISION:
        if (precision_parse(val, &l->prec, pm, sizeof pm) != PL_OK)
            return pl_fail(msg, len, PL_ERR_INVALID, "layout precision: %s", pm);
        return PL_OK;
    case LAYOUT_KEY_FP8:
        if (fp8_recipe_parse(val, &l->fp8, pm, sizeof pm) != PL_OK)
            return pl_fail(msg, len, PL_ERR_INVALID, "layout fp8: %s", pm);
        return PL_OK;
    case LAYOUT_KEY_OVERLAP:
        if (!strcmp(val, "none")) l->ep_overlap = 0;
        else if (!strcmp(val, "ep")) l->ep_overlap = 1;
        else return pl_fail(msg, len, PL_ERR_INVALID, "layout overlap must be none or ep, not '%.32s'", val);
        return PL_OK;
    case LAYOUT_KEY_MEM: return parse_mem(val, l, msg, len);
    case LAYOUT_KEY_SCHED: {
        /* every order but gpipe (no layout runs it) and interleaved (1f1b with vp > 1) */
        const unsigned not_here = 1u << SCHED_GPIPE | 1u << SCHED_INTERLEAVED;
        if (schedule_parse_order(val, &o, NULL, 0) != PL_OK || (not_here >> o & 1u)) {
            char names[160];
            schedule_order_names(names, sizeof names, not_here);
            return pl_fail(msg, len, PL_ERR_INVALID, "layout sched must be %s, not '%.32s' (interleaved is vp > 1)",
                           names, val);
        }
        l->sched = o;
        return PL_OK;
    }
    default: return pl_fail(msg, len, PL_ERR_INVALID, "layout %s is not a named key", KEYS[k]);
    }
}

/* stages=: slash-separated layer counts (at most LAYOUT_MAX_CHUNKS) into
 * l->stage_layers and l->n_stage_layers. PL_ERR_INVALID naming the entry. */
static pl_status parse_stages(const char *val, layout *l, char *msg, size_t len) {
    int cnt = 0, v = 0;
    const char *p = val;
    if (!*p) return pl_fail(msg, len, PL_ERR_INVALID, "layout stages is empty (e.g. stages=7/8/8/7)");
    for (;;) {
        const char *e = strchr(p, '/');
        size_t w = e ? (size_t)(e - p) : strlen(p);
        char num[16];
        if (w == 0 || w >= sizeof num)
            return pl_fail(msg, len, PL_ERR_INVALID, "layout stages entry %d is not a layer count (e.g. stages=7/8/8/7)",
                           cnt + 1);
        memcpy(num, p, w);
        num[w] = 0;
        if (cnt >= LAYOUT_MAX_CHUNKS)
            return pl_fail(msg, len, PL_ERR_INVALID, "layout stages has more than %d entries", LAYOUT_MAX_CHUNKS);
        if (!parse_int(num, 0, 1000000, &v))
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "layout stages entry %d ('%s') is not a layer count (e.g. stages=7/8/8/7)", cnt + 1, num);
        l->stage_layers[cnt++] = v;
        if (!e) break;
        p = e + 1;
    }
    l->n_stage_layers = cnt;
    return PL_OK;
}

/* One "key=value" field (tok, modified in place) into l; seen counts the
 * keys met so far. PL_ERR_INVALID for a field without '=', an unknown or
 * repeated key, or a bad value. */
static pl_status parse_field(char *tok, layout *l, int *seen, char *msg, size_t len) {
    char *eq = strchr(tok, '=');
    if (!eq) return pl_fail(msg, len, PL_ERR_INVALID, "layout field '%.32s' is not key=value (e.g. tp=8)", trim(tok));
    *eq = 0;
    char *key = trim(tok), *val = trim(eq + 1);
    int k = 0;
    while (k < N_KEYS && strcmp(key, KEYS[k])) k++;
    if (k == N_KEYS)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "unknown layout key '%.32s' (tp, sp, cp, pp, vp, dp, zero, mbs, gbs, recompute, "
                       "precision, stages, fp8, sched, ep, etp, dispatcher, overlap, mem)", key);
    if (seen[k]++) return pl_fail(msg, len, PL_ERR_INVALID, "layout key '%s' is given twice", key);
    switch ((layout_key)k) {
    case LAYOUT_KEY_TP: case LAYOUT_KEY_CP: case LAYOUT_KEY_PP: case LAYOUT_KEY_VP: case LAYOUT_KEY_DP:
    case LAYOUT_KEY_EP: case LAYOUT_KEY_ETP: case LAYOUT_KEY_MBS: case LAYOUT_KEY_GBS:
        return parse_int_key((layout_key)k, val, l, msg, len);
    case LAYOUT_KEY_STAGES: return parse_stages(val, l, msg, len);
    default: return parse_named_key((layout_key)k, val, l, msg, len);
    }
}

pl_status layout_parse_given(const char *text, layout *out, unsigned *given, char *msg, size_t len) {
    if (!text) return pl_fail(msg, len, PL_ERR_INVALID, "no layout given (e.g. tp=8,pp=4,dp=16,mbs=1,gbs=512)");
    size_t n = strlen(text);
    if (n > 16384) return pl_fail(msg, len, PL_ERR_INVALID, "layout text is too long (%zu bytes)", n);
    char *buf = malloc(n + 1);
    if (!buf) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory parsing the layout");
    memcpy(buf, text, n + 1);
    layout *l = malloc(sizeof *l);
    if (!l) { free(buf); return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory parsing the layout"); }
    layout_default(l);
    pl_status st = PL_OK;
    int seen[N_KEYS] = {0};
    if (!*trim(buf)) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "empty layout (e.g. tp=8,pp=4,dp=16,mbs=1,gbs=512)");
        goto out;
    }
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && st == PL_OK; tok = strtok_r(NULL, ",", &save))
        st = parse_field(tok, l, seen, msg, len);
    if (st != PL_OK) goto out;
    if (seen[LAYOUT_KEY_FP8]) { /* a recipe means fp8; beside another precision it is a contradiction */
        if (!seen[LAYOUT_KEY_PRECISION]) {
            l->prec = PRECISION_FP8;
        } else if (l->prec != PRECISION_FP8) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "layout fp8=%s needs precision=fp8, not precision=%s",
                         fp8_recipe_name(l->fp8), precision_name(l->prec));
            goto out;
        }
    }
    *out = *l;
    if (given) {
        *given = 0;
        for (int k = 0; k < N_KEYS; k++)
            if (seen[k]) *given |= 1u << k;
    }
out:
    free(l);
    free(buf);
    return pl_one_line(st, msg, len);
}

int layout_format(const layout *l, char *buf, size_t len) {
    static const char *zero_text[] = {"0", "1", "2", "3", "fsdp"};
    const char *z = (unsigned)l->zero <= ZERO_FSDP ? zero_text[l->zero] : "unknown";
    int total = snprintf(buf, len, "tp=%d,sp=%d,cp=%d,pp=%d,vp=%d,dp=%d,zero=%s,mbs=%d,gbs=%d,recompute=%s,precision=%s",
                         l->tp, l->sp, l->cp, l->pp, l->vp, l->dp, z, l->micro_batch, l->global_batch,
                         recompute_kind_name(l->recompute), precision_name(l->prec));
    if (total < 0) return total;
    if (l->prec == PRECISION_FP8) {
        size_t off = (size_t)total < len ? (size_t)total : len;
        int w = snprintf(buf ? buf + off : NULL, buf ? len - off : 0, ",fp8=%s", fp8_recipe_name(l->fp8));
        if (w < 0) return w;
        total += w;
    }
    if (l->sched != SCHED_1F1B) {
        size_t off = (size_t)total < len ? (size_t)total : len;
        int w = snprintf(buf ? buf + off : NULL, buf ? len - off : 0, ",sched=%s", schedule_order_name(l->sched));
        if (w < 0) return w;
        total += w;
    }
    if (l->ep != 1 || l->etp != 1 || l->dispatcher != MOE_DISPATCH_ALLTOALL) {
        size_t off = (size_t)total < len ? (size_t)total : len;
        int w = snprintf(buf ? buf + off : NULL, buf ? len - off : 0, ",ep=%d,etp=%d,dispatcher=%s", l->ep, l->etp,
                         moe_dispatcher_name(l->dispatcher));
        if (w < 0) return w;
        total += w;
    }
    if (l->ep_overlap) {
        size_t off = (size_t)total < len ? (size_t)total : len;
        int w = snprintf(buf ? buf + off : NULL, buf ? len - off : 0, ",overlap=ep");
        if (w < 0) return w;
        total += w;
    }
    for (int i = 0, first = 1; i < LAYOUT_MEM_COUNT; i++)
        if (l->mem & 1u << i) {
            size_t off = (size_t)total < len ? (size_t)total : len;
            int w = snprintf(buf ? buf + off : NULL, buf ? len - off : 0, "%s%s", first ? ",mem=" : "+", MEM_NAMES[i]);
            if (w < 0) return w;
            total += w;
            first = 0;
        }
    int ns = l->n_stage_layers;
    if (ns > LAYOUT_MAX_CHUNKS) ns = LAYOUT_MAX_CHUNKS;
    for (int i = 0; i < ns; i++) {
        size_t off = (size_t)total < len ? (size_t)total : len;
        int w = snprintf(buf ? buf + off : NULL, buf ? len - off : 0, i ? "/%d" : ",stages=%d", l->stage_layers[i]);
        if (w < 0) return w;
        total += w;
    }
    return total;
}

int64_t layout_world_size(const layout *l) {
    return (int64_t)l->tp * l->cp * l->dp * l->pp;
}

int layout_micro_batches(const layout *l) {
    int64_t per = (int64_t)l->dp * l->micro_batch;
    if (per <= 0 || l->global_batch % per != 0) return 0;
    return (int)(l->global_batch / per);
}

pl_status layout_validate(const layout *l, const gpt_config *model, int64_t n_gpus, char *msg, size_t len) {
    /* the layout on its own (it may have been built in code, not parsed) */
    if (l->tp < 1 || l->cp < 1 || l->pp < 1 || l->vp < 1 || l->dp < 1 || l->tp > LAYOUT_MAX_DIM ||
        l->cp > LAYOUT_MAX_DIM || l->dp > LAYOUT_MAX_DIM || l->pp > LAYOUT_MAX_CHUNKS)
        return pl_fail(msg, len, PL_ERR_INVALID, "tp, cp, pp, vp and dp must all be at least 1 (and at most %d)",
                       LAYOUT_MAX_DIM);
    if ((int64_t)l->pp * l->vp > LAYOUT_MAX_CHUNKS)
        return pl_fail(msg, len, PL_ERR_INVALID, "pp * vp (%d * %d) must be at most %d chunks", l->pp, l->vp,
                       LAYOUT_MAX_CHUNKS);
    if (l->sp != 0 && l->sp != 1) return pl_fail(msg, len, PL_ERR_INVALID, "sp must be 0 or 1");
    if ((unsigned)l->zero > ZERO_FSDP || (unsigned)l->recompute > RECOMPUTE_FULL ||
        (unsigned)l->prec >= PRECISION_COUNT || (unsigned)l->fp8 >= FP8_RECIPE_COUNT)
        return pl_fail(msg, len, PL_ERR_INVALID, "zero, recompute, precision or fp8 recipe is not a known kind");
    if (l->micro_batch < 1 || l->global_batch < 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "mbs and gbs must be at least 1");
    if (l->vp > 1 && l->pp < 2)
        return pl_fail(msg, len, PL_ERR_INVALID, "interleaving (vp = %d) needs pp >= 2, not pp = %d", l->vp, l->pp);
    int64_t per = (int64_t)l->dp * l->micro_batch;
    if (l->global_batch % per != 0)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "dp * mbs (%d * %d = %lld) must divide the global batch (gbs = %d)", l->dp, l->micro_batch,
                       (long long)per, l->global_batch);
    int m = (int)(l->global_batch / per);
    if (l->vp > 1 && l->sched == SCHED_1F1B && m % l->pp != 0)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "interleaving needs the micro-batches per pipeline (%d = gbs / (dp * mbs)) to be a multiple "
                       "of pp (%d)", m, l->pp);
    if (l->sched != SCHED_1F1B) { /* the pipeline orders of schedule.h */
        const int v = schedule_v_chunks(l->sched);
        if (l->vp != v)
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "sched=%s needs vp=%d (%s), not vp=%d: %d stages over pp=%d", schedule_order_name(l->sched),
                           v, v == 2 ? "two stages per pipeline rank in a V" : "one stage per rank", l->vp,
                           l->pp * l->vp, l->pp);
        char sm[200];
        if (schedule_check_pipeline(l->sched, l->pp, m, l->pp * l->vp, sm, sizeof sm) != PL_OK)
            return pl_fail(msg, len, PL_ERR_INVALID, "%s", sm);
    }
    if (l->ep_overlap && l->sched != SCHED_1F1B && l->sched != SCHED_DUALPIPEV && l->sched != SCHED_DUALPIPE)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "overlap=ep pairs one micro-batch's forward with another's backward: sched=%s has no such pairs "
                       "(1f1b, interleaved, dualpipev and dualpipe do)", schedule_order_name(l->sched));
    if (l->ep_overlap && l->sched == SCHED_1F1B && m < 2)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "overlap=ep pairs one micro-batch's forward with another's backward: 1 micro-batch per pipeline "
                       "has no pair (gbs / (dp * mbs) >= 2 needed)");
    if ((l->mem & LAYOUT_MEM_FP8_ACT) && l->prec != PRECISION_FP8)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "mem=fp8_act caches the FP8 inputs of FP8 GEMMs: precision=fp8 needed, not %s",
                       precision_name(l->prec));
    int chunks = l->sched == SCHED_DUALPIPE ? l->pp : l->pp * l->vp;
    if (l->n_stage_layers != 0 && l->n_stage_layers != chunks)
        return pl_fail(msg, len, PL_ERR_INVALID, "stages has %d entries but pp * vp = %d chunks need one each",
                       l->n_stage_layers, chunks);
    if (l->ep < 1 || l->etp < 1 || l->ep > LAYOUT_MAX_DIM || l->etp > LAYOUT_MAX_DIM ||
        (unsigned)l->dispatcher > MOE_DISPATCH_FLEX)
        return pl_fail(msg, len, PL_ERR_INVALID, "ep and etp must be from 1 to %d, the dispatcher a known kind",
                       LAYOUT_MAX_DIM);
    {
        const int64_t inner = (int64_t)l->tp * l->cp * l->dp, e = (int64_t)l->ep * l->etp;
        if (inner % e != 0)
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "etp * ep (%d * %d = %lld) must divide tp * cp * dp (%lld): the expert grid folds over the "
                           "same ranks as the attention's (Megatron-Core's MoE parallel folding)", l->etp, l->ep,
                           (long long)e, (long long)inner);
    }
    if (n_gpus > 0 && layout_world_size(l) > n_gpus)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "the layout needs tp * cp * dp * pp = %lld GPUs but the cluster has %lld",
                       (long long)layout_world_size(l), (long long)n_gpus);
    if (!model) return PL_OK;

    /* against the model */
    if (model->n_experts > 1) {
        if (model->n_experts % l->ep != 0)
            return pl_fail(msg, len, PL_ERR_INVALID, "ep (%d) must divide the routed experts (%d)", l->ep,
                           model->n_experts);
        if (model->moe_d_ff % l->etp != 0)
            return pl_fail(msg, len, PL_ERR_INVALID, "etp (%d) must divide the expert width (moe_d_ff %d)", l->etp,
                           model->moe_d_ff);
    } else if (l->ep > 1 || l->etp > 1) {
        return pl_fail(msg, len, PL_ERR_INVALID, "ep (%d) and etp (%d) need a mixture-of-experts model", l->ep,
                       l->etp);
    } else if (l->dispatcher != MOE_DISPATCH_ALLTOALL || l->ep_overlap) {
        return pl_fail(msg, len, PL_ERR_INVALID, "%s is a mixture-of-experts option: the model has no experts",
                       l->ep_overlap ? "overlap=ep" : "dispatcher");
    }
    if ((l->mem & LAYOUT_MEM_NORM_MLA) && !gpt_is_mla(model))
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "mem=norm_mla recomputes MLA's up-projections: the model has no multi-head latent attention");
    if ((l->mem & LAYOUT_MEM_MTP_LAST) && model->n_experts <= 1)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "mem=mtp_last places DeepSeek's multi-token-prediction module (an MoE layer) on the last stage: "
                       "the model has no experts");
    const int heads = model->n_heads, kv = gpt_kv_heads(model);
    if (heads % l->tp != 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "tp (%d) must divide the attention heads (%d)", l->tp, heads);
    if (kv % l->tp != 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "tp (%d) must divide the key/value heads (%d)", l->tp, kv);
    if (gpt_d_ff(model) % l->tp != 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "tp (%d) must divide the MLP width (d_ff %d)", l->tp,
                       gpt_d_ff(model));
    if (l->cp > 1 && model->seq_len % (2 * l->cp) != 0)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "cp (%d) needs the sequence (%d) split into 2 * cp = %d equal chunks (causal load balance)",
                       l->cp, model->seq_len, 2 * l->cp);
    if (l->sp && l->tp > 1 && (model->seq_len / l->cp) % l->tp != 0)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "sequence parallelism needs tp (%d) to divide the sequence per cp rank (%d)", l->tp,
                       model->seq_len / l->cp);
    if (l->n_stage_layers == 0 && chunks > model->n_layers)
        return pl_fail(msg, len, PL_ERR_INVALID, "pp * vp = %d chunks are more than the model's %d layers", chunks,
                       model->n_layers);
    if (l->n_stage_layers != 0) {
        int64_t sum = 0;
        for (int i = 0; i < l->n_stage_layers; i++) {
            if (l->stage_layers[i] < 0)
                return pl_fail(msg, len, PL_ERR_INVALID, "stages entry %d is negative", i + 1);
            sum += l->stage_layers[i];
        }
        if (sum != model->n_layers)
            return pl_fail(msg, len, PL_ERR_INVALID, "stages sum to %lld layers but the model has %d",
                           (long long)sum, model->n_layers);
    }
    return PL_OK;
}

/* The model's layers over k chunks: l's stages= entries (n entries), or
 * evenly, the rem extra layers to a centred run of chunks. */
static pl_status split_layers(const layout *l, int k, int n_layers, int *out, char *msg, size_t len) {
    if (l->n_stage_layers != 0) {
        if (l->n_stage_layers != k)
            return pl_fail(msg, len, PL_ERR_INVALID, "stages has %d entries but %s = %d chunks need one each",
                           l->n_stage_layers, l->sched == SCHED_DUALPIPE ? "pp (dualpipe: the model's stages)" : "pp * vp",
                           k);
        int64_t sum = 0;
        for (int i = 0; i < k; i++) {
            if (l->stage_layers[i] < 0)
                return pl_fail(msg, len, PL_ERR_INVALID, "stages entry %d is negative", i + 1);
            sum += l->stage_layers[i];
        }
        if (sum != n_layers)
            return pl_fail(msg, len, PL_ERR_INVALID, "stages sum to %lld layers but the model has %d",
                           (long long)sum, n_layers);
        memcpy(out, l->stage_layers, sizeof *out * (size_t)k);
        return PL_OK;
    }
    if (n_layers < k)
        return pl_fail(msg, len, PL_ERR_INVALID, "%s = %d chunks are more than the model's %d layers",
                       l->sched == SCHED_DUALPIPE ? "pp" : "pp * vp", k, n_layers);
    /* the rem extra layers go to a centred run of chunks: the first and the
     * last (embedding, head and loss) get one only when rem > k - 2, and then
     * the first before the last (the head's GEMM and loss outweigh the
     * embedding's lookup) */
    int base = n_layers / k, rem = n_layers % k;
    int start = (k - rem) / 2;
    for (int i = 0; i < k; i++) out[i] = base + (i >= start && i < start + rem);
    return PL_OK;
}

pl_status layout_chunk_layers(const layout *l, int n_layers, int *out, char *msg, size_t len) {
    if (l->pp < 1 || l->vp < 1 || (int64_t)l->pp * l->vp > LAYOUT_MAX_CHUNKS)
        return pl_fail(msg, len, PL_ERR_INVALID, "pp and vp must be at least 1 with pp * vp <= %d",
                       LAYOUT_MAX_CHUNKS);
    if (l->sched == SCHED_DUALPIPE && l->vp == 2) { /* the model in pp stages, once each way */
        pl_status st = split_layers(l, l->pp, n_layers, out, msg, len);
        if (st == PL_OK) memcpy(out + l->pp, out, sizeof *out * (size_t)l->pp);
        return st;
    }
    return split_layers(l, l->pp * l->vp, n_layers, out, msg, len);
}

int layout_dim_size(const layout *l, layout_dim d) {
    switch (d) {
    case LAYOUT_DIM_TP: return l->tp;
    case LAYOUT_DIM_CP: return l->cp;
    case LAYOUT_DIM_DP: return l->dp;
    case LAYOUT_DIM_PP: return l->pp;
    default: return 0;
    }
}

layout_coords layout_rank_coords(const layout *l, int64_t rank) {
    layout_coords c;
    for (int d = 0; d < LAYOUT_DIM_COUNT; d++) {
        int64_t s = layout_dim_size(l, (layout_dim)d);
        c.c[d] = (int)(rank % s);
        rank /= s;
    }
    return c;
}

int64_t layout_rank_of(const layout *l, const layout_coords *c) {
    int64_t r = 0;
    for (int d = LAYOUT_DIM_COUNT - 1; d >= 0; d--) r = r * layout_dim_size(l, (layout_dim)d) + c->c[d];
    return r;
}

int layout_group_ranks(const layout *l, int64_t rank, layout_dim d, int64_t *out) {
    layout_coords c = layout_rank_coords(l, rank);
    int n = layout_dim_size(l, d);
    for (int i = 0; i < n; i++) {
        c.c[d] = i;
        out[i] = layout_rank_of(l, &c);
    }
    return n;
}

int layout_expert_dim_size(const layout *l, layout_edim d) {
    const int64_t inner = (int64_t)l->tp * l->cp * l->dp, e = (int64_t)l->ep * l->etp;
    switch (d) {
    case LAYOUT_EDIM_ETP: return l->etp;
    case LAYOUT_EDIM_EP: return l->ep;
    case LAYOUT_EDIM_EDP: return e > 0 && inner % e == 0 ? (int)(inner / e) : 0;
    case LAYOUT_EDIM_PP: return l->pp;
    default: return 0;
    }
}

int layout_expert_group_ranks(const layout *l, int64_t rank, layout_edim d, int64_t *out) {
    int size[LAYOUT_EDIM_COUNT], c[LAYOUT_EDIM_COUNT];
    for (int i = 0; i < LAYOUT_EDIM_COUNT; i++) size[i] = layout_expert_dim_size(l, (layout_edim)i);
    if (size[d] < 1 || size[LAYOUT_EDIM_EDP] < 1) return 0;
    int64_t r = rank;
    for (int i = 0; i < LAYOUT_EDIM_COUNT; i++) {
        c[i] = (int)(r % size[i]);
        r /= size[i];
    }
    for (int k = 0; k < size[d]; k++) {
        c[d] = k;
        int64_t x = 0;
        for (int i = LAYOUT_EDIM_COUNT - 1; i >= 0; i--) x = x * size[i] + c[i];
        out[k] = x;
    }
    return size[d];
}
