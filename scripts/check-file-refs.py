#!/usr/bin/env python3
"""Lists names of source files (x.c, x.h, x.cu, x.cuh, x.py, x.sh, dir/x.c ...)
that the library's sources, tests, benchmarks, scripts and meson files mention
but that do not exist in the tree, so a comment never points at a file that
has moved or gone. Usage: scripts/check-file-refs.py [ROOT]; exit 1 when any."""
import os, re, subprocess, sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
tracked = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True).stdout.split()
paths = set(tracked)
names = {os.path.basename(p) for p in tracked}
REF = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[A-Za-z_][\w-]*\.(?:c|h|cu|cuh|py|sh))\b(?![\w(])")
SCAN = (".c", ".h", ".cu", ".cuh", ".py", ".sh", "meson.build")
TOPS = {"core", "hw", "sim", "profile", "policy", "plan", "calib", "cli", "python", "tests", "benchmarks",
        "scripts", "data", "docs"}
OTHERS = {"llm.c", "flash_tests_attention.cu", "arguments.py", "job_config.py", "last.c", "serve_assets_data.c",  # other projects' files (llm.c, Megatron-LM, torchtitan); a file meson generates; a member access
          "pretrain_gpt.py", "train.py",  # Megatron-LM's and a DeepSpeed user's training scripts
          "env.sh", "placer_model.py", "pipeline.py"}  # files `placer plan --export F --out DIR` writes
faults = 0
for p in tracked:
    if not p.endswith(SCAN) or p.startswith(("tests/fuzz/", "docs/")):
        continue
    with open(os.path.join(root, p), encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f, 1):
            if re.match(r"\s*#\s*include\s*<", line):
                continue
            for m in REF.finditer(line):
                ref = m.group(1).lstrip("./")
                top = ref.split("/")[0]
                # a bare header may be a system one; a path must start in one of our folders
                if "/" in ref and top not in TOPS:
                    continue
                if "/" not in ref and (ref.endswith(".h") or len(ref.split(".")[0]) < 3 or ref in OTHERS):
                    continue  # a system header, a member access (r.c), or another project's file
                if "/" in ref:
                    ok = ref in paths or any(q.endswith("/" + ref) for q in paths)
                else:
                    ok = ref in names
                if not ok:
                    print(f"{p}:{i}: names {ref}, which is not in the tree")
                    faults += 1
sys.exit(1 if faults else 0)
