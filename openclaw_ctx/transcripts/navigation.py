"""How OpenClaw 2026.9 walks a transcript's tree: which entry is the leaf, and each entry's effective parent.

A transcript is not a plain `parentId` chain. OpenClaw's navigation (``scanSessionTranscriptTree``) reads
the records in file order and normalizes parents as it goes:

- an entry without a `parentId` field, or whose parent no earlier line holds, hangs under the current
  leaf (so one stale id no longer cuts the branch off at that point);
- ``appendMode: "side"`` entries join the tree without moving the leaf;
- ``leaf`` records (``targetId``, ``appendParentId``) move the leaf; one naming an unknown entry is
  ignored, and after a ``reset`` one pointing outside the reset's descendants keeps the current leaf;
- after a ``reset``, an entry whose parent is not a descendant of it hangs under the current leaf;
- an entry whose parent is the last opaque record (a kind OpenClaw does not index, a malformed line)
  hangs under the current leaf, so such records never become ancestors by accident.

The active branch runs from the final leaf back along those parents, leaf records left out.
:func:`context_boundaries` then points a compaction's or reset's `firstKeptEntryId` that names an
opaque record at the canonical entry that stands for it. Everything here is O(lines) with dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

__all__ = ["CANONICAL_TYPES", "UNSET", "NavNode", "Navigation", "first_kept_overrides", "scan"]

CANONICAL_TYPES: Final = frozenset(
    {
        "message",
        "thinking_level_change",
        "model_change",
        "compaction",
        "reset",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
    }
)


class _Unset:
    """JavaScript's `undefined`: a field that is absent (or unusable), as distinct from JSON null."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()


@dataclass(frozen=True, slots=True)
class NavNode:
    """One record as navigation sees it."""

    id: str
    type: str | None
    parent: str | None
    leaf: str | None | _Unset  # where the leaf moves when this record is read (UNSET: it stays)
    append_parent: str | None
    side: bool
    index: int  # position among the records scanned

    @property
    def is_leaf_control(self) -> bool:
        return self.type == "leaf"


def _non_blank(value: Any) -> str | _Unset:
    return value if isinstance(value, str) and value.strip() else UNSET


def _id_or_null(record: Mapping[str, Any], key: str) -> str | None | _Unset:
    value = record.get(key, UNSET)
    return None if value is None else _non_blank(value)


def _tree_node(record: Mapping[str, Any], index: int) -> NavNode | None:
    """A record that names its parent (parseSessionTranscriptTreeEntry); None when it cannot be placed."""
    kind = record.get("type")
    if kind == "session" or "parentId" not in record:
        return None
    node_id, parent = _non_blank(record.get("id")), _id_or_null(record, "parentId")
    if isinstance(node_id, _Unset) or isinstance(parent, _Unset):
        return None
    kind = kind if isinstance(kind, str) else None
    if kind == "leaf":
        target = _id_or_null(record, "targetId")
        append_parent = target if "appendParentId" not in record else _id_or_null(record, "appendParentId")
        mode = record.get("appendMode", UNSET)
        if isinstance(target, _Unset) or isinstance(append_parent, _Unset) or mode not in (UNSET, "side"):
            return None
        return NavNode(node_id, kind, target, target, append_parent, mode == "side", index)
    side = record.get("appendMode") == "side"
    moves = kind in CANONICAL_TYPES and not side
    return NavNode(node_id, kind, parent, node_id if moves else UNSET, node_id, side, index)


def _parentless_node(record: Mapping[str, Any], leaf: str | None, index: int) -> NavNode | None:
    """A canonical entry written without a `parentId` field: it hangs under the current leaf."""
    kind = record.get("type")
    if kind not in CANONICAL_TYPES or "parentId" in record:
        return None
    node_id = _non_blank(record.get("id"))
    if isinstance(node_id, _Unset):
        return None
    side = record.get("appendMode") == "side"
    return NavNode(node_id, kind, leaf, UNSET if side else node_id, node_id, side, index)


@dataclass
class Navigation:
    """The scanned tree: every placed record by id, the final leaf, and the active path."""

    by_id: dict[str, NavNode] = field(default_factory=dict)
    leaf: str | None = None

    def path(self, leaf: str | None = None) -> list[NavNode]:
        """Nodes from the root to `leaf` (default: the final leaf), leaf records left out.

        The walk stops at a parent no record holds (only a first entry can name one: later ones hang
        under the leaf); a cycle gives an empty path, as upstream.
        """
        current = self.leaf if leaf is None else leaf
        path: list[NavNode] = []
        seen: set[str] = set()
        while current is not None:
            if current in seen:
                return []
            seen.add(current)
            node = self.by_id.get(current)
            if node is None:
                break
            if not node.is_leaf_control:
                path.append(node)
            current = node.parent
        path.reverse()
        return path


def _resolve_through_controls(parent: str | None, by_id: Mapping[str, NavNode]) -> str | None:
    """A parent that is a leaf record stands for the entry that record selected."""
    seen: set[str] = set()
    current = parent
    while current is not None:
        node = by_id.get(current)
        if current in seen or node is None or not node.is_leaf_control:
            return current
        seen.add(current)
        current = node.parent
    return None


def scan(records: Iterable[Mapping[str, Any]]) -> Navigation:
    """Read records (decoded lines, header included or not) in file order, as OpenClaw's navigation does."""
    nav = Navigation()
    by_id = nav.by_id
    append_parent: str | None = None
    latest_reset: str | None = None
    reset_descendants: set[str] = set()
    invalid_controls: set[str] = set()

    def known(ref: str | None | _Unset) -> bool:
        return ref is None or (isinstance(ref, str) and ref in by_id and ref not in invalid_controls)

    for index, record in enumerate(records):
        kind = record.get("type")
        explicit = _tree_node(record, index)
        control = kind == "leaf" and explicit is not None
        if explicit is not None and control:
            target = explicit.leaf
            if (
                latest_reset is not None
                and nav.leaf is not None
                and (target is None or target not in reset_descendants)
            ):
                explicit = replace(explicit, parent=nav.leaf, leaf=nav.leaf, append_parent=nav.leaf)
            if not known(explicit.leaf) or not known(explicit.append_parent):
                invalid_controls.add(explicit.id)
                by_id[explicit.id] = replace(
                    explicit, parent=record.get("parentId"), leaf=UNSET, append_parent=append_parent
                )
                continue
        node = explicit if explicit is not None else _parentless_node(record, nav.leaf, index)
        if node is None:
            continue
        if kind in CANONICAL_TYPES:
            node = replace(
                node,
                parent=_normalized_parent(
                    node, explicit is not None, nav.leaf, append_parent, latest_reset, reset_descendants, by_id
                ),
            )
        by_id[node.id] = node
        if kind == "reset":
            latest_reset = node.id
            reset_descendants = {node.id}
        elif latest_reset is not None and node.parent is not None and node.parent in reset_descendants:
            reset_descendants.add(node.id)
        append_parent = node.append_parent
        if not isinstance(node.leaf, _Unset):
            nav.leaf = node.leaf
    return nav


def _normalized_parent(
    node: NavNode,
    explicit: bool,
    leaf: str | None,
    append_parent: str | None,
    latest_reset: str | None,
    reset_descendants: set[str],
    by_id: Mapping[str, NavNode],
) -> str | None:
    parent = node.parent
    if not node.side and (
        (latest_reset is not None and (parent is None or parent not in reset_descendants))
        or (explicit and parent is not None and parent not in by_id and leaf is not None)
        or (explicit and parent == append_parent and leaf != append_parent)
    ):
        parent = leaf
    return _resolve_through_controls(parent, by_id)


def _canonical_ancestor(
    start: str | None, indexed: Mapping[str, str | None], opaque: Mapping[str, str | None]
) -> str | None:
    seen: set[str] = set()
    current = start
    while current is not None and current not in indexed:
        if current in seen:
            return None
        seen.add(current)
        current = opaque.get(current)
    return current


def _opaque_first_kept(
    first_kept: str, parent: str | None, indexed: Mapping[str, str | None], opaque: Mapping[str, str | None]
) -> str | None:
    """The canonical entry that stands for an opaque `firstKeptEntryId` (resolveOpaqueSessionFirstKeptEntryId)."""
    ancestor = _canonical_ancestor(first_kept, indexed, opaque)
    if ancestor is not None:
        return ancestor
    # Walking up from the boundary: the last canonical entry seen below the opaque record.
    seen: set[str] = set()
    current, below = parent, None
    while current is not None and current not in seen:
        if current == first_kept:
            if below is not None:
                return below
            break
        seen.add(current)
        if current in indexed:
            below, current = current, indexed[current]
        else:
            current = opaque.get(current)
    # Any canonical entry whose opaque ancestry passes through it.
    for entry_id, entry_parent in indexed.items():
        hops: set[str] = set()
        up = entry_parent
        while up is not None and up in opaque and up not in hops:
            if up == first_kept:
                return entry_id
            hops.add(up)
            up = opaque[up]
    return parent


def first_kept_overrides(
    path: list[NavNode], nav: Navigation, is_indexed: Mapping[str, bool], first_kept: Mapping[str, str | None]
) -> Iterator[tuple[str, str]]:
    """(boundary id, corrected firstKeptEntryId) for each compaction or reset on `path` that names an opaque record.

    `is_indexed` says which records OpenClaw indexes (schema-valid canonical entries); `first_kept` gives
    each boundary's `firstKeptEntryId` as written.
    """
    boundaries = [n for n in path if n.type in ("compaction", "reset") and first_kept.get(n.id) is not None]
    if not boundaries:
        return
    indexed: dict[str, str | None] = {}
    opaque: dict[str, str | None] = {}
    for node in nav.by_id.values():
        (indexed if is_indexed.get(node.id, False) else opaque)[node.id] = node.parent
    for node in boundaries:
        kept = first_kept[node.id]
        if not is_indexed.get(node.id, False) or kept is None or kept in indexed or kept not in opaque:
            continue
        parent = _canonical_ancestor(node.parent, indexed, opaque)
        resolved = _opaque_first_kept(kept, parent, indexed, opaque)
        if resolved is not None:
            yield node.id, resolved
