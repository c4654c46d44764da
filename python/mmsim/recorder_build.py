"""The recorder (``native/mmsim_record.c``, a Valgrind tool), built on first use.

Valgrind runs a tool named ``--tool=NAME`` from ``$VALGRIND_LIB/NAME-amd64-linux``. The tool
is compiled against the installed Valgrind's tool headers (``pub_tool_*.h``) and linked,
static and without libc, with its ``libcoregrind`` and ``libvex``, as Valgrind's own tools
are (its ``Makefile.tool.am``). :func:`valgrind_lib` builds it into the user's cache
(:func:`mmsim.runner_build.cache_dir`) as ``recorder-HASH/mmsimrec-amd64-linux``, beside
links to the files of Valgrind's own library directory (its preload objects, its
suppressions), and returns that directory for ``VALGRIND_LIB``. HASH is of the source, the
flags and the Valgrind found, so a new Valgrind or a changed tool is rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from mmsim._mmsim import MmsimError
from mmsim.runner_build import cache_dir, compiler, first_error

__all__ = ["TOOL", "recorder_source", "valgrind", "valgrind_lib"]

#: The tool's name (``valgrind --tool=mmsimrec``).
TOOL = "mmsimrec"
SOURCES = (
    Path(__file__).resolve().parent / "mmsim_record.c",
    Path(__file__).resolve().parents[2] / "native" / "mmsim_record.c",
)
#: As Valgrind compiles its tools for amd64-linux (Makefile.all.am: AM_CFLAGS_AMD64_LINUX).
CFLAGS = (
    "-O2",
    "-g",
    "-Wall",
    "-fno-strict-aliasing",
    "-fno-builtin",
    "-fno-stack-protector",
    "-fomit-frame-pointer",
    "-fno-pie",
    "-DVGA_amd64=1",
    "-DVGO_linux=1",
    "-DVGP_amd64_linux=1",
    "-DVGPV_amd64_linux_vanilla=1",
)
#: Makefile.tool.am's TOOL_LDFLAGS_AMD64_LINUX: static, no libc, loaded at valt_load_address.
LDFLAGS = (
    "-static",
    "-nodefaultlibs",
    "-nostartfiles",
    "-u",
    "_start",
    "-Wl,--build-id=none",
    "-Wl,-Ttext-segment=0x58000000",
    "-no-pie",
)
HINT = "install Valgrind with its tool headers (Debian/Ubuntu: `apt-get install valgrind`)"


def _fail(why: str) -> MmsimError:
    return MmsimError(f"record: {why}")


def recorder_source() -> Path:
    for p in SOURCES:
        if p.is_file():
            return p
    raise _fail(f"the recorder's source is missing (looked for {', '.join(map(str, SOURCES))})")


def valgrind() -> str:
    """The ``valgrind`` launcher on PATH."""
    v = shutil.which("valgrind")
    if v is None:
        raise _fail(f"valgrind is not installed; {HINT}")
    return v


def _include_dir() -> Path:
    """Valgrind's tool headers (``pub_tool_basics.h``)."""
    if platform.machine() != "x86_64":
        raise _fail(f"the recorder is built for x86_64 (this machine is {platform.machine()})")
    incs = [Path("/usr/include/valgrind"), Path("/usr/local/include/valgrind")]
    inc = next((p for p in incs if (p / "pub_tool_basics.h").is_file()), None)
    if inc is None:
        raise _fail(f"Valgrind's tool headers (pub_tool_basics.h) are not installed; {HINT}")
    return inc


def _find(name: str, roots: tuple[str, ...]) -> Path | None:
    for r in roots:
        p = Path(r) / name
        if p.is_file():
            return p
    return None


LIB_ROOTS = (
    "/usr/lib/x86_64-linux-gnu/valgrind",
    "/usr/libexec/valgrind",
    "/usr/lib/valgrind",
    "/usr/local/lib/valgrind",
    "/usr/local/libexec/valgrind",
)


def valgrind_lib() -> Path:
    """A directory for ``VALGRIND_LIB`` holding the recorder tool, built if needed."""
    vg = valgrind()
    inc = _include_dir()
    core = _find("libcoregrind-amd64-linux.a", LIB_ROOTS)
    vex = _find("libvex-amd64-linux.a", LIB_ROOTS)
    if core is None or vex is None:
        raise _fail(f"Valgrind's libcoregrind-amd64-linux.a and libvex-amd64-linux.a are not installed; {HINT}")
    gcc_sup = _find("libgcc-sup-amd64-linux.a", LIB_ROOTS)
    preload = _find("vgpreload_core-amd64-linux.so", LIB_ROOTS)
    if preload is None:
        raise _fail(f"Valgrind's vgpreload_core-amd64-linux.so is not found; {HINT}")
    src = recorder_source()
    code = src.read_bytes()
    h = hashlib.sha256(code)
    h.update(" ".join((*CFLAGS, *LDFLAGS, str(core), str(core.stat().st_mtime_ns), vg)).encode())
    d = cache_dir() / f"recorder-{h.hexdigest()[:16]}"
    tool = d / f"{TOOL}-amd64-linux"
    if tool.is_file() and os.access(tool, os.X_OK):
        return d
    cc = compiler(_fail)
    try:
        cache_dir().mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _fail(f"cannot create the cache directory {cache_dir()}: {e.strerror} (set MMSIM_CACHE_DIR)") from None
    # Built in a temporary directory renamed into place when complete (two builds at once
    # both end with a whole tool: the loser's directory is removed).
    t = Path(tempfile.mkdtemp(dir=cache_dir(), prefix=".recorder-"))
    try:
        c = t / "mmsim_record.c"
        c.write_bytes(code)
        obj, exe = t / "mmsim_record.o", t / f"{TOOL}-amd64-linux"
        libs = [str(core), str(vex), *([str(gcc_sup)] if gcc_sup else []), "-lgcc"]
        for argv in (
            [*cc, *CFLAGS, f"-I{inc}", "-c", str(c), "-o", str(obj)],
            [*cc, "-o", str(exe), str(obj), *LDFLAGS, *libs],
        ):
            try:
                p = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
            except OSError as e:
                raise _fail(f"{shlex.join(cc)}: {e.strerror}") from None
            if p.returncode != 0:
                why = f"exit {p.returncode}"
                raise _fail(f"building the recorder failed: {first_error(p.stderr + p.stdout, c, src, why)}")
        c.unlink()
        obj.unlink()
        # Readable by every user (mkdtemp made it the builder's only): a recorded program
        # that changes its user (runuser -u postgres -- postgres ...) execs the tool as that user.
        t.chmod(0o755)
        # Links to Valgrind's library directory (its preloads, suppressions, other tools).
        for f in preload.parent.iterdir():
            if not (t / f.name).exists():
                (t / f.name).symlink_to(f)
        try:
            os.replace(t, d)
        except OSError:
            if not tool.is_file():
                raise _fail(f"cannot write {d}") from None
    finally:
        if t.exists():
            shutil.rmtree(t, ignore_errors=True)
    return d
