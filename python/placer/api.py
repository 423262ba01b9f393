"""placer.api: the simulator and the placers from Python, with NumPy arrays.

A :class:`Session` fixes one placement problem, exactly as ``placer train``
and ``placer search`` set it up (policy/session.h): a profile database (or a
built-in spec machine), a graph config, the co-location grouping, the
pipeline schedule, a per-device memory cap and the simulator parameters
calibrated for that machine when the database has them. Everything else
runs on it:

* ``simulate(placements)``: a batch of placements (an ``(n, n_nodes)`` or
  ``(n, n_groups)`` integer array) simulated in C on the session's threads,
  one simulator context per thread, no Python loop per placement;
* ``evaluate(placement)``: one placement, the hot path of the Gymnasium
  environments;
* ``search(method, ...)``: the baselines and searches of ``placer search``;
* ``train(...)``: the seq2seq + REINFORCE placer of ``placer train``.

Costs are what every placer minimises: the simulated step time in
microseconds, or the OOM penalty (10 s) when a device runs out of memory.
The reward the placers and the environments use is ``-sqrt(cost in s)``,
computed as the C REINFORCE computes it (:func:`reward`).

Every error of the C library arrives as an exception carrying its message:
:class:`InputError` (a ``ValueError``) for bad input, :class:`NotFoundError`
(a ``FileNotFoundError``) for a missing file or nothing stored, and
:class:`PlacerError` (a ``RuntimeError``, the base of both) otherwise.
"""

import math
import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import _core
from ._core import InputError, NotFoundError, PlacerError

OOM_PENALTY_US = float(_core.OOM_PENALTY_US)
N_FEATURES = _core.N_FEATURES

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_EVENT_DTYPE = np.dtype([("kind", "U5"), ("node", np.int32), ("micro_batch", np.int32), ("device", np.int32),
                         ("dst_device", np.int32), ("start_us", np.float64), ("end_us", np.float64)])


def reward(cost_us):
    """The placers' reward for a cost in microseconds: ``-sqrt(cost_us * 1e-6)``.

    Bit for bit what the C REINFORCE uses (its cost is ``sqrt(cost_us * 1e-6)``).
    Accepts a float or a NumPy array.
    """
    if isinstance(cost_us, np.ndarray):
        return -np.sqrt(cost_us * 1e-6)
    return -math.sqrt(cost_us * 1e-6)


@dataclass
class SimResult:
    """Results of a batch, one row per placement (NumPy arrays)."""

    step_us: np.ndarray       # (n,) float64: simulated step time (also for OOM placements)
    cost_us: np.ndarray       # (n,) float64: step_us, or the OOM penalty when oom
    peak_bytes: np.ndarray    # (n, n_devices) int64: each device's peak memory
    busy_us: np.ndarray       # (n, n_devices) float64: each device's compute time
    oom: np.ndarray           # (n,) bool: some device exceeds its cap
    oom_device: np.ndarray    # (n,) int32: first such device, -1 if none
    devices_used: np.ndarray  # (n,) int32: devices holding at least one node

    @property
    def reward(self):
        """(n,) float64: ``-sqrt(cost in s)``, the placers' reward."""
        return reward(self.cost_us)

    @property
    def max_peak_bytes(self):
        """(n,) int64: the largest per-device peak."""
        return self.peak_bytes.max(axis=1) if self.peak_bytes.shape[1] else np.zeros(len(self.step_us), np.int64)

    def __len__(self):
        return len(self.step_us)


@dataclass
class Candidate:
    """One placement found by a search or a placer."""

    label: str                 # e.g. "single gpu 0", "dp 2 stages", "rl top 1"
    step_us: float
    cost_us: float
    peak_bytes: int            # largest per-device peak
    oom: bool
    devices_used: int
    nodes: np.ndarray          # (n_nodes,) int32 node placement
    units: Optional[np.ndarray]  # (n_groups,) int32 group placement, None when a group is split
    aux: float                 # method-specific figure (the DP's estimate in us), 0 if none

    @property
    def reward(self):
        return reward(self.cost_us)


def _candidates(rows):
    out = []
    for d in rows:
        units = d["units"]
        out.append(
            Candidate(
                label=d["label"], step_us=d["step_us"], cost_us=d["cost_us"], peak_bytes=d["peak_bytes"],
                oom=d["oom"], devices_used=d["devices_used"], nodes=np.array(d["nodes"], dtype=np.int32),
                units=None if units is None else np.array(units, dtype=np.int32), aux=d["aux"],
            )
        )
    return out


class Session(_core.Session):
    """One placement problem (see the module comment).

    Parameters (the options of ``placer train`` / ``placer search``):
      db             profile database (a path); or spec="h200x4-nvlink" etc. for a
                     spec machine built in memory (no database; neutral parameters)
      config         graph config: "default" (the 49M GPT), "gpt12", "default,layers=12";
                     None: the graph stored in the database ("default" for a spec)
      groups         "colocate" (13 groups on the default GPT) or "none" (one unit per node)
      micro_batches  m, dividing the batch
      schedule       "gpipe", "1f1b" (or "interleaved", run as 1f1b with one chunk)
      mem_cap        per-device cap: text ("12GB", "40GiB", "0.5", "50%"), an int (bytes) or a
                     float (a fraction of each device's memory); None: device memory
      devices        use devices 0..devices-1 only (0: all); for a spec, the device count
      threads        evaluation threads (0: all online cores)
      calibrated     use the database's fitted simulator parameters when it has them
      write          open the database for writing (train() records its runs)
    """

    def __init__(self, db=None, config=None, groups="colocate", micro_batches=1, schedule="gpipe", mem_cap=None,
                 devices=0, threads=0, *, calibrated=True, write=False, spec=None):
        if db is not None:
            db = os.fspath(db)
        if isinstance(mem_cap, (int, np.integer)) and not isinstance(mem_cap, bool):
            mem_cap = str(int(mem_cap))  # bytes (1 would read as the fraction 1.0: 100%)
        elif isinstance(mem_cap, (float, np.floating)):
            mem_cap = repr(float(mem_cap))  # a fraction of each device's memory when <= 1
        super().__init__(db, config, groups, int(micro_batches), schedule, mem_cap, int(devices), int(threads),
                         calibrated=bool(calibrated), write=bool(write), spec=spec)
        info = self._info()
        self.info = info
        self.db = db
        self.n_nodes = info["n_nodes"]
        self.n_groups = info["n_groups"]
        self.n_devices = info["n_devices"]
        self.micro_batches = info["micro_batches"]
        self.schedule = info["schedule"]
        self.machine = info["machine"]
        self.graph_key = info["graph_key"]
        self.groups = info["groups"]
        self.threads = info["threads"]
        self.oom_penalty_us = info["oom_penalty_us"]
        self.sim_params = info["sim_params"]
        self.calibrated = info["n_sim_params"] > 0
        self.nodes = info["nodes"]
        self.node_group = np.array(info["node_group"], dtype=np.int32)
        self.features = np.array(info["features"], dtype=np.float64).reshape(self.n_groups, N_FEATURES)
        self.cap_bytes = np.array(info["cap_bytes"], dtype=np.int64)

    def __repr__(self):
        return (f"placer.Session({self.info['origin']}, graph {self.graph_key}, {self.n_nodes} nodes, "
                f"{self.n_groups} groups, {self.n_devices} devices, m={self.micro_batches} {self.schedule})")

    # ---- placements ----------------------------------------------------

    def to_nodes(self, units):
        """Expand a group placement (n_groups,) or batch (n, n_groups) to node placements."""
        u = np.asarray(units)
        return u[..., self.node_group].astype(np.int32)

    def to_units(self, nodes):
        """Collapse a node placement to its group placement, or None when some group is split."""
        n = np.asarray(nodes, dtype=np.int64)
        if n.shape != (self.n_nodes,):
            raise InputError(f"placement has {n.size} entries but the graph needs {self.n_nodes}")
        units = np.full(self.n_groups, -1, dtype=np.int64)
        units[self.node_group] = n
        if not np.array_equal(units[self.node_group], n):
            return None
        return units.astype(np.int32)

    def _as_rows(self, placements, groups):
        a = np.asarray(placements)
        if a.ndim == 1:
            a = a.reshape(1, -1)
        if a.ndim != 2:
            raise InputError(f"placements must be a 1-D placement or a 2-D array of them, got {a.ndim} dimensions")
        if a.size and a.dtype.kind not in "iu":
            if a.dtype.kind == "b" or not np.all(np.equal(np.mod(a, 1), 0)):
                raise InputError(f"placements must be device indices (integers), got dtype {a.dtype}")
        width = a.shape[1]
        if groups is None:
            if width == self.n_groups:
                groups = True
            elif width == self.n_nodes:
                groups = False
        if groups is None or width != (self.n_groups if groups else self.n_nodes):
            # the C library's own length message
            self.evaluate(np.zeros(width, dtype=np.int32))
            raise InputError(f"placement has {width} entries")  # not reached: evaluate raised
        if a.size and (a.min() < _INT32_MIN or a.max() > _INT32_MAX):
            bad = int(a.max() if a.max() > _INT32_MAX else a.min())
            raise InputError(f"placement has device {bad} but only devices 0..{self.n_devices - 1} exist")
        return np.ascontiguousarray(a, dtype=np.int32), bool(groups)

    def simulate(self, placements, *, groups=None):
        """Simulate a batch of placements in C, in parallel; returns a :class:`SimResult`.

        placements: (n, n_nodes) node placements or (n, n_groups) group placements (a
        single placement is a batch of one); groups=True/False forces the reading when
        both lengths are equal. Every row is checked before any runs: a wrong length or
        a device out of range raises InputError with the C message, naming the row.
        """
        rows, groups = self._as_rows(placements, groups)
        n, D = rows.shape[0], self.n_devices
        res = SimResult(
            step_us=np.empty(n, np.float64), cost_us=np.empty(n, np.float64),
            peak_bytes=np.empty((n, D), np.int64), busy_us=np.empty((n, D), np.float64),
            oom=np.empty(n, np.bool_), oom_device=np.empty(n, np.int32), devices_used=np.empty(n, np.int32),
        )
        self._simulate(rows, n, groups, res.step_us, res.cost_us, res.peak_bytes, res.busy_us, res.oom,
                       res.oom_device, res.devices_used)
        return res

    def trace(self, placement, path=None):
        """Simulate one placement with tracing on; returns (step_us, events, critical_path).

        events and critical_path are NumPy structured arrays with fields kind ("F", "B",
        "adamw", "act", "grad", "add", "zero"), node, micro_batch, device, dst_device
        (-1 for compute), start_us and end_us, as sim.h's sim_event. With path, writes
        the Chrome trace (Perfetto, chrome://tracing) that ``placer simulate --trace``
        writes for the same placement.
        """
        step_us, events, crit = self._trace(placement, None if path is None else os.fspath(path))
        return step_us, np.array(events, dtype=_EVENT_DTYPE), np.array(crit, dtype=_EVENT_DTYPE)

    # ---- searches and placers -----------------------------------------

    def search(self, method, *, budget=2000, seed=1, batch=8, max_evals=5e7):
        """Run one of the searches of ``placer search``; returns (candidates, info).

        method: "single", "human", "dp", "random", "anneal", "local", "exhaustive", or
        Baechi's "etf" and "sct" (m-ETF and m-SCT, on nodes; sct needs GLPK at build time).
        budget / batch / seed: evaluations, batch size and seed of random, anneal
        and local (info["curve"] is their best-so-far cost after each evaluation);
        max_evals bounds the exhaustive search (info has its counts).
        Candidates are :class:`Candidate` objects.
        """
        rows, info = super().search(method, budget=int(budget), seed=int(seed), batch=int(batch),
                                    max_evals=float(max_evals))
        if "curve" in info:
            info["curve"] = np.array(info["curve"], dtype=np.float64)
        return _candidates(rows), info

    def baselines(self):
        """single, human and dp together, sorted by cost (the reference table of ``placer train``)."""
        out = []
        for m in ("single", "human", "dp"):
            out += self.search(m)[0]
        out.sort(key=lambda c: c.cost_us)
        return out

    def train(self, **options):
        """Train the seq2seq placer with REINFORCE (``placer train``); returns a dict.

        Options (defaults of reinforce_options_default): updates=250, samples=8, seed=1,
        baseline="ema"|"loo", entropy, lr, clip, hidden, top_k, stay, logit_clip,
        ema_decay, record=True, algo="reinforce"|"ppo", ppo_epochs, ppo_clip; a session
        with groups="learned" (the hierarchical planner) or "eagle" trains the grouper
        jointly (grouper_groups, group_prior), as ``placer train --groups`` does. With record and a session opened with write=True, the
        samples and checkpoints go to the database as a new run (its id in "run_id";
        read them back with :func:`run_samples`). The result holds "shortlist"
        (Candidates: the top distinct placements and the final favourite), "progress"
        (one dict per update) and "best_cost_us".
        """
        out = super().train(**options)
        out["shortlist"] = _candidates(out["shortlist"])
        return out


def runs(db):
    """The placer runs stored in a profile database, oldest first (list of dicts)."""
    return _core.runs(os.fspath(db))


def run_samples(db, run_id):
    """Every sample of a run: dict of NumPy arrays (update, sample, placement (n, n_nodes),
    step_us, peak_bytes, oom), in (update, sample) order."""
    d = _core.run_samples(os.fspath(db), int(run_id))
    width = len(d["placement"][0]) if d["placement"] else 0
    return {
        "update": np.array(d["update"], dtype=np.int32),
        "sample": np.array(d["sample"], dtype=np.int32),
        "placement": np.array(d["placement"], dtype=np.int32).reshape(len(d["placement"]), width),
        "step_us": np.array(d["step_us"], dtype=np.float64),
        "peak_bytes": np.array(d["peak_bytes"], dtype=np.int64),
        "oom": np.array(d["oom"], dtype=np.bool_),
    }


def simulate_layout(model, cluster, layout, *, seq=None, trace=None):
    """One training step of a parallel layout on a cluster, as ``placer layout`` predicts it.

    model: a preset ("default", "gpt12,batch=16"), a shipped model ("llama-3-8b") or a
    config.json path; cluster: a name of data/clusters ("dgx-h100") or a file; layout:
    the layout text ("tp=2,pp=2,dp=2,mbs=2,gbs=16", keys of core/layout.h). Returns a
    dict: layout (in full), step_us, tokens_per_s, mfu, model / hardware TFLOP/s per
    GPU, breakdown_us (compute, recompute, tp, cp, dp, pp, bubble, optimizer),
    micro_batches, gpus, memory_bytes (worst stage), stage_memory_bytes, mem_cap_bytes,
    oom. trace: a path for the Chrome trace of one pipeline replica.
    """
    return _core.simulate_layout(model, os.fspath(cluster), layout, seq=int(seq or 0),
                                 trace=None if trace is None else os.fspath(trace))


def plan(model, cluster, **options):
    """The layout planner of ``placer plan``: the fastest layouts that fit.

    Options: gpus (default: the cluster's), global_batch (sequences per step; default
    the model's batch), seq, precision ("bf16", "fp16", "fp8", "tf32", "fp32"), top
    (layouts kept, default 5), fix ("tp=8,pp=4", dimensions held fixed), framework
    ("any", "megatron", "torchtitan", "deepspeed"), max_tp, max_cp, max_vp, max_mbs.
    Returns a dict: top (a list of simulate_layout-style dicts, fastest first, each with
    its lower_bound_us and split_dp), and the search's counts (considered, pruned_memory,
    pruned_bound, simulated, sim_runs, sim_oom, wall_s, min_mem_bytes).
    """
    given = {k: v for k, v in options.items() if v is not None}
    return _core.plan(model, os.fspath(cluster), **given)


def graph_info(config="default"):
    """The GPT graph of a config (a dict: key, n_nodes, params, config, nodes)."""
    return _core.graph_info(config)


def spec_names():
    """The built-in spec machines (for Session(spec=...))."""
    return _core.spec_names()


__all__ = [
    "Session", "SimResult", "Candidate", "PlacerError", "InputError", "NotFoundError", "reward", "runs",
    "run_samples", "graph_info", "spec_names", "simulate_layout", "plan", "OOM_PENALTY_US", "N_FEATURES",
]
