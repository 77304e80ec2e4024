"""Gymnasium environments: creating them with clear errors, describing their spaces, stepping them as an actor
does."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from pearl.algos.registry import algorithm, algorithms
from pearl.errors import EnvError
from pearl.types import EnvSpec, TransitionBatch


def make_env(env_id: str, render_mode: str | None = None) -> gym.Env:
    """Create a gymnasium env (rendering frames with render_mode="rgb_array", for videos); an unknown id becomes
    an EnvError that suggests close registered ids."""
    try:
        return gym.make(env_id) if render_mode is None else gym.make(env_id, render_mode=render_mode)
    except gym.error.DependencyNotInstalled as exc:  # registered, but its extra (box2d, mujoco) is missing
        raise EnvError(f"{env_id} needs a package that is not installed: {exc}") from exc
    except ImportError as exc:  # "module:Env-v0" ids, or an entry point needing jax, shimmy, ...
        raise EnvError(f"cannot create the gymnasium environment {env_id!r}: {exc}") from exc
    except (gym.error.Error, ValueError) as exc:  # NameNotFound, VersionNotFound, ...; ":" is a ValueError
        close = difflib.get_close_matches(env_id, list(gym.registry.keys()), n=3)
        hint = (f"; did you mean {', '.join(close)}?" if close
                else "; `python -c 'import gymnasium; gymnasium.pprint_registry()'` lists them")
        raise EnvError(f"unknown gymnasium environment {env_id!r} (gymnasium: {exc}){hint}") from exc


# Below this many copies a plain loop over envs is faster: a vectorised step pays a fixed cost a call that a
# few copies do not earn back, while its cost barely grows with the copies (CartPole).
VECTORISED_FROM = 4


def make_vector_env(env_id: str, n_envs: int) -> gym.vector.VectorEnv:
    """n copies of an env stepped as one, in gymnasium's next-step autoreset mode (see `VectorActor`).

    Envs that ship a vectorised implementation (CartPole's steps every copy with one numpy expression)
    use it from VECTORISED_FROM copies on; otherwise the copies are stepped one after the other.
    """
    make_env(env_id).close()  # an unknown id fails here, with the suggestions
    venv = None
    if n_envs >= VECTORISED_FROM:
        try:
            venv = gym.make_vec(env_id, num_envs=n_envs, vectorization_mode="vector_entry_point")
        except (gym.error.Error, ValueError, TypeError):  # no vectorised implementation registered
            pass
    if venv is None:
        venv = gym.make_vec(env_id, num_envs=n_envs, vectorization_mode="sync",
                            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP})
    mode = venv.metadata.get("autoreset_mode")
    if mode != gym.vector.AutoresetMode.NEXT_STEP:
        venv.close()
        raise EnvError(f"the vector version of {env_id} resets in mode {mode}; pearl's actors need next-step")
    return venv


def env_spec(env_id: str, env: gym.Env | None = None) -> EnvSpec:
    """Describe an env's spaces; only flat Box observations and Discrete or Box actions are supported."""
    own = env is None
    env = env if env is not None else make_env(env_id)
    try:
        obs_space, act_space = env.observation_space, env.action_space
        if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
            raise EnvError(f"{env_id} has observation space {obs_space}; pearl needs a flat Box (a vector)")
        if isinstance(act_space, gym.spaces.Discrete):
            return EnvSpec(env_id, int(obs_space.shape[0]), "discrete", int(act_space.n))
        if isinstance(act_space, gym.spaces.Box) and len(act_space.shape) == 1:
            low, high = act_space.low.astype(np.float64), act_space.high.astype(np.float64)
            if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
                raise EnvError(f"{env_id} has unbounded actions {act_space}; continuous actions need finite bounds "
                               "(the policy's [-1, 1] is rescaled to them)")
            return EnvSpec(env_id, int(obs_space.shape[0]), "continuous", int(act_space.shape[0]),
                           tuple(float(x) for x in low), tuple(float(x) for x in high))
        raise EnvError(f"{env_id} has action space {act_space}; pearl supports Discrete or a flat Box")
    finally:
        if own:
            env.close()


def check_algo_fits(algo: str, spec: EnvSpec) -> None:
    """The algorithm's registry entry names the action space it needs (DQN discrete, DDPG continuous); an env
    with the other kind is an EnvError naming the algorithms that fit (ConfigError for an unknown algorithm)."""
    entry = algorithm(algo)
    if entry.action_kind == spec.action_kind:
        return
    fits = [a.name for a in algorithms() if a.action_kind == spec.action_kind]
    advice = f"; use --algo {' or --algo '.join(fits)}" if fits else ""
    raise EnvError(f"{entry.title} needs a {entry.action_kind} action space but {spec.env_id} has "
                   f"{spec.action_kind} actions{advice}")


def to_env_action(spec: EnvSpec, action: np.ndarray) -> np.ndarray:
    """Policy actions in [-1, 1] rescaled to the env's bounds; discrete actions pass through."""
    if spec.discrete:
        return action
    low, high = np.asarray(spec.action_low), np.asarray(spec.action_high)
    return low + 0.5 * (action.astype(np.float64) + 1.0) * (high - low)


@dataclass
class Episode:
    ret: float
    length: int


class EnvStepper:
    """n copies of an env stepped as one vector env, turned into transitions: an actor's env side.

    The vector env resets in next-step mode: the step after an episode ends only resets that env (its action is
    ignored, its reward is 0) and is not a transition, so its row is dropped. Env steps therefore count
    transitions, the figure every rate in pearl is about.
    """

    def __init__(self, env_id: str, spec: EnvSpec, n_envs: int, seed: int) -> None:
        self.spec = spec
        self.venv = make_vector_env(env_id, n_envs)
        self.obs = np.asarray(self.venv.reset(seed=seed)[0], dtype=np.float32)
        self.resetting = np.zeros(n_envs, dtype=bool)  # envs whose next step is a reset, not a transition
        self.ep_return = np.zeros(n_envs)
        self.ep_length = np.zeros(n_envs, dtype=np.int64)
        self.finished: list[Episode] = []

    def step(self, action: np.ndarray, actor_id: int = 0,
             policy_version: int = 0) -> tuple[TransitionBatch, np.ndarray]:
        """Step every env with its policy action; the transitions, and which envs act next at the first step of
        a new episode (an episode that ended, or a reset step that just ran)."""
        env_action = to_env_action(self.spec, action)
        if not self.spec.discrete:
            env_action = env_action.astype(np.float32)
        next_obs, reward, terminated, truncated, _ = self.venv.step(env_action)
        next_obs = np.asarray(next_obs, dtype=np.float32)
        keep = ~self.resetting
        done = (terminated | truncated) & keep
        self.ep_return[keep] += reward[keep]
        self.ep_length[keep] += 1
        for i in np.flatnonzero(done):
            self.finished.append(Episode(float(self.ep_return[i]), int(self.ep_length[i])))
            self.ep_return[i], self.ep_length[i] = 0.0, 0
        batch = TransitionBatch(self.obs[keep], action[keep], np.asarray(reward, dtype=np.float32)[keep],
                                next_obs[keep], np.asarray(terminated, dtype=np.float32)[keep], actor_id,
                                policy_version)
        self.resetting = done
        self.obs = next_obs
        return batch, done | ~keep

    def close(self) -> None:
        self.venv.close()
