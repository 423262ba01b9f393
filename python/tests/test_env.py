"""The Gymnasium environments: the checker, and rewards equal to the C
evaluator's (the samples `placer train` simulated and stored)."""

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import placer
from conftest import run_placer


def test_registered_and_pass_check_env(data_copy):
    path = data_copy("h200x2.db")
    for env_id in ("placer/Placement-v0", "placer/PlacementMoves-v0"):
        env = gym.make(env_id, db=str(path), micro_batches=2, schedule="1f1b")
        check_env(env.unwrapped, skip_render_check=False)
        env.close()


def play(env, units):
    obs, info = env.reset(seed=0)
    total, steps = 0.0, 0
    for t, a in enumerate(units):
        assert obs["unit"] == t
        assert np.array_equal(obs["placed"][:t], np.asarray(units[:t]) + 1) and not obs["placed"][t:].any()
        obs, r, term, trunc, info = env.step(a)
        total += r
        steps += 1
        assert term == (t == len(units) - 1) and not trunc
        if not term:
            assert r == 0.0
    return total, info


def test_rewards_equal_the_c_evaluators_on_placer_train_samples(placer_bin, data_copy):
    # `placer train` samples placements, simulates them through the C
    # evaluator and stores each one's step time, peak and OOM verdict; some
    # samples run out of memory under the cap
    path = data_copy("h200x2.db", tag="train-")
    run_placer(placer_bin, "train", "--db", path, "--updates", 4, "--samples", 8, "--seed", 3, "--mem-cap", "2GB",
               "--micro-batches", 2, "--schedule", "1f1b", "--threads", 2)
    run = placer.runs(path)[-1]
    smp = placer.run_samples(path, run["id"])
    assert len(smp["step_us"]) == 32 == run["n_samples"]
    assert smp["oom"].any() and not smp["oom"].all()
    env = gym.make("placer/Placement-v0", db=str(path), mem_cap="2GB", micro_batches=2, schedule="1f1b")
    s = env.unwrapped.session
    for k in range(len(smp["step_us"])):
        units = s.to_units(smp["placement"][k])
        assert units is not None  # the placer samples groups
        total, info = play(env, units)
        cost = placer.OOM_PENALTY_US if smp["oom"][k] else smp["step_us"][k]
        assert total == -math.sqrt(cost * 1e-6), f"sample {k}"
        assert info["step_us"] == smp["step_us"][k]
        assert info["peak_bytes"] == smp["peak_bytes"][k]
        assert info["oom"] == smp["oom"][k]
        assert np.array_equal(info["nodes"], smp["placement"][k])
    # and the batch call gives the same costs
    res = s.simulate(smp["placement"])
    assert np.array_equal(res.reward, [-math.sqrt((placer.OOM_PENALTY_US if o else t) * 1e-6)
                                       for t, o in zip(smp["step_us"], smp["oom"])])


def test_env_bad_actions_and_order(data_copy):
    env = placer.PlacementEnv(db=data_copy("h200x2.db"))
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    obs, _ = env.reset(seed=1)
    # the embedding's output, (B, T, C); the last group's largest is the head's logits
    assert obs["shape"].tolist() == [16, 256, 384] and env._shapes[env.n_units - 1].tolist() == [16, 256, 50257]
    assert np.array_equal(obs["features"], env.session.features[0].astype(np.float32))
    with pytest.raises(ValueError, match="devices 0..1"):
        env.step(2)
    with pytest.raises(ValueError):
        env.step(-1)
    for _ in range(env.n_units):
        obs, r, term, _, info = env.step(1)
    assert term and obs["unit"] == env.n_units and not obs["features"].any() and not obs["shape"].any()
    assert info["devices_used"] == 1
    with pytest.raises(RuntimeError):
        env.step(0)


def test_moves_env_rewards_add_up_to_the_improvement(data_copy):
    env = gym.make("placer/PlacementMoves-v0", db=str(data_copy("h200x2.db")), micro_batches=4, schedule="1f1b")
    s = env.unwrapped.session
    start = np.zeros(s.n_groups, dtype=np.int32)
    obs, info = env.reset(seed=2, options={"placement": start})
    assert info["step_us"] == s.evaluate(start)[0]
    rng = np.random.default_rng(2)
    total, term = 0.0, False
    while not term:
        obs, r, term, trunc, info = env.step(int(rng.integers(0, 2)))
        total += r
    final = s.evaluate(info["placement"])[1]
    assert math.isclose(total, math.sqrt(s.evaluate(start)[1] * 1e-6) - math.sqrt(final * 1e-6), rel_tol=1e-12)
    assert np.array_equal(obs["placement"], info["placement"])
