"""Sans-I/O command specs shared by the sync and asyncio clients.

Each function returns a :class:`Call`: the command's arguments and the function that turns the
raw redis-py reply into the typed result. The clients only run the arguments and apply ``parse``.
"""

from __future__ import annotations

import datetime
from typing import Any, Callable, Dict, Generic, Iterable, List, Optional, Sequence, TypeVar, Union

from . import sql as _sql
from .tags import QueryLike, Tag, TagLike, TagPage, parse_get_page, parse_keys_page, parse_tags, tag_args, to_query

T = TypeVar("T")

TTL = Union[int, float, datetime.timedelta]
"""A time to live: seconds (int or float) or a :class:`datetime.timedelta`."""

__all__ = ["Call", "TTL", "ttl_ms"]


class Call(Generic[T]):
    """A command to run and how to read its reply."""

    __slots__ = ("args", "parse")

    def __init__(self, args: Sequence[Any], parse: Callable[[Any], T]) -> None:
        self.args = tuple(args)
        self.parse = parse

    def __repr__(self) -> str:
        return f"Call{self.args!r}"


def ttl_ms(ttl: Optional[TTL]) -> Optional[int]:
    """A TTL in whole milliseconds (at least 1), or None for "no expiry"."""
    if ttl is None:
        return None
    if isinstance(ttl, datetime.timedelta):
        ttl = ttl.total_seconds()
    elif isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise TypeError(f"a TTL is a number of seconds or a timedelta, not {type(ttl).__name__} {ttl!r}")
    if not ttl > 0 or ttl == float("inf"):  # also NaN
        raise ValueError(f"a TTL must be a positive, finite number of seconds (None: no expiry), not {ttl!r}")
    return max(1, int(round(ttl * 1000)))


def _ok(reply: Any) -> bool:
    return reply is True or reply in (b"OK", "OK")


def _int(reply: Any) -> int:
    return int(reply)


# -- typed tags ---------------------------------------------------------------------------------

def tag_set(key: Union[str, bytes], value: Union[str, bytes, int, float], *, ttl: Optional[TTL] = None,
            tags: Iterable[TagLike] = ()) -> Call[bool]:
    args: List[Any] = ["TAG.SET", key, value]
    px = ttl_ms(ttl)
    if px is not None:
        args += ["PX", px]
    flat = tag_args(tags)
    for i in range(0, len(flat), 2):
        args += ["TAG", flat[i], flat[i + 1]]
    return Call(args, _ok)


def tag_add(key: Union[str, bytes], tags: Iterable[TagLike]) -> Call[int]:
    flat = tag_args(tags)
    if not flat:
        raise ValueError("TAG.ADD needs at least one tag")
    return Call(["TAG.ADD", key, *flat], _int)


def tag_rem(key: Union[str, bytes], tags: Iterable[TagLike]) -> Call[int]:
    flat = tag_args(tags)
    if not flat:
        raise ValueError("TAG.REM needs at least one tag")
    return Call(["TAG.REM", key, *flat], _int)


def tag_of(key: Union[str, bytes]) -> Call[List[Tag]]:
    return Call(["TAG.OF", key], parse_tags)


def _paging(limit: Optional[int], cursor: Optional[str]) -> List[Any]:
    out: List[Any] = []
    if limit is not None:
        out += ["LIMIT", int(limit)]
    if cursor not in (None, "0", b"0"):
        out += ["CURSOR", cursor]
    return out


def tag_get(query: QueryLike, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> Call["TagPage[Dict[Any, Any]]"]:
    return Call(["TAG.GET", *to_query(query).args(), *_paging(limit, cursor)], parse_get_page)


def tag_keys(query: QueryLike, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> Call["TagPage[List[Any]]"]:
    return Call(["TAG.KEYS", *to_query(query).args(), *_paging(limit, cursor)], parse_keys_page)


def tag_count(query: QueryLike) -> Call[int]:
    return Call(["TAG.COUNT", *to_query(query).args()], _int)


def tag_del(query: QueryLike) -> Call[int]:
    return Call(["TAG.DEL", *to_query(query).args()], _int)


# -- SQL tables ---------------------------------------------------------------------------------

def sql_args(name: str, sql: str, params: Sequence[Any]) -> List[Any]:
    """``SQL.EXEC``/``SQL.QUERY`` arguments. Parameters bind with their Python type: the
    server's typed form ``TYPES spec sql args...`` carries one letter per parameter (``i``
    INTEGER, ``r`` REAL, ``t`` TEXT, ``b`` BLOB, ``n`` NULL). All-str parameters use the plain
    form (they bind as TEXT either way)."""
    if not isinstance(sql, str):
        raise TypeError(f"the SQL statement is a str, not {type(sql).__name__}")
    spec = []
    values: List[Any] = []
    for i, p in enumerate(params, 1):
        if isinstance(p, bool):
            spec.append("i")
            values.append(int(p))
        elif isinstance(p, int):
            if not -(1 << 63) <= p < (1 << 63):
                raise ValueError(f"SQL parameter {i}: {p} does not fit SQLite's 64-bit INTEGER")
            spec.append("i")
            values.append(p)
        elif isinstance(p, float):
            if p != p:
                raise ValueError(f"SQL parameter {i}: NaN has no SQL value (bind None for NULL)")
            spec.append("r")
            values.append(repr(p))
        elif isinstance(p, str):
            spec.append("t")
            values.append(p)
        elif isinstance(p, (bytes, bytearray, memoryview)):
            spec.append("b")
            values.append(bytes(p))
        elif p is None:
            spec.append("n")
            values.append(b"")
        else:
            raise TypeError(f"SQL parameter {i}: SQL parameters are int, float, str, bytes or None, "
                            f"not {type(p).__name__}")
    if all(t == "t" for t in spec):
        return [name, sql, *values]
    return [name, "TYPES", "".join(spec), sql, *values]


def sql_exec(sql: str, params: Sequence[Any]) -> Call[int]:
    return Call(sql_args("SQL.EXEC", sql, params), _int)


def sql_query(sql: str, params: Sequence[Any]) -> Call[_sql.SqlResult]:
    return Call(sql_args("SQL.QUERY", sql, params), _sql.parse_query_reply)


def sql_expire(table: str, *, age: Optional[float] = None, rows: Optional[int] = None,
               ops: Optional[int] = None) -> Call[Any]:
    return Call(_sql.expire_args(table, age, rows, ops), _sql.parse_expire_reply)


def sql_tables() -> Call[List[str]]:
    return Call(["SQL.TABLES"], _sql.parse_tables_reply)


def sql_describe(table: str) -> Call[List[Dict[str, Any]]]:
    return Call(["SQL.DESCRIBE", table], _sql.parse_describe_reply)
