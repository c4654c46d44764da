"""The documentation's generated pages (mmsim.docgen) are current, and a stale one is caught."""

from __future__ import annotations

import shutil
from pathlib import Path

from mmsim import docgen

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_generated_pages_are_current():
    assert docgen.stale(DOCS) == [], "run make docs (python -m mmsim.docgen) and commit the pages"


def test_a_page_made_stale_on_purpose_fails_the_check(tmp_path, capsys):
    for name in docgen.PAGES:
        shutil.copy(DOCS / name, tmp_path / name)
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
