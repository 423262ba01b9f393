"""bench_env.py: how fast the package is against the C benchmark.

1. The batch call. Session.simulate on sim_speed's own placements (the same
   4096 random placements of the default GPT over the in-memory
   h200x4-nvlink spec, from the library's generator with sim_speed's seed),
   on one thread, against `sim_speed --case K --cpu` run alternately in the
   same process tree. Both figures are thread CPU time per simulation, so a
   core shared with other work does not count against either. Target (issue
   19): the batch reaches >= 80% of sim_speed's simulations per second.
2. The environment. A Python loop of env.step over placer/Placement-v0 on
   the 13-group problem (data/h200x2.db, m=1), through gym.make's wrappers
   and on the bare environment, with precomputed random actions (the
   policy's cost is not the environment's). Target: >= 20k steps/s.

Each figure is the median of --repeats runs.

    python python/benchmarks/bench_env.py --sim-speed build/benchmarks/sim/sim_speed [--repeats 5] [--seconds 1]
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import placer
from placer import _core

ROOT = Path(__file__).resolve().parents[2]
N_PLACEMENTS = 4096  # as sim_speed
CASES = [  # (sim_speed --case K, micro-batches, schedule)
    (0, 1, "gpipe"),
    (2, 4, "1f1b"),
]


def sim_speed_rate(exe, case, seconds):
    out = subprocess.run([str(exe), "--case", str(case), "--cpu", "--seconds", str(seconds)], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("default GPT"):
            # columns: label ... nodes stages sims/s us/sim mean-step-ms
            fields = line[26:].split()
            return float(fields[3]), float(fields[5])
    raise RuntimeError(f"no result row in sim_speed's output:\n{out}")


def batch_rate(session, rows, seconds):
    """Simulations per second of thread CPU time (the batch runs on this thread)."""
    session.simulate(rows)  # warm-up
    n, t0 = 0, time.thread_time()
    w0 = time.perf_counter()
    while time.thread_time() - t0 < seconds:
        res = session.simulate(rows)
        n += len(rows)
    cpu, wall = time.thread_time() - t0, time.perf_counter() - w0
    return n / cpu, n / wall, float(res.step_us.mean()) / 1000.0


def env_rate(env, n_steps, actions):
    env.reset(seed=0)
    U = env.unwrapped.n_units
    t0 = time.perf_counter()
    c0 = time.process_time()
    k = 0
    done = 0
    while done < n_steps:
        env.reset()
        for t in range(U):
            env.step(actions[k])
            k += 1
        done += U
        if k + U > len(actions):
            k = 0
    return done / (time.perf_counter() - t0), done / (time.process_time() - c0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim-speed", default=str(ROOT / "build" / "benchmarks" / "sim" / "sim_speed"))
    ap.add_argument("--db", default=str(ROOT / "data" / "h200x2.db"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--env-steps", type=int, default=130000)
    a = ap.parse_args()

    print(f"bench_env: medians of {a.repeats} runs; sim_speed = {a.sim_speed}")
    print("\n1. batch call vs sim_speed (4096 placements, h200x4-nvlink spec, default GPT, one thread, CPU time)")
    print(f"{'case':<22} {'sim_speed/s':>12} {'batch/s':>12} {'ratio':>7} {'batch wall/s':>13} {'mean step ms':>22}")
    ok = True
    for case, m, order in CASES:
        s = placer.Session(spec="h200x4-nvlink", devices=4, micro_batches=m, schedule=order, threads=1)
        rows = np.frombuffer(_core.rng_ints(1, N_PLACEMENTS * s.n_nodes, 4), dtype=np.int32)
        rows = rows.reshape(N_PLACEMENTS, s.n_nodes)
        c_rates, py_rates, py_wall = [], [], []
        c_mean = py_mean = float("nan")
        for _ in range(a.repeats):  # alternated
            r, c_mean = sim_speed_rate(a.sim_speed, case, a.seconds)
            c_rates.append(r)
            cpu, wall, py_mean = batch_rate(s, rows, a.seconds)
            py_rates.append(cpu)
            py_wall.append(wall)
        c, p = statistics.median(c_rates), statistics.median(py_rates)
        ratio = p / c
        ok &= ratio >= 0.8
        print(f"m={m} {order:<17} {c:12.0f} {p:12.0f} {ratio:7.3f} {statistics.median(py_wall):13.0f} "
              f"{c_mean:10.3f} {py_mean:10.3f}   {'>= 0.8 met' if ratio >= 0.8 else 'MISSED'}")
        print(f"   sim_speed runs: {', '.join(f'{x:.0f}' for x in c_rates)}; batch runs: "
              f"{', '.join(f'{x:.0f}' for x in py_rates)}")

    print("\n   the same batch on every online core (wall time; no target, for scale):")
    for case, m, order in CASES:
        s = placer.Session(spec="h200x4-nvlink", devices=4, micro_batches=m, schedule=order, threads=0)
        rows = np.frombuffer(_core.rng_ints(1, N_PLACEMENTS * s.n_nodes, 4), dtype=np.int32)
        rows = rows.reshape(N_PLACEMENTS, s.n_nodes)
        walls = []
        for _ in range(a.repeats):
            s.simulate(rows)
            n, w0 = 0, time.perf_counter()
            while time.perf_counter() - w0 < a.seconds:
                s.simulate(rows)
                n += len(rows)
            walls.append(n / (time.perf_counter() - w0))
        print(f"   m={m} {order:<6} {s.threads} threads: {statistics.median(walls):10.0f} sims/s wall")

    print(f"\n2. env.step loop, placer/Placement-v0, {a.db}, m=1 ({a.env_steps} steps per run)")
    actions = np.random.default_rng(0).integers(0, 2, 13 * 10000).tolist()
    for label, env in (("gym.make (wrappers)", gym.make("placer/Placement-v0", db=a.db)),
                       ("bare PlacementEnv", placer.PlacementEnv(db=a.db))):
        walls, cpus = [], []
        for _ in range(a.repeats):
            w, c = env_rate(env, a.env_steps, actions)
            walls.append(w)
            cpus.append(c)
        w = statistics.median(walls)
        ok &= w >= 20000 or label != "gym.make (wrappers)"
        print(f"{label:<22} {w:10.0f} steps/s wall, {statistics.median(cpus):10.0f} steps/s CPU   "
              f"{'>= 20k met' if w >= 20000 else 'below 20k'}   (runs: {', '.join(f'{x:.0f}' for x in walls)})")
    print("\nall targets met" if ok else "\nsome targets MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
