#!/usr/bin/env python3
"""Fails when a markdown file of the tree is not linked from docs/README.md
(the index), or when the index links a file that does not exist.
Usage: scripts/check-docs-index.py [ROOT]"""
import os, re, subprocess, sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
index = os.path.join(root, "docs", "README.md")
text = open(index, encoding="utf-8").read()
linked = set()
faults = []
for target in re.findall(r"\]\(([^)#]+)\)", text):
    p = os.path.normpath(os.path.join(root, "docs", target))
    rel = os.path.relpath(p, root)
    if not os.path.exists(p):
        faults.append(f"docs/README.md links {target}, which does not exist")
    linked.add(rel)
tracked = subprocess.run(["git", "-C", root, "ls-files", "*.md"], capture_output=True, text=True).stdout.split()
for md in tracked:
    if md in ("README.md", "docs/README.md") or md.startswith("tests/fuzz/") or not os.path.exists(os.path.join(root, md)):
        continue
    if md not in linked:
        faults.append(f"{md} is not in the index docs/README.md")
for f in faults:
    print(f, file=sys.stderr)
if faults:
    sys.exit(1)
print(f"check-docs-index: {len(linked)} documents indexed, every markdown file of the tree among them")
