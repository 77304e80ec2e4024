"""After training: the final and the best policy scored greedily on the same seeded episodes, and which of them
is the run's headline."""

from __future__ import annotations

from typing import Any

import numpy as np

from pearl.runtime.evaluate import confirm, evaluate
from pearl.runtime.launcher import LoopStats, SegmentLauncher
from pearl.runtime.record import RunRecord
from pearl.runtime.seeds import Seeds
from pearl.training.configure import RunSetup
from pearl.types import Params


def score_run(setup: RunSetup, runner: SegmentLauncher, stats: LoopStats, episodes: int,
           record: RunRecord) -> dict[str, Any]:
    """The final policy's and the best policy's greedy returns over the same `episodes` seeded episodes, and
    which of them is the headline: when in-training evaluations kept a best policy other than the final one,
    the one that did better on `episodes` fresh confirmation episodes (`evaluate.confirm`; the best on a tie),
    else the final one. The best policy's parameters are saved as runs/<id>/best_policy.npz."""
    adapter = _eval_adapter(runner, setup)
    seeds = Seeds(setup.options.algorithm.seed)
    seed = seeds.evaluation
    act = adapter.make_act(setup.config, setup.spec, stats.final_params, seeds.learner)

    def score(params: Params) -> dict[str, Any]:
        act.set_params(params)
        returns = evaluate(act, setup.spec, episodes, seed) if episodes else []
        return {"return_mean": float(np.mean(returns)) if returns else float("nan"),
                "return_std": float(np.std(returns)) if returns else float("nan"), "returns": returns}

    final = score(stats.final_params)
    out: dict[str, Any] = {"final": final, "headline": "final"}
    best = stats.best
    if best is not None and best.best is not None and best.best_eval is not None:
        np.savez(record.dir / "best_policy.npz", **best.best)
        picked = best.best_eval
        out["best"] = {**score(best.best), "steps": picked.steps, "updates": picked.updates,
                       "selection_mean": picked.mean, "file": str(record.dir / "best_policy.npz")}
        out["evaluations"] = [{"steps": e.steps, "updates": e.updates, "mean": e.mean} for e in best.history]
        out["headline"] = "best"
        if episodes and not _same_policy(best.best, stats.final_params):
            check = confirm(act, setup.spec, best.best, stats.final_params, episodes, setup.options.algorithm.seed)
            out["confirmation"] = check.to_dict()
            out["headline"] = check.picked
    head = out["best"] if out["headline"] == "best" else final
    out.update(eval_return_mean=head["return_mean"], eval_return_std=head["return_std"],
               eval_returns=list(head["returns"]))
    return out


def _same_policy(a: Params, b: Params) -> bool:
    """Whether two policies hold equal parameters (the kept best is often the final policy itself)."""
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _eval_adapter(runner: SegmentLauncher, setup: RunSetup):
    """The adapter of the act device (the local launcher opened it only in its actor processes)."""
    act = setup.placement.act
    if act in runner.adapters:
        return runner.adapters[act]
    from pearl.adapters import open_adapter
    place = setup.options.placement
    return open_adapter(act, place.threads, place.descriptor if act.backend.binaries else None)
