"""A learner group (pearl/runtime/learner_group.py): N learners, each on its rows of every batch, averaging their
gradients, learn what one learner learns on the whole batch (within float rounding), stay identical bit for
bit, repeat bit for bit for a seed and N, and fail loudly when one dies. Learner 0 is this test process; the
others are the real learner processes the local launcher starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from learn_support import make_batches, to_sample_batch

from pearl import train
from pearl.adapters.torch import TorchAdapter
from pearl.adapters.torch.learner_group import split_rows
from pearl.algos import DDPGConfig, DQNConfig, SACConfig, TD3Config
from pearl.algos.params import init_params
from pearl.runtime import checkpoint as ckpt
from pearl.adapters.learner_group import dead_learner, open_group, stop_learners
from pearl.runtime.learner_group import GroupLearner
from pearl.types import EnvSpec

DISCRETE = EnvSpec("test", obs_dim=4, action_kind="discrete", action_dim=3)
CONTINUOUS = EnvSpec("test", obs_dim=3, action_kind="continuous", action_dim=2)
SMALL = dict(hidden=(16, 12), batch_size=32, learning_rate=1e-3, gamma=0.95)
CONFIGS = {
    "dqn": (DQNConfig(**SMALL, max_grad_norm=1.0, target_update_interval=7), DISCRETE),
    "ddpg": (DDPGConfig(**SMALL, tau=0.05), CONTINUOUS),
    "td3": (TD3Config(**SMALL, tau=0.05, policy_delay=2), CONTINUOUS),
    "sac": (SACConfig(**SMALL, tau=0.05), CONTINUOUS),
    "sac-fixed-alpha": (SACConfig(**SMALL, tau=0.05, initial_alpha=0.1, tune_alpha=False), CONTINUOUS),
}
SEED = 5
UPDATES = 100


def _adapter(device: str = "cpu") -> TorchAdapter:
    torch.set_num_threads(1)
    return TorchAdapter(device)


def _kernel(adapter: TorchAdapter, name: str):
    config, spec = CONFIGS[name]
    return adapter.make_learn(config, spec, init_params(config, spec, seed=4), seed=SEED)


class _Group:
    """Learner 0 here, learners 1 … N − 1 in their own processes, from learner 0's starting state."""

    def __init__(self, name: str, learners: int, check_every: int = 10, device: str = "cpu") -> None:
        config, spec = CONFIGS[name]
        self.adapter = _adapter(device)
        kernel = _kernel(self.adapter, name)
        self.procs: list[subprocess.Popen] = []
        comm = open_group(self.adapter, kernel, config, spec, learners, 1, SEED, self.procs)
        self.learner = GroupLearner(kernel, self.adapter, config, comm, check_every, lambda: dead_learner(self.procs))

    def close(self) -> None:
        self.learner.close()
        stop_learners(self.procs)


def _batches(adapter: TorchAdapter, name: str, steps: int = UPDATES):
    config, spec = CONFIGS[name]
    return [to_sample_batch(adapter, b) for b in make_batches(spec, config.batch_size, seed=2, steps=steps)]


def test_a_batch_splits_into_contiguous_parts_that_cover_it() -> None:
    assert split_rows(32, 2) == [(0, 16), (16, 16)]
    assert split_rows(10, 3) == [(0, 4), (4, 3), (7, 3)]
    for total, n in ((7, 7), (100, 4), (33, 5)):
        parts = split_rows(total, n)
        assert [s for s, _ in parts] == list(np.cumsum([0] + [r for _, r in parts])[:-1])
        assert sum(r for _, r in parts) == total and max(r for _, r in parts) - min(r for _, r in parts) <= 1


@pytest.mark.parametrize("name,learners", [("dqn", 2), ("dqn", 3), ("ddpg", 2), ("td3", 2), ("sac", 2),
                                                  ("sac-fixed-alpha", 2)])
def test_a_group_learns_what_one_learner_learns_on_the_whole_batch(name: str, learners: int) -> None:
    """After 100 updates on the same batches (3 learners: parts of 11, 11 and 10 rows), the group's parameters
    and optimiser state are one learner's within float rounding, its TD errors cover the whole batch, and every
    learner of the group holds the same bits (compared every 10 updates and at the end)."""
    _learns_what_one_learner_learns(name, learners, "cpu")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize("name", ["dqn", "td3", "sac"])
def test_a_group_on_cuda_learns_what_one_learner_learns_and_repeats_bit_for_bit(name: str) -> None:
    """Two learner processes on cuda:0 (their gradients through host memory): one learner's parameters within
    float rounding after 100 updates, and the same bits again from a second group."""
    first = _learns_what_one_learner_learns(name, 2, "cuda:0")
    second = _learns_what_one_learner_learns(name, 2, "cuda:0")
    for key in first:
        assert np.array_equal(first[key], second[key]), key


def _learns_what_one_learner_learns(name: str, learners: int, device: str) -> dict[str, np.ndarray]:
    group = _Group(name, learners, device=device)
    try:
        alone = _kernel(group.adapter, name)
        for batch in _batches(group.adapter, name):
            expected = alone.learn(batch)
            update = group.learner.update(batch)
            np.testing.assert_allclose(update.td_errors.cpu().numpy(), expected.td_errors.cpu().numpy(), rtol=1e-4,
                                       atol=1e-5)
            assert np.array_equal(update.indices, batch.indices)
        group.learner.check()
        got, want = group.learner.kernel.state_dict(), alone.state_dict()
        assert int(got["updates"]) == int(want["updates"]) == UPDATES
        for key in want:
            np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-6, err_msg=key)
        assert any(not np.array_equal(got[k], want[k]) for k in want if k != "updates"), \
            "the group gave one learner's bits exactly: it cannot have averaged anything"
        assert set(group.learner.read_metrics()) == set(expected.metrics)
        return got
    finally:
        group.close()


def test_a_group_repeats_bit_for_bit() -> None:
    """The same seed and group size give the same bits: the averaging sums in learner order."""
    states = []
    for _ in range(2):
        group = _Group("ddpg", 2)
        try:
            for batch in _batches(group.adapter, "ddpg", 30):
                group.learner.update(batch)
            states.append(group.learner.kernel.state_dict())
        finally:
            group.close()
    for key in states[0]:
        assert np.array_equal(states[0][key], states[1][key]), key


def test_a_learner_that_dies_ends_the_update_with_its_name() -> None:
    group = _Group("dqn", 2)
    try:
        batches = _batches(group.adapter, "dqn", 3)
        group.learner.update(batches[0])
        group.procs[0].send_signal(signal.SIGKILL)
        group.procs[0].wait()
        with pytest.raises(Exception, match="learner 1 exited with code -9"):
            group.learner.update(batches[1])
    finally:
        group.close()


# ------------------------------------------------------------------------------------------ through the CLI
def _pearl(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pearl", *args], capture_output=True, text=True, timeout=300, **kw)


@pytest.mark.parametrize("flags,says", [
    (("--learners", "0"), "--learners must be an integer >= 1"),
    (("--learners", "2", "--launcher", "sequential"), "runs one learner; use --launcher local"),
    (("--learners", "200", "--set", "batch_size=64"), "a batch has 64; use at most 64 learners"),
])
def test_a_group_that_cannot_be_is_one_error_line(tmp_path, flags, says) -> None:
    got = _pearl("train", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "600", "--runs-dir", str(tmp_path),
                 *flags)
    assert got.returncode == 2, got.stderr
    assert got.stderr.count("error:") == 1 and says in got.stderr and "Traceback" not in got.stderr
    assert not list(tmp_path.glob("*/config.json")), "nothing is started for a group that cannot be"


def test_two_learners_on_the_local_launcher_repeat_and_checkpoint_their_group(tmp_path) -> None:
    """Two runs with --learners 2 give the same parameters, and their checkpoints and config.json keep the group's
    size."""
    runs = []
    for i in range(2):
        got = train("ddpg", "Pendulum-v1", steps=1400, learners=2, eval_episodes=0, seed=3,
                    settings={"learning_starts": "1000"}, runs_dir=str(tmp_path / str(i)), checkpoint_every=200)
        assert got.steps == 1400 and got.updates == 400 and got.learners == 2
        runs.append(got)
    finals = [runs[i].run_dir for i in range(2)]
    a, b = (ckpt.read_checkpoint(ckpt.candidates(tmp_path / str(i) / os.path.basename(d) / "checkpoints")[0])
            for i, d in enumerate(finals))
    for key in a.learn:
        assert np.array_equal(a.learn[key], b.learn[key]), key
    assert a.meta["learners"] == 2
    config = json.loads((tmp_path / "0" / os.path.basename(finals[0]) / "config.json").read_text())
    assert config["learners"] == 2


def test_a_killed_learner_ends_the_run_resumably_and_it_goes_on_with_one(tmp_path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "pearl", "train", "--algo", "dqn", "--env", "CartPole-v1",
                             "--steps", "20000", "--learners", "2", "--checkpoint-every", "300", "--runs-dir",
                             str(tmp_path), "--eval-episodes", "0", "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not list(tmp_path.glob("*/checkpoints/*.npz")) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        learners = [int(p) for p in subprocess.run(["pgrep", "-f", "pearl.adapters.learner_group", "-P",
                                                    str(proc.pid)], capture_output=True, text=True).stdout.split()]
        assert len(learners) == 1
        os.kill(learners[0], signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2 and err.count("error:") == 1 and "learner 1 exited with code -9" in err, err
    run = next(tmp_path.glob("*/config.json")).parent
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["resume"]
    saved = ckpt.read_checkpoint(ckpt.candidates(run / "checkpoints")[0])
    got = _pearl("train", "--resume", str(run), "--learners", "1", "--eval-episodes", "0", "--steps", "1",
                 cwd=str(tmp_path))
    assert got.returncode == 2 and "drop --steps" in got.stderr  # only the group size may change on a resume
    got = _pearl("train", "--resume", str(run), "--learners", "1", "--eval-episodes", "0", "--json")
    assert got.returncode == 0, got.stderr
    assert "going on with 1 learner(s) from a checkpoint of 2" in got.stderr
    result = json.loads(got.stdout)
    assert result["start_steps"] == saved.steps and result["steps"] == 20000
