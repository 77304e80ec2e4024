"""An installed (non-editable) pearl carries the device descriptors: setup.py copies devices/*.toml into the
built package as pearl/_devices/, and pearl.descriptors finds them there when no checkout is beside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pearl.descriptors import devices_dir

ROOT = Path(__file__).resolve().parent.parent


def test_devices_dir_prefers_the_checkout_and_falls_back_to_the_shipped_copy(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "pearl").mkdir(parents=True)
    (checkout / "devices").mkdir()
    (checkout / "pyproject.toml").write_text("")
    assert devices_dir(checkout / "pearl") == checkout / "devices"

    site = tmp_path / "site-packages"  # an installed package: no pyproject.toml beside it
    (site / "pearl").mkdir(parents=True)
    (site / "devices").mkdir()  # some other distribution's folder must not be taken for ours
    assert devices_dir(site / "pearl") == site / "pearl" / "_devices"


def test_a_built_package_ships_every_descriptor_and_finds_them(tmp_path):
    pytest.importorskip("setuptools", minversion="77")  # the dev extra installs it
    build = tmp_path / "build"
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path),
                    "build_py", "--build-lib", str(build)], cwd=ROOT, check=True, capture_output=True)
    shipped = build / "pearl" / "_devices"
    sources = sorted(p.name for p in (ROOT / "devices").glob("*.toml"))
    assert sources and sorted(p.name for p in shipped.glob("*.toml")) == sources
    for name in sources:
        assert (shipped / name).read_bytes() == (ROOT / "devices" / name).read_bytes()
    assert sorted(p.name for p in (build / "pearl" / "adapters" / "opencl").glob("*.cl"))  # package data too

    # The built package, imported from outside any checkout, reads its own copy and parses every file.
    probe = ("import json; from pearl.descriptors import DEVICES_DIR as D, load_descriptor; "
             "print(json.dumps([str(D), [load_descriptor(p).model for p in sorted(D.glob('*.toml'))]]))")
    env = {**os.environ, "PYTHONPATH": str(build)}
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, check=True, capture_output=True,
                         text=True).stdout
    where, models = json.loads(out)
    assert Path(where) == shipped
    assert len(models) == len(sources) and all(models)
