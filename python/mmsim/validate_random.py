"""Kernel-differential fuzzing: ``mmsim validate --random N [--seed S]``.

Random workloads (every op and host THP knob the native runner supports) run on this
machine's kernel and in mmsim configured like it (:func:`mmsim.native.validate_workload`);
a case whose counters differ is shrunk to a minimal workload that still differs in the same
counters, saved as a workload file and printed.

The generator is deterministic: case ``i`` of seed ``s`` is drawn from
``random.Random(f"{s}:{i}")`` (a regenerated case from ``f"{s}:{i}:{attempt}"``), so one
case can be re-created without the others. Every workload it emits is checked by
:func:`check_workload`, a model of each process's mappings and protections that keeps the
host safe (no access to unmapped or protected memory, at most :data:`MAX_TASKS` tasks and
:data:`MAX_TOUCHED` bytes touched), and by mmsim's own parser.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import itertools
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmsim._mmsim import MmsimError

__all__ = [
    "KNOBS",
    "MAX_TASKS",
    "MAX_TOUCHED",
    "THREADS",
    "campaign",
    "check_workload",
    "count_ops",
    "format_figures",
    "generate_case",
    "parse_error",
    "shrink",
    "signature",
]

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
ENABLED = "transparent_hugepage/enabled"
ZERO_PAGE = "transparent_hugepage/use_zero_page"
#: The host knobs each case sets, and their values.
KNOBS = {ENABLED: ("always", "madvise", "never"), ZERO_PAGE: ("0", "1")}
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

    def copy(self) -> Region:
        return Region(self.size, bytearray(self.pages), self.shared, self.thp)

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
            if len(task.regions) >= 60:
                self.problem(p, "too many regions for the native runner")
            npages = -(-size // PAGE)
            task.regions[name] = Region(size, bytearray([PROT[prot]]) * npages, "shared" in flags, size >= HPAGE)
            if task.thread:
                task.own.add(name)
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
            if kind != "madvise" and not task.may_change(op["region"]):
                self.problem(p, f"{kind} of a region a thread of this process may use")
            if kind == "munmap":
                for q in pages:
                    r.pages[q] = UNMAPPED
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
                elif op.get("advice") not in ("hugepage", "nohugepage", "dontneed"):
                    self.problem(p, f"advice {op.get('advice')!r}")
        elif kind in ("read", "write"):
            r = self.region(task, p, op.get("region"))
            if r is None:
                return
            ext = self.extent(r, op, p, aligned=False)
            stride = _size(op.get("stride", PAGE))
            if ext is None or stride <= 0:
                return
            if (ext[1] - ext[0]) // stride > 1 << 22:
                self.problem(p, "more than 4M accesses")
                return
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

    # -- the workload and its programs ----------------------------------------------------

    def workload(self, name: str) -> dict[str, Any]:
        rng = self.rng
        knobs = {k: rng.choice(v) for k, v in KNOBS.items()}
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
        if not options:
            return []
        total = sum(w for w, _ in options)
        x = rng.random() * total
        for w, make in options:
            x -= w
            if x < 0:
                return make()
        return options[-1][1]()

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
        if self.rng.random() < 0.3:
            s, e = 0, len(r.pages)
        else:
            s, e = self.page_range(r, [(0, len(r.pages))])
        for q in range(s, e):
            r.pages[q] = UNMAPPED
        return [{"op": "munmap", "region": name, **self.range_fields(r, s, e)}]

    def mprotect(self, task: Task, names: list[str]) -> list[dict[str, Any]]:
        name = self.rng.choice(names)
        r = task.regions[name]
        s, e = self.page_range(r, r.runs(lambda x: x != UNMAPPED))
        prot = self.rng.choices(("rw", "r", "none"), (4, 3.5, 2.5))[0]
        for q in range(s, e):
            r.pages[q] = PROT[prot]
        return [{"op": "mprotect", "region": name, "prot": prot, **self.range_fields(r, s, e)}]

    def madvise(self, task: Task, names: list[str]) -> list[dict[str, Any]]:
        name = self.rng.choice(names)
        r = task.regions[name]
        s, e = self.page_range(r, r.runs(lambda x: x != UNMAPPED))
        advice = self.rng.choices(("hugepage", "nohugepage", "dontneed"), (4, 2.5, 3.5))[0]
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

    def fork(self, task: Task, depth: int, mult: int, loop: bool) -> list[dict[str, Any]]:
        rng = self.rng
        n = rng.randint(1, max(1, min(3, (MAX_TASKS - self.tasks) // mult)))
        self.tasks += mult * n
        child = task.fork()
        op: dict[str, Any] = {"op": "fork", "program": self.program(child, depth + 1, rng.randint(1, 7), mult * n)}
        if n > 1 or rng.random() < 0.2:
            op["count"] = n
        task.children = True
        if loop and rng.random() < 0.7:
            task.children = False
            return [op, {"op": "wait"}]
        return [op]

    def thread(self, task: Task, depth: int, mult: int) -> list[dict[str, Any]]:
        rng = self.rng
        n = rng.randint(1, max(1, min(2, (MAX_TASKS - self.tasks) // mult)))
        self.tasks += mult * n
        child = task.spawn_thread()
        op: dict[str, Any] = {"op": "thread", "program": self.program(child, depth + 1, rng.randint(1, 5), mult * n)}
        if n > 1 or rng.random() < 0.2:
            op["count"] = n
        return [op]

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


#: Counters of /proc/vmstat (system-wide: other processes' events land in them too).
SYSTEM_WIDE = frozenset({"thp_fault_alloc", "thp_zero_page_alloc", "thp_split_pmd"})


def same_failure(sig: frozenset[str], target: frozenset[str]) -> bool:
    """Does a run that failed with `sig` fail as one with `target` did? The same per-process
    counters differ; the system-wide THP events (which other processes' THPs reach) count
    only when nothing else differed."""
    core = target - SYSTEM_WIDE
    if core:
        return sig - SYSTEM_WIDE == core
    return sig == target


def signature(result: Mapping[str, Any]) -> frozenset[str]:
    """How a case failed: the counters that differ, without process ids and snapshot labels
    (``minflt``, ``thp_fault_alloc``, ...), or the kind of failure when nothing was compared."""
    if result.get("status") != "fail":
        return frozenset()
    bad = [c for c in result.get("counters", []) if abs(c["kernel"] - c["simulated"]) > c["tolerance"]]
    if bad:
        return frozenset(c["name"].split()[-1] for c in bad)
    reason = re.sub(r"^(validate: |pid \d+: )", "", str(result.get("reason", "")))
    return frozenset({reason.split("(")[0].split(":")[0].strip() or "fail"})


Path_ = tuple[Any, ...]


def _lists(ops: list[Any], prefix: Path_ = ()) -> Iterator[tuple[Path_, list[Any]]]:
    """Every op list of a program (the program first, then nested bodies) with its path."""
    yield prefix, ops
    for i, op in enumerate(ops):
        for key in ("program", "body"):
            if isinstance(op.get(key), list):
                yield from _lists(op[key], (*prefix, i, key))


def _replace(ops: list[Any], path: Path_, new: list[Any]) -> list[Any]:
    """A copy of `ops` with the list at `path` replaced by `new`."""
    out = copy.deepcopy(ops)
    target = out
    for i in range(0, len(path), 2):
        target = target[path[i]][path[i + 1]]
    target[:] = new
    return out


def _halve(v: Any, floor: int, page: bool) -> int | None:
    n = _size(v)
    h = n // 2
    if page:
        h = h // PAGE * PAGE
    return h if h >= floor and h != n else None


def _op_simplifications(op: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
    """Simpler versions of one op (each a list of ops to put in its place)."""
    kind = op["op"]
    if kind in ("fork", "thread"):
        # The child's program run by the parent itself.
        yield copy.deepcopy([o for o in op["program"] if o["op"] != "exit"])
        if op.get("count", 1) > 1:
            yield [{**op, "count": 1}]
    if kind == "loop":
        yield copy.deepcopy(op["body"])
        if op["count"] > 1:
            yield [{**op, "count": 1}]
    if kind == "mmap":
        for k in ("align", "prot", "flags"):
            if k in op:
                yield [{kk: vv for kk, vv in op.items() if kk != k}]
        h = _halve(op["size"], PAGE, page=True)
        if h:
            yield [{**op, "size": h}]
    if kind in ("read", "write", "munmap", "mprotect", "madvise", "compare"):
        for k in ("stride", "value"):
            if k in op:
                yield [{kk: vv for kk, vv in op.items() if kk != k}]
        if "length" in op:
            h = _halve(op["length"], 1, page=kind in ("munmap", "mprotect", "madvise"))
            if h:
                yield [{**op, "length": h}]
        if _size(op.get("offset", 0)):
            yield [{kk: vv for kk, vv in op.items() if kk != "offset"}]
    if kind == "atomic" and op.get("count", 1) > 1:
        yield [{**op, "count": 1}]


def _candidates(program: list[Any], knobs: dict[str, str], base: Mapping[str, str]) -> Iterator[tuple[list, dict]]:
    """Smaller or simpler variants of a failing case, the boldest first: ranges of ops (and
    subtrees) dropped, halving the range down to single ops; then each op simplified; then
    each knob put back to the host's own setting."""
    lists = list(_lists(program))
    for path, ops in lists:
        n = len(ops)
        size = n
        while size >= 1:
            for start in range(0, n, size):
                yield _replace(program, path, ops[:start] + ops[start + size :]), knobs
            size //= 2
    for path, ops in lists:
        for i, op in enumerate(ops):
            for repl in _op_simplifications(op):
                yield _replace(program, path, ops[:i] + repl + ops[i + 1 :]), knobs
    for k, v in knobs.items():
        if k in base and str(base[k]) != str(v):
            yield program, {**knobs, k: str(base[k])}


@dataclass
class Shrunk:
    """A shrunk failure: the program, its knobs, and the runs the shrink took."""

    program: list[dict[str, Any]]
    knobs: dict[str, str]
    runs: int
    result: dict[str, Any] | None = None


def shrink(
    program: list[dict[str, Any]],
    knobs: Mapping[str, str],
    run: Callable[[dict[str, Any], dict[str, str]], dict[str, Any]],
    target: frozenset[str],
    *,
    base_knobs: Mapping[str, str] | None = None,
    budget: int = SHRINK_RUNS,
    parse: bool = True,
) -> Shrunk:
    """Delta debugging over the op tree: the smallest variant found of a failing case that
    still fails the same way (:func:`same_failure` of its :func:`signature` and `target`). Only variants that pass
    :func:`check_workload` (and mmsim's parser) are run; at most `budget` runs of
    ``run(workload, knobs)``. `base_knobs` (the host's own THP settings) are tried in place of
    the case's, one knob at a time."""
    best = Shrunk(copy.deepcopy(program), dict(knobs), 0)
    tried: set[str] = set()
    progress = True
    while progress and best.runs < budget:
        progress = False
        for prog, kn in _candidates(best.program, best.knobs, base_knobs or {}):
            key = json.dumps([prog, kn], sort_keys=True)
            if key in tried:
                continue
            tried.add(key)
            w = {"name": "shrink", "knobs": kn, "program": prog}
            if check_workload(w) or (parse and parse_error(w)):
                continue
            if best.runs >= budget:
                break
            # A failure in system-wide counters alone must show twice in a row: other
            # processes' THP events reach them now and then.
            for _ in range(1 if target - SYSTEM_WIDE else 2):
                if best.runs >= budget:
                    result = None
                    break
                best.runs += 1
                try:
                    result = run(w, kn)
                except MmsimError as e:
                    result = _error_result(str(e))
                if not same_failure(signature(result), target):
                    result = None
                    break
            if result is not None:
                best.program, best.knobs, best.result = prog, dict(kn), result
                progress = True
                break
    return best


def _error_result(msg: str) -> dict[str, Any]:
    return {"status": "fail", "reason": msg, "counters": []}


# --------------------------------------------------------------------------------------------
# The campaign
# --------------------------------------------------------------------------------------------


#: A campaign holds this lock while it runs: two campaigns writing the host's THP knobs at
#: once would each run cases under the other's settings.
LOCK = Path("/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir()) / "mmsim-host-thp.lock"


@contextlib.contextmanager
def host_lock(waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold :data:`LOCK` (an exclusive flock) for the block; call `waiting` first if another
    process holds it, and wait for it."""
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                waiting()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _knob_key(knobs: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(str(knobs[k]) for k in KNOBS)


def campaign(
    n: int,
    seed: int | None = None,
    *,
    save_dir: str | Path = "validate-failures",
    shrink_runs: int = SHRINK_RUNS,
    validate: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]] | None = None,
    host_settings: Callable[[], dict[str, Any]] | None = None,
    host_set: Callable[[Mapping[str, str]], contextlib.AbstractContextManager[Any]] | None = None,
    threads: bool | None = None,
    progress: bool = False,
    on_seed: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Generate `n` cases from `seed` (default: from the clock), run each natively and in
    mmsim under its host THP knobs (cases grouped by knobs, so that sysfs is written once per
    group), shrink each failure and save it to `save_dir`; returns the figures
    (see :func:`format_figures`). `validate`, `host_settings` and `host_set` default to
    :mod:`mmsim.native`'s (tests put fakes in their place)."""
    from mmsim import native

    if seed is None:
        seed = int(time.time() * 1000) % 1_000_000_000
    if on_seed:
        on_seed(seed)
    if host_set is None:
        # The real host: one campaign at a time.
        with host_lock(lambda: print(f"mmsim: waiting for another campaign ({LOCK})", file=sys.stderr, flush=True)):
            return campaign(
                n,
                seed,
                save_dir=save_dir,
                shrink_runs=shrink_runs,
                validate=validate,
                host_settings=host_settings,
                host_set=native.HostSettings,
                threads=threads,
                progress=progress,
            )
    validate = validate or native.validate_workload
    read_host = host_settings or native.host_settings
    t0 = time.monotonic()
    cases = [generate_case(seed, i, threads) for i in range(n)]
    start = read_host()
    base = {k: str(start.get(k)) for k in KNOBS}

    # The host's own setting first (no sysfs write), then the others in a fixed order.
    groups: dict[tuple[str, ...], list[GeneratedCase]] = {}
    for c in cases:
        groups.setdefault(_knob_key(c.knobs), []).append(c)
    order = sorted(groups, key=lambda k: (k != _knob_key(base), k))

    results: dict[int, dict[str, Any]] = {}
    failures: list[dict[str, Any]] = []
    flaky: list[int] = []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n, unit="case", file=sys.stderr, delay=1.0)
    interrupted = False
    try:
        for key in order:
            knobs = dict(zip(KNOBS, key, strict=True))
            group = groups[key]
            if start.get(ENABLED) is None:
                for c in group:
                    results[c.index] = _skip("the host kernel has no transparent hugepage support")
                    if bar:
                        bar.update(1)
                continue
            changes = {k: v for k, v in knobs.items() if str(start.get(k)) != v}
            stack = contextlib.ExitStack()
            try:
                stack.enter_context(host_set(changes))
            except MmsimError as e:
                reason = f"cannot set the host's THP knobs ({' '.join(str(e).split())})"
                for c in group:
                    results[c.index] = _skip(reason)
                    if bar:
                        bar.update(1)
                continue
            with stack:
                run = _Runner(validate, read_host, host_set, knobs)
                if bar:
                    bar.set_description(f"THP {knobs[ENABLED]}, zero page {knobs[ZERO_PAGE]}")
                for c in group:
                    r = run(c.workload, knobs)
                    if r["status"] == "fail":
                        # Noise (/proc/vmstat is system-wide): a failure must show twice.
                        again = run(c.workload, knobs)
                        if again["status"] == "pass":
                            flaky.append(c.index)
                            again["reason"] = f"passed on a second run (first: {r['reason']})"
                        if again["status"] != "fail":
                            r = again
                    if r["status"] == "fail" and _noise(c.workload, r, run):
                        r = _skip(NOISE)
                    results[c.index] = r
                    if r["status"] == "fail":
                        failures.append(_failure(c, r, run, base, seed, save_dir, shrink_runs, read_host))
                    if bar:
                        bar.update(1)
                        bar.set_postfix(failed=len(failures))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if bar:
            bar.close()

    done = [results[i] for i in sorted(results)]
    skips = Counter(r["reason"] for r in done if r["status"] == "skip")
    fig: dict[str, Any] = {
        "seed": seed,
        "cases": len(done),
        "ops": sum(count_ops(c.workload["program"]) for c in cases if c.index in results),
        "counters": sum(len(r.get("counters", [])) for r in done),
        "passed": sum(r["status"] == "pass" for r in done),
        "failed": sum(r["status"] == "fail" for r in done),
        "skipped": sum(r["status"] == "skip" for r in done),
        "skip_reasons": dict(skips.most_common()),
        "flaky": len(flaky),
        "flaky_cases": [{"case": i, "reason": results[i]["reason"]} for i in sorted(flaky) if i in results],
        "invalid": sum(c.invalid for c in cases if c.index in results),
        "seconds": round(time.monotonic() - t0, 1),
        "host": {k: start.get(k) for k in ("kernel", *native.HOST_KNOBS)},
        "distinct_failures": len({json.dumps([f["workload"]["knobs"], f["workload"]["program"]]) for f in failures}),
        "failures": sorted(failures, key=lambda f: f["case"]),
    }
    if interrupted:
        fig["interrupted"] = True
    return fig


#: The skip reason of a failure that is the host's, not the workload's.
NOISE = (
    "system-wide THP events differ with the workload's memory accesses taken out too "
    "(another process on the host faulted or split THPs between the snapshots)"
)
ACCESSES = frozenset({"read", "write", "compare", "atomic"})


def without_accesses(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A program with every memory access taken out: it takes no page fault of its own."""
    out = []
    for op in ops:
        if op["op"] in ACCESSES:
            continue
        op = dict(op)
        for key in ("program", "body"):
            if key in op:
                op[key] = without_accesses(op[key])
        out.append(op)
    return out


def _noise(workload: dict[str, Any], result: dict[str, Any], run: Callable) -> bool:
    """Is a failure in system-wide counters only the host's noise? It is when the same
    counters move in the kernel (and not in mmsim) in a control run of the workload without
    its memory accesses, which faults nothing and so causes no THP event."""
    sig = signature(result)
    if not sig or not sig <= SYSTEM_WIDE:
        return False
    control = run({**workload, "program": without_accesses(workload["program"])}, workload["knobs"])
    return any(
        c["name"].split()[-1] in sig and c["simulated"] == 0 and c["kernel"] != 0 for c in control.get("counters", [])
    )


def _skip(reason: str) -> dict[str, Any]:
    return {"status": "skip", "reason": reason, "counters": []}


class _Runner:
    """Runs a workload under given host knobs, inside the group's settings: writes sysfs only
    for a knob that differs from them (a shrink trying the host's own setting), and makes sure
    nobody changed the host under the run."""

    def __init__(self, validate: Callable, read_host: Callable, host_set: Callable, group: Mapping[str, str]):
        self.validate, self.read_host, self.host_set, self.group = validate, read_host, host_set, dict(group)

    def __call__(self, workload: dict[str, Any], knobs: Mapping[str, str]) -> dict[str, Any]:
        changes = {k: v for k, v in knobs.items() if v != self.group.get(k)}
        with self.host_set(changes) if changes else contextlib.nullcontext():
            host = self.read_host()
            if any(str(host.get(k)) != str(v) for k, v in knobs.items()):
                return _skip("the host's THP settings are not the case's (changed by another process?)")
            try:
                r = self.validate(workload, host)
            except MmsimError as e:
                return _error_result(" ".join(str(e).split()))
            except (OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
                # A long campaign goes on; the case fails with what went wrong.
                return _error_result(f"validate: {type(e).__name__}: {' '.join(str(e).split())}")
            after = self.read_host()
        if any(str(after.get(k)) != str(host.get(k)) for k in KNOBS):
            return _skip("the host's THP settings changed during the case (another process wrote sysfs)")
        return r


def _failure(
    case: GeneratedCase,
    result: dict[str, Any],
    run: _Runner,
    base: Mapping[str, str],
    seed: int,
    save_dir: str | Path,
    shrink_runs: int,
    read_host: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    target = signature(result)
    s = shrink(case.workload["program"], case.knobs, run, target, base_knobs=base, budget=shrink_runs)
    host = read_host()
    knobs = {ENABLED: s.knobs[ENABLED], "transparent_hugepage/defrag": host.get("transparent_hugepage/defrag")}
    knobs[ZERO_PAGE] = s.knobs[ZERO_PAGE]
    knobs = {k: v for k, v in knobs.items() if v is not None}
    name = f"random-{seed}-{case.index}"
    shrunk = {"name": name, "knobs": knobs, "program": s.program}
    path = Path(save_dir) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(shrunk, indent=2) + "\n")
    return {
        "case": case.index,
        "knobs": case.knobs,
        "reason": result["reason"],
        "signature": sorted(target),
        "ops": count_ops(case.workload["program"]),
        "shrunk_ops": count_ops(s.program),
        "shrink_runs": s.runs,
        "shrunk_reason": (s.result or result)["reason"],
        "workload": shrunk,
        "file": str(path),
    }


def format_figures(fig: Mapping[str, Any]) -> str:
    """The text report of a campaign: each failure (reason, shrunk workload, file, the command
    that re-runs it), then the figures."""
    lines = []
    for f in fig["failures"]:
        kn = f["workload"]["knobs"]
        reason = f["reason"] if len(f["reason"]) <= 300 else f["reason"][:297] + "..."
        lines.append(
            f"FAIL  case {f['case']} (THP {f['knobs'][ENABLED]}, use_zero_page {f['knobs'][ZERO_PAGE]}): {reason}"
        )
        lines.append(
            f"      shrunk from {f['ops']} to {f['shrunk_ops']} ops in {f['shrink_runs']} runs: "
            f"{f['shrunk_reason'] if len(f['shrunk_reason']) <= 300 else f['shrunk_reason'][:297] + '...'}"
        )
        lines.append(f"      {json.dumps(f['workload'], separators=(',', ':'))}")
        sets = " ".join(f"--host-set {k}={kn[k]}" for k in KNOBS if k in kn)
        lines.append(f"      saved to {f['file']}; re-run: mmsim validate {sets} {f['file']}")
    h = fig["host"]
    lines.append(
        f"{fig['cases']} random cases (seed {fig['seed']}, {fig['ops']:,} ops, {fig['counters']:,} counters compared): "
        f"{fig['passed']} passed, {fig['failed']} failed ({fig['distinct_failures']} distinct shrunk workloads), "
        f"{fig['skipped']} skipped; "
        f"{fig['flaky']} passed on a second run, {fig['invalid']} invalid workloads regenerated; "
        f"{fig['seconds']:.1f} s (host: Linux {h.get('kernel')})"
    )
    for reason, k in fig["skip_reasons"].items():
        lines.append(f"  skipped {k}: {reason}")
    for f in fig.get("flaky_cases", []):
        reason = f["reason"] if len(f["reason"]) <= 200 else f["reason"][:197] + "..."
        lines.append(f"  case {f['case']} {reason}")
    if fig.get("interrupted"):
        lines.append("  interrupted: the figures cover the cases that ran")
    return "\n".join(lines) + "\n"
