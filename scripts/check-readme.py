#!/usr/bin/env python3
"""Checks that the README's examples print what the program prints today.

Every ```console block of README.md is a session: a line "$ placer ..." is a
command (a trailing backslash continues it), the lines after it, up to the next
command or the block's end, are what it prints. A line "..." stands for any
number of lines; a figure followed by " s" (a wall time) matches any figure.
The command runs with build/cli/placer (or $PLACER) from the repository root.
Usage: scripts/check-readme.py [README]; exit 1 on the first difference, printed.
"""
import os, re, shlex, subprocess, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
readme = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "README.md")
placer = os.environ.get("PLACER", os.path.join(root, "build", "cli", "placer"))
TIME = re.compile(r"\d+(\.\d+)? s\b")


def sessions(text):
    blocks = re.findall(r"```console\n(.*?)```", text, re.S)
    for b in blocks:
        cmd, out, lines = None, [], b.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("$ "):
                if cmd:
                    yield cmd, out
                cmd, out = line[2:], []
                while cmd.endswith("\\"):
                    i += 1
                    cmd = cmd[:-1] + " " + lines[i].strip()
            elif cmd is not None:
                out.append(line)
            i += 1
        if cmd:
            yield cmd, out


def matches(want, got):
    """want may hold '...' lines (any run of lines); times are masked"""
    norm = lambda s: TIME.sub("T s", s.rstrip())
    want = [norm(w) for w in want]
    got = [norm(g) for g in got]
    def m(i, j):
        if i == len(want):
            return j == len(got)
        if want[i] == "...":
            return any(m(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and want[i] == got[j] and m(i + 1, j + 1)
    return m(0, 0)


def main():
    text = open(readme, encoding="utf-8").read()
    n = 0
    for cmd, want in sessions(text):
        argv = shlex.split(cmd)
        if argv[0] != "placer":
            continue
        r = subprocess.run([placer] + argv[1:], cwd=root, capture_output=True, text=True, timeout=600)
        got = (r.stdout + r.stderr).splitlines()
        if not matches(want, got):
            print(f"check-readme: `{cmd}` prints otherwise than README.md shows:", file=sys.stderr)
            print("\n".join(got), file=sys.stderr)
            return 1
        n += 1
    print(f"check-readme: {n} examples print what README.md shows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
