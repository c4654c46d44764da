"""The studies of real programs (issue 39) at their quick size: each records its program (into a
temporary cache), replays it under the seed's configurations, and runs it natively where the
host allows (root), as ``mmsim reproduce NAME --quick`` does."""

from __future__ import annotations

from test_trace import needs_valgrind

from mmsim.cli import main
from mmsim.experiments.pool import run_all


def _rows(runs) -> dict[tuple[str, str], dict]:
    rows = runs[1](run_all(runs[0], 2))
    return {(r["config"], r["metric"]): r for r in rows}


@needs_valgrind
def test_zero_page_real_keeps_rss_with_the_huge_zero_page(tmp_path, monkeypatch):
    """A 32 MiB numpy.zeros array read a byte per page: under THP always the huge zero page
    keeps peak RSS near THP never's, and without it every 2 MiB read allocates a huge page;
    where the host runs it (root), the kernel's minor faults are within 2 % of the replay's."""
    from mmsim.experiments.studies import zero_page_rows, zero_page_runs

    monkeypatch.setenv("MMSIM_CACHE", str(tmp_path))
    got = _rows((zero_page_runs("quick"), zero_page_rows))
    rss = {c: got[(c, "peak RSS")]["simulated"] for c in ("THP never", "THP always, huge zero page")}
    no_zero = got[("THP always, no zero page", "peak RSS")]["simulated"]
    assert no_zero - rss["THP always, huge zero page"] >= 30 * 1024 * 0.9, got
    assert abs(rss["THP always, huge zero page"] - rss["THP never"]) < 4 * 1024, got
    assert got[("THP always, virtual HZP", "peak RSS")]["simulated"] < no_zero
    # The kernel's own count moves with the host's page cache: the same program ran natively
    # from a checkout just written (its files in large folios, mapped more per fault-around)
    # took 4,049 minor faults under THP always, and 4,090 from one whose files had been read
    # back (2026-11-29, Linux 6.18.44); the replay took 4,092-4,094 both times.
    for r in got.values():
        if r["metric"] == "minor faults" and "kernel" in r:
            assert abs(r["simulated"] - r["kernel"]) <= 0.02 * r["kernel"], r


@needs_valgrind
def test_gcc_text_thp_maps_cc1s_text_by_the_pmd_each_way(tmp_path, monkeypatch):
    """gcc -O2 -c of a one-function file: each way to huge text PMD-maps part of cc1's text
    and takes fewer iTLB misses than 4 KiB pages; two compilations at once cost the prototype
    a private copy each, where khugepaged's shared folios cost nothing over 4 KiB pages; the
    kernel's faults (THP always, 4 KiB text) are within 2 % of the replay's."""
    from mmsim.experiments.study_text import gcc_text_rows, gcc_text_runs

    monkeypatch.setenv("MMSIM_CACHE", str(tmp_path))
    got = _rows((gcc_text_runs("quick"), gcc_text_rows))
    v = lambda c, m: got[(c, m)]["simulated"]  # noqa: E731
    small = "4 KiB text"
    seed, khuge, folios = (
        "seed 004's prototype",
        "khugepaged (READ_ONLY_THP_FOR_FS)",
        "large folios (MADV_HUGEPAGE, cold)",
    )
    assert v(small, "ShmemPmdMapped at cc1's exit") == v(small, "FilePmdMapped at cc1's exit") == 0
    assert v(seed, "ShmemPmdMapped at cc1's exit") >= 2048, got
    assert v(khuge, "FilePmdMapped at cc1's exit") >= 2048 and v(khuge, "khugepaged collapses") >= 1
    assert v(folios, "FilePmdMapped at cc1's exit") >= 2048 and v(folios, "major faults") > 0
    for c in (seed, khuge, folios):
        assert v(c, "iTLB misses") < v(small, "iTLB misses"), (c, got)
    # Two at once: the prototype's two private copies against the page cache's shared folios.
    mem = {c: v(f"2 at once, {c}", "memory in use at cc1's exit") for c in (small, seed, khuge)}
    assert v(f"2 at once, {seed}", "ShmemPmdMapped") == 2 * v(seed, "ShmemPmdMapped at cc1's exit")
    assert mem[seed] - mem[small] >= v(seed, "ShmemPmdMapped at cc1's exit"), mem
    assert abs(mem[khuge] - mem[small]) < 4096, mem
    faults = got[(small, "page faults")]
    if "kernel" in faults:
        assert abs(faults["simulated"] - faults["kernel"]) <= 0.02 * faults["kernel"], faults


@needs_valgrind
def test_prezero_real_takes_the_zeroed_pages_kscrubd_made(tmp_path, monkeypatch):
    """Two 40 MiB bytearrays written a byte per page: without prezeroing every fault clears
    its page; after 2 s of idle kscrubd, every one takes a prezeroed page and none clears, and
    the program's faults go faster on the build machine's profile; the kernel's fault count is
    the replay's to 0.5 %."""
    from mmsim.experiments.study_prezero import prezero_rows, prezero_runs

    monkeypatch.setenv("MMSIM_CACHE", str(tmp_path))
    got = _rows((prezero_runs("quick"), prezero_rows))
    v = lambda c, m: got[(c, m)]["simulated"]  # noqa: E731
    for prefix in ("", "piii-450, "):
        off, on = f"{prefix}without prezeroing", f"{prefix}with kscrubd"
        assert v(off, "page faults (the program)") == v(on, "page faults (the program)") >= 20_480
        assert v(off, "zeroed hits (prezeroed pages taken)") == 0
        assert v(on, "pages zeroed in the fault") == 0 and v(on, "of those, clearing pages (clear_page)") == 0
        assert v(on, "zeroed hits (prezeroed pages taken)") == v(off, "pages zeroed in the fault") >= 20_480
        assert v(on, "kscrubd CPU time in the idle 2 s") > 0
    assert v("with kscrubd", "faults per second, with / without") > 1
    faults = got[("without prezeroing", "page faults (the program)")]
    if "kernel" in faults:
        assert abs(faults["simulated"] - faults["kernel"]) <= 0.005 * faults["kernel"], faults


def test_reproduce_quick_is_for_the_studies_only(capsys):
    assert main(["reproduce", "hzp-rss", "--quick"]) == 2
    assert "--quick applies to the studies of real programs only, not 'hzp-rss'" in capsys.readouterr().err


def test_reproduce_lists_the_studies(capsys):
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("zero-page-real", "gcc-text-thp", "prezero-real"):
        assert name in out


def _can_run_postgres() -> bool:
    import os
    import shutil

    from mmsim.experiments.study_pgbench import PG_BIN

    return os.geteuid() == 0 and shutil.which("runuser") is not None and (PG_BIN / "postgres").is_file()


@needs_valgrind
def test_pgbench_ptshare_records_the_server_and_every_backend(tmp_path, monkeypatch):
    """PostgreSQL under pgbench -S (4 clients, 50 selects each), recorded with its backends in
    4 KiB pages and in hugetlb pages, replayed without and with shared page tables: sharing
    frees page tables and faults in 4 KiB pages; huge pages fault less than 4 KiB pages; the
    kernel's fault count of the same server is the replay's to 5 %."""
    import pytest

    if not _can_run_postgres():
        pytest.skip("needs root and PostgreSQL 15 (Debian's postgresql-15)")
    from mmsim.experiments.study_pgbench import pgbench_rows, pgbench_runs

    monkeypatch.setenv("MMSIM_CACHE", str(tmp_path))
    got = _rows((pgbench_runs("quick"), pgbench_rows))
    v = lambda c, m: got[(c, m)]["simulated"]  # noqa: E731
    small, shared = "4 KiB pages", "4 KiB pages, shared page tables"
    assert v(shared, "page-table memory at its peak") < v(small, "page-table memory at its peak"), got
    assert v(shared, "page faults (the server)") < v(small, "page faults (the server)")
    assert v("huge pages", "page faults (the server)") < v(small, "page faults (the server)")
    assert v("4 KiB pages: shared / not", "page-table memory freed") > 0
    for c in ("4 KiB pages", "huge pages"):
        r = got[(c, "page faults (the server)")]
        assert abs(r["simulated"] - r["kernel"]) <= 0.05 * r["kernel"], r


@needs_valgrind
def test_memory_limit_swaps_more_as_the_limit_falls(tmp_path, monkeypatch):
    """real_programs' python3 at its tiny size under memory.max from its peak RSS to a third:
    nothing swaps at the peak, the program swaps and refaults at a third (pswpout, major
    faults, anonymous refaults, more simulated time), and nobody is OOM-killed; where the host
    runs it (root), the kernel swaps at a third too, and reads back what mmsim does to 25 % of
    the range its runs spanned (pswpin varies by a fifth from run to run on the host)."""
    from mmsim.experiments.study_memlimit import FRACTIONS, memlimit_rows, memlimit_runs

    monkeypatch.setenv("MMSIM_CACHE", str(tmp_path))
    got = _rows((memlimit_runs("quick"), memlimit_rows))
    configs = list(dict.fromkeys(c for c, _ in got))
    assert len(configs) == len(FRACTIONS)
    v = lambda c, m: got[(c, m)]["simulated"]  # noqa: E731
    top, bottom = configs[0], configs[-1]
    assert v(top, "pswpout") == v(top, "major faults") == 0
    assert v(bottom, "pswpout") > 0 and v(bottom, "major faults") > 0
    assert v(bottom, "workingset refaults (anon)") > 0
    assert v(bottom, "simulated time") > v(top, "simulated time")
    assert all(v(c, "OOM kills") == 0 for c in configs)
    k = got[(bottom, "pswpin")]
    if "kernel" in k:
        assert k["kernel_min"] > 0 and 0.75 * k["kernel_min"] <= k["simulated"] <= 1.25 * k["kernel_max"], k
