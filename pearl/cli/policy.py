"""`pearl evaluate` (play a run's policy greedily, optionally recording videos) and `pearl export` (the policy as
an ONNX or TorchScript file mapping a raw observation to the env's action)."""

from __future__ import annotations

import click

from pearl.cli.base import cli, print_json

POLICY_HELP = "Which policy: the run's headline (the one its report scored), its best or its final one."


@cli.command()
@click.argument("run")
@click.option("--policy", type=click.Choice(["headline", "best", "final"]), default="headline", show_default=True,
              help=POLICY_HELP)
@click.option("--episodes", type=int, default=None, help="Episodes to play [default: the run's evaluation's].")
@click.option("--seed", type=int, default=None,
              help="Seed the episodes as a run of this seed scores its policies [default: the run's].")
@click.option("--device", default="cpu", show_default=True, help="Device to act on (cpu, cuda:N, opencl:P:D).")
@click.option("--video", "video_dir", default=None, metavar="DIR",
              help="Also record each episode as an MP4 into DIR (gymnasium's RecordVideo; `pearl[video]`).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def evaluate(run: str, policy: str, episodes: int | None, seed: int | None, device: str, video_dir: str | None,
             as_json: bool) -> None:
    """Play a trained policy greedily and print its return.

    RUN is a runs/<id> folder, its best_policy.npz or a checkpoint. With the run's own seed and episodes (the
    default) it reproduces the return the run reported."""
    import numpy as np

    from pearl.policy import load, record_videos

    served = load(run, device=device, policy=policy)
    if video_dir is not None:
        returns, files = record_videos(served, video_dir, episodes, seed)
    else:
        returns, files = served.evaluate(episodes, seed), []
    out = {"policy": served.spec.to_dict(), "device": served.device, "episodes": len(returns),
           "return_mean": float(np.mean(returns)), "return_std": float(np.std(returns)), "returns": returns,
           "videos": files}
    reported = served.spec.eval_returns
    if reported is not None and episodes in (None, served.spec.eval_episodes) and seed in (None, served.spec.seed):
        out["reported_return_mean"] = float(np.mean(reported))
    if as_json:
        print_json(out)
        return
    spec = served.spec
    click.echo(f"{spec.algo} on {spec.env}, {spec.policy} policy ({spec.source}), acting on {served.device}: "
               f"return {out['return_mean']:.1f} ± {out['return_std']:.1f} over {len(returns)} episodes")
    if "reported_return_mean" in out:
        same = "the same as" if np.array_equal(np.asarray(returns), np.asarray(reported)) else "against"
        click.echo(f"  {same} the run's report: {out['reported_return_mean']:.1f}")
    for f in files:
        click.echo(f"  video: {f}")


@cli.command()
@click.argument("run")
@click.option("--format", "fmt", type=click.Choice(["onnx", "torchscript"]), required=True,
              help="ONNX (run it with onnxruntime; `pearl[onnx]`) or TorchScript (torch.jit.load).")
@click.option("--out", required=True, help="File to write.")
@click.option("--policy", type=click.Choice(["headline", "best", "final"]), default="headline", show_default=True,
              help=POLICY_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def export(run: str, fmt: str, out: str, policy: str, as_json: bool) -> None:
    """Write a trained policy as an ONNX or TorchScript file.

    The policy network with its greedy head (DQN's argmax, DDPG's and TD3's actor, SAC's tanh of the mean)
    and the action scaling folded in, checked on 1,000 observations of the env's observation space against
    `pearl.load(RUN).predict` before it is written."""
    from pearl.policy import PARITY_TOLERANCE, export as export_policy

    result = export_policy(run, fmt, out, policy)
    if as_json:
        print_json(result.to_dict())
        return
    agree = ("every action the same" if result.max_abs_diff == 0 else
             f"largest difference {result.max_abs_diff:.2g} (tolerance {PARITY_TOLERANCE:g})")
    click.echo(f"wrote {result.file} ({fmt}); parity with predict on {result.checked:,} observations: {agree}")
