"""The documentation's generated pages (mmsim.docgen) are current, and a stale one is caught."""

from __future__ import annotations

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
#: Pages whose ```console examples run in the test below, their output compared.
EXAMPLE_PAGES = ("getting-started.md",)


def console_examples(text: str) -> list[tuple[str, str]]:
    """Each ```console block's commands (`$ CMD` lines) with the output that follows each."""
    out = []
    for block in text.split("```console\n")[1:]:
        body = block.split("\n```", 1)[0]
        cmd, lines = None, []
        for line in body.splitlines():
            if line.startswith("$ "):
                if cmd is not None:
                    out.append((cmd, "\n".join(lines)))
                cmd, lines = line[2:], []
            else:
                lines.append(line)
        if cmd is not None:
            out.append((cmd, "\n".join(lines)))
    return out


EXAMPLES = [(page, cmd, want) for page in EXAMPLE_PAGES for cmd, want in console_examples((DOCS / page).read_text())]


@pytest.mark.parametrize(("page", "cmd", "want"), EXAMPLES, ids=[f"{p}:{i}" for i, (p, _, _) in enumerate(EXAMPLES)])
def test_every_example_prints_what_the_docs_show(page, cmd, want):
    import os
    import subprocess
    import sys

    if "mmsim validate" in cmd and (os.geteuid() != 0 or not Path("/sys/kernel/mm/transparent_hugepage").is_dir()):
        pytest.skip("mmsim validate runs the workload natively: needs root and THP")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    got = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=REPO, env=env, capture_output=True, text=True)
    # head closes the pipe early: its writer's SIGPIPE is not the example's failure.
    assert got.returncode == 0 or "| head" in cmd, got.stderr
    assert got.stdout.rstrip("\n") == want, f"{page}: $ {cmd}"


def test_the_examples_are_found():
    assert len(EXAMPLES) >= 5 and all(cmd.startswith("mmsim ") for _, cmd, _ in EXAMPLES)


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
    assert "What decides each result" in page  # the prose around the table is kept
    # A results file that changed leaves the committed page stale until make docs.
    (tmp_path / "seeds.md").write_text(page)
    assert "seeds.md" not in docgen.stale(tmp_path)
    doc["experiments"][0]["rows"][0]["simulated"] += 1
    results.write_text(json.dumps(doc))
    assert "seeds.md" in docgen.stale(tmp_path)
