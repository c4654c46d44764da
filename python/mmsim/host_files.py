"""Where the native runner keeps a workload's files: an ext4 and a tmpfs directory found on the
host (or given with ``mmsim validate --dir FS=PATH``), their filesystems from
``/proc/self/mountinfo``, and the block device's queue settings (``read_ahead_kb``)."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from mmsim._mmsim import MmsimError
from mmsim.runner_program import FILESYSTEMS


def _unescape(field: str) -> str:
    """A mountinfo path: \\040 and the like are octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mount_of(path: str | Path) -> tuple[str, str] | None:
    """The filesystem type and super options of the mount holding `path` (or its nearest existing
    ancestor), from /proc/self/mountinfo: the mount of the path's device, else the longest
    mount point above it. None where mountinfo cannot be read."""
    p = Path(os.path.realpath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        text = Path("/proc/self/mountinfo").read_text()
        st = os.stat(p)
    except OSError:
        return None
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    by_dev, by_prefix = None, None
    best = -1
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if not sep or len(f) < 5 or len(r) < 3:
            continue
        info = (r[0], r[2])
        point = _unescape(f[4])
        if f[2] == dev and by_dev is None:
            by_dev = info
        under = str(p) == point or str(p).startswith(point.rstrip("/") + "/")
        if under and len(point) >= best:
            best, by_prefix = len(point), info
    return by_dev or by_prefix


def fs_type(path: str | Path) -> str | None:
    """The type of the filesystem `path` is on ("ext4", "tmpfs"; None if unknown)."""
    m = _mount_of(path)
    return m[0] if m else None


def tmpfs_huge(path: str | Path) -> str:
    """The huge= mount option of the tmpfs `path` is on ("never" without one)."""
    m = _mount_of(path)
    opts = dict(o.partition("=")[::2] for o in (m[1] if m else "").split(","))
    return opts.get("huge") or "never"


def queue_file(path: str | Path, attr: str = "read_ahead_kb") -> Path | None:
    """The sysfs file of a queue attribute (read_ahead_kb, max_sectors_kb) of the block device
    the filesystem of `path` is on (a partition's is its disk's); None where there is none
    (tmpfs)."""
    try:
        dev = os.stat(path).st_dev
        d = Path(os.path.realpath(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"))
        if (d / "partition").exists():
            d = d.parent
    except OSError:
        return None
    f = d / "queue" / attr
    return f if f.is_file() else None


def read_ahead_kb(path: str | Path, attr: str = "read_ahead_kb") -> int | None:
    """read_ahead_kb (or another queue attribute, such as max_sectors_kb) of the block device
    the filesystem of `path` is on (:func:`queue_file`); None where there is none (tmpfs) or
    sysfs does not say."""
    f = queue_file(path, attr)
    try:
        return int(f.read_text()) if f else None
    except (OSError, ValueError):
        return None


#: The repository's target/ where mmsim runs from a checkout (None when installed).
_CHECKOUT = Path(__file__).resolve().parents[2]
_TARGET = _CHECKOUT / "target" if (_CHECKOUT / "Cargo.toml").is_file() else None

#: Directories given with `mmsim validate --dir FS=PATH` (see :func:`file_dirs_override`).
_dir_overrides: dict[str, str] = {}


def usable_dir(fs: str, path: str | Path) -> str:
    """Why `path` cannot hold the workload's `fs` files ("" if it can): it must be a writable
    directory (or one to create under a writable one) on that filesystem."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    if not p.is_dir():
        return f"{path} is not a directory"
    if not os.access(p, os.W_OK | os.X_OK):
        return f"{path} is not writable"
    t = fs_type(path)
    if t != fs:
        return f"{path} is on {t or 'a filesystem of unknown type'}, not {fs}"
    return ""


def default_file_dirs() -> dict[str, str | None]:
    """Where a workload's files go unless `--dir` says: ext4, the repository's ``target/`` (a
    checkout), else :func:`tempfile.gettempdir`, else mmsim's cache directory, the first on
    ext4; tmpfs, ``/dev/shm``. None for a filesystem with no such directory."""
    from mmsim.runner_build import cache_dir

    ext4 = [*([_TARGET] if _TARGET else []), Path(tempfile.gettempdir()), cache_dir()]
    return {
        "ext4": next((str(d) for d in ext4 if not usable_dir("ext4", d)), None),
        "tmpfs": "/dev/shm" if not usable_dir("tmpfs", "/dev/shm") else None,
    }


def file_dirs() -> dict[str, str | None]:
    """The directories of a workload's files now: `--dir`'s, else :func:`default_file_dirs`."""
    return {**default_file_dirs(), **_dir_overrides}


def parse_dir_options(values: list[str]) -> dict[str, str]:
    """`mmsim validate --dir FS=PATH` options as {FS: PATH}, each checked (:func:`usable_dir`)."""
    out: dict[str, str] = {}
    for v in values:
        fs, eq, path = v.partition("=")
        if not eq or fs not in FILESYSTEMS or not path:
            raise MmsimError(f"validate: --dir expects FS=PATH with FS one of {', '.join(FILESYSTEMS)}, got {v!r}")
        why = usable_dir(fs, path)
        if why:
            raise MmsimError(f"validate: --dir {v}: {why}")
        out[fs] = str(Path(path).resolve())
    return out


@contextlib.contextmanager
def file_dirs_override(dirs: Mapping[str, str]) -> Iterator[None]:
    """Put the workloads' files of each filesystem in `dirs` ({FS: PATH}, as
    :func:`parse_dir_options` gives) for the block: :func:`file_dirs` and every run say so."""
    saved = dict(_dir_overrides)
    _dir_overrides.update(dirs)
    try:
        yield
    finally:
        _dir_overrides.clear()
        _dir_overrides.update(saved)
