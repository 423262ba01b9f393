"""placer.envs: Gymnasium environments over the simulator.

``placer/Placement-v0`` (:class:`PlacementEnv`): one episode places every unit
(co-location group, or node with groups="none") in topological order, one
action per unit, as the seq2seq placer writes its placement. The action is a
device index, ``Discrete(n_devices)``. The observation is a dict of arrays:

  features  float32 (N_FEATURES,): the unit's features, the C placer network's
            input (policy/grouping.c): 0..6 member count per op kind
            (embedding, layernorm, attention, residual, mlp, head, loss);
            7 log(1 + bytes per sample sent to other units) / 20; 8 log(1 +
            parameters) / 20; 9 log(1 + fwd+bwd FLOPs per sample) / 25; 10
            log(1 + activation bytes kept per sample) / 20; 11 members / 4;
            12 position / (units - 1); 13 producer units / 2; 14 consumer units
            / 2; 15 span of the longest incoming edge / 4. All zeros once done.
  shape     float32 (3,): the shape of the unit's largest output tensor over
            the whole batch, e.g. (16, 256, 384), padded with 1s to three
            dimensions; zeros once done
  unit      int64 Discrete(units + 1): the unit to place now (units once done)
  placed    int64 MultiDiscrete([n_devices + 1] * units): device + 1 of every
            unit placed so far, 0 for units not placed yet

The reward is 0 until the last action, then ``-sqrt(cost in s)`` with the cost
the C placers minimise: the simulated step time, or 10 s when the placement
runs out of memory (the same number as the C evaluator's, bit for bit). The
final ``info`` holds step_us, cost_us, peak_bytes (largest per-device peak),
oom, devices_used, placement (the unit placement) and nodes (the node
placement). Episodes terminate after ``units`` actions; nothing truncates.

``placer/PlacementMoves-v0`` (:class:`PlacementMovesEnv`), Placeto's style:
the state is a whole placement; the episode visits the units in order and
each action moves the current unit to a device (possibly its own). Reward
after each action: the improvement of the reward above, old cost minus new
cost in sqrt-seconds, so an episode's rewards add up to start cost - final
cost. Observation: features, shape and unit as above, placement (MultiDiscrete
[n_devices] * units, the current placement) and cost (float32 (1,), the
current ``sqrt(cost in s)``). The start is a random placement from the
episode's seed, or ``options={"placement": ...}`` at reset. ``info`` after
every step: as above for the current placement.

Both take the options of :class:`placer.Session` (db=, spec=, config=,
groups=, micro_batches=, schedule=, mem_cap=, devices=, calibrated=), or
session= an existing one. Each environment owns a session with one thread
(environments parallelise across processes, or use Session.simulate for
batches).
"""

import math

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .api import N_FEATURES, Session


# Finite bounds (the checker warns about infinite ones): every feature is at
# most the node count (counts per op kind) and O(1) otherwise; a cost of
# 1000 sqrt-seconds is a step of 11.6 days.
_COST_HIGH = 1000.0


def _feature_high(session):
    return float(max(1000.0, session.n_nodes))


def _unit_tables(session):
    """(units + 1, N_FEATURES) features and (units + 1, 3) shapes, a zero row last (for "done")."""
    U = session.n_groups
    feats = np.zeros((U + 1, N_FEATURES), dtype=np.float32)
    feats[:U] = session.features
    shapes = np.zeros((U + 1, 3), dtype=np.float32)
    best = np.zeros(U)
    for node in session.nodes:
        shape = tuple(node["out_shape"]) + (1,) * (3 - len(node["out_shape"]))
        size = float(np.prod(shape))
        g = node["group"]
        if size > best[g]:
            best[g] = size
            shapes[g] = shape
    feats.setflags(write=False)
    shapes.setflags(write=False)
    return feats, shapes


def _open_session(session, db, spec, config, groups, micro_batches, schedule, mem_cap, devices, calibrated):
    if session is not None:
        return session
    return Session(db=db, config=config, groups=groups, micro_batches=micro_batches, schedule=schedule,
                   mem_cap=mem_cap, devices=devices, threads=1, calibrated=calibrated, spec=spec)


class PlacementEnv(gym.Env):
    """Place one unit per step; the reward comes at the end (see the module comment)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 30}

    def __init__(self, db=None, groups="colocate", micro_batches=1, schedule="gpipe", mem_cap=None, config=None,
                 devices=0, calibrated=True, spec=None, session=None, render_mode=None):
        self.session = _open_session(session, db, spec, config, groups, micro_batches, schedule, mem_cap, devices,
                                     calibrated)
        s = self.session
        self.n_units = U = s.n_groups
        self.n_devices = D = s.n_devices
        # one row per unit and a zero row for "done"
        self._features, self._shapes = _unit_tables(s)
        self.action_space = spaces.Discrete(D)
        self.observation_space = spaces.Dict({
            "features": spaces.Box(low=0.0, high=_feature_high(s), shape=(N_FEATURES,), dtype=np.float32),
            "shape": spaces.Box(low=0.0, high=float(self._shapes.max()), shape=(3,), dtype=np.float32),
            "unit": spaces.Discrete(U + 1),
            "placed": spaces.MultiDiscrete(np.full(U, D + 1, dtype=np.int64)),
        })
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self._dev = np.zeros(U, dtype=np.int32)   # the placement being written
        self._placed = np.zeros(U, dtype=np.int64)
        self._t = U                               # no episode until reset
        self._last = None

    def _obs(self):
        t = self._t
        return {"features": self._features[t].copy(), "shape": self._shapes[t].copy(), "unit": t,
                "placed": self._placed.copy()}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._placed[:] = 0
        self._last = None
        return self._obs(), {}

    def step(self, action):
        t = self._t
        if t >= self.n_units:
            raise RuntimeError("the episode is over (or was never started): call reset()")
        a = int(action)
        if a < 0 or a >= self.n_devices:
            raise ValueError(f"action {a} is not a device: only devices 0..{self.n_devices - 1} exist")
        self._dev[t] = a
        self._placed[t] = a + 1
        t += 1
        self._t = t
        if t < self.n_units:
            return self._obs(), 0.0, False, False, {}
        step_us, cost_us, peak, oom, used = self.session.evaluate(self._dev)
        info = {"step_us": step_us, "cost_us": cost_us, "peak_bytes": peak, "oom": oom, "devices_used": used,
                "placement": self._dev.copy(), "nodes": self.session.to_nodes(self._dev)}
        self._last = info
        return self._obs(), -math.sqrt(cost_us * 1e-6), True, False, info

    def render(self):
        if self.render_mode != "ansi":
            return None
        done = ",".join(str(int(d)) for d in self._dev[: self._t])
        text = f"unit {self._t}/{self.n_units} placed [{done}]"
        if self._last is not None:
            text += f" step {self._last['step_us'] / 1000:.3f} ms{' OOM' if self._last['oom'] else ''}"
        return text


class PlacementMovesEnv(gym.Env):
    """Placeto-style: move one unit per step, rewarded by the improvement (see the module comment)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 30}

    def __init__(self, db=None, groups="colocate", micro_batches=1, schedule="gpipe", mem_cap=None, config=None,
                 devices=0, calibrated=True, spec=None, session=None, render_mode=None):
        self.session = _open_session(session, db, spec, config, groups, micro_batches, schedule, mem_cap, devices,
                                     calibrated)
        s = self.session
        self.n_units = U = s.n_groups
        self.n_devices = D = s.n_devices
        self._features, self._shapes = _unit_tables(s)
        self.action_space = spaces.Discrete(D)
        self.observation_space = spaces.Dict({
            "features": spaces.Box(low=0.0, high=_feature_high(s), shape=(N_FEATURES,), dtype=np.float32),
            "shape": spaces.Box(low=0.0, high=float(self._shapes.max()), shape=(3,), dtype=np.float32),
            "unit": spaces.Discrete(U + 1),
            "placement": spaces.MultiDiscrete(np.full(U, D, dtype=np.int64)),
            "cost": spaces.Box(low=0.0, high=_COST_HIGH, shape=(1,), dtype=np.float32),
        })
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self._dev = np.zeros(U, dtype=np.int32)
        self._t = U
        self._cost = 0.0   # sqrt(cost in s) of the current placement
        self._info = {}

    def _evaluate(self):
        step_us, cost_us, peak, oom, used = self.session.evaluate(self._dev)
        self._cost = math.sqrt(cost_us * 1e-6)
        self._info = {"step_us": step_us, "cost_us": cost_us, "peak_bytes": peak, "oom": oom, "devices_used": used,
                      "placement": self._dev.copy()}

    def _obs(self):
        return {"features": self._features[self._t].copy(), "shape": self._shapes[self._t].copy(),
                "unit": self._t, "placement": self._dev.astype(np.int64),
                "cost": np.array([self._cost], dtype=np.float32)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        start = None if options is None else options.get("placement")
        if start is None:
            self._dev[:] = self.np_random.integers(0, self.n_devices, size=self.n_units)
        else:
            start = np.asarray(start)
            if start.shape != (self.n_units,):
                raise ValueError(f"options['placement'] has {start.size} entries but the problem has "
                                 f"{self.n_units} units")
            if start.min() < 0 or start.max() >= self.n_devices:
                raise ValueError(f"options['placement'] has a device outside 0..{self.n_devices - 1}")
            self._dev[:] = start
        self._t = 0
        self._evaluate()
        return self._obs(), dict(self._info)

    def step(self, action):
        t = self._t
        if t >= self.n_units:
            raise RuntimeError("the episode is over (or was never started): call reset()")
        a = int(action)
        if a < 0 or a >= self.n_devices:
            raise ValueError(f"action {a} is not a device: only devices 0..{self.n_devices - 1} exist")
        old = self._cost
        self._dev[t] = a
        self._evaluate()
        self._t = t + 1
        return self._obs(), old - self._cost, self._t >= self.n_units, False, dict(self._info)

    def render(self):
        if self.render_mode != "ansi":
            return None
        return (f"unit {self._t}/{self.n_units} placement [{','.join(str(int(d)) for d in self._dev)}] "
                f"step {self._info.get('step_us', float('nan')) / 1000:.3f} ms")
