"""A workload's knobs on the host: which of mmsim's knobs the host has a file for
(:func:`host_knob_file`: sysfs, procfs, debugfs, the ext4 directory's disk), what the host has
of the others, the writes that make the host as a case's knobs say (:func:`knob_plan`), made
and undone under the host lock (:class:`HostSettings`, :func:`with_knobs`)."""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mmsim._mmsim import MmsimError
from mmsim.host_files import file_dirs, queue_file
from mmsim.native_compare import _result
from mmsim.native_host import (
    HOST_KNOBS,
    POOL_KNOBS,
    SWAP_KNOBS,
    _boot_flag,
    _kernel_config,
    _pmd_enabled,
    _sel,
    _waiting,
    host_knobs,
    host_lock,
    host_settings,
    hugetlb_meminfo,
    pool_in_use,
    swap_knob_file,
    swap_knob_value,
    sysctl_path,
    uses_hugetlb,
)

__all__ = ["HostSettings", "case_knobs", "host_knob_file", "knob_plan", "with_knobs"]

#: Where debugfs is mounted, if it is.
DEBUGFS = Path("/sys/kernel/debug")

#: mmsim's knobs that are files in debugfs on the host (the same path under :data:`DEBUGFS`).
DEBUGFS_KNOBS = ("fault_around_bytes", "sched/base_slice_ns")

#: mmsim's knobs of the ext4 directory's disk: its queue/read_ahead_kb and queue/max_sectors_kb.
BLOCK_KNOBS = ("block/read_ahead_kb", "block/max_sectors_kb")

#: Knobs whose write is an action, not a setting (written for the case, nothing to restore).
ACTION_KNOBS = ("vm/drop_caches",)

#: Host knobs validate never writes, though the host has them, and why.
NEVER_WRITTEN = {
    "kernel/pid_max": "the host's pid space is every process's on the host (validate does not write "
    "/proc/sys/kernel/pid_max)",
    **{
        k: "fault injection on the host would fail every process's allocations (validate does not write "
        "debugfs's fail_page_alloc, whose attributes are not mmsim's either)"
        for k in ("fail_page_alloc/min_order", "fail_page_alloc/every")
    },
}

#: mmsim's knobs of the host kernel's build or boot parameters: fixed on the host.
BOOT_KNOBS = (
    "kernel/pt_reclaim",
    "init_on_alloc",
    "init_on_free",
    "kernel/hz",
    "kernel/hugetlb_pmd_share",
    "transparent_hugepage/file_text",
    # Which cgroup hierarchy the memory controller is on is the host's boot's (cgroup_no_v1=,
    # systemd's): validate cannot move it.
    "cgroup/memory",
)

KHUGEPAGED = "transparent_hugepage/khugepaged/"


def _debugfs_unwritable() -> str:
    """Why the host's debugfs knobs cannot be written ("" if they can)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        mounts = []
    for line in mounts:
        f = line.split()
        if len(f) >= 4 and f[1] == str(DEBUGFS) and f[2] == "debugfs":
            return "debugfs is mounted read-only" if "ro" in f[3].split(",") else ""
    return f"debugfs is not mounted at {DEBUGFS}"


def host_knob_file(knob: str) -> Path | str:
    """The host's file of an mmsim knob, which a workload's knobs (and ``--host-set``) may write
    for a case: the THP knobs and khugepaged's under /sys/kernel/mm/transparent_hugepage/, the
    hugetlb pool's sysctls and vm/drop_caches under /proc/sys/vm/, fault_around_bytes and
    sched/base_slice_ns in debugfs (where it is mounted and writable), block/read_ahead_kb and
    block/max_sectors_kb in the ext4 directory's disk's queue/. Else why the host cannot take
    it (a string): mmsim's own knob, a build or boot parameter, debugfs not mounted, ..."""
    if knob in HOST_KNOBS or knob.startswith(KHUGEPAGED):
        f = Path("/sys/kernel/mm") / knob
        return f if f.is_file() else f"the host kernel has no {f}"
    if knob in POOL_KNOBS or knob in ACTION_KNOBS:
        f = sysctl_path(knob)
        return f if f.is_file() else f"the host kernel has no {f}"
    if knob in SWAP_KNOBS:
        f = swap_knob_file(knob)
        return f if f.is_file() else f"the host kernel has no {f}"
    if knob in DEBUGFS_KNOBS:
        why = _debugfs_unwritable()
        if why:
            return f"the host's is in debugfs, and {why}"
        f = DEBUGFS / knob
        try:
            f.read_text()
        except OSError as e:
            # Not there, or debugfs locked down (a kernel booted with lockdown, or
            # debugfs=no-mount: EPERM even for root).
            return f"the host's is in debugfs, and {f} cannot be read: {e.strerror}"
        return f
    if knob in BLOCK_KNOBS:
        d = file_dirs().get("ext4")
        f = queue_file(d, knob.removeprefix("block/")) if d else None
        return f or "it is the ext4 directory's disk's, and there is no ext4 directory on a block device"
    if knob in NEVER_WRITTEN:
        return NEVER_WRITTEN[knob]
    if knob in BOOT_KNOBS:
        return "the host kernel has it fixed by its build or boot parameters"
    return "it is mmsim's own knob, which the host kernel does not have"


def _writable_names() -> str:
    """The knobs a host may take, for messages."""
    return ", ".join(
        (*HOST_KNOBS, f"{KHUGEPAGED}*", *POOL_KNOBS, *SWAP_KNOBS, *ACTION_KNOBS, *DEBUGFS_KNOBS, *BLOCK_KNOBS)
    )


def _knob_file_value(knob: str, f: Path) -> str | None:
    """What the host has now of a knob it takes (file `f`), as mmsim spells it: THP enabled as
    PMD THPs see it (hugepages-2048kB/enabled unless "inherit"), vma_ra_enabled's "true" as
    "1", else the file's setting."""
    if knob == "transparent_hugepage/enabled":
        return _pmd_enabled(_sel)
    return swap_knob_value(knob) if knob in SWAP_KNOBS else _sel(f)


def _fixed_value(knob: str, host: Mapping[str, Any]) -> str | None:
    """The host's value of a knob it cannot take (see :func:`host_knob_file`), as mmsim spells
    it; None where it cannot be told. A build or boot parameter the host's configuration and
    command line say; a knob validate gives mmsim from the host (fault_around_bytes, Linux's
    64 KiB where debugfs is not mounted; kernel/pt_reclaim; the huge zero page's allocation)
    as it gives it; mmsim's own knobs at mmsim's defaults, which are today's Linux (none of
    their models, such as vm/ptshare's shared page tables, is the host's)."""
    config = _kernel_config()
    if knob in ("init_on_alloc", "init_on_free"):
        return _boot_flag(knob)
    if knob == "kernel/hz":
        return config.get("CONFIG_HZ") if config else None
    if knob == "kernel/hugetlb_pmd_share" and config is not None:
        return "1" if config.get("CONFIG_HUGETLB_PMD_PAGE_TABLE_SHARING") == "y" else "0"
    if knob == "transparent_hugepage/file_text" and config is not None:
        return "khugepaged" if config.get("CONFIG_READ_ONLY_THP_FOR_FS") == "y" else "off"
    if knob == "kernel/pid_max":
        return _sel(Path("/proc/sys/kernel/pid_max"))
    if knob == "cgroup/memory":
        return host.get("cgroup/memory")
    if knob == "sched/base_slice_ns":
        return "auto"  # debugfs not mounted: Linux's default (as fault_around_bytes')
    mirrored = host_knobs([], host)
    if knob in mirrored:
        return str(mirrored[knob])
    return _knob_defaults().get(knob)


@functools.cache
def _knob_defaults() -> dict[str, str]:
    from mmsim.knobs import knobs

    return {k["name"]: str(k["default"]) for k in knobs()}


def _linux_base_slice() -> str:
    """Linux's default sched/base_slice_ns on this host: 0.7 ms x (1 + ilog2(min(CPUs, 8)))."""
    cpus = min(max(os.cpu_count() or 1, 1), 8)
    return str(700_000 * (1 + cpus.bit_length() - 1))


@functools.lru_cache(maxsize=64)
def _engine_spelling(items: str) -> str:
    from mmsim.workload import run_workload

    knobs = dict(json.loads(items))
    r = run_workload({"name": "knobs", "knobs": knobs, "program": []})
    return json.dumps({k: str(r["knobs"][k]) for k in knobs})


def case_knobs(knobs: Mapping[str, Any]) -> dict[str, str]:
    """A workload's knobs as mmsim spells them (as sysfs prints them: ``"vm/ptshare": "0"`` is
    "off", ``"transparent_hugepage/use_zero_page": 1`` is "1"), the hugetlb pool's sizes as
    numbers; a knob or value mmsim does not take is an :class:`MmsimError`."""
    out: dict[str, str] = {}
    rest = {}
    for k, v in knobs.items():
        if k in POOL_KNOBS:
            if not re.fullmatch(r"\d+", str(v).strip()):
                raise MmsimError(f"validate: knobs: {k}: expected a number of huge pages (0 or more), got {v!r}")
            out[k] = str(int(str(v).strip()))
        else:
            rest[k] = v
    if rest:
        out.update(json.loads(_engine_spelling(json.dumps(sorted(rest.items())))))
    return {k: out[k] for k in knobs}


class HostSettings:
    """Holds the host lock, changes host knobs for the duration of a ``with`` block and
    restores each one on the way out (also on errors and Ctrl-C): every knob the host takes
    (:func:`host_knob_file`: the THP knobs and khugepaged's in sysfs, the hugetlb pool's
    sysctls, fault_around_bytes in a mounted debugfs, ...). A pool the host cannot provide (a
    write of ``vm/nr_hugepages`` that leaves fewer pages) is an error, or with
    ``strict=False`` is said in :attr:`shortfall`. `source` names where the changes come from
    in errors (``--host-set``, a workload's knobs)."""

    def __init__(self, changes: Mapping[str, Any], *, source: str = "--host-set", strict: bool = True) -> None:
        self.files: dict[str, Path] = {}
        for k, v in changes.items():
            f = host_knob_file(k)
            if not isinstance(f, Path):
                if k in _knob_defaults() and _is_host_knob(k):
                    raise MmsimError(f"validate: {source} {k}: the host cannot take it: {f}")
                raise MmsimError(f"validate: {source} {k}: not a knob the runner may set (known: {_writable_names()})")
            if k in POOL_KNOBS and not re.fullmatch(r"\d+", str(v).strip()):
                raise MmsimError(f"validate: {source} {k}: expected a number of huge pages (0 or more), got {v!r}")
            self.files[k] = f
        self.changes = {k: str(v).strip() for k, v in changes.items()}
        self.source, self.strict = source, strict
        #: Each knob written, with its file and the setting to write back.
        self.saved: dict[str, tuple[Path, str]] = {}
        self.shortfall = ""
        self._lock = contextlib.ExitStack()

    @staticmethod
    def path(knob: str) -> Path:
        f = host_knob_file(knob)
        return f if isinstance(f, Path) else Path("/sys/kernel/mm") / knob

    def __enter__(self) -> HostSettings:
        self._lock.enter_context(host_lock(_waiting))
        f: Path | None = None
        try:
            for k, v in self.changes.items():
                f = self.files[k]
                if k in POOL_KNOBS:
                    why = pool_in_use(hugetlb_meminfo())
                    if why:
                        raise MmsimError(f"validate: {self.source} {k}: {why}")
                # Saved before the write, so that a Ctrl-C between them still restores it.
                old = _sel(f)
                if k not in ACTION_KNOBS and old is not None:
                    self.saved[k] = (f, old)
                f.write_text(v)
                if k == "vm/nr_hugepages":
                    got = int(f.read_text())
                    if got < int(v):
                        self.shortfall = (
                            f"the host provided {got} of the {v} huge pages {k} asks for (memory too fragmented?)"
                        )
        except OSError as e:
            self.__exit__(None, None, None)
            why = e.strerror + (" (needs root)" if e.errno in (errno.EPERM, errno.EACCES) else "")
            raise MmsimError(f"validate: {self.source}: cannot write {e.filename or f}: {why}") from None
        except BaseException:  # an MmsimError above, Ctrl-C
            self.__exit__(None, None, None)
            raise
        if self.shortfall and self.strict:
            self.__exit__(None, None, None)
            raise MmsimError(f"validate: {self.source}: {self.shortfall}")
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            for f, v in reversed(list(self.saved.values())):
                with contextlib.suppress(OSError):
                    f.write_text(v)
            self.saved.clear()
        finally:
            self._lock.close()


def _is_host_knob(knob: str) -> bool:
    """Is `knob` one the host may take where it has the file (debugfs mounted, an ext4 disk)?"""
    return knob in (*HOST_KNOBS, *POOL_KNOBS, *SWAP_KNOBS, *ACTION_KNOBS, *DEBUGFS_KNOBS, *BLOCK_KNOBS) or (
        knob.startswith(KHUGEPAGED)
    )


def _host_target(knob: str, value: str) -> str:
    """What to write to the host's file for mmsim's spelling of a knob (sched/base_slice_ns
    "auto" is Linux's default, in ns)."""
    return _linux_base_slice() if knob == "sched/base_slice_ns" and value == "auto" else value


def knob_plan(knobs: Mapping[str, str], host: Mapping[str, Any]) -> tuple[dict[str, str], str]:
    """For a workload's knobs (:func:`case_knobs`' spelling): the host writes to make (knob ->
    value; none for a knob the host has at that value already), or why the host cannot take
    them (the first knob it cannot take that differs from the host's, named, else "")."""
    changes: dict[str, str] = {}
    for k, v in knobs.items():
        f = host_knob_file(k)
        if isinstance(f, Path):
            want = _host_target(k, v)
            if k in ACTION_KNOBS:
                if v != _knob_defaults().get(k):
                    changes[k] = want
            elif _knob_file_value(k, f) != want:
                changes[k] = want
            continue
        have = _fixed_value(k, host)
        if have != v:
            if have is None:
                told = "what the host has cannot be told"
            elif k in DEBUGFS_KNOBS:
                told = f"the host's is taken to be Linux's default, {have}"
            elif _is_host_knob(k) or k in NEVER_WRITTEN or k in BOOT_KNOBS:
                told = f"the host's is {have}"
            else:
                told = f"the host is as mmsim's {have}"
            return {}, f"the workload's knob {k}={v} cannot be set on the host: {f} ({told})"
    return changes, ""


def with_knobs(
    name: str,
    pins: str,
    knobs: Mapping[str, Any],
    program: list[Any],
    host: Mapping[str, Any],
    body: Callable[[Mapping[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """Run `body` (a case) with the host set as its knobs say, and give mmsim the same values:
    every knob the host takes (:func:`host_knob_file`) whose host value differs is written for
    the case (:class:`HostSettings`, under the host lock) and the host's value restored after
    it, also on errors and Ctrl-C; a knob the host cannot take (mmsim's own, a boot parameter,
    debugfs not mounted) skips the case, naming it, unless the host has that value already
    (:func:`knob_plan`); so does a write the host does not take as asked. For a program that
    maps hugetlb memory or knobs that size the pool, the case is skipped if the pool is
    another process's (pages reserved, surplus or in use) before or after the write, or if the
    host cannot provide it; a program that uses hugetlb without sizing the pool runs with the
    host's pool as it is (mmsim is given its size). `body` gets the host's settings as they
    are then, with the case's knobs in ``workload_knobs`` (see :func:`~mmsim.native_host.host_knobs`)."""
    pool = uses_hugetlb(program) or any(k in POOL_KNOBS for k in knobs)
    if not knobs and not pool:
        return body(host)
    try:
        want = case_knobs(knobs)
    except MmsimError as e:
        return _result(name, "fail", f"mmsim cannot run it: {' '.join(str(e).split())}", pins, [])
    with host_lock(_waiting):
        if pool:
            busy = pool_in_use(hugetlb_meminfo())
            if busy:
                return _result(name, "skip", busy, pins, [])
        now = host_settings()
        changes, why = knob_plan(want, now)
        if why:
            return _result(name, "skip", why, pins, [])
        settings = HostSettings(changes, source=f"{name}: knobs", strict=False)
        try:
            settings.__enter__()
        except MmsimError as e:
            what = "size the hugetlb pool" if set(changes) <= set(POOL_KNOBS) else "set the workload's knobs"
            return _result(name, "skip", f"cannot {what}: {str(e).removeprefix('validate: ')}", pins, [])
        try:
            now = host_settings()
            why = settings.shortfall or (pool_in_use(now["hugetlb"]) if pool else "")
            if why:
                return _result(name, "skip", why, pins, [])
            for k, v in changes.items():
                got = _knob_file_value(k, settings.files[k]) if k not in ACTION_KNOBS else v
                if got != v:
                    return _result(name, "skip", f"the host took the workload's knob {k}={v} as {got}", pins, [])
            return body({**now, "workload_knobs": want})
        finally:
            settings.__exit__(None, None, None)
