"""The documentation's generated pages (mmsim.docgen) are current, and a stale one is caught."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest

from mmsim import docgen

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_generated_pages_are_current():
    assert docgen.stale(DOCS) == [], "run make docs (python -m mmsim.docgen) and commit the pages"


def test_a_page_made_stale_on_purpose_fails_the_check(tmp_path, capsys):
    for name in docgen.PAGES:
        shutil.copy(DOCS / name, tmp_path / name)
    if (DOCS / "results").is_dir():
        shutil.copytree(DOCS / "results", tmp_path / "results")
    assert docgen.main(["--check", str(tmp_path)]) == 0
    page = tmp_path / "knobs.md"
    # A knob's default changed in the engine but not in the page.
    page.write_text(
        page.read_text().replace(
            "| `transparent_hugepage/enabled` | `madvise` |", "| `transparent_hugepage/enabled` | `always` |"
        )
    )
    assert docgen.main(["--check", str(tmp_path)]) == 1
    assert f"{page}: stale" in capsys.readouterr().err
    (tmp_path / "profiles.md").unlink()
    assert docgen.stale(tmp_path) == ["knobs.md", "profiles.md"]
    docgen.main([str(tmp_path)])
    assert docgen.stale(tmp_path) == []


def test_the_knobs_page_has_every_knob_the_engine_declares():
    text = (DOCS / "knobs.md").read_text()
    for k in docgen.knobs():
        assert f"| `{k['name']}` |" in text


REPO = DOCS.parent
#: The marker, on the line before a fence, of an example the test does not run, with its reason.
NOT_RUN = "<!-- example not run: "


def console_examples(text: str) -> list[tuple[str, str, str | None]]:
    """Each fenced block's commands (`$ CMD` lines) with the output that follows each, and the
    reason the block is not run (its `<!-- example not run: REASON -->` marker) or None."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        j = i + 1
        while not lines[j].startswith("```"):
            j += 1
        body = lines[i + 1 : j]
        marker = lines[i - 1] if i > 0 else ""
        skip = marker[len(NOT_RUN) :].removesuffix(" -->") if marker.startswith(NOT_RUN) else None
        if body and body[0].startswith("$ "):
            cmd, got = None, []
            for line in body:
                if line.startswith("$ "):
                    if cmd is not None:
                        out.append((cmd, "\n".join(got), skip))
                    cmd, got = line[2:], []
                else:
                    got.append(line)
            out.append((cmd, "\n".join(got), skip))
        i = j + 1
    return out


def python_examples(text: str) -> list[str]:
    """Each ```python block's code."""
    return [b.split("\n```", 1)[0] for b in text.split("```python\n")[1:]]


#: Every page, and the README (its path from docs/).
PAGES = [*sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")), "../README.md"]
EXAMPLES = [(page, *ex) for page in PAGES for ex in console_examples((DOCS / page).read_text())]


def _normalised(text: str) -> str:
    """What may differ between two runs of an example that the docs show: wall times
    (`136.3 s`) and the host kernel's build (`Linux 6.18.44-fc-v782`)."""
    import re

    text = re.sub(r"\b\d+(\.\d+)? s\b", "N s", text)
    return re.sub(r"Linux \d+\.\d+\.\d+\S*", "Linux X", text)


def matches(want: str, got: str) -> bool:
    """`got` is `want`, where a line `...` in `want` stands for any lines."""
    import re

    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line == "..." else re.escape(line) + r"\n" for line in _normalised(want).split("\n")
    )
    return re.fullmatch(pattern, _normalised(got) + "\n") is not None


def _needs_root(cmd: str) -> bool:
    return ("mmsim validate" in cmd or "--native" in cmd) and (
        os.geteuid() != 0 or not Path("/sys/kernel/mm/transparent_hugepage").is_dir()
    )


@pytest.mark.parametrize(
    ("page", "cmd", "want", "skip"), EXAMPLES, ids=[f"{p}:{i}" for i, (p, *_) in enumerate(EXAMPLES)]
)
def test_every_example_prints_what_the_docs_show(page, cmd, want, skip, tmp_path):

    if skip is not None:
        pytest.skip(f"{page}: not run: {skip}")
    if _needs_root(cmd):
        pytest.skip("mmsim validate and --native run the workload natively: need root and THP")
    if "example.py" in cmd:
        # The page's Python example, as the command before its output runs it.
        (code,) = python_examples((DOCS / page).read_text())
        (tmp_path / "example.py").write_text(code)
        cmd = cmd.replace("example.py", str(tmp_path / "example.py"))
    with _linux_defaults() if "validate" in cmd or "--native" in cmd else contextlib.nullcontext():
        _run_example(page, cmd, want, tmp_path)


#: The host's THP settings the native examples were shown under: Linux's defaults.
THP_DEFAULTS = {"enabled": "madvise", "defrag": "madvise", "use_zero_page": "1"}


@contextlib.contextmanager
def _linux_defaults():
    """The host's THP knobs at Linux's defaults while a native example runs, then as they were
    (not under mmsim's host lock: the example's own validate takes it)."""
    thp = Path("/sys/kernel/mm/transparent_hugepage")
    before = {k: (thp / k).read_text().strip() for k in THP_DEFAULTS}
    try:
        for k, v in THP_DEFAULTS.items():
            (thp / k).write_text(v)
        yield
    finally:
        for k, v in before.items():
            (thp / k).write_text(v.split("[")[1].split("]")[0] if "[" in v else v)


def _run_example(page: str, cmd: str, want: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    # What a terminal shows: stdout and stderr together, in the order they were written.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = dict(os.environ, PATH=path, PYTHONUNBUFFERED="1")
    got = subprocess.run(
        ["bash", "-o", "pipefail", "-c", cmd],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    # head closes the pipe early: its writer's SIGPIPE is not the example's failure.
    assert got.returncode == 0 or "| head" in cmd, got.stdout
    if os.environ.get("MMSIM_BLESS_DOCS") and "..." not in want.split("\n") and want:
        # Rewrite the page's output with what the command printed (then read the diff).
        text = (DOCS / page).read_text()
        assert text.count(f"$ {cmd}\n{want}\n") == 1
        (DOCS / page).write_text(text.replace(f"$ {cmd}\n{want}\n", f"$ {cmd}\n{got.stdout.rstrip()}\n"))
        return
    assert matches(want, got.stdout.rstrip("\n")), (
        f"{page}: $ {cmd}\n--- the docs show:\n{want}\n--- it printed:\n{got.stdout}"
    )


def test_the_examples_are_found_and_few_are_not_run():
    pages = {p for p, *_ in EXAMPLES}
    assert {
        "getting-started.md",
        "python-api.md",
        "cli.md",
        "example-output.md",
        "validation.md",
        "../README.md",
    } <= pages
    skipped = [(p, cmd, why) for p, cmd, _, why in EXAMPLES if why is not None]
    assert all(why.strip() for *_, why in skipped), "every example not run says why"
    assert len(skipped) <= 2, skipped


def test_matching_allows_what_may_differ_and_nothing_else():
    assert matches("a\n...\nz", "a\nb\nc\nz")
    assert matches("took 136.3 s (host: Linux 6.18.44-fc-v657)", "took 2.0 s (host: Linux 6.18.44-fc-v782)")
    assert not matches("a\n...\nz", "a\nb\ny")
    assert not matches("100 faults", "101 faults")


def test_every_workload_shown_in_the_docs_runs():
    """The JSON and YAML workloads the pages show (a block with a `program`) run as shown."""
    import json

    import yaml

    import mmsim

    shown = []
    for page in PAGES:
        text = (DOCS / page).read_text()
        for fence, load in (("```json\n", json.loads), ("```yaml\n", yaml.safe_load)):
            for block in text.split(fence)[1:]:
                body = block.split("\n```", 1)[0]
                if '"program"' in body or "\nprogram:" in f"\n{body}":
                    shown.append((page, load(body)))
    assert len(shown) >= 3
    for page, w in shown:
        report = mmsim.run_workload(w)
        assert report["events"] == [] or all("expect" not in str(e) for e in report["events"]), page


def test_the_seeds_table_is_generated_from_what_reproduce_wrote(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from mmsim.experiments import source_commit

    results = tmp_path / docgen.RESULTS
    mmsim = Path(sys.executable).parent / "mmsim"
    run = subprocess.run(
        [str(mmsim), "reproduce", "hzp-rss", "--results", str(results)],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(results.read_text())
    assert doc["commit"] == source_commit()[0]
    assert [e["name"] for e in doc["experiments"]] == ["hzp-rss"]
    shutil.copy(DOCS / "seeds.md", tmp_path / "seeds.md")
    page = docgen.seeds_page((tmp_path / "seeds.md").read_text(), tmp_path)
    table = page.split(docgen.END)[0].split("begin -->\n")[1]
    assert table.startswith("At commit `")
    assert "### hzp-rss\n" in table and "### hzp-memcmp" not in table
    # The RSS growth with THP always and no zero page: 204,800 kB simulated, as the run printed.
    row = next(r for r in doc["experiments"][0]["rows"] if r["published"] is not None)
    assert f"| {docgen._num(row['simulated'])} |" in table
    assert "Under each experiment's table are its notes" in page  # the prose around the table is kept
    # The experiment's notes follow its table, as the run printed them.
    assert doc["experiments"][0]["notes"] and f"- {doc['experiments'][0]['notes'][0]}\n" in table
    # A results file that changed leaves the committed page stale until make docs.
    (tmp_path / "seeds.md").write_text(page)
    assert "seeds.md" not in docgen.stale(tmp_path)
    doc["experiments"][0]["rows"][0]["simulated"] += 1
    results.write_text(json.dumps(doc))
    assert "seeds.md" in docgen.stale(tmp_path)
