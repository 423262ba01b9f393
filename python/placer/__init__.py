"""placer: learned device placement with a calibrated simulator, from Python.

    import gymnasium as gym, placer
    s = placer.Session(db="data/h200x2.db", micro_batches=4, schedule="1f1b")
    r = s.simulate(s.to_nodes([[0] * 7 + [1] * 6]))    # batch in, arrays out
    env = gym.make("placer/Placement-v0", db="data/h200x2.db")

See placer.api (sessions, simulate, searches, the REINFORCE placer, stored
runs, and the parallel-layout simulator and planner) and placer.envs (the Gymnasium environments, registered on import as
placer/Placement-v0 and placer/PlacementMoves-v0).
"""

import gymnasium as _gym

from .api import (N_FEATURES, OOM_PENALTY_US, Candidate, InputError, NotFoundError, PlacerError, Session, SimResult,
                  graph_info, plan, reward, run_samples, runs, simulate_layout, spec_names)
from .envs import PlacementEnv, PlacementMovesEnv

__version__ = "0.1.0"

for _id, _entry in (("placer/Placement-v0", "placer.envs:PlacementEnv"),
                    ("placer/PlacementMoves-v0", "placer.envs:PlacementMovesEnv")):
    if _id not in _gym.envs.registry:
        _gym.register(id=_id, entry_point=_entry)

__all__ = [
    "Session", "SimResult", "Candidate", "PlacerError", "InputError", "NotFoundError", "reward", "runs",
    "run_samples", "graph_info", "spec_names", "simulate_layout", "plan", "PlacementEnv", "PlacementMovesEnv", "OOM_PENALTY_US",
    "N_FEATURES",
]
