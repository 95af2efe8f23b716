"""SQL tables (cairn's SQLcached face): reply types and parsing for SQL.* commands.

``SQL.QUERY`` answers the column names, then the rows, with types preserved (integer, float,
text, blob, null). Over RESP2 that is nested arrays; over RESP3 the server may answer maps. The
parser here accepts the shapes the server may use and always returns a :class:`SqlResult`.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

__all__ = ["SqlResult", "SqlParam", "parse_query_reply", "parse_expire_reply", "expire_args"]

SqlParam = Union[int, float, str, bytes, None]
"""A value bound to a ``?`` parameter, with its Python type: ``int`` (and ``bool``) binds as
INTEGER, ``float`` as REAL, ``str`` as TEXT, ``bytes`` as BLOB, ``None`` as NULL (through the
server's typed form ``SQL.QUERY TYPES spec sql args...``), so ``SELECT ? = 5`` with ``5`` is
true."""


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)


class SqlResult:
    """The result of ``SQL.QUERY``: ``columns`` (names) and ``rows`` (tuples in column order).

    Iterating yields the rows; :meth:`dicts` gives one ``{column: value}`` dict per row.
    """

    __slots__ = ("columns", "rows")

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        self.columns: List[str] = list(columns)
        self.rows: List[Tuple[Any, ...]] = [tuple(r) for r in rows]

    def dicts(self) -> List[Dict[str, Any]]:
        """The rows as dicts keyed by column name."""
        return [dict(zip(self.columns, r)) for r in self.rows]

    def scalar(self) -> Any:
        """The first column of the first row (``None`` when there is no row)."""
        return self.rows[0][0] if self.rows and self.rows[0] else None

    def __iter__(self) -> Iterator[Tuple[Any, ...]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SqlResult) and (self.columns, self.rows) == (other.columns, other.rows)

    def __repr__(self) -> str:
        return f"SqlResult(columns={self.columns!r}, rows={self.rows!r})"


def _get(d: Dict[Any, Any], name: str) -> Any:
    for k in (name, name.encode()):
        if k in d:
            return d[k]
    return None


def parse_query_reply(reply: Any) -> SqlResult:
    """Parses an ``SQL.QUERY`` reply.

    Accepted shapes: ``[columns, row, row, ...]`` and ``[columns, [row, ...]]`` (RESP2), a map
    ``{columns: [...], rows: [...]}``, and a list of per-row maps ``[{col: val}, ...]`` (RESP3).
    """
    if reply is None:
        return SqlResult([], [])
    if isinstance(reply, dict):
        cols = _get(reply, "columns") or []
        rows = _get(reply, "rows") or []
        columns = [_text(c) for c in cols]
        return SqlResult(columns, [_row(r, columns) for r in rows])
    reply = list(reply)
    if not reply:
        return SqlResult([], [])
    if all(isinstance(r, dict) for r in reply):
        columns = [_text(c) for c in reply[0].keys()]
        return SqlResult(columns, [[r[k] for k in r.keys()] for r in reply])
    columns = [_text(c) for c in (reply[0] or [])]
    rest = reply[1:]
    if len(rest) == 1 and isinstance(rest[0], list) and all(isinstance(r, (list, dict)) for r in rest[0]):
        rows = rest[0]
    else:
        rows = rest
    return SqlResult(columns, [_row(r, columns) for r in rows])


def _row(r: Any, columns: List[str]) -> List[Any]:
    if isinstance(r, dict):
        by_name = {_text(k): v for k, v in r.items()}
        return [by_name.get(c) for c in columns]
    return list(r)


def expire_args(table: str, age: Optional[float], rows: Optional[int], ops: Optional[int]) -> List[Any]:
    """Arguments of ``SQL.EXPIRE table [AGE s] [ROWS n] [OPS n]``."""
    if not isinstance(table, str) or not table:
        raise TypeError(f"the table is a non-empty str, not {table!r}")
    args: List[Any] = ["SQL.EXPIRE", table]
    for name, v, unit in (("AGE", age, "whole seconds"), ("ROWS", rows, "a row count"),
                          ("OPS", ops, "an operation count")):
        if v is None:
            continue
        # The server counts in whole units and 0 turns a rule off: age=0.5 would silently
        # switch the rule off, so fractions are refused rather than truncated.
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"sql_expire {name.lower()} must be {unit} (an int), not {v!r}")
        if v < 0:
            raise ValueError(f"sql_expire {name.lower()} must be >= 0 (0 turns the rule off), not {v!r}")
        args += [name, v]
    return args


def parse_expire_reply(reply: Any) -> Union[bool, Dict[str, Optional[int]]]:
    """``SQL.EXPIRE``: ``True`` for OK, or the table's rules as ``{"age": s, "rows": n, "ops": n}``
    (``None`` for a rule not set) when the server answers them."""
    if reply in (True, b"OK", "OK"):
        return True
    if isinstance(reply, dict):
        items = list(reply.items())
    elif isinstance(reply, (list, tuple)):
        it = iter(reply)
        items = list(zip(it, it))
    else:
        return bool(reply)
    out: Dict[str, Optional[int]] = {}
    for k, v in items:
        if isinstance(v, (bytes, str)):
            try:
                v = int(v)
            except ValueError:
                v = None
        out[_text(k).lower()] = None if v is None or (isinstance(v, int) and v < 0) else v
    return out


def parse_tables_reply(reply: Any) -> List[str]:
    """``SQL.TABLES``: table names."""
    return [_text(t) for t in (reply or [])]


def parse_describe_reply(reply: Any) -> List[Dict[str, Any]]:
    """``SQL.DESCRIBE``: one dict per column, ``{"name": str, "type": str, "notnull": bool,
    "default": bytes | None, "pk": bool}`` (RESP3 maps or RESP2 flat pairs)."""
    out: List[Dict[str, Any]] = []
    for entry in reply or ():
        if isinstance(entry, dict):
            pairs = list(entry.items())
        else:
            it = iter(entry)
            pairs = list(zip(it, it))
        col: Dict[str, Any] = {}
        for k, v in pairs:
            name = _text(k).lower()
            if name in ("name", "type"):
                v = _text(v) if v is not None else ""
            elif name in ("notnull", "pk"):
                v = bool(int(v)) if v is not None else False
            col[name] = v
        out.append(col)
    return out
