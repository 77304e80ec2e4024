"""A run's energy from the hardware's counters: RAPL's packages (read from a powercap tree laid out as Linux
lays it out), NVML's total-energy counter (through NVML's functions with answers of our own), the meter over a
learning phase, and what a run and `pearl compare` record where this host has no counter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pearl.adapters.energy import (NvmlCounter, RaplCounter, Unread, counter_for, host_counter,
                                   nvml_board_counter, rapl_domains)
from pearl.device import HOST_RESOURCE, DeviceId
from pearl.runtime.energy import EnergyMeter, open_meter


def powercap(root: Path, packages: dict[int, tuple[int, int | None]]) -> Path:
    """A powercap tree: intel-rapl:N/energy_uj (and max_energy_range_uj when given) per package, and one
    sub-domain (intel-rapl:0:0, a core's share, which a package's count already holds)."""
    for n, (energy, wrap) in packages.items():
        folder = root / f"intel-rapl:{n}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "energy_uj").write_text(f"{energy}\n")
        if wrap is not None:
            (folder / "max_energy_range_uj").write_text(f"{wrap}\n")
    (root / "intel-rapl:0:0").mkdir(exist_ok=True)
    (root / "intel-rapl:0:0" / "energy_uj").write_text("77\n")
    return root


def write(root: Path, package: int, energy: int) -> None:
    (root / f"intel-rapl:{package}" / "energy_uj").write_text(f"{energy}\n")


def test_rapl_reads_the_packages_only_and_skips_what_it_cannot_read(tmp_path) -> None:
    root = powercap(tmp_path, {0: (1_000, 9_999), 1: (500, None)})
    assert rapl_domains(root) == [root / "intel-rapl:0" / "energy_uj", root / "intel-rapl:1" / "energy_uj"]
    (root / "intel-rapl:1" / "energy_uj").write_text("permission denied\n")  # as a read that fails gives nothing
    assert rapl_domains(root) == [root / "intel-rapl:0" / "energy_uj"]
    assert rapl_domains(tmp_path / "absent") == []


def test_rapl_counts_every_package_and_each_wrap(tmp_path) -> None:
    root = powercap(tmp_path, {0: (1_000, 9_999), 1: (500, None)})
    counter = RaplCounter(rapl_domains(root))
    assert counter.resource == HOST_RESOURCE and counter.method == "rapl" and counter.joules() == 0.0
    write(root, 0, 9_000)
    write(root, 1, 2_500)
    assert counter.joules() == pytest.approx((8_000 + 2_000) / 1e6)
    write(root, 0, 500)  # wrapped at max_energy_range_uj 9,999: 999 µJ to the top, then 501 from 0
    assert counter.joules() == pytest.approx((8_000 + 2_000 + 1_500) / 1e6)
    write(root, 1, 100)  # no max_energy_range_uj: the narrowest counters' 2^32 µJ
    assert counter.joules() == pytest.approx((8_000 + 2_000 + 1_500 + (1 << 32) - 2_400) / 1e6)


def test_no_readable_rapl_is_a_reason_not_a_counter(tmp_path) -> None:
    unread = host_counter(tmp_path)
    assert isinstance(unread, Unread) and unread.resource == HOST_RESOURCE
    assert "no RAPL package counter is readable here" in unread.why and str(tmp_path) in unread.why
    with pytest.raises(ValueError, match="at least one package"):
        RaplCounter([])


class Nvml:
    """NVML's functions over a board whose total-energy counter we set; GPU 1 predates the counter."""

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        self.millijoules = 123_456_789

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        if handle == 1:
            raise self.NVMLError("Not Supported")
        return self.millijoules


def test_nvml_counts_the_boards_joules_since_it_was_opened() -> None:
    nvml = Nvml()
    counter = nvml_board_counter(nvml, 0, "cuda:0")
    assert isinstance(counter, NvmlCounter) and counter.resource == "cuda:0" and counter.joules() == 0.0
    nvml.millijoules += 2_500
    assert counter.joules() == pytest.approx(2.5)
    assert nvml_board_counter(nvml, 1, "cuda:1") == Unread("cuda:1", "NVML reads no total-energy counter on GPU 1 "
                                                                      "(Not Supported)")


def test_the_meter_counts_its_phase_once_and_says_what_it_cannot_read(tmp_path) -> None:
    root = powercap(tmp_path, {0: (1_000, 9_999)})
    meter = EnergyMeter({HOST_RESOURCE: RaplCounter(rapl_domains(root))}, poll_s=0.01)
    write(root, 0, 3_000)  # before the learning phase: not counted
    meter.start()
    write(root, 0, 4_000)
    meter.start()  # a second start does not move the phase's beginning
    result = meter.stop()
    assert result["source"] == "measured" and result["method"] == "rapl" and result["unmeasured"] == {}
    assert result["joules"] == pytest.approx(1_000 / 1e6)
    assert result["joules_by_resource"] == {HOST_RESOURCE: pytest.approx(1_000 / 1e6)}
    assert result["seconds"] > 0 and result["power_w"] == pytest.approx(result["joules"] / result["seconds"])
    write(root, 0, 9_000)
    assert meter.stop() is result  # stopped once: the phase's figure stays

    board = Nvml()
    partly = EnergyMeter({"cuda:0": nvml_board_counter(board, 0, "cuda:0")},
                         unmeasured={HOST_RESOURCE: "no RAPL package counter"})
    partly.start()
    board.millijoules += 7_000
    result = partly.stop()
    assert result["source"] == "partly measured" and result["method"] == "nvml"
    assert result["joules"] == pytest.approx(7.0) and result["unmeasured"] == {HOST_RESOURCE: "no RAPL package counter"}

    never = EnergyMeter({HOST_RESOURCE: RaplCounter(rapl_domains(root))})
    assert never.stop() == {"source": "modelled",
                            "unmeasured": {HOST_RESOURCE: "the run never reached its learning phase"}}
    none = EnergyMeter(unmeasured={HOST_RESOURCE: "no counter"})
    none.start()
    assert none.stop() == {"source": "modelled", "unmeasured": {HOST_RESOURCE: "no counter"}}


def test_this_hosts_meter_reads_the_host_exactly_when_its_rapl_is_readable() -> None:
    meter = open_meter([DeviceId.parse("cpu")])
    if rapl_domains():
        assert list(meter.counters) == [HOST_RESOURCE] and meter.unmeasured == {}
    else:
        assert meter.counters == {} and list(meter.unmeasured) == [HOST_RESOURCE]
        assert meter.unmeasured[HOST_RESOURCE].startswith("no RAPL package counter is readable here")
    assert counter_for(DeviceId.parse("whatif:nvidia-a100-sxm4-80gb")) == Unread(
        "whatif:nvidia-a100-sxm4-80gb", "pearl reads no energy counter on a whatif:<descriptor stem> device")


def test_an_opencl_cpu_device_draws_on_the_hosts_counter() -> None:
    from pearl.adapters.opencl.discovery import discover_opencl

    cpus = [d for d in discover_opencl()[0] if d.kind == "cpu"]
    if not cpus:
        pytest.skip("no OpenCL CPU device here")
    host, own = host_counter(), counter_for(cpus[0].device_id)
    assert type(own) is type(host) and own.resource == HOST_RESOURCE
    meter = open_meter([DeviceId.parse("cpu"), cpus[0].device_id])
    assert set(meter.counters) | set(meter.unmeasured) == {HOST_RESOURCE}  # one resource, read once


def test_a_run_records_its_energy_and_where_it_came_from(tmp_path) -> None:
    from pearl.training import train

    result = train("dqn", "CartPole-v1", steps=1_200, seed=0, eval_episodes=0, runs_dir=str(tmp_path),
                   settings={"learning_starts": "400"})
    energy = json.loads((Path(result.run_dir) / "summary.json").read_text())["energy"]
    assert energy == result.energy
    if rapl_domains():
        assert energy["source"] == "measured" and energy["joules"] > 0
        assert energy["j_per_env_step"] == pytest.approx(energy["power_w"] / result.learning_env_steps_per_s)
    else:  # this VM: no counter, so the run says so rather than inventing a figure
        assert energy == {"source": "modelled", "unmeasured": open_meter([DeviceId.parse("cpu")]).unmeasured}


def test_compare_takes_the_counters_figure_where_the_run_read_them(tmp_path) -> None:
    """Every resource read: the counters' figure; some read: theirs plus the plan's power for the others; none:
    the plan's power × the measured time. Each row says which, and why a resource was not read."""
    from dataclasses import replace

    from pearl.planner.make import make_plan
    from pearl.report import markdown, row
    from pearl.training.result import TrainResult

    reference = Path(__file__).resolve().parents[1] / "profiles" / "reference.json"
    plan = make_plan(reference, "dqn", "CartPole-v1")
    by_resource = plan.predicted["power_by_resource_w"]
    assert sum(by_resource.values()) == pytest.approx(plan.predicted["power_w"]) and HOST_RESOURCE in by_resource
    modelled = TrainResult("dqn", "CartPole-v1", 4096, 0, "cpu", 1900.0, 950.0, 60800.0, 0.5, 0.0, 0.0, 0, 3.0,
                           str(tmp_path / "a"), updates=1536, learning_env_steps_per_s=2000.0,
                           energy={"source": "modelled", "unmeasured": {HOST_RESOURCE: "no RAPL counter"}})
    measured = replace(modelled, energy={"source": "measured", "method": "rapl", "joules": 90.0, "seconds": 2.0,
                                         "power_w": 45.0, "j_per_env_step": 45.0 / 2000.0, "unmeasured": {}})
    partly = replace(modelled, energy={"source": "partly measured", "method": "nvml", "joules": 600.0,
                                       "seconds": 2.0, "power_w": 300.0,
                                       "unmeasured": {HOST_RESOURCE: "no RAPL counter"}})
    by_model, by_counter, by_both = (row("all on cpu", plan, r, tmp_path / "1.plan.json", 2.0)
                                     for r in (modelled, measured, partly))
    assert by_model["measured_j_per_step"] == pytest.approx(plan.predicted["power_w"] / 2000.0)
    assert by_model["energy_source"] == f"plan's power ({plan.predicted['power_source']}) × time"
    assert by_model["energy_why"] == "host-cpu: no RAPL counter"
    assert by_counter["measured_j_per_step"] == pytest.approx(0.0225) and by_counter["measured_power_w"] == 45.0
    assert by_counter["energy_source"] == "counters (rapl)" and by_counter["energy_why"] is None
    assert by_both["measured_power_w"] == pytest.approx(300.0 + by_resource[HOST_RESOURCE])
    assert by_both["measured_j_per_step"] == pytest.approx(by_both["measured_power_w"] / 2000.0)
    assert by_both["energy_source"] == "counters (nvml) + plan's power for host-cpu"
    report = {"algo": "dqn", "env": "CartPole-v1", "profile": str(reference), "seconds": 2.0,
              "rows": [by_counter], "pareto": plan.pareto}
    assert "| 0.0225 | counters (rapl) |" in markdown(report)


def test_train_says_in_one_line_what_the_counters_read() -> None:
    from pearl.cli.train import _energy_line

    measured = {"source": "measured", "method": "rapl", "joules": 1234.5, "seconds": 20.0, "power_w": 61.7,
                "j_per_env_step": 0.0257, "unmeasured": {}}
    assert _energy_line(measured) == "energy (measured, rapl): 1,234.5 J over 20.0 s, 61.7 W, 0.0257 J/env step"
    partly = {**measured, "source": "partly measured", "method": "nvml", "unmeasured": {"host-cpu": "no RAPL"}}
    del partly["j_per_env_step"]
    assert _energy_line(partly) == ("energy (partly measured, nvml): 1,234.5 J over 20.0 s, 61.7 W; not read: "
                                    "host-cpu (no RAPL)")


def test_the_profilers_rapl_window_counts_a_wrap_inside_it(tmp_path) -> None:
    """The busy-power window reads the packages through RaplCounter: a counter that wraps while the work runs
    still gives the joules drawn (here 9,000 → wrap at 10,000 → 500: 1,500 µJ), divided by the window's time."""
    import time

    from pearl.profiler.power import _rapl_watts

    root = powercap(tmp_path, {0: (9_000, 9_999)})
    calls = []

    def work() -> None:
        if not calls:
            write(root, 0, 500)
        calls.append(time.perf_counter())

    t0 = time.perf_counter()
    watts = _rapl_watts(rapl_domains(root), work, 0.05)
    window = time.perf_counter() - t0
    assert calls and 1_500 / 1e6 / window <= watts <= 1_500 / 1e6 / 0.05
