"""`pearl devices` (this machine's devices and missing backends) and `pearl build-binary`."""

from __future__ import annotations

import click

from pearl.cli.base import cli, print_json


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def devices(as_json: bool) -> None:
    """List this machine's devices and the missing backends.

    Every device pearl can run kernels on, those found but unusable (each probed: a tiny kernel built, run
    and checked) with why, and why each missing backend is missing."""
    from dataclasses import asdict

    from pearl.adapters import discover

    found = discover()
    if as_json:
        print_json({"devices": [{**asdict(d), "usable": d.usable} for d in found.devices],
                    "missing": [{"backend": b, "reason": r} for b, r in found.missing],
                    "broken_drivers": [{"file": f, "reason": r} for f, r in found.broken]})
        return
    click.echo("found:")
    for d in found.usable:
        _echo_device(d)
    if found.unusable:
        click.echo("found, unusable (left out of profiles and plans):")
        for d in found.unusable:
            _echo_device(d)
            click.echo(f"  {'':<12} {'':<7} unusable: {d.problem}")
    if found.missing or found.broken:
        click.echo("missing:")
        for backend, reason in found.missing:
            click.echo(f"  {backend:<12} {reason}")
        for path, reason in found.broken:
            click.echo(f"  {'opencl':<12} driver file {path} is skipped: {reason}")


def _echo_device(d) -> None:
    memory = f"{d.memory_bytes / 2**30:.1f} GiB" if d.memory_bytes else "?"
    lanes = f"{d.lanes} lane{'s' if d.lanes != 1 else ''}"
    click.echo(f"  {d.id:<12} {d.adapter:<7} {d.name}  ({lanes}, {memory})")
    if d.note:
        click.echo(f"  {'':<12} {'':<7} {d.note}")


@cli.command("build-binary")
@click.option("--device", required=True, help="OpenCL device to compile for, e.g. opencl:0:0.")
@click.option("--descriptor", required=True, help="Descriptor of the device model (its [device] and [figures]).")
@click.option("--out", required=True, help="Where to write the binary; the new descriptor goes to OUT.toml.")
def build_binary(device: str, descriptor: str, out: str) -> None:
    """Compile the OpenCL kernels into a binary for a device.

    Compiles pearl's OpenCL program for a device and writes the binary plus a descriptor naming it."""
    from pearl.adapters.opencl.discovery import require_opencl

    require_opencl(device)
    from pearl.adapters.opencl.binary import build_binary as build

    binary, written = build(device, descriptor, out)
    click.echo(f"binary: {binary}\ndescriptor: {written}")
    click.echo(f"train with: pearl train --device {device} --descriptor {written} ...")
