"""`mmsim reproduce --report DIR`: the page, its tables and figures, checked in a browser."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from conftest import run_mmsim


def test_reproduce_report_writes_a_page_whose_images_all_exist(tmp_path):
    out = tmp_path / "report"
    r = run_mmsim("reproduce", "hzp-rss", "--report", out)
    assert r.returncode == 0, r.stderr
    assert f"report written to {out / 'index.html'}" in r.stderr
    page = (out / "index.html").read_text()
    md = (out / "report.md").read_text()
    images = re.findall(r"<img src='([^']+)'", page)
    assert images == ["hzp-rss-published.png", "hzp-rss-counters.png"]
    for img in images:
        data = (out / img).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000, img
        assert f"]({img})" in md
    assert page.count("<figcaption>") == len(images), "every figure has a caption"
    assert "RSS growth" in page and "204,800" in page and "With THP, a read fault" in page
    # The page opens with the scoreboard: hzp-rss publishes 6 numbers, all exact, and its
    # never/always/hzp rows give 6 directions (0 vs 204,800 kB, twice per metric... kept).
    assert page.index("id='scoreboard'") < page.index("id='hzp-rss'")
    assert "<td><b>total</b></td><td><b>6</b></td><td><b>6</b></td><td><b>6</b></td><td><b>4 of 4</b></td>" in page
    assert "| total | 6 | 6 | 6 | 4 of 4 |" in md
    # The notes explain the table: they follow it, as the CLI prints them.
    section = page[page.index("id='hzp-rss'") :]
    assert section.index("</table>") < section.index("<i>Note.</i>") < section.index("<figure>")
    assert md.index("| config | metric |") < md.index("*Note.*")


def test_report_loads_in_headless_chromium(tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (make test installs Debian's chromium when run as root)")
    out = tmp_path / "report"
    assert run_mmsim("reproduce", "hzp-rss", "--report", out).returncode == 0
    url = (out / "index.html").as_uri()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]
    dom = subprocess.run([browser, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<title>mmsim: the seeds' experiments, reproduced</title>" in dom.stdout
    assert dom.stdout.count("<img ") == 2
    shot = tmp_path / "shot.png"
    subprocess.run(
        [browser, *flags, f"--screenshot={shot}", "--window-size=1200,1600", url],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert shot.exists() and shot.stat().st_size > 20000, "the page rendered"
