"""Kernel knobs: their Linux names, defaults, accepted values and meaning, from the engine.

```python
>>> k = {x["name"]: x for x in knobs()}
>>> k["transparent_hugepage/enabled"]["values"]
'always|madvise|never'

```
"""

from __future__ import annotations

import json
from typing import Any

from mmsim import _mmsim

__all__ = ["format_knobs", "knobs"]


def knobs() -> list[dict[str, Any]]:
    """Every knob as ``{"name", "default", "values", "help"}``, in the engine's order."""
    return json.loads(_mmsim.knobs())


def format_knobs(items: list[dict[str, Any]]) -> str:
    """A table of knobs: name, default, accepted values and meaning, one knob a line."""
    header = ("KNOB", "DEFAULT", "VALUES", "MEANING")
    rows = [(k["name"], str(k["default"]), k["values"], k["help"]) for k in items]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    lines = []
    for r in [header, *rows]:
        cells = [c.ljust(w) for c, w in zip(r[:3], widths, strict=True)]
        lines.append("  ".join([*cells, r[3]]).rstrip())
    return "\n".join(lines)
