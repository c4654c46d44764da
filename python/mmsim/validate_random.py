"""Kernel-differential fuzzing: ``mmsim validate --random N [--seed S]``.

Random workloads (:mod:`mmsim.random_workloads`: every op and host THP knob the native
runner supports) run on this machine's kernel and in mmsim configured like it
(:func:`mmsim.native.validate_workload`); a case whose counters differ is shrunk to a
minimal workload that still differs in the same counters, saved as a workload file and
printed.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmsim._mmsim import MmsimError
from mmsim.native_compare import HUGETLB_COUNTERS, PRESSURE_MEMINFO, PRESSURE_VMSTAT, differs
from mmsim.native_host import LOCK, host_lock  # one lock for every validate (LOCK re-exported)
from mmsim.random_checker import (
    DEFRAG,
    ENABLED,
    KNOBS,
    LABEL,
    MAX_TASKS,
    MAX_TOUCHED,
    PAGE,
    POOL,
    SHRINK_RUNS,
    THREADS,
    ZERO_PAGE,
    _size,
    check_workload,
    count_ops,
    parse_error,
)
from mmsim.random_workloads import GeneratedCase, generate_case

__all__ = [
    "DEFRAG",
    "ENABLED",
    "KNOBS",
    "LABEL",
    "MAX_TASKS",
    "MAX_TOUCHED",
    "SHRINK_RUNS",
    "THREADS",
    "ZERO_PAGE",
    "GeneratedCase",
    "_size",
    "campaign",
    "check_workload",
    "count_ops",
    "format_figures",
    "generate_case",
    "parse_error",
    "shrink",
    "signature",
]

#: System-wide counters of /proc/vmstat and /proc/meminfo (other processes' events land in
#: them too): the THP events, the hugetlb pool's (which no generated workload uses), and
#: reclaim's and swap's (compared in a case under memory pressure).
SYSTEM_WIDE = frozenset(
    {"thp_fault_alloc", "thp_zero_page_alloc", "thp_split_pmd", *HUGETLB_COUNTERS, *PRESSURE_VMSTAT, *PRESSURE_MEMINFO}
)

#: A workload's top-level fields besides its program and knobs (memory cgroups, the first
#: process's cgroup, swap devices), which a shrink keeps as they are.
SETUP = ("cgroups", "cgroup", "machine")


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
    bad = [c for c in result.get("counters", []) if differs(c)]
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
        if "cgroup" in op:
            yield [{k: v for k, v in op.items() if k != "cgroup"}]
    if kind == "memory_reclaim":
        h = _halve(op["bytes"], PAGE, page=True)
        if h:
            yield [{**op, "bytes": h}]
        if "swappiness" in op:
            yield [{k: v for k, v in op.items() if k != "swappiness"}]
    if kind == "loop":
        yield copy.deepcopy(op["body"])
        if op["count"] > 1:
            yield [{**op, "count": 1}]
    if kind == "mmap" and "file" in op:
        # The same region, anonymous (its file may then go).
        yield [{k: v for k, v in op.items() if k not in ("file", "file_offset", "flags")}]
    if kind == "mmap":
        for k in ("align", "prot") if "file" in op else ("align", "prot", "flags"):
            if k in op:
                yield [{kk: vv for kk, vv in op.items() if kk != k}]
        h = _halve(op["size"], PAGE, page=True)
        if h:
            yield [{**op, "size": h}]
    if kind in ("pwrite", "pread", "fadvise") and "length" in op:
        h = _halve(op["length"], 1, page=False)
        if h:
            yield [{**op, "length": h}]
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
    setup: Mapping[str, Any] | None = None,
) -> Shrunk:
    """Delta debugging over the op tree: the smallest variant found of a failing case that
    still fails the same way (:func:`same_failure` of its :func:`signature` and `target`). Only variants that pass
    :func:`check_workload` (and mmsim's parser) are run; at most `budget` runs of
    ``run(workload, knobs)``. `base_knobs` (the host's own THP settings) are tried in place of
    the case's, one knob at a time. `setup` (the workload's cgroups and swap devices: :data:`SETUP`)
    goes into every variant as it is."""
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
            w = {"name": "shrink", **(setup or {}), "knobs": kn, "program": prog}
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
    pressure: float | None = None,
) -> dict[str, Any]:
    """Generate `n` cases from `seed` (default: from the clock), run each natively and in
    mmsim under its host THP knobs (cases grouped by knobs, so that sysfs is written once per
    group), shrink each failure and save it to `save_dir`; returns the figures
    (see :func:`format_figures`). `validate`, `host_settings` and `host_set` default to
    :func:`mmsim.native.validate_workload`, :func:`mmsim.native_host.host_settings` and
    :class:`mmsim.native_knobs.HostSettings` (tests put fakes in their place). `pressure` is
    the share of cases under memory pressure (default :data:`mmsim.random_checker.PRESSURE`)."""
    from mmsim import native, native_compare, native_host, native_knobs

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
                host_set=native_knobs.HostSettings,
                threads=threads,
                progress=progress,
                pressure=pressure,
            )
    # The random campaign compares every exact counter but the mlock events (see
    # native_compare.MLOCK_EVENTS: Linux's per-CPU mlock batches, a known difference).
    events = native_compare.THP_EVENTS + native_compare.LAZYFREE_EVENTS
    validate = validate or functools.partial(native.validate_workload, events=events)
    read_host = host_settings or native_host.host_settings
    t0 = time.monotonic()
    start = read_host()
    v2 = start.get("cgroup/memory") == "v2"
    cases = [generate_case(seed, i, threads, pressure=pressure, memcg_v2=v2) for i in range(n)]
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
                    bar.set_description(f"THP {knobs[ENABLED]}, defrag {knobs[DEFRAG]}, zero page {knobs[ZERO_PAGE]}")
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
        "host": {k: start.get(k) for k in ("kernel", *native_host.HOST_KNOBS)},
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
    setup = {k: case.workload[k] for k in SETUP if k in case.workload}
    s = shrink(case.workload["program"], case.knobs, run, target, base_knobs=base, budget=shrink_runs, setup=setup)
    host = read_host()
    knobs = {ENABLED: s.knobs[ENABLED], DEFRAG: s.knobs.get(DEFRAG, host.get(DEFRAG))}
    knobs[ZERO_PAGE] = s.knobs[ZERO_PAGE]
    if POOL in s.knobs:
        knobs[POOL] = s.knobs[POOL]  # the pool its hugetlb memfds need
    knobs = {k: v for k, v in knobs.items() if v is not None}
    name = f"random-{seed}-{case.index}"
    shrunk = {"name": name, **setup, "knobs": knobs, "program": s.program}
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
            f"FAIL  case {f['case']} (THP {f['knobs'][ENABLED]}, defrag {f['knobs'].get(DEFRAG)}, "
            f"use_zero_page {f['knobs'][ZERO_PAGE]}): {reason}"
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
