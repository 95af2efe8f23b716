"""Typed tags: ``(type, value)`` integer pairs attached to records, and queries over them.

A query selects records by their tags, ``WHERE type op value [AND ...]`` on the server. Build one
with :func:`where`::

    where(1) == 5                          # WHERE 1 = 5
    (where(1) == 5) & (where(2) > 10)      # WHERE 1 = 5 AND 2 > 10
    where(3).between(1, 100)               # WHERE 3 BETWEEN 1 100
    where(4).any()                         # WHERE 4 ANY  (records carrying any tag of type 4)

or pass a string (``"1 = 5 AND 2 = 42"``, with or without the leading ``WHERE``), a mapping of
equalities (``{1: 5, 2: 42}``), or a :class:`Tag` (equality on that pair).
"""

from __future__ import annotations

from typing import Any, Dict, Generic, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union

__all__ = ["Tag", "TagLike", "TagQuery", "QueryLike", "where", "to_query", "tag_args", "TagPage"]

T = TypeVar("T")


class Tag(NamedTuple):
    """One typed tag: an unsigned 32-bit ``type`` and a signed 64-bit ``value``."""

    type: int
    value: int


TagLike = Union[Tag, Tuple[int, int]]
"""A :class:`Tag` or a plain ``(type, value)`` tuple."""


_U32 = (1 << 32) - 1
_I64 = 1 << 63


def _int(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"tag {what} must be an int, not {type(v).__name__} {v!r}")
    if what == "type" and not 0 <= v <= _U32:
        raise ValueError(f"tag type must be an unsigned 32-bit int, not {v}")
    if what == "value" and not -_I64 <= v < _I64:
        raise ValueError(f"tag value must be a signed 64-bit int, not {v}")
    return v


def tag_args(tags: Iterable[TagLike]) -> List[int]:
    """Flattens tags into ``[type, value, type, value, ...]`` command arguments; each tag must
    be an ``(int, int)`` pair (a :class:`Tag` or a 2-tuple)."""
    if isinstance(tags, (str, bytes, Tag)) or (isinstance(tags, tuple) and len(tags) == 2
                                               and all(isinstance(x, int) for x in tags)):
        raise TypeError(f"tags is a list of (type, value) pairs, not one pair or a string: {tags!r}")
    out: List[int] = []
    for t in tags:
        if not isinstance(t, (tuple, list)) or len(t) != 2:
            raise TypeError(f"a tag is a (type, value) pair of ints, not {t!r}")
        ty, val = t
        out.append(_int(ty, "type"))
        out.append(_int(val, "value"))
    return out


class TagQuery:
    """An immutable tag query: a conjunction of predicates. Combine with ``&``."""

    __slots__ = ("_args",)

    def __init__(self, args: Sequence[Union[str, int]]) -> None:
        self._args: Tuple[Union[str, int], ...] = tuple(args)

    def args(self) -> List[Union[str, int]]:
        """The command arguments, starting with ``WHERE``."""
        return ["WHERE", *self._args]

    def __and__(self, other: "QueryLike") -> "TagQuery":
        return TagQuery([*self._args, "AND", *to_query(other)._args])

    def __str__(self) -> str:
        return " ".join(str(a) for a in self.args())

    def __repr__(self) -> str:
        return f"TagQuery({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TagQuery) and other._args == self._args

    def __hash__(self) -> int:
        return hash(self._args)


class where:  # noqa: N801 - reads as a keyword in queries
    """Starts a predicate on tag ``type``: compare it with ``==``, ``<``, ``<=``, ``>``, ``>=``,
    or call :meth:`between` / :meth:`any` / :meth:`eq`."""

    __slots__ = ("type",)

    def __init__(self, type: int) -> None:  # noqa: A002 - the server's word
        self.type = _int(type, "type")

    def _q(self, op: str, *values: int) -> TagQuery:
        return TagQuery([self.type, op, *(_int(v, "value") for v in values)])

    def eq(self, value: int) -> TagQuery:
        """``type = value``."""
        return self._q("=", value)

    def __eq__(self, value: int) -> TagQuery:  # type: ignore[override]
        return self._q("=", value)

    def __lt__(self, value: int) -> TagQuery:
        return self._q("<", value)

    def __le__(self, value: int) -> TagQuery:
        return self._q("<=", value)

    def __gt__(self, value: int) -> TagQuery:
        return self._q(">", value)

    def __ge__(self, value: int) -> TagQuery:
        return self._q(">=", value)

    def between(self, low: int, high: int) -> TagQuery:
        """``low <= value <= high`` (an empty group when ``low > high``)."""
        return self._q("BETWEEN", low, high)

    def any(self) -> TagQuery:
        """Records carrying at least one tag of this type."""
        return TagQuery([self.type, "ANY"])

    __hash__ = None  # type: ignore[assignment]


QueryLike = Union[TagQuery, str, Mapping[int, int], Tag, Tuple[int, int]]
"""Anything :func:`to_query` accepts."""


def to_query(q: QueryLike) -> TagQuery:
    """Normalises a :data:`QueryLike` into a :class:`TagQuery`."""
    if isinstance(q, TagQuery):
        return q
    if isinstance(q, str):
        words = q.split()
        if words and words[0].upper() == "WHERE":
            words = words[1:]
        if not words:
            raise ValueError("empty tag query")
        return TagQuery(words)
    if isinstance(q, Mapping):
        if not q:
            raise ValueError("empty tag query")
        out: Optional[TagQuery] = None
        for ty, val in q.items():
            p = where(ty) == val
            out = p if out is None else out & p
        assert out is not None
        return out
    if isinstance(q, tuple) and len(q) == 2:
        return where(q[0]) == q[1]
    raise TypeError(f"not a tag query: {q!r}")


class TagPage(Generic[T]):
    """One page of a group read: ``items`` and the ``cursor`` to pass for the next page.

    ``cursor`` is ``"0"`` when nothing is left (:attr:`done`).
    """

    __slots__ = ("cursor", "items")

    def __init__(self, cursor: str, items: T) -> None:
        self.cursor = cursor
        self.items = items

    @property
    def done(self) -> bool:
        """Whether this was the last page."""
        return self.cursor == "0"

    def __iter__(self):  # allows ``cursor, items = page``
        yield self.cursor
        yield self.items

    def __repr__(self) -> str:
        return f"TagPage(cursor={self.cursor!r}, items={self.items!r})"


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def parse_pairs(items: Any) -> Dict[Any, Any]:
    """A key/value group: a RESP3 map (dict) or a RESP2 flat ``[k1, v1, k2, v2]`` list."""
    if isinstance(items, dict):
        return dict(items)
    it = iter(items or ())
    return dict(zip(it, it))


def parse_get_page(reply: Any) -> "TagPage[Dict[Any, Any]]":
    """Parses TAG.GET's ``[cursor, key/value pairs]``."""
    cursor, items = reply
    return TagPage(_text(cursor), parse_pairs(items))


def parse_keys_page(reply: Any) -> "TagPage[List[Any]]":
    """Parses TAG.KEYS's ``[cursor, keys]``."""
    cursor, items = reply
    return TagPage(_text(cursor), list(items or ()))


def parse_tags(reply: Any) -> List[Tag]:
    """Parses TAG.OF's ``[[type, value], ...]``."""
    return [Tag(int(t), int(v)) for t, v in (reply or ())]
