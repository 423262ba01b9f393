"""reinforce_torch.py: a small REINFORCE placer in PyTorch (CPU), trained
against the placer/Placement-v0 environment, printed beside the C placer.

The policy reads the environment's observation one unit at a time: the
unit's features and the device chosen for the previous unit go through an
LSTM cell (hidden 64) and a linear layer to one logit per device. As in
the C placer (policy/reinforce.h), the first policy leans towards repeating
the previous unit's device (probability `--stay` at the start; 0 gives a
uniform start), because good placements are mostly runs of consecutive
units. K episodes run in lockstep (K environments, one batched forward per
unit); the loss is REINFORCE with an exponential moving-average baseline,
advantages scaled by the batch's spread, and an entropy bonus.

At the end it prints the best placement it sampled and its greedy decode
next to the C REINFORCE placer trained on the same problem with the same
budget, the DP-optimal contiguous split and, when the problem is small
enough, the exhaustive optimum: all as predicted step times of the same
simulator.

    pip install torch                       # the example's only extra dependency
    python python/examples/reinforce_torch.py --db data/h200x2.db --micro-batches 4 --schedule 1f1b
"""

import argparse
import math
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

import placer

ROOT = Path(__file__).resolve().parents[2]


class Policy(torch.nn.Module):
    def __init__(self, n_features, n_devices, hidden, stay):
        super().__init__()
        self.n_devices = n_devices
        self.cell = torch.nn.LSTMCell(n_features + n_devices + 1, hidden)
        self.out = torch.nn.Linear(hidden, n_devices)
        torch.nn.init.zeros_(self.out.weight)
        torch.nn.init.zeros_(self.out.bias)
        # fixed prior: P(repeat the previous device) = stay under zero logits
        if stay > 0 and n_devices > 1:
            self.stay_logit = math.log(stay / ((1 - stay) / (n_devices - 1)))
        else:
            self.stay_logit = 0.0

    def step(self, feats, prev, state):
        """feats (K, F), prev (K,) previous device or -1; returns logits (K, D) and the new state."""
        prev_onehot = torch.zeros(len(prev), self.n_devices + 1)
        prev_onehot[torch.arange(len(prev)), prev + 1] = 1.0
        h, c = self.cell(torch.cat([feats, prev_onehot], dim=1), state)
        logits = self.out(h)
        if self.stay_logit:
            has_prev = prev >= 0
            logits = logits + self.stay_logit * prev_onehot[:, 1:] * has_prev[:, None]
        return logits, (h, c)


def rollout(policy, envs, seed_base, greedy=False):
    """Run one episode in each env in lockstep; returns (log_probs (K,), entropies summed over the
    episode (K,), rewards, infos), as the C placer sums them."""
    K = len(envs)
    obs = [env.reset(seed=seed_base + k)[0] for k, env in enumerate(envs)]
    state = None
    prev = torch.full((K,), -1, dtype=torch.long)
    logp = torch.zeros(K)
    ent = torch.zeros(K)
    rewards = np.zeros(K)
    infos = [None] * K
    for t in range(envs[0].unwrapped.n_units):
        feats = torch.from_numpy(np.stack([o["features"] for o in obs]))
        logits, state = policy.step(feats, prev, state)
        dist = torch.distributions.Categorical(logits=logits)
        a = logits.argmax(dim=1) if greedy else dist.sample()
        logp = logp + dist.log_prob(a)
        ent = ent + dist.entropy()
        for k, env in enumerate(envs):
            obs[k], r, term, _, info = env.step(int(a[k]))
            rewards[k] += r
            if term:
                infos[k] = info
        prev = a
    return logp, ent, rewards, infos


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", default=str(ROOT / "data" / "h200x2.db"))
    ap.add_argument("--micro-batches", type=int, default=4)
    ap.add_argument("--schedule", default="1f1b")
    ap.add_argument("--mem-cap", default=None)
    ap.add_argument("--updates", type=int, default=250)
    ap.add_argument("--samples", type=int, default=16, help="episodes per update (K)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--entropy", type=float, default=0.05)
    ap.add_argument("--stay", type=float, default=0.75)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    opts = dict(db=a.db, micro_batches=a.micro_batches, schedule=a.schedule, mem_cap=a.mem_cap)
    envs = [gym.make("placer/Placement-v0", **opts) for _ in range(a.samples)]
    s = envs[0].unwrapped.session
    print(f"problem: {s}")
    policy = Policy(placer.N_FEATURES, s.n_devices, a.hidden, a.stay)
    opt = torch.optim.Adam(policy.parameters(), lr=a.lr)
    baseline = None
    best = (math.inf, None)
    t0 = time.perf_counter()
    for u in range(a.updates):
        logp, ent, rewards, infos = rollout(policy, envs, seed_base=u * a.samples)
        for info in infos:
            if info["cost_us"] < best[0]:
                best = (info["cost_us"], info["placement"].copy())
        costs = -rewards  # sqrt-seconds
        mean = costs.mean()
        baseline = mean if baseline is None else 0.9 * baseline + 0.1 * mean
        scale = max(costs.std(ddof=1) if len(costs) > 1 else 0.0, 1e-3 * mean)
        adv = torch.from_numpy((baseline - costs) / scale).float()
        loss = -(adv * logp).mean() - a.entropy * ent.mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
        if (u + 1) % 50 == 0 or u == 0:
            print(f"update {u + 1:4d}  mean {np.mean([i['cost_us'] for i in infos]) / 1000:8.3f} ms  "
                  f"best {best[0] / 1000:8.3f} ms  entropy {float(ent.detach().mean()) / s.n_groups:.3f}  {time.perf_counter() - t0:6.1f} s")
    with torch.no_grad():
        _, _, _, g = rollout(policy, envs[:1], seed_base=0, greedy=True)
    train_s = time.perf_counter() - t0

    # the C placers on the same problem and budget
    c = placer.Session(**opts)
    t1 = time.perf_counter()
    c_rl = c.train(updates=a.updates, samples=a.samples, seed=a.seed, record=False)
    c_s = time.perf_counter() - t1
    rows = [("torch REINFORCE best sample", best[0], best[1]),
            ("torch REINFORCE greedy", g[0]["cost_us"], g[0]["placement"])]
    c_best = min(c_rl["shortlist"], key=lambda x: x.cost_us)
    rows.append((f"C REINFORCE ({c_best.label})", c_best.cost_us, c_best.units))
    dp = min(c.search("dp")[0], key=lambda x: x.cost_us)
    rows.append((f"C DP ({dp.label})", dp.cost_us, dp.units))
    single = min(c.search("single")[0], key=lambda x: x.cost_us)
    rows.append((f"C {single.label}", single.cost_us, single.units))
    if s.n_devices ** s.n_groups <= 2e6:
        ex = c.search("exhaustive")[0][0]
        rows.append(("C exhaustive optimum", ex.cost_us, ex.units))
    print(f"\ntorch: {a.updates} updates x {a.samples} episodes ({a.updates * a.samples * s.n_groups} env steps) "
          f"in {train_s:.1f} s; C REINFORCE, same budget: {c_s:.1f} s\n")
    print(f"{'placer':<40} {'step ms':>9} {'OOM':>4}  placement (per group)")
    for label, cost, units in rows:
        oom = cost >= placer.OOM_PENALTY_US
        text = ",".join(map(str, units)) if units is not None else "(splits a group)"
        print(f"{label:<40} {cost / 1000:9.3f} {'yes' if oom else '':>4}  {text}")


if __name__ == "__main__":
    main()
