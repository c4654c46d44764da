"""``mmsim record`` and ``mmsim trace``: recording real programs and reading their traces.

mmsim record [-o FILE] [--verbose] -- CMD [ARGS...]
mmsim trace info FILE [--json]
mmsim trace dump FILE [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from mmsim._mmsim import MmsimError


def add_parsers(sub: Any) -> None:
    """Add ``record`` and ``trace`` to the subcommands of ``mmsim``."""
    rec = sub.add_parser(
        "record",
        help="record a real program's memory behaviour into a trace",
        description="Run CMD under mmsim's recorder (a Valgrind tool, built on first use) and write every "
        "basic-block run, load, store and system call of it and of the processes and threads it starts "
        "to a trace (docs/trace-format.md). Exit status: the command's.",
    )
    rec.add_argument("-o", "--output", default=None, metavar="FILE", help="the trace (default: CMD.trace)")
    rec.add_argument("--verbose", action="store_true", help="let Valgrind print its banner and messages")
    rec.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]", help="the command to record")
    rec.set_defaults(func=cmd_record)

    tr = sub.add_parser("trace", help="read a trace: its totals or its records")
    tsub = tr.add_subparsers(dest="trace_command", required=True, metavar="ACTION")
    ti = tsub.add_parser(
        "info",
        help="instructions, loads, stores, footprint, system calls, tasks and duration",
        description="Print a trace's totals: instructions, loads, stores, footprint (4 KiB and 2 MiB pages "
        "touched), system calls by name, tasks and the recording's duration.",
    )
    ti.add_argument("file", metavar="FILE")
    ti.add_argument("--json", action="store_true", help="print them as JSON")
    ti.set_defaults(func=cmd_trace_info)
    td = tsub.add_parser("dump", help="print the records as text", description="Print a trace's records, one a line.")
    td.add_argument("file", metavar="FILE")
    td.add_argument("--limit", type=int, default=None, metavar="N", help="print at most N records")
    td.set_defaults(func=cmd_trace_dump)


def cmd_record(args: argparse.Namespace) -> int:
    from mmsim import trace

    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise MmsimError("record: no command given (mmsim record -o FILE -- CMD [ARGS...])")
    out = args.output or f"{os.path.basename(argv[0])}.trace"
    s = trace.record(argv, out, quiet=not args.verbose)
    if s.get("recorder_failed"):
        raise MmsimError(
            f"record: the recorder did not start (valgrind exit {s['exit_status']}); see its message above"
        )
    status = s["exit_status"]
    how = f"killed by signal {-status}" if status < 0 else f"exit {status}"
    print(
        f"mmsim: recorded {' '.join(argv)} ({how}, {s['duration_s']:.2f} s) into {out}: "
        f"{s['trace_bytes']:,} bytes, {s['raw_bytes']:,} bytes of records",
        file=sys.stderr,
    )
    return status if 0 <= status < 256 else 128 + (-status if status < 0 else 0)


def cmd_trace_info(args: argparse.Namespace) -> int:
    from mmsim import trace

    s = trace.info(args.file)
    print(json.dumps(s, indent=2) if args.json else trace.format_info(s))
    return 0


def cmd_trace_dump(args: argparse.Namespace) -> int:
    from mmsim import trace

    trace.dump(args.file, args.limit)
    return 0
