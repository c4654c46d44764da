"""Recording real programs and reading their traces (docs/trace-format.md).

:func:`record` runs a command under the recorder (``mmsimrec``, a Valgrind tool built on first
use by :mod:`mmsim.recorder_build`) and writes its trace; :func:`info` gives a trace's totals
(``mmsim trace info``); :func:`records` iterates its records for analysis::

    from mmsim import trace
    summary = trace.record(["python3", "-c", "x = bytearray(1 << 26)"], "py.trace")
    trace.info("py.trace")["footprint_4k"]
    loads = sum(1 for _, kind, _ in trace.records("py.trace") if kind == "load")
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mmsim import _mmsim
from mmsim._mmsim import MmsimError
from mmsim.recorder_build import TOOL, valgrind, valgrind_lib

__all__ = ["RECORDER_VERSION", "header", "info", "record", "records"]

#: The recorder's version (the tool's VG_(details_version)).
RECORDER_VERSION = "1"
#: Bytes read from the recorder's pipe at a time, and the pipe's size (fs/pipe-max-size's
#: default).
READ = 1 << 20
PIPE_SIZE = 1 << 20


def _valgrind_version(vg: str) -> str:
    try:
        return subprocess.run([vg, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "valgrind"


def record(
    command: Sequence[str],
    out: str | os.PathLike[str],
    *,
    quiet: bool = True,
    level: int = 3,
    repeat: bool = True,
    stdout: int | None = None,
) -> dict[str, Any]:
    """Run ``command`` under the recorder, writing its trace to ``out``; returns the trace's
    summary (``exit_status``: the command's exit code, or -N when signal N ended it;
    ``duration_s``; ``trace_bytes``; ``frames``; ``raw_bytes``). A command that fails still
    leaves its trace. ``repeat=False`` writes every iteration of a repeating block instead of
    repeat records (the same records once read). ``stdout``: where the command's output goes (a
    file descriptor; this process's stdout by default). Raises :class:`MmsimError` when the
    recorder cannot run (no Valgrind, no such command)."""
    if not command:
        raise MmsimError("record: no command given (mmsim record -o FILE -- CMD [ARGS...])")
    exe = shutil.which(command[0]) if "/" not in command[0] else command[0]
    if exe is None or not os.path.isfile(exe):
        raise MmsimError(f"record: {command[0]}: command not found")
    vg = valgrind()
    lib = valgrind_lib()
    header = {
        "arch": platform.machine(),
        "page_size": os.sysconf("SC_PAGE_SIZE"),
        "command": list(command),
        "kernel_release": platform.release(),
        "recorder": f"{TOOL} {RECORDER_VERSION} ({_valgrind_version(vg)})",
        "cwd": os.getcwd(),
        "host": platform.node(),
        "started": time.time(),
    }
    writer = _mmsim.TraceWriter(os.fspath(out), json.dumps(header), level)
    with tempfile.TemporaryDirectory(prefix="mmsim-record-") as tmp:
        fifo = Path(tmp) / "frames"
        # Writable by a recorded process that changed its user (runuser -u postgres -- ...),
        # which reopens it at its exec: the directory can be searched but not listed, so the
        # fifo's random path is known only to the recorder and its processes.
        os.chmod(tmp, 0o711)
        os.mkfifo(fifo, 0o600)
        os.chmod(fifo, 0o622)
        # Non-blocking, so that opening does not wait for the recorder; reads then see EOF
        # until it connects, and again once every recorded process has closed it.
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        # A larger pipe: fewer switches between the recorded program and this reader.
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        argv = [
            vg,
            "--tool=" + TOOL,
            f"--out={fifo}",
            "--trace-children=yes",
            "--vgdb=no",
            f"--repeat={'yes' if repeat else 'no'}",
            *(["-q"] if quiet else []),
            *command,
        ]
        env = dict(os.environ, VALGRIND_LIB=str(lib))
        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, env=env, stdout=stdout)
        except OSError as e:
            os.close(fd)
            raise MmsimError(f"record: cannot run {vg}: {e.strerror}") from None
        connected = False
        interrupted = False
        try:
            while True:
                try:
                    ready, _, _ = select.select([fd], [], [], 0.2)
                    if not ready:
                        if proc.poll() is not None and not connected:
                            break
                        continue
                    data = os.read(fd, READ)
                except KeyboardInterrupt:
                    # The program got the SIGINT too: keep what it writes until it is gone.
                    interrupted = True
                    continue
                except BlockingIOError:
                    continue
                if data:
                    connected = True
                    writer.feed(data)
                elif proc.poll() is not None:
                    # No writer left and the command is done (its descendants too, unless
                    # one outlived it without the recorder: then it is not recorded).
                    break
                else:
                    # No writer yet (the recorder is starting), or none for a moment.
                    time.sleep(0.01)
        finally:
            os.close(fd)
            rc = proc.wait()
    summary = {"exit_status": rc, "duration_s": round(time.monotonic() - start, 6)}
    if interrupted:
        summary["interrupted"] = True
    if not connected:
        summary["recorder_failed"] = True
    return json.loads(writer.finish(json.dumps(summary)))


def info(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A trace's totals: ``instructions``, ``loads``, ``stores``, ``tasks``, ``processes``,
    ``syscalls`` (name -> count), ``footprint_4k``, ``footprint_2m``, ``runs``, and its
    ``header`` and ``summary``."""
    return json.loads(_mmsim.trace_stats(os.fspath(path)))


def header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A trace's header."""
    return json.loads(_mmsim.TraceRecords(os.fspath(path)).header())


#: The first bytes of an mmsim trace.
MAGIC = b"MMSIMTRC"


def is_champsim(path: str | os.PathLike[str]) -> bool:
    """Is the file a ChampSim trace rather than an mmsim one (as the engine decides:
    ``mmsim_trace::champsim::is_champsim``)? Compressed (xz, gzip, bzip2), named so
    (``champsim``, ``cloudsuite``), or raw and a whole number of 64-byte records (96 for
    CloudSuite's) long. Anything else is read as an mmsim trace, whose reader names what is
    wrong; a file that cannot be opened is an error."""
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            head = f.read(len(MAGIC))
        size = os.path.getsize(p)
    except OSError as e:
        raise MmsimError(f"{p}: cannot open: {e.strerror}") from None
    if not head or head == MAGIC:
        return False
    if head.startswith((b"\xfd7zXZ\x00", b"\x1f\x8b", b"BZh")):
        return True
    name = os.path.basename(p).lower()
    if "champsim" in name or "cloudsuite" in name:
        return True
    return size % (96 if "cloudsuite" in name else 64) == 0


def records(path: str | os.PathLike[str]) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """Every record of a trace, in order, as ``(pid, kind, fields)``: kind ``thread``
    (tid), ``run`` (pc, bytes, instrs), ``load``/``store`` (addr, size), ``syscall`` (nr, a0..a5,
    result, pos, size, path), ``map`` (start, len, prot, kind, offset, path), ``proc`` (how,
    parent), ``exit`` (status)."""
    return iter(_mmsim.TraceRecords(os.fspath(path)))


def replay_workload(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    cold: bool = False,
    place: str = "kernel",
    profile: str | None = None,
    hugepage_text: bool = False,
    memory: str | None = None,
    cpus: int | None = None,
    memory_max: str | None = None,
    swap: str | None = None,
) -> dict[str, Any]:
    """The workload ``mmsim run --trace`` runs: a ``replay`` op of the trace (an mmsim trace's
    header is read first, so a file that is no trace is an error before the run). Several
    traces run as several processes, each on a CPU of its own (as ChampSim runs one trace per
    core): the machine has as many CPUs unless ``cpus`` says otherwise. ``place``: where the
    mappings the program did not fix go, ``kernel`` (where the simulated kernel puts them, as
    Linux would have) or ``recorded`` (where Valgrind put them). ``hugepage_text``: each private
    executable file mapping is madvised MADV_HUGEPAGE as it is mapped. ``memory_max``: the
    program runs in a memory cgroup ``trace`` with that memory.max; ``swap``: a swap partition
    of that size (:data:`DEFAULT_SWAP` under ``memory_max``)."""
    paths = [Path(path)] if isinstance(path, (str, os.PathLike)) else [Path(x) for x in path]
    if not paths:
        raise MmsimError("replay: no trace")
    names = []
    ops = []
    for p in paths:
        if is_champsim(p):
            names.append(p.name)
        else:
            h = header(p)
            names.append(os.path.basename(h["command"][0]) if h.get("command") else p.name)
        op = {"op": "replay", "trace": os.fspath(p.resolve()), "cold": cold, "place": place}
        if hugepage_text:
            op["hugepage_text"] = True
        ops.append(op)
    machine: dict[str, Any] = {}
    if cpus is None and len(paths) > 1:
        cpus = len(paths)
    for k, v in (("profile", profile), ("memory", memory), ("cpus", cpus)):
        if v is not None:
            machine[k] = v
    program: list[dict[str, Any]] = [
        {"op": "fork", "cpu": i % (cpus or 1), "program": [op]} for i, op in enumerate(ops[1:], start=1)
    ]
    program.append(ops[0])
    if len(ops) > 1:
        program.append({"op": "wait"})
    if memory_max is not None and swap is None:
        swap = DEFAULT_SWAP
    if swap is not None:
        machine["swap"] = [{"size": swap, "kind": "partition"}]
    w: dict[str, Any] = {"name": f"replay of {', '.join(names)}", "machine": machine, "program": program}
    if memory_max is not None:
        w["cgroups"] = {"trace": {"memory.max": memory_max}}
        w["cgroup"] = "trace"
    return w


#: The swap partition a replay under ``--memory-max`` gets unless ``--swap`` says otherwise.
DEFAULT_SWAP = "4G"


def dump(path: str | os.PathLike[str], limit: int | None = None) -> int:
    """Print a trace's records as text (``mmsim trace dump``); returns how many."""
    sys.stdout.flush()
    return int(_mmsim.trace_dump(os.fspath(path), limit))


def format_info(s: dict[str, Any]) -> str:
    """``mmsim trace info``'s text."""
    if s.get("format", "").startswith("champsim"):
        lines = [
            f"format:        {s['format']} ({s['compression']}; no system calls)",
            f"instructions:  {s['instructions']:>16,}   ({s['branches']:,} branches, {s['taken']:,} taken)",
            f"loads:         {s['loads']:>16,}",
            f"stores:        {s['stores']:>16,}",
            f"footprint:     {s['footprint_4k']:>16,} 4 KiB pages   {s['footprint_2m']:,} 2 MiB pages",
        ]
        if s.get("asids"):
            lines.append(f"address spaces:{s['asids']:>16,}   (CloudSuite ASIDs)")
        return "\n".join(lines)
    h, sm = s["header"], s["summary"]
    dur = sm.get("duration_s")
    lines = [
        f"command:       {' '.join(h.get('command', []))}",
        f"recorded by:   {h.get('recorder', '?')} on Linux {h.get('kernel_release', '?')}",
        f"exit status:   {sm.get('exit_status', '?')}"
        + (f", {dur:.3f} s recording" if isinstance(dur, (int, float)) else ""),
        f"instructions:  {s['instructions']:>16,}   ({s['runs']:,} runs)",
        f"loads:         {s['loads']:>16,}",
        f"stores:        {s['stores']:>16,}",
        f"footprint:     {s['footprint_4k']:>16,} 4 KiB pages   {s['footprint_2m']:,} 2 MiB pages",
        f"tasks:         {s['tasks']:>16,}   ({s['processes']:,} processes)",
        f"trace:         {sm.get('raw_bytes', 0):>16,} bytes of records, {sm.get('frames', 0):,} frames",
        "system calls:",
    ]
    for name, n in sorted(s["syscalls"].items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"  {n:>12,}  {name}")
    return "\n".join(lines)
