"""A run's timeline (``mmsim run --timeline FILE``): every CPU's time as Chrome's trace-event JSON,
which Perfetto's UI (ui.perfetto.dev) and ``chrome://tracing`` open, and a self-contained HTML page
beside it that draws the same tracks.

Made from the run's events (``engine.events``): each ``sched:sched_switch`` starts a task's
slice on its CPU (a complete event, ``ph: X``, until the CPU's next switch or the run's end);
every other event is an instant (``ph: i``) on its CPU's track: page faults, page allocations,
TLB flushes, khugepaged's scans and collapses, kscrubd's zeroed blocks. A wait
(``mmsim:lock_wait`` for a contended lock or refcount line, ``mmsim:io_wait`` for the block
device), raised when it ends with its length in ``ns``, is a slice of its own inside the task's.
Time is simulated time, in microseconds as the format has it.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

#: An instant's category (the part of its name before the colon) -> its colour on the page.
COLOURS = {
    "exceptions": "#d62728",
    "kmem": "#9467bd",
    "huge_memory": "#ff7f0e",
    "filemap": "#8c564b",
    "tlb": "#1f77b4",
    "mmsim": "#2ca02c",
    "sched": "#7f7f7f",
}


#: Events that end a wait, drawn as slices of the wait's length (``ns``) -> the slice's name.
WAITS = {"mmsim:lock_wait": "lock wait", "mmsim:io_wait": "I/O wait"}


def chrome_trace(report: dict[str, Any]) -> dict[str, Any]:
    """The trace-event JSON of a report whose run recorded its events."""
    events = sorted(report.get("trace_events", []), key=lambda e: e["time"])
    cpus = int(report.get("machine", {}).get("cpus", 1))
    name = report.get("workload") or "mmsim"
    out: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": name}}]
    for c in range(cpus):
        out.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": c, "args": {"name": f"CPU {c}"}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": c, "args": {"sort_index": c}})
    end = max((e["time"] for e in events), default=0.0)
    running: dict[int, tuple[str, int, float]] = {}

    def close(cpu: int, at: float) -> None:
        if cpu in running:
            comm, pid, start = running.pop(cpu)
            if comm.startswith("swapper/") or at <= start:
                return  # the idle task, or a wake-up that found nothing to do
            out.append(
                {
                    "name": f"{comm} {pid}",
                    "cat": "task",
                    "ph": "X",
                    "pid": 0,
                    "tid": cpu,
                    "ts": start * 1e6,
                    "dur": max(at - start, 0.0) * 1e6,
                    "args": {"comm": comm, "pid": pid},
                }
            )

    for e in events:
        cpu = int(e["cpu"])
        if e["event"] == "sched:sched_switch":
            close(cpu, e["time"])
            # The event is the outgoing task's (as perf records it); the incoming one is named in it.
            m = re.search(r"next_comm=(.*) next_pid=(\d+)", e["fields"])
            if m:
                running[cpu] = (m.group(1), int(m.group(2)), e["time"])
            continue
        wait = WAITS.get(e["event"])
        if wait is not None:
            m = re.search(r"\bns=([0-9.]+)", e["fields"])
            ns = float(m.group(1)) if m else 0.0
            out.append(
                {
                    "name": wait,
                    "cat": "wait",
                    "ph": "X",
                    "pid": 0,
                    "tid": cpu,
                    "ts": e["time"] * 1e6 - ns / 1e3,
                    "dur": ns / 1e3,
                    "args": {"comm": e["comm"], "pid": e["pid"], "fields": e["fields"]},
                }
            )
            continue
        out.append(
            {
                "name": e["event"],
                "cat": e["event"].split(":", 1)[0],
                "ph": "i",
                "s": "t",
                "pid": 0,
                "tid": cpu,
                "ts": e["time"] * 1e6,
                "args": {"comm": e["comm"], "pid": e["pid"], "fields": e["fields"]},
            }
        )
    for cpu in list(running):
        close(cpu, end)
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": {"workload": name, "cpus": cpus}}


PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>mmsim timeline: {title}</title>
<style>body{{font:13px sans-serif;margin:16px}} canvas{{border:1px solid #ccc}} .k span{{margin-right:14px}}</style>
</head><body>
<h1>{title}</h1>
<p>Every CPU's simulated time (<a href="{json}">{json}</a>, Chrome's trace-event format: open it in
ui.perfetto.dev or chrome://tracing to zoom). Boxes are tasks running, bars under them waits for a
lock (red) or I/O (grey); ticks are events.</p>
<p class="k">{legend}</p>
<canvas id="c" width="1400" height="100"></canvas>
<script>
const trace = {data};
const ev = trace.traceEvents, cpus = trace.otherData.cpus, colours = {colours};
const W = 1400, L = 70, row = 46, c = document.getElementById('c');
c.height = 30 + cpus * row;
const g = c.getContext('2d');
let end = 0;
for (const e of ev) if (e.ph !== 'M') end = Math.max(end, e.ts + (e.dur || 0));
const x = t => L + (W - L - 10) * (end ? t / end : 0);
g.font = '12px sans-serif';
for (let cpu = 0; cpu < cpus; cpu++) {{
  g.fillStyle = '#000'; g.fillText('CPU ' + cpu, 4, 24 + cpu * row + 18);
}}
const names = {{}}; let hue = 0;
for (const e of ev) if (e.ph === 'X' && e.cat !== 'wait') {{
  if (!(e.name in names)) {{ names[e.name] = 'hsl(' + (hue * 67 % 360) + ',45%,75%)'; hue++; }}
  const y = 24 + e.tid * row;
  g.fillStyle = names[e.name]; g.fillRect(x(e.ts), y, Math.max(x(e.ts + e.dur) - x(e.ts), 1), 20);
  if (x(e.ts + e.dur) - x(e.ts) > 60) {{ g.fillStyle = '#000'; g.fillText(e.name, x(e.ts) + 3, y + 14); }}
}}
for (const e of ev) if (e.cat === 'wait') {{
  const y = 24 + e.tid * row + 14;
  g.fillStyle = e.name === 'I/O wait' ? '#555' : '#b00';
  g.fillRect(x(e.ts), y, Math.max(x(e.ts + e.dur) - x(e.ts), 1), 6);
}}
for (const e of ev) if (e.ph === 'i') {{
  const y = 24 + e.tid * row + 22;
  g.fillStyle = colours[e.cat] || '#000'; g.fillRect(x(e.ts), y, 1, 14);
}}
g.fillStyle = '#000'; g.fillText('0', L, 14); g.fillText((end / 1e3).toFixed(3) + ' ms', W - 80, 14);
</script></body></html>
"""


def write(report: dict[str, Any], path: str | Path) -> tuple[Path, Path]:
    """Write the timeline's JSON to `path` and the page that draws it beside it (`path` with
    ``.html``); returns both."""
    path = Path(path)
    trace = chrome_trace(report)
    path.write_text(json.dumps(trace))
    page = path.with_suffix(".html")
    legend = " ".join(f'<span style="color:{c}">&#9646; {html.escape(k)}</span>' for k, c in COLOURS.items())
    title = html.escape(str(trace["otherData"]["workload"]))
    page.write_text(
        PAGE.format(
            title=title, json=html.escape(path.name), legend=legend, data=json.dumps(trace), colours=json.dumps(COLOURS)
        )
    )
    return path, page
