"""``mmsim reproduce --report DIR``: the seed reproductions as a web page with plots.

Writes ``DIR/index.html`` and ``DIR/report.md`` (the same content), and per experiment two
PNG figures: the published metrics beside the simulated ones (one small panel per metric,
in its unit), and the simulated counters that explain them (TLB and cache misses, faults,
page-table memory) per configuration. Every figure has a caption saying what to see.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

from mmsim._mmsim import MmsimError

__all__ = ["require_matplotlib", "write_report"]

#: Why ``--report`` cannot run without matplotlib (the optional extra ``mmsim[plot]``).
NEEDS_MATPLOTLIB = "--report needs matplotlib: install mmsim[plot] (pip install 'mmsim[plot]')"


def require_matplotlib() -> None:
    """Raise :class:`MmsimError` (one line) unless matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MmsimError(NEEDS_MATPLOTLIB) from None


#: What each experiment's figures show (the claim is the experiment's own).
CAPTIONS = {
    "hzp-rss": (
        "RSS growth and RssAnon growth per policy. With THP always and no zero page the 200 MiB read "
        "allocates 100 huge pages; the huge zero page (and the virtual one) keep RSS where THP never "
        "keeps it.",
        "Faults, VmPTE growth and AnonHugePages per policy: one fault per 2 MiB under THP, one per "
        "4 KiB without; every policy keeps 100 PTE tables (deposited under huge pmds).",
    ),
    "hzp-memcmp": (
        "Microbenchmark1 on Westmere-EX, published (left bar) and simulated (right bar): cycles, "
        "instructions, IPC, stall shares and faults for the huge zero page and the virtual one.",
        "Why: with hzp every load misses the L1 (the 2 MiB page does not fit it) but TLB misses are "
        "rare; with vhzp the 4 KiB zero page stays in the L1 and every 4 KiB costs page walks.",
    ),
    "hzp-stride": (
        "Microbenchmark2 (one read per 4 KiB of each half): task-clock and faults, published beside "
        "simulated, and the vhzp/hzp time ratio.",
        "Why: vhzp walks the page tables on every read (dTLB-load-misses), hzp misses the L1 instead "
        "(its 512 lines at a 4 KiB stride share one L1 set).",
    ),
    "hzp-usemem": (
        "usemem -n 72 on Haswell-EP: the share of cycles in get_huge_zero_page, runtime and throughput "
        "with the global refcount and with the per-mm one.",
        "Faults are the same for both policies; only who touches the shared refcount line changes.",
    ),
    "text-thp": (
        "Seed 004's 483 MB text run 9,921 times (sampled): seconds, page faults, cycles, iTLB and dTLB "
        "misses, LLC traffic and PmdMapped with 4 KiB pages and with the prototype's 2 MiB pages, published "
        "beside simulated.",
        "The same program under khugepaged, 6.18's large folios and the prototype's fallback, and the "
        "memory two concurrent executions take: the prototype copies the text per execution.",
    ),
}

COUNTERS = (
    "page faults",
    "page-faults",
    "VmPTE growth",
    "AnonHugePages",
    "dTLB-load-misses",
    "L1-dcache-load-misses",
    "LLC-load-misses",
    # memory-limit: what the limit costs.
    "simulated time",
    "major faults",
    "pswpout",
    "workingset refaults (anon)",
)


def _plot_published(e: dict[str, Any], path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in e["rows"] if r["published"] is not None]
    if not rows:
        return False
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    n = len(metrics)
    cols = min(4, n)
    nrows = (n + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(3.2 * cols, 2.6 * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax, metric in zip(axes.flat, metrics, strict=False):
        rs = [r for r in rows if r["metric"] == metric]
        x = range(len(rs))
        ax.bar([i - 0.2 for i in x], [r["published"] for r in rs], 0.4, label="published", color="#888888")
        ax.bar([i + 0.2 for i in x], [r["simulated"] for r in rs], 0.4, label="simulated", color="#1f77b4")
        ax.set_xticks(list(x), [r["config"] for r in rs], fontsize=7, rotation=20, ha="right")
        ax.set_title(metric, fontsize=9)
        ax.set_ylabel(rs[0]["unit"], fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def _plot_counters(e: dict[str, Any], path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in e["rows"] if r["metric"] in COUNTERS]
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    if not metrics:
        return False
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 2.8), squeeze=False)
    for ax, metric in zip(axes.flat, metrics, strict=True):
        rs = [r for r in rows if r["metric"] == metric]
        values = [r["simulated"] for r in rs]
        ax.bar(range(len(rs)), values, color="#1f77b4")
        ax.set_xticks(range(len(rs)), [r["config"] for r in rs], fontsize=7, rotation=20, ha="right")
        ax.set_title(f"{metric} (simulated)", fontsize=9)
        ax.set_ylabel(rs[0]["unit"], fontsize=8)
        if max(values, default=0) > 0 and min(v for v in values) >= 0 and max(values) > 1000 * max(min(values), 1):
            ax.set_yscale("symlog")
        ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and not v.is_integer():
        return f"{v:,.3f}" if abs(v) < 1000 else f"{v:,.0f}"
    return f"{int(v):,}"


def _scoreboard(score: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The report's opening table (`experiments.scoreboard`), as Markdown lines and HTML."""
    cols = ["experiment", "published numbers", "within 10 %", "within 25 %", "directions kept"]
    rows = [(name, s) for name, s in score["experiments"].items() if s["published"] or s["directions"]] + [
        ("total", score)
    ]
    md = ["## Scoreboard", "", "| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]
    trs = []
    for name, s in rows:
        cells = [
            str(s["published"]),
            str(s["within_10"]),
            str(s["within_25"]),
            f"{s['directions_kept']} of {s['directions']}",
        ]
        label = name if name == "total" else f"[{name}](#{name})"
        md.append(f"| {label} | " + " | ".join(cells) + " |")
        first = html.escape(name) if name == "total" else f"<a href='#{html.escape(name)}'>{html.escape(name)}</a>"
        bold = (lambda c: f"<b>{c}</b>") if name == "total" else (lambda c: c)
        trs.append("<tr>" + "".join(f"<td>{bold(c)}</td>" for c in [first, *map(html.escape, cells)]) + "</tr>")
    md += [
        "",
        "Directions: every two configurations' published numbers of one metric that differ, kept when the "
        "simulated numbers differ the same way (a lone ratio: on the same side of 1).",
        "",
    ]
    body = [
        "<h2 id='scoreboard'>Scoreboard</h2>",
        "<table><tr>" + "".join(f"<th>{c}</th>" for c in cols) + "</tr>" + "".join(trs) + "</table>",
        "<p>Directions: every two configurations' published numbers of one metric that differ, kept when the "
        "simulated numbers differ the same way (a lone ratio: on the same side of 1).</p>",
    ]
    return md, body


def write_report(
    results: list[dict[str, Any]],
    out: str | os.PathLike[str],
    scale_note: str = "",
    timelines: dict[str, tuple[str, str]] | None = None,
) -> Path:
    """Write ``index.html``, ``report.md`` and the figures of ``results`` (``mmsim reproduce
    --json``'s experiment list) into ``out``; returns the path of ``index.html``. ``timelines``
    (``experiments.write_timelines``): each experiment's timeline page in ``out``, linked from its
    section, or why it has none."""
    from mmsim.experiments import ratio, scoreboard

    require_matplotlib()

    d = Path(out)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise MmsimError(f"reproduce --report: cannot create {d}: {e.strerror or e}") from None
    title = "mmsim: the seeds' experiments, reproduced"
    md = [f"# {title}", ""]
    if scale_note:
        md += [scale_note, ""]
    body = [f"<h1>{html.escape(title)}</h1>"]
    if scale_note:
        body.append(f"<p>{html.escape(scale_note)}</p>")
    md_score, html_score = _scoreboard(scoreboard(results))
    md += md_score
    body += html_score
    for e in results:
        name = e["name"]
        head = f"{name} (seed {e['seed']}, profile {e['profile']})"
        md += [f"## {head}", "", f"**Claim.** {e['claim']}", ""]
        body += [
            f"<h2 id='{html.escape(name)}'>{html.escape(head)}</h2>",
            f"<p><b>Claim.</b> {html.escape(e['claim'])}</p>",
        ]
        if timelines and name in timelines:
            page, what = timelines[name]
            if page:
                md += [f"[Timeline]({page}) of its first simulation ({what}): every CPU's time and events.", ""]
                body.append(
                    f"<p><a href='{html.escape(page)}'>Timeline</a> of its first simulation ({html.escape(what)}): "
                    "every CPU's time and events.</p>"
                )
            else:
                md += [f"No timeline: {what}.", ""]
                body.append(f"<p>No timeline: {html.escape(what)}.</p>")
        md += [
            "| config | metric | published | simulated | simulated / published | unit |",
            "|---|---|---|---|---|---|",
        ]
        trs = []
        for r in e["rows"]:
            q = ratio(r)
            cells = [
                r["config"],
                r["metric"],
                _fmt(r["published"]),
                _fmt(r["simulated"]),
                "-" if q is None else f"{q:.2f}",
                r["unit"],
            ]
            md.append("| " + " | ".join(cells) + " |")
            trs.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
        md.append("")
        body.append(
            "<table><tr><th>config</th><th>metric</th><th>published</th><th>simulated</th>"
            "<th>simulated / published</th><th>unit</th></tr>" + "".join(trs) + "</table>"
        )
        # What decides the result, from its counters: after the table it explains (as the CLI
        # and the seeds page print them).
        for n in e.get("notes", []):
            md += [f"*Note.* {n}", ""]
            body.append(f"<p><i>Note.</i> {html.escape(n)}</p>")
        caps = CAPTIONS.get(
            name, ("Published and simulated values per metric.", "Simulated counters per configuration.")
        )
        for suffix, plot, cap in (("published", _plot_published, caps[0]), ("counters", _plot_counters, caps[1])):
            png = f"{name}-{suffix}.png"
            if plot(e, d / png):
                md += [f"![{cap}]({png})", "", f"*{cap}*", ""]
                c = html.escape(cap)
                body.append(f"<figure><img src='{png}' alt='{c}'><figcaption>{c}</figcaption></figure>")
    (d / "report.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.4}"
        "table{border-collapse:collapse;font-size:0.85em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
        "td:nth-child(-n+2),th:nth-child(-n+2){text-align:left}figure{margin:1em 0}img{max-width:100%}"
        "figcaption{font-size:0.9em;color:#444}"
    )
    page = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body>" + "\n".join(body) + "</body></html>\n"
    )
    index = d / "index.html"
    index.write_text(page, encoding="utf-8")
    return index
