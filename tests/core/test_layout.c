/* test_layout.c: the layout's text form, every impossible combination the
 * validator must refuse, the chunk split, and the rank grid against
 * Megatron-Core's documented groups (tp innermost, then cp, dp, pp). */
#include <criterion/criterion.h>
#include <string.h>

#include "layout.h"

static gpt_config model(int heads, int kv, int layers, int seq) {
    gpt_config c = {.vocab = 51200, .d_model = 128 * heads, .n_heads = heads, .n_layers = layers, .seq_len = seq,
                    .batch = 1, .n_kv_heads = kv};
    return c;
}

Test(layout, defaults_and_canonical_text_round_trip) {
    layout l;
    layout_default(&l);
    char buf[512];
    int n = layout_format(&l, buf, sizeof buf);
    cr_assert_str_eq(buf, "tp=1,sp=0,cp=1,pp=1,vp=1,dp=1,zero=0,mbs=1,gbs=1,recompute=none,precision=bf16");
    cr_assert_eq(n, (int)strlen(buf));
    char msg[256];
    layout p;
    cr_assert_eq(layout_parse("tp=8,sp=1,cp=2,pp=16,vp=2,dp=64,zero=fsdp,mbs=1,gbs=2048,recompute=selective,"
                              "precision=fp8,stages=7/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/8/5",
                              &p, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(p.tp, 8); cr_assert_eq(p.sp, 1); cr_assert_eq(p.cp, 2); cr_assert_eq(p.pp, 16);
    cr_assert_eq(p.vp, 2); cr_assert_eq(p.dp, 64); cr_assert_eq(p.zero, ZERO_FSDP);
    cr_assert_eq(p.micro_batch, 1); cr_assert_eq(p.global_batch, 2048);
    cr_assert_eq(p.recompute, RECOMPUTE_SELECTIVE); cr_assert_eq(p.prec, PRECISION_FP8);
    cr_assert_eq(p.n_stage_layers, 32);
    cr_assert_eq(p.stage_layers[0], 7); cr_assert_eq(p.stage_layers[31], 5);
    n = layout_format(&p, buf, sizeof buf);
    cr_assert_eq(n, (int)strlen(buf));
    layout q;
    cr_assert_eq(layout_parse(buf, &q, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(memcmp(&p, &q, sizeof p), 0);
    /* a short buffer: truncated, and the return value says what it needed */
    char small[16];
    cr_assert_eq(layout_format(&p, small, sizeof small), n);
    cr_assert_eq(strlen(small), sizeof small - 1);
    cr_assert_eq(layout_format(&p, NULL, 0), n);
    /* order free, spaces ignored, none for zero, unspecified keys default */
    cr_assert_eq(layout_parse(" pp = 4 , tp=2,zero=none ", &q, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(q.pp, 4); cr_assert_eq(q.tp, 2); cr_assert_eq(q.zero, ZERO_NONE); cr_assert_eq(q.dp, 1);
    cr_assert_eq(layout_world_size(&q), 8);
}

Test(layout, parse_errors_name_the_key_and_leave_the_output_untouched) {
    static const struct { const char *text, *want; } bad[] = {
        {"", "empty layout"},
        {"tp", "'tp' is not key=value"},
        {"tq=2", "unknown layout key 'tq'"},
        {"tp=2,tp=4", "'tp' is given twice"},
        {"tp=0", "layout tp must be an integer from 1"},
        {"tp=-2", "layout tp must be an integer"},
        {"tp=+2", "layout tp must be an integer"},
        {"tp=2x", "layout tp must be an integer"},
        {"dp=99999999999999999999", "layout dp must be an integer"},
        {"pp=2000", "layout pp must be an integer from 1 to 1024"},
        {"mbs=0", "layout mbs must be an integer from 1"},
        {"gbs=", "layout gbs must be an integer"},
        {"sp=2", "layout sp must be 0 or 1"},
        {"zero=4", "layout zero must be 0, 1, 2, 3 or fsdp"},
        {"recompute=some", "layout recompute must be none, selective or full"},
        {"precision=int4", "layout precision"},
        {"stages=", "layout stages is empty"},
        {"stages=4//4", "stages entry 2 is not a layer count"},
        {"stages=4/x", "stages entry 2 ('x') is not a layer count"},
        {"stages=4/-1", "stages entry 2 ('-1') is not a layer count"},
        /* found by fuzz_layout: a newline inside a value was echoed into the
         * message, making it two lines */
        {"pp=3\ncp\x12`", "layout pp must be an integer from 1 to 1024, not '3?cp?`'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        layout l;
        layout_default(&l);
        l.tp = 77;
        char msg[256] = "";
        cr_assert_eq(layout_parse(bad[i].text, &l, msg, sizeof msg), PL_ERR_INVALID, "'%s'", bad[i].text);
        cr_assert(strstr(msg, bad[i].want), "'%s' gave '%s'", bad[i].text, msg);
        cr_assert(!strchr(msg, '\n'), "'%s': one line", bad[i].text);
        cr_assert_eq(l.tp, 77, "'%s' touched the output", bad[i].text);
    }
    layout l;
    cr_assert_eq(layout_parse(NULL, &l, NULL, 0), PL_ERR_INVALID);
}

static void expect_invalid(const char *text, const gpt_config *m, int64_t gpus, const char *want) {
    layout l;
    char msg[256] = "";
    cr_assert_eq(layout_parse(text, &l, msg, sizeof msg), PL_OK, "%s: %s", text, msg);
    cr_assert_eq(layout_validate(&l, m, gpus, msg, sizeof msg), PL_ERR_INVALID, "'%s' was accepted", text);
    cr_assert(strstr(msg, want), "'%s' gave '%s'", text, msg);
}

Test(layout, every_impossible_combination_is_refused_with_its_reason) {
    gpt_config m = model(96, 8, 96, 2048); /* 96 heads, 8 KV heads, 96 layers */
    expect_invalid("tp=5", &m, 0, "tp (5) must divide the attention heads (96)");
    expect_invalid("tp=16", &m, 0, "tp (16) must divide the key/value heads (8)");
    expect_invalid("dp=3,gbs=16", &m, 0, "dp * mbs (3 * 1 = 3) must divide the global batch (gbs = 16)");
    expect_invalid("dp=4,mbs=3,gbs=16", &m, 0, "must divide the global batch");
    expect_invalid("cp=3", &m, 0, "cp (3) needs the sequence (2048) split into 2 * cp = 6");
    expect_invalid("pp=97", &m, 0, "pp * vp = 97 chunks are more than the model's 96 layers");
    expect_invalid("pp=16,vp=7,gbs=16", &m, 0, "pp * vp = 112 chunks are more than the model's 96 layers");
    expect_invalid("pp=4,stages=24/24/48", &m, 0, "stages has 3 entries but pp * vp = 4 chunks");
    expect_invalid("pp=4,stages=24/24/24/23", &m, 0, "stages sum to 95 layers but the model has 96");
    expect_invalid("pp=4,vp=2,gbs=6", &m, 0, "micro-batches per pipeline (6 = gbs / (dp * mbs)) to be a multiple of pp (4)");
    expect_invalid("vp=2", &m, 0, "interleaving (vp = 2) needs pp >= 2");
    expect_invalid("tp=8,pp=8,dp=2,gbs=2", &m, 64, "needs tp * cp * dp * pp = 128 GPUs but the cluster has 64");
    gpt_config odd = model(8, 0, 8, 2048);
    odd.d_ff = 1004; /* 1004 % 8 = 4 */
    expect_invalid("tp=8", &odd, 0, "tp (8) must divide the MLP width (d_ff 1004)");
    gpt_config s = model(8, 0, 8, 1002);
    expect_invalid("tp=8,sp=1", &s, 0, "sequence parallelism needs tp (8) to divide the sequence per cp rank (1002)");
    /* allowed: sp without tp, zero with dp = 1, a world smaller than the cluster */
    layout l;
    cr_assert_eq(layout_parse("sp=1,zero=3", &l, NULL, 0), PL_OK);
    cr_assert_eq(layout_validate(&l, &m, 8, NULL, 0), PL_OK);
    /* without a model only the layout's own rules apply */
    cr_assert_eq(layout_parse("tp=5,pp=200", &l, NULL, 0), PL_OK);
    cr_assert_eq(layout_validate(&l, NULL, 0, NULL, 0), PL_OK);
    /* fields of a layout built in code */
    layout_default(&l);
    l.tp = 0;
    cr_assert_eq(layout_validate(&l, &m, 0, NULL, 0), PL_ERR_INVALID);
    layout_default(&l);
    l.zero = (zero_kind)9;
    cr_assert_eq(layout_validate(&l, &m, 0, NULL, 0), PL_ERR_INVALID);
    layout_default(&l);
    l.pp = 64; l.vp = 64;
    cr_assert_eq(layout_validate(&l, NULL, 0, NULL, 0), PL_ERR_INVALID);
}

Test(layout, megatron_table1_and_llama3_layouts_are_valid) {
    /* 530B: 105 layers, tp 8, pp 35, vp 3 (one layer per chunk), 2520 GPUs,
     * dp 9, gbs 2520, mbs 1 -> m = 280, a multiple of 35 */
    gpt_config m530 = model(128, 0, 105, 2048);
    m530.d_model = 20480;
    layout l;
    char msg[256];
    cr_assert_eq(layout_parse("tp=8,pp=35,vp=3,dp=9,mbs=1,gbs=2520,recompute=full,precision=fp16", &l, msg, sizeof msg),
                 PL_OK, "%s", msg);
    cr_assert_eq(layout_validate(&l, &m530, 2520, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_micro_batches(&l), 280);
    cr_assert_eq(layout_world_size(&l), 2520);
    /* Llama 3 405B at 16K GPUs, 131K context: tp 8, cp 16, pp 16, dp 8 */
    gpt_config l405 = model(128, 8, 126, 131072);
    l405.d_ff = 53248;
    cr_assert_eq(layout_parse("tp=8,sp=1,cp=16,pp=16,vp=2,dp=8,zero=fsdp,mbs=1,gbs=128", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(layout_validate(&l, &l405, 24576, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_micro_batches(&l), 16);
    cr_assert_eq(layout_parse("tp=8,pp=16,dp=3,mbs=1,gbs=128", &l, NULL, 0), PL_OK);
    cr_assert_eq(layout_micro_batches(&l), 0, "3 does not divide 128");
}

Test(layout, chunk_layers_uniform_with_lighter_ends_and_explicit) {
    layout l;
    layout_default(&l);
    int out[LAYOUT_MAX_CHUNKS];
    char msg[256];
    l.pp = 4;
    cr_assert_eq(layout_chunk_layers(&l, 32, out, msg, sizeof msg), PL_OK);
    for (int i = 0; i < 4; i++) cr_assert_eq(out[i], 8);
    cr_assert_eq(layout_chunk_layers(&l, 30, out, msg, sizeof msg), PL_OK); /* 7 8 8 7 */
    cr_assert_eq(out[0], 7); cr_assert_eq(out[1], 8); cr_assert_eq(out[2], 8); cr_assert_eq(out[3], 7);
    cr_assert_eq(layout_chunk_layers(&l, 29, out, msg, sizeof msg), PL_OK); /* 7 8 7 7 */
    cr_assert_eq(out[0] + out[1] + out[2] + out[3], 29);
    cr_assert_eq(out[0], 7); cr_assert_eq(out[3], 7);
    cr_assert_eq(layout_chunk_layers(&l, 31, out, msg, sizeof msg), PL_OK); /* 8 8 8 7: the last stays lighter */
    cr_assert_eq(out[0], 8); cr_assert_eq(out[3], 7);
    l.pp = 16; /* Llama 3 405B: 126 layers over 16 stages: 7 7 8 ... 8 7 7 */
    cr_assert_eq(layout_chunk_layers(&l, 126, out, msg, sizeof msg), PL_OK);
    int sum = 0;
    for (int i = 0; i < 16; i++) {
        sum += out[i];
        cr_assert(out[i] == 7 || out[i] == 8);
    }
    cr_assert_eq(sum, 126);
    cr_assert_eq(out[0], 7); cr_assert_eq(out[15], 7);
    l.pp = 8; l.vp = 2;
    cr_assert_eq(layout_chunk_layers(&l, 15, out, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "16 chunks are more than the model's 15 layers"), "%s", msg);
    cr_assert_eq(layout_parse("pp=2,vp=2,stages=1/0/9/2", &l, NULL, 0), PL_OK);
    cr_assert_eq(layout_chunk_layers(&l, 12, out, msg, sizeof msg), PL_OK);
    cr_assert_eq(out[0], 1); cr_assert_eq(out[1], 0); cr_assert_eq(out[2], 9); cr_assert_eq(out[3], 2);
    cr_assert_eq(layout_chunk_layers(&l, 13, out, msg, sizeof msg), PL_ERR_INVALID);
}

Test(layout, rank_grid_matches_megatron_core_groups) {
    /* Megatron-Core parallel_state.initialize_model_parallel's docstring: 16
     * GPUs, tp 2, pp 4 (so dp 2): tensor groups [g0,g1],[g2,g3],...; data
     * groups [g0,g2],[g1,g3],[g4,g6],...; pipeline groups [g0,g4,g8,g12],
     * [g1,g5,g9,g13], [g2,g6,g10,g14], [g3,g7,g11,g15]. */
    layout l;
    cr_assert_eq(layout_parse("tp=2,pp=4,dp=2,gbs=2", &l, NULL, 0), PL_OK);
    int64_t g[16];
    for (int64_t r = 0; r < 16; r++) {
        cr_assert_eq(layout_group_ranks(&l, r, LAYOUT_DIM_TP, g), 2);
        cr_assert_eq(g[0], r / 2 * 2); cr_assert_eq(g[1], r / 2 * 2 + 1);
        cr_assert_eq(layout_group_ranks(&l, r, LAYOUT_DIM_DP, g), 2);
        cr_assert_eq(g[0], r / 4 * 4 + r % 2); cr_assert_eq(g[1], r / 4 * 4 + r % 2 + 2);
        cr_assert_eq(layout_group_ranks(&l, r, LAYOUT_DIM_PP, g), 4);
        for (int i = 0; i < 4; i++) cr_assert_eq(g[i], r % 4 + 4 * i, "rank %lld pp group", (long long)r);
        cr_assert_eq(layout_group_ranks(&l, r, LAYOUT_DIM_CP, g), 1);
        cr_assert_eq(g[0], r);
    }
    /* tp-cp-dp-pp with every dimension 2: rank = tp + 2 cp + 4 dp + 8 pp */
    cr_assert_eq(layout_parse("tp=2,cp=2,dp=2,pp=2,gbs=2", &l, NULL, 0), PL_OK);
    for (int64_t r = 0; r < 16; r++) {
        layout_coords c = layout_rank_coords(&l, r);
        cr_assert_eq(c.c[LAYOUT_DIM_TP], r % 2);
        cr_assert_eq(c.c[LAYOUT_DIM_CP], r / 2 % 2);
        cr_assert_eq(c.c[LAYOUT_DIM_DP], r / 4 % 2);
        cr_assert_eq(c.c[LAYOUT_DIM_PP], r / 8);
        cr_assert_eq(layout_rank_of(&l, &c), r);
    }
    cr_assert_eq(layout_group_ranks(&l, 5, LAYOUT_DIM_CP, g), 2);
    cr_assert_eq(g[0], 5); cr_assert_eq(g[1], 7);
    /* a pipeline send goes from r to r + tp*cp*dp */
    cr_assert_eq(layout_group_ranks(&l, 3, LAYOUT_DIM_PP, g), 2);
    cr_assert_eq(g[1] - g[0], 8);
    /* a 16,384-GPU grid round-trips at its corners */
    cr_assert_eq(layout_parse("tp=8,cp=16,pp=16,dp=8,gbs=8", &l, NULL, 0), PL_OK);
    for (int64_t r = 0; r < 16384; r += 1237) {
        layout_coords c = layout_rank_coords(&l, r);
        cr_assert_eq(layout_rank_of(&l, &c), r);
    }
    layout_coords last = layout_rank_coords(&l, 16383);
    cr_assert_eq(last.c[LAYOUT_DIM_PP], 15);
    cr_assert_eq(last.c[LAYOUT_DIM_TP], 7);
    cr_assert_str_eq(zero_kind_name(ZERO_FSDP), "fsdp");
    cr_assert_str_eq(recompute_kind_name(RECOMPUTE_SELECTIVE), "selective");
}

/* recompute_kind_from_name reads back every name recompute_kind_name
 * prints, and nothing else */
Test(layout, recompute_names_round_trip) {
    for (int r = RECOMPUTE_NONE; r <= RECOMPUTE_FULL; r++)
        cr_assert_eq(recompute_kind_from_name(recompute_kind_name((recompute_kind)r)), r);
    cr_assert_eq(recompute_kind_from_name("Full"), -1);
    cr_assert_eq(recompute_kind_from_name(""), -1);
    cr_assert_eq(recompute_kind_from_name(NULL), -1);
}

/* layout_parse_given tells the keys the text named from the defaults */
Test(layout, parse_given_names_the_keys_the_text_gave) {
    layout l;
    unsigned given = 123;
    char msg[256] = "";
    cr_assert_eq(layout_parse_given(" mbs = 2, precision=bf16,tp=2", &l, &given, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(given, (1u << LAYOUT_KEY_MBS) | (1u << LAYOUT_KEY_PRECISION) | (1u << LAYOUT_KEY_TP));
    cr_assert_eq(l.micro_batch, 2);
    cr_assert_eq(layout_parse_given("pp=2,stages=1/1,gbs=8", &l, &given, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(given, (1u << LAYOUT_KEY_PP) | (1u << LAYOUT_KEY_STAGES) | (1u << LAYOUT_KEY_GBS));
    given = 7;
    cr_assert_eq(layout_parse_given("tp=2,tp=2", &l, &given, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_eq(given, 7u, "untouched on failure");
}

/* The FP8 recipe key (a block of its own in layout.h): it implies
 * precision=fp8, contradicts any other precision, round-trips through the
 * text form, and is written only for fp8 layouts (bf16 text unchanged). */
Test(layout, fp8_recipe_key) {
    layout l;
    char msg[256], buf[512];
    cr_assert_eq(layout_parse("tp=2,mbs=1,gbs=8", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(l.fp8, FP8_RECIPE_DELAYED, "Megatron's default recipe");
    layout_format(&l, buf, sizeof buf);
    cr_assert_null(strstr(buf, "fp8"), "%s", buf);
    cr_assert_eq(layout_parse("tp=2,fp8=blockwise", &l, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(l.prec, PRECISION_FP8);
    cr_assert_eq(l.fp8, FP8_RECIPE_BLOCKWISE);
    layout_format(&l, buf, sizeof buf);
    cr_assert(strstr(buf, "precision=fp8,fp8=blockwise") != NULL, "%s", buf);
    layout back;
    cr_assert_eq(layout_parse(buf, &back, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(back.fp8, FP8_RECIPE_BLOCKWISE);
    cr_assert_eq(layout_parse("precision=fp8,fp8=mxfp8", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(l.fp8, FP8_RECIPE_MXFP8);
    memset(&back, 0x5a, sizeof back);
    cr_assert_eq(layout_parse("precision=bf16,fp8=delayed", &back, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "needs precision=fp8") != NULL, "%s", msg);
    cr_assert_eq(back.tp, 0x5a5a5a5a, "untouched");
    cr_assert_eq(layout_parse("fp8=e5m2", &back, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "unknown FP8 recipe 'e5m2'") != NULL, "%s", msg);
    cr_assert_eq(layout_parse("fp8=delayed,fp8=mxfp8", &back, msg, sizeof msg), PL_ERR_INVALID);
    l.fp8 = (fp8_recipe)9;
    cr_assert_eq(layout_validate(&l, NULL, 0, msg, sizeof msg), PL_ERR_INVALID);
}

/* sched=: the pipeline order in the layout text, written only when not 1f1b,
 * and what each order needs of vp, pp and the micro-batches */
Test(layout, sched_parses_formats_and_validates) {
    layout l;
    char msg[256], buf[512];
    cr_assert_eq(layout_parse("pp=4,mbs=1,gbs=16,sched=zb-h1", &l, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(l.sched, SCHED_ZB_H1);
    layout_format(&l, buf, sizeof buf);
    cr_assert_not_null(strstr(buf, ",sched=zb-h1"), "%s", buf);
    cr_assert_eq(layout_parse("pp=4,mbs=1,gbs=16", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(l.sched, SCHED_1F1B);
    layout_format(&l, buf, sizeof buf);
    cr_assert_null(strstr(buf, "sched"), "%s", buf);
    cr_assert_eq(layout_parse("pp=4,sched=gpipe", &l, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_not_null(strstr(msg, "layout sched must be 1f1b, zb-h1, zb-h2, zb-v, dualpipev or dualpipe"), "%s", msg);
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("default,layers=8", &cfg, msg, sizeof msg), PL_OK);
    cr_assert_eq(layout_parse("pp=4,mbs=1,gbs=16,sched=zb-v", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(layout_validate(&l, &cfg, 4, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_not_null(strstr(msg, "sched=zb-v needs vp=2"), "%s", msg);
    cr_assert_eq(layout_parse("pp=4,vp=2,mbs=1,gbs=4,sched=dualpipev", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(layout_validate(&l, &cfg, 4, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_not_null(strstr(msg, "4 micro-batches over 4 ranks (use 8 or more)"), "%s", msg);
    cr_assert_eq(layout_parse("pp=4,vp=2,mbs=1,gbs=8,sched=dualpipev", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(layout_validate(&l, &cfg, 4, msg, sizeof msg), PL_OK, "%s", msg);
    /* the V orders skip interleaving's m % pp rule */
    cr_assert_eq(layout_parse("pp=4,vp=2,mbs=1,gbs=10,sched=zb-v", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(layout_validate(&l, &cfg, 4, msg, sizeof msg), PL_OK, "%s", msg);
}

/* issue 33's keys: overlap=none|ep and mem=NAME+NAME, written only when
 * set (a layout without them formats as it always did), round trips, and
 * what each needs of the model and the order: one line each. dualpipe's
 * chunks are the model once each way. */
Test(layout, overlap_and_mem_keys_parse_format_and_validate) {
    layout l, back;
    char msg[256], buf[512];
    cr_assert_eq(layout_parse("pp=4,vp=2,dp=2,ep=2,gbs=16,sched=dualpipe,overlap=ep,mem=bf16_moments+norm_mla", &l, msg,
                              sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(l.ep_overlap, 1);
    cr_assert_eq(l.mem, (unsigned)(LAYOUT_MEM_BF16_MOMENTS | LAYOUT_MEM_NORM_MLA));
    layout_format(&l, buf, sizeof buf);
    cr_assert(strstr(buf, ",overlap=ep,mem=norm_mla+bf16_moments") && strstr(buf, "sched=dualpipe"), "%s", buf);
    cr_assert_eq(layout_parse(buf, &back, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(memcmp(&l, &back, sizeof l), 0);
    cr_assert_eq(layout_parse("pp=4,gbs=16", &l, msg, sizeof msg), PL_OK);
    layout_format(&l, buf, sizeof buf);
    cr_assert(!strstr(buf, "overlap") && !strstr(buf, "mem="), "%s", buf);
    cr_assert_eq(layout_parse("pp=4,mem=none,overlap=none", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(l.mem, 0u);
    cr_assert_eq(layout_parse("pp=4,mem=ema_cpu", &l, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "layout mem must be none or norm_mla"), "%s", msg);
    cr_assert_eq(layout_parse("pp=4,mem=fp8_act+fp8_act", &l, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "twice"), "%s", msg);
    cr_assert_eq(layout_parse("pp=4,overlap=tp", &l, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "overlap must be none or ep"), "%s", msg);
    for (int k = 0; k < LAYOUT_KEY_COUNT; k++) cr_assert_str_neq(layout_key_name((layout_key)k), "unknown");
    cr_assert_str_eq(layout_key_name(LAYOUT_KEY_MEM), "mem");
    /* against models */
    gpt_config moe, dense;
    cr_assert_eq(gpt_config_parse("default,layers=8", &dense, msg, sizeof msg), PL_OK);
    moe = dense;
    moe.n_experts = 8;
    moe.top_k = 2;
    moe.moe_d_ff = 1024;
    cr_assert_eq(layout_parse("dp=2,gbs=8,overlap=ep", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(layout_validate(&l, &dense, 2, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "overlap=ep is a mixture-of-experts option"), "%s", msg);
    cr_assert_eq(layout_validate(&l, &moe, 2, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_parse("pp=2,vp=2,dp=1,gbs=8,sched=zb-v,overlap=ep", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(layout_validate(&l, &moe, 2, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "sched=zb-v has no such pairs"), "%s", msg);
    cr_assert_eq(layout_parse("dp=2,gbs=8,mem=norm_mla", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(layout_validate(&l, &moe, 2, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "multi-head latent attention"), "%s", msg);
    cr_assert_eq(layout_parse("dp=2,gbs=8,mem=fp8_act", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(layout_validate(&l, &moe, 2, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "precision=fp8 needed"), "%s", msg);
    /* dualpipe: pp even, the model once each way */
    cr_assert_eq(layout_parse("pp=4,vp=2,gbs=8,sched=dualpipe", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(layout_validate(&l, &dense, 4, msg, sizeof msg), PL_OK, "%s", msg);
    int cl[8];
    cr_assert_eq(layout_chunk_layers(&l, 8, cl, msg, sizeof msg), PL_OK, "%s", msg);
    for (int k = 0; k < 4; k++) cr_assert_eq(cl[k], cl[k + 4], "chunk %d and %d hold the same model stage", k, k + 4);
    cr_assert_eq(cl[0] + cl[1] + cl[2] + cl[3], 8);
    cr_assert_eq(layout_parse("pp=4,vp=2,gbs=8,sched=dualpipe,stages=1/2/3/2", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(layout_validate(&l, &dense, 4, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_parse("pp=3,vp=2,gbs=12,sched=dualpipe", &l, msg, sizeof msg), PL_OK);
    cr_assert_eq(layout_validate(&l, &dense, 3, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "even"), "%s", msg);
}
