"""Running the integer program (pearl/planner/ilp.py) on a MIP solver through PuLP (HiGHS where installed, else
CBC), asked for a proof of optimality, and reading the plan back from the solved variables.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import pulp

from pearl.errors import ConfigError, PlanError
from pearl.planner.problem import PLACED, REPLAY, ActorOption
from pearl.planner.program import Model
from pearl.planner.terms import ACT

SOLVERS = ("highs", "cbc")
_MIP_GAP_REL = 1e-9  # ask the solvers for a proof of optimality, not their defaults (HiGHS stops at 1e-4)
_MIP_GAP_ABS = 1e-10
#: HiGHS's feasibility tolerances (1e-6 and 1e-7 by default) against P of order 1e-3 after program.py's
#: `time_scale`: at the defaults a row could be violated by 1e-4 of P, and a plan 4e-5 slower than the optimum came
#: back
_FEASIBILITY = 1e-9


def pick_solver(solver: str | None) -> str:
    highs = pulp.HiGHS(msg=False).available()
    if solver is None:
        return "highs" if highs else "cbc"
    name = solver.lower()
    if name not in SOLVERS:
        raise ConfigError(f"unknown solver {solver!r}: use one of {', '.join(SOLVERS)}")
    if name == "highs" and not highs:
        raise ConfigError("the HiGHS solver is not available (install highspy) — use solver='cbc'")
    if name == "cbc":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            cbc = pulp.PULP_CBC_CMD(msg=False).available()
        if not cbc:
            raise PlanError("no MIP solver is available: install highspy, or a PuLP that bundles CBC")
    return name


@dataclass
class Run:
    feasible: bool
    status: str = ""
    gap: float = 0.0


def run_solver(model: Model, solver: str, time_limit: float) -> Run:
    limit = max(float(time_limit), 0.01)
    if solver == "highs":
        cmd = pulp.HiGHS(msg=False, timeLimit=limit, gapRel=_MIP_GAP_REL, gapAbs=_MIP_GAP_ABS,
                         mip_feasibility_tolerance=_FEASIBILITY, primal_feasibility_tolerance=_FEASIBILITY)
    else:
        with warnings.catch_warnings():  # PuLP 3.x deprecates the bundled CBC; it is still the fallback we ship
            warnings.simplefilter("ignore", DeprecationWarning)
            cmd = pulp.PULP_CBC_CMD(msg=False, timeLimit=limit, gapRel=_MIP_GAP_REL, gapAbs=_MIP_GAP_ABS)
    status = model.lp.solve(cmd)
    sol_status = model.lp.sol_status
    if status == pulp.LpStatusInfeasible or sol_status == pulp.LpSolutionInfeasible:
        return Run(feasible=False, status="Infeasible")
    if status == pulp.LpStatusOptimal and sol_status == pulp.LpSolutionOptimal:
        return Run(feasible=True, status="Optimal", gap=0.0)
    if status == pulp.LpStatusOptimal and sol_status == pulp.LpSolutionIntegerFeasible:
        gap = math.inf  # CBC through PuLP does not report its bound
        if solver == "highs":
            try:
                reported = float(model.lp.solverModel.getInfo().mip_gap)
                gap = reported if math.isfinite(reported) and reported >= 0 else math.inf
            except Exception:  # an older highspy without getInfo
                gap = math.inf
        return Run(feasible=True, status="Feasible (time limit)", gap=gap)
    raise PlanError(
        f"the {solver_label(solver)} solver stopped without a plan: status {pulp.LpStatus.get(status, status)}, "
        f"{pulp.LpSolution.get(sol_status, sol_status)} (raise time_limit or try the other solver)"
    )


def solver_label(solver: str) -> str:
    return "HiGHS" if solver == "highs" else "CBC"


def extract(model: Model) -> tuple[dict[str, str], ActorOption, dict[str, int], tuple[str, ...]]:
    """(placement, actor option, spread, shards): act's device in the placement is the one with the most
    processes (the first of them in the problem's order); a sharded replay server's kernels the first device
    holding a shard."""
    placement: dict[str, str] = {}
    shards = tuple(d for (k, d), var in model.x.items() if k == REPLAY[0] and (var.value() or 0.0) > 0.5)
    shards = shards if len(shards) > 1 else ()
    for k in PLACED:
        if k == ACT:
            continue
        choices = [(var.value() or 0.0, d) for (kk, d), var in model.x.items() if kk == k]
        placement[k] = shards[0] if k in REPLAY and shards else max(choices)[1]
    if model.s:
        a = max(model.s, key=lambda key: model.s[key].value() or 0.0)
        spread = {d: round(var.value() or 0.0) for (aa, d), var in model.w.items() if aa == a}
        spread = {d: n for d, n in spread.items() if n > 0}
        placement[ACT] = max(spread, key=lambda d: spread[d])
    else:
        (a, d) = max(model.v, key=lambda key: model.v[key].value() or 0.0)
        placement[ACT], spread = d, {d: a.n}
    return {k: placement[k] for k in PLACED}, a, spread, shards

