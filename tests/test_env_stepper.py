"""EnvStepper (an actor's env side) against a naive oracle: each env stepped on its own with gymnasium, an ended
episode's next step spent on its reset and yielding no transition."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from pearl.envs import EnvStepper, env_spec, to_env_action


def oracle(env_id: str, n: int, seed: int, actions: list[np.ndarray]):
    """Per step: the transitions of the envs that were not resetting, in env order; and every ended episode."""
    envs = [gym.make(env_id) for _ in range(n)]
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    resetting, ret, length = [False] * n, [0.0] * n, [0] * n
    spec = env_spec(env_id)
    steps, episodes = [], []
    for action in actions:
        rows = []
        for i, env in enumerate(envs):
            if resetting[i]:  # the step after an episode's end only resets that env
                obs[i], resetting[i] = env.reset()[0], False
                continue
            a = action[i] if spec.discrete else to_env_action(spec, action[i]).astype(np.float32)
            nxt, reward, terminated, truncated, _ = env.step(a)
            rows.append((obs[i], action[i], reward, nxt, float(terminated)))
            ret[i], length[i] = ret[i] + reward, length[i] + 1
            if terminated or truncated:
                episodes.append((i, ret[i], length[i]))
                ret[i], length[i], resetting[i] = 0.0, 0, True
            obs[i] = nxt
        steps.append(rows)
    return steps, episodes


@pytest.mark.parametrize("env_id, steps", [("CartPole-v1", 120), ("Pendulum-v1", 420)])
def test_env_stepper_matches_stepping_each_env_alone(env_id: str, steps: int) -> None:
    spec, n, seed = env_spec(env_id), 3, 7
    rng = np.random.default_rng(0)
    actions = [rng.integers(0, spec.action_dim, n) if spec.discrete
               else rng.uniform(-1, 1, (n, spec.action_dim)).astype(np.float32) for _ in range(steps)]
    expected, expected_episodes = oracle(env_id, n, seed, actions)
    stepper = EnvStepper(env_id, spec, n, seed)
    restarts = 0
    for action, rows in zip(actions, expected):
        batch, restart = stepper.step(action, actor_id=2, policy_version=5)
        restarts += int(restart.sum())
        assert len(batch) == len(rows) and batch.actor_id == 2 and batch.policy_version == 5
        for j, (obs, act, reward, nxt, terminated) in enumerate(rows):
            np.testing.assert_allclose(batch.obs[j], obs, rtol=1e-6)
            np.testing.assert_array_equal(batch.action[j], act)
            assert batch.reward[j] == pytest.approx(reward, rel=1e-6)
            np.testing.assert_allclose(batch.next_obs[j], nxt, rtol=1e-6)
            assert batch.terminated[j] == terminated
    got = [(round(e.ret, 4), e.length) for e in stepper.finished]
    assert sorted(got) == sorted((round(r, 4), n_) for _, r, n_ in expected_episodes) and got
    # every ended episode restarts its env's exploration twice: after its last step, and after its reset step
    # (unless the run stopped between the two)
    assert len(expected_episodes) * 2 - n <= restarts <= len(expected_episodes) * 2
    stepper.close()
