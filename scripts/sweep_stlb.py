"""The Python API page's sweep: hzp vs vhzp as the second-level TLB grows.

.venv/bin/python scripts/sweep_stlb.py                               # prints the table
.venv/bin/python scripts/sweep_stlb.py --plot docs/sweep-stlb.png    # and draws the docs' figure
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

import mmsim
from mmsim.sweep import load_spec

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plot", metavar="PNG", help="also draw cycles per read against the STLB's entries")
    args = ap.parse_args()
    spec = load_spec("experiments/sweeps/stlb.yaml")
    df = mmsim.sweep(spec["workload"], spec["grid"])
    df["cycles per read"] = df["perf.cycles"] / (20 * 4096)
    print(
        df[
            ["transparent_hugepage/huge_zero_page", "hw.tlb.stlb.entries", "perf.dTLB-load-misses", "cycles per read"]
        ].to_string(index=False)
    )
    if not args.plot:
        raise SystemExit(0)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for kind, g in df.groupby("transparent_hugepage/huge_zero_page"):
        ax.plot(g["hw.tlb.stlb.entries"], g["cycles per read"], marker="o", label=kind)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("second-level TLB entries (4-way)")
    ax.set_ylabel("cycles per read (whole run / reads)")
    ax.set_title("One read per 4 KiB over 16 MiB of zero pages, Westmere-EX")
    ax.legend(title="huge_zero_page")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=110)
