"""Memory cgroups around a native run: where the host's memory controller is
(:func:`memcg_host`: cgroup v1 or v2, from /proc/mounts and /proc/self/cgroup), what of a
workload's cgroups that hierarchy can express (:func:`memcg_unsupported`: a reason naming what
it cannot, "" if it can), the files that set a cgroup's limits on it (:func:`v1_limit_writes`,
:func:`v2_limit_writes`), and the cgroups themselves, made before the runner starts and removed
after it (:class:`CgroupRun`, also on errors, Ctrl-C and a runner killed by a signal).

A workload names cgroup v2's files (``memory.max``, ``memory.swap.max``, ...). On cgroup v1 (this
machine's: the controller is mounted at /sys/fs/cgroup/memory, and cgroup2 at
/sys/fs/cgroup/unified has no memory controller) ``memory.max`` is ``memory.limit_in_bytes``
and ``memory.swap.max`` the difference of ``memory.memsw.limit_in_bytes`` and it (memsw =
max + swap.max); memory.high, memory.low, memory.min, memory.swap.high, memory.oom.group,
memory.reclaim, a reset of memory.peak and a swap limit without a memory limit have no v1 form:
a workload that uses one is not checkable on such a host. mmsim is then run with
``cgroup/memory=v1``, so that it reports the v1 files the kernel has.

The cgroups of a run are children of a directory of its own, ``ROOT/mmsim-PID-N`` (ROOT the
hierarchy's mount point, PID this process's), so the workload's ``box`` is
``/sys/fs/cgroup/memory/mmsim-PID-N/box`` and ``box/a`` below it. The runner starts in its own
cgroup (this process's, HOME) and moves each task into its cgroup for the workload's ops only
(native/runner_memcg.h). Directories a killed mmsim left (its PID gone) are removed by the next
run.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import signal
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmsim._mmsim import MmsimError
from mmsim.runner_program import all_ops, parse_size

__all__ = [
    "CgroupRun",
    "MemcgHost",
    "cgroup_order",
    "memcg_host",
    "memcg_unsupported",
    "pid_alive",
    "uses_memcg",
    "uses_pressure",
    "v1_limit_writes",
    "v2_limit_writes",
]

#: A v1 limit file's "unlimited" (PAGE_COUNTER_MAX pages, in bytes), and what is written for it.
V1_UNLIMITED = 9223372036854771712

#: The files a cgroup's declaration sets, cgroup v2's names, with the value a new cgroup has.
DEFAULTS = {
    "memory.max": "max",
    "memory.high": "max",
    "memory.low": "0",
    "memory.min": "0",
    "memory.swap.max": "max",
    "memory.swap.high": "max",
    "memory.oom.group": "0",
}

#: What cgroup v1 has no form of, by the v2 file a workload sets or writes.
V2_ONLY = ("memory.high", "memory.low", "memory.min", "memory.swap.high", "memory.oom.group")

#: Why a case is not checkable on a host whose memory controller is on v1 (what follows names
#: the feature).
NEEDS_V2 = "not checkable on this host: needs the memory controller on cgroup v2"


@dataclass(frozen=True)
class MemcgHost:
    """Where the host's memory controller is: `version` "v1" or "v2" (None: no memory
    controller), the hierarchy's mount point `root`, and this process's memory cgroup `home`
    (a directory under `root`)."""

    version: str | None
    root: Path | None = None
    home: Path | None = None

    def as_dict(self) -> dict[str, str | None]:
        """As host_settings() keeps it (JSON): {"version", "root", "home"}."""
        return {"version": self.version, "root": _str(self.root), "home": _str(self.home)}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> MemcgHost:
        return MemcgHost(d.get("version"), _path(d.get("root")), _path(d.get("home")))


def _str(p: Path | None) -> str | None:
    return None if p is None else str(p)


def _path(s: Any) -> Path | None:
    return None if s is None else Path(s)


def memcg_host(mounts: str | None = None, self_cgroup: str | None = None) -> MemcgHost:
    """The host's memory controller, from /proc/mounts (`mounts`) and /proc/self/cgroup
    (`self_cgroup`): a cgroup (v1) mount with the "memory" option, else a cgroup2 mount whose
    cgroup.controllers lists memory.

    ```python
    >>> m = "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\\n"
    >>> memcg_host(m, "4:memory:/a/b\\n0::/\\n")
    MemcgHost(version='v1', root=PosixPath('/sys/fs/cgroup/memory'), home=PosixPath('/sys/fs/cgroup/memory/a/b'))

    ```
    """
    if mounts is None:
        mounts = _read("/proc/mounts")
    if self_cgroup is None:
        self_cgroup = _read("/proc/self/cgroup")
    paths = {}
    for line in self_cgroup.splitlines():
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        paths["v2" if hid == "0" and controllers == "" else controllers] = path
    v2_root = None
    for line in mounts.splitlines():
        f = line.split()
        if len(f) < 4:
            continue
        if f[2] == "cgroup" and "memory" in f[3].split(","):
            own = next((p for c, p in paths.items() if "memory" in c.split(",")), None)
            root = Path(f[1])
            return MemcgHost("v1", root, root / own.lstrip("/") if own is not None else None)
        if f[2] == "cgroup2" and v2_root is None and "memory" in _read(Path(f[1]) / "cgroup.controllers").split():
            v2_root = Path(f[1])
    if v2_root is not None:
        own = paths.get("v2")
        return MemcgHost("v2", v2_root, v2_root / own.lstrip("/") if own is not None else None)
    return MemcgHost(None)


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def uses_memcg(workload: Mapping[str, Any]) -> bool:
    """Does a workload use memory cgroups (declares some, or an op acts on one)?"""
    if workload.get("cgroups") or workload.get("cgroup"):
        return True
    return any(
        op.get("op") in ("memory_reclaim", "cgroup_write") or (op.get("op") == "fork" and op.get("cgroup"))
        for op in all_ops(workload.get("program", []))
    )


#: madvise advice that reclaims (MADV_COLD deactivates, MADV_PAGEOUT reclaims: swaps out).
PRESSURE_ADVICE = ("cold", "pageout")


def uses_pressure(workload: Mapping[str, Any]) -> bool:
    """Does a workload reclaim or swap: swap devices, memory cgroups (:func:`uses_memcg`), or
    MADV_COLD / MADV_PAGEOUT? Such a workload's counts vary a little on the host from run to
    run (validate runs it several times, :func:`~mmsim.native_compare.merge_runs`), and it
    compares reclaim's counters too."""
    if (workload.get("machine") or {}).get("swap") or uses_memcg(workload):
        return True
    return any(
        op.get("op") == "madvise" and op.get("advice") in PRESSURE_ADVICE for op in all_ops(workload.get("program", []))
    )


def _limit(v: Any) -> int | None:
    """A limit file's value in bytes, None for "max"."""
    if isinstance(v, str) and v.strip() == "max":
        return None
    if isinstance(v, bool):
        return int(v)
    return parse_size(v)


def _written(workload: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(cgroup, file, value) of every cgroup_write op, in program order."""
    for op in all_ops(workload.get("program", [])):
        if op.get("op") == "cgroup_write":
            yield str(op.get("cgroup")), str(op.get("file")), op.get("value")


def memcg_unsupported(workload: Mapping[str, Any], host: MemcgHost, knob: str | None = None) -> str:
    """Why the host cannot run a workload's cgroups as mmsim models them ("" if it can): no
    memory controller; a hierarchy other than the one the workload's ``cgroup/memory`` knob
    (`knob`) names; on v1, a file or op v1 has no form of (:data:`V2_ONLY`, memory.reclaim, a
    reset of memory.peak, a swap limit without a memory limit) or no swap accounting; on v2,
    proactive reclaim of the root cgroup (the whole host's)."""
    if not uses_memcg(workload):
        return ""
    if host.version is None or host.root is None or host.home is None:
        return "not checkable on this host: it has no memory cgroup controller"
    if knob is not None and knob != host.version:
        return f"not checkable on this host: needs the memory controller on cgroup {knob} (cgroup/memory={knob})"
    cgroups: Mapping[str, Mapping[str, Any]] = workload.get("cgroups") or {}
    program = workload.get("program", [])
    if host.version == "v1":
        for name, spec in sorted(cgroups.items()):
            for f in V2_ONLY:
                if f in spec and str(spec[f]).strip().lower() not in (DEFAULTS[f], "false"):
                    return f"{NEEDS_V2} ({f} of {name})"
        for cg, f, _ in _written(workload):
            if f in V2_ONLY or f in ("memory.reclaim", "memory.peak"):
                return f"{NEEDS_V2} (a cgroup_write of {f} to {cg})"
        if any(op.get("op") == "memory_reclaim" for op in all_ops(program)):
            return f"{NEEDS_V2} (memory_reclaim: memory.reclaim)"
        why = _swap_without_limit(workload)
        if why:
            return f"{NEEDS_V2} ({why}: v1 limits memory+swap, memsw)"
        if _swap_limited(workload) and not (host.root / "memory.memsw.limit_in_bytes").exists():
            return (
                "not checkable on this host: its cgroup v1 memory controller does not account swap (no "
                "memory.memsw files: boot with swapaccount=1)"
            )
    else:
        own = workload.get("cgroup")
        for op in all_ops(program):
            if op.get("op") == "memory_reclaim" and not (op.get("cgroup") or own):
                return "not checkable: memory_reclaim of the root cgroup would reclaim the whole host's memory"
        joined = [own] + [op.get("cgroup") for op in all_ops(program) if op.get("op") == "fork"]
        joined += [cg for cg, f, _ in _written(workload) if f == "cgroup.procs"]
        for cg in joined:
            if cg is not None and any(n.startswith(f"{cg}/") for n in cgroups):
                return (
                    f"not checkable on this host: cgroup v2 keeps processes out of {cg}, whose children have the "
                    "memory controller (no internal processes: the join is EBUSY)"
                )
    return ""


def _swap_limited(workload: Mapping[str, Any]) -> bool:
    """Does some cgroup of the workload have (or get) a finite memory.swap.max?"""
    cgroups = workload.get("cgroups") or {}
    if any(_limit(s.get("memory.swap.max", "max")) is not None for s in cgroups.values()):
        return True
    return any(f == "memory.swap.max" and _limit(v) is not None for _, f, v in _written(workload))


def _swap_without_limit(workload: Mapping[str, Any]) -> str:
    """A cgroup whose swap is limited while its memory is not, at its declaration or after a
    cgroup_write (in program order), named; "" if none."""
    cgroups = workload.get("cgroups") or {}
    state = {
        n: [_limit(spec.get("memory.max", "max")), _limit(spec.get("memory.swap.max", "max"))]
        for n, spec in cgroups.items()
    }
    for name, (mx, sw) in sorted(state.items()):
        if mx is None and sw is not None:
            return f"memory.swap.max of {name} without memory.max"
    for cg, f, v in _written(workload):
        if cg in state and f in ("memory.max", "memory.swap.max"):
            state[cg][0 if f == "memory.max" else 1] = _limit(v)
            if state[cg][0] is None and state[cg][1] is not None:
                return f"memory.swap.max of {cg} without memory.max (after a cgroup_write of {f})"
    return ""


def cgroup_order(cgroups: Mapping[str, Any]) -> list[str]:
    """The workload's cgroups, each parent before its children (by depth, then name).

    ```python
    >>> cgroup_order({"b/x": {}, "a": {}, "b": {}})
    ['a', 'b', 'b/x']

    ```
    """
    return sorted(cgroups, key=lambda n: (n.count("/"), n))


def v1_limit_writes(
    spec: Mapping[str, Any], limit: int | None = None, memsw: int | None = None
) -> list[tuple[str, str]]:
    """The v1 files to write, in order, that make a cgroup's memory.max and memory.swap.max
    those of `spec` (v2's names), from its current `limit` and `memsw` limits (bytes, None:
    unlimited, as a new cgroup has them): memsw = max + swap.max (-1: unlimited when either is),
    written so that memsw >= limit holds at every step (the kernel refuses otherwise, EINVAL):
    memsw first when it grows, the limit first when it shrinks. A file already at its value is
    not written.

    ```python
    >>> v1_limit_writes({"memory.max": "128M", "memory.swap.max": "64M"})
    [('memory.limit_in_bytes', '134217728'), ('memory.memsw.limit_in_bytes', '201326592')]
    >>> v1_limit_writes({"memory.max": "256M", "memory.swap.max": 0}, 128 << 20, 128 << 20)
    [('memory.memsw.limit_in_bytes', '268435456'), ('memory.limit_in_bytes', '268435456')]

    ```
    """
    mx = _limit(spec.get("memory.max", "max"))
    sw = _limit(spec.get("memory.swap.max", "max"))
    new_memsw = None if mx is None or sw is None else mx + sw
    limit_write = ("memory.limit_in_bytes", str(-1 if mx is None else mx))
    memsw_write = ("memory.memsw.limit_in_bytes", str(-1 if new_memsw is None else new_memsw))
    grows = new_memsw is None or (memsw is not None and new_memsw > memsw)
    writes = [memsw_write, limit_write] if grows else [limit_write, memsw_write]
    now = {"memory.limit_in_bytes": limit, "memory.memsw.limit_in_bytes": memsw}
    return [(f, v) for f, v in writes if now[f] != (None if v == "-1" else int(v))]


def v2_limit_writes(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The v2 files a cgroup's declaration writes (those it sets to other than a new cgroup's
    value), as the files take them: "max" or bytes, memory.oom.group 0 or 1.

    ```python
    >>> v2_limit_writes({"memory.max": "128M", "memory.oom.group": True, "memory.low": 0})
    [('memory.max', '134217728'), ('memory.oom.group', '1')]

    ```
    """
    out = []
    for f in DEFAULTS:
        if f not in spec:
            continue
        v = spec[f]
        if f == "memory.oom.group":
            text = "1" if str(v).strip().lower() in ("1", "true") else "0"
        else:
            b = _limit(v)
            text = "max" if b is None else str(b)
        if text != DEFAULTS[f]:
            out.append((f, text))
    return out


#: The directories of runs: ROOT/mmsim-PID-N.
_RUN_DIR = re.compile(r"mmsim-(\d+)-\d+")
_runs = itertools.count()


class CgroupRun:
    """The workload's cgroups for one native run, on the host's memory controller `host`: made
    with their limits on entering (under ROOT/mmsim-PID-N: :attr:`parent`), removed on leaving
    (every task still in one killed by its pid, deepest first, v1's charges reclaimed with
    memory.force_empty), also after errors and Ctrl-C. :meth:`runner_args` are the runner's
    arguments. Directories of earlier runs whose mmsim was killed are removed first."""

    def __init__(self, cgroups: Mapping[str, Mapping[str, Any]], host: MemcgHost) -> None:
        if host.version is None or host.root is None or host.home is None:
            raise MmsimError("validate: the host has no memory cgroup controller")
        self.cgroups = dict(cgroups)
        self.host = host
        self.parent = host.root / f"mmsim-{os.getpid()}-{next(_runs)}"
        self.made: list[Path] = []

    def runner_args(self) -> list[str]:
        return [f"memcg={self.host.version}:{self.parent}", f"memcg-home={self.host.home}"]

    def __enter__(self) -> CgroupRun:
        sweep_stale(self.host)
        try:
            self._make(self.parent)
            if self.host.version == "v2":
                self._enable_memory(self.parent)
            for name in cgroup_order(self.cgroups):
                d = self.parent / name
                self._make(d)
                spec = self.cgroups[name]
                if self.host.version == "v1":
                    writes = v1_limit_writes(spec)
                else:
                    writes = v2_limit_writes(spec)
                    if any(n.startswith(f"{name}/") for n in self.cgroups):
                        self._enable_memory(d)
                for f, v in writes:
                    _write(d / f, v)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _make(self, d: Path) -> None:
        try:
            d.mkdir()
        except OSError as e:
            raise MmsimError(f"validate: cannot make the cgroup {d}: {e.strerror}") from None
        self.made.append(d)

    def _enable_memory(self, d: Path) -> None:
        """v2: the memory controller for `d`'s children (its cgroup.subtree_control)."""
        _write(d / "cgroup.subtree_control", "+memory")

    def __exit__(self, *exc: Any) -> None:
        remove_cgroups(self.made, v1=self.host.version == "v1")
        self.made.clear()


def _write(f: Path, value: str) -> None:
    try:
        f.write_text(value)
    except OSError as e:
        why = e.strerror + (" (needs root)" if e.errno in (errno.EPERM, errno.EACCES) else "")
        raise MmsimError(f"validate: cannot write {value!r} to {f}: {why}") from None


def _tasks(d: Path) -> list[int]:
    return [int(p) for p in _read(d / "cgroup.procs").split() if p.isdigit()]


def remove_cgroups(dirs: list[Path], v1: bool, kill: bool = True) -> list[Path]:
    """Remove cgroup directories, deepest first: every task still in one is killed (by pid: they
    are the runner's, which a signal or a stuck OOM left; not with `kill` False), a v1 cgroup's
    charges reclaimed (memory.force_empty) so that no offline memcg stays behind, then rmdir (a
    few tries while the killed tasks exit). The directories that could not be removed."""
    left = []
    for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        if not d.exists():
            continue
        for _ in range(100 if kill else 0):
            pids = _tasks(d)
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            if not pids:
                break
            time.sleep(0.02)
        if v1 and (d / "memory.force_empty").exists():
            with contextlib.suppress(OSError):
                (d / "memory.force_empty").write_text("0")
        for _ in range(50):
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)
        else:
            left.append(d)
    return left


def sweep_stale(host: MemcgHost) -> None:
    """Remove the run directories (ROOT/mmsim-PID-N) of an mmsim that is gone (PID not
    running) and their cgroups, those no task is left in (a task left is not killed: whose it
    is cannot be told)."""
    if host.root is None:
        return
    try:
        entries = list(host.root.iterdir())
    except OSError:
        return
    for d in entries:
        m = _RUN_DIR.fullmatch(d.name)
        if not m or not d.is_dir() or pid_alive(int(m.group(1))):
            continue
        remove_cgroups([d, *(p for p in d.rglob("*") if p.is_dir())], v1=host.version == "v1", kill=False)


def pid_alive(pid: int) -> bool:
    """Is there a process `pid`?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
