"""Build hook (the configuration is pyproject.toml): the device descriptors live in top-level devices/, where
users name them on the command line (`--what-if devices/nvidia-a100-sxm4-80gb.toml`), and a wheel carries a
copy of them as pearl/_devices/ (and networks/ as pearl/_networks/), where an installed (non-editable) pearl looks for them."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithDescriptors(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads devices/ in the checkout
        for folder in ("devices", "networks"):  # device and network descriptors
            source = Path(__file__).resolve().parent / folder
            tomls = sorted(source.glob("*.toml"))
            if not tomls:  # e.g. an sdist made without MANIFEST.in: ship no wheel that silently lacks them
                raise SystemExit(f"error: no descriptors in {source}; build from a full checkout")
            target = Path(self.build_lib) / "pearl" / f"_{folder}"
            self.mkpath(str(target))
            for toml in tomls:
                self.copy_file(str(toml), str(target / toml.name))


setup(cmdclass={"build_py": BuildPyWithDescriptors})
