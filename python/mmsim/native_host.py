"""The host's state as ``mmsim validate`` reads it: THP, the page size, the hugetlb pool, the
directories of a workload's files (:func:`host_settings`), the running kernel's build
configuration and boot parameters, what of it mmsim cannot mirror (:func:`unmirrored`), the
host's state as mmsim's knobs (:func:`host_knobs`), and the lock every validate holds while it
runs (:func:`host_lock`). Writing the host's knobs for a case is :mod:`mmsim.native_knobs`'."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gzip
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from mmsim.host_files import file_dirs, read_ahead_kb, tmpfs_huge
from mmsim.native_memcg import MemcgHost, memcg_host, memcg_unsupported, uses_pressure
from mmsim.native_swap import swap_unsupported
from mmsim.runner_program import all_ops, file_systems

__all__ = [
    "HOST_KNOBS",
    "LOCK",
    "PMD_KB",
    "POOL_KNOBS",
    "SWAP_KNOBS",
    "host_knobs",
    "host_lock",
    "host_settings",
    "hugetlb_meminfo",
    "pool_in_use",
    "unmirrored",
    "uses_hugetlb",
]

THP = Path("/sys/kernel/mm/transparent_hugepage")


def host_settings() -> dict[str, Any]:
    """The host's THP settings, page size and hugetlb pool, as sysfs and procfs show them; and
    for a workload's files, where they go (``file_dirs``: {"ext4": PATH, "tmpfs": PATH}, None
    for a filesystem with no directory; ``mmsim validate --dir FS=PATH`` chooses them, see
    :func:`file_dirs`), the ext4 directory's disk's ``read_ahead_kb`` and the tmpfs
    directory's ``huge=`` mount option (``tmpfs_huge``)."""
    sel = _sel
    s: dict[str, Any] = {
        "transparent_hugepage/enabled": _pmd_enabled(sel),
        "transparent_hugepage/defrag": sel(THP / "defrag"),
        "transparent_hugepage/use_zero_page": sel(THP / "use_zero_page"),
        "transparent_hugepage/khugepaged/defrag": sel(THP / "khugepaged" / "defrag"),
        "page_size": os.sysconf("SC_PAGE_SIZE"),
        "kernel": os.uname().release,
    }
    for knob in POOL_KNOBS:
        try:
            s[knob] = int(sysctl_path(knob).read_text())
        except (OSError, ValueError):
            s[knob] = None
    s["nr_hugepages"] = s["vm/nr_hugepages"]
    s["hugetlb"] = hugetlb_meminfo()
    s["transparent_hugepage/shmem_enabled"] = sel(THP / "shmem_enabled")
    # Anonymous mTHP sizes other than the PMD size that may be used (mmsim has none).
    s["mthp_enabled"] = sorted(
        d.name.removeprefix("hugepages-")
        for d in (THP.glob("hugepages-*kB") if THP.exists() else [])
        if d.name != f"hugepages-{PMD_KB}kB" and sel(d / "enabled") not in (None, "never")
    )
    s["fault_around_bytes"] = _fault_around_bytes()
    s["kernel/pt_reclaim"] = _pt_reclaim()
    # Where a workload's files go (see the module's docstring; `mmsim validate --dir FS=PATH`
    # overrides), the readahead of the ext4 directory's disk (read_ahead_kb: the ra_pages a
    # file opened there starts with) and the tmpfs directory's mount option huge=.
    dirs = file_dirs()
    s["file_dirs"] = dirs
    s["read_ahead_kb"] = read_ahead_kb(dirs["ext4"]) if dirs.get("ext4") else None
    s["max_sectors_kb"] = read_ahead_kb(dirs["ext4"], "max_sectors_kb") if dirs.get("ext4") else None
    s["tmpfs_huge"] = tmpfs_huge(dirs["tmpfs"]) if dirs.get("tmpfs") else None
    # Reclaim and swap: the sysctls and sysfs knob a workload under pressure is run with, and
    # where the memory controller is (cgroup v1 or v2: mmsim's cgroup/memory).
    for knob in SWAP_KNOBS:
        s[knob] = swap_knob_value(knob)
    memcg = memcg_host()
    s["cgroup/memory"] = memcg.version
    s["memcg"] = memcg.as_dict()
    return s


#: Reclaim's and swap's knobs, the host's files: /proc/sys/vm/ sysctls and
#: /sys/kernel/mm/swap/vma_ra_enabled. A workload's knobs may set them (written for its case and
#: restored); a workload under memory pressure runs in mmsim with the host's SWAP_MIRRORED.
SWAP_SYSCTLS = ("vm/swappiness", "vm/page-cluster", "vm/min_free_kbytes", "vm/watermark_scale_factor")
VMA_RA = "swap/vma_ra_enabled"
SWAP_KNOBS = (*SWAP_SYSCTLS, VMA_RA)
#: Those given to mmsim as the host has them (min_free_kbytes and watermark_scale_factor size
#: the zones' watermarks for the host's memory, not mmsim's machine's: they are given only as
#: a workload names them).
SWAP_MIRRORED = ("vm/swappiness", "vm/page-cluster", VMA_RA)


def swap_knob_file(knob: str) -> Path:
    """The host's file of a reclaim or swap knob (:data:`SWAP_KNOBS`)."""
    return Path("/sys/kernel/mm/swap/vma_ra_enabled") if knob == VMA_RA else sysctl_path(knob)


def swap_knob_value(knob: str, text: str | None = None) -> str | None:
    """A reclaim or swap knob's value as mmsim spells it, from its host file's `text` (read
    when None): vma_ra_enabled's "true"/"false" is "1"/"0"; None where there is no file."""
    if text is None:
        try:
            text = swap_knob_file(knob).read_text()
        except OSError:
            return None
    t = text.strip()
    if knob == VMA_RA:
        return {"true": "1", "false": "0"}.get(t.lower(), t)
    return t


def _sel(p: Path) -> str | None:
    """A sysfs or procfs setting: the selected choice of "always [madvise] never", else the
    file's text (None where it cannot be read)."""
    try:
        t = p.read_text().strip()
    except OSError:
        return None
    m = re.search(r"\[([^\]]+)\]", t)
    return m.group(1) if m else t


#: The PMD size in kB (x86-64: 2 MiB), the mTHP size the global THP knob stands for.
PMD_KB = 2048

#: The hugetlb pool's sysctls: a case's workload may set them in its `knobs` (and `--host-set`
#: may), and validate writes them for the case and restores the host's values after it. mmsim
#: has knobs of the same names, which it is given as the host has them.
POOL_KNOBS = ("vm/nr_hugepages", "vm/nr_overcommit_hugepages")

#: The pool's state in /proc/meminfo (pages, and Hugepagesize in kB).
POOL_STATE = ("HugePages_Total", "HugePages_Free", "HugePages_Rsvd", "HugePages_Surp", "Hugepagesize")


def sysctl_path(knob: str) -> Path:
    """/proc/sys/vm/nr_hugepages for ``vm/nr_hugepages``."""
    return Path("/proc/sys") / knob


def hugetlb_meminfo() -> dict[str, int]:
    """The hugetlb pool as /proc/meminfo shows it (:data:`POOL_STATE`; empty without hugetlb)."""
    out: dict[str, int] = {}
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in POOL_STATE and rest.split():
            out[key] = int(rest.split()[0])
    return out


def _mmaps(program: list[Any]) -> Iterator[Mapping[str, Any]]:
    """Every mmap op of a program, nested ones too."""
    return (op for op in all_ops(program) if op.get("op") == "mmap")


def uses_hugetlb(program: list[Any]) -> bool:
    """Does a program use hugetlb memory (an mmap with the "hugetlb" flag, a memfd_create with
    "hugetlb")?"""
    if any("hugetlb" in (op.get("flags") or ()) for op in _mmaps(program)):
        return True
    return any(op.get("op") == "memfd_create" and op.get("hugetlb") for op in all_ops(program))


def pool_in_use(state: Mapping[str, int]) -> str:
    """Why the host's hugetlb pool is not the case's to use ("" if it is free): pages reserved,
    surplus or in use by another process."""
    total, free = state.get("HugePages_Total", 0), state.get("HugePages_Free", 0)
    rsvd, surp = state.get("HugePages_Rsvd", 0), state.get("HugePages_Surp", 0)
    if rsvd or surp or free != total:
        return (
            f"the host's hugetlb pool is in use by another process (HugePages_Total {total}, HugePages_Free "
            f"{free}, HugePages_Rsvd {rsvd}, HugePages_Surp {surp})"
        )
    return ""


def _pmd_enabled(sel: Any) -> str | None:
    """THP for PMD-sized pages: hugepages-2048kB/enabled unless it says "inherit" (Linux >= 6.8),
    then the global transparent_hugepage/enabled."""
    own = sel(THP / f"hugepages-{PMD_KB}kB" / "enabled")
    return sel(THP / "enabled") if own in (None, "inherit") else own


def _pt_reclaim() -> str:
    """CONFIG_PT_RECLAIM of the running kernel: from /proc/config.gz where the kernel exposes
    its config, else by version (Linux >= 6.14 builds it by default on x86-64)."""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            return "1" if any(line.strip() == "CONFIG_PT_RECLAIM=y" for line in f) else "0"
    except (OSError, EOFError):
        pass
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return "1" if m and (int(m.group(1)), int(m.group(2))) >= (6, 14) else "0"


def _fault_around_bytes() -> int:
    """debugfs's fault_around_bytes (mounted or not: Linux's default then, 64 KiB)."""
    try:
        return int(Path("/sys/kernel/debug/fault_around_bytes").read_text())
    except (OSError, ValueError):
        return 65536


def unmirrored(workload: Mapping[str, Any], host: Mapping[str, Any]) -> str:
    """Why host state that mmsim cannot mirror would change this workload's counts ("" if none)."""
    if host.get("transparent_hugepage/enabled") is None:
        return "the host kernel has no transparent hugepage support"
    if uses_hugetlb(workload.get("program", [])):
        if host.get("vm/nr_hugepages") is None:
            return "the host kernel has no hugetlb support (no /proc/sys/vm/nr_hugepages)"
        size = (host.get("hugetlb") or {}).get("Hugepagesize")
        if size != PMD_KB:
            return f"the host's default hugetlb page is {size} kB; mmsim's is {PMD_KB} kB"
    if host.get("mthp_enabled"):
        sizes = ", ".join(host["mthp_enabled"])
        return f"the host has anonymous mTHP sizes enabled ({sizes}); mmsim models PMD THPs only"
    program = json.dumps(workload.get("program", []))
    # A tmpfs memfd is on the internal shm mount, whose huge pages shmem_enabled decides.
    shared = '"shared"' in program or '"memfd_create"' in program
    if shared and host.get("transparent_hugepage/shmem_enabled") not in (None, "never", "deny"):
        return (
            f"shmem_enabled is {host['transparent_hugepage/shmem_enabled']} on the host and the workload maps shared "
            "memory; mmsim has no shmem THPs"
        )
    # tmpfs files get huge folios from their mount's huge= option, or from shmem_enabled=force
    # (which the check above sees only for a workload with a shared mapping).
    if uses_pressure(workload):
        memcg = MemcgHost.from_dict(host["memcg"]) if host.get("memcg") else memcg_host()
        knob = (workload.get("knobs") or {}).get("cgroup/memory")
        why = memcg_unsupported(workload, memcg, None if knob is None else str(knob))
        if why:
            return why
        why = swap_unsupported(workload, pressure=True)
        if why:
            return why
    if "tmpfs" in file_systems(workload.get("program", [])):
        if host.get("transparent_hugepage/shmem_enabled") == "force":
            return "shmem_enabled is force on the host and the workload creates tmpfs files; mmsim has no shmem THPs"
        if host.get("tmpfs_huge") not in (None, "never", "deny"):
            return (
                f"the tmpfs directory {(host.get('file_dirs') or {}).get('tmpfs')} is mounted with "
                f"huge={host['tmpfs_huge']}; mmsim has no shmem THPs (give another with --dir tmpfs=PATH)"
            )
    return ""


#: The THP knobs of the host (sysfs files under /sys/kernel/mm/): `--host-set` and a workload's
#: knobs may change them, as every knob :func:`~mmsim.native_knobs.host_knob_file` maps to a host file.
HOST_KNOBS = ("transparent_hugepage/enabled", "transparent_hugepage/defrag", "transparent_hugepage/use_zero_page")


def host_knobs(program: list[Any], host: Mapping[str, Any], pressure: bool = False) -> dict[str, Any]:
    """The host's state as mmsim's knobs (for a workload of `program`), so that mmsim starts
    where the kernel does: its THP settings, fault_around_bytes, and the huge zero folio, which
    the runner makes sure exists before the program (native/runner_host.h) wherever a THP read
    fault would map it: mmsim then has it from boot, and neither side counts its allocation.
    For a workload under memory pressure (`pressure`: :func:`~mmsim.native_memcg.uses_pressure`)
    also the hierarchy of the memory controller (``cgroup/memory``: v1 on a host such as this
    one) and :data:`SWAP_MIRRORED`. The case's own knobs (``workload_knobs``:
    :func:`~mmsim.native_knobs.with_knobs` has set the host as they say) come last."""
    knobs: dict[str, Any] = {k: host[k] for k in HOST_KNOBS if host.get(k) is not None}
    if host.get("fault_around_bytes"):
        knobs["fault_around_bytes"] = host["fault_around_bytes"]
    if host.get("kernel/pt_reclaim") is not None:
        knobs["kernel/pt_reclaim"] = host["kernel/pt_reclaim"]
    # The ext4 directory's block device: its readahead window and largest request.
    for k in ("read_ahead_kb", "max_sectors_kb"):
        if host.get(k) is not None:
            knobs[f"block/{k}"] = str(host[k])
    if host.get("transparent_hugepage/use_zero_page") == "1" and host.get("transparent_hugepage/enabled") not in (
        None,
        "never",
    ):
        knobs["transparent_hugepage/huge_zero_page_alloc"] = "boot"
    # The hugetlb pool, as the host has it (a case's knobs have sized it: see with_knobs), for
    # a program that maps hugetlb memory or a host with a pool.
    if uses_hugetlb(program) or any(host.get(k) for k in POOL_KNOBS):
        knobs.update({k: host[k] for k in POOL_KNOBS if host.get(k) is not None})
    if pressure:
        knobs.update({k: host[k] for k in ("cgroup/memory", *SWAP_MIRRORED) if host.get(k) is not None})
    # The case's own knobs, which with_knobs has set on the host (or found it had already).
    knobs.update(host.get("workload_knobs") or {})
    return knobs


#: Every `mmsim validate` (a campaign, a --host-set run, a plain one) holds this lock while it
#: runs: a run that writes the host's THP knobs would change them under another's cases.
LOCK = Path("/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir()) / "mmsim-host-thp.lock"
_lock_depth = 0


@contextlib.contextmanager
def host_lock(waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold :data:`LOCK` (an exclusive flock) for the block; call `waiting` first if another
    process holds it, and wait for it. Re-entrant within a process. Where the lock file
    cannot be opened (no permission), run without it."""
    global _lock_depth
    if _lock_depth:
        _lock_depth += 1
        try:
            yield
        finally:
            _lock_depth -= 1
        return
    try:
        fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                waiting()
            fcntl.flock(fd, fcntl.LOCK_EX)
        _lock_depth = 1
        yield
    finally:
        _lock_depth = 0
        os.close(fd)


def _waiting() -> None:
    print(f"mmsim: waiting for another mmsim validate to finish with the host ({LOCK})", file=sys.stderr, flush=True)


@functools.cache
def _kernel_config() -> dict[str, str] | None:
    """The running kernel's build configuration (/proc/config.gz, else /boot/config-RELEASE):
    {"CONFIG_HZ": "250", ...}, options not set left out; None where neither can be read."""
    for path, opener in ((Path("/proc/config.gz"), gzip.open), (Path(f"/boot/config-{os.uname().release}"), open)):
        try:
            with opener(path, "rt") as f:
                return dict(
                    line.strip().partition("=")[::2] for line in f if line.startswith("CONFIG_") and "=" in line
                )
        except (OSError, EOFError):
            continue
    return None


def _boot_flag(name: str) -> str | None:
    """init_on_alloc or init_on_free of the running kernel ("0" or "1"): its boot parameter,
    else the build's default (CONFIG_INIT_ON_ALLOC_DEFAULT_ON); None where neither says."""
    try:
        params = Path("/proc/cmdline").read_text().split()
    except OSError:
        params = []
    for p in reversed(params):
        key, eq, value = p.partition("=")
        if key == name and eq:
            return "1" if value.lower() in ("1", "y", "yes", "on", "true") else "0"
    config = _kernel_config()
    if config is None:
        return None
    return "1" if config.get(f"CONFIG_{name.upper()}_DEFAULT_ON") == "y" else "0"
