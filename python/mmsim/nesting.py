"""The nesting limit of workloads, checked without recursion before anything recursive runs.

A workload nests ``loop``, ``fork`` and ``thread`` ops at most :data:`MAX_NESTING` levels deep,
and its lists and mappings at most :data:`MAX_DEPTH` levels (what the deepest ops take). The
engine refuses deeper ones too (``crates/mmsim-core/src/workload/spec.rs``, same limits, same
messages), but Python's JSON and YAML parsers, ``json.dumps`` and ``copy.deepcopy`` recurse and
would end in a ``RecursionError`` first. Each check here walks its input with an explicit stack
and returns the message naming the field, or ``None``:

```python
>>> check_data({"program": [{"op": "loop", "count": 1, "body": [{"op": "wait"}]}]}) is None
True
>>> check_json_text('{"name": ' + "[" * 200 + "]" * 200 + ', "program": []}')
'name[0]([0] x134): nested deeper than 136 levels of lists and mappings'

```
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

__all__ = ["MAX_DEPTH", "MAX_NESTING", "check_data", "check_json_text", "check_yaml_text", "join_path"]

#: Most levels of ``loop``, ``fork`` and ``thread`` ops one inside another (the engine's).
MAX_NESTING = 64
#: Most levels of lists and mappings one inside another: an op and its list per level of
#: ops, and room for the fields of the innermost (the engine's MAX_JSON_DEPTH).
MAX_DEPTH = 2 * MAX_NESTING + 8

#: Fields whose list holds ops: a workload's ``program``; an op's ``body`` or ``program``.
OP_LISTS = ("body", "program")

_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[][{}:,]')


class _Open:
    """An open list or mapping: the index of the current item or the current key, and
    whether it is a list of ops."""

    __slots__ = ("index", "is_list", "key", "ops")

    def __init__(self, is_list: bool, ops: bool) -> None:
        self.is_list = is_list
        self.ops = ops
        self.index = 0
        self.key: str | None = None


def _path(stack: list[_Open]) -> str:
    """The field a stack of open containers leads to (``program[0].body[2]``); a run of four
    or more identical steps is written once with its count (``program[1](.body[0] x64)``)."""
    steps: list[str] = []
    after_key = False
    for o in stack:
        if o.is_list and after_key:
            steps[-1] += f"[{o.index}]"
        else:
            steps.append(f"[{o.index}]" if o.is_list else ("." if steps else "") + str(o.key or "?"))
        after_key = not o.is_list
    return join_path(steps)


def join_path(steps: list[str]) -> str:
    """A field's path from its steps (``["program[1]", ".body[0]"]``), a run of four or more
    identical steps written once with its count, as the engine writes it.

    ```python
    >>> join_path(["program[1]"] + [".body[0]"] * 64)
    'program[1](.body[0] x64)'

    ```
    """
    out: list[str] = []
    i = 0
    while i < len(steps):
        j = i
        while j < len(steps) and steps[j] == steps[i]:
            j += 1
        out.append(f"({steps[i]} x{j - i})" if j - i >= 4 else "".join(steps[i:j]))
        i = j
    return "".join(out)


def _opened(stack: list[_Open], is_list: bool) -> str | None:
    """Push a list or mapping opened inside ``stack``; the error when it is one too deep."""
    ops = False
    if is_list and stack and not stack[-1].is_list:
        key = stack[-1].key
        n = len(stack)
        ops = (key == "program" and n == 1) or (key in OP_LISTS and n >= 2 and stack[-2].ops)
    if ops and sum(o.ops for o in stack) > MAX_NESTING:
        return f"{_path(stack[:-1])}: nesting deeper than {MAX_NESTING} levels (loop, fork, thread)"
    if len(stack) >= MAX_DEPTH:
        path = _path(stack)
        return f"{path + ': ' if path else ''}nested deeper than {MAX_DEPTH} levels of lists and mappings"
    stack.append(_Open(is_list, ops))
    return None


def check_json_text(text: str) -> str | None:
    """The nesting error of JSON text, before ``json.loads`` recurses into it (text that is
    not valid JSON passes: the parser names its error)."""
    stack: list[_Open] = []
    last = ""
    for m in _JSON_TOKENS.finditer(text):
        tok = m.group()
        if tok[0] == '"':
            last = tok
        elif tok in "[{":
            err = _opened(stack, tok == "[")
            if err:
                return err
        elif tok in "]}":
            if not stack:
                return None
            stack.pop()
        elif not stack:
            continue
        elif tok == ":" and not stack[-1].is_list:
            stack[-1].key = _json_key(last)
        elif tok == ",":
            if stack[-1].is_list:
                stack[-1].index += 1
            else:
                stack[-1].key = None
    return None


def _json_key(token: str) -> str:
    import json

    try:
        return str(json.loads(token))
    except ValueError:
        return token.strip('"')


def check_yaml_text(text: str) -> str | None:
    """The nesting error of YAML text, from the parser's events (PyYAML's parser is
    iterative; its composer and constructor recurse). Text that is not valid YAML passes."""
    stack: list[_Open] = []
    # In a mapping, whether the next node is a key; True after each value.
    want_key: list[bool] = []
    try:
        for ev in _yaml_events(text):
            if isinstance(ev, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                err = _opened(stack, isinstance(ev, yaml.SequenceStartEvent))
                if err:
                    return err
                want_key.append(isinstance(ev, yaml.MappingStartEvent))
            elif isinstance(ev, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                stack.pop()
                want_key.pop()
                _item_done(stack, want_key)
            elif isinstance(ev, yaml.ScalarEvent | yaml.AliasEvent):
                if stack and not stack[-1].is_list and want_key[-1]:
                    stack[-1].key = getattr(ev, "value", None)
                    want_key[-1] = False
                else:
                    _item_done(stack, want_key)
    except yaml.YAMLError:
        return None
    return None


def _yaml_events(text: str) -> Iterator[Any]:
    return yaml.parse(text, Loader=yaml.SafeLoader)


def _item_done(stack: list[_Open], want_key: list[bool]) -> None:
    """A node ended: the next item of its list, or the next key of its mapping."""
    if not stack:
        return
    if stack[-1].is_list:
        stack[-1].index += 1
    else:
        want_key[-1] = True


def check_data(data: Any, ops: bool = False) -> str | None:
    """The nesting error of a workload as Python values (dicts and lists, walked with an
    explicit stack: a list that holds itself ends at the depth limit too). With ``ops``,
    ``data`` is one op (as a :class:`mmsim.Program` takes it) and levels count from it."""
    stack: list[_Open] = []
    if ops:
        stack.append(_Open(True, True))
    # Each entry: the container, its items still to visit, and the stack depth it opens at.
    todo: list[tuple[int, Iterator[tuple[Any, Any]]]] = []
    err = _enter(stack, todo, data)
    while err is None and todo:
        depth, items = todo[-1]
        del stack[depth + 1 :]
        item = next(items, None)
        if item is None:
            todo.pop()
            continue
        key, value = item
        top = stack[depth]
        if top.is_list:
            top.index = key
        else:
            top.key = str(key)
        err = _enter(stack, todo, value)
    return err


def _enter(stack: list[_Open], todo: list[tuple[int, Iterator[tuple[Any, Any]]]], value: Any) -> str | None:
    if isinstance(value, Mapping):
        err = _opened(stack, False)
        if err is None:
            todo.append((len(stack) - 1, iter(list(value.items()))))
        return err
    if isinstance(value, list | tuple):
        err = _opened(stack, True)
        if err is None:
            todo.append((len(stack) - 1, iter(list(enumerate(value)))))
        return err
    return None
