"""Swap devices around a native run: a workload's ``machine.swap``, made and enabled before the
runner starts and removed after it (:class:`SwapRun`, also on errors, Ctrl-C and a runner
killed by a signal), what of it the host cannot give (:func:`swap_unsupported`), and /proc/swaps
(:func:`parse_proc_swaps`).

Swap is the whole host's: a run with swap holds the host lock (:func:`mmsim.native_host.host_lock`)
and refuses to run while a swap device the workload does not declare is active (reclaim would
write to it, and swapon's automatic priorities would not be the workload's). Each device is a
file of its size on the ext4 directory of the workload's files (else /var/tmp), made with
fallocate, mode 0600, mkswap'ed: kind ``file`` is swapon'ed as it is, kind ``partition`` through
a loop device over it (``losetup --find --show``; /proc/swaps says "partition"); both inherit the
disk's rotational flag. A priority of 0 or more is ``swapon -p``'s; a negative one is the one
swapon gives an automatic device, -2 for the first, -3 for the next (Linux 6.18, no other swap
on), which the host must give. Files are named ``mmsim-swap-PID-N-I`` (PID this process's): those
of an mmsim that is gone are swapped off and removed by the next run.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmsim._mmsim import MmsimError
from mmsim.host_files import file_dirs, fs_type
from mmsim.native_memcg import pid_alive
from mmsim.runner_program import parse_size

__all__ = [
    "SwapDevice",
    "SwapRun",
    "auto_priorities",
    "parse_proc_swaps",
    "swap_specs",
    "swap_unsupported",
]

#: The tools a run with swap needs (util-linux), and a partition's loop device.
TOOLS = ("mkswap", "swapon", "swapoff")
LOOP_TOOL = "losetup"
_FILE = re.compile(r"mmsim-swap-(\d+)-\d+-\d+")
_runs = itertools.count()


def swap_specs(workload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The workload's swap devices (``machine.swap``), each {"size": bytes, "kind", "priority"}."""
    out = []
    for s in (workload.get("machine") or {}).get("swap") or []:
        out.append({"size": parse_size(s["size"]), "kind": s.get("kind", "file"), "priority": s.get("priority")})
    return out


def parse_proc_swaps(text: str) -> list[dict[str, Any]]:
    """/proc/swaps' rows: {"Filename", "Type", "Size", "Used", "Priority"} (sizes in kB).

    ```python
    >>> t = "Filename\\t\\t\\t\\tType\\t\\tSize\\t\\tUsed\\t\\tPriority\\n/x.swap   file\\t\\t262140\\t\\t0\\t\\t-2\\n"
    >>> parse_proc_swaps(t)
    [{'Filename': '/x.swap', 'Type': 'file', 'Size': 262140, 'Used': 0, 'Priority': -2}]

    ```
    """
    rows = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) >= 5:
            rows.append({"Filename": f[0], "Type": f[1], "Size": int(f[2]), "Used": int(f[3]), "Priority": int(f[4])})
    return rows


def active_swaps() -> list[dict[str, Any]]:
    """The host's active swap devices (/proc/swaps)."""
    try:
        return parse_proc_swaps(Path("/proc/swaps").read_text())
    except OSError:
        return []


def auto_priorities(specs: list[Mapping[str, Any]]) -> list[int]:
    """The priority each device gets when enabled in order with nothing else on: its own if 0 or
    more, else swapon's automatic one (-2, -3, ...: `least_priority`).

    ```python
    >>> auto_priorities([{"priority": None}, {"priority": 5}, {"priority": -3}])
    [-2, 5, -3]

    ```
    """
    out, auto = [], -1
    for s in specs:
        p = s.get("priority")
        if p is not None and p >= 0:
            out.append(p)
        else:
            auto -= 1
            out.append(auto)
    return out


def swap_unsupported(
    workload: Mapping[str, Any],
    pressure: bool,
    *,
    active: list[dict[str, Any]] | None = None,
    euid: int | None = None,
) -> str:
    """Why the host cannot give a workload its swap ("" if it can): for a workload under memory
    pressure (`pressure`: swap, cgroups, MADV_PAGEOUT, ...), a swap device it does not declare
    is active (`active`: /proc/swaps' rows); for one that declares swap, not root, a tool
    missing, a negative priority other than the one swapon gives, a device larger than the free
    space of its directory."""
    specs = swap_specs(workload)
    if not specs and not pressure:
        return ""
    if active is None:
        d = swap_dir()
        if d is not None:
            sweep_stale(d)  # an mmsim killed with its swap on (SIGKILL) left it
        active = active_swaps()
    if active:
        names = ", ".join(r["Filename"] for r in active)
        return (
            f"not checkable while the host has swap the workload does not declare ({names}): swap is the whole "
            "host's (reclaim would write there, and swapon's automatic priorities shift)"
        )
    if not specs:
        return ""
    if (os.geteuid() if euid is None else euid) != 0:
        return "the workload's machine.swap needs root (mkswap, swapon)"
    need = TOOLS + ((LOOP_TOOL,) if any(s["kind"] == "partition" for s in specs) else ())
    missing = [t for t in need if shutil.which(t) is None]
    if missing:
        return f"the workload's machine.swap needs {', '.join(missing)} (util-linux), which this host lacks"
    for i, (s, p) in enumerate(zip(specs, auto_priorities(specs), strict=True)):
        if s["priority"] is not None and s["priority"] < 0 and s["priority"] != p:
            return (
                f"not checkable: machine.swap[{i}]'s priority {s['priority']} is not the one swapon gives it "
                f"({p}: automatic priorities go -2, -3, ... in order)"
            )
    d = swap_dir()
    if d is None:
        return "no ext4 directory for the workload's swap files (give one with --dir ext4=PATH)"
    free = shutil.disk_usage(d).free
    total = sum(s["size"] for s in specs)
    if total + (256 << 20) > free:
        return f"the workload's swap ({total >> 20} MiB) does not fit in {d} ({free >> 20} MiB free)"
    return ""


def swap_dir() -> Path | None:
    """Where swap files go: the ext4 directory of the workload's files, else /var/tmp on ext4."""
    for d in (file_dirs().get("ext4"), "/var/tmp"):
        if d and Path(d).is_dir() and fs_type(d) == "ext4":
            return Path(d)
    return None


@dataclass
class SwapDevice:
    """One of the workload's swap devices on the host: its `file`, and what swapon enabled
    (`device`: the file, or the loop device over it)."""

    index: int
    kind: str
    size: int
    priority: int | None
    file: Path
    device: str = ""
    on: bool = False


class SwapRun:
    """A workload's swap devices for one native run: made and enabled in order on entering,
    each swapped off, its loop device detached and its file removed on leaving (also after
    errors and Ctrl-C). :meth:`rows` are /proc/swaps' rows of the devices, in the workload's
    order. Refuses (MmsimError) if another swap device is active."""

    def __init__(self, specs: list[Mapping[str, Any]], directory: Path | None = None) -> None:
        self.specs = list(specs)
        self.dir = directory or swap_dir()
        if self.dir is None:
            raise MmsimError("validate: no ext4 directory for the workload's swap files")
        run = next(_runs)
        self.devices = [
            SwapDevice(i, s["kind"], s["size"], s["priority"], self.dir / f"mmsim-swap-{os.getpid()}-{run}-{i}")
            for i, s in enumerate(self.specs)
        ]

    def __enter__(self) -> SwapRun:
        sweep_stale(self.dir)
        if self.devices and active_swaps():
            names = ", ".join(r["Filename"] for r in active_swaps())
            raise MmsimError(f"validate: another swap device is active ({names})")
        try:
            for d in self.devices:
                self._enable(d)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _enable(self, d: SwapDevice) -> None:
        fd = os.open(d.file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.posix_fallocate(fd, 0, d.size)
        finally:
            os.close(fd)
        d.device = str(d.file)
        if d.kind == "partition":
            d.device = _run(LOOP_TOOL, "--find", "--show", str(d.file)).strip()
        _run("mkswap", "-q", d.device)
        _run("swapon", *(("-p", str(d.priority)) if d.priority is not None and d.priority >= 0 else ()), d.device)
        d.on = True

    def rows(self) -> list[dict[str, Any]]:
        """/proc/swaps' rows of the devices, in the workload's order (None for one not on)."""
        by_name = {r["Filename"]: r for r in active_swaps()}
        return [by_name.get(d.device) for d in self.devices]

    def __exit__(self, *exc: Any) -> None:
        for d in reversed(self.devices):
            _disable(d.file, d.device if d.on else None, d.kind == "partition")


def _run(*argv: str) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise MmsimError(f"validate: {argv[0]}: {e}") from None
    if p.returncode:
        raise MmsimError(f"validate: {' '.join(argv)}: {(p.stderr or p.stdout).strip()[:200]}")
    return p.stdout


def _loops_of(file: Path) -> list[str]:
    """The loop devices over a file (``losetup -j``)."""
    if shutil.which(LOOP_TOOL) is None:
        return []
    p = subprocess.run([LOOP_TOOL, "-j", str(file)], capture_output=True, text=True, check=False)
    return [line.split(":")[0] for line in p.stdout.splitlines() if line.strip()]


def _disable(file: Path, device: str | None, loop: bool) -> None:
    """swapoff (of `device`, else of whatever over `file` is on), detach its loop devices,
    remove the file: every step tried, whatever the others did."""
    on = {r["Filename"] for r in active_swaps()}
    devices = {device} if device else set()
    loops = _loops_of(file) if loop or not device else []
    devices |= {str(file), *loops}
    for dev in sorted(devices & on):
        subprocess.run(["swapoff", dev], capture_output=True, check=False, timeout=3600)
    for dev in loops:
        subprocess.run([LOOP_TOOL, "-d", dev], capture_output=True, check=False)
    with contextlib.suppress(FileNotFoundError):
        file.unlink()


def sweep_stale(directory: Path) -> None:
    """Swap off and remove the swap files (``mmsim-swap-PID-...``) of an mmsim that is gone
    (under the host lock: no other validate is enabling its own meanwhile)."""
    from mmsim.native_host import host_lock

    try:
        stale = [f for f in directory.iterdir() if (m := _FILE.fullmatch(f.name)) and not pid_alive(int(m.group(1)))]
    except OSError:
        return
    if not stale:
        return
    with host_lock():
        for f in stale:
            _disable(f, None, loop=True)
