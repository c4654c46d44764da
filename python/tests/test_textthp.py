"""Seed 004's experiment (`mmsim reproduce text-thp`): its program derived from the seed's
input figures, and the exact counts of one pass under each configuration."""

from __future__ import annotations

import pytest

from mmsim.experiments import EXPERIMENTS
from mmsim.experiments import textthp as T
from mmsim.workload import run_workload


def test_the_program_comes_from_the_input_figures():
    assert T.PASSES == 9_921 and T.TEXT_LINES == 7_549_032 and T.RANGES == 231
    assert pytest.approx(12.554, abs=1e-3) == T.INSTRUCTION_BYTES
    assert T.DATA_LINES == 660
    # The instructions the program executes are the published count (an input).
    per_pass = T.TEXT_LINES * T.FETCH_INSTRUCTIONS_PER_LINE + T.LOADS_PER_PASS
    assert per_pass * T.PASSES == pytest.approx(T.INSTRUCTIONS, rel=1e-4)
    assert EXPERIMENTS["text-thp"].seed == "004" and EXPERIMENTS["text-thp"].profile == "desktop-2018"


@pytest.mark.parametrize(
    ("config", "faults", "shmem_pmd_kb", "file_pmd_kb", "fallback"),
    [
        # 4 KiB: fault-around maps 16 pages a fault over 117,954 pages, plus the data array's.
        ("4K", 7_384, 0, 0, 0),
        # The prototype: one PMD fault per whole 2 MiB range (230), the 194-page tail by 4 KiB.
        ("2M seed", 245, 471_040, 0, 0),
        # 6.18: MADV_HUGEPAGE readahead puts PMD folios in the page cache, faults map them.
        ("2M large folios", 244, 0, 471_040, 0),
        # Every order-9 allocation fails: the prototype falls back to 4 KiB faults.
        ("seed, order-9 fails", 7_384, 0, 0, 230),
    ],
)
def test_one_pass_counts(config, faults, shmem_pmd_kb, file_pmd_kb, fallback):
    knobs, madvise = T.CONFIGS[config]
    m = T.text_metrics(run_workload(T.text_workload(knobs, madvise, passes=1), sets=T.HW_SETS))
    assert m["page-faults"] == faults
    assert (m["ShmemPmdMapped"], m["FilePmdMapped"]) == (shmem_pmd_kb, file_pmd_kb)
    assert m["thp_file_fallback"] == fallback
    assert m["instructions"] == pytest.approx(T.INSTRUCTIONS / T.PASSES, rel=1e-3)
