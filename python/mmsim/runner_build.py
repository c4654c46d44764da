"""The native runner (``native/runner.c``), compiled on first use.

The runner's C source ships inside the package (``mmsim/runner.c`` and the headers it
includes, ``runner_host.h``, ``runner_parse.h``, ``runner_report.h``, ``runner_memcg.h``,
``runner_files.h`` and ``runner_ops.h``; in a development checkout symlinks to ``native/``,
the one source of truth). :func:`runner_path` compiles it with the system C compiler (``$CC``,
else ``cc``, else ``gcc``) into the user's cache directory (``$MMSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/mmsim``, else
``~/.cache/mmsim``) as ``runner-HASH``, HASH being of the source files, the flags and the machine:
a changed runner.c is rebuilt, an unchanged one is compiled once. The compiler writes a
temporary file in the cache directory that is then renamed into place, so two processes
building at once both end up with a complete runner.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from mmsim._mmsim import MmsimError

__all__ = ["CFLAGS", "cache_dir", "compiler", "first_error", "runner_path", "runner_source"]

#: Where the source is looked for: in the installed package, then in the repository.
SOURCES = (
    Path(__file__).resolve().parent / "runner.c",
    Path(__file__).resolve().parents[2] / "native" / "runner.c",
)
#: The files of the source (runner.c includes the others), all beside it.
FILES = (
    "runner.c",
    "runner_host.h",
    "runner_parse.h",
    "runner_report.h",
    "runner_memcg.h",
    "runner_files.h",
    "runner_ops.h",
)
CFLAGS = ("-O2", "-Wall", "-Wextra")
HINT = "install a C compiler (e.g. `apt-get install gcc`) or set CC"


def _fail(why: str) -> MmsimError:
    return MmsimError(f"validate: cannot build the native runner: {why}")


def runner_source() -> Path:
    """The runner's C source: the package's copy, else the repository's native/runner.c."""
    for p in SOURCES:
        if p.is_file():
            return p
    raise _fail(f"its source is missing (looked for {', '.join(map(str, SOURCES))})")


def cache_dir() -> Path:
    """``$MMSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/mmsim``, else ``~/.cache/mmsim``."""
    if os.environ.get("MMSIM_CACHE_DIR"):
        return Path(os.environ["MMSIM_CACHE_DIR"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "mmsim"
    return Path.home() / ".cache" / "mmsim"


def compiler(fail: Callable[[str], MmsimError] = _fail) -> list[str]:
    """The C compiler's argv: ``$CC`` (split as a shell would), else ``cc``, else ``gcc``;
    ``fail`` makes the error when there is none."""
    cc = os.environ.get("CC", "").strip()
    if cc:
        argv = shlex.split(cc)
        if shutil.which(argv[0]) is None:
            raise fail(f"the C compiler CC={cc!r} is not found; {HINT}")
        return argv
    for name in ("cc", "gcc"):
        if shutil.which(name):
            return [name]
    raise fail(f"no C compiler found (tried $CC, cc, gcc); {HINT}")


def first_error(output: str, built: Path, source: Path, default: str) -> str:
    """The compiler's first line naming an error (else its first line, else ``default``),
    with the copy ``built`` it compiled named as its ``source``."""
    lines = [ln.replace(str(built), str(source)) for ln in output.splitlines() if ln.strip()]
    return next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else default).strip()


def runner_path() -> Path:
    """The runner's executable, compiled from its source into :func:`cache_dir` unless a
    runner of the same source is already there."""
    src = runner_source()
    try:
        files = {name: (src.parent / name).read_bytes() for name in FILES}
    except OSError as e:
        raise _fail(f"its source is incomplete ({e.filename}: {e.strerror})") from None
    h = hashlib.sha256()
    for name in FILES:
        h.update(files[name])
    h.update(" ".join((*CFLAGS, platform.machine())).encode())
    d = cache_dir()
    exe = d / f"runner-{h.hexdigest()[:16]}"
    if exe.is_file() and os.access(exe, os.X_OK):
        return exe
    cc = compiler()
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _fail(f"cannot create the cache directory {d}: {e.strerror} (set MMSIM_CACHE_DIR)") from None
    # Compile the bytes that were hashed (a copy beside the output), not the files, which may
    # change meanwhile; into a temporary name, renamed into place when complete.
    with tempfile.TemporaryDirectory(dir=d, prefix=".build-") as tmp:
        for name, code in files.items():
            (Path(tmp) / name).write_bytes(code)
        c = Path(tmp) / "runner.c"
        out = Path(tmp) / "runner"
        try:
            p = subprocess.run(
                [*cc, *CFLAGS, "-o", str(out), str(c)], capture_output=True, text=True, timeout=300, check=False
            )
        except OSError as e:
            raise _fail(f"{shlex.join(cc)}: {e.strerror}; {HINT}") from None
        except subprocess.TimeoutExpired:
            raise _fail(f"{shlex.join(cc)} took more than 300 s") from None
        if p.returncode != 0 or not out.is_file():
            why = f"exit {p.returncode}" if p.returncode else "it wrote no executable"
            raise _fail(f"{shlex.join(cc)} failed: {first_error(p.stderr + p.stdout, c, src, why)}; {HINT}")
        out.chmod(0o755)
        try:
            os.replace(out, exe)
        except OSError as e:
            raise _fail(f"cannot write {exe}: {e.strerror}") from None
    return exe
