"""Random workloads for kernel-differential fuzzing (``mmsim validate --random``): the
generator.

The generator is deterministic: case ``i`` of seed ``s`` is drawn from
``random.Random(f"{s}:{i}")`` (a regenerated case from ``f"{s}:{i}:{attempt}"``), so one
case can be re-created without the others. A share (`pressure`, :data:`PRESSURE`, 0 by
default) of the cases are under memory pressure: whether a case is, and its swap device and
cgroups, come from a stream of their own, so with `pressure` 0 every case is the one drawn
before pressure was added. Every workload it emits is checked by
:func:`mmsim.random_checker.check_workload`, a model of each process's mappings and
protections that keeps the host safe, and by mmsim's own parser.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mmsim._mmsim import MmsimError
from mmsim.random_checker import (
    ADVICE,
    DEFRAG,
    ENABLED,
    FILE_ADVICE,
    FILE_OPS,
    FORK_ADVICE,
    HEAP,
    HPAGE,
    HPAGE_PAGES,
    HUGETLB_ADVICE,
    KNOBS,
    LABEL,
    LAZY_ADVICE,
    LOCK_POPULATE,
    MAX_FILE,
    MAX_FILES,
    MAX_REGION,
    MAX_TASKS,
    MAX_TOUCHED,
    MCL,
    NONE,
    PAGE,
    POOL,
    PRESSURE,
    PRESSURE_ADVICE,
    PROT,
    RW,
    SHRINK_RUNS,
    THREADS,
    UNMAPPED,
    ZERO_PAGE,
    Checker,
    R,
    Region,
    Task,
    _size,
    _touched_bytes,
    check_workload,
    count_ops,
    parse_error,
    populated_bytes,
    touched_pages,
)

#: At most this many pages a range moved out of a region grows by.
MAX_GROW = 512

__all__ = [
    "ADVICE",
    "DEFRAG",
    "ENABLED",
    "FILE_ADVICE",
    "FILE_OPS",
    "FORK_ADVICE",
    "KNOBS",
    "LABEL",
    "LAZY_ADVICE",
    "MAX_FILE",
    "MAX_FILES",
    "MAX_REGION",
    "MAX_TASKS",
    "MAX_TOUCHED",
    "NONE",
    "PAGE",
    "SHRINK_RUNS",
    "THREADS",
    "UNMAPPED",
    "ZERO_PAGE",
    "Checker",
    "GeneratedCase",
    "Generator",
    "Region",
    "Task",
    "check_workload",
    "count_ops",
    "generate_case",
    "parse_error",
    "touched_pages",
]

# --------------------------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------------------------

#: Strides of reads and writes (None: the default, 4096).
STRIDES = [None] * 7 + [HPAGE] * 3 + [64] * 2 + [1 << 20, 512, 8192, 12288, 4096, 1, "random"]


class Generator:
    """Draws one random workload. Keeps the tasks and bytes touched within bounds as it goes
    and only emits what its model (the :class:`Checker`'s) says is safe."""

    def __init__(
        self, rng: random.Random, threads: bool = THREADS, pressure: float = PRESSURE, memcg_v2: bool = False
    ) -> None:
        self.rng = rng
        self.threads = threads
        #: The share of cases under memory pressure, and whether the host's memory controller
        #: is on cgroup v2 (memory_reclaim, which v1 has not, is drawn only then).
        self.pressure, self.memcg_v2 = pressure, memcg_v2
        #: This case's cgroups: name -> [memory.max, memory.swap.max] as the program's order
        #: leaves them (None: "max"); empty when the case is not under pressure.
        self.cgroups: dict[str, list[int | None]] = {}
        self.own_cgroup: str | None = None
        self.pressure_rng = random.Random(0)
        self.names = itertools.count()
        self.labels = itertools.count()
        self.tasks = 1
        self.touched = 0
        self.files: dict[str, int] = {}  # name -> size in bytes
        # brk ops, from a stream of their own: the other ops of a seed's workloads stay those
        # drawn before brk was added, until a heap exists.
        self.brk_rng = random.Random(0)
        # MADV_FREE, MADV_REMOVE, MADV_DONTFORK and MADV_DOFORK, from a stream of their own.
        self.lazy_rng = random.Random(0)
        self.shmem_files: set[str] = set()  # the tmpfs files and memfds (fallocate's)
        # memfd_create(MFD_HUGETLB), from a stream of its own: which memfds are hugetlb.
        self.huge_rng = random.Random(0)
        self.hugetlb_files: set[str] = set()

    # -- the workload and its programs ----------------------------------------------------

    def workload(self, name: str) -> dict[str, Any]:
        rng = self.rng
        self.brk_rng = random.Random(f"{name}:brk")
        self.lazy_rng = random.Random(f"{name}:lazy-advice")
        self.huge_rng = random.Random(f"{name}:hugetlb")
        knobs = {k: rng.choice(KNOBS[k]) for k in (ENABLED, ZERO_PAGE)}
        # defrag from a stream of its own, so that the workloads of a seed stay those drawn
        # before it was added.
        knobs[DEFRAG] = random.Random(f"{name}:defrag").choice(KNOBS[DEFRAG])
        knobs = {k: knobs[k] for k in KNOBS}
        self.pressure_rng = random.Random(f"{name}:pressure")
        top = self.pressure_setup() if self.pressure and self.pressure_rng.random() < self.pressure else {}
        program = self.program(Task({}), depth=0, n=rng.randint(3, 16), mult=1)
        if rng.random() < 0.05:
            program.append({"op": "exit"})
        pool = sum(self.files[f] // HPAGE for f in self.hugetlb_files)
        if pool:
            knobs[POOL] = str(pool)
        return {"name": name, **top, "knobs": knobs, "program": program}

    def pressure_setup(self) -> dict[str, Any]:
        """A case under memory pressure: one swap device (a file, or a partition: a loop device)
        as large as the bytes a case may touch, and a cgroup "box" (and now and then "box/a")
        with a memory.max of 16-256 MiB (or "max"), a memory.swap.max now and then (0: no swap,
        so an OOM kill; only where memory.max is set, as cgroup v1 expresses it), the first
        process in one of them half the time."""
        prng = self.pressure_rng
        swap = {"size": prng.choice(("512M", "768M", "1G"))}
        if prng.random() < 0.3:
            swap["kind"] = "partition"
        names = ["box", "box/a"] if prng.random() < 0.3 else ["box"]
        cgroups: dict[str, dict[str, Any]] = {}
        for n in names:
            spec: dict[str, Any] = {}
            limit = None if prng.random() < 0.2 else prng.choice((16, 32, 64, 128, 256)) << 20
            if limit is not None:
                spec["memory.max"] = f"{limit >> 20}M"
                if prng.random() < 0.2:
                    spec["memory.swap.max"] = prng.choice((0, "16M", "max"))
            cgroups[n] = spec
            sw = spec.get("memory.swap.max", "max")
            self.cgroups[n] = [limit, None if sw == "max" else int(str(sw).removesuffix("M")) << 20]
        top: dict[str, Any] = {"machine": {"swap": [swap]}, "cgroups": cgroups}
        if prng.random() < 0.5:
            self.own_cgroup = top["cgroup"] = prng.choice(self.joinable())
        return top

    def joinable(self) -> list[str]:
        """The cgroups a process may join: all of them on cgroup v1; on v2 those without
        children (no internal processes)."""
        names = sorted(self.cgroups)
        return [n for n in names if not self.memcg_v2 or not any(m.startswith(f"{n}/") for m in names)]

    def program(self, task: Task, depth: int, n: int, mult: int) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = []
        for _ in range(n):
            ops.extend(self.op(task, depth, mult, loop=False))
        self.finish(task, ops)
        if depth > 0 and self.rng.random() < 0.1:
            ops.append({"op": "exit"})
        self.snapshots(ops, thread=task.thread)
        return ops

    def finish(self, task: Task, ops: list[dict[str, Any]]) -> None:
        # Threads must be waited for: the process's end would kill them in the kernel.
        if task.pinned or (task.children and self.rng.random() < 0.5):
            ops.append({"op": "wait"})
            task.pinned.clear()
            task.children = False

    def snapshots(self, ops: list[dict[str, Any]], thread: bool) -> None:
        """Put 0-3 snapshots at random places of a program (before a final exit)."""
        k = self.rng.choice([0, 1, 2, 2, 3, 3] if not thread else [0, 1, 1, 2])
        end = len(ops) - (1 if ops and ops[-1]["op"] == "exit" else 0)
        for _ in range(k):
            ops.insert(self.rng.randint(0, end), {"op": "snapshot", "label": self.label()})
            end += 1

    def label(self) -> str:
        n = next(self.labels)
        return self.rng.choice([f"s{n}", f"snap_{n}", f"after-op.{n}", f"L{n}-x"])

    def op(self, task: Task, depth: int, mult: int, loop: bool) -> list[dict[str, Any]]:
        brk = self.brk(task, mult) if not loop and task.may_change(HEAP) and self.brk_rng.random() < 0.04 else []
        return brk + self.other_op(task, depth, mult, loop)

    def other_op(self, task: Task, depth: int, mult: int, loop: bool) -> list[dict[str, Any]]:
        rng = self.rng
        readable = any(any(s in (R, RW) for s in r.pages) for r in task.regions.values())
        writable = any(any(s == RW for s in r.pages) for r in task.regions.values())
        mapped = [n for n, r in task.regions.items() if any(r.pages)]
        changeable = [n for n in mapped if task.may_change(n)]
        room = MAX_TASKS - self.tasks
        options: list[tuple[float, Callable[[], list[dict[str, Any]]]]] = []
        if not loop and len(task.regions) < 8:
            options.append((6.0 if not mapped else 1.5, lambda: self.mmap(task)))
        if changeable and not loop:
            options.append((1.0, lambda: self.munmap(task, changeable)))
            options.append((1.5, lambda: self.mprotect(task, changeable)))
            options.append((0.8, lambda: self.mlock(task, changeable, mult)))
        if mapped:
            options.append((0.6, lambda: self.mlockall(task, depth, mult, loop)))
            remappable = [n for n in changeable if task.regions[n].remappable()]
            if remappable:
                options.append((1.0, lambda: self.mremap(task, remappable, loop)))
        if mapped:
            options.append((2.5, lambda: self.madvise(task, mapped, mult)))
        if writable:
            options.append((5.0, lambda: self.access(task, mult, write=True)))
            options.append((0.4, lambda: self.atomic(task, mult)))
        if readable:
            options.append((3.5, lambda: self.access(task, mult, write=False)))
            options.append((0.4, lambda: self.compare(task, mult)))
        if not task.thread and depth < 2 and room >= mult:
            options.append((1.5, lambda: self.fork(task, depth, mult, loop)))
            if self.threads and not loop:
                options.append((1.0, lambda: self.thread(task, depth, mult)))
        if not loop and mapped and depth < 3:
            options.append((1.0, lambda: self.loop(task, depth, mult)))
        if (task.children or task.pinned) and not task.thread:
            options.append((2.0, lambda: self.wait(task)))
        options.extend(self.file_options(task, depth, loop))
        if self.cgroups:
            options.append((0.6, self.cgroup_write))
            if self.memcg_v2:
                options.append((0.6, self.memory_reclaim))
        if not options:
            return []
        total = sum(w for w, _ in options)
        x = rng.random() * total
        for w, make in options:
            x -= w
            if x < 0:
                return make()
        return options[-1][1]()

    def file_options(self, task: Task, depth: int, loop: bool) -> list[tuple[float, Callable[[], list[dict]]]]:
        """The file ops the task may make now, weighted: create (the first task, outside loops),
        mmap of a file, pwrite, pread, fadvise and fsync."""
        out: list[tuple[float, Callable[[], list[dict[str, Any]]]]] = []
        if depth == 0 and not loop and not task.thread and len(self.files) < MAX_FILES:
            out.append((1.5 if not self.files else 0.3, self.create))
        sized = [f for f, n in self.files.items() if n > 0]
        if not sized:
            return out
        if not loop and len(task.regions) < 8:
            out.append((2.5, lambda: self.mmap_file(task, sized)))
        # A hugetlb memfd is mapped and fallocated only (its read, write and fadvise are not
        # modelled).
        plain = [f for f in sized if f not in self.hugetlb_files]
        if not plain:
            return out
        out.append((0.8, lambda: self.pwrite_pread(plain, write=True)))
        out.append((0.8, lambda: self.pwrite_pread(plain, write=False)))
        out.append((0.4, lambda: self.fadvise(plain)))
        out.append((0.2, lambda: [{"op": "fsync", "file": self.rng.choice(plain)}]))
        shmem = [f for f in sized if f in self.shmem_files]
        if shmem:
            out.append((1.0, lambda: self.fallocate(shmem)))
        return out

    # -- ops ----------------------------------------------------------------------------------

    def size(self) -> int:
        rng = self.rng
        r = rng.random()
        if r < 0.3:
            pages = HPAGE_PAGES * rng.randint(1, 8)
        elif r < 0.55:
            pages = max(1, HPAGE_PAGES * rng.randint(1, 7) + rng.choice((-1, 1)) * rng.randint(1, 64))
        elif r < 0.85:
            pages = rng.randint(1, 64)
        else:
            pages = rng.randint(1, MAX_REGION // PAGE)
        size = pages * PAGE
        if size > PAGE and rng.random() < 0.05:
            size -= rng.randint(1, PAGE - 1)
        return size

    def mmap(self, task: Task) -> list[dict[str, Any]]:
        rng = self.rng
        name = f"r{next(self.names)}"
        size = self.size()
        op: dict[str, Any] = {"op": "mmap", "name": name, "size": _size_text(rng, size)}
        a = rng.random()
        if a < 0.35:
            op["align"] = "2M"
        elif a < 0.5:
            op["align"] = rng.choice(("4K", 4096))
        prot = rng.choices(("rw", "r", "none"), (8, 1, 1))[0]
        if prot != "rw" or rng.random() < 0.2:
            op["prot"] = prot
        shared = rng.random() < 0.25
        if shared:
            op["flags"] = ["shared", "anonymous"]
        elif rng.random() < 0.3:
            op["flags"] = ["private", "anonymous"]
        r = Region(size, bytearray([PROT[prot]]) * -(-size // PAGE), shared, size >= HPAGE)
        r.aligned = op.get("align") == "2M"
        task.regions[name] = r
        if task.thread:
            task.own.add(name)
        return self.mapped(task, r, op)

    def create(self) -> list[dict[str, Any]]:
        """A file on ext4 (cold: on the device, not cached) or tmpfs (empty and sparse), and now
        and then its first write()s: a tmpfs file filled, an ext4 one cached in part."""
        rng = self.rng
        name = f"f{len(self.files)}"
        fs = rng.choices(("ext4", "tmpfs", "memfd"), (3, 1, 1))[0]
        r = rng.random()
        if r < 0.4:
            size = HPAGE * rng.randint(1, 8)
        elif r < 0.9:
            size = PAGE * rng.randint(1, MAX_FILE // PAGE)
        else:
            size = rng.randint(1, 5 * HPAGE)
        self.files[name] = size
        ops: list[dict[str, Any]] = [{"op": "create", "file": name, "size": _size_text(rng, size), "fs": fs}]
        hugetlb = False
        if fs == "memfd":
            # memfd_create + ftruncate: a tmpfs file of the internal mount, sparse; or with
            # MFD_HUGETLB a hugetlbfs file of whole huge pages (the pool sized to hold them).
            hugetlb = self.huge_rng.random() < 0.5
            if hugetlb:
                size = self.files[name] = min(MAX_FILE, max(HPAGE, -(-size // HPAGE) * HPAGE))
                self.hugetlb_files.add(name)
            ops = [{"op": "memfd_create", "file": name, "size": _size_text(rng, size)}]
            if hugetlb:
                ops[0]["hugetlb"] = True
            fs = "tmpfs"
        if fs == "tmpfs":
            self.shmem_files.add(name)
        if fs == "tmpfs" and rng.random() < 0.7 and not hugetlb:
            ops.append({"op": "pwrite", "file": name, "chunk": rng.choice((PAGE, 1 << 20))})
        elif fs == "ext4" and rng.random() < 0.2:
            ops.append(self.pwrite_pread([name], write=True)[0])
        return ops

    def file_range(self, name: str) -> dict[str, Any]:
        """offset and length of a byte range inside a file: all of it, page-aligned pieces or
        any bytes."""
        rng = self.rng
        size = self.files[name]
        x = rng.random()
        if x < 0.3:
            return {}
        if x < 0.7:
            pages = -(-size // PAGE)
            s = rng.randrange(pages)
            e = rng.randint(s + 1, min(pages, s + rng.choice((1, 16, 512, pages))))
            return {"offset": s * PAGE, "length": min(e * PAGE, size) - s * PAGE}
        off = rng.randrange(size)
        return {"offset": off, "length": rng.randint(1, size - off)}

    def pwrite_pread(self, names: list[str], write: bool) -> list[dict[str, Any]]:
        rng = self.rng
        name = rng.choice(names)
        op: dict[str, Any] = {"op": "pwrite" if write else "pread", "file": name, **self.file_range(name)}
        chunk = rng.choice((None, None, PAGE, 1 << 20, 65536, 100, 12288))
        if chunk is not None:
            op["chunk"] = chunk
        if write and rng.random() < 0.7:
            op["value"] = rng.randint(0, 255)
        return [op]

    def fallocate(self, names: list[str]) -> list[dict[str, Any]]:
        """fallocate of a range inside a tmpfs file or memfd: allocate (keep_size or not: the
        file does not grow) or punch a hole."""
        rng = self.rng
        name = rng.choice(names)
        rng_ = self.file_range(name)
        op: dict[str, Any] = {"op": "fallocate", "file": name, "offset": rng_.get("offset", 0)}
        op["length"] = rng_.get("length", self.files[name] - op["offset"])
        mode = rng.choices(((), ("keep_size",), ("punch_hole", "keep_size")), (2, 1, 3))[0]
        if mode:
            op["mode"] = list(mode)
        return [op]

    def fadvise(self, names: list[str]) -> list[dict[str, Any]]:
        """WILLNEED, or DONTNEED after an fsync (DONTNEED only starts the writeback of dirty
        folios, and whether it ends before the invalidation is the device's timing)."""
        rng = self.rng
        name = rng.choice(names)
        advice = rng.choice(("dontneed", "willneed"))
        op = {"op": "fadvise", "file": name, "advice": advice, **self.file_range(name)}
        return [{"op": "fsync", "file": name}, op] if advice == "dontneed" else [op]

    def mmap_file(self, task: Task, names: list[str]) -> list[dict[str, Any]]:
        """A private or shared mapping of (part of) a file, never past its end."""
        rng = self.rng
        file = rng.choice(names)
        pages = -(-self.files[file] // PAGE)
        first = 0 if rng.random() < 0.6 else rng.randrange(pages)
        if rng.random() < 0.2 and pages - first > HPAGE_PAGES:
            first = rng.randrange(0, pages - HPAGE_PAGES, HPAGE_PAGES)
        most = pages - first
        npages = most if rng.random() < 0.5 else rng.randint(1, most)
        hugetlb = file in self.hugetlb_files
        if hugetlb:
            # Whole huge pages of the file, shared (a private mapping of it is not modelled).
            first -= first % HPAGE_PAGES
            npages = min(-(-npages // HPAGE_PAGES) * HPAGE_PAGES, pages - first)
        size = npages * PAGE
        name = f"r{next(self.names)}"
        shared = rng.random() < 0.4 or hugetlb
        op: dict[str, Any] = {"op": "mmap", "name": name, "size": _size_text(rng, size), "file": file}
        if first or rng.random() < 0.2:
            op["file_offset"] = first * PAGE
        op["flags"] = ["shared" if shared else "private"]
        if rng.random() < 0.35:
            op["align"] = "2M"
        prot = rng.choices(("rw", "r", "none"), (5, 4, 1))[0]
        if prot != "rw" or rng.random() < 0.2:
            op["prot"] = prot
        r = Region(size, bytearray([PROT[prot]]) * npages, shared, size >= HPAGE, file=file, hugetlb=hugetlb)
        task.regions[name] = r
        if task.thread:
            task.own.add(name)
        return self.mapped(task, r, op)

    def page_range(self, r: Region, runs: list[tuple[int, int]]) -> tuple[int, int]:
        """A page range [s, e) inside one of `runs`: whole, across a 2 MiB boundary or random."""
        rng = self.rng
        s0, e0 = rng.choice(runs)
        x = rng.random()
        cross = [b for b in range((s0 // HPAGE_PAGES + 1) * HPAGE_PAGES, e0, HPAGE_PAGES)]
        if x < 0.25:
            s, e = s0, e0
        elif x < 0.5 and cross:
            b = rng.choice(cross)
            s, e = b - rng.randint(1, min(b - s0, 600)), b + rng.randint(1, min(e0 - b, 600))
        else:
            s = rng.randint(s0, e0 - 1)
            e = s + (rng.randint(1, min(16, e0 - s)) if rng.random() < 0.6 else rng.randint(1, e0 - s))
        if r.hugetlb:
            # Whole huge pages (the run's ends are huge-page boundaries too).
            s, e = s - s % HPAGE_PAGES, -(-e // HPAGE_PAGES) * HPAGE_PAGES
        return s, e

    def range_fields(self, r: Region, s: int, e: int) -> dict[str, Any]:
        """offset and length fields of a page range (left out when they are the defaults)."""
        out: dict[str, Any] = {}
        if s or self.rng.random() < 0.2:
            out["offset"] = s * PAGE
        if e < len(r.pages) or self.rng.random() < 0.3:
            out["length"] = (e - s) * PAGE
        return out

    def munmap(self, task: Task, names: list[str]) -> list[dict[str, Any]]:
        name = self.rng.choice(names)
        r = task.regions[name]
        r.whole = False
        if self.rng.random() < 0.3:
            s, e = 0, len(r.pages)
        else:
            s, e = self.page_range(r, [(0, len(r.pages))])
        for q in range(s, e):
            r.pages[q] = UNMAPPED
        r.set_locked(s, e, False)
        return [{"op": "munmap", "region": name, **self.range_fields(r, s, e)}]

    def mlock(self, task: Task, names: list[str], mult: int) -> list[dict[str, Any]]:
        rng = self.rng
        name = rng.choice(names)
        r = task.regions[name]
        lock = rng.random() < 0.7
        onfault = lock and rng.random() < 0.35
        if r.hugetlb:
            return []  # mlock leaves a hugetlb vma unlocked (VM_LOCKED is not set there)
        # mlock's populate stops at a PROT_NONE page (ENOMEM); munlock takes any mapped range.
        runs = r.runs(lambda x: x in (R, RW) if lock else x != UNMAPPED)
        if not runs:
            return []
        s, e = self.page_range(r, runs)
        if lock and not onfault:
            cost = mult * _touched_bytes(r, list(range(s, e)))
            if self.touched + cost > MAX_TOUCHED:
                return []
            self.touched += cost
        r.whole = False
        r.set_locked(s, e, lock)
        op = {"op": "mlock" if lock else "munlock", "region": name, **self.range_fields(r, s, e)}
        if onfault:
            op["onfault"] = True
        return [op]

    def mlockall(self, task: Task, depth: int, mult: int, loop: bool) -> list[dict[str, Any]]:
        """mlockall (MCL_CURRENT only where the runner's own memory is as mmsim's stand-ins have
        it: the first process's own program, before any fork or thread; never MCL_ONFAULT alone,
        EINVAL: a generated workload makes no call that fails), or munlockall."""
        rng = self.rng
        if rng.random() < 0.3:
            task.munlockall()
            return [{"op": "munlockall"}]
        choices = [("future",), ("future", "onfault")]
        weights = [2.0, 1.5]
        if not task.thread and depth == 0 and not loop and not task.no_current:
            choices += [("current",), ("current", "future"), ("current", "onfault"), ("current", "future", "onfault")]
            weights += [4.0, 4.0, 4.0, 2.0]
        flags = list(rng.choices(choices, weights)[0])
        rng.shuffle(flags)
        op = {"op": "mlockall", "flags": flags}
        if "current" in flags and "onfault" not in flags:
            cost = mult * sum(populated_bytes(r) for r in task.regions.values())
            if self.touched + cost > MAX_TOUCHED:
                return []
            self.touched += cost
        task.mlockall(set(flags))
        assert set(flags) <= set(MCL)
        return [op]

    def mapped(self, task: Task, r: Region, op: dict[str, Any]) -> list[dict[str, Any]]:
        """An mmap op made: under mlockall's MCL_FUTURE the mapping is locked and populated
        (within the budget, else no mmap)."""
        if task.lock_future[0]:
            cost = populated_bytes(r) + (HPAGE if op.get("align") else 0)
            if task.lock_future[0] == 1 and self.touched + cost > MAX_TOUCHED:
                del task.regions[op["name"]]
                task.own.discard(op["name"])
                return []
            if task.mapped_under_def_flags(r):
                self.touched += cost
        return [op]

    def brk(self, task: Task, mult: int) -> list[dict[str, Any]]:
        """sbrk: the heap grows by 1-64 pages or up to 4 MiB, or shrinks by part or all of it
        (page multiples, within MAX_REGION); under MCL_FUTURE the growth is populated, within
        the budget."""
        rng = self.brk_rng
        r = task.regions.get(HEAP)
        size = r.size if r else 0
        if size and rng.random() < 0.4:
            delta = -PAGE * rng.randint(1, size // PAGE)
        else:
            pages = rng.randint(1, 64) if rng.random() < 0.6 else rng.randint(1, 2 * HPAGE_PAGES)
            delta = min(pages * PAGE, MAX_REGION - size)
            if delta <= 0:
                return []
            if task.lock_future[0] == LOCK_POPULATE:
                cost = mult * delta  # at most: a THP-backed growth counts its huge pages
                if self.touched + cost + HPAGE > MAX_TOUCHED:
                    return []
                self.touched += cost + HPAGE
        if r is None:
            r = task.regions[HEAP] = Region(0, bytearray(), False, False, heap=True)
        r.brk(size + delta, bool(task.lock_future[0]))
        text = _size_text(rng, abs(delta))
        if delta < 0:
            text = f"-{text}" if isinstance(text, str) else -text
        return [{"op": "brk", "name": HEAP, "delta": text}]

    def mremap(self, task: Task, names: list[str], loop: bool) -> list[dict[str, Any]]:
        """mremap of a whole region (MREMAP_MAYMOVE), or of part of one: moved out grown
        (its range ends before the region's, so it must move), left in place without
        MREMAP_MAYMOVE (the same size or a shrink), or moved with MREMAP_DONTUNMAP; a range
        that moves gets a region name of its own."""
        rng = self.rng
        name = rng.choice(names)
        r = task.regions[name]
        n = len(r.pages)
        kind = rng.choices(("whole", "move", "inplace", "dontunmap"), (4, 2, 1, 2))[0]
        # A loop repeats its ops: only the whole-region mremap may run twice.
        if loop or (kind == "move" and n < 2) or (len(task.regions) >= 8 and kind in ("move", "dontunmap")):
            kind = "whole"
        if kind == "whole":
            size = self.size()
            r.remap(size)
            return [{"op": "mremap", "region": name, "size": _size_text(rng, size)}]
        s = rng.randrange(n - 1) if kind == "move" else rng.randrange(n)
        e = rng.randint(s + 1, n - 1 if kind == "move" else n)
        op: dict[str, Any] = {"op": "mremap", "region": name, "offset": s * PAGE, "length": (e - s) * PAGE}
        if kind == "inplace":
            size = rng.randint(1, e - s) * PAGE
            op |= {"size": size, "maymove": False}
            r.shrink_range(s, e, size // PAGE)
            return [op]
        new = f"r{next(self.names)}"
        grow = min(e - s + MAX_GROW, MAX_REGION // PAGE)
        size = (e - s) * PAGE if kind == "dontunmap" else rng.randint(e - s + 1, grow) * PAGE
        op |= {"size": size, "name": new}
        if kind == "dontunmap":
            op["dontunmap"] = True
        task.regions[new] = r.move_range(s, e, size, dontunmap=kind == "dontunmap")
        if task.thread:
            task.own.add(new)
        return [op]

    def mprotect(self, task: Task, names: list[str]) -> list[dict[str, Any]]:
        name = self.rng.choice(names)
        r = task.regions[name]
        r.whole = False
        s, e = self.page_range(r, r.runs(lambda x: x != UNMAPPED))
        prot = self.rng.choices(("rw", "r", "none"), (4, 3.5, 2.5))[0]
        for q in range(s, e):
            r.pages[q] = PROT[prot]
        return [{"op": "mprotect", "region": name, "prot": prot, **self.range_fields(r, s, e)}]

    def madvise(self, task: Task, names: list[str], mult: int) -> list[dict[str, Any]]:
        collapsible = [n for n in names if task.regions[n].collapsible() and n not in task.pinned]
        if collapsible and not task.thread and self.rng.random() < 0.6:
            # MADV_COLLAPSE of anonymous memory, where it succeeds: a byte of each 2 MiB
            # written (a PTE table and an anon_vma under every PMD), then the whole region.
            name = self.rng.choice(collapsible)
            r = task.regions[name]
            cost = mult * _touched_bytes(r, list(range(len(r.pages))))
            if self.touched + cost <= MAX_TOUCHED:
                self.touched += cost
                return [
                    {"op": "write", "region": name, "stride": "2M", "value": 7},
                    {"op": "madvise", "region": name, "advice": "collapse"},
                ]
        name = self.rng.choice(names)
        r = task.regions[name]
        r.whole = False
        s, e = self.page_range(r, r.runs(lambda x: x != UNMAPPED))
        advice = self.rng.choices(FILE_ADVICE, (4, 2.5, 3.5, 0.5, 0.5, 0.5, 0.5, 1.5 if r.file else 0))[0]
        if advice == "dontneed" and r.any_locked(s, e):
            # MADV_DONTNEED refuses a VM_LOCKED vma (EINVAL): advise it instead.
            advice = "hugepage"
        # Now and then one of the advice added later, where it succeeds (random_checker's
        # LAZY_ADVICE), from a stream of its own.
        unlocked = not r.any_locked(s, e)
        lazy = [(a, 1.0) for a in FORK_ADVICE]
        if unlocked and not r.shared and not r.file:
            lazy.append(("free", 2.0))
        if unlocked and r.shared:
            lazy.append(("remove", 3.0))
        if self.lazy_rng.random() < 0.3:
            advice = self.lazy_rng.choices([a for a, _ in lazy], [w for _, w in lazy])[0]
        if self.cgroups and unlocked and not r.hugetlb and self.pressure_rng.random() < 0.3:
            # Under memory pressure: MADV_PAGEOUT or MADV_COLD, from a stream of their own.
            advice = self.pressure_rng.choice(PRESSURE_ADVICE)
        if r.hugetlb and advice not in HUGETLB_ADVICE:
            advice = "dontneed" if unlocked else "normal"
        if advice in FORK_ADVICE:
            r.set_dontfork(s, e, advice == "dontfork")
        return [{"op": "madvise", "region": name, "advice": advice, **self.range_fields(r, s, e)}]

    def byte_range(self, r: Region, s: int, e: int) -> tuple[int, int]:
        """A byte range [off, end) inside pages [s, e) and the region's size."""
        rng = self.rng
        hi = min(e * PAGE, r.size)
        if rng.random() < 0.6:
            off = s * PAGE
            end = hi if rng.random() < 0.5 else min(hi, off + rng.randint(1, max(1, (e - s))) * PAGE)
            if end - off > 1 and rng.random() < 0.2:
                end -= rng.randint(1, min(PAGE - 1, end - off - 1))
        else:
            off = min(hi - 1, s * PAGE + rng.randint(0, PAGE - 1))
            end = rng.randint(off + 1, hi)
        return off, end

    def stride(self, length: int) -> int | None:
        rng = self.rng
        st = rng.choice(STRIDES)
        if st == "random":
            st = rng.randint(2, HPAGE)
        if st is not None and (length // st > 1 << 20 or (st == 1 and length > 64 << 10)):
            st = None
        return st

    def access(self, task: Task, mult: int, write: bool) -> list[dict[str, Any]]:
        rng = self.rng
        ok = (lambda x: x == RW) if write else (lambda x: x in (R, RW))
        names = [n for n, r in task.regions.items() if r.runs(ok)]
        name = rng.choice(names)
        r = task.regions[name]
        s, e = self.page_range(r, r.runs(ok))
        off, end = self.byte_range(r, s, e)
        stride = self.stride(end - off)
        cost = mult * _touched_bytes(r, touched_pages(off, end - off, stride or PAGE))
        if self.touched + cost > MAX_TOUCHED:
            return []
        self.touched += cost
        op: dict[str, Any] = {"op": "write" if write else "read", "region": name}
        if off or rng.random() < 0.2:
            op["offset"] = off
        if end < r.size or r.size % PAGE or rng.random() < 0.3:
            op["length"] = end - off
        if stride is not None:
            op["stride"] = stride
        if write and rng.random() < 0.7:
            op["value"] = rng.randint(0, 255)
        pattern = rng.random()
        if pattern < 0.12:
            op["pattern"] = "random"
            op["count"] = rng.randint(1, 2048)
            op["seed"] = rng.randint(0, (1 << 64) - 1)
        elif pattern < 0.2 and (stride or PAGE) >= 128:
            op["block"] = rng.choice((128, 256, 1024, PAGE))
            if rng.random() < 0.7:
                op["block_stride"] = rng.choice((8, 64, 128))
        return [op]

    def compare(self, task: Task, mult: int) -> list[dict[str, Any]]:
        rng = self.rng
        ok = lambda x: x in (R, RW)  # noqa: E731
        names = [n for n, r in task.regions.items() if r.runs(ok)]
        a, b = rng.choice(names), rng.choice(names)
        ra, rb = task.regions[a], task.regions[b]
        sa, ea = rng.choice(ra.runs(ok))
        sb, eb = rng.choice(rb.runs(ok))
        oa = sa * PAGE + rng.randint(0, 64) * 64
        ob = sb * PAGE + rng.randint(0, 64) * 64
        most = min(ea * PAGE, ra.size) - oa, min(eb * PAGE, rb.size) - ob
        if min(most) <= 0:
            return []
        length = rng.randint(1, min(*most, 4 << 20))
        stride = rng.choice((None, None, 64, 4096))
        cost = mult * (
            _touched_bytes(ra, touched_pages(oa, length, stride or 1))
            + _touched_bytes(rb, touched_pages(ob, length, stride or 1))
        )
        if self.touched + cost > MAX_TOUCHED:
            return []
        self.touched += cost
        op: dict[str, Any] = {"op": "compare", "a": {"region": a, "offset": oa}, "b": {"region": b, "offset": ob}}
        op["length"] = length
        if stride:
            op["stride"] = stride
        return [op]

    def atomic(self, task: Task, mult: int) -> list[dict[str, Any]]:
        rng = self.rng
        names = [n for n, r in task.regions.items() if RW in r.pages]
        name = rng.choice(names)
        r = task.regions[name]
        page = rng.choice([i for i, x in enumerate(r.pages) if x == RW])
        off = page * PAGE + 8 * rng.randint(0, PAGE // 8 - 1)
        if off + 8 > r.size:
            return []
        self.touched += mult * _touched_bytes(r, [page])
        return [{"op": "atomic", "region": name, "offset": off, "count": rng.randint(1, 64)}]

    def spawn(self, kind: str, make: Callable[[], Task], most: int, ops: int, depth: int, mult: int) -> dict[str, Any]:
        """A fork or thread op of 1..`most` tasks (within MAX_TASKS), each running a program of
        1..`ops` ops in the task `make` returns."""
        rng = self.rng
        n = rng.randint(1, max(1, min(most, (MAX_TASKS - self.tasks) // mult)))
        self.tasks += mult * n
        child = make()
        op: dict[str, Any] = {"op": kind, "program": self.program(child, depth + 1, rng.randint(1, ops), mult * n)}
        if n > 1 or rng.random() < 0.2:
            op["count"] = n
        return op

    def cgroup_write(self) -> list[dict[str, Any]]:
        """A write of a cgroup's memory.max (16-256 MiB, or "max" where its swap is not limited)
        or memory.swap.max ("max", 0 or 16M, where memory.max is set): cgroup v1's limits."""
        prng = self.pressure_rng
        name = prng.choice(sorted(self.cgroups))
        state = self.cgroups[name]
        if state[0] is not None and prng.random() < 0.4:
            value: Any = prng.choice(("max", 0, "16M"))
            state[1] = None if value == "max" else _size(value)
            return [{"op": "cgroup_write", "cgroup": name, "file": "memory.swap.max", "value": value}]
        limit = prng.choice((16, 32, 64, 128, 256)) << 20
        if state[1] is None and prng.random() < 0.2:
            state[0] = None
            return [{"op": "cgroup_write", "cgroup": name, "file": "memory.max", "value": "max"}]
        state[0] = limit
        return [{"op": "cgroup_write", "cgroup": name, "file": "memory.max", "value": f"{limit >> 20}M"}]

    def memory_reclaim(self) -> list[dict[str, Any]]:
        """A write to a cgroup's memory.reclaim (cgroup v2): 1-64 MiB, a swappiness now and then."""
        prng = self.pressure_rng
        op: dict[str, Any] = {"op": "memory_reclaim", "cgroup": prng.choice(sorted(self.cgroups))}
        op["bytes"] = f"{prng.choice((1, 4, 16, 64))}M"
        if prng.random() < 0.3:
            op["swappiness"] = prng.choice((0, 60, 200))
        return [op]

    def fork(self, task: Task, depth: int, mult: int, loop: bool) -> list[dict[str, Any]]:
        rng = self.rng
        op = self.spawn("fork", task.fork, 3, 7, depth, mult)
        if self.cgroups and self.pressure_rng.random() < 0.4:
            op["cgroup"] = self.pressure_rng.choice(self.joinable())
        task.children = True
        if loop and rng.random() < 0.7:
            task.children = False
            return [op, {"op": "wait"}]
        return [op]

    def thread(self, task: Task, depth: int, mult: int) -> list[dict[str, Any]]:
        return [self.spawn("thread", task.spawn_thread, 2, 5, depth, mult)]

    def loop(self, task: Task, depth: int, mult: int) -> list[dict[str, Any]]:
        rng = self.rng
        n = rng.choice((1, 2, 2, 3, 4))
        body: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 4)):
            body.extend(self.op(task, depth, mult * n, loop=True))
        if not body:
            return []
        if rng.random() < 0.3:
            body.insert(rng.randint(0, len(body)), {"op": "snapshot", "label": self.label()})
        return [{"op": "loop", "count": n, "body": body}]

    def wait(self, task: Task) -> list[dict[str, Any]]:
        task.children = False
        task.pinned.clear()
        return [{"op": "wait"}]


def _size_text(rng: random.Random, size: int) -> int | str:
    """A size as a workload may write it: bytes, or now and then "NK" / "NM"."""
    if rng.random() < 0.3:
        if size % (1 << 20) == 0:
            return f"{size >> 20}M"
        if size % 1024 == 0:
            return f"{size >> 10}K"
    return size


@dataclass
class GeneratedCase:
    """A generated case: its index, workload (with `knobs`: the host THP knobs it runs
    under) and the number of invalid workloads drawn and thrown away before it."""

    index: int
    workload: dict[str, Any]
    invalid: int = 0

    @property
    def knobs(self) -> dict[str, str]:
        return dict(self.workload["knobs"])


def generate_case(
    seed: int,
    index: int,
    threads: bool | None = None,
    parse: bool = True,
    pressure: float | None = None,
    memcg_v2: bool = False,
) -> GeneratedCase:
    """Case `index` of `seed`: a valid, safe random workload (see the module's doc); under
    memory pressure with probability `pressure` (default :data:`PRESSURE`), with memory_reclaim
    ops where `memcg_v2` (the host's memory controller is on cgroup v2)."""
    threads = THREADS if threads is None else threads
    pressure = PRESSURE if pressure is None else pressure
    for attempt in itertools.count():
        rng = random.Random(f"{seed}:{index}" if attempt == 0 else f"{seed}:{index}:{attempt}")
        w = Generator(rng, threads, pressure, memcg_v2).workload(f"random-{seed}-{index}")
        if check_workload(w) or (parse and parse_error(w)) or count_ops(w["program"]) == 0:
            if attempt >= 100:
                raise MmsimError(f"validate --random: no valid workload for case {index} of seed {seed}")
            continue
        return GeneratedCase(index, w, attempt)
    raise AssertionError("unreachable")
