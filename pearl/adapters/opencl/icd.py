"""Which OpenCL drivers (ICDs) the loader sees: the system's, and those pip installed into this environment.

An OpenCL program finds its drivers through the ICD loader, which reads one `.icd` file per driver naming the
driver's shared library, from /etc/OpenCL/vendors (or the folder `OCL_ICD_VENDORS` names; pyopencl's wheel also
adds the PoCL it bundles). A driver installed by pip into a virtual environment, as Intel's OpenCL CPU runtime
(`intel-opencl-rt`, the `opencl-cpu` extra), puts its `.icd` files under `<prefix>/etc/OpenCL/vendors`, where no
loader looks, and they name a path of the machine the package was built on. So before pyopencl is first used,
`expose_environment_icds` writes a vendors folder of pearl's own holding the system's `.icd` files and this
environment's, each of the latter naming the library as installed here, and points `OCL_ICD_VENDORS` at it.
A user who set `OCL_ICD_VENDORS` keeps it untouched. An `.icd` file whose library exists nowhere is reported
(`broken_icds`), never fatal: the loader skips it and the other drivers still work.

This module imports no OpenCL library: it must run before the loader reads its environment.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

VENDORS_VARIABLE = "OCL_ICD_VENDORS"
SYSTEM_VENDORS = Path("/etc/OpenCL/vendors")
FOLDER_PREFIX = "opencl-vendors-"  # pearl's own vendors folders


@dataclass(frozen=True)
class IcdFile:
    """One driver's `.icd` file and the library it names."""

    path: Path
    library: str

    @property
    def name(self) -> str:
        return self.path.name


def read_icds(folder: Path) -> list[IcdFile]:
    """The `.icd` files of a vendors folder, sorted by name (the loader's order), each with its library line."""
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.icd")):
        try:
            library = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            library = ""
        found.append(IcdFile(path, library))
    return found


def library_exists(library: str) -> bool:
    """Whether the loader can open it: an absolute path that exists, or a bare name left to the dynamic linker
    (which pearl cannot check without loading it)."""
    return bool(library) and (not os.path.isabs(library) or Path(library).exists())


def environment_vendors(prefix: Path | None = None) -> Path:
    return Path(prefix or sys.prefix) / "etc" / "OpenCL" / "vendors"


def relocated(icd: IcdFile, prefix: Path | None = None) -> IcdFile | None:
    """An environment's `.icd` file naming its library where this environment installed it (`<prefix>/lib`),
    or None when the library is not there either."""
    here = Path(prefix or sys.prefix) / "lib" / Path(icd.library).name
    return IcdFile(icd.path, str(here)) if icd.library and here.exists() else None


def broken_icds(environ: dict[str, str] | os._Environ | None = None) -> list[tuple[IcdFile, str]]:
    """The `.icd` files the loader skips under this environment, each with why: those of the folder the user
    named, else the system's. (An environment's own `.icd` file whose library its package did not install, as
    intel-opencl-rt's FPGA emulator entry, names an optional part that is absent, not a broken driver.)"""
    env = os.environ if environ is None else environ
    named = env.get(VENDORS_VARIABLE, "")
    user_named = bool(named) and not Path(named).name.startswith(FOLDER_PREFIX)
    broken = []
    for icd in read_icds(Path(named) if user_named else SYSTEM_VENDORS):
        if not icd.library:
            broken.append((icd, "it names no library"))
        elif not library_exists(icd.library):
            broken.append((icd, f"it names {icd.library}, which does not exist"))
    return broken


def expose_environment_icds(environ: dict[str, str] | os._Environ | None = None, prefix: Path | None = None,
                            cache: Path | None = None) -> Path | None:
    """Point the loader at a vendors folder holding the system's drivers and this environment's (relocated), when
    this environment has pip-installed drivers and the user has not chosen a folder; the folder, or None when
    nothing was changed. Idempotent: the folder is named by its content, and a second call finds it set."""
    env = os.environ if environ is None else environ
    if env.get(VENDORS_VARIABLE):
        return None
    ours = [r for r in (relocated(i, prefix) for i in read_icds(environment_vendors(prefix))) if r is not None]
    if not ours:
        return None
    system = [i for i in read_icds(SYSTEM_VENDORS) if i.name not in {o.name for o in ours}]
    entries = sorted(system + ours, key=lambda i: i.name)
    digest = hashlib.sha256("\n".join(f"{i.name}={i.library}" for i in entries).encode()).hexdigest()[:16]
    for base in ([cache] if cache else [_cache_dir(), Path(tempfile.gettempdir()) / f"pearl-{os.getuid()}"]):
        folder = base / f"{FOLDER_PREFIX}{digest}"
        try:
            if not folder.is_dir():
                _write_folder(folder, entries)
        except OSError:  # a cache folder that cannot be written: the next one
            continue
        env[VENDORS_VARIABLE] = str(folder)
        return folder
    return None


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pearl"


def _write_folder(folder: Path, entries: list[IcdFile]) -> None:
    """Write the folder whole under a temporary name, then rename it: a process that reads it never sees it half
    written, and two processes racing to write it agree on its content."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".vendors-", dir=folder.parent))
    for icd in entries:
        (scratch / icd.name).write_text(icd.library + "\n", encoding="utf-8")
    try:
        scratch.rename(folder)
    except OSError:  # another process wrote it first: the same content
        for f in scratch.iterdir():
            f.unlink()
        scratch.rmdir()
