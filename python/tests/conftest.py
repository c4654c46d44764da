"""Shared fixtures: the repository, its workloads, and a runner of the mmsim command."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
HZP_RSS = ROOT / "experiments" / "workloads" / "hzp-rss.json"


@dataclass
class Result:
    """What one `mmsim` invocation did."""

    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_mmsim(*args: str | Path, cwd: Path = ROOT) -> Result:
    """Run `python -m mmsim ARGS` (the same code as the console script) and capture it."""
    p = subprocess.run(
        [sys.executable, "-m", "mmsim", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return Result(p.returncode, p.stdout, p.stderr)


@pytest.fixture
def mmsim() -> Callable[..., Result]:
    return run_mmsim


@pytest.fixture
def hzp_rss() -> Path:
    return HZP_RSS


@pytest.fixture
def write_workload(tmp_path: Path) -> Callable[[str, str | dict], Path]:
    """Write a workload file (a dict is written as JSON) and return its path."""

    def write(name: str, content: str | dict) -> Path:
        path = tmp_path / name
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return path

    return write
