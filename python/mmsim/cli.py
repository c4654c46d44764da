"""The ``mmsim`` command.

    mmsim run WORKLOAD [--set KNOB=VALUE ...] [--check] [--json] [--sample UNITS[:WARMUP]] [--max-ops N]
              [--max-memory SIZE] [--native]
    mmsim knobs [--json]
    mmsim schema [OP] [--json]
    mmsim profiles [--json]
    mmsim profiles show NAME [--json | --toml]
    mmsim reproduce [NAME ...] [--list] [--json] [--jobs N] [--quick] [--csv PATH] [--parquet PATH] [--report DIR]
                    [--results PATH] [--timelines]
    mmsim sweep SPEC [--processes N] [--json | --csv PATH | --parquet PATH]
    mmsim validate [WORKLOAD ...] [--suite] [--host-set KNOB=VALUE ...] [--dir FS=PATH ...] [--json]
    mmsim validate --random N [--seed S] [--pressure SHARE] [--save-dir DIR] [--shrink-runs N] [--json]
    mmsim record [-o FILE] -- CMD [ARGS...]
    mmsim trace info FILE [--json]
    mmsim trace dump FILE [--limit N]

Exit status: 0 on success; 1 when the run failed (an ``expect`` did not hold, ``--check``
found a mismatch or an invariant broke), after printing its report; 2 for a bad workload,
knob or file, with one line ``mmsim: error: ...`` on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from collections.abc import Callable, Sequence

from mmsim import __version__, _mmsim, cli_trace
from mmsim._mmsim import MmsimError
from mmsim.knobs import format_knobs, knobs
from mmsim.report import format_report
from mmsim.workload import run_json

PROG = "mmsim"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mmsim`` and its subcommands."""
    p = argparse.ArgumentParser(
        prog=PROG,
        description="mmsim: a Linux-faithful memory-management simulator.",
    )
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run a workload and print its counters",
        description="Run a workload (.json, .yaml or .yml) and print what perf stat, "
        "/proc/meminfo, /proc/vmstat and /proc/PID/status would show.",
    )
    run.add_argument("workload", metavar="WORKLOAD", nargs="?", help="workload file (.json, .yaml, .yml)")
    run.add_argument(
        "--trace",
        metavar="FILE",
        action="append",
        help="replay a program recorded by 'mmsim record' (in place of WORKLOAD): its forks, threads, "
        "system calls, loads, stores and instruction fetches; or a ChampSim trace (.champsimtrace.xz, .gz, "
        ".bz2 or raw; told from its contents). Repeat it to run several traces as processes on CPUs of "
        "their own",
    )
    run.add_argument(
        "--events",
        nargs="?",
        const="*",
        metavar="GLOB,...",
        help="print the kernel's events as perf script prints tracepoints (exceptions:page_fault_user, "
        "kmem:mm_page_alloc, sched:sched_switch, ...; globs as perf record -e takes them; all without a value) "
        "instead of the report; --json has them under trace_events. Loops are not fast-forwarded",
    )
    run.add_argument(
        "--timeline",
        metavar="FILE",
        help="also write every CPU's time as Chrome trace-event JSON (Perfetto's UI and chrome://tracing open it): "
        "tasks running, faults, allocations, TLB flushes, khugepaged and kscrubd; and FILE.html, a page that draws it",
    )
    run.add_argument(
        "--cold",
        action="store_true",
        help="with --trace: the program's files start uncached (default: in the page cache, as after a native run)",
    )
    run.add_argument(
        "--place",
        choices=("recorded", "kernel"),
        help="with --trace: where the mappings the program did not fix go: where the simulated kernel puts "
        "them, THP-aligned as Linux does (kernel, the default), or where Valgrind put them when recording "
        "(recorded)",
    )
    run.add_argument(
        "--hugepage-text",
        action="store_true",
        help="with --trace: madvise each private executable file mapping MADV_HUGEPAGE as it is mapped (as if "
        "the program asked for huge text; readahead then builds PMD folios for it)",
    )
    run.add_argument("--profile", metavar="NAME", help="with --trace: the hardware profile (default: default)")
    run.add_argument("--memory", metavar="SIZE", help="with --trace: the machine's memory (default: 16G)")
    run.add_argument("--cpus", type=int, metavar="N", help="with --trace: the machine's CPUs (default: 1)")
    run.add_argument(
        "--memory-max",
        metavar="SIZE",
        help="with --trace: run the program in a memory cgroup 'trace' with this memory.max (and a swap "
        "partition, 4G unless --swap says otherwise); its files are in the report under cgroups.trace",
    )
    run.add_argument("--swap", metavar="SIZE", help="with --trace: a swap partition of SIZE")
    run.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        help="set a knob after the workload's own knobs (repeatable; see 'mmsim knobs'; "
        "hw.PATH=VALUE overrides a hardware-profile parameter)",
    )
    run.add_argument(
        "--check",
        action="store_true",
        help="run the reference model beside the simulator and verify every read",
    )
    run.add_argument("--json", action="store_true", help="print the report as JSON")
    run.add_argument("--max-ops", metavar="N", help="stop the run after N simulated operations (default 10^9)")
    run.add_argument(
        "--sample",
        metavar="UNITS[:WARMUP]",
        help="SMARTS-style sampling of loops: after each change of kernel state, WARMUP iterations (default 1) "
        "warm the TLBs and caches, UNITS iterations (at least 2) are measured, and the rest are added as their "
        "mean with a 95%% confidence interval per counter (faults and kernel counts stay exact)",
    )
    run.add_argument(
        "--max-memory", metavar="SIZE", help="largest simulated memory a workload may ask for (default 256G)"
    )
    run.add_argument(
        "--native",
        action="store_true",
        help="run the workload on this machine's kernel instead (native/runner.c): what the kernel reports",
    )
    run.set_defaults(func=cmd_run)

    kn = sub.add_parser(
        "knobs",
        help="list every kernel knob",
        description="List every kernel knob: name, default, accepted values and meaning.",
    )
    kn.add_argument("--json", action="store_true", help="print the list as JSON")
    kn.set_defaults(func=cmd_knobs)

    sc = sub.add_parser(
        "schema",
        help="list the workload format's ops and fields",
        description="List every op of the workload format with its fields, their types, defaults and "
        "meanings, as the engine declares them (docs/workload-format.md is generated from the same).",
    )
    sc.add_argument("op", nargs="?", metavar="OP", help="show one op")
    sc.add_argument("--json", action="store_true", help="print the engine's declaration as JSON")
    sc.set_defaults(func=cmd_schema)

    pr = sub.add_parser(
        "profiles",
        help="list the hardware profiles, or show one",
        description="List the built-in hardware profiles, or print every parameter of one "
        "as PATH = VALUE (override any of them with --set hw.PATH=VALUE).",
    )
    pr.add_argument("action", nargs="?", choices=["show"], help="show one profile")
    pr.add_argument("name", nargs="?", metavar="NAME", help="profile name (with 'show')")
    pr.add_argument("--json", action="store_true", help="print as JSON")
    pr.add_argument("--toml", action="store_true", help="print the profile file itself")
    pr.set_defaults(func=cmd_profiles)

    rp = sub.add_parser(
        "reproduce",
        help="run the seeds' experiments beside their published numbers",
        description="Run each built-in seed experiment at the seed's own parameters on a profile of "
        "the seed's machine, and print published vs simulated values and their ratio.",
    )
    rp.add_argument("names", nargs="*", metavar="NAME", help="experiments to run (default: all)")
    rp.add_argument("--list", action="store_true", help="list the experiments")
    rp.add_argument("--json", action="store_true", help="print the results as JSON")
    rp.add_argument("--csv", metavar="PATH", help="also write every row (experiment, config, metric, ...) as CSV")
    rp.add_argument("--parquet", metavar="PATH", help="also write every row as Parquet")
    rp.add_argument("--report", metavar="DIR", help="also write DIR/index.html and DIR/report.md with tables and plots")
    rp.add_argument(
        "--timelines",
        action="store_true",
        help="with --report: also run each experiment's first simulation with every event and link its "
        "timeline from the report (skipped where that simulation passes 2,000,000 operations)",
    )
    rp.add_argument(
        "--results",
        metavar="PATH",
        help="also write the results as JSON with the commit, date and host they came from (make reproduce "
        "writes docs/results/reproduce.json, from which the docs' Seed reproductions table is generated)",
    )
    rp.add_argument(
        "--jobs",
        "-j",
        type=int,
        metavar="N",
        help="simulations run at once, each in a process of its own (default: one per CPU; the numbers "
        "do not depend on it)",
    )
    rp.add_argument(
        "--quick",
        action="store_true",
        help="run the studies of real programs at their small size (the one make test runs); the seeds' "
        "experiments have one size",
    )
    rp.set_defaults(func=cmd_reproduce)

    sw = sub.add_parser(
        "sweep",
        help="run a workload over a grid of knobs and hardware parameters",
        description="Run a sweep spec (.json, .yaml): `workload` (a file, relative to the spec, or "
        "inline), `grid` (key -> values: knobs by Linux name, machine.profile/memory/cpus, hw.PATH), "
        "and optionally `machine`, `knobs`, `repeats`, `check`. Prints one row per point.",
    )
    sw.add_argument("spec", metavar="SPEC", help="sweep spec file (.json, .yaml, .yml)")
    sw.add_argument("--processes", type=int, default=None, metavar="N", help="local worker processes (default: CPUs)")
    sw.add_argument("--cluster", default=None, metavar="ADDR", help="run on Ray: 'ray' or 'ray://host:port'")
    sw.add_argument(
        "--columns",
        default="perf.cycles,perf.page-faults,perf.dTLB-load-misses,perf.seconds",
        metavar="COLS",
        help="counters shown in the table (comma-separated; the files get every counter)",
    )
    out = sw.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print every row as JSON")
    out.add_argument("--csv", metavar="PATH", help="write every row and counter as CSV")
    out.add_argument("--parquet", metavar="PATH", help="write every row and counter as Parquet")
    sw.set_defaults(func=cmd_sweep)

    va = sub.add_parser(
        "validate",
        help="run workloads on this machine's kernel and in mmsim, and compare",
        description="Run each workload natively (native/runner.c, real system calls) and in mmsim configured "
        "like the host (its THP settings and hugetlb pool), and compare faults, RssAnon, RssShmem, VmPTE, VmLck, "
        "AnonHugePages, HugetlbPages, LazyFree, THP, mlock, MADV_FREE and hugetlb pool events between snapshots. "
        "--suite runs the "
        "built-in cases. Exits 1 if a counter differs.",
    )
    va.add_argument("workloads", nargs="*", metavar="WORKLOAD", help="workload files (.json, .yaml)")
    va.add_argument(
        "--trace",
        metavar="FILE",
        help="check a replay: run the command after -- natively (no recorder) and compare the minor and major "
        "faults and peak RSS of its process tree (wait4) and the THP events with the replay of FILE under the "
        "host's knobs",
    )
    va.add_argument(
        "--place",
        choices=("recorded", "kernel"),
        default="kernel",
        help="with --trace: where the replay puts the mappings the program did not fix (default kernel: as the "
        "native run's kernel placed them; recorded: where Valgrind put them)",
    )
    va.add_argument(
        "--memory-max",
        metavar="SIZE",
        help="with --trace: run the command natively, and the replay, in a memory cgroup with this memory.max and "
        "a swap partition (4G unless --swap says otherwise; needs root); the reclaim and swap events and the "
        "cgroup's peak are compared too, inside the spread of --native-runs runs (default 3)",
    )
    va.add_argument("--swap", metavar="SIZE", help="with --trace --memory-max: the swap partition's size")
    va.add_argument("--suite", action="store_true", help="run the built-in validation suite")
    va.add_argument(
        "--host-set",
        dest="host_sets",
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        help="change a host knob for the run: a THP or khugepaged knob, the hugetlb pool (vm/nr_hugepages, "
        "vm/nr_overcommit_hugepages), fault_around_bytes where debugfs is mounted, ... (needs root; restored on "
        "exit; a workload's own knobs are set for its case)",
    )
    va.add_argument(
        "--dir",
        dest="dirs",
        action="append",
        default=[],
        metavar="FS=PATH",
        help="where the workloads' files of filesystem FS go (ext4=PATH: a directory on ext4, default the "
        "repository's target/ or the temporary directory; tmpfs=PATH: one on a tmpfs, default /dev/shm); each run "
        "works in PATH/mmsim-PID, removed after it",
    )
    va.add_argument("--json", action="store_true", help="print host settings and cases as JSON")
    va.add_argument(
        "--native-runs",
        type=_positive,
        default=None,
        metavar="N",
        help="native runs of a case under memory pressure (cgroups, swap, reclaim), whose counters pass "
        "inside the runs' spread (default 5; other cases run once)",
    )
    va.add_argument(
        "--repeat",
        type=_positive,
        default=1,
        metavar="N",
        help="run each case N times; a case whose verdict changes between runs fails (default 1)",
    )
    va.add_argument(
        "--random",
        type=int,
        default=None,
        metavar="N",
        help="kernel-differential fuzzing: run N random workloads under random host THP knobs (needs root "
        "to set them), shrink each failure to a minimal workload and save it",
    )
    va.add_argument("--seed", type=int, default=None, metavar="S", help="with --random: the seed (default: the clock)")
    va.add_argument(
        "--pressure",
        type=float,
        default=None,
        metavar="SHARE",
        help="with --random: the share of cases (0 to 1) under memory pressure: swap, memory cgroups with "
        "limits, MADV_PAGEOUT and MADV_COLD, memory.reclaim (default: mmsim.random_checker.PRESSURE)",
    )
    va.add_argument(
        "--save-dir",
        default=None,
        metavar="DIR",
        help="with --random: where shrunk failures go (default: validate-failures/)",
    )
    va.add_argument(
        "--shrink-runs",
        type=int,
        default=None,
        metavar="N",
        help="with --random: runs a shrink may take per failure (default 300; 0: do not shrink)",
    )
    va.set_defaults(func=cmd_validate)
    cli_trace.add_parsers(sub)
    return p


def cmd_validate(args: argparse.Namespace) -> int:
    """``mmsim validate``: the workloads' files go where ``--dir`` says (mmsim.native.file_dirs)."""
    from mmsim.native import file_dirs_override, parse_dir_options

    with file_dirs_override(parse_dir_options(args.dirs)):
        return _validate(args)


def _validate(args: argparse.Namespace) -> int:
    from mmsim.native import validate_case, validate_workload
    from mmsim.native_host import host_settings
    from mmsim.native_knobs import HostSettings
    from mmsim.validate_suite import SUITE
    from mmsim.workload import load_workload

    if args.random is not None:
        return _validate_random(args)
    if args.trace is not None or (args.workloads and args.workloads[0] == "--"):
        return _validate_trace(args)
    if args.memory_max is not None or args.swap is not None:
        raise MmsimError("validate: --memory-max and --swap go with --trace")
    if args.seed is not None or args.save_dir is not None or args.shrink_runs is not None or args.pressure is not None:
        raise MmsimError("validate: --seed, --pressure, --save-dir and --shrink-runs go with --random")
    if not args.suite and not args.workloads:
        raise MmsimError("validate: give workload files or --suite")
    changes = _host_changes(args)
    workloads = [load_workload(w) for w in args.workloads]
    for path, w in zip(args.workloads, workloads, strict=True):
        # The engine's checks first: a malformed op is an error naming its field, before
        # anything runs on the kernel.
        try:
            _mmsim.check_workload(json.dumps(w))
        except MmsimError as e:
            raise MmsimError(f"{path}: {e}") from None
    cases = []
    with HostSettings(changes):
        host = host_settings()
        if host["transparent_hugepage/enabled"] is None:
            host_reason = "the host kernel has no transparent hugepage support"
        else:
            host_reason = ""
        for c in SUITE if args.suite else []:
            if host_reason:
                cases.append({"name": c.name, "status": "skip", "reason": host_reason, "pins": c.pins, "counters": []})
            else:
                cases.append(_repeated(args.repeat, lambda c=c: validate_case(c, host, native_runs=args.native_runs)))
            if not args.json:
                _print_case(cases[-1])
        for w in workloads:
            cases.append(_repeated(args.repeat, lambda w=w: validate_workload(w, host, native_runs=args.native_runs)))
            if not args.json:
                _print_case(cases[-1])
    if args.json:
        print(json.dumps({"host": host, "cases": cases}, indent=2))
    else:
        n = {s: sum(c["status"] == s for c in cases) for s in ("pass", "fail", "skip")}
        print(
            f"{n['pass']} passed, {n['fail']} failed, {n['skip']} skipped (host: Linux {host['kernel']}, "
            f"THP {host['transparent_hugepage/enabled']}, use_zero_page {host['transparent_hugepage/use_zero_page']})"
        )
    return 1 if any(c["status"] == "fail" for c in cases) else 0


def _host_changes(args: argparse.Namespace) -> dict[str, str]:
    """``--host-set KNOB=VALUE ...`` as a mapping."""
    changes = {}
    for hs in args.host_sets:
        k, eq, v = hs.partition("=")
        if not eq:
            raise MmsimError(f"validate: --host-set expects KNOB=VALUE, got {hs!r}")
        changes[k] = v
    return changes


def _validate_trace(args: argparse.Namespace) -> int:
    """``mmsim validate --trace FILE -- CMD [ARGS...]``."""
    from mmsim.native_host import host_lock, host_settings
    from mmsim.native_knobs import HostSettings
    from mmsim.validate_trace import validate_trace

    cmd = list(args.workloads)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if args.trace is None or not cmd:
        raise MmsimError("validate: --trace FILE -- CMD [ARGS...] (the trace, and the command it recorded)")
    if args.suite:
        raise MmsimError("validate: --trace checks one recording: it cannot be combined with --suite")
    if args.swap is not None and args.memory_max is None:
        raise MmsimError("validate: --swap applies with --trace --memory-max only")
    changes = _host_changes(args)
    with host_lock(), HostSettings(changes):
        host = host_settings()
        case = _repeated(
            args.repeat,
            lambda: validate_trace(
                args.trace,
                cmd,
                host,
                place=args.place,
                memory_max=args.memory_max,
                swap=args.swap,
                runs=args.native_runs,
            ),
        )
    if args.json:
        print(json.dumps({"host": host, "cases": [case]}, indent=2))
    else:
        _print_case(case)
        print(
            f"{'1 passed' if case['status'] == 'pass' else '1 failed'} (host: Linux {host['kernel']}, "
            f"THP {host['transparent_hugepage/enabled']}; replay placement: {args.place})"
        )
    return 1 if case["status"] == "fail" else 0


def _positive(v: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {v!r}")
    return n


def _repeated(n: int, once: Callable[[], dict]) -> dict:
    """A case run `n` times: its verdict if every run gave the same one, else a failure that
    says how the runs went (a verdict that changes from run to run is a bug, of the model
    or of the runner: it is never retried away). ``runs`` counts the verdicts."""
    results = [once() for _ in range(n)]
    first = results[0]
    verdicts = [r["status"] for r in results]
    first["runs"] = {s: verdicts.count(s) for s in ("pass", "fail", "skip") if s in verdicts}
    if len(set(verdicts)) > 1:
        bad = next(r for r in results if r["status"] == "fail")
        first = {**bad, "runs": first["runs"]}
        first["reason"] = f"the verdict changed across {n} runs ({first['runs']}); a failing run: {bad['reason']}"
    return first


def _validate_random(args: argparse.Namespace) -> int:
    """``mmsim validate --random N``: kernel-differential fuzzing (mmsim.validate_random)."""
    import signal

    from mmsim.native_knobs import HostSettings
    from mmsim.validate_random import KNOBS, SHRINK_RUNS, campaign, format_figures

    if args.suite or args.workloads:
        raise MmsimError("validate: --random runs generated workloads: it cannot be combined with --suite or files")
    if args.random < 1:
        raise MmsimError(f"validate: --random expects a number of cases of at least 1, got {args.random}")
    if args.shrink_runs is not None and args.shrink_runs < 0:
        raise MmsimError(f"validate: --shrink-runs expects 0 or more, got {args.shrink_runs}")
    if args.pressure is not None and not 0.0 <= args.pressure <= 1.0:
        raise MmsimError(f"validate: --pressure expects a share from 0 to 1, got {args.pressure}")
    changes = _host_changes(args)
    for k in changes:
        if k in KNOBS:
            raise MmsimError(f"validate: --host-set {k}: --random sets it for each case")

    def announce(seed: int) -> None:
        if args.seed is None:
            print(f"{PROG}: validate --random {args.random} --seed {seed}", file=sys.stderr, flush=True)

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # as Ctrl-C: the host's knobs are restored, the figures printed

    old = signal.signal(signal.SIGTERM, terminate)
    try:
        with HostSettings(changes):
            fig = campaign(
                args.random,
                args.seed,
                save_dir=args.save_dir or "validate-failures",
                shrink_runs=SHRINK_RUNS if args.shrink_runs is None else args.shrink_runs,
                progress=sys.stderr.isatty(),
                on_seed=announce,
                pressure=args.pressure,
            )
    finally:
        signal.signal(signal.SIGTERM, old)
    print(json.dumps(fig, indent=2) if args.json else format_figures(fig), end="\n" if args.json else "")
    if fig.get("interrupted"):
        return 130
    return 1 if fig["failed"] else 0


def _print_case(c: dict) -> None:
    runs = c.get("runs") or {}
    n = sum(runs.values())
    tally = f" [{runs.get(c['status'], 0)} of {n} runs]" if n > 1 else ""
    print(f"{c['status'].upper():<4}  {c['name']}{tally}: {c.get('pins') or c.get('reason') or ''}")
    if c["status"] == "skip":
        print(f"      skipped: {c['reason']}")
    from mmsim.native_compare import differs, format_counter

    for x in c["counters"]:
        mark = "   <-- differs" if differs(x) else ""
        if not mark and x["kernel"] != x["simulated"] and ("kernel_excess" in x or "kernel_deficit" in x):
            mark = "   (within the allowance: docs/validation.md)"
        print(f"      {format_counter(x)}{mark}")


def cmd_sweep(args: argparse.Namespace) -> int:
    """``mmsim sweep SPEC``."""
    from mmsim.sweep import load_spec, sweep

    if args.cluster is not None:
        try:
            import ray  # noqa: F401
        except ImportError:
            raise MmsimError("--cluster needs ray: install mmsim[ray] (pip install 'mmsim[ray]')") from None
    spec = load_spec(args.spec)
    df = sweep(
        spec["workload"],
        spec["grid"],
        machine=spec.get("machine"),
        knobs=spec.get("knobs"),
        repeats=int(spec.get("repeats", 1)),
        check=bool(spec.get("check", False)),
        processes=args.processes,
        cluster=args.cluster,
        parquet=args.parquet,
    )
    if args.json:
        print(df.to_json(orient="records", indent=2))
        return 0
    if args.csv:
        df.to_csv(args.csv, index=False)
    keys = [*spec["grid"], "repeat"] if int(spec.get("repeats", 1)) > 1 else list(spec["grid"])
    cols = [c for c in args.columns.split(",") if c]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise MmsimError(f"sweep: --columns: no counter {missing[0]!r} (e.g. perf.cycles, vmstat.pgfault)")
    print(df[keys + cols].to_string(index=False))
    if args.csv or args.parquet:
        print(f"{len(df)} rows x {len(df.columns)} columns written to {args.csv or args.parquet}", file=sys.stderr)
    return 1 if df["failed"].any() else 0


def cmd_profiles(args: argparse.Namespace) -> int:
    """``mmsim profiles [show NAME]``."""
    from mmsim import _mmsim

    if args.action is None:
        if args.name:
            raise MmsimError(f"profiles: unexpected {args.name!r} (did you mean 'profiles show {args.name}'?)")
        rows = json.loads(_mmsim.profiles())
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        width = max(len(r["name"]) for r in rows)
        for r in rows:
            print(f"{r['name']:<{width}}  {r['description']}")
        return 0
    if not args.name:
        raise MmsimError("profiles show: which profile? (see 'mmsim profiles')")
    if args.toml:
        print(_mmsim.profile_text(args.name), end="")
        return 0
    flat = json.loads(_mmsim.profile_show(args.name))
    if args.json:
        print(json.dumps(dict(flat), indent=2))
        return 0
    width = max(len(p) for p, _ in flat)
    for path, value in flat:
        print(f"{path:<{width}} = {value}")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``mmsim reproduce``."""
    import time

    from mmsim.experiments import (
        EXPERIMENTS,
        SEED_EXPERIMENTS,
        STUDIES,
        Run,
        ratio,
        run_experiments,
        scoreboard,
        scoreboard_lines,
    )

    if args.list:
        for e in EXPERIMENTS.values():
            kind = " (study of a real program: run by name)" if e.name in STUDIES else ""
            print(f"{e.name:<12} seed {e.seed}  {e.profile:<12} {e.claim}{kind}")
        return 0

    if args.timelines and not args.report:
        raise MmsimError("reproduce: --timelines goes with --report DIR (the report links them)")
    if args.report:
        from mmsim.html_report import require_matplotlib

        require_matplotlib()  # before the experiments run
    names = args.names or SEED_EXPERIMENTS
    if args.quick and not all(n in STUDIES for n in names):
        seeds = [n for n in names if n not in STUDIES]
        raise MmsimError(f"reproduce: --quick applies to the studies of real programs only, not {seeds[0]!r}")
    if args.jobs is not None and args.jobs < 1:
        raise MmsimError(f"reproduce: --jobs {args.jobs}: expected 1 or more simulations at once")
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        raise MmsimError(f"reproduce: unknown experiment {unknown[0]!r} (known: {', '.join(EXPERIMENTS)})")
    bar = None
    if sys.stderr.isatty() and not args.json:
        from tqdm import tqdm

        bar = tqdm(total=None, unit="run", file=sys.stderr, delay=1.0)

    def progress(run: Run, secs: float, done: int, total: int) -> None:
        # Called as each simulation finishes (in the order they finish).
        if bar is not None:
            bar.total = total
            bar.set_description(run.label)
            bar.update(1)
        elif not args.json:
            print(f"mmsim: [{done}/{total}] {run.label} ({secs:.1f} s)", file=sys.stderr, flush=True)

    t0 = time.monotonic()
    if args.results:
        from mmsim.experiments import source_commit

        source = source_commit()  # what the run is made of: the tree as it begins
    if bar is None and not args.json:
        print(f"mmsim: running {', '.join(names)} ...", file=sys.stderr, flush=True)
    try:
        results = run_experiments(names, progress=progress, workers=args.jobs, quick=args.quick)
    finally:
        if bar is not None:
            bar.close()
    if args.csv or args.parquet:
        import pandas as pd

        table = pd.DataFrame(
            [{"experiment": e["name"], "profile": e["profile"], **r} for e in results for r in e["rows"]]
        )
        table["ratio"] = [ratio(r) for e in results for r in e["rows"]]
        if args.csv:
            table.to_csv(args.csv, index=False)
        if args.parquet:
            table.to_parquet(args.parquet, index=False)
    if args.results:
        from mmsim.experiments import write_results

        write_results(args.results, results, time.monotonic() - t0, args.jobs, source)
        print(f"mmsim: results written to {args.results}", file=sys.stderr)
    if args.report:
        from mmsim.html_report import write_report

        lines = None
        if args.timelines:
            from mmsim.experiments import write_timelines

            lines = write_timelines(names, args.report)
        index = write_report(results, args.report, timelines=lines)
        print(f"mmsim: report written to {index}", file=sys.stderr)
    if args.json:
        print(json.dumps({"experiments": results, "scoreboard": scoreboard(results)}, indent=2))
        return 0
    for e in results:
        print(f"{e['name']} (seed {e['seed']}, profile {e['profile']}): {e['claim']}")
        head = f"  {'config':<26} {'metric':<30} {'published':>18} {'simulated':>18} {'sim/pub':>8}  unit"
        print(head)
        for r in e["rows"]:
            pub = "-" if r["published"] is None else _num(r["published"])
            q = ratio(r)
            qs = "-" if q is None else f"{q:.2f}"
            ci = f"  (+- {_num(r['ci95'])})" if r.get("ci95") else ""
            ci += f"  (kernel {_kernel(r)})" if r.get("kernel") is not None else ""
            print(
                f"  {r['config']:<26} {r['metric']:<30} {pub:>18} {_num(r['simulated']):>18} {qs:>8}  {r['unit']}{ci}"
            )
        # The notes under the table, as the docs' seeds page has them: how the figures were
        # read, and what decides the result.
        for n in e.get("notes", []):
            print(textwrap.fill(n, width=110, initial_indent="  note: ", subsequent_indent="        "))
        print()
    print("\n".join(scoreboard_lines(scoreboard(results))))
    print(f"({time.monotonic() - t0:.1f} s)", file=sys.stderr)
    return 0


def _num(v: float) -> str:
    if isinstance(v, float) and not v.is_integer():
        return f"{v:,.3f}" if abs(v) < 1000 else f"{v:,.0f}"
    return f"{int(v):,}"


def _kernel(r: dict) -> str:
    """A row's kernel count: the native runs' median, and their range where they differed."""
    lo, hi = r.get("kernel_min", r["kernel"]), r.get("kernel_max", r["kernel"])
    return _num(r["kernel"]) + (f", runs {_num(lo)}..{_num(hi)}" if lo != hi else "")


def cmd_run(args: argparse.Namespace) -> int:
    """``mmsim run``."""
    sets = []
    for s in args.sets:
        name, eq, value = s.partition("=")
        if not eq or not name:
            raise MmsimError(f"--set expects KNOB=VALUE, got {s!r}")
        sets.append((name, value))
    if args.max_ops is not None:
        sets.append(("engine.max_ops", args.max_ops))
    if args.max_memory is not None:
        sets.append(("engine.max_memory", args.max_memory))
    if getattr(args, "sample", None) is not None:
        sets.append(("engine.sample", args.sample))
    if args.events is not None or args.timeline:
        # The timeline needs every event, the switches among them.
        sets.append(("engine.events", "*" if args.timeline else args.events))
    if args.native:
        from mmsim.native_report import format_native, native_report
        from mmsim.workload import load_workload

        if sets or args.check:
            raise MmsimError("run --native: --set and --check apply to the simulator only")
        native = native_report(load_workload(args.workload))
        print(json.dumps(native, indent=2) if args.json else format_native(native), end="" if not args.json else "\n")
        return 0
    report = json.loads(run_json(_run_workload(args), sets, args.check, progress=sys.stderr.isatty()))
    if args.timeline:
        from mmsim import timeline

        path, page = timeline.write(report, args.timeline)
        print(f"{PROG}: timeline written to {path} (drawn in {page})", file=sys.stderr)
        if args.events is not None:
            # Only the events asked for are printed (globs as the engine matches them).
            from fnmatch import fnmatchcase

            globs = [g.strip() for g in args.events.split(",") if g.strip()]
            report["trace_events"] = [
                e for e in report["trace_events"] if any(fnmatchcase(e["event"], g) for g in globs)
            ]
        else:
            report.pop("trace_events", None)
    if args.json:
        print(json.dumps(report, indent=2))
    elif args.events is not None:
        sys.stdout.write(format_events(report.get("trace_events", [])))
        dropped = report.get("engine", {}).get("trace_events_dropped", 0)
        more = f" ({dropped:,} more dropped)" if dropped else ""
        print(f"{PROG}: {len(report.get('trace_events', [])):,} events{more}", file=sys.stderr)
    else:
        sys.stdout.write(format_report(report))
    sys.stdout.flush()
    if report.get("failed"):
        print(f"{PROG}: the run failed: {_failure(report)}", file=sys.stderr)
        return 1
    return 0


def format_events(events: list[dict]) -> str:
    """Events as ``perf script`` prints tracepoints: comm, pid, [cpu], seconds, event, fields."""
    return "".join(
        f"{e['comm']:>16} {e['pid']:>6} [{e['cpu']:03}] {e['time']:>12.6f}: {e['event']}: {e['fields']}\n"
        for e in events
    )


def _run_workload(args: argparse.Namespace) -> str | dict:
    """What ``mmsim run`` runs: the workload file, or with ``--trace`` a replay of the trace."""
    machine_opts = {
        "profile": args.profile,
        "memory": args.memory,
        "cpus": args.cpus,
        "memory_max": args.memory_max,
        "swap": args.swap,
    }
    if args.trace is None:
        if args.workload is None:
            raise MmsimError("run: give a WORKLOAD file or --trace FILE")
        given = [f"--{k.replace('_', '-')}" for k, v in machine_opts.items() if v is not None]
        given += ["--cold"] if args.cold else []
        given += ["--place"] if args.place else []
        given += ["--hugepage-text"] if args.hugepage_text else []
        if given:
            raise MmsimError(f"run: {', '.join(given)} apply to --trace only (a workload names its machine)")
        return os.fspath(args.workload)
    if args.workload is not None:
        raise MmsimError("run: give a WORKLOAD file or --trace FILE, not both")
    from mmsim.trace import replay_workload

    return replay_workload(
        args.trace, cold=args.cold, place=args.place or "kernel", hugepage_text=args.hugepage_text, **machine_opts
    )


def cmd_knobs(args: argparse.Namespace) -> int:
    """``mmsim knobs``."""
    items = knobs()
    print(json.dumps(items, indent=2) if args.json else format_knobs(items))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    """``mmsim schema``."""
    from mmsim import _mmsim

    schema = json.loads(_mmsim.schema())
    decl = schema["workload"]
    ops = {o["op"]: o for o in decl["op_fields"]}
    if args.op is not None and args.op not in ops:
        raise MmsimError(f"schema: unknown op {args.op!r} (known: {', '.join(ops)})")
    if args.json:
        print(json.dumps(ops[args.op] if args.op else schema, indent=2))
        return 0

    def fields(fs: list[dict], indent: str = "  ") -> None:
        for f in fs:
            d = f["default"] or "-"
            print(f"{indent}{f['name']:<14} {f['type']:<22} {d:<22} {f['help']}")

    if args.op is None:
        print("top level:")
        fields(decl["top"])
        print("machine:")
        fields(decl["machine"])
        print()
    for o in decl["op_fields"] if args.op is None else [ops[args.op]]:
        print(f"{o['op']}: {o['summary']}")
        fields(o["fields"])
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mmsim`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except MmsimError as e:
        print(f"{PROG}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (mmsim run ... | head): not an error of the run.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130


def _failure(report: dict) -> str:
    """Why a run failed, in a few words."""
    c = report.get("check") or {}
    why = []
    if c.get("expect_failures"):
        why.append(f"{c['expect_failures']} expect failures")
    if c.get("mismatches"):
        why.append(f"{c['mismatches']} mismatches with the reference model")
    kinds = sorted({e.get("kind") for e in report.get("events", [])} & {"invariant"})
    if kinds:
        why.append("kernel invariant violated")
    return ", ".join(why) or "see the events above"


if __name__ == "__main__":
    sys.exit(main())
