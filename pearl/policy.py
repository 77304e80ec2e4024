"""A trained policy as a product: read it back from a run, act with it on any device, evaluate it, export it.

`load(run_or_file)` reads a run folder (runs/<id>: the headline policy its report scored, or its best or final
one), a run's `best_policy.npz` (the run's config.json beside it says what it is) or a checkpoint, and returns a
`Policy`. `Policy.predict` maps raw observations to the env's own actions through the same act kernel training
used (greedy, explore = 0), then the evaluation's action mapping (`pearl.envs.to_env_action`), so its actions
are the ones the run's evaluation stepped the env with. A policy trained on one device serves on any other
whose backend has the algorithm's act kernel; `device="auto"` picks the device a profile says acts fastest (or
at the least energy per action) at the caller's batch (pearl.planner.serve).

Where each policy lives in a run: the best one in best_policy.npz (the policy network's arrays), the final one
in the checkpoint the run wrote at its end (the learner's whole state; its policy network is taken). The
headline is summary.json's `headline`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pearl.algos import algorithm
from pearl.algos.base import OffPolicyConfig, config_from_dict
from pearl.algos.params import network_sizes, subset
from pearl.errors import CheckpointError, ConfigError, DeviceError, PearlError, RunDirError
from pearl.types import EnvSpec, Params

POLICIES = ("headline", "best", "final")
BEST_FILE = "best_policy.npz"


class PolicyError(PearlError):
    """A policy that cannot be read, or an input `predict` cannot take."""


@dataclass(frozen=True)
class PolicySpec:
    """What a loaded policy is and where it came from."""

    algo: str
    env: str
    obs_dim: int
    action_kind: str  # "discrete" or "continuous"
    action_dim: int  # discrete: the number of actions; continuous: the action's dimensions
    action_low: tuple[float, ...]
    action_high: tuple[float, ...]
    hidden: tuple[int, ...]
    policy: str  # "best" or "final"
    source: str  # the file its arrays came from
    run: str | None = None  # the run folder, when it came from one
    seed: int | None = None  # the run's seed: `evaluate` reproduces the run's figures with it
    eval_episodes: int | None = None  # the episodes the run's report scored it on
    eval_returns: tuple[float, ...] | None = None  # what the run's report measured for this policy

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass
class Loaded:
    """A policy's arrays and what the run says of them, before it is placed on a device."""

    spec: PolicySpec
    config: OffPolicyConfig
    env_spec: EnvSpec
    params: Params = field(repr=False)


class Policy:
    """A policy on a device: `predict` maps observations to env actions; `spec` says what it is; `placement` why
    it runs where it does."""

    def __init__(self, loaded: Loaded, device: str = "cpu", placement: str = "") -> None:
        from pearl.adapters import open_adapter

        self.spec, self.config, self.env_spec = loaded.spec, loaded.config, loaded.env_spec
        self.params = loaded.params
        entry = algorithm(self.spec.algo)
        adapter = open_adapter(device, threads=1)  # an unknown or absent device: DeviceError saying what exists
        if adapter.backend not in entry.kernels:
            able = ", ".join(sorted(entry.kernels))
            raise DeviceError(f"{device} runs the {adapter.backend} backend, which has no {entry.title} act kernel "
                              f"({entry.title} acts on {able} devices); pass another --device")
        self.device = str(adapter.device_id)
        self.placement = placement or f"{self.device}: as asked"
        self._act = adapter.make_act(self.config, self.env_spec, self.params, seed=0)

    def predict(self, obs: Any, deterministic: bool = True) -> np.ndarray:
        """The env action for one observation (obs_dim,), or a batch of them (n, obs_dim): Discrete indices, or
        Box actions in the space's bounds. deterministic=False acts with the exploration the run ended with (ε,
        the action noise, or SAC's sampled action)."""
        batch, single = self._observations(obs)
        explore = 0.0 if deterministic else float(self.config.exploration(self.config.total_steps))
        from pearl.envs import to_env_action

        actions = to_env_action(self.env_spec, self._act.act(batch, explore))
        return actions[0] if single else actions

    def _observations(self, obs: Any) -> tuple[np.ndarray, bool]:
        try:
            arr = np.asarray(obs)
        except (TypeError, ValueError) as exc:
            raise PolicyError(f"predict takes a numeric array of observations; this is not one ({exc})") from None
        if arr.dtype.kind not in "fiub":
            raise PolicyError(f"predict takes numeric observations; got an array of dtype {arr.dtype}")
        n = self.spec.obs_dim
        if arr.ndim == 1 and arr.shape[0] == n:
            return np.ascontiguousarray(arr[None, :], dtype=np.float32), True
        if arr.ndim == 2 and arr.shape[1] == n and arr.shape[0] > 0:
            return np.ascontiguousarray(arr, dtype=np.float32), False
        raise PolicyError(f"predict takes one observation of shape ({n},) or a batch of shape (n, {n}) for "
                          f"{self.spec.env}; got shape {arr.shape}")

    def evaluate(self, episodes: int | None = None, seed: int | None = None) -> list[float]:
        """Greedy returns over `episodes` episodes seeded as a run of seed `seed` scores its policies (default:
        the run's own seed and episode count, which reproduce the run's figures exactly on its act device)."""
        from pearl.runtime.evaluate import evaluate
        from pearl.runtime.seeds import Seeds

        episodes, seed = self._episodes(episodes, seed)
        return evaluate(self._act, self.env_spec, episodes, Seeds(seed).evaluation)

    def _episodes(self, episodes: int | None, seed: int | None) -> tuple[int, int]:
        from pearl.run_options import check_positive_int

        episodes = episodes if episodes is not None else (self.spec.eval_episodes or 10)
        seed = seed if seed is not None else (self.spec.seed or 0)
        check_positive_int("--episodes", episodes, minimum=1)
        check_positive_int("--seed", seed, minimum=0)
        return episodes, seed


# --------------------------------------------------------------------------- reading
def load(run_or_file: str | Path, device: str | None = None, policy: str = "headline", *, profile: str | None = None,
         batch: int = 1, objective: str = "throughput") -> Policy:
    """The policy of a run folder, a best_policy.npz or a checkpoint, on `device` (default cpu; "auto": the device
    `profile` says serves `batch` observations at a time fastest, or at the least energy per action with
    objective="perf-per-watt"). PolicyError (a PearlError) naming what is wrong and what to do."""
    loaded = read_policy(run_or_file, policy)
    if device == "auto":
        from pearl.planner.serve import choose

        if profile is None:
            raise ConfigError('device="auto" chooses from a profile: pass profile="profiles/<host>.json" too')
        chosen = choose(profile, loaded.config, loaded.env_spec, batch, objective)
        return Policy(loaded, chosen.device, chosen.explain())
    return Policy(loaded, device or "cpu")


def read_policy(run_or_file: str | Path, policy: str = "headline") -> Loaded:
    """The policy's arrays and description, from a run folder, a best_policy.npz or a checkpoint."""
    if policy not in POLICIES:
        raise ConfigError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    path = Path(run_or_file)
    if path.is_dir():
        return _from_run(path, policy)
    if not path.exists():
        raise PolicyError(f"{path}: no such run folder or file; pass a runs/<id> folder `pearl train` wrote, its "
                          f"{BEST_FILE}, or one of its checkpoints")
    if "meta" in _npz_members(path):  # a checkpoint holds its run's description
        if policy == "best":
            raise PolicyError(f"{path} is a checkpoint: it holds the learner's policy at {path.stem}, not the best "
                              f"one; load the run's {BEST_FILE} for that")
        return _from_checkpoint(path)
    if policy == "final":
        raise PolicyError(f"{path} holds the run's best policy; the final one is in the run's last checkpoint")
    return _from_best_file(path, _read_npz(path))


def _open_npz(path: Path):
    """The archive, its members read only when asked (np.load's NpzFile), or PolicyError when it is none."""
    import zipfile

    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise PolicyError(f"{path}: not a pearl policy file ({exc}); pass a runs/<id> folder, its {BEST_FILE} or "
                          "a checkpoint") from None
    if not hasattr(archive, "files"):
        raise PolicyError(f"{path}: not a pearl policy file (a single array, not an archive); pass a runs/<id> "
                          f"folder, its {BEST_FILE} or a checkpoint")
    return archive


def _npz_members(path: Path) -> list[str]:
    with _open_npz(path) as archive:
        return list(archive.files)


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    import zipfile

    with _open_npz(path) as archive:
        try:
            return {name: archive[name] for name in archive.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise PolicyError(f"{path}: not a readable policy file ({exc})") from None


def _from_run(folder: Path, policy: str) -> Loaded:
    config, env_spec, seed = _run_config(folder)
    summary = _summary(folder)
    which = summary.get("headline", "final") if policy == "headline" else policy
    if which == "best":
        best = folder / BEST_FILE
        if not best.exists():
            raise PolicyError(f"{folder}: no {BEST_FILE}: the run evaluated no policy while it trained "
                              "(eval_every 0); load policy=\"final\"")
        params, source = _policy_arrays(config, env_spec, _read_npz(best), best), best
    else:
        params, source = _final_arrays(folder, config, env_spec, int(summary.get("steps", -1)))
    scored = summary.get(which) if isinstance(summary.get(which), dict) else {}
    returns = tuple(float(r) for r in scored.get("returns", ())) or None
    spec = _spec(config, env_spec, which, source, folder, seed, int(summary.get("eval_episodes") or 0) or None,
                 returns)
    return Loaded(spec, config, env_spec, params)


def _run_config(folder: Path) -> tuple[OffPolicyConfig, EnvSpec, int]:
    path = folder / "config.json"
    if not path.exists():
        raise PolicyError(f"{folder}: no config.json: not a run folder that `pearl train` wrote")
    data = _json(path)
    if data.get("schema") != "pearl.run/1" or data.get("kind") != "config":
        raise PolicyError(f"{path}: not a pearl run's config.json (schema {data.get('schema')!r}); pass a "
                          "runs/<id> folder that `pearl train` wrote")
    config = _config(data.get("algo"), data.get("hyperparameters"), path)
    env_spec = _env_spec(data.get("env_spec"), data.get("env"), path)
    return config, env_spec, int(data.get("seed", 0))


def _summary(folder: Path) -> dict[str, Any]:
    path = folder / "summary.json"
    if not path.exists():
        raise PolicyError(f"{folder}: no summary.json: the run never finished; `pearl train --resume {folder}` "
                          "finishes it, or load one of its checkpoints")
    data = _json(path)
    if data.get("status") != "finished":
        raise PolicyError(f"{folder}: the run did not finish (status {data.get('status')!r}); "
                          f"`pearl train --resume {folder}` finishes it, or load one of its checkpoints")
    return data


def _json(path: Path) -> dict[str, Any]:
    from pearl.fileio import read_json

    data = read_json(path, PolicyError, "no such file in the run folder")
    if not isinstance(data, dict):
        raise PolicyError(f"{path}: must hold a JSON object")
    return data


def _config(algo: Any, hyperparameters: Any, where: Path) -> OffPolicyConfig:
    """The run's hyperparameters; an algorithm this process has not registered (a plugin not installed) is an
    UnknownAlgorithm saying so."""
    if not isinstance(algo, str) or not isinstance(hyperparameters, dict):
        raise PolicyError(f"{where}: lacks the algo or its hyperparameters")
    entry = algorithm(algo)
    try:
        config = config_from_dict(entry.config_class, hyperparameters)
        config.validate()
    except (TypeError, PearlError) as exc:
        raise PolicyError(f"{where}: its hyperparameters are not {entry.title}'s ({exc})") from None
    return config


def _env_spec(recorded: Any, env: Any, where: Path) -> EnvSpec:
    """The env's spaces as the run recorded them; without a record, from the env itself (an id that no longer
    resolves is an EnvError)."""
    if isinstance(recorded, dict):
        try:
            return EnvSpec(str(recorded["env_id"]), int(recorded["obs_dim"]), str(recorded["action_kind"]),
                           int(recorded["action_dim"]), tuple(float(x) for x in recorded.get("action_low", ())),
                           tuple(float(x) for x in recorded.get("action_high", ())))
        except (KeyError, TypeError, ValueError) as exc:
            raise PolicyError(f"{where}: its env_spec is damaged ({exc!r})") from None
    if not isinstance(env, str):
        raise PolicyError(f"{where}: names no env")
    from pearl.envs import env_spec

    return env_spec(env)


def _policy_arrays(config: OffPolicyConfig, env_spec: EnvSpec, arrays: dict[str, np.ndarray], where: Path) -> Params:
    """The policy network's arrays from a file's, checked against the shapes the run's network has."""
    net = algorithm(config.algo).policy_net
    sizes = network_sizes(config, env_spec)[net]
    want = {f"{net}.{i}.weight": (b, a) for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))}
    want.update({f"{net}.{i}.bias": (b,) for i, b in enumerate(sizes[1:])})
    params = subset(arrays, net)
    wrong = [name for name, shape in want.items() if name not in params or tuple(params[name].shape) != shape]
    if wrong:
        raise PolicyError(f"{where}: its arrays are not the {algorithm(config.algo).title} policy network the run "
                          f"describes ({', '.join(wrong[:3])} missing or of another shape)")
    return {name: np.ascontiguousarray(params[name], dtype=np.float32) for name in want}


def _final_arrays(folder: Path, config: OffPolicyConfig, env_spec: EnvSpec, steps: int) -> tuple[Params, Path]:
    from pearl.runtime.checkpoint import FOLDER, candidates, read_checkpoint

    for path in candidates(folder / FOLDER):
        try:
            checkpoint = read_checkpoint(path)
        except CheckpointError:
            continue
        if checkpoint.steps == steps:
            return _policy_arrays(config, env_spec, checkpoint.learn, path), path
        break
    raise PolicyError(f"{folder}: no readable checkpoint of the run's end ({steps:,} env steps), where its final "
                      "policy is kept; load policy=\"best\"")


def _from_checkpoint(path: Path) -> Loaded:
    from pearl.runtime.checkpoint import read_checkpoint

    checkpoint = read_checkpoint(path)
    meta = checkpoint.meta
    config = _config(meta.get("algo"), meta.get("hyperparameters"), path)
    run = path.parent.parent if path.parent.name == "checkpoints" else None
    recorded = _json(run / "config.json").get("env_spec") if run and (run / "config.json").exists() else None
    env_spec = _env_spec(recorded, meta.get("env"), path)
    params = _policy_arrays(config, env_spec, checkpoint.learn, path)
    spec = _spec(config, env_spec, "final" if run is None else _which_checkpoint(run, checkpoint.steps), path, run,
                 int(meta.get("seed", 0)), None, None)
    return Loaded(spec, config, env_spec, params)


def _which_checkpoint(run: Path, steps: int) -> str:
    summary = run / "summary.json"
    ended = summary.exists() and int(_json(summary).get("steps", -1)) == steps
    return "final" if ended else f"step {steps:,}"


def _from_best_file(path: Path, arrays: dict[str, np.ndarray]) -> Loaded:
    run = path.parent
    if not (run / "config.json").exists():
        raise PolicyError(f"{path}: a policy file needs its run's config.json beside it (it says which algorithm "
                          "and env the arrays are of); load the run folder instead")
    config, env_spec, seed = _run_config(run)
    params = _policy_arrays(config, env_spec, arrays, path)
    summary = _json(run / "summary.json") if (run / "summary.json").exists() else {}
    best = summary.get("best") if isinstance(summary.get("best"), dict) else {}
    returns = tuple(float(r) for r in best.get("returns", ())) or None
    spec = _spec(config, env_spec, "best", path, run, seed, int(summary.get("eval_episodes") or 0) or None, returns)
    return Loaded(spec, config, env_spec, params)


def _spec(config: OffPolicyConfig, env_spec: EnvSpec, which: str, source: Path, run: Path | None, seed: int | None,
          episodes: int | None, returns: tuple[float, ...] | None) -> PolicySpec:
    return PolicySpec(config.algo, env_spec.env_id, env_spec.obs_dim, env_spec.action_kind, env_spec.action_dim,
                      tuple(env_spec.action_low), tuple(env_spec.action_high), tuple(config.hidden), which,
                      str(source), str(run) if run is not None else None, seed, episodes, returns)


def check_run(run: str | Path) -> Path:
    """A run folder's path, or RunDirError when it is not one."""
    folder = Path(run)
    if not (folder / "config.json").exists():
        raise RunDirError(f"{folder}: not a run folder that `pearl train` wrote (no config.json)")
    return folder


# --------------------------------------------------------------------------- export
@dataclass(frozen=True)
class Exported:
    """An exported policy file and its parity check against `Policy.predict`."""

    file: str
    format: str
    checked: int  # observations run through both
    max_abs_diff: float  # continuous actions: the largest difference; discrete: 0 when every index agrees
    mismatches: int  # discrete actions that differ (continuous: those off by more than PARITY_TOLERANCE)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


#: the largest difference an exported continuous action may have from `predict`'s
PARITY_TOLERANCE = 1e-5
PARITY_CHECKS = 1000


def export(run_or_file: str | Path, fmt: str, out: str | Path, policy: str = "headline",
           checks: int = PARITY_CHECKS) -> Exported:
    """The policy as a TorchScript or ONNX file mapping a raw observation to the env's action, checked on `checks`
    observations drawn from the env's observation space against `predict`; written only when they agree
    (PolicyError otherwise, and nothing is left at `out`)."""
    from pearl.adapters.torch.export import FORMATS, policy_module, run_file, write
    from pearl.envs import make_env
    from pearl.fileio import check_writable

    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")
    loaded = read_policy(run_or_file, policy)
    entry = algorithm(loaded.spec.algo)
    if not entry.policy_head:
        raise PolicyError(f"{entry.title} declares no policy head (its registry entry's policy_head): pearl cannot "
                          "export it")
    target = Path(out)
    check_writable(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    served = Policy(loaded, "cpu")
    env = make_env(loaded.spec.env)  # an id that no longer resolves: EnvError
    try:
        env.observation_space.seed(0)
        obs = np.stack([np.asarray(env.observation_space.sample(), dtype=np.float32) for _ in range(checks)])
    finally:
        env.close()
    scratch = target.with_name(f".{target.name}.partial")
    try:
        write(policy_module(loaded.params, entry.policy_net, entry.policy_head, loaded.env_spec), fmt, scratch,
              loaded.spec.obs_dim)
        got, want = run_file(fmt, scratch, obs), served.predict(obs)
        result = _parity(str(target), fmt, got, want, loaded.env_spec.discrete)
        if result.mismatches:
            raise PolicyError(f"the exported {fmt} policy disagrees with predict on {result.mismatches} of {checks} "
                              f"observations (largest difference {result.max_abs_diff:.3g}); nothing was written")
        scratch.replace(target)
    finally:
        scratch.unlink(missing_ok=True)
    return result


def _parity(file: str, fmt: str, got: np.ndarray, want: np.ndarray, discrete: bool) -> Exported:
    if got.shape != want.shape:
        return Exported(file, fmt, len(want), float("inf"), len(want))
    if discrete:
        wrong = int(np.count_nonzero(got != want))
        return Exported(file, fmt, len(want), float(wrong > 0), wrong)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    rows = diff.reshape(len(diff), -1).max(axis=1)
    return Exported(file, fmt, len(want), float(diff.max()), int(np.count_nonzero(rows > PARITY_TOLERANCE)))


# --------------------------------------------------------------------------- videos
def record_videos(policy: Policy, folder: str | Path, episodes: int | None = None,
                  seed: int | None = None) -> tuple[list[float], list[str]]:
    """Play the episodes `Policy.evaluate` plays, one at a time, each recorded as an MP4 into folder (gymnasium's
    RecordVideo); their returns and the files written. BackendMissing with the install hint when the video or
    rendering packages are absent."""
    import gymnasium as gym

    from pearl.envs import make_env
    from pearl.errors import BackendMissing
    from pearl.runtime.seeds import Seeds

    episodes, seed = policy._episodes(episodes, seed)
    first = Seeds(seed).evaluation
    # frames are drawn off screen: without a display SDL would otherwise print its own "error:" line
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    out = Path(folder)
    before = set(out.glob("*.mp4")) if out.is_dir() else set()
    returns = []
    try:
        env = gym.wrappers.RecordVideo(make_env(policy.spec.env, render_mode="rgb_array"), str(out),
                                       episode_trigger=lambda _episode: True, name_prefix=f"{policy.spec.algo}-"
                                       f"{policy.spec.env}-{policy.spec.policy}", disable_logger=True)
        try:
            for i in range(episodes):
                obs, _ = env.reset(seed=first + i)
                total, done = 0.0, False
                while not done:
                    obs, reward, terminated, truncated, _ = env.step(policy.predict(obs))
                    total += float(reward)
                    done = terminated or truncated
                returns.append(total)
        finally:
            env.close()
    except gym.error.DependencyNotInstalled as exc:
        raise BackendMissing(f"--video needs packages that are not installed ({' '.join(str(exc).split())}); "
                             "`pip install \"pearl[video]\"` adds them") from None
    return returns, sorted(str(p) for p in set(out.glob("*.mp4")) - before)
