"""Random workloads for kernel-differential fuzzing (``mmsim validate --random``): the
generator and the safety check.

The generator is deterministic: case ``i`` of seed ``s`` is drawn from
``random.Random(f"{s}:{i}")`` (a regenerated case from ``f"{s}:{i}:{attempt}"``), so one
case can be re-created without the others. Every workload it emits is checked by
:func:`check_workload`, a model of each process's mappings and protections that keeps the
host safe (no access to unmapped or protected memory, at most :data:`MAX_TASKS` tasks and
:data:`MAX_TOUCHED` bytes touched), and by mmsim's own parser.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mmsim._mmsim import MmsimError

#: Generate `thread` ops (the native runner runs them once it supports CLONE_VM tasks).
THREADS = True
#: At most this many tasks (processes and threads, the first included) per workload.
MAX_TASKS = 8
#: At most this many bytes touched per workload, all tasks and loop iterations together (a
#: touched 2 MiB range of a region that can hold a THP counts 2 MiB).
MAX_TOUCHED = 512 << 20
#: Runs of the kernel and mmsim a shrink may take per failure.
SHRINK_RUNS = 300

PAGE = 4096
HPAGE = 2 << 20
HPAGE_PAGES = HPAGE // PAGE
MAX_REGION = 16 << 20
#: At most this many files per workload, each at most MAX_FILE bytes.
MAX_FILES = 3
MAX_FILE = 16 << 20
#: madvise advice for any region, and for file mappings only (MADV_COLLAPSE of anonymous
#: memory is not modelled: README's deliberate differences).
ADVICE = ("hugepage", "nohugepage", "dontneed", "willneed", "sequential", "random", "normal")
FILE_ADVICE = (*ADVICE, "collapse")
ENABLED = "transparent_hugepage/enabled"
ZERO_PAGE = "transparent_hugepage/use_zero_page"
#: The host knobs each case sets, and their values.
DEFRAG = "transparent_hugepage/defrag"
KNOBS = {
    ENABLED: ("always", "madvise", "never"),
    ZERO_PAGE: ("0", "1"),
    DEFRAG: ("always", "defer", "defer+madvise", "madvise", "never"),
}
LABEL = re.compile(r"[A-Za-z0-9_.-]+")

# A page's state in the model: unmapped, or mapped with a protection.
UNMAPPED, NONE, R, RW = 0, 1, 2, 3
PROT = {"none": NONE, "r": R, "rw": RW}


# --------------------------------------------------------------------------------------------
# The model: what each process has mapped, page by page
# --------------------------------------------------------------------------------------------


@dataclass
class Region:
    """One named mapping as a process sees it: the state of each of its pages."""

    size: int  # bytes, as the workload gives it (mmsim's default lengths end here)
    pages: bytearray
    shared: bool
    thp: bool  # can hold a THP (at least 2 MiB long)
    whole: bool = True  # one vma: never munmapped, mprotected or madvised in part or whole
    locked: bytearray | None = None  # 1 for each page in a VM_LOCKED vma (None: none ever was)
    file: str | None = None  # the file it maps (None: anonymous memory)

    def copy(self) -> Region:
        """The region as a fork child has it: the same pages, none locked (dup_mmap clears
        VM_LOCKED)."""
        return Region(self.size, bytearray(self.pages), self.shared, self.thp, self.whole, file=self.file)

    def any_locked(self, s: int, e: int) -> bool:
        """Is a page of [s, e) in a locked vma (MADV_DONTNEED there is EINVAL)?"""
        return self.locked is not None and any(self.locked[s:e])

    def set_locked(self, s: int, e: int, lock: bool) -> None:
        if self.locked is None:
            if not lock:
                return
            self.locked = bytearray(len(self.pages))
        self.locked[s:e] = (b"\x01" if lock else b"\x00") * (e - s)

    def remappable(self) -> bool:
        """A private anonymous region still one vma with one protection: mremap takes it whole."""
        one_prot = len(set(self.pages)) == 1 and self.pages[0] != UNMAPPED
        return not self.shared and self.file is None and self.whole and one_prot

    def remap(self, size: int) -> None:
        """mremap to `size` bytes: the pages keep their protection, new ones take it too."""
        self.pages = bytearray([self.pages[0]]) * -(-size // PAGE)
        self.locked = None
        self.size = size
        self.thp = size >= HPAGE

    def runs(self, ok: Callable[[int], bool]) -> list[tuple[int, int]]:
        """Maximal runs [start, end) of pages whose state satisfies `ok`."""
        out, start = [], None
        for i, s in enumerate(self.pages):
            if ok(s):
                if start is None:
                    start = i
            elif start is not None:
                out.append((start, i))
                start = None
        if start is not None:
            out.append((start, len(self.pages)))
        return out


@dataclass
class Task:
    """The generator's and checker's view of one task: its regions by name."""

    regions: dict[str, Region]
    thread: bool = False
    own: set[str] = field(default_factory=set)  # regions a thread mapped itself
    pinned: set[str] = field(default_factory=set)  # shared with running threads: no munmap/mprotect
    children: bool = False  # created tasks not waited for yet

    def fork(self) -> Task:
        return Task({k: r.copy() for k, r in self.regions.items()})

    def spawn_thread(self) -> Task:
        self.pinned |= set(self.regions)
        return Task(dict(self.regions), thread=True)

    def may_change(self, name: str) -> bool:
        """May this task munmap or mprotect the region (no thread of its mm uses it)?"""
        return name not in self.pinned and (not self.thread or name in self.own)


def _size(v: Any) -> int:
    from mmsim.native import parse_size

    return parse_size(v)


def touched_pages(offset: int, length: int, stride: int) -> list[int]:
    """The pages a read or write of one byte every `stride` bytes touches."""
    if length <= 0:
        return []
    last = offset + (length - 1) // stride * stride
    if stride <= PAGE:
        return list(range(offset // PAGE, last // PAGE + 1))
    return sorted({(offset + k * stride) // PAGE for k in range((length - 1) // stride + 1)})


def _touched_bytes(region: Region, pages: list[int]) -> int:
    if region.thp:
        return len({p // HPAGE_PAGES for p in pages}) * HPAGE
    return len(pages) * PAGE


class Checker:
    """Walks a workload's op tree the way the processes run it and collects every problem:
    a region used before it is mapped or after it is gone, an access to unmapped or protected
    memory, mprotect or madvise over a hole, a thread changing mappings others use, too many
    tasks or bytes touched."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.tasks = 1
        self.touched = 0
        self.files: dict[str, int] = {}  # name -> size in bytes

    def problem(self, path: str, msg: str) -> None:
        self.problems.append(f"{path}: {msg}")

    def region(self, task: Task, path: str, name: Any) -> Region | None:
        r = task.regions.get(name) if isinstance(name, str) else None
        if r is None:
            self.problem(path, f"region {name!r} is not mapped in this task")
        return r

    def extent(self, r: Region, op: Mapping[str, Any], path: str, *, aligned: bool) -> tuple[int, int] | None:
        """The byte range [offset, end) an op with `offset` and `length` covers."""
        try:
            off = _size(op.get("offset", 0))
            length = _size(op["length"]) if "length" in op else None
        except MmsimError as e:
            self.problem(path, str(e))
            return None
        if off < 0 or off >= r.size or (length is not None and length <= 0):
            self.problem(path, f"range offset {off} length {length} is outside the region ({r.size} bytes)")
            return None
        if aligned:
            if off % PAGE:
                self.problem(path, f"offset {off} is not page-aligned")
                return None
            end = len(r.pages) * PAGE if length is None else off + -(-length // PAGE) * PAGE
        else:
            if length is None and r.size % PAGE:
                # The runner's region ends at the next page boundary, mmsim's at `size`.
                self.problem(path, "a default length on a region whose size is not a page multiple")
                return None
            end = r.size if length is None else off + length
        if end > len(r.pages) * PAGE or (not aligned and end > r.size):
            self.problem(path, f"range offset {off} length {length} is outside the region ({r.size} bytes)")
            return None
        return off, end

    def access(self, task: Task, r: Region, path: str, pages: list[int], need: int, mult: int, count: bool) -> None:
        bad = [p for p in pages if r.pages[p] < need or (need == R and r.pages[p] not in (R, RW))]
        if bad:
            what = "read" if need == R else "written"
            self.problem(path, f"page {bad[0]} would be {what} but is {_state_name(r.pages[bad[0]])}")
        if count:
            self.touched += mult * _touched_bytes(r, pages)

    def walk(
        self, ops: Any, task: Task, path: str, mult: int = 1, depth: int = 0, count: bool = True, loop: bool = False
    ) -> None:
        if not isinstance(ops, list):
            self.problem(path, "not a list of ops")
            return
        for i, op in enumerate(ops):
            p = f"{path}[{i}]"
            if not isinstance(op, Mapping):
                self.problem(p, "not an op")
                continue
            kind = op.get("op")
            if kind == "exit":
                if task.pinned:
                    self.problem(p, "exit while threads run")
                return
            self.op(op, kind, task, p, mult, depth, count, loop)
        if task.pinned and not loop:
            self.problem(path, "the task ends before waiting for its threads")

    def op(self, op: Mapping[str, Any], kind: Any, task: Task, p: str, mult: int, depth: int, count: bool, loop: bool):
        if kind == "mmap":
            name = op.get("name")
            if not isinstance(name, str) or not LABEL.fullmatch(name) or len(name) > 60:
                self.problem(p, f"region name {name!r}")
                return
            if loop:
                self.problem(p, "mmap inside a loop")
            if name in task.regions or (task.thread and name in task.pinned):
                self.problem(p, f"region {name!r} is mapped again")
            try:
                size = _size(op.get("size", 0))
            except MmsimError as e:
                self.problem(p, str(e))
                return
            if not 0 < size <= MAX_REGION:
                self.problem(p, f"size {size} outside 1..{MAX_REGION}")
                return
            prot = op.get("prot", "rw")
            flags = op.get("flags", ["private", "anonymous"])
            if prot not in PROT or op.get("addr") is not None or op.get("fixed"):
                self.problem(p, "an mmap the generator does not make (prot, addr, fixed)")
                return
            file = op.get("file")
            if file is not None and not self.file_mapping(op, file, size, p):
                return
            if len(task.regions) >= 60:
                self.problem(p, "too many regions for the native runner")
            npages = -(-size // PAGE)
            task.regions[name] = Region(
                size, bytearray([PROT[prot]]) * npages, "shared" in flags, size >= HPAGE, file=file
            )
            if task.thread:
                task.own.add(name)
        elif kind in FILE_OPS:
            self.file_op(op, kind, task, p, depth, loop)
        elif kind in ("munmap", "mprotect", "madvise"):
            r = self.region(task, p, op.get("region"))
            if r is None:
                return
            if not any(r.pages):
                self.problem(p, f"region {op.get('region')!r} was unmapped")
                return
            ext = self.extent(r, op, p, aligned=True)
            if ext is None:
                return
            pages = range(ext[0] // PAGE, ext[1] // PAGE)
            r.whole = False
            if kind != "madvise" and not task.may_change(op["region"]):
                self.problem(p, f"{kind} of a region a thread of this process may use")
            if kind == "munmap":
                for q in pages:
                    r.pages[q] = UNMAPPED
                r.set_locked(ext[0] // PAGE, ext[1] // PAGE, False)
            else:
                if any(r.pages[q] == UNMAPPED for q in pages):
                    self.problem(p, f"{kind} over a hole")
                if kind == "mprotect":
                    if op.get("prot") not in PROT:
                        self.problem(p, f"prot {op.get('prot')!r}")
                        return
                    for q in pages:
                        if r.pages[q]:
                            r.pages[q] = PROT[op["prot"]]
                elif op.get("advice") not in (FILE_ADVICE if r.file else ADVICE):
                    self.problem(p, f"advice {op.get('advice')!r}")
                elif op["advice"] == "dontneed" and r.any_locked(ext[0] // PAGE, ext[1] // PAGE):
                    self.problem(p, "dontneed over a locked range (EINVAL)")
        elif kind in ("mlock", "munlock"):
            r = self.region(task, p, op.get("region"))
            if r is None:
                return
            ext = self.extent(r, op, p, aligned=True)
            if ext is None:
                return
            r.whole = False
            if kind == "mlock" and any(r.pages[q] in (UNMAPPED, NONE) for q in range(ext[0] // PAGE, ext[1] // PAGE)):
                self.problem(p, "mlock over a hole or PROT_NONE (ENOMEM)")
            r.set_locked(ext[0] // PAGE, ext[1] // PAGE, kind == "mlock")
            if kind == "mlock" and count:
                # The populate faults in every accessible page of the range.
                self.touched += mult * _touched_bytes(r, list(range(ext[0] // PAGE, ext[1] // PAGE)))
        elif kind == "mremap":
            r = self.region(task, p, op.get("region"))
            if r is None:
                return
            if not r.remappable() or not task.may_change(op["region"]) or op.get("fixed") or "addr" in op:
                self.problem(p, "an mremap the generator does not make (a shared, split or used region; fixed)")
                return
            try:
                size = _size(op.get("size", 0))
            except MmsimError as e:
                self.problem(p, str(e))
                return
            if not 0 < size <= MAX_REGION:
                self.problem(p, f"size {size} outside 1..{MAX_REGION}")
                return
            r.remap(size)
        elif kind in ("read", "write"):
            r = self.region(task, p, op.get("region"))
            if r is None:
                return
            ext = self.extent(r, op, p, aligned=False)
            stride = _size(op.get("stride", PAGE))
            if ext is None or stride <= 0:
                return
            steps = op.get("count", 0) if op.get("pattern") == "random" else (ext[1] - ext[0]) // stride
            if not isinstance(steps, int) or steps > 1 << 22:
                self.problem(p, "more than 4M accesses")
                return
            # Every slot's page (a random op's or a block's pages are among them).
            pages = touched_pages(ext[0], ext[1] - ext[0], stride)
            self.access(task, r, p, pages, R if kind == "read" else RW, mult, count)
            if "expect" in op:
                self.problem(p, "a read with expect")
        elif kind == "compare":
            a, b = op.get("a") or {}, op.get("b") or {}
            ra, rb = self.region(task, p, a.get("region")), self.region(task, p, b.get("region"))
            if ra is None or rb is None:
                return
            length = _size(op.get("length", 0))
            stride = _size(op.get("stride", 1))
            oa, ob = _size(a.get("offset", 0)), _size(b.get("offset", 0))
            if length <= 0 or oa + length > ra.size or ob + length > rb.size or "expect" in op:
                self.problem(p, "compare outside its regions (or with expect)")
                return
            self.access(task, ra, p, touched_pages(oa, length, stride), R, mult, count)
            self.access(task, rb, p, touched_pages(ob, length, stride), R, mult, count)
        elif kind == "atomic":
            r = self.region(task, p, op.get("region"))
            if r is None:
                return
            off = _size(op.get("offset", 0)) & ~7
            if off + 8 > r.size or op.get("hold"):
                self.problem(p, "atomic outside the region (or with hold)")
                return
            self.access(task, r, p, [off // PAGE], RW, mult, count)
        elif kind == "loop":
            n = op.get("count")
            if not isinstance(n, int) or not 1 <= n <= 8:
                self.problem(p, f"loop count {n!r}")
                return
            if loop:
                self.problem(p, "a loop inside a loop")
            # An iteration's changes to mappings repeat identically: two iterations show
            # every state the body can meet.
            self.walk(op.get("body"), task, f"{p}.body", mult * n, depth, count, loop=True)
            if n > 1:
                self.walk(op.get("body"), task, f"{p}.body", mult * n, depth, False, loop=True)
        elif kind in ("fork", "thread"):
            n = op.get("count", 1)
            if not isinstance(n, int) or not 1 <= n <= 3:
                self.problem(p, f"{kind} count {n!r}")
                return
            if task.thread:
                self.problem(p, f"{kind} in a thread")
            if kind == "thread" and loop:
                self.problem(p, "thread inside a loop")
            if count:
                self.tasks += mult * n
            child = task.fork() if kind == "fork" else task.spawn_thread()
            task.children = True
            self.walk(op.get("program", []), child, f"{p}.program", mult * n, depth + 1, count)
        elif kind == "wait":
            if task.thread:
                self.problem(p, "wait in a thread")
            task.pinned.clear()
            task.children = False
        elif kind == "snapshot":
            if not isinstance(op.get("label"), str) or not LABEL.fullmatch(op["label"]):
                self.problem(p, f"snapshot label {op.get('label')!r}")
        else:
            self.problem(p, f"an op the generator does not make: {kind!r}")

    def file_mapping(self, op: Mapping[str, Any], file: Any, size: int, p: str) -> bool:
        """Is a file mmap one the generator makes: of a file created before, at a page-aligned
        offset, no page past the file's end (SIGBUS), private or shared?"""
        if file not in self.files:
            self.problem(p, f"mmap of file {file!r}, not created before")
            return False
        try:
            off = _size(op.get("file_offset", 0))
        except MmsimError as e:
            self.problem(p, str(e))
            return False
        pages = -(-self.files[file] // PAGE)
        if off % PAGE or off // PAGE + -(-size // PAGE) > pages:
            self.problem(p, f"mapping of {file!r} at offset {off} for {size} bytes reaches past its end")
            return False
        if op.get("flags") not in (["private"], ["shared"]):
            self.problem(p, f"file mmap flags {op.get('flags')!r}")
            return False
        return True

    def file_op(self, op: Mapping[str, Any], kind: str, task: Task, p: str, depth: int, loop: bool) -> None:
        """create (by the first task, outside loops, before any use), pwrite and pread inside the
        file (no write grows it: every task's view of its size stays the creator's), fadvise and
        fsync."""
        name = op.get("file")
        if kind == "create":
            if depth or loop or task.thread:
                self.problem(p, "create outside the first task's program")
            if not isinstance(name, str) or not LABEL.fullmatch(name) or name in self.files:
                self.problem(p, f"file name {name!r} (or created again)")
                return
            if len(self.files) >= MAX_FILES or op.get("fs", "ext4") not in ("ext4", "tmpfs"):
                self.problem(p, "too many files, or a filesystem other than ext4 and tmpfs")
                return
            try:
                size = _size(op.get("size"))
            except MmsimError as e:
                self.problem(p, str(e))
                return
            if not 0 <= size <= MAX_FILE:
                self.problem(p, f"file size {size} outside 0..{MAX_FILE}")
                return
            self.files[name] = size
            return
        if name not in self.files:
            self.problem(p, f"{kind} of file {name!r}, not created before")
            return
        if kind in ("pwrite", "pread", "fadvise"):
            try:
                off = _size(op.get("offset", 0))
                length = _size(op["length"]) if "length" in op else self.files[name] - off
                chunk = _size(op.get("chunk", PAGE))
            except MmsimError as e:
                self.problem(p, str(e))
                return
            if off < 0 or length < 0 or off + length > self.files[name] or chunk <= 0:
                self.problem(p, f"{kind} of {name!r} at {off} for {length} bytes outside the file")
            if kind == "fadvise" and op.get("advice") not in ("dontneed", "willneed"):
                self.problem(p, f"fadvise advice {op.get('advice')!r}")
            if "expect" in op:
                self.problem(p, "a pread with expect")


#: The file ops (besides mmap's `file`).
FILE_OPS = ("create", "pwrite", "pread", "fadvise", "fsync")


def _state_name(s: int) -> str:
    return {UNMAPPED: "unmapped", NONE: "PROT_NONE", R: "read-only", RW: "read-write"}[s]


def check_workload(workload: Mapping[str, Any]) -> list[str]:
    """Every reason the workload is not safe to run natively (empty when it is)."""
    c = Checker()
    c.walk(workload.get("program"), Task({}), "program")
    if c.tasks > MAX_TASKS:
        c.problems.append(f"{c.tasks} tasks (at most {MAX_TASKS})")
    if c.touched > MAX_TOUCHED:
        c.problems.append(f"{c.touched >> 20} MiB touched (at most {MAX_TOUCHED >> 20})")
    return c.problems


def parse_error(workload: Mapping[str, Any]) -> str | None:
    """mmsim's parser's error about the workload, or None when it accepts it. (The run stops
    after its first operation on a small machine: only the parse is wanted.)"""
    from mmsim.workload import run_workload

    w = {**workload, "machine": {"memory": "64M"}}
    try:
        run_workload(w, sets={"engine.max_ops": 1})
    except MmsimError as e:
        if str(e).startswith("limit:"):
            return None
        return str(e)
    return None


def count_ops(ops: list[Mapping[str, Any]]) -> int:
    """Ops in a program, those in fork, thread and loop bodies included."""
    return sum(1 + count_ops(op.get("program", []) or op.get("body", [])) for op in ops)


# --------------------------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------------------------

#: Strides of reads and writes (None: the default, 4096).
STRIDES = [None] * 7 + [HPAGE] * 3 + [64] * 2 + [1 << 20, 512, 8192, 12288, 4096, 1, "random"]


class Generator:
    """Draws one random workload. Keeps the tasks and bytes touched within bounds as it goes
    and only emits what its model (the :class:`Checker`'s) says is safe."""

    def __init__(self, rng: random.Random, threads: bool = THREADS) -> None:
        self.rng = rng
        self.threads = threads
        self.names = itertools.count()
        self.labels = itertools.count()
        self.tasks = 1
        self.touched = 0
        self.files: dict[str, int] = {}  # name -> size in bytes

    # -- the workload and its programs ----------------------------------------------------

    def workload(self, name: str) -> dict[str, Any]:
        rng = self.rng
        knobs = {k: rng.choice(KNOBS[k]) for k in (ENABLED, ZERO_PAGE)}
        # defrag from a stream of its own, so that the workloads of a seed stay those drawn
        # before it was added.
        knobs[DEFRAG] = random.Random(f"{name}:defrag").choice(KNOBS[DEFRAG])
        knobs = {k: knobs[k] for k in KNOBS}
        program = self.program(Task({}), depth=0, n=rng.randint(3, 16), mult=1)
        if rng.random() < 0.05:
            program.append({"op": "exit"})
        return {"name": name, "knobs": knobs, "program": program}

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
            remappable = [n for n in changeable if task.regions[n].remappable()]
            if remappable:
                options.append((1.0, lambda: self.mremap(task, remappable)))
        if mapped:
            options.append((2.5, lambda: self.madvise(task, mapped)))
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
        out.append((0.8, lambda: self.pwrite_pread(sized, write=True)))
        out.append((0.8, lambda: self.pwrite_pread(sized, write=False)))
        out.append((0.4, lambda: self.fadvise(sized)))
        out.append((0.2, lambda: [{"op": "fsync", "file": self.rng.choice(sized)}]))
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
        task.regions[name] = Region(size, bytearray([PROT[prot]]) * -(-size // PAGE), shared, size >= HPAGE)
        if task.thread:
            task.own.add(name)
        return [op]

    def create(self) -> list[dict[str, Any]]:
        """A file on ext4 (cold: on the device, not cached) or tmpfs (empty and sparse), and now
        and then its first write()s: a tmpfs file filled, an ext4 one cached in part."""
        rng = self.rng
        name = f"f{len(self.files)}"
        fs = rng.choices(("ext4", "tmpfs"), (3, 1))[0]
        r = rng.random()
        if r < 0.4:
            size = HPAGE * rng.randint(1, 8)
        elif r < 0.9:
            size = PAGE * rng.randint(1, MAX_FILE // PAGE)
        else:
            size = rng.randint(1, 5 * HPAGE)
        self.files[name] = size
        ops: list[dict[str, Any]] = [{"op": "create", "file": name, "size": _size_text(rng, size), "fs": fs}]
        if fs == "tmpfs" and rng.random() < 0.7:
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
        size = npages * PAGE
        name = f"r{next(self.names)}"
        shared = rng.random() < 0.4
        op: dict[str, Any] = {"op": "mmap", "name": name, "size": _size_text(rng, size), "file": file}
        if first or rng.random() < 0.2:
            op["file_offset"] = first * PAGE
        op["flags"] = ["shared" if shared else "private"]
        if rng.random() < 0.35:
            op["align"] = "2M"
        prot = rng.choices(("rw", "r", "none"), (5, 4, 1))[0]
        if prot != "rw" or rng.random() < 0.2:
            op["prot"] = prot
        task.regions[name] = Region(size, bytearray([PROT[prot]]) * npages, shared, size >= HPAGE, file=file)
        if task.thread:
            task.own.add(name)
        return [op]

    def page_range(self, r: Region, runs: list[tuple[int, int]]) -> tuple[int, int]:
        """A page range [s, e) inside one of `runs`: whole, across a 2 MiB boundary or random."""
        rng = self.rng
        s0, e0 = rng.choice(runs)
        x = rng.random()
        cross = [b for b in range((s0 // HPAGE_PAGES + 1) * HPAGE_PAGES, e0, HPAGE_PAGES)]
        if x < 0.25:
            return s0, e0
        if x < 0.5 and cross:
            b = rng.choice(cross)
            return b - rng.randint(1, min(b - s0, 600)), b + rng.randint(1, min(e0 - b, 600))
        s = rng.randint(s0, e0 - 1)
        n = rng.randint(1, min(16, e0 - s)) if rng.random() < 0.6 else rng.randint(1, e0 - s)
        return s, s + n

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
        # mlock's populate stops at a PROT_NONE page (ENOMEM); munlock takes any mapped range.
        runs = r.runs(lambda x: x in (R, RW) if lock else x != UNMAPPED)
        if not runs:
            return []
        s, e = self.page_range(r, runs)
        if lock:
            cost = mult * _touched_bytes(r, list(range(s, e)))
            if self.touched + cost > MAX_TOUCHED:
                return []
            self.touched += cost
        r.whole = False
        r.set_locked(s, e, lock)
        return [{"op": "mlock" if lock else "munlock", "region": name, **self.range_fields(r, s, e)}]

    def mremap(self, task: Task, names: list[str]) -> list[dict[str, Any]]:
        name = self.rng.choice(names)
        r = task.regions[name]
        size = self.size()
        r.remap(size)
        return [{"op": "mremap", "region": name, "size": _size_text(self.rng, size)}]

    def mprotect(self, task: Task, names: list[str]) -> list[dict[str, Any]]:
        name = self.rng.choice(names)
        r = task.regions[name]
        r.whole = False
        s, e = self.page_range(r, r.runs(lambda x: x != UNMAPPED))
        prot = self.rng.choices(("rw", "r", "none"), (4, 3.5, 2.5))[0]
        for q in range(s, e):
            r.pages[q] = PROT[prot]
        return [{"op": "mprotect", "region": name, "prot": prot, **self.range_fields(r, s, e)}]

    def madvise(self, task: Task, names: list[str]) -> list[dict[str, Any]]:
        name = self.rng.choice(names)
        r = task.regions[name]
        r.whole = False
        s, e = self.page_range(r, r.runs(lambda x: x != UNMAPPED))
        advice = self.rng.choices(FILE_ADVICE, (4, 2.5, 3.5, 0.5, 0.5, 0.5, 0.5, 1.5 if r.file else 0))[0]
        if advice == "dontneed" and r.any_locked(s, e):
            # MADV_DONTNEED refuses a VM_LOCKED vma (EINVAL): advise it instead.
            advice = "hugepage"
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

    def fork(self, task: Task, depth: int, mult: int, loop: bool) -> list[dict[str, Any]]:
        rng = self.rng
        op = self.spawn("fork", task.fork, 3, 7, depth, mult)
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


def generate_case(seed: int, index: int, threads: bool | None = None, parse: bool = True) -> GeneratedCase:
    """Case `index` of `seed`: a valid, safe random workload (see the module's doc)."""
    threads = THREADS if threads is None else threads
    for attempt in itertools.count():
        rng = random.Random(f"{seed}:{index}" if attempt == 0 else f"{seed}:{index}:{attempt}")
        w = Generator(rng, threads).workload(f"random-{seed}-{index}")
        if check_workload(w) or (parse and parse_error(w)) or count_ops(w["program"]) == 0:
            if attempt >= 100:
                raise MmsimError(f"validate --random: no valid workload for case {index} of seed {seed}")
            continue
        return GeneratedCase(index, w, attempt)
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------------------------
# Shrinking
# --------------------------------------------------------------------------------------------
