"""cairn: the Python client for the cairn cache server.

Built on redis-py. Adds typed methods for cairn's commands (typed tags, SQL tables) and typed
caches with a near cache in process memory, kept coherent by server-side client tracking.

    import cairn

    client = cairn.Client("127.0.0.1", 6380)
    users = client.cache("users", serializer="json", ttl=300)
    profile = users.get_or_fetch("42", lambda: load_profile_from_db(42))

See the package README for the consistency guarantees and the stampede protection.
"""

from ._core import DEFAULT
from .aio import AsyncCache, AsyncClient
from .client import Cache, Client
from .near import NearCache, NearStats
from .resilience import CacheUnavailable, CircuitBreaker
from .serializers import (BytesSerializer, JsonSerializer, MsgpackSerializer, PickleSerializer, Serializer,
                          StrSerializer, resolve_serializer)
from .sql import SqlResult
from .tags import Tag, TagPage, TagQuery, to_query, where
from .tracking import TrackingHub

__version__ = "0.1.0"

__all__ = [
    "Client", "Cache", "AsyncClient", "AsyncCache", "DEFAULT",
    "Tag", "TagQuery", "TagPage", "where", "to_query", "SqlResult",
    "Serializer", "BytesSerializer", "StrSerializer", "JsonSerializer", "PickleSerializer", "MsgpackSerializer",
    "resolve_serializer", "NearCache", "NearStats", "TrackingHub", "CacheUnavailable", "CircuitBreaker",
    "__version__",
]
