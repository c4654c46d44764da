"""mmsim as pip installs it: the built wheel in a fresh virtualenv, run from outside the
repository (the native runner compiled on first use, optional extras named in one line);
and the runner's first-use build itself (:mod:`mmsim.runner_build`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import ROOT

from mmsim._mmsim import MmsimError
from mmsim.runner_build import runner_path

HAS_CC = bool(os.environ.get("CC")) or any(shutil.which(c) for c in ("cc", "gcc"))
needs_cc = pytest.mark.skipif(not HAS_CC, reason="no C compiler ($CC, cc, gcc) to build the native runner")


def _maturin() -> str | None:
    here = Path(sys.executable).parent / "maturin"
    return str(here) if here.exists() else shutil.which("maturin")


# ---- runner_build: the runner is compiled on first use -------------------------------------


@needs_cc
def test_runner_path_builds_once_into_the_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MMSIM_CACHE_DIR", str(tmp_path / "cache"))
    exe = runner_path()
    assert exe.parent == tmp_path / "cache" and exe.name.startswith("runner-")
    assert os.access(exe, os.X_OK)
    mtime = exe.stat().st_mtime_ns
    assert runner_path() == exe
    assert exe.stat().st_mtime_ns == mtime, "the second call rebuilt the runner"
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [exe.name], "a temporary file was left behind"


@needs_cc
def test_a_changed_source_is_built_anew(tmp_path, monkeypatch):
    import mmsim.runner_build as rb

    monkeypatch.setenv("MMSIM_CACHE_DIR", str(tmp_path / "cache"))
    for name in rb.FILES:
        (tmp_path / name).write_bytes((rb.runner_source().parent / name).read_bytes())
    src = tmp_path / "runner.c"
    monkeypatch.setattr(rb, "SOURCES", (src,))
    first = runner_path()
    src.write_bytes(src.read_bytes() + b"\n/* changed */\n")
    second = runner_path()
    assert second != first and first.exists() and second.exists()


@needs_cc
def test_processes_building_at_once_all_get_a_complete_runner(tmp_path, monkeypatch):
    monkeypatch.setenv("MMSIM_CACHE_DIR", str(tmp_path / "cache"))
    got: list[Path | BaseException] = []

    def build() -> None:
        try:
            got.append(runner_path())
        except BaseException as e:
            got.append(e)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1 and isinstance(got[0], Path), got
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [got[0].name]
    # It runs: an empty program exits 0.
    p = subprocess.run([str(got[0]), str(tmp_path / "out.jsonl")], input="", capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr


def test_a_missing_compiler_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MMSIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(MmsimError, match=r"^validate: cannot build the native runner: .*no-such-cc") as e:
        runner_path()
    assert "apt-get install gcc" in str(e.value) and "\n" not in str(e.value)
    assert not list((tmp_path / "cache").glob("runner-*"))


@needs_cc
def test_a_failing_compile_names_the_compilers_first_error(tmp_path, monkeypatch):
    bad = tmp_path / "bad.h"
    bad.write_text("int broken(void) { return undeclared_thing; }\n")
    monkeypatch.setenv("MMSIM_CACHE_DIR", str(tmp_path / "cache"))
    cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
    monkeypatch.setenv("CC", f"{cc} -include {bad}")
    with pytest.raises(MmsimError, match="undeclared_thing") as e:
        runner_path()
    assert "cannot build the native runner" in str(e.value) and "apt-get install gcc" in str(e.value)
    assert not list((tmp_path / "cache").glob("runner-*"))


# ---- the wheel in a fresh virtualenv ------------------------------------------------------


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """A fresh virtualenv (no system site-packages) with the wheel `maturin build` makes of this
    tree installed by pip; returns a runner of its commands, in a directory outside the
    repository, with MMSIM_CACHE_DIR in the temporary directory."""
    maturin = _maturin()
    if maturin is None:
        pytest.skip("maturin is not installed (pip install maturin) to build the wheel")
    if not HAS_CC:
        pytest.skip("no C compiler ($CC, cc, gcc) to build the native runner")
    tmp = tmp_path_factory.mktemp("wheel")
    # Build as `make build` does (one interpreter for cargo and maturin), in the repository's
    # target directory: the release build of the extension is reused.
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    dev_python = ROOT / ".venv" / "bin" / "python"
    env.setdefault("PYO3_PYTHON", str(dev_python if dev_python.exists() else Path(sys.executable)))
    b = subprocess.run(
        [maturin, "build", "--release", "--quiet", "--out", str(tmp / "dist")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert b.returncode == 0, b.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("mmsim-*.whl")
    venv = tmp / "venv"
    bin_ = venv / "bin"
    # This interpreter's pip installs into the new venv (pip --python, pip >= 22.3): seconds
    # faster than bootstrapping a pip into it.
    v = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=False)
    ver = tuple(int(x) for x in v.stdout.split()[1].split(".")[:2]) if v.returncode == 0 else (0, 0)
    if ver >= (22, 3):
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
        pip = [sys.executable, "-m", "pip", "--python", str(bin_ / "python")]
    else:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        pip = [str(bin_ / "python"), "-m", "pip"]
    env = {k: v for k, v in env.items() if k != "PYO3_PYTHON"}
    env.update(PATH=f"{bin_}{os.pathsep}{env.get('PATH', '')}", MMSIM_CACHE_DIR=str(tmp / "cache"))
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    work = tmp / "work"
    work.mkdir()

    def run(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """Run a command of the venv (`pip ...`: install into it)."""
        cmd = [str(a) for a in args]
        cmd = [*pip, *cmd[1:]] if cmd[0] == "pip" else [str(bin_ / cmd[0]), *cmd[1:]]
        return subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout, check=False)

    p = run("pip", "install", "--quiet", "--no-compile", wheel, timeout=1200)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    run.tmp = tmp  # type: ignore[attr-defined]
    yield run
    shutil.rmtree(venv, ignore_errors=True)  # some 300 MB (pandas, pyarrow, matplotlib)


def test_the_installed_package_is_the_wheels_and_ships_the_runner_source(wheel_venv):
    p = wheel_venv("python", "-c", "import mmsim, mmsim.runner_build as rb; print(mmsim.__file__, rb.runner_source())")
    assert p.returncode == 0, p.stderr
    pkg, src = p.stdout.split()
    site = str(wheel_venv.tmp / "venv")
    assert pkg.startswith(site) and not pkg.startswith(str(ROOT)), pkg
    assert src.startswith(site) and src.endswith("mmsim/runner.c"), src


def test_the_installed_mmsim_runs_a_workload(wheel_venv):
    w = wheel_venv.tmp / "small.json"
    w.write_text(
        json.dumps(
            {
                "machine": {"memory": "1G", "cpus": 1},
                "program": [
                    {"op": "mmap", "name": "p", "size": "64K"},
                    {"op": "write", "region": "p"},
                ],
            }
        )
    )
    p = wheel_venv("mmsim", "run", w)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "page-faults" in p.stdout


def test_the_installed_mmsim_validates_with_a_runner_built_on_first_use(wheel_venv):
    cache = wheel_venv.tmp / "cache"
    p = wheel_venv("mmsim", "validate", "--suite", "--json")
    assert "not built" not in p.stderr and "cannot build" not in p.stderr, p.stderr
    assert p.returncode in (0, 1), p.stderr
    runners = [r for r in cache.glob("runner-*") if os.access(r, os.X_OK)]
    assert len(runners) == 1, list(cache.iterdir()) if cache.exists() else "no cache dir"
    if p.returncode == 1:
        # A verdict that differs from the kernel's here is the dev tree's too, not the wheel's.
        dev = subprocess.run(
            [sys.executable, "-m", "mmsim", "validate", "--suite", "--json"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        status = {c["name"]: c["status"] for c in json.loads(p.stdout)["cases"]}
        assert status == {c["name"]: c["status"] for c in json.loads(dev.stdout)["cases"]}


def test_reproduce_report_without_and_with_matplotlib(wheel_venv):
    out = wheel_venv.tmp / "report"
    p = wheel_venv("mmsim", "reproduce", "hzp-rss", "--report", out)
    assert p.returncode == 2, p.stdout + p.stderr
    assert len(p.stderr.splitlines()) == 1, p.stderr
    assert p.stderr.startswith("mmsim: error: ") and "install mmsim[plot]" in p.stderr
    assert "Traceback" not in p.stderr and not p.stdout and not out.exists()
    i = wheel_venv("pip", "install", "--quiet", "--no-compile", "matplotlib", timeout=1200)
    assert i.returncode == 0, i.stderr[-3000:]
    p = wheel_venv("mmsim", "reproduce", "hzp-rss", "--report", out)
    assert p.returncode == 0, p.stderr
    assert (out / "index.html").is_file()


def test_sweep_on_a_cluster_without_ray_is_one_line(wheel_venv):
    spec = wheel_venv.tmp / "spec.json"
    spec.write_text(json.dumps({"workload": {"program": []}, "grid": {"machine.cpus": [1]}}))
    p = wheel_venv("mmsim", "sweep", spec, "--cluster", "ray")
    assert p.returncode == 2, p.stdout + p.stderr
    assert len(p.stderr.splitlines()) == 1 and "install mmsim[ray]" in p.stderr, p.stderr
