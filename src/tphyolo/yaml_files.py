"""Reading yaml safely: the one loader for every yaml the package reads (data, hyp, model, classifier yamls).

Only plain data is built (`yaml.SafeLoader`: no tags that run code), and three rules keep a small file from
exhausting memory or time, or from hiding a mistake:

- `MAX_YAML_BYTES`: a yaml file or text larger than this is refused before parsing;
- a mapping may not give a key twice (`UniqueKeys`): "the last one wins" hides mistakes;
- `MAX_YAML_NODES`: the document, with every alias expanded, may hold at most this many nodes. Aliases let a
  few hundred bytes describe billions of nodes ("billion laughs"); the count is made while parsing, without
  expanding anything, and a document over the limit is refused at once. A recursive alias is refused too.

Errors are ValueErrors naming the file (or the text's origin) and the problem.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tphyolo.errors import InputError

_MERGE_TAG = "tag:yaml.org,2002:merge"


class UniqueKeys:
    """Loader mixin: `construct_mapping` raises `yaml.constructor.ConstructorError` (a `yaml.YAMLError`), in
    one line naming the key and both of its lines, when a mapping gives a key twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
                try:
                    seen = key in first_line
                except TypeError:  # an unhashable key: the base constructor reports it
                    continue
                if seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} is given twice (lines {first_line[key]} and {line})"
                    )
                first_line[key] = line
        return super().construct_mapping(node, deep=deep)


MAX_YAML_BYTES = 1 << 20  # 1 MiB
MAX_YAML_NODES = 1_000_000


class _BoundedLoader(UniqueKeys, yaml.SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping (`UniqueKeys`), counts each node's size with
    aliases expanded (memoised per node, so counting costs no more than parsing) and stops past
    MAX_YAML_NODES."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            target = self.anchors.get(self.peek_event().anchor)
            if target is not None and id(target) not in self._sizes:
                raise yaml.YAMLError("a recursive alias (a node that contains itself)")
            return super().compose_node(parent, index)  # an alias to a counted node: counted where it is used
        node = super().compose_node(parent, index)
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [item for pair in node.value for item in pair]
        else:
            children = []
        size = 1
        for child in children:
            size += self._sizes[id(child)]
        if size > MAX_YAML_NODES:
            raise yaml.YAMLError(f"expands to over {MAX_YAML_NODES:,} nodes (aliases expanded); refused")
        self._sizes[id(node)] = size
        return node


def load_yaml_text(text: str, origin: str) -> Any:
    """Parse yaml `text` (from `origin`, named in errors) into plain data within the limits above."""
    if len(text) > MAX_YAML_BYTES:
        raise InputError(f"{origin}: yaml of {len(text):,} characters, above the limit of {MAX_YAML_BYTES:,}")
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as error:
        raise InputError(f"{origin}: invalid yaml ({' '.join(str(error).split())})") from None
    except RecursionError:
        raise InputError(f"{origin}: yaml nested too deeply") from None
    finally:
        loader.dispose()


def load_yaml_file(path: str | Path) -> Any:
    """Read and parse the yaml file `path` (UTF-8) within the limits above. Raises OSError when it cannot be
    read, ValueError naming it when it is too large, not UTF-8 or not valid yaml."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_YAML_BYTES:
        raise InputError(f"{path}: yaml file of {size:,} bytes, above the limit of {MAX_YAML_BYTES:,}")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text (byte {error.start})") from None
    return load_yaml_text(text, str(path))
