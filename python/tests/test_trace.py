"""mmsim record, the trace format's Python side, and mmsim trace info/dump, end to end: a small C
program of our own (mmap, a page-stride write, fork, a thread) recorded under the Valgrind tool
and read back."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from mmsim import trace
from mmsim.cli import main
from mmsim.recorder_build import valgrind_lib

HAS_VALGRIND = shutil.which("valgrind") is not None and Path("/usr/include/valgrind/pub_tool_basics.h").is_file()
needs_valgrind = pytest.mark.skipif(not HAS_VALGRIND, reason="Valgrind with its tool headers is not installed")

PROGRAM = r"""
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void *worker(void *arg) { ((volatile char *)arg)[0] = 7; return NULL; }

int main(int argc, char **argv)
{
	size_t len = 1 << 20;
	volatile char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (size_t i = 0; i < len; i += 4096)
		p[i] = 1;
	pid_t c = fork();
	if (c == 0) {
		p[8192 + 1] = 2;
		_exit(5);
	}
	waitpid(c, NULL, 0);
	pthread_t t;
	pthread_create(&t, NULL, worker, (void *)(p + 4096 + 2));
	pthread_join(t, NULL);
	munmap((void *)p, len);
	if (argc > 1 && argv[1][0] == 'm') {
		/* memset's rep stosb: a run and a 1-byte store per byte under Valgrind. */
		char *big = malloc(1 << 18);
		memset(big, 1, 1 << 18);
		__asm__ volatile("" : : "r"(big) : "memory");
		return big[12345] + big[177777] - 2;
	}
	if (argc > 1 && argv[1][0] == 'e') {
		char *args[] = {"true", NULL};
		execv("/nonexistent/prog", args);
		execv("/bin/true", args);
	}
	if (argc > 1)
		abort();
	return 3;
}
"""


@pytest.fixture(scope="module")
def prog(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("prog")
    (d / "prog.c").write_text(PROGRAM)
    exe = d / "prog"
    subprocess.run(["gcc", "-O1", "-pthread", "-o", str(exe), str(d / "prog.c")], check=True)
    return exe


@pytest.fixture(scope="module")
def recorded(prog, tmp_path_factory) -> tuple[Path, dict]:
    if not HAS_VALGRIND:
        pytest.skip("Valgrind with its tool headers is not installed")
    out = tmp_path_factory.mktemp("trace") / "prog.trace"
    return out, trace.record([str(prog)], out)


@needs_valgrind
def test_the_tool_builds_once_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MMSIM_CACHE_DIR", str(tmp_path))
    d = valgrind_lib()
    tool = d / "mmsimrec-amd64-linux"
    assert tool.is_file() and (d / "vgpreload_core-amd64-linux.so").exists()
    mtime = tool.stat().st_mtime_ns
    assert valgrind_lib() == d and tool.stat().st_mtime_ns == mtime


@needs_valgrind
def test_a_recorded_program_has_its_calls_accesses_fork_and_thread(recorded):
    path, summary = recorded
    assert summary["exit_status"] == 3
    assert summary["trace_bytes"] == path.stat().st_size
    recs = list(trace.records(path))
    pid = recs[0][0]
    mmaps = [f for p, k, f in recs if p == pid and k == "syscall" and f["nr"] == 9 and f["a1"] == 1 << 20]
    assert len(mmaps) == 1, mmaps
    base = mmaps[0]["result"]
    # The page-stride loop: exactly one 1-byte store per page of the mapping, by the parent.
    stride = [f["addr"] for p, k, f in recs if p == pid and k == "store" and base <= f["addr"] < base + (1 << 20)]
    assert [a - base for a in stride[:256]] == [i * 4096 for i in range(256)]
    # The child (its own pid, started by a fork of the parent), its store and its exit.
    children = {p for p, k, f in recs if k == "proc" and f["how"] == 1 and f["parent"] == pid}
    assert len(children) == 1
    (child,) = children
    assert any(p == child and k == "store" and f["addr"] == base + 8193 for p, k, f in recs)
    assert (child, "exit", {"status": 5}) in recs
    # The thread: a clone with CLONE_VM|CLONE_THREAD in the parent, whose tid then stores.
    clones = [f for p, k, f in recs if p == pid and k == "syscall" and f["nr"] in (56, 435) and f["result"] > 0]
    assert len(clones) >= 2
    tids = {f["tid"] for p, k, f in recs if p == pid and k == "thread"}
    assert len(tids) == 2
    assert (pid, "exit", {"status": 3}) in recs
    # The address space at start: the program's own file, mapped.
    maps = [f for p, k, f in recs if p == pid and k == "map"]
    assert any(f.get("path", "").endswith("/prog") and f["prot"] & 4 for f in maps)
    assert any(f["kind"] == 3 for f in maps), "the stack"


@needs_valgrind
def test_trace_info_counts_what_the_records_hold(recorded):
    path, _ = recorded
    s = trace.info(path)
    recs = list(trace.records(path))
    assert s["loads"] == sum(1 for _, k, _ in recs if k == "load")
    assert s["stores"] == sum(1 for _, k, _ in recs if k == "store")
    assert s["instructions"] == sum(f["instrs"] for _, k, f in recs if k == "run")
    assert s["processes"] == 2 and s["tasks"] == 3
    assert s["syscalls"]["mmap"] >= 1 and s["syscalls"]["munmap"] >= 1 and s["syscalls"]["wait4"] == 1
    assert s["footprint_4k"] >= 256 and s["footprint_2m"] >= 1
    assert s["header"]["command"][0].endswith("/prog") and s["header"]["page_size"] == 4096


@needs_valgrind
def test_a_program_that_aborts_still_leaves_its_trace(prog, tmp_path):
    out = tmp_path / "abort.trace"
    s = trace.record([str(prog), "abort"], out)
    assert s["exit_status"] == -6
    info = trace.info(out)
    assert info["summary"]["exit_status"] == -6 and info["syscalls"]["mmap"] >= 1


@needs_valgrind
def test_a_recorded_programs_output_goes_where_the_caller_says(tmp_path, capfd):
    """A study records with the program's output on stderr: `reproduce --json`'s stdout stays
    the report's."""
    s = trace.record(["/bin/echo", "from the program"], tmp_path / "echo.trace", stdout=2)
    assert s["exit_status"] == 0
    got = capfd.readouterr()
    assert "from the program" in got.err and "from the program" not in got.out
    trace.record(["/bin/echo", "to stdout"], tmp_path / "echo2.trace")
    assert "to stdout" in capfd.readouterr().out


@needs_valgrind
def test_cli_record_info_and_dump(prog, tmp_path, capfd):
    out = tmp_path / "cli.trace"
    assert main(["record", "-o", str(out), "--", str(prog)]) == 3
    assert "recorded" in capfd.readouterr().err
    assert main(["trace", "info", str(out), "--json"]) == 0
    s = json.loads(capfd.readouterr().out)
    for key in ("instructions", "loads", "stores", "tasks", "syscalls", "footprint_4k", "footprint_2m"):
        assert key in s
    assert main(["trace", "info", str(out)]) == 0
    assert "footprint:" in capfd.readouterr().out
    # The dump is written by the engine to the process's stdout (fd 1).
    assert main(["trace", "dump", str(out), "--limit", "5"]) == 0
    lines = capfd.readouterr().out.splitlines()
    assert len(lines) == 5 and lines[0].split()[1] == "thread" and lines[1].split()[1] == "proc"


def test_record_without_a_command_is_a_clear_error(capsys):
    assert main(["record", "-o", "x.trace"]) == 2
    assert "no command given" in capsys.readouterr().err


def test_a_corrupted_trace_is_one_line_naming_the_file_and_byte(tmp_path, capsys):
    bad = tmp_path / "bad.trace"
    bad.write_bytes(b"MMSIMTRC\x01\x00\x00\x00\x05\x00\x00\x00{}")
    assert main(["trace", "info", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"mmsim: error: {bad}: byte ") and "\n" not in err
    bad.write_bytes(b"hello")
    assert main(["trace", "dump", str(bad)]) == 2
    assert "not an mmsim trace" in capsys.readouterr().err


@needs_valgrind
def test_an_exec_starts_a_new_image_of_the_same_pid_and_a_failed_one_is_recorded(prog, tmp_path):
    out = tmp_path / "exec.trace"
    s = trace.record([str(prog), "exec"], out)
    assert s["exit_status"] == 0, "/bin/true's"
    recs = list(trace.records(out))
    pid = recs[0][0]
    images = [f for p, k, f in recs if p == pid and k == "proc" and f["how"] == 0]
    assert len(images) == 2, "the program, then /bin/true in its place"
    failed = [f for p, k, f in recs if p == pid and k == "syscall" and f["nr"] == 59]
    assert [(f["result"], f["path"]) for f in failed] == [(-2, "/nonexistent/prog")]
    assert any(p == pid and k == "map" and f.get("path", "").endswith("/true") for p, k, f in recs)


@needs_valgrind
def test_repeat_records_read_back_as_every_iteration(prog, tmp_path):
    """A block repeating with fixed strides (memset's rep stosb: 256 KiB of 1-byte stores, each
    with its run) is recorded as repeat records: the trace is much smaller and reads back as
    the same runs and stores as one recorded without them. (Only the memset is compared:
    elsewhere ld.so's loads depend on bytes that differ from run to run.)"""
    got = {}
    for repeat in (True, False):
        out = tmp_path / f"memset-{repeat}.trace"
        s = trace.record([str(prog), "memset"], out, repeat=repeat)
        assert s["exit_status"] == 0
        recs = list(trace.records(out))
        # The last mmap over 256 KiB: malloc's of the buffer (ld.so maps libc before it).
        base = [f["result"] for _, k, f in recs if k == "syscall" and f["nr"] == 9 and f["a1"] > 1 << 18][-1]
        inside = [
            (k, f["addr"] - base if k == "store" else f["pc"])
            for i, (_, k, f) in enumerate(recs)
            if (k == "store" and base <= f["addr"] < base + (2 << 20))
            or (
                k == "run"
                and i + 1 < len(recs)
                and recs[i + 1][1] == "store"
                and base <= recs[i + 1][2]["addr"] < base + (2 << 20)
            )
        ]
        got[repeat] = (s["raw_bytes"], inside)
    (small, with_repeats), (big, without) = got[True], got[False]
    stores = [a for k, a in without if k == "store"]
    assert len(set(stores)) >= (1 << 18) - 64, "memset stored (nearly) every byte: its head and tail go wider"
    assert with_repeats == without
    assert small * 5 < big, (small, big)


def test_without_valgrind_record_says_how_to_get_it(monkeypatch, capsys):
    import mmsim.recorder_build as rb

    real = shutil.which
    monkeypatch.setattr(rb.shutil, "which", lambda name: None if name == "valgrind" else real(name))
    assert main(["record", "-o", "x.trace", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert "valgrind is not installed" in err and "apt-get install valgrind" in err
