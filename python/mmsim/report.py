"""Reports as text: what ``mmsim run`` prints, in the layout of ``perf stat`` followed by
/proc/meminfo and /proc/vmstat deltas, /proc/PID/status, snapshots, events and the check.

The report itself is plain data (see :func:`mmsim.run_workload`); this module only prints it.

```python
>>> print(format_number(1234567), format_number(0.5), format_delta(-2048))
1,234,567 0.50 -2,048

```
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["deltas", "format_delta", "format_number", "format_report"]

#: perf stat prints the software counters first (cpu-migrations, then the faults); mmsim
#: does the same.
FIRST_EVENTS = ("cpu-migrations", "page-faults", "minor-faults", "major-faults")
#: Counters shown in the text, not as rows (see _perf_lines).
NOT_ROWS = {"seconds", "task-clock"}
#: Columns of the process table: (report key, heading).
PROCESS_COLUMNS = (
    ("minflt", "minflt"),
    ("VmRSS", "VmRSS"),
    ("RssAnon", "RssAnon"),
    ("RssShmem", "RssShmem"),
    ("VmPTE", "VmPTE"),
    ("AnonHugePages", "AnonHugePages"),
)
#: Most processes a table lists (forks of thousands of children stay readable; --json has all).
MAX_PROCESSES = 32
#: Most events listed.
MAX_EVENTS = 50


def format_number(v: float) -> str:
    """An integer with thousands separators, or a fraction with two decimals."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, int) or v.is_integer():
        return f"{int(v):,}"
    return f"{v:,.2f}"


def format_delta(v: float) -> str:
    """A signed change: ``+4,096``, ``-512``, ``0``."""
    s = format_number(v)
    return f"+{s}" if v > 0 else s


def deltas(end: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """``end - base`` for every numeric counter of ``end`` whose value changed."""
    out = {}
    for name, v in end.items():
        if not _is_number(v):
            continue
        d = v - base.get(name, 0) if _is_number(base.get(name, 0)) else v
        if d:
            out[name] = d
    return out


def format_report(report: Mapping[str, Any]) -> str:
    """The whole text report of a run."""
    base = report.get("baseline") or {}
    parts = [
        _perf_lines(report),
        _meminfo_lines(report.get("meminfo", {}), base.get("meminfo", {})),
        _vmstat_lines(report.get("vmstat", {}), base.get("vmstat", {})),
        _coherence_lines(report.get("coherence") or {}),
        _process_lines(report.get("processes", [])),
        _process_perf_lines(report.get("processes", [])),
        _profile_lines(report),
        _snapshot_lines(report.get("snapshots", []), base),
        _event_lines(report.get("events", []), (report.get("engine") or {}).get("events_dropped", 0)),
        _check_lines(report),
        _replay_lines(report.get("replay") or []),
    ]
    return "\n\n".join("\n".join(p) for p in parts if p) + "\n"


def _coherence_lines(c: Mapping[str, Any]) -> list[str]:
    """What kept the private caches coherent (the report's `coherence`), when anything moved."""
    moved = sum(c.get(f"transfers-{d}", 0) for d in ("smt", "socket", "remote"))
    if not moved and not c.get("invalidations"):
        return []
    return [
        "Coherence (MESI between the CPUs' private caches):",
        f"  {format_number(moved)} modified lines moved between CPUs (sibling thread "
        f"{format_number(c.get('transfers-smt', 0))}, same socket {format_number(c.get('transfers-socket', 0))}, "
        f"other socket {format_number(c.get('transfers-remote', 0))}; "
        f"{format_number(c.get('atomic-transfers', 0))} of atomics and locks)",
        f"  {format_number(c.get('invalidations', 0))} copies invalidated by writes, "
        f"{format_number(c.get('transfer-cycles', 0))} cycles of core-to-core latency, "
        f"{format_number(c.get('directory-lines', 0))} lines in the directory at the end",
    ]


def _replay_lines(replays: list[Mapping[str, Any]]) -> list[str]:
    """What each replay replayed, and the system calls it replayed as no-ops."""
    lines = []
    for r in replays:
        if r.get("format", "mmsim").startswith("champsim"):
            lines.append(f"Replay of {r['trace']} ({r['format']}, {r['compression']}):")
            lines.append(f"  address space: {r['address_space']} ({r['first_touch_vmas']:,} mapped)")
            if r.get("outside_user_space"):
                lines.append(f"  {r['outside_user_space']:,} accesses outside user space, not replayed")
        else:
            cmd = " ".join(r.get("command") or []) or r["trace"]
            lines.append(f"Replay of {cmd} ({r['trace']}{', cold' if r.get('cold') else ''}):")
        lines.append(
            f"  {r['records']:,} records: {r['instructions']:,} instructions, {r['loads']:,} loads, "
            f"{r['stores']:,} stores; {r['processes']} processes, {r['threads']} threads; "
            f"{sum(r['syscalls'].values()):,} system calls; {r['files']} files ({r['warmed_bytes']:,} bytes warmed)"
        )
        if r.get("place") == "kernel":
            lines.append(
                f"  placed by the kernel: {r.get('relocated', 0):,} mappings elsewhere than recorded "
                f"({r.get('relocated_bytes', 0):,} bytes)"
            )
        status = ", ".join(f"{pid}: {st}" for pid, st in r.get("exit_status") or [])
        if status:
            lines.append(f"  exit status: {status}")
        noop = r.get("unmodelled") or {}
        if noop:
            calls = ", ".join(
                f"{n} x{c['count']}" + (f" ({c['bytes_mapped']:,} bytes mapped)" if c["bytes_mapped"] else "")
                for n, c in noop.items()
            )
            lines.append(f"  replayed as no-ops (not modelled): {calls}")
    return lines


def _perf_lines(report: Mapping[str, Any]) -> list[str]:
    perf = report.get("perf", {})
    m = report.get("machine") or {}
    where = "mmsim"
    if m:
        mem = int(m.get("memory", 0))
        size = f"{mem >> 30} GiB" if mem >= 1 << 30 else f"{mem >> 20} MiB"
        cpus = int(m.get("cpus", 1))
        where = f"mmsim, {m.get('profile', '?')} profile, {size}, {cpus} CPU{'s' if cpus != 1 else ''}"
    lines = [f" Performance counter stats for '{report.get('workload', '?')}' ({where}):", ""]
    if "task-clock" in perf:
        lines.append(f"{format_number(float(perf['task-clock'])):>18} msec task-clock")
    names = [n for n in FIRST_EVENTS if n in perf]
    names += [n for n in perf if n not in FIRST_EVENTS and n not in NOT_ROWS]
    if int(m.get("cpus", 1)) == 1:
        # One CPU: no other cache to take a line from, no other CPU to move to.
        names = [n for n in names if not n.startswith("hitm-") and n != "cpu-migrations"]
    sampling = report.get("sampling") or {}
    ci = sampling.get("ci95") or {}
    for name in names:
        row = f"{format_number(perf[name]):>18}      {name}"
        note = _perf_note(name, perf)
        row = f"{row:<56}# {note}" if note else row
        lines.append(row + _ci_note(ci.get(name), perf[name], len(row)))
    if "seconds" in perf:
        lines += [
            "",
            f"{perf['seconds']:>18.9f} seconds time elapsed" + _ci_note(ci.get("seconds"), perf["seconds"], 92),
        ]
    if sampling:
        lines += [
            "",
            f" Sampled (--sample {sampling['units']}:{sampling['warmup']}):"
            f" {format_number(sampling['extrapolated_iterations'])} loop iterations"
            f" ({format_number(sampling['extrapolated_steps'])} steps) added as the mean of"
            f" {format_number(sampling['units_measured'])} measured units in {sampling['extrapolations']}"
            " extrapolation(s); ( +- x% ) is the 95% confidence interval. Faults and kernel counters are exact.",
        ]
    engine = report.get("engine") or {}
    if engine.get("fast_forwarded_iterations"):
        lines += [
            "",
            f" Exact fast-forward: {format_number(engine['fast_forwarded_iterations'])} loop iterations"
            f" ({format_number(engine.get('fast_forwarded_steps', 0))} steps) repeated a simulated"
            " iteration's state and counts exactly; `--set engine.fast_forward=0` simulates them one by one.",
        ]
    return lines


def _ci_note(half: float | None, value: float, width: int) -> str:
    """perf stat -r's ``( +- 0.12% )`` column: a sampled counter's 95% half-width."""
    if half is None:
        return ""
    pct = 100.0 * half / value if value else 0.0
    return " " * max(2, 94 - width) + f"( +- {pct:5.2f}% )"


def _perf_note(name: str, perf: Mapping[str, Any]) -> str:
    """perf stat's derived comment for a row: instructions per cycle, miss ratios."""
    if name == "instructions" and perf.get("cycles"):
        return f"{perf[name] / perf['cycles']:8.2f}  insn per cycle"
    if name.startswith("stalled-cycles-") and perf.get("cycles"):
        end = name.removeprefix("stalled-cycles-")
        return f"{100.0 * perf[name] / perf['cycles']:7.2f}% {end} cycles idle"
    if name.endswith("-misses"):
        for total in (name[: -len("-misses")] + "s", name.replace("-misses", "es")):
            if total != name and perf.get(total):
                return f"{100.0 * perf[name] / perf[total]:7.2f}% of all {total}"
    return ""


def _meminfo_lines(end: Mapping[str, Any], base: Mapping[str, Any]) -> list[str]:
    changed = deltas(end, base)
    if not changed:
        return []
    width = max(len(n) for n in changed) + 1
    lines = ["/proc/meminfo (change during the run; value at the end):"]
    for name, d in changed.items():
        change, value = format_delta(d), format_number(end[name])
        lines.append(f"  {name + ':':<{width}} {change:>14} kB {value:>16} kB")
    return lines


def _vmstat_lines(end: Mapping[str, Any], base: Mapping[str, Any]) -> list[str]:
    changed = deltas(end, base)
    if not changed:
        return []
    width = max(len(n) for n in changed)
    lines = ["/proc/vmstat (change during the run):"]
    lines += [f"  {name:<{width}} {format_delta(d):>14}" for name, d in changed.items()]
    return lines


def _process_lines(processes: list[Mapping[str, Any]]) -> list[str]:
    if not processes:
        return []
    head = ["pid", "state", *(h for _, h in PROCESS_COLUMNS)]
    rows = [
        [
            str(p.get("pid", "?")),
            str(p.get("state", "?")),
            *(format_number(p.get(k, 0)) for k, _ in PROCESS_COLUMNS),
        ]
        for p in processes[:MAX_PROCESSES]
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(r: list[str]) -> str:
        cells = [r[0].rjust(widths[0]), r[1].ljust(widths[1])]
        cells += [c.rjust(w) for c, w in zip(r[2:], widths[2:], strict=True)]
        return "  " + "  ".join(cells)

    lines = ["Processes (/proc/PID/status; sizes in kB):", line(head), *map(line, rows)]
    if len(processes) > MAX_PROCESSES:
        lines.append(f"  ... {len(processes) - MAX_PROCESSES} more (see --json)")
    return lines


PERF_COLUMNS = [
    ("task-clock", "task-clock ms"),
    ("cycles", "cycles"),
    ("instructions", "instructions"),
    ("page-faults", "page-faults"),
    ("dTLB-load-misses", "dTLB-load-misses"),
    ("LLC-load-misses", "LLC-load-misses"),
]


def _process_perf_lines(processes: list[Mapping[str, Any]]) -> list[str]:
    """perf stat per process (perf stat --per-thread), when there is more than one."""
    if len(processes) < 2 or not all("perf" in p for p in processes):
        return []
    head = ["pid", *(h for _, h in PERF_COLUMNS)]
    rows = [[str(p["pid"]), *(format_number(p["perf"].get(k, 0)) for k, _ in PERF_COLUMNS)] for p in processes]
    rows = rows[:MAX_PROCESSES]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["Per process (perf stat --per-thread):"]
    lines += ["  " + "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows]]
    if len(processes) > MAX_PROCESSES:
        lines.append(f"  ... {len(processes) - MAX_PROCESSES} more (see --json)")
    return lines


def _profile_lines(report: Mapping[str, Any]) -> list[str]:
    """The kernel's share of the cycles by function, like perf report's top lines."""
    prof = {k: v for k, v in (report.get("profile") or {}).items() if v}
    total = (report.get("perf") or {}).get("cycles") or 0
    if not prof or not total:
        return []
    lines = ["Kernel functions (share of all cycles):"]
    for name, cycles in sorted(prof.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {100.0 * cycles / total:7.2f}%  {format_number(cycles):>16}  {name}")
    return lines


def _snapshot_lines(snapshots: list[Mapping[str, Any]], base: Mapping[str, Any]) -> list[str]:
    lines = []
    for s in snapshots:
        lines.append(f"Snapshot '{s.get('label', '?')}' (change since the start):")
        vm = deltas(s.get("vmstat", {}), base.get("vmstat", {}))
        mem = deltas(s.get("meminfo", {}), base.get("meminfo", {}))
        lines.append("  vmstat:  " + (_compact(vm) or "no change"))
        lines.append("  meminfo: " + (_compact(mem, " kB") or "no change"))
        procs = [p for p in s.get("processes", []) if p.get("state") == "running"]
        for p in procs[:MAX_PROCESSES]:
            fields = ", ".join(
                f"{k} {format_number(p.get(k, 0))}{'' if k == 'minflt' else ' kB'}" for k, _ in PROCESS_COLUMNS
            )
            lines.append(f"  pid {p.get('pid', '?')}: {fields}")
        if len(procs) > MAX_PROCESSES:
            lines.append(f"  ... {len(procs) - MAX_PROCESSES} more processes (see --json)")
    return lines


def _event_lines(events: list[Mapping[str, Any]], dropped: int = 0) -> list[str]:
    if not events:
        return []
    lines = ["Events:"]
    for e in events[:MAX_EVENTS]:
        lines.append(f"  pid {e.get('pid', '?')}: {e.get('kind', '?')}: {e.get('message', '')}")
    if len(events) > MAX_EVENTS:
        lines.append(f"  ... {len(events) - MAX_EVENTS} more (see --json)")
    if dropped:
        lines.append(f"  ... and {format_number(dropped)} more not kept (engine.events_dropped)")
    return lines


def _check_lines(report: Mapping[str, Any]) -> list[str]:
    c = report.get("check") or {}
    lines = []
    if c.get("enabled") or c.get("expect_failures"):
        lines.append(
            f"check: {format_number(c.get('reads_checked', 0))} reads checked, "
            f"{format_number(c.get('mismatches', 0))} mismatches, "
            f"{format_number(c.get('expect_failures', 0))} expect failures"
            + ("" if c.get("enabled") else " (reference model off; use --check)")
        )
    if report.get("failed"):
        lines.append("FAILED")
    return lines


def _compact(d: Mapping[str, Any], unit: str = "") -> str:
    return ", ".join(f"{n} {format_delta(v)}{unit}" for n, v in d.items())


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)
