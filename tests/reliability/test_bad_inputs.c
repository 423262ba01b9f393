/*
 * test_bad_inputs.c: the catalogue of user-facing errors. Each row is a
 * command line run on the built binary, the exit code it must give (2 bad
 * input, 1 runtime failure), and two pieces of its one line on stderr: one
 * that names the problem and one that names the fix. Every row also checks
 * that stderr is exactly one line starting "placer", and that the files it
 * was given are byte for byte what they were (a bad option never costs the
 * user a database), and that a missing database is not created.
 *
 * Placeholders in the arguments: {DB} a tiny-graph spec profile (4 devices,
 * 16 nodes, batch 4), {H2} another machine's profile, {TEXT} a text file,
 * {EMPTY} an empty file, {NEWER} a profile of a newer schema, {FOREIGN} an
 * SQLite file of another program, {MISSING} a path that does not exist,
 * {OUT} a fresh directory path, {RUNS} a copy of {DB} holding a training
 * run (run 1), {G2} a 2-device profile of another graph (tiny,layers=3),
 * {ERAGGED} an expert load of the wrong shape, {ENEG} an expert load CSV
 * with a negative count; '' is an empty argument.
 *
 * A few errors depend on the build: without a GPU, a CUDA build says it
 * found no GPU where a CPU build says it has no CUDA engine. The binary is
 * asked (--version) which it is. PLACER_TEST_BIN runs the catalogue on
 * another build.
 */
#include "rel_helpers.h"

/* rows leave the CUDA-only fields out */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef struct {
    const char *args;    /* space-separated words with placeholders */
    int rc;              /* exit code */
    const char *problem; /* substring naming the problem */
    const char *fix;     /* substring naming the fix */
    int rc_cuda;         /* on a CUDA build without a GPU (0: as rc) */
    const char *problem_cuda, *fix_cuda; /* (NULL: as problem, fix) */
} bad_case;

#define P16 "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0"
#define P15 "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0"
#define SIM "simulate --db {DB} "

static const bad_case CASES[] = {
    /* ---- commands and options ---- */
    {"", 2, "no command given", "placer --help"},
    {"bogus", 2, "unknown command 'bogus'", "placer --help"},
    {"graph --bogus", 2, "unknown or incomplete option '--bogus'", "see placer graph --help"},
    {"graph --config", 2, "incomplete option '--config'", "see placer graph --help"},
    {"graph extra", 2, "unexpected argument 'extra'", "see placer graph --help"},
    {"profile --bogus", 2, "unknown or incomplete option '--bogus'", "see placer profile --help"},
    {"profile frobnicate", 2, "unexpected argument 'frobnicate'", "see placer profile --help"},
    {"profile show --db {DB} --bogus", 2, "unknown or incomplete option '--bogus'", "--help"},
    {"profile compare --db {DB} --bogus", 2, "unknown or incomplete option '--bogus'", "--help"},
    {"profile check --db {DB} --bogus", 2, "unknown or incomplete option '--bogus'", "--help"},
    {"profile node-memory --db {DB} --bogus", 2, "unknown or incomplete option '--bogus'", "--help"},
    {"profile node-memory", 2, "--db FILE is required", "placer profile node-memory --help"},
    {"profile node-memory --db {DB} --portable", 2, "--portable goes with --write", "--write"},
    {SIM "--placement " P16 " --bogus", 2, "unknown or incomplete option '--bogus'", "see placer simulate --help"},
    {SIM "--placement " P16 " extra", 2, "unexpected argument 'extra'", "see placer simulate --help"},
    {SIM "--placement", 2, "incomplete option '--placement'", "see placer simulate --help"},
    {"step --bogus", 2, "unknown or incomplete option '--bogus'", "see placer step --help"},
    {"train --db {DB} --bogus", 2, "unknown or incomplete option '--bogus'", "see placer train --help"},
    {"train --db {DB} extra", 2, "unexpected argument 'extra'", "see placer train --help"},
    {"search --db {DB} --bogus", 2, "unknown or incomplete option '--bogus'", "see placer search --help"},
    {"confirm --db {DB} --bogus", 2, "unknown or incomplete option '--bogus'", "see placer confirm --help"},
    {"calibrate --db {DB} --bogus", 2, "unknown or incomplete option '--bogus'", "see placer calibrate --help"},
    {"report --db {DB} --bogus", 2, "unknown or incomplete option '--bogus'", "see placer report --help"},
    {"experts --bogus", 2, "unknown or incomplete option '--bogus'", "see placer experts --help"},
    /* ---- missing required options ---- */
    {SIM, 2, "no placement", "pass --placement 0,0,1,... or --placement-file FILE"},
    {SIM "--placement " P16 " --placement-file {TEXT}", 2, "either --placement or --placement-file", "not both"},
    {"calibrate", 2, "--db FILE is required", "--db FILE"},
    {"confirm --db {DB}", 2, "--run RUN is required", "0 for baselines only"},
    {"report --db {DB}", 2, "--out DIR is required", "--out DIR"},
    {"report --out {OUT}", 2, "--db FILE is required", "--db FILE"},
    {"profile compare --db {DB}", 2, "give --db exactly twice", "--db A --db B"},
    /* ---- placements ---- */
    {SIM "--placement 0,0,0", 2, "placement has 3 entries", "the graph needs 16"},
    {SIM "--placement " P15 ",0,0", 2, "placement has 17 entries", "the graph needs 16"},
    {SIM "--placement ''", 2, "placement field 1 is empty", "e.g. 0,0,1"},
    {SIM "--placement 0,,0,0,0,0,0,0,0,0,0,0,0,0,0,0", 2, "placement field 2 is empty", "e.g. 0,0,1"},
    {SIM "--placement 0,0,x,0,0,0,0,0,0,0,0,0,0,0,0,0", 2, "field 3 ('x') is not a device index", "e.g. 0,0,1"},
    {SIM "--placement 0;0", 2, "is not a device index", "e.g. 0,0,1"},
    {SIM "--placement " P15 ",9", 2, "field 16 names device 9", "only devices 0..3 exist"},
    {SIM "--placement " P15 ",-1", 2, "field 16 names device -1", "only devices 0..3 exist"},
    {SIM "--placement " P15 ",99999999999999999999", 2, "field 16", "devices 0..3"},
    {SIM "--placement-file {MISSING}", 2, "cannot read placement file", "No such file"},
    {"step --cpu 2 --config tiny --placement " P15 ",5", 2, "names device 5", "devices 0..1"},
    {"step --cpu 2 --config tiny --placement 0,0", 2, "placement has 2 entries", "the graph needs 16"},
    /* ---- schedules ---- */
    {SIM "--placement " P16 " --micro-batches 3", 2, "micro-batch count 3", "does not divide the batch of 4"},
    {SIM "--placement " P16 " --micro-batches 0", 2, "micro-batch count '0'", "not a positive integer"},
    {SIM "--placement " P16 " --micro-batches x", 2, "micro-batch count 'x'", "not a positive integer"},
    {SIM "--placement " P16 " --schedule zb", 2, "unknown schedule 'zb'", "use gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v or dualpipev"},
    {SIM "--placement " P16 " --schedule interleaved --chunks 2", 2, "interleaved with 2 chunks",
     "needs a contiguous chunk placement"},
    {SIM "--placement " P16 " --chunks 2", 2, "--chunks 2", "needs --schedule interleaved"},
    {SIM "--placement 0,0,0,0,1,1,1,1,1,1,1,1,0,0,0,0 --schedule dualpipev --micro-batches 2", 2,
     "dualpipev needs at least 2 micro-batches per pipeline rank", "2 micro-batches over 2 ranks (use 4 or more)"},
    {SIM "--placement 0,0,0,0,1,1,1,1,0,0,0,0,1,1,1,1 --schedule zb-v --micro-batches 4", 2,
     "zb-v needs a V placement", "4 runs of nodes over 2 devices, expected 3"},
    {SIM "--placement " P16 " --schedule zb-h1 --chunks 2", 2, "--chunks 2", "needs --schedule interleaved"},
    {SIM "--placement " P16 " --chunks 0", 2, "chunks '0'", "not a positive integer"},
    {"train --db {DB} --micro-batches 3", 2, "micro-batch count 3", "does not divide the batch of 4"},
    {"train --db {DB} --schedule zb", 2, "unknown schedule 'zb'", "use gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v or dualpipev"},
    {"search --db {DB} --micro-batches 8", 2, "micro-batch count 8", "does not divide the batch of 4"},
    {"step --cpu 2 --config tiny --micro-batches 3", 2, "micro-batch count 3", "does not divide the batch of 4"},
    /* ---- memory caps ---- */
    {SIM "--placement " P16 " --mem-cap lots", 2, "size 'lots'", "use e.g. 16GiB"},
    {SIM "--placement " P16 " --mem-cap 0", 2, "size '0'", "use e.g. 16GiB"},
    {SIM "--placement " P16 " --mem-cap -1GB", 2, "size '-1GB'", "use e.g. 16GiB"},
    {SIM "--placement " P16 " --mem-cap 150%", 2, "memory cap '150%'", "must be a percentage in (0, 100]"},
    {"train --db {DB} --mem-cap lots", 2, "size 'lots'", "use e.g. 16GiB"},
    {"search --db {DB} --mem-cap 200%", 2, "memory cap '200%'", "must be a percentage in (0, 100]"},
    /* ---- devices ---- */
    {"train --db {DB} --devices 9", 2, "--devices 9", "the profile has only 4 devices"},
    {"search --db {DB} --devices 0", 2, "--devices must be an integer", "in 1..64"},
    {"profile show --db {DB} --device 7", 2, "--device 7", "the profile has devices 0..3"},
    {"step --cpu 0", 2, "--cpu must be an integer", "in [1, 64]"},
    {"calibrate --db {DB} --timer cpu --devices 0,1,2", 2, "--devices lists 3 devices", "the profile has 4"},
    {"calibrate --db {DB} --timer cpu --devices 0,x,0,0", 2, "is not a list of device numbers", "like 0,1"},
    /* ---- databases ---- */
    {SIM "--placement 0 --db {MISSING}", 2, "does not exist", "placer profile --from-spec NAME"},
    {SIM "--placement 0 --db {TEXT}", 2, "is not an SQLite database", "give a profile database made by placer profile"},
    {SIM "--placement 0 --db {EMPTY}", 2, "is empty, not a profile database", "placer profile --from-spec NAME"},
    {SIM "--placement 0 --db {NEWER}", 2, "has schema version 99", "use a newer placer"},
    {SIM "--placement 0 --db {FOREIGN}", 2, "not a placer profile database",
     "give a profile database made by placer profile"},
    {SIM "--placement 0 --config gpt12", 2, "has no profile for graph gpt-L12", "it holds: gpt-L2-C16"},
    {"train --db {MISSING}", 2, "does not exist", "placer profile --from-spec NAME"},
    {"train --db {NEWER}", 2, "has schema version 99", "use a newer placer"},
    {"train --db {DB} --config gpt12", 2, "has no profile for graph gpt-L12", "it holds: gpt-L2-C16"},
    {"search --db {TEXT}", 2, "is not an SQLite database", "give a profile database made by placer profile"},
    {"search --db {EMPTY}", 2, "is empty, not a profile database", "placer profile --from-spec NAME"},
    {"profile show --db {MISSING}", 2, "does not exist", "placer profile --from-spec NAME"},
    {"profile show --db {DB} --config gpt12", 2, "has no profile for graph gpt-L12", "it holds: gpt-L2-C16"},
    {"profile check --db {FOREIGN}", 2, "not a placer profile database", "give a profile database"},
    {"profile node-memory --db {MISSING}", 2, "does not exist", "placer profile --from-spec NAME"},
    {"profile node-memory --db {NEWER} --write", 2, "has schema version 99", "use a newer placer"},
    {"profile node-memory --db {DB} --write", 2, "this is a spec profile", "not the engine's buffers"},
    {"profile compare --db {DB} --db {MISSING}", 2, "does not exist", "placer profile --from-spec NAME"},
    {"calibrate --db {EMPTY} --timer cpu", 2, "is empty, not a profile database", "placer profile --from-spec NAME"},
    {"calibrate --db {NEWER} --timer synthetic", 2, "has schema version 99", "use a newer placer"},
    {"confirm --db {TEXT} --run 0 --timer synthetic", 2, "is not an SQLite database", "give a profile database"},
    {"report --db {MISSING} --out {OUT}", 2, "does not exist", "placer profile --from-spec NAME"},
    {"profile --from-spec h200x2-nvlink --db {DB} --config tiny", 2, "holds machine 't4x4-pcie'",
     "use another file"},
    {"profile --from-spec bogus --db {MISSING}", 2, "unknown spec 'bogus'", "known specs: t4x4-pcie"},
    {"profile --from-spec t4x4-pcie --db {TEXT}", 2, "is not an SQLite database", "give a profile database"},
    {"profile --cpu 2 --config tiny --db {NEWER}", 2, "has schema version 99", "use a newer placer"},
    {"profile --cpu 2 --config tiny --db {DB}", 2, "holds machine 't4x4-pcie', not 'cpux2'", "use another file"},
    /* ---- runs ---- */
    {"train --db {DB} --resume 42", 2, "run 42 is not in", "give the id placer train printed"},
    {"train --db {DB} --resume 1 --seed 3", 2, "with --resume only --updates and --threads may be given",
     "keeps its own problem"},
    {"confirm --db {DB} --run 7 --timer synthetic", 2, "run 7 is not in this database", "placer train"},
    /* ---- another machine's runs and placements (docs/transfer.md) ---- */
    {"search --db {H2} --from {RUNS} --run 42", 2, "run 42 is not in", "give an id placer train printed there"},
    {"train --db {H2} --resume 42 --from {RUNS}", 2, "run 42 is not in", "give an id placer train printed there"},
    {"search --db {G2} --from {RUNS} --run 1", 2, "has no profile for graph gpt-L2-C16", "it holds: gpt-L3-C16"},
    {"train --db {G2} --resume 1 --from {RUNS}", 2, "has no profile for graph gpt-L2-C16", "it holds: gpt-L3-C16"},
    {"train --db {H2} --resume 1 --from {RUNS}", 2, "the source machine has 4 devices and this one 2",
     "score its placements with placer search --from instead"},
    {"train --db {H2} --resume 1 --from {RUNS} --seed 2", 2, "with --resume --from only --updates, --mem-cap",
     "keeps its own problem"},
    {"train --db {H2} --from {RUNS}", 2, "--from", "goes with --resume RUN"},
    {"train --db {H2} --map rank", 2, "--map goes with", "--resume RUN --from OTHER"},
    {"search --db {H2} --run 1", 2, "score placements of another database", "give it with --from FILE"},
    {"search --db {H2} --record", 2, "--map, --top and --record go with", "--from FILE"},
    {"search --db {H2} --from {RUNS}", 2, "--from", "give --run ID (a run trained there) or --placement P"},
    {"search --db {H2} --from {RUNS} --run 1 --map index", 2, "unknown device map 'index'", "use speed or rank"},
    {"search --db {H2} --from {RUNS} --run 1 --micro-batches 2", 2, "with --run the problem comes from the run",
     "leave out --config"},
    {"search --db {H2} --from {RUNS} --placement 0,9,0,0,0,0,0,0,0,0,0,0,0,0,0,0", 2, "field 2 names device 9",
     "only devices 0..3 exist"},
    {"search --db {H2} --from {MISSING} --placement " P16, 2, "does not exist", "placer profile --from-spec NAME"},
    {"report --transfer {TEXT} --out {OUT}", 2, "has no column 'graph'", "starts with its header"},
    {"report --transfer {EMPTY} --out {OUT}", 2, "the matrix is empty", "no header"},
    {"report --transfer {MISSING} --out {OUT}", 2, "cannot open", "give the transfer-matrix.tsv"},
    {"report --transfer {TEXT} --db {DB} --out {OUT}", 2, "--transfer draws the matrix file alone",
     "leave out --db"},
    {"calibrate --db {DB} --from-measurements", 2, "only 0 usable measurements", "measure more placements"},
    /* ---- option values ---- */
    {"graph --config bogus", 2, "unknown config 'bogus'", "use default, gpt12 or tiny"},
    {"graph --config tiny,layers=0", 2, "'layers' must be a positive integer", "positive integer"},
    {"graph --config tiny,heads=3", 2, "heads (3) must divide d_model (16)", "must divide"},
    {"graph --config tiny,foo=1", 2, "unknown config key 'foo'", "vocab, d_model, heads, layers, seq, batch"},
    {"graph --model", 2, "incomplete option '--model'", "see placer graph --help"},
    {"graph --model gpt2 --config tiny", 2, "either --config or --model", "not both"},
    {"graph --model {TEXT}", 2, "model config is not valid JSON", "(line 1, column"},
    {"graph --model {EMPTY}", 2, "model config is not valid JSON", "(line 1, column"},
    {"graph --model {MISSING}", 2, "cannot read model file", "No such file"},
    {"graph --model llama-9", 2, "unknown model 'llama-9'", "a shipped model: "}, /* the list (sorted) grows with data/models */
    {"graph --model llama-3-8b,kv_heads=3", 2, "kv_heads (3) must divide heads (32)", "must divide"},
    {"graph --model a;b", 2, "model name 'a;b' has a character", "letters, digits"},
    {SIM "--placement " P16 " --params fitted", 2, "unknown --params 'fitted'", "use neutral or calibrated"},
    {"train --db {DB} --updates many", 2, "--updates must be an integer", "in 0..10000000"},
    {"train --db {DB} --samples 0", 2, "--samples must be an integer", "in 1..4096"},
    {"train --db {DB} --baseline median", 2, "unknown baseline 'median'", "use ema or loo"},
    {"train --db {DB} --groups clusters", 2, "unknown grouping 'clusters'", "use colocate, none, learned or eagle"},
    {"train --db {DB} --algo a2c", 2, "unknown algorithm 'a2c'", "use reinforce or ppo"},
    {"train --db {DB} --ppo-epochs 0", 2, "--ppo-epochs must be an integer", "in 1..100"},
    {"train --db {DB} --ppo-clip 2", 2, "--ppo-clip must be a number", "0.999"},
    {"train --db {DB} --groups learned --n-groups 0", 2, "--n-groups must be an integer", "in 1..4096"},
    {"train --db {DB} --groups eagle --group-prior -1", 2, "--group-prior must be a number", "in [0, 100]"},
    {"search --db {DB} --groups learned", 2, "--groups learned is learned by placer train", "colocate"},
    {"train --db {DB} --lr nan", 2, "--lr must be a number", "in [1e-12, 10]"},
    {"train --db {DB} --hidden 0", 2, "--hidden must be an integer", "in 1..1024"},
    {"search --db {DB} --method magic", 2, "unknown --method 'magic'", "use single, human, dp"},
    {"search --db {DB} --method exhaustive --groups none", 2, "exhaustive search needs",
     "raise --max-evals or use --groups colocate"},
    {"search --db {DB} --budget 0", 2, "--budget must be an integer", "in 1..100000000"},
    {"search --db {DB} --max-evals 0", 2, "--max-evals must be a number >= 1", ">= 1"},
    {"search --db {DB} --threads 0", 2, "--threads must be an integer", "in 1..1024"},
    {"check-published --bogus", 2, "unknown option '--bogus'", "see placer check-published --help"},
    /* ---- placer serve (its API's bad requests: tests/cli/test_serve_api.c) ---- */
    {"serve --bogus", 2, "unknown or incomplete option '--bogus'", "see placer serve --help"},
    {"serve extra", 2, "unexpected argument 'extra'", "see placer serve --help"},
    {"serve --port 70000", 2, "--port must be an integer in 0..65535", "70000"},
    {"serve --host example.org --port 0", 2, "--host 'example.org' is not an IPv4 address", "127.0.0.1"},
    {"serve --db {MISSING} --port 0", 2, "no such readable file", "--db"},
    {"check-published --dir {MISSING}", 2, "cannot read", "--dir names the folder of the three CSV files"},
    {"check-published --dir {OUT}", 2, "cannot read", "--dir names the folder of the three CSV files"},
    {"check-published --gemm-efficiency 2", 2, "--gemm-efficiency must be in (0, 1]", "not '2'"},
    {"check-published --collective-scale x", 2, "--collective-scale must be a positive number", "not 'x'"},
    {"profile --from-spec t4x4-pcie --db {MISSING} --micro-batch-sizes 0,a", 2, "--micro-batch-sizes",
     "outside 1..16"},
    {"profile --cpu 0 --db {MISSING}", 2, "--cpu must be an integer", "in [1, 64]"},
    {"step --cpu 2 --config tiny --issue weird", 2, "--issue must be auto, single or threads", "got 'weird'"},
    {"step --cpu 2 --config tiny --steps 0", 2, "--steps", "[1,"},
    /* ---- step / confirm --layout and profile --collectives (issue 17) ---- */
    {"step --config tiny --cpu 1 --layout cp=2", 2, "does not run context parallelism yet", "use cp=1"},
    {"step --config tiny --cpu 2 --layout pp=2,vp=2", 2, "interleaved (virtual) pipeline stages", "use vp=1"},
    {"step --config tiny --cpu 1 --layout recompute=selective", 2, "does not recompute activations",
     "use recompute=none"},
    {"step --config tiny --layout dp=2,zero=3", 2, "shards only the optimizer state", "use zero=0 or zero=1"},
    {"step --config tiny --cpu 1 --layout precision=fp8", 2, "precision=fp8", "use precision=fp32, tf32 or bf16"},
    {"step --config tiny --layout tp=3", 2, "tp (3)", "must divide the attention heads (2)"},
    {"step --config tiny --layout bogus=1", 2, "unknown layout key 'bogus'", "(tp, sp, cp"},
    {"step --config tiny --layout ''", 2, "empty layout", "e.g. tp=8"},
    {"step --config tiny --cpu 3 --layout pp=2", 2, "pp=2 stages", "give --cpu 2"},
    {"step --config tiny --layout tp=2 --procs 2", 2, "--layout sets the placement", "leave out --placement"},
    {"confirm --db {DB} --run 0 --timer synthetic --layout dp=2", 2, "confirm times placements in one process",
     "--timer cpu times layouts"},
    {"confirm --db {DB} --timer cpu --layout tp=2", 2, "predicted from the profile's collective curves",
     "placer profile --collectives N"},
    {"confirm --db {DB} --run 0 --timer synthetic --layout gbs=8", 2, "gbs=8", "has a batch of 4"},
    {"profile --cpu 1 --config tiny --db {MISSING} --collectives 1", 2, "--collectives must be an integer",
     "got '1'"},
    {"profile --cpu 1 --config tiny --db {MISSING} --collective-reps 3", 2, "--collective-reps need",
     "--collectives N"},
    {"profile --from-spec h200x2 --db {MISSING} --collectives 2", 2, "--collectives measures this host",
     "--from-spec"},
    /* ---- precision (issue 16): the engine's three, the layout's five ---- */
    {"step --cpu 2 --config tiny --precision fp8", 2, "unknown precision 'fp8'", "fp32, tf32 or bf16"},
    {"step --cpu 2 --config tiny --precision ''", 2, "unknown precision ''", "fp32, tf32 or bf16"},
    {"profile --cpu 2 --config tiny --db {MISSING} --precision int4", 2, "unknown precision 'int4'",
     "fp32, tf32 or bf16"},
    {"plan --model gpt12 --cluster h200x2 --precision fp7", 2, "unknown precision 'fp7'", "fp32, tf32, bf16, fp16 or fp8"},
    {"layout --model default --cluster h200x2 --layout tp=1,precision=BF16x", 2, "unknown precision 'BF16x'",
     "fp32, tf32, bf16, fp16 or fp8"},
    {"calibrate --db {DB} --timer gpu", 2, "--timer must be cuda, cpu or synthetic", "got 'gpu'"},
    {"calibrate --db {DB} --count 0", 2, "--count must be a positive integer", "got '0'"},
    {"calibrate --db {DB} --holdout 1", 2, "--holdout must be a fraction", "in [0, 1)"},
    {"confirm --db {DB} --run 0 --timer synthetic --confirm-rounds 1", 2, "--confirm-rounds must be an integer",
     "in [2, 1000]"},
    {"confirm --db {DB} --run x", 2, "--run takes a run id", "got 'x'"},
    /* ---- framework profiles and calibrate --layout-runs (issue 29) ---- */
    {"layout --model gpt12 --cluster h200x2 --layout tp=1 --framework nope", 2, "unknown framework 'nope'",
     "megatron, torchtitan, hf, or a profile file path"},
    {"plan --model gpt12 --cluster h200x2 --framework nope", 2, "unknown framework 'nope'", "or a profile file path"},
    {"layout --model gpt12 --cluster h200x2 --layout tp=1 --framework {TEXT}", 2, "framework file is not valid JSON",
     "line 1"},
    {"layout --model gpt12 --cluster h200x2 --layout tp=1 --framework {MISSING}", 2, "framework file", "No such file"},
    {"calibrate --layout-runs {EMPTY}", 2, "empty", "header"},
    {"calibrate --layout-runs {TEXT}", 2, "column", "step_<us|ms|s>"},
    /* ---- placer plan ---- */
    {"plan --cluster h200x2", 2, "--model is required", "a preset such as gpt12"},
    {"plan --model gpt12", 2, "--cluster is required", "a name in data/clusters"},
    {"plan --model gpt12 --cluster nosuch", 2, "unknown cluster 'nosuch'", "or give a .json path"},
    {"plan --model gpt12 --cluster h200x2 --gpus 3", 2, "--gpus 3 is more than cluster h200x2 has", "(2)"},
    {"plan --model gpt12 --cluster h200x2 --fix tp=0", 2, "--fix: tp=0", "a positive integer is needed"},
    {"plan --model gpt12 --cluster h200x2 --fix dispatcher=flex", 2, "--fix: dispatcher is a mixture-of-experts option",
     "the model has no experts"},
    {"plan --model mixtral-8x7b --cluster dgx-h100 --gpus 8 --global-batch 64 --fix mem=norm_mla", 2,
     "--fix: mem=norm_mla",
     "no multi-head latent attention"},
    {"plan --model gpt12 --cluster h200x2 --export nemo", 2, "unknown export format 'nemo'", "use megatron, torchtitan"},
    {"plan --model gpt12 --cluster h200x2 --bogus", 2, "unknown or incomplete option '--bogus'", "see placer plan --help"},
    {"plan --model gpt12 --cluster h200x2 --threads 0", 2, "--threads must be an integer in 1..1024", "not '0'"},
    {"plan --db {MISSING}", 2, "does not exist", "placer profile --from-spec NAME"},
    {"layout --model default --cluster h200x2 --layout pp=2,vp=2,gbs=2,sched=dualpipev", 2,
     "dualpipev needs at least 2 micro-batches per pipeline rank", "2 micro-batches over 2 ranks (use 4 or more)"},
    {"layout --model default --cluster h200x2 --layout pp=2,vp=3,gbs=8,sched=zb-v", 2, "sched=zb-v needs vp=2",
     "6 stages over pp=2"},
    {"layout --model default --cluster h200x2 --layout pp=2,sched=zb-h3", 2, "layout sched must be 1f1b, zb-h1",
     "not 'zb-h3'"},
    {"plan --model gpt12 --cluster h200x2 --schedules zb-h3", 2, "--schedules 'zb-h3'", "use all, or zb-h1"},
    /* exports the framework cannot run (plan/plan_framework.h), --out (issue 37) */
    {"plan --model gpt12 --cluster h200x2 --out {OUT}", 2, "--out writes an export's files", "give --export too"},
    {"plan --model mixtral-8x7b --cluster dgx-h100 --gpus 8 --export torchtitan", 2,
     "torchtitan 0.2.2 has no model of this shape", "its models are llama3"},
    {"plan --model llama-3-8b --cluster dgx-h100 --gpus 8 --precision fp8=delayed --export torchtitan", 2,
     "torchtitan 0.2.2 has no delayed FP8 scaling", "tensorwise or mxfp8"},
    {"plan --model llama-3-8b --cluster dgx-h100 --gpus 8 --fix zero=2 --framework megatron", 2,
     "has no ZeRO-2", "(zero=1)"},
    {"plan --model llama-3-8b --cluster dgx-h100 --gpus 8 --fix vp=2 --export deepspeed", 2,
     "one 1F1B schedule", "vp=1"},
    {"plan --model llama-3-8b,layers=4 --cluster h200x2 --global-batch 8 --export megatron --out {TEXT}/sub", 1,
     "cannot create directory", "--out names a directory"},
    {"layout --model default --cluster h200x2 --layout tp=1 --bogus", 2, "unknown or incomplete option '--bogus'",
     "see placer layout --help"},
    {"layout --model default --cluster h200x2", 2, "no layout", "pass --layout"},
    /* mixture of experts (parse-level refusals of MoE keys: tests/inputs/test_model_config.c) */
    {"layout --model mixtral-8x7b --cluster dgx-h100 --layout tp=1,dp=32,ep=16,gbs=32", 2,
     "ep (16) must divide the routed experts (8)", "routed experts (8)"},
    {"layout --model llama-3-8b --cluster dgx-h100 --layout tp=1,dp=8,ep=8,gbs=8", 2,
     "ep (8) and etp (1) need a mixture-of-experts model", "mixture-of-experts model"},
    {"layout --model mixtral-8x7b --cluster dgx-h100 --layout tp=1,dp=8,ep=3,gbs=8", 2,
     "etp * ep (1 * 3 = 3) must divide tp * cp * dp (8)", "parallel folding"},
    /* issue 33: MoE options, overlaps, the fit and histogram files, racks */
    {"layout --model llama-3-8b --cluster dgx-h100 --layout tp=1,dp=8,gbs=16,overlap=ep", 2,
     "overlap=ep is a mixture-of-experts option", "the model has no experts"},
    {"layout --model llama-3-8b --cluster dgx-h100 --layout tp=1,dp=8,gbs=8,dispatcher=flex", 2,
     "dispatcher is a mixture-of-experts option", "the model has no experts"},
    {"layout --model mixtral-8x7b --cluster dgx-h100 --layout pp=2,vp=2,dp=4,ep=4,gbs=16,sched=zb-v,overlap=ep", 2,
     "sched=zb-v has no such pairs", "1f1b, interleaved, dualpipev and dualpipe do"},
    {"layout --model mixtral-8x7b --cluster dgx-h100 --layout dp=8,ep=8,gbs=8,overlap=ep", 2,
     "1 micro-batch per pipeline has no pair", "gbs / (dp * mbs) >= 2 needed"},
    {"layout --model mixtral-8x7b --cluster dgx-h100 --layout dp=8,ep=8,gbs=8,mem=norm_mla", 2,
     "mem=norm_mla recomputes MLA's up-projections", "no multi-head latent attention"},
    {"layout --model mixtral-8x7b --cluster dgx-h100 --layout dp=8,ep=8,gbs=8,mem=fp8_act", 2,
     "mem=fp8_act caches the FP8 inputs", "precision=fp8 needed"},
    {"layout --model mixtral-8x7b --cluster dgx-h100 --layout dp=8,ep=8,gbs=8,mem=fp8+ema", 2, "layout mem must be none",
     "joined by '+'"},
    {"layout --model mixtral-8x7b --cluster dgx-h100 --layout pp=3,vp=2,dp=2,ep=2,gbs=12,sched=dualpipe", 2,
     "dualpipe needs an even rank count", "use an even pp"},
    {"layout --model mixtral-8x7b --cluster dgx-h100 --layout dp=8,ep=8,gbs=8 --moe-fit {TEXT}", 2,
     "moe fit file is not valid JSON", "fit_sweeps.py moe --json"},
    {"layout --model mixtral-8x7b --cluster dgx-h100 --layout dp=8,ep=8,gbs=8 --moe-fit {MISSING}", 2,
     "cannot read moe fit", "No such file"},
    {"layout --model mixtral-8x7b --cluster dgx-h100 --layout dp=8,ep=8,gbs=8 --expert-cv -1", 2,
     "--expert-cv takes a coefficient of variation", "from 0 to 10"},
    {"layout --model mixtral-8x7b --cluster gb200-nvl72 --gpus 128 --domain-gpus 48 --layout dp=128,ep=8,gbs=128", 2,
     "--domain-gpus 48 must divide the job's 128 GPUs", "every NVLink domain used alike"},
    {"layout --model mixtral-8x7b --cluster gb200-nvl72 --gpus 64 --domain-gpus 66 --layout dp=64,ep=8,gbs=64", 2,
     "multiple of the 4 GPUs of a node", "at most the domain's 72"},
    {"calibrate --layout-runs " PLACER_SOURCE_DIR "/data/frameworks/runs/h100-moe.csv --imbalance {TEXT}", 2,
     "--imbalance: ", "the columns run, layer, experts, cv and counts are needed"},
    {"simulate --db {DB} --placement " P16 " --schedule dualpipe", 2, "--schedule dualpipe runs in placer layout only",
     "runs dualpipev"},
    {"layout --model default --cluster bogus --layout tp=1", 2, "unknown cluster 'bogus'", "shipped: dgx-a100-80gb"},
    {"layout --model bogus --cluster h200x2 --layout tp=1", 2, "unknown model 'bogus'", "a config.json path"},
    {"layout --model {TEXT} --cluster h200x2 --layout tp=1", 2, "not valid JSON", "line"},
    {"layout --model default --cluster h200x2 --layout tp=1,bogus=3", 2, "unknown layout key 'bogus'", "(tp, sp, cp"},
    {"layout --model default --cluster h200x2 --layout tp=2,dp=2,gbs=2", 2, "needs tp * cp * dp * pp = 4 GPUs",
     "the cluster has 2"},
    {"layout --model default --cluster h200x2 --layout tp=1 --flops both", 2, "unknown --flops 'both'",
     "use model or hardware"},
    /* ---- collectives from measurements (issue 17 item 7) ---- */
    {"calibrate --collectives", 2, "--db FILE is required", "--db FILE"},
    {"calibrate --collectives --db {DB}", 2, "holds no collective curves", "placer profile --collectives N"},
    {"calibrate --collectives --db {DB} --bogus", 2, "unknown or incomplete option '--bogus'",
     "see placer calibrate --collectives --help"},
    {"calibrate --collectives --db {MISSING}", 2, "does not exist", "placer profile --from-spec NAME"},
    {"layout --model default --cluster h200x2 --layout tp=2,gbs=8 --collectives-from {TEXT}", 2, "not valid JSON",
     "placer calibrate --collectives --write FILE"},
    {"layout --model default --cluster h200x2 --layout tp=2,gbs=8 --collectives-from {EMPTY}", 2, "not valid JSON",
     "placer calibrate --collectives --write FILE"},
    {"layout --model default --cluster h200x2 --layout tp=2,gbs=8 --collectives-from {DB}", 2,
     "holds no collective curves", "placer profile --collectives N"},
    {"layout --model default --cluster h200x2 --layout tp=2,gbs=8 --collectives-from {MISSING}", 2,
     "cannot read collectives", "No such file"},
    {"layout --model default --cluster h200x2 --layout tp=2,gbs=8 --measured-curves", 2,
     "--measured-curves needs --collectives-from", "the curves to read"},
    /* ---- no GPU ---- */
    {"step --config tiny", 1, "built without CUDA", "use --cpu N", 2, "no GPU found", "use --cpu N"},
    {"profile --db {MISSING} --config tiny", 1, "hardware profiling needs the CUDA engine", "use --from-spec NAME", 1,
     "no GPU found", "use --from-spec NAME"},
    {"calibrate --db {DB}", 2, "no CUDA engine", "use --timer cpu", 2, "no usable GPU", "--timer cpu"},
    {"calibrate --db {DB} --timer cuda", 2, "no CUDA engine", "use --timer cpu", 2, "no usable GPU", "--timer cpu"},
    {"confirm --db {DB} --run 0", 2, "no CUDA engine", "use --timer cpu", 2, "no usable GPU", "--timer cpu"},
    {"confirm --db {DB} --run 0 --timer cuda", 2, "no CUDA engine", "use --timer cpu", 2, "no usable GPU",
     "--timer cpu"},
    /* ---- expert placement (placer experts; layout / plan --experts) ---- */
#define EXP " --model deepseek-v3 --cluster h800-deepseek --ep 64"
    {"experts" EXP, 2, "give one of --load FILE and --generate SETTING", "--generate SETTING"},
    {"experts --load {ERAGGED}" EXP, 2, "logical_count[1] has 2 entries where the first has 3 (wrong shape)",
     "docs/experts.md"},
    {"experts --load {ENEG}" EXP, 2, "count '-2' must be a finite number >= 0", "docs/experts.md"},
    {"experts --load {TEXT}" EXP, 2, "expert load is not valid JSON", "docs/experts.md"},
    {"experts --load {MISSING}" EXP, 2, "cannot read expert load file", "missing.db"},
    {"experts --generate inference-skew" EXP " --slots 300", 2, "300 slots are not divisible by 64 GPUs",
     "a multiple of --ep"},
    {"experts --generate inference-skew --model deepseek-v3 --cluster h800-deepseek --ep 60", 2,
     "--ep 60 does not divide the model's 256 experts", "an ep that divides them"},
    {"experts --generate inference-skew" EXP " --slots 128", 2, "128 slots cannot hold the model's 256 experts",
     "--slots at least 256"},
    {"experts --generate nope" EXP, 2, "no generator settings 'nope'", "inference-skew"},
    {"experts --generate inference-skew" EXP " --placer best", 2, "unknown --placer 'best'", "search, learned"},
    {"experts --generate inference-skew --model gpt12 --cluster h800-deepseek --ep 8", 2, "has no routed experts",
     "a mixture-of-experts model"},
    {"layout --model gpt12 --cluster h200x2 --layout tp=1 --experts {TEXT}", 2, "expert placement is not valid JSON",
     "placer experts --out FILE writes one"},
#undef EXP
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

/* ---- fixtures ---------------------------------------------------------------- */

typedef struct {
    char dir[256];
    char db[320], h2[320], text[320], empty[320], newer[320], foreign[320], missing[320], out[320], runs[320],
        g2[320];
    char eragged[320], eneg[320]; /* expert load files: a ragged logical_count, a negative count */
} files;

static void make_profile_of(const char *path, const char *spec, const char *config) {
    char *args[] = {"profile", "--from-spec", (char *)spec, "--config", (char *)config, "--db", (char *)path,
                    "--portable", NULL};
    char *err = NULL;
    cr_assert_eq(rel_run(args, NULL, &err), 0, "%s", err);
    free(err);
}

static void make_profile(const char *path, const char *spec) { make_profile_of(path, spec, "tiny"); }

static void sql(const char *path, const char *stmt) {
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(h, stmt, NULL, NULL, NULL), SQLITE_OK, "%s: %s", stmt, sqlite3_errmsg(h));
    sqlite3_close(h);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static void make_files(files *f) {
    rel_mkdtemp(f->dir, "bad-inputs");
    snprintf(f->db, sizeof f->db, "%s/tiny.db", f->dir);
    snprintf(f->h2, sizeof f->h2, "%s/h2.db", f->dir);
    snprintf(f->text, sizeof f->text, "%s/text.db", f->dir);
    snprintf(f->empty, sizeof f->empty, "%s/empty.db", f->dir);
    snprintf(f->newer, sizeof f->newer, "%s/newer.db", f->dir);
    snprintf(f->foreign, sizeof f->foreign, "%s/foreign.db", f->dir);
    snprintf(f->missing, sizeof f->missing, "%s/missing.db", f->dir);
    snprintf(f->out, sizeof f->out, "%s/out", f->dir);
    snprintf(f->runs, sizeof f->runs, "%s/runs.db", f->dir);
    snprintf(f->g2, sizeof f->g2, "%s/g2.db", f->dir);
    make_profile(f->runs, "t4x4-pcie");
    char *train[] = {"train", "--db", f->runs, "--updates", "2", "--samples", "4", "--threads", "1", NULL};
    char *err = NULL;
    cr_assert_eq(rel_run(train, NULL, &err), 0, "%s", err);
    free(err);
    make_profile_of(f->g2, "h200x2-nvlink", "tiny,layers=3");
    make_profile(f->db, "t4x4-pcie");
    make_profile(f->h2, "h200x2-nvlink");
    make_profile(f->newer, "t4x4-pcie");
    sql(f->newer, "UPDATE meta SET value = '99' WHERE key = 'schema_version'");
    sql(f->foreign, "CREATE TABLE notes(x TEXT); INSERT INTO notes VALUES ('mine')");
    write_file(f->text, "this is not a database\n");
    snprintf(f->eragged, sizeof f->eragged, "%s/ragged.json", f->dir);
    snprintf(f->eneg, sizeof f->eneg, "%s/negative.csv", f->dir);
    write_file(f->eragged, "{\"logical_count\": [[1, 2, 3], [4, 5]]}\n");
    write_file(f->eneg, "window,layer,expert,count\n0,0,0,4\n0,0,1,-2\n");
    write_file(f->empty, "");
}

/* Replace the placeholders of one word. */
static void expand(const files *f, const char *word, char *out, size_t len) {
    static const char *const keys[] = {"{DB}",  "{H2}", "{TEXT}",    "{EMPTY}", "{NEWER}", "{FOREIGN}",
                                       "{MISSING}", "{OUT}", "{RUNS}", "{G2}", "{ERAGGED}", "{ENEG}"};
    const char *vals[] = {f->db,  f->h2, f->text, f->empty, f->newer,   f->foreign,
                          f->missing, f->out, f->runs, f->g2, f->eragged, f->eneg};
    if (!strcmp(word, "''")) {
        out[0] = 0;
        return;
    }
    size_t k = 0;
    out[0] = 0;
    for (const char *p = word; *p && k + 1 < len;) {
        int hit = 0;
        for (int i = 0; i < (int)(sizeof keys / sizeof keys[0]) && !hit; i++)
            if (!strncmp(p, keys[i], strlen(keys[i]))) {
                k += (size_t)snprintf(out + k, len - k, "%s", vals[i]);
                p += strlen(keys[i]);
                hit = 1;
            }
        if (!hit) out[k++] = *p++, out[k] = 0;
    }
}

static int is_cuda_build(void) {
    char *args[] = {"--version", NULL}, *out = NULL;
    cr_assert_eq(rel_run(args, &out, NULL), 0);
    int cuda = strstr(out, "CUDA engine built") != NULL;
    free(out);
    return cuda;
}

#define N_IMAGES 8

typedef struct {
    char *bytes[N_IMAGES];
    size_t n[N_IMAGES];
} images;

static void take_images(const files *f, images *im) {
    const char *paths[N_IMAGES] = {f->db, f->h2, f->text, f->empty, f->newer, f->foreign, f->runs, f->g2};
    for (int i = 0; i < N_IMAGES; i++) im->bytes[i] = rel_read(paths[i], &im->n[i]);
}

static const char *changed_file(const files *f, const images *im) {
    const char *paths[N_IMAGES] = {f->db, f->h2, f->text, f->empty, f->newer, f->foreign, f->runs, f->g2};
    for (int i = 0; i < N_IMAGES; i++) {
        size_t n = 0;
        char *now = rel_read(paths[i], &n);
        int same = now && n == im->n[i] && !memcmp(now, im->bytes[i], n);
        free(now);
        if (!same) return paths[i];
    }
    return NULL;
}

static int count_char(const char *s, char c) {
    int n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

Test(bad_inputs, every_error_is_one_line_naming_the_problem_and_the_fix_and_loses_nothing, .timeout = 600) {
    files f;
    make_files(&f);
    images im;
    take_images(&f, &im);
    const int cuda = is_cuda_build();
    char failures[16384] = "";
    size_t fl = 0;
    int n_failed = 0;
    for (size_t c = 0; c < N_CASES; c++) {
        const bad_case *bc = &CASES[c];
        char buf[1024], words[32][400];
        char *args[33];
        int n = 0;
        snprintf(buf, sizeof buf, "%s", bc->args);
        char *save = NULL;
        for (char *w = strtok_r(buf, " ", &save); w && n < 32; w = strtok_r(NULL, " ", &save)) {
            expand(&f, w, words[n], sizeof words[n]);
            args[n] = words[n];
            n++;
        }
        args[n] = NULL;
        char *out = NULL, *err = NULL;
        int rc = rel_run(args, &out, &err);
        int want_rc = cuda && bc->rc_cuda ? bc->rc_cuda : bc->rc;
        const char *problem = cuda && bc->problem_cuda ? bc->problem_cuda : bc->problem;
        const char *fix = cuda && bc->fix_cuda ? bc->fix_cuda : bc->fix;
        const char *why = NULL;
        const char *touched = changed_file(&f, &im);
        if (rc != want_rc) why = "exit code";
        else if (!err || count_char(err, '\n') != 1 || err[strlen(err) - 1] != '\n') why = "not exactly one line";
        else if (strncmp(err, "placer", 6) != 0) why = "does not start with 'placer'";
        else if (!strstr(err, problem)) why = "problem not named";
        else if (!strstr(err, fix)) why = "fix not named";
        else if (touched) why = "a file changed";
        else if (access(f.missing, F_OK) == 0) why = "the missing database was created";
        if (why) {
            n_failed++;
            fl += (size_t)snprintf(failures + fl, sizeof failures - fl > 0 ? sizeof failures - fl : 0,
                                   "case %zu [placer %s]: %s (exit %d, want %d): %s", c, bc->args, why, rc, want_rc,
                                   err ? err : "(no stderr)\n");
            if (fl >= sizeof failures) fl = sizeof failures - 1;
            if (touched) { /* restore, so that one bad row does not fail the rest */
                for (int i = 0; i < N_IMAGES; i++) free(im.bytes[i]);
                take_images(&f, &im);
            }
            remove(f.missing);
        }
        free(out);
        free(err);
    }
    if (getenv("PLACER_CATALOGUE_VERBOSE"))
        fprintf(stderr, "bad-input catalogue: %zu cases on a %s build, %d failed\n", N_CASES, cuda ? "CUDA" : "CPU",
                n_failed);
    cr_assert_eq(n_failed, 0, "%d of %zu catalogue rows failed:\n%s", n_failed, N_CASES, failures);
    for (int i = 0; i < N_IMAGES; i++) free(im.bytes[i]);
    rel_rmtree(f.dir);
}

/* Found by fuzz_cli: with a cap nothing fits in (1.5 is a byte count: 1 B),
 * the DP found no candidate and sorted a NULL array (UBSan: qsort's
 * argument is declared nonnull). Every method must report OOM placements
 * and exit 0 (an OOM is a result). */
Test(bad_inputs, search_where_nothing_fits_reports_oom_and_exits_0) {
    files f;
    make_files(&f);
    char *args[] = {"search", "--db", f.db, "--mem-cap", "1.5", "--method", "dp", "--threads", "1", NULL};
    char *out = NULL, *err = NULL;
    int rc = rel_run(args, &out, &err);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    cr_assert(strstr(out, "OOM") != NULL, "%s", out);
    cr_assert(strstr(out, "every single device runs out of memory") != NULL, "%s", out);
    free(out);
    free(err);
    rel_rmtree(f.dir);
}
