"""Serializers: how a typed cache turns values into the bytes stored in cairn and back.

A serializer is any object with ``dumps(value) -> bytes`` and ``loads(data) -> value`` (see
:class:`Serializer`). Built in, chosen by name or passed as an instance:

* ``"bytes"``: values are ``bytes`` (``bytearray`` and ``memoryview`` are accepted on write).
* ``"str"``: values are ``str``, stored as UTF-8.
* ``"json"``: JSON documents (compact, UTF-8). Tuples come back as lists, dict keys as strings.
* ``"pickle"``: any picklable object. **Opt-in and unsafe for untrusted data**: unpickling
  bytes that someone else wrote can run arbitrary code. Use it only when every writer of the
  namespace is trusted (your own processes, a server nobody else can write to).
* ``"msgpack"``: MessagePack, when the ``msgpack`` package is installed
  (``pip install msgpack``, or the client's extra: ``pip install "cairn-client[msgpack]"`` /
  ``pip install -e "clients/python[msgpack]"`` from a checkout).
"""

from __future__ import annotations

import json
import pickle
from typing import Any, Callable, Dict, TypeVar, Union

try:  # Protocol is in typing from 3.8
    from typing import Protocol, runtime_checkable
except ImportError:  # pragma: no cover
    from typing_extensions import Protocol, runtime_checkable  # type: ignore

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

__all__ = [
    "Serializer",
    "BytesSerializer",
    "StrSerializer",
    "JsonSerializer",
    "PickleSerializer",
    "MsgpackSerializer",
    "resolve_serializer",
    "SerializerSpec",
]


@runtime_checkable
class Serializer(Protocol[T]):
    """Turns values of one type into bytes and back. ``name`` is informative only."""

    name: str

    def dumps(self, value: T) -> bytes:
        """Encodes ``value``."""
        ...

    def loads(self, data: bytes) -> T:
        """Decodes what :meth:`dumps` produced."""
        ...


class BytesSerializer:
    """Values are raw bytes, stored as they are."""

    name = "bytes"

    def dumps(self, value: Union[bytes, bytearray, memoryview]) -> bytes:
        if isinstance(value, bytes):
            return value
        if isinstance(value, (bytearray, memoryview)):
            return bytes(value)
        raise TypeError(f"the bytes serializer stores bytes, not {type(value).__name__}")

    def loads(self, data: bytes) -> bytes:
        return bytes(data)


class StrSerializer:
    """Values are text, stored encoded (UTF-8 unless told otherwise)."""

    name = "str"

    def __init__(self, encoding: str = "utf-8", errors: str = "strict") -> None:
        self.encoding = encoding
        self.errors = errors

    def dumps(self, value: str) -> bytes:
        if not isinstance(value, str):
            raise TypeError(f"the str serializer stores str, not {type(value).__name__}")
        return value.encode(self.encoding, self.errors)

    def loads(self, data: bytes) -> str:
        return bytes(data).decode(self.encoding, self.errors)


class JsonSerializer:
    """JSON documents, compact and UTF-8 encoded.

    Extra keyword arguments go to :func:`json.dumps` (``default=`` for custom types, ``sort_keys``).
    """

    name = "json"

    def __init__(self, **dumps_kwargs: Any) -> None:
        opts: Dict[str, Any] = {"separators": (",", ":"), "ensure_ascii": False}
        opts.update(dumps_kwargs)
        self._dumps_kwargs = opts

    def dumps(self, value: Any) -> bytes:
        return json.dumps(value, **self._dumps_kwargs).encode("utf-8")

    def loads(self, data: bytes) -> Any:
        return json.loads(data)


class PickleSerializer:
    """Any picklable Python object.

    .. warning:: Unpickling runs code chosen by whoever wrote the bytes. Only use this serializer
       when every writer of the namespace is trusted; never for data that users or other systems
       can write into the cache.
    """

    name = "pickle"

    def __init__(self, protocol: int = pickle.HIGHEST_PROTOCOL) -> None:
        self.protocol = protocol

    def dumps(self, value: Any) -> bytes:
        return pickle.dumps(value, protocol=self.protocol)

    def loads(self, data: bytes) -> Any:
        return pickle.loads(data)  # noqa: S301 - opt-in, documented as unsafe


class MsgpackSerializer:
    """MessagePack via the ``msgpack`` package (an optional dependency)."""

    name = "msgpack"

    def __init__(self, **packb_kwargs: Any) -> None:
        try:
            import msgpack  # type: ignore
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError(
                "the msgpack serializer needs the msgpack package (PyPI: msgpack): pip install msgpack"
            ) from e
        self._msgpack = msgpack
        opts: Dict[str, Any] = {"use_bin_type": True}
        opts.update(packb_kwargs)
        self._packb_kwargs = opts

    def dumps(self, value: Any) -> bytes:
        return self._msgpack.packb(value, **self._packb_kwargs)

    def loads(self, data: bytes) -> Any:
        return self._msgpack.unpackb(data, raw=False)


_BY_NAME: Dict[str, Callable[[], Any]] = {
    "bytes": BytesSerializer,
    "str": StrSerializer,
    "json": JsonSerializer,
    "pickle": PickleSerializer,
    "msgpack": MsgpackSerializer,
}

SerializerSpec = Union[str, Serializer]
"""A serializer name (``"bytes"``, ``"str"``, ``"json"``, ``"pickle"``, ``"msgpack"``) or instance."""


def resolve_serializer(spec: SerializerSpec) -> Serializer:
    """Returns the serializer that ``spec`` names, or ``spec`` itself when it is one."""
    if isinstance(spec, str):
        try:
            factory = _BY_NAME[spec.lower()]
        except KeyError:
            raise ValueError(f"unknown serializer {spec!r}; choose one of {sorted(_BY_NAME)}") from None
        return factory()
    if callable(getattr(spec, "dumps", None)) and callable(getattr(spec, "loads", None)):
        return spec
    raise TypeError("a serializer needs dumps(value) -> bytes and loads(bytes) -> value")
