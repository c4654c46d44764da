"""ChampSim traces end to end: written by mmsim.champsim in ChampSim's layout, then `mmsim run
--trace` (one trace, several on their own CPUs), `mmsim trace info` and `dump`, and the errors
of a truncated or corrupted trace."""

from __future__ import annotations

import json
import lzma

import pytest

from mmsim import champsim
from mmsim.cli import main

TEXT, DATA, HEAP = 0x401000, 0x600000, 0x7F0000000000


def loop(n: int = 1000) -> list[champsim.Instr]:
    """A 50-instruction loop loading 8 bytes further each instruction and storing a line further
    every third: n/50 branches, 2 data pages, 16 heap pages at n = 1000."""
    return [
        champsim.Instr(
            ip=TEXT + 4 * (k % 50),
            src=(DATA + 8 * k,),
            dst=(HEAP + 64 * k,) if k % 3 == 0 else (),
            is_branch=k % 50 == 49,
            branch_taken=k % 50 == 49,
        )
        for k in range(n)
    ]


def run_json(capsys, *args: str) -> dict:
    assert main(["run", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("suffix", ["champsimtrace.xz", "champsimtrace.gz", "champsimtrace.bz2", "champsimtrace"])
def test_a_champsim_trace_replays_with_first_touch_memory(tmp_path, capsys, suffix):
    path = tmp_path / f"loop.{suffix}"
    champsim.write(path, loop())
    r = run_json(capsys, "--trace", str(path), "--set", "transparent_hugepage/enabled=never")
    rep = r["replay"][0]
    assert rep["format"] == "champsim"
    assert rep["compression"] == {"xz": "xz", "gz": "gzip", "bz2": "bzip2"}.get(suffix.rsplit(".", 1)[-1], "raw")
    assert (rep["instructions"], rep["loads"], rep["stores"]) == (1000, 1000, 334)
    # The text page, 2 data pages read, 16 heap pages written: one fault each.
    assert r["processes"][0]["minflt"] == 1 + 2 + 16
    assert "first touch" in rep["address_space"]
    assert r["events"] == []


def test_thp_always_gives_the_first_touch_ranges_huge_pages(tmp_path, capsys):
    path = tmp_path / "loop.champsimtrace.xz"
    champsim.write(path, loop())
    r = run_json(capsys, "--trace", str(path), "--set", "transparent_hugepage/enabled=always")
    # Three 2 MiB ranges (text, data, heap): one fault each; the heap's is a huge page.
    assert r["processes"][0]["minflt"] == 3
    assert r["vmstat"]["thp_fault_alloc"] - r["baseline"]["vmstat"]["thp_fault_alloc"] == 1


def test_the_text_report_names_the_address_space(tmp_path, capsys):
    path = tmp_path / "loop.champsimtrace.xz"
    champsim.write(path, loop())
    assert main(["run", "--trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert "champsim, xz" in out and "anonymous memory mapped on first touch" in out


def test_several_traces_run_as_processes_on_their_own_cpus(tmp_path, capsys):
    a, b = tmp_path / "a.champsimtrace.xz", tmp_path / "b.champsimtrace.gz"
    champsim.write(a, loop())
    champsim.write(b, loop(500))
    r = run_json(capsys, "--trace", str(a), "--trace", str(b), "--set", "transparent_hugepage/enabled=never")
    assert int(r["machine"]["cpus"]) == 2
    assert sorted(x["instructions"] for x in r["replay"]) == [500, 1000]
    faults = sorted(p["minflt"] for p in r["processes"])
    # b: 500 instructions touch 1 data page and 8 heap pages; a as above.
    assert faults == [1 + 1 + 8, 1 + 2 + 16]
    # Each ran on a CPU of its own.
    cpus = r["snapshots"][-1]["cpus"]
    assert len(cpus) == 2 and all(c["busy-seconds"] > 0 for c in cpus), cpus


def test_a_cloudsuite_trace_gives_each_asid_a_process(tmp_path, capsys):
    instrs = [
        champsim.Instr(ip=TEXT + 4 * (k % 50), src=(DATA + 8 * k,), asid=(k // 100 % 2 + 1,) * 2) for k in range(1000)
    ]
    path = tmp_path / "web.cloudsuite.xz"
    champsim.write(path, instrs, layout="cloudsuite")
    r = run_json(capsys, "--trace", str(path))
    assert r["replay"][0]["format"] == "champsim-cloudsuite"
    assert r["replay"][0]["processes"] == 2 and len(r["processes"]) == 2


def test_trace_info_and_dump_read_a_champsim_trace(tmp_path, capfd):
    path = tmp_path / "loop.champsimtrace.xz"
    champsim.write(path, loop())
    assert main(["trace", "info", "--json", str(path)]) == 0
    info = json.loads(capfd.readouterr().out)
    assert (info["instructions"], info["loads"], info["stores"], info["branches"]) == (1000, 1000, 334, 20)
    assert (info["footprint_4k"], info["footprint_2m"]) == (19, 3)
    assert main(["trace", "dump", "--limit", "3", str(path)]) == 0
    lines = capfd.readouterr().out.splitlines()
    assert lines[0] == f"instr {TEXT:#x} load {DATA:#x} store {HEAP:#x}"
    assert len(lines) == 3


def test_a_truncated_or_corrupted_champsim_trace_is_one_line(tmp_path, capsys):
    path = tmp_path / "cut.champsimtrace"
    champsim.write(path, loop())
    path.write_bytes(path.read_bytes()[: 64 * 100 + 5])
    assert main(["run", "--trace", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "record 100" in err and "truncated" in err and "\n" not in err
    bad = tmp_path / "bad.champsimtrace.xz"
    data = bytearray(lzma.compress(b"".join(champsim.encode(i) for i in loop())))
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    assert main(["run", "--trace", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(bad) in err and "xz" in err and "\n" not in err


def test_sampling_a_trace_is_refused_not_ignored(tmp_path, capsys):
    path = tmp_path / "loop.champsimtrace.xz"
    champsim.write(path, loop())
    assert main(["run", "--trace", str(path), "--sample", "10:1"]) == 2
    err = capsys.readouterr().err
    assert "does not apply to a replayed trace" in err and "\n" not in err.strip()
