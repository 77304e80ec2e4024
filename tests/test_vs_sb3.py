"""benchmarks/vs_sb3.py builds Stable-Baselines3's DDPG, TD3 and SAC from pearl's presets field by field (no
training here: the models as built, before `learn`)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from pearl.algos import presets

pytest.importorskip("stable_baselines3", reason='the SB3 comparison needs stable-baselines3: pip install -e ".[bench]"')
torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
ENV = "Pendulum-v1"
# every field away from both pearl's preset and SB3's defaults, so that a field the builder leaves out shows
SHARED = dict(total_steps=1_234, learning_rate=7e-4, batch_size=96, buffer_size=5_000, learning_starts=321,
              gamma=0.95, tau=0.02, train_freq=2, gradient_steps=3, hidden=(48, 40))
OWN = {"ddpg": dict(action_noise=0.3), "td3": dict(action_noise=0.3, policy_delay=3, target_policy_noise=0.25,
                                                   target_noise_clip=0.4),
       "sac": dict(initial_alpha=0.5, target_entropy=-0.7)}


@pytest.fixture(scope="module")
def vs_sb3():
    spec = importlib.util.spec_from_file_location("vs_sb3", ROOT / "benchmarks" / "vs_sb3.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def built(vs_sb3, monkeypatch, algo: str, **own):
    """(pearl's config, SB3's model and steps built from it) with the Pendulum preset changed as given."""
    cfg = presets.PRESETS[(algo, ENV)].replace(**SHARED, **own)
    monkeypatch.setitem(presets.PRESETS, (algo, ENV), cfg)
    return cfg, *getattr(vs_sb3, f"sb3_{algo}")(ENV, 0)


def widths(layers) -> list[int]:
    return [m.out_features for m in layers if isinstance(m, torch.nn.Linear)]


def assert_shared_fields(model, steps: int, cfg) -> None:
    assert steps == cfg.total_steps
    assert (model.learning_rate, model.batch_size, model.buffer_size, model.learning_starts) == (
        cfg.learning_rate, cfg.batch_size, cfg.buffer_size, cfg.learning_starts)
    assert (model.gamma, model.tau, model.train_freq.frequency, model.gradient_steps) == (
        cfg.gamma, cfg.tau, cfg.train_freq, cfg.gradient_steps)
    for q in model.critic.q_networks:
        assert widths(q) == [*cfg.hidden, 1]


@pytest.mark.parametrize("algo", ["ddpg", "td3"])
def test_deterministic_policies_are_built_from_the_preset(vs_sb3, monkeypatch, algo):
    cfg, model, steps = built(vs_sb3, monkeypatch, algo, **OWN[algo])
    assert_shared_fields(model, steps, cfg)
    assert widths(model.actor.mu) == [*cfg.hidden, 1]
    assert model.action_noise._sigma.tolist() == [cfg.action_noise]
    if algo == "td3":
        assert len(model.critic.q_networks) == 2
        assert (model.policy_delay, model.target_policy_noise, model.target_noise_clip) == (
            cfg.policy_delay, cfg.target_policy_noise, cfg.target_noise_clip)
    else:
        # SB3's DDPG is its TD3 with one critic, no delay and the smoothing noise clipped to nothing
        assert len(model.critic.q_networks) == 1 and model.policy_delay == 1 and model.target_noise_clip == 0


def test_sac_is_built_from_the_preset_and_its_temperature(vs_sb3, monkeypatch):
    cfg, model, steps = built(vs_sb3, monkeypatch, "sac", **OWN["sac"])
    assert_shared_fields(model, steps, cfg)
    assert widths(model.actor.latent_pi) == list(cfg.hidden)
    assert len(model.critic.q_networks) == 2
    assert math.isclose(model.target_entropy, cfg.target_entropy)
    assert math.isclose(model.log_ent_coef.exp().item(), cfg.initial_alpha, rel_tol=1e-6)
    assert model.ent_coef_optimizer.param_groups[0]["lr"] == cfg.learning_rate
    assert model.target_update_interval == 1 and model.action_noise is None and not model.use_sde


def test_sac_target_entropy_zero_is_sb3s_auto(vs_sb3, monkeypatch):
    # pearl's preset keeps target_entropy 0, its "−action_dim": SB3's "auto", −1 for Pendulum's one action
    cfg, model, _ = built(vs_sb3, monkeypatch, "sac")
    assert cfg.target_entropy == 0 and model.target_entropy == -1.0


def test_an_algorithm_without_a_preset_is_one_error_line(vs_sb3, capsys):
    with pytest.raises(SystemExit) as exit_:
        vs_sb3.pearl_preset("td3", "CartPole-v1", "td3")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: pearl has no TD3 preset for 'CartPole-v1'") and err.count("\n") == 1


def test_td3s_ornstein_uhlenbeck_noise_is_built_as_sb3s(vs_sb3, monkeypatch):
    from stable_baselines3.common.noise import OrnsteinUhlenbeckActionNoise

    cfg, model, _ = built(vs_sb3, monkeypatch, "td3", action_noise=0.5, noise_type="ornstein-uhlenbeck")
    assert isinstance(model.action_noise, OrnsteinUhlenbeckActionNoise)
    assert model.action_noise._sigma.tolist() == [cfg.action_noise]


def test_sacs_fixed_alpha_is_sb3s_numeric_ent_coef(vs_sb3, monkeypatch):
    cfg, model, _ = built(vs_sb3, monkeypatch, "sac", initial_alpha=0.1, tune_alpha=False)
    assert model.ent_coef_optimizer is None and math.isclose(model.ent_coef_tensor.item(), 0.1, rel_tol=1e-6)


@pytest.mark.parametrize("algo", ["ddpg", "td3", "sac"])
def test_sb3_is_built_on_the_device_asked(vs_sb3, algo):
    model, _ = getattr(vs_sb3, f"sb3_{algo}")(ENV, 0, "cpu")
    assert str(model.device) == "cpu"


def test_pearl_is_compared_with_sb3s_fastest_device(vs_sb3):
    runs = {"sb3:cpu": {"env_steps_per_s": 410.0}, "sb3:cuda": {"env_steps_per_s": 655.0},
            "sb3:auto": {"env_steps_per_s": 655.0}}
    assert vs_sb3.fastest_sb3(runs) == "sb3:cuda"  # a tie keeps the first listed
    assert vs_sb3.fastest_sb3({"sb3:cpu": {"env_steps_per_s": 1.0}}) == "sb3:cpu"
    placement = {"env_step": "cpu", "act": "cpu", "learn": "cuda:0"}
    assert vs_sb3.placement_text(placement) == "act → cpu, learn → cuda:0"
