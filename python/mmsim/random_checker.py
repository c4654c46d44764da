"""The safety model of ``mmsim validate --random``'s workloads: what each process has mapped,
page by page, and :func:`check_workload`, which walks a workload's op tree as the processes run
it and names every reason it is not safe to run natively (an access to unmapped or protected
memory, a region changed under a thread that uses it, a file used before it is created or
mapped past its end, more than :data:`MAX_TASKS` tasks or :data:`MAX_TOUCHED` bytes touched).
The generator (:mod:`mmsim.random_workloads`) emits only what this model accepts, and the
shrinker (:mod:`mmsim.validate_random`) runs only the variants it accepts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mmsim._mmsim import MmsimError

#: Generate `thread` ops (the native runner runs them once it supports CLONE_VM tasks).
THREADS = True
#: The share of cases under memory pressure (issue 57): a swap device, memory cgroups with
#: limits, forks into them, MADV_PAGEOUT and MADV_COLD, cgroup_write of the limits, and, where
#: the host's memory controller is on cgroup v2, memory_reclaim. 0: none (every seed's
#: workloads are those drawn before pressure was added); the lead turns it on.
PRESSURE = 0.0
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
#: madvise advice for any region; with MADV_COLLAPSE, which the generator makes for a file
#: mapping, or an anonymous one where it succeeds (Region.collapsible).
ADVICE = ("hugepage", "nohugepage", "dontneed", "willneed", "sequential", "random", "normal")
FILE_ADVICE = (*ADVICE, "collapse")
#: madvise advice drawn from a stream of its own (the workloads of a seed drawn before they
#: were added keep their shape), each where it succeeds: MADV_FREE on private anonymous
#: memory, MADV_REMOVE on shared memory (anonymous or a file), neither over an mlocked page
#: (EINVAL); MADV_DONTFORK and MADV_DOFORK anywhere (a child forked after MADV_DONTFORK has
#: nothing mapped there: the model unmaps those pages in its copy).
FORK_ADVICE = ("dontfork", "dofork")
LAZY_ADVICE = ("free", "remove", *FORK_ADVICE)
#: madvise advice of a case under memory pressure, on unlocked, non-hugetlb ranges (EINVAL
#: there: can_madv_lru_vma): MADV_COLD deactivates, MADV_PAGEOUT reclaims (to swap).
PRESSURE_ADVICE = ("cold", "pageout")
#: A pressure case's cgroup limits: memory.max at least MIN_LIMIT (the task's page tables and
#: the per-CPU charge stock fit), swap devices of at most MAX_SWAP in all (the touched bytes,
#: MAX_TOUCHED, fit in them: reclaim swaps, it does not OOM-kill, unless a cgroup may not swap).
MIN_LIMIT = 16 << 20
MAX_SWAP = 1 << 30
MAX_SWAPS = 2
#: cgroup_write's files a generated workload writes (the limits v1 expresses).
CGROUP_WRITE_FILES = ("memory.max", "memory.swap.max")
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
#: The pool a workload with hugetlb memfds sizes: as many huge pages as its hugetlb files hold,
#: so that no fault finds the pool empty (every page of such a file is one of the file's: the
#: generator maps them shared only).
POOL = "vm/nr_hugepages"
#: madvise advice for a mapping of a hugetlb memfd (each succeeds on 2 MiB-aligned ranges; the
#: THP advice and MADV_FREE are not for hugetlb, WILLNEED reads nothing ahead there).
HUGETLB_ADVICE = ("dontneed", "remove", "normal", "random", "sequential", *("dontfork", "dofork"))

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
    heap: bool = False  # the heap: from the break at its first brk op to the break now
    aligned: bool = False  # mapped at a 2 MiB boundary (align "2M") and never moved since
    dontfork: bytearray | None = None  # 1 for each page in a VM_DONTCOPY vma (None: none ever was)
    hugetlb: bool = False  # a shared mapping of a hugetlb memfd: its ranges change by 2 MiB

    def copy(self) -> Region:
        """The region as a fork child has it: the same pages, none locked (dup_mmap clears
        VM_LOCKED), none of those MADV_DONTFORK left out (the child has nothing mapped there)."""
        pages = bytearray(self.pages)
        whole = self.whole
        if self.dontfork is not None and any(self.dontfork):
            for q, d in enumerate(self.dontfork):
                if d:
                    pages[q] = UNMAPPED
            whole = False
        return Region(
            self.size,
            pages,
            self.shared,
            self.thp,
            whole,
            file=self.file,
            heap=self.heap,
            aligned=self.aligned,
            hugetlb=self.hugetlb,
        )

    def set_dontfork(self, s: int, e: int, on: bool) -> None:
        """MADV_DONTFORK (`on`) or MADV_DOFORK of pages [s, e) (the mapped ones), or their
        munmap (`on` False)."""
        if self.dontfork is None:
            if not on:
                return
            self.dontfork = bytearray(len(self.pages))
        for q in range(s, e):
            self.dontfork[q] = 1 if on and self.pages[q] != UNMAPPED else 0

    def collapsible(self) -> bool:
        """May MADV_COLLAPSE of the whole region succeed once a byte of each 2 MiB is written:
        private anonymous memory mapped at a 2 MiB boundary, one read-write vma never advised,
        unlocked, at least one whole PMD."""
        one_vma = self.whole and self.locked is None and set(self.pages) == {RW}
        return not self.shared and self.file is None and self.aligned and self.size >= HPAGE and one_vma

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
        return not self.shared and self.file is None and self.whole and one_prot and not self.heap

    def brk(self, size: int, locked: bool) -> None:
        """The break moved to `size` bytes past the heap's start: pages past the new end are
        unmapped, new ones are read-write (and locked under MCL_FUTURE)."""
        n = -(-size // PAGE)
        old = len(self.pages)
        self.pages = self.pages[:n] + bytearray([RW]) * max(0, n - old)
        if self.locked is not None or locked:
            lk = (self.locked or bytearray(old))[:n]
            self.locked = lk + (b"\x01" if locked else b"\x00") * max(0, n - old)
        if self.dontfork is not None:
            # The new part is a vma of its own without VM_DONTCOPY (do_brk_flags cannot expand).
            self.dontfork = self.dontfork[:n] + bytearray(max(0, n - old))
        self.size = size
        self.thp = size >= HPAGE

    def remap(self, size: int) -> None:
        """mremap to `size` bytes: the pages keep their protection, new ones take it too."""
        self.pages = bytearray([self.pages[0]]) * -(-size // PAGE)
        self.locked = None
        self.dontfork = None
        self.size = size
        self.thp = size >= HPAGE
        self.aligned = False

    def shrink_range(self, s: int, e: int, pages: int) -> None:
        """mremap of pages [s, e) to `pages` pages in place: the range's tail is unmapped."""
        self.pages[s + pages : e] = bytes(e - s - pages)
        if s + pages < e:
            self.whole = False

    def move_range(self, s: int, e: int, size: int, *, dontunmap: bool) -> Region:
        """mremap of pages [s, e) to `size` bytes elsewhere: the region at the new place (its
        pages of the old protection). The old range is unmapped, or with `dontunmap` stays
        mapped (empty: it reads zeroes; its one vma is not split)."""
        prot = self.pages[s]
        if not dontunmap:
            self.pages[s:e] = bytes(e - s)
            self.whole = False
        return Region(size, bytearray([prot]) * -(-size // PAGE), False, size >= HPAGE)

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
    # The mm's def_flags after mlockall (shared by its threads): 0 none, LOCK_POPULATE
    # (MCL_FUTURE: later mmaps locked and populated), LOCK_ONFAULT (and MCL_ONFAULT).
    lock_future: list[int] = field(default_factory=lambda: [0])
    # No mlockall(MCL_CURRENT) here: a forked child, or a task that forked or made threads
    # (the runner's own memory is then not as mmsim's stand-ins of it have it: native/runner_host.h).
    no_current: bool = False

    def fork(self) -> Task:
        """The child's view: its regions unlocked and no def_flags (dup_mmap, mm_init)."""
        self.no_current = True
        return Task({k: r.copy() for k, r in self.regions.items()}, no_current=True)

    def spawn_thread(self) -> Task:
        self.pinned |= set(self.regions)
        self.no_current = True
        return Task(dict(self.regions), thread=True, lock_future=self.lock_future, no_current=True)

    def mlockall(self, flags: set[str]) -> list[Region]:
        """mlockall with `flags` (not only "onfault", which is EINVAL): the regions whose every
        mapped page MCL_CURRENT locks (each no longer one vma for mremap), and def_flags."""
        onfault = "onfault" in flags
        self.lock_future[0] = (LOCK_ONFAULT if onfault else LOCK_POPULATE) if "future" in flags else 0
        if "current" not in flags:
            return []
        for r in self.regions.values():
            r.set_locked(0, len(r.pages), True)
            r.whole = False
        return list(self.regions.values())

    def munlockall(self) -> None:
        self.lock_future[0] = 0
        for r in self.regions.values():
            r.set_locked(0, len(r.pages), False)

    def mapped_under_def_flags(self, r: Region) -> bool:
        """A region just mapped takes def_flags: locked (not one vma for mremap, whose growth
        would populate). Whether its mmap populated it."""
        if not self.lock_future[0]:
            return False
        r.set_locked(0, len(r.pages), True)
        r.whole = False
        return self.lock_future[0] == LOCK_POPULATE

    def may_change(self, name: str) -> bool:
        """May this task munmap or mprotect the region (no thread of its mm uses it)?"""
        return name not in self.pinned and (not self.thread or name in self.own)


#: The name of the heap region of every brk op the generator makes.
HEAP = "heap"
#: Task.lock_future's states (mlockall's MCL_FUTURE, with MCL_ONFAULT or not).
LOCK_POPULATE, LOCK_ONFAULT = 1, 2
#: mlockall's flags as the workload names them.
MCL = ("current", "future", "onfault")


def populated_bytes(r: Region) -> int:
    """What a populate of the whole region touches: its readable pages."""
    return _touched_bytes(r, [q for q, x in enumerate(r.pages) if x in (R, RW)])


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
        self.shmem_files: set[str] = set()  # tmpfs files and memfds
        self.hugetlb_files: set[str] = set()  # memfds of MFD_HUGETLB (also in shmem_files)
        self.cgroups: set[str] = set()  # the workload's memory cgroups
        self.own_cgroup = False  # the first process is in one

    def problem(self, path: str, msg: str) -> None:
        self.problems.append(f"{path}: {msg}")

    def region_size(self, path: str, op: Mapping[str, Any]) -> int | None:
        """An mmap's or mremap's `size`, or None (a problem noted) if it is not 1..MAX_REGION."""
        try:
            size = _size(op.get("size", 0))
        except MmsimError as e:
            self.problem(path, str(e))
            return None
        if not 0 < size <= MAX_REGION:
            self.problem(path, f"size {size} outside 1..{MAX_REGION}")
            return None
        return size

    def partial_mremap(self, task: Task, p: str, r: Region, op: Mapping[str, Any], size: int) -> None:
        """An mremap of part of a region, as the generator makes them: in place without
        `maymove` (no growth), or moved (grown out of a range that ends before the region's,
        or with `dontunmap` at the same size) under a `name` not yet mapped."""
        try:
            off, length = _size(op.get("offset", 0)), _size(op.get("length", 0))
        except MmsimError as e:
            self.problem(p, str(e))
            return
        n = len(r.pages)
        s, e = off // PAGE, (off + length) // PAGE
        if off % PAGE or length % PAGE or size % PAGE or not 0 <= s < e <= n:
            self.problem(p, "an mremap range not of whole pages inside the region")
            return
        name, dontunmap = op.get("name"), bool(op.get("dontunmap"))
        if not op.get("maymove", True):
            if name is not None or dontunmap or size > length:
                self.problem(p, "an mremap without maymove that could fail (growth, name, dontunmap)")
                return
            r.shrink_range(s, e, size // PAGE)
            return
        moves = (size == length) if dontunmap else (size > length and e < n)
        if not moves or not isinstance(name, str) or name in task.regions or not LABEL.fullmatch(name):
            self.problem(p, "an mremap that does not surely move its range to a new name")
            return
        task.regions[name] = r.move_range(s, e, size, dontunmap=dontunmap)
        if task.thread:
            task.own.add(name)

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

    def hugetlb_range(self, r: Region, ext: tuple[int, int], path: str, kind: str) -> bool:
        """A range of a hugetlb mapping that a call changes must be whole huge pages (the vma
        splits only there: EINVAL otherwise, and mlock is refused here: a hugetlb vma takes
        no VM_LOCKED)."""
        if not r.hugetlb:
            return True
        if kind in ("mlock", "munlock"):
            self.problem(path, f"{kind} of hugetlb memory")
            return False
        if ext[0] % HPAGE or ext[1] % HPAGE:
            self.problem(path, f"{kind} of hugetlb memory not of whole 2 MiB pages")
            return False
        return True

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
            size = self.region_size(p, op)
            if size is None:
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
            r = Region(size, bytearray([PROT[prot]]) * npages, "shared" in flags, size >= HPAGE, file=file)
            r.hugetlb = file in self.hugetlb_files
            task.regions[name] = r
            if task.thread:
                task.own.add(name)
            if task.mapped_under_def_flags(r) and count:
                # vm_mmap_pgoff's populate (of the whole mapping mmap made, alignment's too).
                self.touched += mult * (populated_bytes(r) + (HPAGE if op.get("align") else 0))
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
            if ext is None or not self.hugetlb_range(r, ext, p, kind):
                return
            if kind == "madvise" and r.hugetlb and op.get("advice") not in HUGETLB_ADVICE:
                self.problem(p, f"advice {op.get('advice')!r} on hugetlb memory")
                return
            pages = range(ext[0] // PAGE, ext[1] // PAGE)
            r.whole = False
            if kind != "madvise" and not task.may_change(op["region"]):
                self.problem(p, f"{kind} of a region a thread of this process may use")
            if kind == "munmap":
                for q in pages:
                    r.pages[q] = UNMAPPED
                r.set_locked(ext[0] // PAGE, ext[1] // PAGE, False)
                r.set_dontfork(ext[0] // PAGE, ext[1] // PAGE, False)
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
                elif op.get("advice") not in FILE_ADVICE + LAZY_ADVICE + PRESSURE_ADVICE:
                    self.problem(p, f"advice {op.get('advice')!r}")
                elif op["advice"] in PRESSURE_ADVICE and (r.any_locked(ext[0] // PAGE, ext[1] // PAGE) or r.hugetlb):
                    self.problem(p, f"{op['advice']} over a locked or hugetlb range (EINVAL)")
                elif op["advice"] in ("dontneed", "free", "remove") and r.any_locked(ext[0] // PAGE, ext[1] // PAGE):
                    self.problem(p, f"{op['advice']} over a locked range (EINVAL)")
                elif op["advice"] == "free" and (r.shared or r.file):
                    self.problem(p, "free of shared or file memory (EINVAL)")
                elif op["advice"] == "remove" and not r.shared:
                    self.problem(p, "remove of private memory (EINVAL, EACCES)")
                elif op["advice"] in FORK_ADVICE:
                    r.set_dontfork(ext[0] // PAGE, ext[1] // PAGE, op["advice"] == "dontfork")
        elif kind in ("mlock", "munlock"):
            r = self.region(task, p, op.get("region"))
            if r is None:
                return
            ext = self.extent(r, op, p, aligned=True)
            if ext is None or not self.hugetlb_range(r, ext, p, kind):
                return
            r.whole = False
            if kind == "mlock" and any(r.pages[q] in (UNMAPPED, NONE) for q in range(ext[0] // PAGE, ext[1] // PAGE)):
                self.problem(p, "mlock over a hole or PROT_NONE (ENOMEM)")
            r.set_locked(ext[0] // PAGE, ext[1] // PAGE, kind == "mlock")
            if kind == "mlock" and count and not op.get("onfault"):
                # The populate faults in every accessible page of the range.
                self.touched += mult * _touched_bytes(r, list(range(ext[0] // PAGE, ext[1] // PAGE)))
        elif kind == "mlockall":
            flags = op.get("flags")
            if not isinstance(flags, list) or not flags or any(f not in MCL for f in flags):
                self.problem(p, f"mlockall flags {flags!r}")
                return
            if set(flags) == {"onfault"}:
                return  # EINVAL
            if "current" in flags and (task.thread or depth or loop or task.no_current):
                self.problem(p, "mlockall(MCL_CURRENT) in a child, a thread, a loop, or after a fork or thread")
            for r in task.mlockall(set(flags)):
                if count and "onfault" not in flags:
                    self.touched += mult * populated_bytes(r)
        elif kind == "munlockall":
            task.munlockall()
        elif kind == "brk":
            self.brk(op, task, p, mult, count, loop)
        elif kind == "mremap":
            r = self.region(task, p, op.get("region"))
            if r is None:
                return
            if not r.remappable() or not task.may_change(op["region"]) or op.get("fixed") or "addr" in op:
                self.problem(p, "an mremap the generator does not make (a shared, split or used region; fixed)")
                return
            size = self.region_size(p, op)
            if size is None:
                return
            if "offset" not in op and "length" not in op and "name" not in op and op.get("maymove", True):
                if op.get("dontunmap"):
                    self.problem(p, "a whole-region mremap with dontunmap")
                    return
                r.remap(size)
                return
            self.partial_mremap(task, p, r, op, size)
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
        elif kind in ("memory_reclaim", "cgroup_write"):
            self.cgroup_op(op, kind, task, p)
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
            if kind == "fork" and "cgroup" in op and op["cgroup"] not in self.cgroups:
                self.problem(p, f"fork into cgroup {op['cgroup']!r}, not declared")
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

    def cgroup_op(self, op: Mapping[str, Any], kind: str, task: Task, p: str) -> None:
        """memory_reclaim of a declared cgroup (or the task's own: the first process's, when it
        has one), or cgroup_write of a declared cgroup's memory.max (at least MIN_LIMIT, or
        "max") or memory.swap.max."""
        cg = op.get("cgroup")
        if cg is not None and cg not in self.cgroups:
            self.problem(p, f"{kind} of cgroup {cg!r}, not declared")
            return
        if kind == "memory_reclaim":
            try:
                nbytes = _size(op.get("bytes"))
            except (MmsimError, TypeError) as e:
                self.problem(p, f"memory_reclaim bytes: {e}")
                return
            sw = op.get("swappiness")
            if nbytes <= 0 or (sw is not None and not (isinstance(sw, int) and 0 <= sw <= 200)):
                self.problem(p, "memory_reclaim of no bytes, or a swappiness outside 0..200")
            if cg is None and not self.own_cgroup:
                self.problem(p, "memory_reclaim of the root cgroup (the whole host's)")
            return
        f, v = op.get("file"), op.get("value")
        if cg is None or f not in CGROUP_WRITE_FILES:
            self.problem(p, f"a cgroup_write the generator does not make ({f!r})")
            return
        try:
            limit = None if v == "max" else _size(v)
        except (MmsimError, TypeError) as e:
            self.problem(p, f"cgroup_write value: {e}")
            return
        if f == "memory.max" and limit is not None and limit < MIN_LIMIT:
            self.problem(p, f"memory.max {limit} below {MIN_LIMIT}")

    def brk(self, op: Mapping[str, Any], task: Task, p: str, mult: int, count: bool, loop: bool) -> None:
        """The C library's sbrk: the heap region (HEAP, the one name the generator gives it)
        moved by a page-multiple `delta` within 0..MAX_REGION, outside loops and threads."""
        name, delta = op.get("name"), op.get("delta")
        if name != HEAP or loop or not task.may_change(HEAP):
            self.problem(p, "a brk the generator does not make (name, in a loop or a thread)")
            return
        try:
            neg = isinstance(delta, str) and delta.startswith("-")
            d = -_size(delta[1:]) if neg else _size(delta)
        except (MmsimError, TypeError) as e:
            self.problem(p, f"brk delta {delta!r}: {e}")
            return
        r = task.regions.get(HEAP)
        if r is None:
            r = task.regions[HEAP] = Region(0, bytearray(), False, False, heap=True)
        size = r.size + d
        if d % PAGE or not 0 <= size <= MAX_REGION:
            self.problem(p, f"brk delta {d} (the heap would be {size} bytes)")
            return
        grown = list(range(len(r.pages), -(-size // PAGE)))
        r.brk(size, bool(task.lock_future[0]))
        if count and task.lock_future[0] == LOCK_POPULATE:
            self.touched += mult * _touched_bytes(r, grown)

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
        if file in self.hugetlb_files and (op["flags"] != ["shared"] or off % HPAGE or size % HPAGE):
            # A private mapping of a hugetlb memfd is not modelled; the rest is EINVAL or rounded.
            self.problem(p, f"a mapping of the hugetlb memfd {file!r} not shared, or not of whole huge pages")
            return False
        return True

    def file_op(self, op: Mapping[str, Any], kind: str, task: Task, p: str, depth: int, loop: bool) -> None:
        """create (by the first task, outside loops, before any use), pwrite and pread inside the
        file (no write grows it: every task's view of its size stays the creator's), fadvise and
        fsync."""
        name = op.get("file")
        if kind in ("create", "memfd_create"):
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
            if kind == "memfd_create" or op.get("fs") == "tmpfs":
                self.shmem_files.add(name)
            if kind == "memfd_create" and op.get("hugetlb"):
                if size % HPAGE or not size:
                    self.problem(p, f"a hugetlb memfd of {size} bytes, not whole huge pages")
                self.hugetlb_files.add(name)
            return
        if name not in self.files:
            self.problem(p, f"{kind} of file {name!r}, not created before")
            return
        if kind == "fallocate":
            try:
                off, length = _size(op.get("offset", 0)), _size(op.get("length"))
            except MmsimError as e:
                self.problem(p, str(e))
                return
            if name not in self.shmem_files:
                self.problem(p, f"fallocate of {name!r}, not a tmpfs file or memfd")
            if off < 0 or length <= 0 or off + length > self.files[name]:
                self.problem(p, f"fallocate of {name!r} at {off} for {length} bytes outside the file")
            if op.get("mode", []) not in ([], ["keep_size"], ["punch_hole", "keep_size"]):
                self.problem(p, f"fallocate mode {op.get('mode')!r}")
            return
        if name in self.hugetlb_files and kind != "fallocate":
            self.problem(p, f"{kind} of the hugetlb memfd {name!r} (not modelled)")
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
FILE_OPS = ("create", "memfd_create", "pwrite", "pread", "fadvise", "fsync", "fallocate")


def _state_name(s: int) -> str:
    return {UNMAPPED: "unmapped", NONE: "PROT_NONE", R: "read-only", RW: "read-write"}[s]


def check_pressure(workload: Mapping[str, Any], c: Checker) -> None:
    """The workload's memory cgroups (names, each parent declared, memory.max at least
    MIN_LIMIT or "max", only the limits cgroup v1 expresses) and swap devices (at most
    MAX_SWAPS, MAX_SWAP in all, automatic priorities): noted in `c`, which the walk of the
    program then checks the ops naming them against."""
    cgroups = workload.get("cgroups") or {}
    if not isinstance(cgroups, Mapping):
        c.problems.append("cgroups: not a mapping")
        return
    for name, spec in cgroups.items():
        parts = str(name).split("/")
        if not all(LABEL.fullmatch(x) and x not in (".", "..") for x in parts) or len(parts) > 2:
            c.problems.append(f"cgroups: name {name!r}")
        elif len(parts) == 2 and parts[0] not in cgroups:
            c.problems.append(f"cgroups: {name!r} without its parent")
        if not isinstance(spec, Mapping) or set(spec) - {"memory.max", "memory.swap.max"}:
            c.problems.append(f"cgroups: {name!r} sets a file the generator does not ({spec!r})")
            continue
        try:
            limit = None if spec.get("memory.max", "max") == "max" else _size(spec["memory.max"])
        except (MmsimError, TypeError):
            limit = 0
        if limit is not None and limit < MIN_LIMIT:
            c.problems.append(f"cgroups: {name!r} memory.max below {MIN_LIMIT}")
        c.cgroups.add(str(name))
    own = workload.get("cgroup")
    if own is not None and own not in cgroups:
        c.problems.append(f"cgroup {own!r}: not declared")
    c.own_cgroup = own is not None
    swaps = (workload.get("machine") or {}).get("swap") or []
    total = 0
    for s in swaps:
        try:
            total += _size(s.get("size"))
        except (MmsimError, TypeError, AttributeError):
            c.problems.append(f"machine.swap: {s!r}")
        if isinstance(s, Mapping) and (s.get("kind", "file") not in ("file", "partition") or "priority" in s):
            c.problems.append(f"machine.swap: {s!r} (a kind or priority the generator does not make)")
    if len(swaps) > MAX_SWAPS or total > MAX_SWAP:
        c.problems.append(f"machine.swap: {len(swaps)} devices of {total} bytes")


def check_workload(workload: Mapping[str, Any]) -> list[str]:
    """Every reason the workload is not safe to run natively (empty when it is)."""
    c = Checker()
    check_pressure(workload, c)
    c.walk(workload.get("program"), Task({}), "program")
    need = sum(c.files[f] // HPAGE for f in c.hugetlb_files)
    pool = (workload.get("knobs") or {}).get(POOL, 0)
    if need and (not str(pool).isdigit() or int(pool) < need):
        c.problems.append(f"hugetlb memfds of {need} huge pages on a pool of {pool!r}")
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
