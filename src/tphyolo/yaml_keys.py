"""Yaml mappings with unique keys: a key written twice in one mapping is an error, not "the last one wins".

`UniqueKeys` is the check, a mixin for any `yaml.SafeLoader` subclass (put it first among the bases); the
package's one yaml loader (`tphyolo.yaml_files`) uses it. Keys merged in with `<<: *anchor` may be overridden
by the mapping's own keys, as YAML intends; only the keys written in the mapping itself must differ.
"""

from __future__ import annotations

from typing import Any

import yaml

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
