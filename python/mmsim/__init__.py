"""mmsim: a Linux-faithful memory-management simulator.

Run a workload and read its counters in Linux's own vocabulary:

```python
>>> import mmsim
>>> report = mmsim.run_workload({
...     "knobs": {"transparent_hugepage/enabled": "never"},
...     "program": [
...         {"op": "mmap", "name": "p", "size": "4M", "align": "2M"},
...         {"op": "read", "region": "p"},
...     ],
... })
>>> report["vmstat"]["pgfault"]
1024

```
"""

from mmsim._mmsim import MmsimError
from mmsim._mmsim import version as _engine_version
from mmsim.config import Machine, Program, Region, Workload
from mmsim.knobs import knobs
from mmsim.result import Result, Snapshot
from mmsim.sweep import sweep
from mmsim.workload import load_workload, run, run_workload

__version__: str = _engine_version()

__all__ = [
    "Machine",
    "MmsimError",
    "Program",
    "Region",
    "Result",
    "Snapshot",
    "Workload",
    "__version__",
    "knobs",
    "load_workload",
    "run",
    "run_workload",
    "sweep",
]
