"""No input crashes the Python process: random values in the workload format's shapes are
either run or refused with MmsimError naming what is wrong (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mmsim
from mmsim import MmsimError

KEYS = [
    "op",
    "name",
    "size",
    "align",
    "prot",
    "flags",
    "region",
    "offset",
    "length",
    "stride",
    "expect",
    "value",
    "count",
    "body",
    "program",
    "label",
    "knob",
    "a",
    "b",
    "cpu",
    "bogus",
]
WORDS = [
    "p",
    "4K",
    "2M",
    "1G",
    "64T",
    "0x1000",
    "-1",
    "",
    "rw",
    "rx",
    "shared",
    "private",
    "anonymous",
    "mmap",
    "read",
    "write",
    "fork",
    "thread",
    "loop",
    "fetch",
    "compare",
    "munmap",
    "snapshot",
    "hugepage",
]
leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True), st.sampled_from(WORDS)
)
values = st.recursive(
    leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)),
    max_leaves=20,
)
ops = st.dictionaries(st.sampled_from(KEYS), values, max_size=6).map(
    lambda d: {"op": d.get("op", "read"), **d} if not isinstance(d.get("op"), str) else d
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    program=st.lists(ops, max_size=6),
    knobs=st.dictionaries(
        st.sampled_from(["transparent_hugepage/enabled", "fail_page_alloc/every", "nope"]), values, max_size=2
    ),
)
def test_any_workload_runs_or_is_refused_cleanly(program, knobs):
    w = {"machine": {"memory": "64M"}, "knobs": knobs, "program": program}
    try:
        r = mmsim.run(w, sets={"engine.max_ops": 20000})
    except MmsimError as e:
        msg = str(e)
        assert msg.strip(), "an error says what is wrong"
        return
    assert isinstance(r.to_dict(), dict)
