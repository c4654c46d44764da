"""Simulation configs in Python: a workload's program built op by op, and the machine.

Everything here builds the workload format the README documents (and the engine validates):
``Workload.to_dict()`` is exactly what a ``.json`` workload file holds, and
``Workload.from_dict(d).to_dict() == d`` for every workload.

```python
>>> import mmsim
>>> w = mmsim.Workload("hzp-rss", machine=mmsim.Machine(memory="16G"),
...                    knobs={"transparent_hugepage/enabled": "always"})
>>> p = w.mmap("p", "200M", align="2M")
>>> w.read(p, stride=4096, expect=0)
>>> w.snapshot("after-read")
>>> w.to_dict()["program"][1]
{'op': 'read', 'region': 'p', 'stride': 4096, 'expect': 0}
>>> child = mmsim.Program()
>>> child.write(p, value=7)
>>> w.fork(2, child)
>>> w.wait()
>>> len(w.to_dict()["program"])
5

```
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mmsim._mmsim import MmsimError
from mmsim.nesting import MAX_NESTING, check_data, join_path

__all__ = ["Machine", "Program", "Region", "Workload"]

Size = int | str


class Region(str):
    """The name of a mapped region, as ``mmap`` returns it (a ``str``: either may be passed)."""


def _opt(**fields: Any) -> dict[str, Any]:
    """The op's fields that were given (``None`` means: leave it to the format's default)."""
    return {k: v for k, v in fields.items() if v is not None}


class Program:
    """A list of ops, built by calling one method per op (``mmap``, ``read``, ``fork``, ...).

    Each method appends the op as the workload format writes it and returns ``None``, except
    ``mmap``, which returns the :class:`Region` to pass to later ops. Nested programs (a
    ``loop`` body, a ``fork`` or ``thread`` child) are :class:`Program` objects, lists of op
    dicts, or functions that fill a fresh :class:`Program`.
    """

    def __init__(self, ops: list[Mapping[str, Any]] | None = None) -> None:
        self.ops: list[dict[str, Any]] = []
        for op in ops or []:
            self.append(op)

    def append(self, op: Mapping[str, Any]) -> None:
        """Add one op given as a dict (nested programs are kept as :class:`Program`)."""
        if not isinstance(op, Mapping) or "op" not in op:
            raise MmsimError(f'an op must be a mapping with an "op" field, not {op!r}')
        err = check_data(op, ops=True)  # before the nested programs below are built
        if err:
            raise MmsimError(f"op {err}")
        d = dict(op)
        for key in ("body", "program"):
            if key in d and isinstance(d[key], list):
                d[key] = Program(d[key])
        self.ops.append(d)

    def to_list(self, name: str = "") -> list[dict[str, Any]]:
        """The ops as the workload format writes them (nested programs at most
        :data:`~mmsim.nesting.MAX_NESTING` levels deep; ``name`` begins the path an error names)."""
        out: list[dict[str, Any]] = []
        # Programs still to copy (no recursion: a program may even hold itself): their ops
        # left, the list they go to, how many programs enclose them, the path of that list.
        todo: list[tuple[Any, list[dict[str, Any]], int, list[str]]] = [(iter(self.ops), out, 0, [name])]
        while todo:
            ops, dest, level, path = todo[-1]
            op = next(ops, None)
            if op is None:
                todo.pop()
                continue
            here = [*path[:-1], f"{path[-1]}[{len(dest)}]"]
            d: dict[str, Any] = {}
            for k, v in op.items():
                if not isinstance(v, Program):
                    d[k] = copy.deepcopy(v)
                elif level >= MAX_NESTING:
                    raise MmsimError(
                        f"{join_path(here)}: nesting deeper than {MAX_NESTING} levels (loop, fork, thread)"
                    )
                else:
                    d[k] = []
                    todo.append((iter(v.ops), d[k], level + 1, [*here, f".{k}"]))
            dest.append(d)
        return out

    def __len__(self) -> int:
        return len(self.ops)

    def __repr__(self) -> str:
        return f"Program({self.to_list()!r})"

    # ---- ops ----------------------------------------------------------------------------

    def mmap(
        self,
        name: str,
        size: Size,
        *,
        align: Size | None = None,
        prot: str | None = None,
        flags: list[str] | None = None,
        addr: Size | None = None,
        fixed: bool | None = None,
        shared: bool = False,
        hugetlb: bool = False,
    ) -> Region:
        """Map an anonymous region (private unless ``shared`` or ``flags`` say otherwise;
        ``hugetlb``: MAP_HUGETLB, from the hugetlb pool)."""
        if (shared or hugetlb) and flags is None:
            flags = ["shared" if shared else "private", "anonymous", *(["hugetlb"] if hugetlb else [])]
        self.append(
            {
                "op": "mmap",
                "name": name,
                "size": size,
                **_opt(align=align, prot=prot, flags=flags, addr=addr, fixed=fixed),
            }
        )
        return Region(name)

    def munmap(self, region: str, *, offset: Size | None = None, length: Size | None = None) -> None:
        self.append({"op": "munmap", "region": str(region), **_opt(offset=offset, length=length)})

    def mremap(
        self,
        region: str,
        size: Size,
        *,
        addr: Size | None = None,
        offset: Size | None = None,
        length: Size | None = None,
        maymove: bool = True,
        dontunmap: bool = False,
        name: str | None = None,
    ) -> Region | None:
        """mremap(2) of the region's range (the whole region by default) to ``size`` bytes:
        MREMAP_MAYMOVE unless ``maymove`` is false, MREMAP_FIXED to ``addr``, MREMAP_DONTUNMAP
        with ``dontunmap``; ``name`` names the range at its new place."""
        self.append(
            {
                "op": "mremap",
                "region": str(region),
                "size": size,
                **_opt(
                    offset=offset,
                    length=length,
                    addr=addr,
                    fixed=addr is not None or None,
                    maymove=False if not maymove else None,
                    dontunmap=dontunmap or None,
                    name=name,
                ),
            }
        )
        return Region(name) if name is not None else None

    def mlock(
        self, region: str, *, offset: Size | None = None, length: Size | None = None, onfault: bool = False
    ) -> None:
        """mlock(2) of the range, or with ``onfault`` mlock2(MLOCK_ONFAULT) (no populate)."""
        self.append(
            {"op": "mlock", "region": str(region), **_opt(offset=offset, length=length, onfault=onfault or None)}
        )

    def mlockall(self, *flags: str) -> None:
        """mlockall(2) with ``"current"``, ``"future"`` and/or ``"onfault"``."""
        self.append({"op": "mlockall", "flags": list(flags)})

    def munlockall(self) -> None:
        self.append({"op": "munlockall"})

    def munlock(self, region: str, *, offset: Size | None = None, length: Size | None = None) -> None:
        self.append({"op": "munlock", "region": str(region), **_opt(offset=offset, length=length)})

    def mprotect(self, region: str, prot: str, *, offset: Size | None = None, length: Size | None = None) -> None:
        self.append({"op": "mprotect", "region": str(region), **_opt(offset=offset, length=length), "prot": prot})

    def madvise(self, region: str, advice: str, *, offset: Size | None = None, length: Size | None = None) -> None:
        self.append({"op": "madvise", "region": str(region), **_opt(offset=offset, length=length), "advice": advice})

    def read(
        self,
        region: str,
        *,
        offset: Size | None = None,
        length: Size | None = None,
        stride: Size | None = None,
        expect: int | None = None,
        pattern: str | None = None,
        count: int | None = None,
        seed: int | None = None,
        block: Size | None = None,
        block_stride: Size | None = None,
    ) -> None:
        """Read one byte every ``stride`` bytes (``expect``: each must equal it); ``pattern="random"``
        reads ``count`` random ``stride``-sized slots (from ``seed``)."""
        fields = _opt(offset=offset, length=length, stride=stride, expect=expect, pattern=pattern, count=count)
        fields.update(_opt(seed=seed, block=block, block_stride=block_stride))
        self.append({"op": "read", "region": str(region), **fields})

    def write(
        self,
        region: str,
        *,
        offset: Size | None = None,
        length: Size | None = None,
        stride: Size | None = None,
        value: int | None = None,
        pattern: str | None = None,
        count: int | None = None,
        seed: int | None = None,
        block: Size | None = None,
        block_stride: Size | None = None,
    ) -> None:
        """Write the byte ``value`` every ``stride`` bytes (``pattern``, ``count``, ``seed``, ``block``
        as :meth:`read`)."""
        fields = _opt(offset=offset, length=length, stride=stride, value=value, pattern=pattern, count=count)
        fields.update(_opt(seed=seed, block=block, block_stride=block_stride))
        self.append({"op": "write", "region": str(region), **fields})

    def fetch(
        self, region: str, *, offset: Size | None = None, length: Size | None = None, stride: Size | None = None
    ) -> None:
        """Run the code in an executable region: an instruction fetch every ``stride`` bytes."""
        self.append({"op": "fetch", "region": str(region), **_opt(offset=offset, length=length, stride=stride)})

    def compare(
        self,
        a: str | tuple[str, Size],
        b: str | tuple[str, Size],
        length: Size,
        *,
        expect: bool | None = None,
        stride: Size | None = None,
    ) -> None:
        """memcmp of two ranges, each a region or ``(region, offset)``."""
        self.append(
            {"op": "compare", "a": _loc(a), "b": _loc(b), "length": length, **_opt(expect=expect, stride=stride)}
        )

    def atomic(
        self, region: str, *, offset: Size | None = None, count: int | None = None, hold: int | None = None
    ) -> None:
        self.append({"op": "atomic", "region": str(region), **_opt(offset=offset, count=count, hold=hold)})

    def loop(self, count: int, body: ProgramLike) -> None:
        """Run ``body`` ``count`` times."""
        self.append({"op": "loop", "count": count, "body": _program(body)})

    def fork(
        self, count: int = 1, program: ProgramLike | None = None, *, cpu: int | None = None, cgroup: str | None = None
    ) -> None:
        """Fork ``count`` children that run ``program`` (then exit); ``cgroup`` moves them to
        another of the workload's memory cgroups."""
        self.append(
            {"op": "fork", "count": count, **_opt(cpu=cpu), "program": _program(program or []), **_opt(cgroup=cgroup)}
        )

    def thread(self, count: int = 1, program: ProgramLike | None = None, *, cpu: int | None = None) -> None:
        """Start ``count`` threads (clone with CLONE_VM) that run ``program``."""
        self.append({"op": "thread", "count": count, **_opt(cpu=cpu), "program": _program(program or [])})

    def wait(self) -> None:
        self.append({"op": "wait"})

    def sleep(self, ms: float | None = None, *, until_ms: float | None = None) -> None:
        """Sleep ``ms`` milliseconds of simulated time, or until ``until_ms`` since the start."""
        self.append({"op": "sleep", **_opt(ms=ms, until_ms=until_ms)})

    def exit(self) -> None:
        self.append({"op": "exit"})

    def snapshot(self, label: str) -> None:
        """Record every counter and process status now, under ``label``."""
        self.append({"op": "snapshot", "label": label})

    def set(self, knob: str, value: Any) -> None:
        """Change a knob mid-run (as writing to sysfs would)."""
        self.append({"op": "set", "knob": knob, "value": value})

    def memory_reclaim(self, bytes: Size, *, cgroup: str | None = None, swappiness: int | None = None) -> None:
        """Proactive reclaim: write ``bytes`` to a cgroup's memory.reclaim (the process's own
        cgroup unless ``cgroup`` names one), optionally with ``swappiness=N``."""
        self.append({"op": "memory_reclaim", **_opt(cgroup=cgroup), "bytes": bytes, **_opt(swappiness=swappiness)})

    def cgroup_write(self, cgroup: str, file: str, value: Any) -> None:
        """Write one of a cgroup's files mid-run (``memory.max``, ``memory.high``, ...,
        ``cgroup.procs`` with 0 to move this process there)."""
        self.append({"op": "cgroup_write", "cgroup": cgroup, "file": file, "value": value})


ProgramLike = Program | list[Mapping[str, Any]] | Callable[[Program], Any]


def _program(p: ProgramLike) -> Program:
    if isinstance(p, Program):
        return p
    if callable(p):
        prog = Program()
        p(prog)
        return prog
    return Program(list(p))


def _loc(x: str | tuple[str, Size]) -> dict[str, Any]:
    if isinstance(x, tuple):
        region, offset = x
        return {"region": str(region), "offset": offset}
    return {"region": str(x)}


@dataclass
class Machine:
    """The simulated machine: a hardware profile (``mmsim profiles``), memory, CPUs, and
    overrides of the profile's parameters by path (``{"tlb.dtlb_4k.entries": 32}``, what
    ``--set hw.PATH=VALUE`` does). Fields left ``None`` take the workload format's defaults
    (``default``, 16G, 1 CPU).

    ``swap`` lists the swap devices enabled at boot, each ``{"size": "1G", "kind": "file",
    "priority": -2}`` (kind ``file`` or ``partition``; priority optional).

    ```python
    >>> Machine(profile="westmere-ex", cpus=4).to_dict()
    {'profile': 'westmere-ex', 'cpus': 4}
    >>> Machine(overrides={"cache.llc.size": "8M"}).sets()
    [('hw.cache.llc.size', '8M')]
    >>> Machine(memory="1G", swap=[{"size": "2G"}]).to_dict()
    {'memory': '1G', 'swap': [{'size': '2G'}]}

    ```
    """

    profile: str | None = None
    memory: Size | None = None
    cpus: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    swap: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The workload format's ``machine`` object (overrides are not part of it)."""
        swap = copy.deepcopy(self.swap) if self.swap is not None else None
        return _opt(profile=self.profile, memory=self.memory, cpus=self.cpus, swap=swap)

    def sets(self) -> list[tuple[str, str]]:
        """The overrides as ``--set`` pairs."""
        return [(f"hw.{k.removeprefix('hw.')}", _text(v)) for k, v in self.overrides.items()]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Machine:
        swap = d.get("swap")
        return cls(
            profile=d.get("profile"),
            memory=d.get("memory"),
            cpus=d.get("cpus"),
            swap=copy.deepcopy(swap) if swap is not None else None,
        )


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


class Workload(Program):
    """A whole workload: the first process's program, its name, machine, knobs and CPU, and
    its memory cgroups (``cgroups``: path -> files, cgroup v2's names) with the one the first
    process runs in (``cgroup``).

    ```python
    >>> w = Workload("box", machine=Machine(swap=[{"size": "1G"}]),
    ...              cgroups={"box": {"memory.max": "128M"}}, cgroup="box")
    >>> p = w.mmap("p", "256M")
    >>> w.write(p, value=7)
    >>> w.memory_reclaim("64M")
    >>> d = w.to_dict(); d["cgroups"], d["cgroup"], d["program"][-1]
    ({'box': {'memory.max': '128M'}}, 'box', {'op': 'memory_reclaim', 'bytes': '64M'})

    ```

    ``Workload.from_file`` reads ``.json``/``.yaml``/``.yml``; ``to_dict`` gives back
    exactly the dict the file held (``from_dict(d).to_dict() == d``).
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        machine: Machine | Mapping[str, Any] | None = None,
        knobs: Mapping[str, Any] | None = None,
        cpu: int | None = None,
        program: ProgramLike | None = None,
        cgroups: Mapping[str, Mapping[str, Any]] | None = None,
        cgroup: str | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self.cgroups: dict[str, dict[str, Any]] | None = (
            {k: dict(v) for k, v in cgroups.items()} if cgroups is not None else None
        )
        self.cgroup = cgroup
        self.machine = machine if isinstance(machine, Machine) or machine is None else Machine.from_dict(machine)
        self.knobs: dict[str, Any] | None = dict(knobs) if knobs is not None else None
        self.cpu = cpu
        self._extra: dict[str, Any] = {}
        if program is not None:
            self.ops = _program(program).ops

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Workload:
        """A workload from its dict (as a workload file holds it)."""
        if not isinstance(d, Mapping):
            raise MmsimError(f"a workload must be a mapping, not {type(d).__name__}")
        known = {"name", "machine", "knobs", "cpu", "program"}
        w = cls(
            d.get("name"),
            machine=Machine.from_dict(d["machine"]) if isinstance(d.get("machine"), Mapping) else None,
            knobs=d.get("knobs"),
            cpu=d.get("cpu"),
        )
        # cgroups and cgroup stay as the dict held them (the engine checks them) unless
        # they are what the constructor takes.
        cgroups = d.get("cgroups")
        if isinstance(cgroups, Mapping) and all(isinstance(v, Mapping) for v in cgroups.values()):
            w.cgroups = copy.deepcopy({k: dict(v) for k, v in cgroups.items()})
            known = known | {"cgroups"}
        if isinstance(d.get("cgroup"), str):
            w.cgroup = d["cgroup"]
            known = known | {"cgroup"}
        if "machine" in d and not isinstance(d["machine"], Mapping):
            w._extra["machine"] = d["machine"]  # the engine reports the error
        w._order = list(d.keys())
        err = check_data(d)  # before anything below recurses into it
        if err:
            raise MmsimError(f"workload: {err}")
        w._extra.update({k: copy.deepcopy(v) for k, v in d.items() if k not in known})
        for op in d.get("program") or []:
            w.append(op)
        if "program" in d and not isinstance(d["program"], list):
            w._extra["program"] = d["program"]
        return w

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Workload:
        """A workload from a ``.json``, ``.yaml`` or ``.yml`` file."""
        from mmsim.workload import load_workload

        return cls.from_dict(load_workload(path))

    def to_dict(self) -> dict[str, Any]:
        """The workload as the format writes it."""
        d: dict[str, Any] = {}
        if self.name is not None:
            d["name"] = self.name
        if self.machine is not None and "machine" not in self._extra:
            d["machine"] = self.machine.to_dict()
        if self.knobs is not None:
            d["knobs"] = dict(self.knobs)
        if self.cpu is not None:
            d["cpu"] = self.cpu
        if self.cgroups is not None:
            d["cgroups"] = copy.deepcopy(self.cgroups)
        if self.cgroup is not None:
            d["cgroup"] = self.cgroup
        d["program"] = self.to_list("program")
        d.update(copy.deepcopy(self._extra))
        order = getattr(self, "_order", None)
        if order:
            d = {k: d[k] for k in order if k in d} | {k: v for k, v in d.items() if k not in order}
        return d

    def __repr__(self) -> str:
        return f"Workload({self.to_dict()!r})"
