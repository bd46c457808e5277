"""YAML in and out, strictly: a config is data, never a program.

Reading uses the safe loader (no Python objects) and refuses what YAML allows but a config must
not use: duplicate keys (the second silently wins) and anchors/aliases (an alias bomb expands to
gigabytes when the config is frozen). Non-UTF-8 text is refused. Every problem is one line
naming the file, the problem and where. Writing never emits aliases, so what pacplan writes it
can read back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pacplan.errors import PacplanError


class _RefusedYAML(yaml.MarkedYAMLError):
    """Valid YAML that a config may not use (duplicate keys, anchors and aliases)."""


class _ConfigLoader(yaml.SafeLoader):
    """The safe loader (no Python objects), refusing duplicate keys and anchors/aliases."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _RefusedYAML(problem="YAML anchors and aliases (&name, *name) are refused in a "
                               "config; write each value out", problem_mark=event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the safe loader refuses it itself
                continue
            if duplicate:
                raise _RefusedYAML(problem=f"duplicate key {key!r}; each key may appear once "
                                   "in a mapping", problem_mark=key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _yaml_error(path: Path, exc: yaml.YAMLError) -> str:
    """One line: the file, what is wrong and where."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})"
        what = f"{exc.context + ': ' if exc.context else ''}{exc.problem}"
        prefix = "" if isinstance(exc, _RefusedYAML) else "not valid YAML: "
        return f"{path}: {prefix}{what}{where}".replace("\n", " ")
    return f"{path}: not valid YAML: {exc}".replace("\n", " ")


def read_yaml(path: Path) -> Any:
    """Parse a UTF-8 YAML file with `_ConfigLoader`, every problem one `PacplanError` line."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start : exc.end]
        raise PacplanError(f"{path}: not UTF-8 text (byte 0x{bad.hex()} at offset {exc.start}); "
                           "save the config as UTF-8") from None
    try:  # the reader refuses unprintable characters already when it is made
        loader = _ConfigLoader(text)
    except yaml.YAMLError as exc:
        raise PacplanError(_yaml_error(path, exc)) from None
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise PacplanError(_yaml_error(path, exc)) from None
    except RecursionError:
        raise PacplanError(f"{path}: not valid YAML: nested too deeply for a config") from None
    finally:
        loader.dispose()


class _NoAliasDumper(yaml.SafeDumper):
    """Writes a value shared by two fields twice: `read_yaml` refuses anchors and aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def yaml_text(data: Any) -> str:
    """YAML text of plain data, keys in their order, with no anchors or aliases."""
    return yaml.dump(data, Dumper=_NoAliasDumper, sort_keys=False, allow_unicode=True)
