"""``pgbench-ptshare``: seed 003 on a real database. PostgreSQL 15 (Debian's ``postgresql-15``)
with a 2 GiB shared buffer pool serves ``pgbench -S`` (select-only) from 16 clients, each a
backend forked by the postmaster. The server, with every backend, is recorded (``mmsim
record``; pgbench runs natively beside it and is not recorded), once with the pool in 4 KiB
pages and once in huge pages (``huge_pages=on``: hugetlb), and each trace is replayed with and
without shared page tables, as ptshare-oltp runs them (the patch: ``vm/ptshare=pte,pmd``;
without it, no hugetlb PMD sharing either, as in 2.6.15).

The server runs as the ``postgres`` user (it refuses root): its cluster lives in a directory
of its own under the temporary directory, made once per scale with ``initdb`` and ``pgbench
-i``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from mmsim.experiments.core import Experiment, _row
from mmsim.experiments.pool import Run
from mmsim.experiments.studies import cache_dir

#: Debian's PostgreSQL 15.
PG_BIN = Path("/usr/lib/postgresql/15/bin")

#: The database and the load at each size: pgbench's scale (100,000 accounts each: 15 MB),
#: clients (one backend each), transactions per client, and the buffer pool (2 GiB at full
#: size: its 2.2 GB segment holds a whole aligned 1 GiB, whose PMD table can be shared).
PG_SIZES: dict[str, dict[str, Any]] = {
    "full": {"scale": 50, "clients": 16, "transactions": 200, "shared_buffers_mb": 2048},
    "quick": {"scale": 2, "clients": 4, "transactions": 50, "shared_buffers_mb": 128},
}

#: name -> (the trace: huge pages or not, knobs of the replay).
PG_CONFIGS: dict[str, tuple[bool, dict[str, Any]]] = {
    "4 KiB pages": (False, {"vm/ptshare": "off"}),
    "4 KiB pages, shared page tables": (False, {"vm/ptshare": "pte,pmd"}),
    "huge pages": (True, {"vm/ptshare": "off"}),
    "huge pages, shared page tables": (True, {"vm/ptshare": "pte,pmd"}),
}
#: What every replay shares: no hugetlb PMD sharing unless the patch shares (2.6.15's kernel).
PG_BASE = {"kernel/hugetlb_pmd_share": 0}

#: The seed's OLTP claims (Brian Twichell, 2006): throughput with shared page tables over
#: without, in 4 KiB pages (+25%) and in 2 MiB pages (+4%).
PG_PUBLISHED = {False: 1.25, True: 1.04}


def _fail(why: str) -> Exception:
    from mmsim._mmsim import MmsimError

    return MmsimError(f"pgbench-ptshare: {why}")


def _top() -> Path:
    """Where the clusters, their socket and the recorder's tool live: a directory the postgres
    user can reach (the user's cache may be private)."""
    return Path(tempfile.gettempdir()) / "mmsim-pgbench"


def _as_postgres(*argv: str, **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", "postgres", "--", *argv], capture_output=True, text=True, **kw)


def _pool_pages(size: dict[str, Any]) -> int:
    """Huge pages the server's shared memory takes: the pool and about 10% for the rest."""
    return size["shared_buffers_mb"] * 11 // 10 // 2 + 16


def cluster(size: dict[str, Any]) -> Path:
    """The database cluster of `size`'s scale (made if missing), owned by postgres."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        raise _fail("needs root, to run PostgreSQL as the postgres user")
    if not (PG_BIN / "postgres").is_file() or not (PG_BIN / "pgbench").is_file():
        raise _fail(f"needs PostgreSQL 15 in {PG_BIN} (Debian's postgresql-15)")
    top = _top()
    data, sock = top / f"scale-{size['scale']}", top / "sock"
    if (data / "PG_VERSION").is_file() and (data / "mmsim-ready").is_file():
        return data
    for d in (top, sock):
        d.mkdir(exist_ok=True)
        shutil.chown(d, "postgres")
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir()
    shutil.chown(data, "postgres")
    p = _as_postgres(str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "--no-sync")
    if p.returncode != 0:
        raise _fail(f"initdb failed: {p.stderr.strip()[-300:]}")
    server = _server_argv(data, size, huge=False)
    proc = subprocess.Popen(server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(proc)
        p = _as_postgres(str(PG_BIN / "pgbench"), "-h", str(sock), "-i", "-s", str(size["scale"]), "postgres")
        if p.returncode != 0:
            raise _fail(f"pgbench -i failed: {p.stderr.strip()[-300:]}")
    finally:
        _stop(data)
        proc.wait(timeout=120)
    (data / "mmsim-ready").touch()
    return data


def _server_argv(data: Path, size: dict[str, Any], huge: bool) -> list[str]:
    sock = data.parent / "sock"
    settings = {
        "listen_addresses": "",
        "shared_buffers": f"{size['shared_buffers_mb']}MB",
        "max_connections": str(size["clients"] + 10),
        "huge_pages": "on" if huge else "off",
        "fsync": "off",
        "log_min_messages": "fatal",
    }
    c = [x for k, v in settings.items() for x in ("-c", f"{k}={v}")]
    return ["runuser", "-u", "postgres", "--", str(PG_BIN / "postgres"), "-D", str(data), "-k", str(sock), *c]


def _wait_ready(proc: Any, timeout: float = 180) -> None:
    """Until the server accepts connections (or has exited: an error). `proc`: the server's
    Popen, or an Event set when it has exited."""
    sock = _top() / "sock"
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if isinstance(proc, threading.Event) and proc.is_set():
            raise _fail("the server exited before accepting connections")
        if isinstance(proc, subprocess.Popen) and proc.poll() is not None:
            raise _fail(f"the server exited with {proc.returncode} before accepting connections")
        if _as_postgres(str(PG_BIN / "pg_isready"), "-q", "-h", str(sock)).returncode == 0:
            return
        time.sleep(0.5)
    raise _fail(f"the server did not accept connections in {timeout:.0f} s")


def _stop(data: Path) -> None:
    _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data), "stop", "-m", "fast", "-w")


def _pgbench(size: dict[str, Any]) -> str:
    sock = _top() / "sock"
    p = _as_postgres(
        str(PG_BIN / "pgbench"),
        "-h",
        str(sock),
        "-S",
        "-n",
        "-c",
        str(size["clients"]),
        "-j",
        "2",
        "-t",
        str(size["transactions"]),
        "postgres",
    )
    if p.returncode != 0:
        raise _fail(f"pgbench -S failed: {p.stderr.strip()[-300:]}")
    return p.stdout


class _Driver(threading.Thread):
    """Beside a server starting: waits until it is ready, runs pgbench, stops it; polls
    /proc/meminfo's PageTables while pgbench runs (its peak, kB)."""

    def __init__(self, data: Path, size: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.data, self.size = data, size
        self.error: Exception | None = None
        self.peak_page_tables = 0
        self.base_page_tables = _meminfo("PageTables")
        #: Set by the caller when the server has exited.
        self.gone = threading.Event()

    def run(self) -> None:
        try:
            _wait_ready(self.gone)
            done = threading.Event()

            def poll() -> None:
                while not done.is_set():
                    self.peak_page_tables = max(self.peak_page_tables, _meminfo("PageTables"))
                    time.sleep(0.005)

            t = threading.Thread(target=poll, daemon=True)
            t.start()
            try:
                _pgbench(self.size)
            finally:
                done.set()
                t.join()
        except Exception as e:  # reported by the caller
            self.error = e
        finally:
            _stop(self.data)


def _meminfo(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def _hugetlb(size: dict[str, Any], huge: bool) -> Any:
    """The host's hugetlb pool sized for the server (restored after), or nothing."""
    import contextlib

    from mmsim.native_knobs import HostSettings

    return HostSettings({"vm/nr_hugepages": _pool_pages(size)}) if huge else contextlib.nullcontext()


def recorded_server(size_name: str, huge: bool) -> Path:
    """The cached trace of the server under pgbench -S (recorded now if missing)."""
    from mmsim import trace

    size = PG_SIZES[size_name]
    data = cluster(size)
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    name = f"pgbench-ptshare-{size_name}-{'huge' if huge else '4k'}"
    out, meta = d / f"{name}.trace", d / f"{name}.json"
    server = _server_argv(data, size, huge)
    key = {"command": server, "size": size}
    if out.is_file() and meta.is_file() and json.loads(meta.read_text()) == key:
        return out
    # The recorder's tool where the postgres user can run it (the user's cache may be private).
    saved = os.environ.get("MMSIM_CACHE_DIR")
    tools = data.parent / "tools"
    tools.mkdir(exist_ok=True)
    tools.chmod(0o755)
    os.environ["MMSIM_CACHE_DIR"] = str(tools)
    try:
        with _hugetlb(size, huge):
            driver = _Driver(data, size)
            driver.start()
            try:
                trace.record(server, out)
            finally:
                driver.gone.set()
                driver.join()
    finally:
        if saved is None:
            os.environ.pop("MMSIM_CACHE_DIR", None)
        else:
            os.environ["MMSIM_CACHE_DIR"] = saved
    if driver.error is not None:
        raise driver.error
    meta.write_text(json.dumps(key))
    return out


def _pg_natives(size_name: str) -> dict[bool, dict[str, Any]]:
    """`_pg_native` in 4 KiB pages, then in huge pages: one server at a time."""
    return {huge: _pg_native(size_name, huge) for huge in (False, True)}


def _pg_native(size_name: str, huge: bool) -> dict[str, Any]:
    """The server natively under the same load: its tree's faults and peak RSS (wait4), and
    the peak of PageTables over the run less before it (system-wide, kB)."""
    from mmsim.validate_trace import run_native

    size = PG_SIZES[size_name]
    data = cluster(size)
    with _hugetlb(size, huge):
        driver = _Driver(data, size)
        driver.start()
        try:
            r = run_native(_server_argv(data, size, huge), quiet=True)
        finally:
            driver.gone.set()
            driver.join()
    if driver.error is not None:
        raise driver.error
    r["PageTables"] = driver.peak_page_tables - driver.base_page_tables
    return r


def _pg_replay(path: str, size_name: str, huge: bool, knobs: dict[str, Any]) -> dict[str, Any]:
    """The server's replay on 2 CPUs under `knobs`: page-table memory at its peak (the largest
    PageTables of any snapshot less the start's), faults, page-walk cycles, and the time from
    the postmaster's start to its exit."""
    from mmsim import trace
    from mmsim.workload import run_json

    size = PG_SIZES[size_name]
    w = trace.replay_workload(path, cpus=2)
    w["knobs"] = {**PG_BASE, **knobs, **({"vm/nr_hugepages": _pool_pages(size)} if huge else {})}
    r = json.loads(run_json(w))
    snaps = r["snapshots"]
    base = r["baseline"]["meminfo"].get("PageTables", 0)
    perf = r["perf"]
    return {
        "page-tables": max(s["meminfo"].get("PageTables", 0) for s in snaps) - base,
        "faults": perf["page-faults"],
        "page-walk-cycles": perf["page-walk-cycles"],
        "dTLB misses": perf["dTLB-load-misses"] + perf["dTLB-store-misses"],
        "seconds": max(s["time"] for s in snaps) - min(s["time"] for s in snaps),
        "maxrss": max(p["VmHWM"] for p in r["processes"]),
        "minflt": sum(p["minflt"] for p in r["processes"]),
        "transactions": size["clients"] * size["transactions"],
    }


def pgbench_runs(size: str = "full") -> list[Run]:
    paths = {huge: str(recorded_server(size, huge)) for huge in (False, True)}
    w = 1 if size == "quick" else 20
    return [
        *(Run(_pg_replay, (paths[h], size, h, k), w, f"pgbench-ptshare {c}") for c, (h, k) in PG_CONFIGS.items()),
        # One run for both: two servers on one cluster at once would collide (its lock file).
        Run(_pg_natives, (size,), 2, "pgbench-ptshare natively"),
    ]


def pgbench_rows(results: list[Any]) -> list[dict[str, Any]]:
    n = len(PG_CONFIGS)
    txns = results[0]["transactions"]
    sims, natives = dict(zip(PG_CONFIGS, results[:n], strict=True)), results[n]
    out = []
    for c, (huge, knobs) in PG_CONFIGS.items():
        m = sims[c]
        k = natives[huge] if knobs["vm/ptshare"] == "off" else {}
        pt = _row(c, "page-table memory at its peak", None, m["page-tables"], "kB")
        faults = _row(c, "page faults (the server)", None, m["faults"], "faults")
        if k:
            pt["kernel"] = k["PageTables"]
            faults["kernel"] = k["minflt"] + k["majflt"]
        out += [
            pt,
            faults,
            _row(c, "dTLB misses", None, m["dTLB misses"], ""),
            _row(c, "page-walk cycles per transaction", None, round(m["page-walk-cycles"] / txns, 1), "cycles"),
            _row(c, "transactions per simulated second", None, round(txns / m["seconds"]), "tps"),
        ]
    for huge in (False, True):
        pages = "huge pages" if huge else "4 KiB pages"
        off, on = sims[pages], sims[f"{pages}, shared page tables"]
        tps = (txns / on["seconds"]) / (txns / off["seconds"])
        out.append(_row(f"{pages}: shared / not", "throughput", PG_PUBLISHED[huge], round(tps, 3), "x"))
        out.append(
            _row(
                f"{pages}: shared / not", "page-table memory freed", None, off["page-tables"] - on["page-tables"], "kB"
            )
        )
    return out


PGBENCH_PTSHARE = Experiment(
    "pgbench-ptshare",
    "003",
    "default",
    "Sharing the page tables of a database's shared buffer pool among its server processes raised OLTP "
    "throughput 25% with 4 KiB pages and 4% with huge pages, and freed over 14 GB of page tables.",
    pgbench_runs,
    pgbench_rows,
    [
        "The program: PostgreSQL 15 with shared_buffers=2GB serving pgbench -S -c 16 -t 200 on a scale-50 "
        "database (750 MB), the postmaster and every backend recorded, pgbench native beside it. Two "
        "recordings: the pool in 4 KiB pages and in hugetlb pages (huge_pages=on, with the host's pool sized "
        "for it and restored). Each replayed on the default profile with 2 CPUs, without and with shared page "
        "tables.",
        "Transactions per simulated second: pgbench's transactions over the replay's time from the "
        "postmaster's start to its exit. A replayed backend does not wait for its client (the socket's "
        "reads return what they returned): the figure is the server's CPU-bound rate on 2 CPUs.",
        "The kernel's count: the same server under the same load natively (no recorder): its tree's "
        "faults from wait4, and the peak of /proc/meminfo's PageTables while pgbench ran less before the "
        "server started (system-wide; Linux 6.18 shares no page tables but hugetlb's PMDs, on for the "
        "native huge-page run).",
        "The seed's 14 GB came from a 64 GB machine's buffer pool mapped whole by each of hundreds of server "
        "processes; here 16 backends touch what 3,200 random selects reach of a 2 GiB pool. PostgreSQL hands "
        "out free buffers in order, so what they reach lies in the pool's first hundred MB: in huge pages, "
        "below the segment's first whole aligned 1 GiB, the only range whose PMD table can be shared.",
    ],
)
