"""The cost model: a `Profile` turned into the figures the planner uses.

- `kernel_time(k, d, w, b)`: seconds of kernel k on device d for workload w at batch b. From the profile's
  medians over the measured batch sizes b_1 < ... < b_n of that (workload, kernel, device):

      m'_i = max(m_1, ..., m_i)                      monotone: more work never takes less time
      t(b) = m'_i                                    b = b_i (exactly the adjusted median)
      t(b) = m'_i + (m'_{i+1} - m'_i) (b - b_i) / (b_{i+1} - b_i)      b_i < b < b_{i+1}  (linear: launch
                                                     overhead + per-item work is affine in b)
      t(b) = m'_n + s (b - b_n),  s = max(0, (m'_n - m'_{n-1}) / (b_n - b_{n-1}))   b > b_n   extrapolated
      t(b) = m'_1                                    b < b_1 (launch overhead dominates)   extrapolated

  With a single measured batch, t is that median everywhere, extrapolated away from it.
- `kernel_time(k, d, w, b, threads=T)`: the same at T CPU threads (torch's intra-op threads on `cpu`): the
  1-thread figure × the profile's T-thread median ÷ the 1-thread median timed in the same blocks (its
  `one_thread_s`; older profiles: ÷ the 1-thread figure at the batch the T-thread one was timed at) (the
  profiler times learn at the host's lanes); the 1-thread figure where the profile has no T-thread
  timing of that (workload, kernel, device). `thread_counts(k, d, w)` lists the counts it has. With
  `beside=u`, the share of each call the actor processes beside it are busy (as on the local and Ray launchers,
  where a parallel region waits out the thread an actor displaced): the ratio moves from the figure alone toward
  the one timed beside a stand-in actor busy a share u₀ of each call (the profiler's, for learn at the host's
  lanes), linearly in u up to u₀ and no further; the figure alone where the profile has none beside.
- `transfer_time(src, dst, nbytes, arrays=1)`: 0 on the same device; otherwise every end that is not
  `cpu` adds its leg, the source's d2h and the destination's h2d, each `arrays × latency + nbytes / bandwidth`, so
  device → device goes through the host. A device on the host's own memory (PoCL's CPU device) pays its legs
  too: its buffers are read and written through its runtime (the reference profile times both legs), which is
  what a batch moved from PoCL replay to a `cpu` learner costs.
- `in_situ_factor(d, w)` and `first_iteration_factor(d, w)`: the learner's iteration as the runtime runs it ÷ its
  kernels timed one at a time, and a segment's first iteration (after the learner waited) ÷ that iteration.
- `segment_loop_time(d, w)`: seconds of the learner's loop a segment beyond its kernels, the host's figure
  (`InSituTiming.segment_s`: the loop is host work whatever device learns).
- `weight_sync_time(d, w)`: the two halves of a weight sync through host memory on device d, (publish by the
  learn kernel, load into the act kernel), as the profile timed them; None where it has no such figure.
- `actor_env_time(w, e)`: seconds of an actor's env side per iteration of e environments, as an actor runs
  it: the profile's actor step of w (one act call, one vector-env step with its resets and bookkeeping, the
  transitions written; or of another workload on w's env when w has none) less its act kernel at e, so the
  act device stays a choice. Between the measured env counts linear in e, above them proportional to e (the
  largest count's seconds per env), below them the smallest count's; at least a tenth of the actor step.
  None when the profile has no actor step on w's env (the planner then charges e bare env steps).
- `power(d)`: idle and busy watts, with their source and method.
- Implementations: where the profile times a kernel on a device more than one way (`KernelTiming.implementation`:
  act and learn on `cuda:N` eager and captured as CUDA graphs), `kernel_time` answers with the fastest way at
  that batch and names it (`Estimate.implementation`; a tie keeps eager), so a plan places the faster and records
  which; the batch list and the work fit read the eager series.
- Device time: where the profile timed a kernel by its device's own clock (`KernelTiming.device_s`, CUDA events
  on a GPU), each figure carries the share of its wall time the device was busy (`Estimate.device_share`: that
  median ÷ the wall median at the nearest measured batch, at most 1), which the planner's load row of the device
  counts in place of the whole.
- `CostModel(profile, precision)`: learn at that precision (`pearl.kernels.Precision`): only the profile's learn
  timings at it are read, every other kernel's float32 ones; a device whose learn was not timed at it has no
  learn figure, so a plan at that precision cannot place learn there.

Scaled figures. `kernel_time` also takes a `Workload` (its shapes) in place of a key. When the profile holds
that workload's (kernel, device) series, the series answers (measured). When it does not, the time is the
nearest measured workload's, scaled by the ratio of their roofline work (pearl/roofline.py):

    nearest      among the profile's workloads of the same algo with a series of that (kernel, device), the
                 one with the smallest  |ln(F_t/F_c)| + |ln(B_t/B_c)| + |ln(L_t/L_c)|,  where F, B, L are the
                 flops, bytes and launches of one call (kernel_work) at the requested batch, t the target and c
                 the candidate; a term whose two amounts are both 0 counts 0 (replay_insert has no flops).
                 Ties go to the workload listed first in the profile.
    work time    m_d(w) = λ_d · L + φ_d · F + β_d · B, its non-negative coefficients fitted to every kernel
                 timing of device d in the profile (least squares on relative error, scipy's nnls): a
                 per-launch overhead, seconds per flop and seconds per byte of that device as measured.
    t(b)         t_c(b) · m_d(work_t(b)) / m_d(work_c(b))     t_c(b) the nearest's series at b (as above)

  Such an estimate carries source "scaled" and `scaled_from` the nearest's key. A cost proportional to
  λL + φF + βB on a device is scaled exactly. With no fit (every coefficient 0) the ratio is 1.
  The weight sync of such a workload is the nearest's (here: the closest policy parameter count P) scaled as
  a copy of its policy, m_d of (1 launch, 4·P bytes), and labelled scaled; its in-situ factor, a ratio, is
  the nearest's as it is.

Every estimate carries `source`: "measured" when every profile figure it was computed from (and the device
entries those figures belong to) is measured, "scaled" when one came from another workload's figures (and
none was modelled), else "modelled". Measured beats scaled beats modelled: a combination takes the worst
label, and a measured series is always used before a scaled one. Modelled figures are never passed off as
measured.

The estimates, their labels and a kernel's batch series (t(b) above) are pearl/costmodel/estimate.py's.
Pure Python + numpy and scipy: this module imports no torch and no pyopencl.
"""

from __future__ import annotations

import math
from dataclasses import replace

from pearl.costmodel.estimate import MEASURED, SCALED, Estimate, PowerEstimate, Series, combine, piecewise
from pearl.device import HOST_DEVICE
from pearl.kernels import Implementation, Precision, sample_timing
from pearl.profile.format import IN_SITU, ActorStepTiming, KernelTiming, Power, Profile, Transfer, Workload
from pearl.roofline import Work, kernel_work

__all__ = ["HOST", "CostModel"]

#: The id of the host CPU device (pearl.device.HOST_DEVICE).
HOST = str(HOST_DEVICE)


class CostModel:
    """Kernel, env-step and transfer times and power figures from one `Profile`.

    A profile with two timings of the same (workload, kernel, device, batch), two env-step timings of one env,
    two transfers of one (device, direction) or two power entries of one device is ambiguous: ValueError.
    """

    def __init__(self, profile: Profile, precision: Precision = Precision.FP32) -> None:
        self.profile = profile
        #: learn's arithmetic: only learn's timings at it are read (every other kernel runs float32)
        self.precision = Precision.parse(precision)
        self._device_source = {d.id: d.source for d in profile.devices}
        self._shares = {d.id: d.shares for d in profile.devices}

        grouped: dict[tuple[str, str, str], list[KernelTiming]] = {}
        #: (workload, kernel, device) → threads → the timing at T > 1 threads (one batch: the profiler's), alone
        #: and beside a stand-in actor
        self._threaded: dict[tuple[str, str, str], dict[int, KernelTiming]] = {}
        self._beside: dict[tuple[str, str, str], dict[int, KernelTiming]] = {}
        for t in profile.kernels:
            if t.precision != (self.precision.value if t.kernel == "learn" else Precision.FP32.value):
                continue
            if t.threads != 1 or t.beside > 0:
                (self._beside if t.beside > 0 else self._threaded).setdefault((t.workload, t.kernel, t.device),
                                                                              {})[t.threads] = t
                continue
            grouped.setdefault((t.workload, t.kernel, t.device), {}).setdefault(t.implementation, []).append(t)
        #: (workload, kernel, device) → its series: the eager one where it has several (batches, the work fit)
        self._series: dict[tuple[str, str, str], Series] = {}
        #: (workload, kernel, device) → implementation → series, where the profile times it more than one way
        self._ways: dict[tuple[str, str, str], dict[str, Series]] = {}
        for key, ways in grouped.items():
            for way, timings in ways.items():
                batches = [t.batch for t in timings]
                dup = sorted({b for b in batches if batches.count(b) > 1})
                if dup:
                    raise ValueError(f"the profile times kernel {key[1]!r} on device {key[2]!r} for workload "
                                     f"{key[0]!r} more than once at batch size(s) {dup}"
                                     + (f" ({way})" if len(ways) > 1 else ""))
            series = {way: Series.of(timings, self._device_source.get(key[2], MEASURED))
                      for way, timings in ways.items()}
            self._series[key] = series.get(Implementation.EAGER.value) or next(iter(series.values()))
            if len(series) > 1:
                self._ways[key] = series

        self._workloads = {w.key: w for w in profile.workloads}
        self._fits: dict[str, tuple[float, float, float]] = {}  # device → (λ, φ, β), fitted when first asked

        self._env: dict[str, Estimate] = {}
        for e in profile.env_step:
            if e.env in self._env:
                raise ValueError(f"the profile has more than one env_step timing of {e.env!r}")
            self._env[e.env] = Estimate(e.median_s, False, e.source)

        self._transfers: dict[tuple[str, str], Transfer] = {}
        for tr in profile.transfers:
            if (tr.device, tr.direction) in self._transfers:
                raise ValueError(f"the profile has more than one {tr.direction} transfer of device {tr.device!r}")
            self._transfers[(tr.device, tr.direction)] = tr

        self._in_situ = {(t.workload, t.device): t for t in profile.in_situ}
        self._group_learn = {(t.workload, t.device, t.learners): t for t in profile.group_learn}
        env_of = {w.key: w.env for w in profile.workloads}
        self._actor_steps: dict[str, dict[str, list[ActorStepTiming]]] = {}  # env -> workload -> timings
        for t in profile.actor_step:
            self._actor_steps.setdefault(env_of[t.workload], {}).setdefault(t.workload, []).append(t)
        self._weight_sync = {(t.workload, t.device): t for t in profile.weight_sync}

        self._power: dict[str, Power] = {}
        for p in profile.power:
            if p.device in self._power:
                raise ValueError(f"the profile has more than one power entry of device {p.device!r}")
            self._power[p.device] = p

    # ------------------------------------------------------------------ what the profile holds
    def devices(self) -> list[str]:
        """Device ids, in profile order."""
        return [d.id for d in self.profile.devices]

    def resource(self, device: str) -> str:
        """The physical resource the device runs on: its `shares`, or its own id when it shares nothing."""
        if device not in self._shares:
            self.profile.device(device)  # raises a KeyError naming the devices there are
        return self._shares[device] or device

    def workloads(self) -> list[str]:
        """Workload keys, in profile order."""
        return [w.key for w in self.profile.workloads]

    def batches(self, kernel: str, device: str, workload: str | Workload) -> list[int]:
        """The measured batch sizes of that kernel on that device for that workload, ascending ([] if none);
        for a `Workload` the profile lacks, those of the workload it would be scaled from."""
        key = workload if isinstance(workload, str) else workload.key
        series = self._series.get((key, kernel, device))
        if series is None and not isinstance(workload, str):
            nearest = self.nearest(kernel, device, workload, max(1, workload.batch_size))
            series = self._series.get((nearest, kernel, device)) if nearest else None
        return list(series.batches) if series else []

    def nearest(self, kernel: str, device: str, workload: Workload, batch: int) -> str | None:
        """The key of the measured workload a figure of `workload` is scaled from (module docstring); None when
        the profile has no workload of that algo timing that kernel on that device."""
        target = kernel_work(kernel, workload, batch)
        best: tuple[float, str] | None = None
        for w in self.profile.workloads:
            if w.algo != workload.algo or (w.key, kernel, device) not in self._series:
                continue
            d = _distance(target, kernel_work(kernel, w, batch))
            if best is None or d < best[0]:
                best = (d, w.key)
        return best[1] if best else None

    # ------------------------------------------------------------------ times
    def thread_counts(self, kernel: str, device: str, workload: str | Workload) -> list[int]:
        """The thread counts the profile times that kernel at on that device for that workload (the workload
        it would be scaled from, for a `Workload` it lacks): [1] and each count of a multi-threaded timing."""
        key = self._threads_key(kernel, device, workload)
        return [1, *sorted(self._threaded.get((key, kernel, device), {}))] if key else [1]

    def _threads_key(self, kernel: str, device: str, workload: str | Workload) -> str | None:
        if isinstance(workload, str) or (workload.key, kernel, device) in self._series:
            return workload if isinstance(workload, str) else workload.key
        return self.nearest(kernel, device, workload, max(1, workload.batch_size))

    def kernel_time(self, kernel: str, device: str, workload: str | Workload, batch: int,
                    threads: int = 1, beside: float = 0.0, implementation: str | None = None) -> Estimate:
        """Seconds of one call of `kernel` on `device` for `workload` at `batch` (see the module docstring),
        at `threads` CPU threads (the 1-thread figure where the profile has no figure at that count); `beside`:
        the share of each call the actor processes beside it are busy (the module docstring).

        `workload` is a key of the profile's, or a `Workload`: one the profile lacks is scaled from the nearest
        it has. `implementation`: that way's figure where the profile times the kernel several ways (None: the
        fastest)."""
        if isinstance(batch, bool) or int(batch) != batch or batch < 1:
            raise ValueError(f"batch must be a positive integer, got {batch!r}")
        one = self._one_thread_time(kernel, device, workload, batch, implementation)
        key = self._threads_key(kernel, device, workload) if threads != 1 else None
        timing = self._threaded.get((key, kernel, device), {}).get(threads) if key else None
        if timing is None:
            return one
        base = self._series[(key, kernel, device)].at(timing.batch).seconds
        factor = timing.median_s / (timing.one_thread_s or base)
        near = self._beside.get((key, kernel, device), {}).get(threads)
        if near is not None and beside > 0:  # linear in the actors' busy share, up to the stand-in's
            factor += (near.median_s / (near.one_thread_s or base) - factor) * min(1.0, beside / near.beside)
        return replace(one, seconds=one.seconds * factor, source=combine(one.source, timing.source))

    def _one_thread_time(self, kernel: str, device: str, workload: str | Workload, batch: int,
                         implementation: str | None = None) -> Estimate:
        key = workload if isinstance(workload, str) else workload.key
        if (key, kernel, device) in self._series:
            return self._at((key, kernel, device), int(batch), implementation)
        if isinstance(workload, str):
            raise KeyError(self._missing(kernel, device, workload))
        nearest = self.nearest(kernel, device, workload, int(batch))
        if nearest is None:
            raise KeyError(self._missing(kernel, device, key))
        base = self._at((nearest, kernel, device), int(batch), implementation)
        ratio = self._work_ratio(device, kernel_work(kernel, workload, int(batch)),
                                 kernel_work(kernel, self._workloads[nearest], int(batch)))
        return replace(base, seconds=base.seconds * ratio, source=combine(base.source, SCALED), scaled_from=nearest)

    def _at(self, key: tuple[str, str, str], batch: int, implementation: str | None = None) -> Estimate:
        """The series' figure at batch; where the profile times the kernel several ways, the fastest way's (or
        `implementation`'s, where it times that one), naming it (a tie keeps the eager way, every device's)."""
        ways = self._ways.get(key)
        if ways is None:
            return _busy(self._series[key], batch)
        if implementation in ways:
            return replace(_busy(ways[implementation], batch), implementation=implementation)
        eager = Implementation.EAGER.value
        figures = sorted(((_busy(series, batch), way) for way, series in ways.items()),
                         key=lambda e: (e[0].seconds, e[1] != eager))
        best, way = figures[0]
        return replace(best, implementation=way)

    def work_coefficients(self, device: str) -> tuple[float, float, float]:
        """(λ, φ, β) of m_d = λ·launches + φ·flops + β·bytes fitted to the device's timings (module docstring)."""
        if device not in self._fits:
            self._fits[device] = self._fit(device)
        return self._fits[device]

    def _fit(self, device: str) -> tuple[float, float, float]:
        import numpy as np
        from scipy.optimize import nnls

        rows, ones = [], []
        for (key, kernel, d), series in self._series.items():
            workload = self._workloads.get(key)
            if d != device or workload is None:
                continue
            for batch, seconds in zip(series.batches, series.raw):
                if seconds > 0:
                    w = kernel_work(kernel, workload, batch)
                    rows.append([w.launches / seconds, w.flops / seconds, w.bytes / seconds])  # relative error
                    ones.append(1.0)
        if not rows:
            return 0.0, 0.0, 0.0
        a = np.asarray(rows)
        scale = a.max(axis=0)
        scale[scale == 0] = 1.0  # columns on one scale, so nnls's tolerance means the same for each
        coef, _ = nnls(a / scale, np.asarray(ones))
        lam, phi, beta = (float(c) for c in coef / scale)
        return lam, phi, beta

    def _work_ratio(self, device: str, target: Work, measured: Work) -> float:
        lam, phi, beta = self.work_coefficients(device)

        def m(w: Work) -> float:
            return lam * w.launches + phi * w.flops + beta * w.bytes

        return m(target) / m(measured) if m(measured) > 0 and m(target) > 0 else 1.0

    def _missing(self, kernel: str, device: str, workload: str) -> str:
        what = f"the profile has no timing of kernel {kernel!r} on device {device!r} for workload {workload!r}"
        have: dict[str, list[str]] = {}
        for w, k, d in self._series:
            if k == kernel:
                have.setdefault(d, []).append(w)
        if not have:
            kernels = sorted({k for _, k, _ in self._series})
            return f"{what}; it has no timing of {kernel!r} at all (it times: {', '.join(kernels) or 'nothing'})"
        listed = "; ".join(f"{d}: {', '.join(sorted(ws))}" for d, ws in sorted(have.items()))
        return f"{what}; for {kernel!r} it has (device: workloads) {listed}"

    def sample_timing(self, prioritized: bool, device: str, workload: str | Workload) -> str:
        """The timing that prices replay_sample on `device` (`pearl.kernels.sample_timing`); a profile taken
        before the prioritized draw was timed has the uniform one only, which then stands for both."""
        name = sample_timing(prioritized)
        return name if self.batches(name, device, workload) else "replay_sample"

    def in_situ_factor(self, device: str, workload: str | Workload) -> float:
        """How much slower the replay and learn kernels of `device` ran inside the learner's iteration (fresh
        samples, kernels interleaved, as the runtime runs them) than timed one at a time: the profile's in-situ
        iteration ÷ the sum of its kernels' times at the same sizes (learn's in the way the iteration ran it,
        `InSituTiming.implementation`). 1.0 when the profile has no in-situ
        timing for that pair (older profiles, what-if devices)."""
        if self.precision is not Precision.FP32:  # the iteration ran learn in float32: its ratio to float32's
            return self._float32().in_situ_factor(device, workload)
        workload = self._in_situ_key(device, workload)
        t = self._in_situ.get((workload, device)) if workload else None
        if t is None:
            return 1.0
        bare = (t.inserts * self.kernel_time("replay_insert", device, workload, t.insert_rows).seconds
                + self.kernel_time(self.sample_timing(t.prioritized, device, workload), device, workload,
                                   t.batch).seconds
                + self.kernel_time("learn", device, workload, t.batch, implementation=t.implementation).seconds
                + (self.kernel_time("priority_update", device, workload, t.batch).seconds if t.prioritized else 0.0))
        return t.iteration_s / bare if bare > 0 else 1.0

    def _float32(self) -> "CostModel":
        if getattr(self, "_fp32_model", None) is None:
            self._fp32_model = CostModel(self.profile)
        return self._fp32_model

    def first_iteration_factor(self, device: str, workload: str | Workload) -> float:
        """How much longer a segment's first learner iteration on `device` took than one in the middle of a chain:
        the profile's iteration after a pause ÷ its in-situ iteration (`InSituTiming.first_iteration_s`), at
        least 1 (a first iteration timed faster is the host's noise). 1.0 where the profile has no such figure
        (older profiles, figures folded from a run, what-if devices); a workload it has not measured takes the
        nearest measured workload's ratio."""
        key = self._in_situ_key(device, workload)
        t = self._in_situ.get((key, device)) if key else None
        if t is None or t.first_iteration_s is None:
            return 1.0
        return max(1.0, t.first_iteration_s / t.iteration_s)

    def segment_loop_time(self, device: str, workload: str | Workload) -> float:
        """Seconds of the learner's loop a segment beyond its kernels with learn on `device`: the host's figure for
        the workload (or the nearest measured one's), the loop being the host's work whatever device learns. 0.0
        where the profile has none (older profiles) and where `device`'s iteration was folded from a run, whose
        figure holds the run's loop already."""
        key = self._in_situ_key(device, workload)
        mine = self._in_situ.get((key, device)) if key else None
        if mine is not None and mine.source == IN_SITU:
            return 0.0
        key = self._in_situ_key(HOST, workload)
        host = self._in_situ.get((key, HOST)) if key else None
        return 0.0 if host is None or host.segment_s is None else host.segment_s

    def _in_situ_key(self, device: str, workload: str | Workload) -> str | None:
        """The workload whose in-situ figures on `device` stand for `workload`'s: its own where the profile has them
        (or a key, as given), else the nearest measured one's (the figures are ratios, taken as they are)."""
        if isinstance(workload, str):
            return workload
        if (workload.key, device) in self._in_situ:
            return workload.key
        return self._nearest_entry(self._in_situ, device, workload)

    def weight_sync_time(self, device: str, workload: str | Workload) -> tuple[Estimate, Estimate] | None:
        """(publish, load) seconds of one weight sync through host memory with learn and act on `device`: the
        learn kernel writing its policy into host arrays, and a copy of them loaded into the act kernel. None
        when the profile has no such timing (older profiles, what-if devices)."""
        if not isinstance(workload, str) and (workload.key, device) not in self._weight_sync:
            return self._scaled_weight_sync(device, workload)
        key = workload if isinstance(workload, str) else workload.key
        t = self._weight_sync.get((key, device))
        if t is None:
            return None
        source = combine(t.source, self._device_source.get(device, MEASURED))
        return Estimate(t.publish_s, False, source), Estimate(t.load_s, False, source)

    def _scaled_weight_sync(self, device: str, workload: Workload) -> tuple[Estimate, Estimate] | None:
        """The nearest measured workload's weight sync, scaled as a copy of the policy's parameters (one
        launch and its bytes, by the device's fit): a scaled figure."""
        nearest = self._nearest_entry(self._weight_sync, device, workload)
        if nearest is None:
            return None
        publish, load = self.weight_sync_time(device, nearest)
        ratio = self._work_ratio(device, _policy_copy(workload), _policy_copy(self._workloads[nearest]))
        return tuple(replace(e, seconds=e.seconds * ratio, source=combine(e.source, SCALED), scaled_from=nearest)
                     for e in (publish, load))

    def _nearest_entry(self, table: dict[tuple[str, str], object], device: str, workload: Workload) -> str | None:
        """Of the measured workloads of workload's algo with an entry in `table` on `device`, the one whose
        policy has the closest parameter count (|ln| of the ratio; ties to the profile's first)."""
        target = _policy_copy(workload).bytes
        best: tuple[float, str] | None = None
        for w in self.profile.workloads:
            if w.algo == workload.algo and (w.key, device) in table:
                d = abs(math.log(target / _policy_copy(w).bytes))
                if best is None or d < best[0]:
                    best = (d, w.key)
        return best[1] if best else None

    def env_step_time(self, env: str) -> Estimate:
        """Seconds of one step of one `env` environment on the host."""
        try:
            return self._env[env]
        except KeyError:
            raise KeyError(f"the profile has no env_step timing of {env!r}; it has "
                           f"{', '.join(sorted(self._env)) or 'none'}") from None

    def actor_env_time(self, workload: Workload, envs: int) -> Estimate | None:
        """Seconds of an actor's env side per iteration of `envs` environments (the module docstring)."""
        if envs < 1:
            raise ValueError(f"envs must be >= 1, got {envs!r}")
        timed = self._actor_steps.get(workload.env)
        if not timed:
            return None
        key = workload.key if workload.key in timed else next(iter(timed))
        points, sources = [], []
        for t in sorted(timed[key], key=lambda t: t.envs):
            act = self.kernel_time("act", t.device, key, t.envs)
            points.append((t.envs, max(t.step_s - act.seconds, 0.1 * t.step_s)))
            sources += [t.source, act.source]
        return Estimate(piecewise(points, envs), False, combine(*sources))

    def transfer_time(self, src: str, dst: str, nbytes: int, arrays: int = 1) -> Estimate:
        """Seconds to move `nbytes`, in `arrays` separate arrays, from device `src` to device `dst` (see the
        module docstring)."""
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes!r}")
        if arrays < 1:
            raise ValueError(f"arrays must be >= 1, got {arrays!r}")
        if src == dst:
            return Estimate(0.0, False, MEASURED)
        for device in (src, dst):
            self.resource(device)  # an unknown device is a KeyError naming the devices there are
        legs = []
        if src != HOST:
            legs.append(self._transfer(src, "d2h"))
        if dst != HOST:
            legs.append(self._transfer(dst, "h2d"))
        seconds = sum(arrays * tr.latency_s + nbytes / tr.bandwidth_bytes_per_s for tr in legs)
        sources = [combine(tr.source, self._device_source.get(tr.device, MEASURED)) for tr in legs]
        return Estimate(float(seconds), False, combine(*sources))

    def group_learn_time(self, workload: str, device: str, learners: int) -> Estimate | None:
        """One update of a learner group as the profiler timed it (`GroupLearnTiming`), or None where it did not
        time this workload, device and group size."""
        t = self._group_learn.get((workload, device, learners))
        return None if t is None else Estimate(t.update_s, False, t.source)

    def group_wait_time(self, workload: str, device: str, learners: int) -> Estimate | None:
        """Learner 0's seconds an update in the collectives of the group the profiler timed (`group_learn_time`),
        or None where it did not time them (no such group, or a profile from before it did)."""
        t = self._group_learn.get((workload, device, learners))
        return None if t is None or t.comm_s is None else Estimate(t.comm_s, False, t.source)

    def group_time(self, learners: int, gradient_bytes: int, averages: int, batch: int, row_bytes: int,
                   network: tuple[float, float] | None = None) -> Estimate:
        """Seconds per update a learner group of `learners` processes on this host spends communicating, as
        learner 0 waits for it (pearl.adapters.torch.learner_group): the scatter of the other learners' rows of the batch,
        `averages` all-gathers of the gradients (`gradient_bytes` in all; each learner receives the other N − 1
        copies), the gather of the TD errors; each collective pays N − 1 latencies (one per peer), and the bytes
        the host's `group` bandwidth. Measured between two processes; N > 2 is that figure extrapolated. KeyError
        when the profile has no `group` figure (profiles before learner groups). `network`: (latency s,
        bytes/s) of the links between nodes, for a group across a cluster's nodes: each message pays the larger
        latency of the two, the bytes the lower bandwidth."""
        if learners == 1:
            return Estimate(0.0, False, MEASURED)
        tr = self._transfer(str(HOST_DEVICE), "group")
        latency, bandwidth = tr.latency_s, tr.bandwidth_bytes_per_s
        if network is not None:
            latency, bandwidth = max(latency, network[0]), min(bandwidth, network[1])
        peers = learners - 1
        nbytes = peers * gradient_bytes + batch * row_bytes * peers / learners + batch * 4
        seconds = (averages + 2) * peers * latency + nbytes / bandwidth
        return Estimate(float(seconds), learners > 2, tr.source)

    def _transfer(self, device: str, direction: str) -> Transfer:
        try:
            return self._transfers[(device, direction)]
        except KeyError:
            have = sorted(d for (dev, d) in self._transfers if dev == device)
            raise KeyError(f"the profile has no {direction} transfer figure of device {device!r} (it has "
                           f"{', '.join(have) if have else 'no transfer figures of that device'})") from None

    # ------------------------------------------------------------------ power
    def power(self, device: str) -> PowerEstimate:
        """Idle and busy watts of the device, with their source and how they were obtained."""
        try:
            p = self._power[device]
        except KeyError:
            raise KeyError(f"the profile has no power figures of device {device!r}; it has them for "
                           f"{', '.join(self._power) or 'no device'}") from None
        return PowerEstimate(p.idle_w, p.busy_w, combine(p.source, self._device_source.get(device, MEASURED)),
                             p.method)


def _policy_copy(workload: Workload) -> Work:
    """A copy of the policy's parameters (what a weight sync moves): one launch, 4 bytes a parameter."""
    from pearl.algos.registry import algorithm
    from pearl.roofline import _param_count, network_sizes

    sizes = network_sizes(workload)[algorithm(workload.algo).policy_net]
    return Work(0.0, 4.0 * _param_count(sizes), 1)


def _busy(series: Series, batch: int) -> Estimate:
    """The series' figure at batch with its device-busy share (`Series.share_at`)."""
    estimate = series.at(batch)
    share = series.share_at(batch)
    return estimate if share is None else replace(estimate, device_share=share)


def _distance(a: Work, b: Work) -> float:
    """|ln(F_a/F_b)| + |ln(B_a/B_b)| + |ln(L_a/L_b)|; a term whose amounts are both 0 counts 0, one zero
    against a positive amount counts infinity."""
    total = 0.0
    for x, y in ((a.flops, b.flops), (a.bytes, b.bytes), (a.launches, b.launches)):
        if x == 0 and y == 0:
            continue
        total += abs(math.log(x / y)) if x > 0 and y > 0 else math.inf
    return total


