"""The stored form of a typed-cache value.

Plain values are stored as the serializer's bytes, readable by any client. A value with a soft
expiry (``stale_ttl`` > 0: stale-while-revalidate) is stored in an *envelope*::

    MAGIC (4 bytes: 00 63 7a 01) | soft expiry, unix ms, uint64 big-endian | payload

The server keeps the record until the hard expiry (``ttl + stale_ttl``); past the soft expiry
readers treat it as stale. A payload that happens to start with MAGIC is always enveloped (soft
expiry 0 = none), so decoding is unambiguous.
"""

from __future__ import annotations

import struct
from typing import Optional, Tuple

MAGIC = b"\x00cz\x01"
_HEADER = struct.Struct(">Q")
HEADER_LEN = len(MAGIC) + _HEADER.size

__all__ = ["MAGIC", "encode", "decode"]


def encode(payload: bytes, soft_expiry_ms: Optional[int] = None) -> bytes:
    """Wraps ``payload`` when it needs an envelope (a soft expiry, or a payload that looks like one)."""
    if not soft_expiry_ms and not payload.startswith(MAGIC):
        return payload
    return MAGIC + _HEADER.pack(max(0, int(soft_expiry_ms or 0))) + payload


def decode(data: bytes) -> Tuple[bytes, int]:
    """Returns ``(payload, soft expiry in unix ms or 0)``."""
    if data[:4] == MAGIC and len(data) >= HEADER_LEN:
        (soft,) = _HEADER.unpack_from(data, 4)
        return data[HEADER_LEN:], soft
    return data, 0
