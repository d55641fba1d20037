"""YAML as GitHub reads it, bounded: a pull request controls the workflow files promote reads.

PyYAML composes and constructs recursively and shares an anchored node wherever an alias names it, so two
small files defeat every walker after it: 200 nested `[` is a RecursionError, and aliases 8 levels deep
(`&a [*b, *b, ...]`, about 600 bytes) are 10^8 leaves once expanded, which schema validation then walks.
The loader counts depth and expanded nodes as each node is built and refuses past a bound far beyond any
real workflow, as a YAML error with the line where the bound was crossed.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, SequenceNode

# A real workflow nests a few levels and has hundreds of nodes; a composite action no more.
MAX_DEPTH = 64
MAX_NODES = 100_000


class _BoundedLoader(yaml.SafeLoader):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        # Each node's size with its aliases expanded, computed once as it is built (a node is built once).
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(AliasEvent):
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            node = super().compose_node(parent, index)
            if id(node) not in self._sizes:  # the anchored node is still being built: it would contain itself
                raise ComposerError(None, None, "an alias refers to a node that contains it", mark)
            return node
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep", mark)
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is not None:
            self._sizes[id(node)] = self._size(node)
        return node

    def _size(self, node: Node) -> int:
        children: list[Node] = []
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            children = [part for pair in node.value for part in pair]
        size = 1
        for child in children:
            size += self._sizes[id(child)]
        if size > MAX_NODES:
            raise ComposerError(
                None, None, f"expands to more than {MAX_NODES} nodes (aliases of aliases)", node.start_mark
            )
        return size


def load(text: str) -> Any:
    """`text` as yaml.safe_load reads it; a yaml.YAMLError (with the line) past the bounds above."""
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
