"""Serialized OTLP KeyValues → their JSON fragments, remembered in a cache bounded by bytes.

Most attribute values repeat from span to span (service names, layers, tool names), so each distinct
serialized KeyValue is converted once; the cache forgets when it holds too many bytes, and values too
large to be worth remembering are never cached.
"""

from __future__ import annotations

import base64
import json
import struct
import threading
from collections import Counter
from collections.abc import Iterable
from operator import itemgetter
from typing import Any, Final

import orjson
from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from turnlens.collector.otlp_rows import READ_KEYS, OtlpDecodeError

_DOUBLE: Final = struct.Struct("<d")
CACHE_BYTES: Final = 32 * 1024 * 1024  # serialized KeyValues and their fragments remembered, at most
LARGEST_CACHED: Final = 2048  # a longer KeyValue (and its fragment) is converted each time: it rarely repeats
_KEY_CACHE_LIMIT: Final = 20_000  # distinct key headers remembered (each under 140 bytes of key)

def any_value_to_python(value: AnyValue) -> Any:
    """An OTLP AnyValue as a JSON-ready Python value (bytes as base64, kvlists as objects)."""
    kind = value.WhichOneof("value")
    if kind is None or kind == "string_value_strindex":
        return None
    if kind == "array_value":
        return [any_value_to_python(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value_to_python(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return getattr(value, kind)


# A cached KeyValue: its `"key":value` JSON fragment, and (key, value) when the collector reads it.
Entry = tuple[str, tuple[str, Any] | None]
kv_cache: dict[bytes, Entry] = {}
_cached_bytes = 0  # of kv_cache's keys and fragments
_cache_lock = threading.Lock()
# The bytes before a short KeyValue's value, 0x0a <key length> key 0x12 <value length> <value tag>,
# → ('"key":', key, read, size of the whole KeyValue, position of the value's payload).
_Header = tuple[str, str, bool, int, int]
key_cache: dict[bytes, _Header] = {}
_dumps = orjson.dumps
_json_string = json.encoder.encode_basestring  # C; the same text as orjson for every code point
_FIXED64: Final = _DOUBLE.size
fragment_of = itemgetter(0)  # an entry's fragment


class Volatility:
    """Which keys take a new value nearly every time (ids, clocks, counters): caching those only evicts.

    Misses are counted per key over epochs of EPOCH misses; a key with more than a tenth of an
    epoch's misses is not cached during the next epoch.
    """

    EPOCH = 50_000

    def __init__(self) -> None:
        self.misses: Counter[str] = Counter()
        self.total = 0
        self.volatile: frozenset[str] = frozenset()

    def cacheable(self, key: str) -> bool:
        if key in self.volatile:
            return False
        self.misses[key] += 1
        self.total += 1
        if self.total >= self.EPOCH:
            counts = list(self.misses.items())  # one C call: other threads may be counting
            self.volatile = frozenset(k for k, n in counts if n * 10 > self.EPOCH)
            self.misses.clear()
            self.total = 0
        return True


volatility = Volatility()


def kv_entry(raw: bytes) -> Entry:
    """Converts one serialized KeyValue the first time it is seen; later sightings hit the cache.

    Short keys with string, int, bool or double values (nearly all of them) are read straight from
    the wire bytes: the bytes before the value repeat for every value of a key, so what they say
    (key, value type and length) is looked up once, and only the value itself is converted here.
    """
    try:
        header = key_cache.get(raw[: raw[1] + 5]) or _header(raw)
    except IndexError:  # shorter than any short KeyValue
        header = None
    entry = _kv_entry_short(raw, header) if header is not None else None
    if entry is None or header is None:
        entry, key = _kv_entry_parsed(raw)
    else:
        key = header[1]
    if key not in volatility.volatile and volatility.cacheable(key):  # skips a call for ids and clocks
        _remember(raw, entry)
    return entry


def _remember(raw: bytes, entry: Entry) -> None:
    """Caches a small entry; when the cache would pass CACHE_BYTES it starts over (cheaper than an LRU
    on the hot path, and the values that repeat are back within a request or two)."""
    global _cached_bytes
    size = len(raw) + len(entry[0])
    if size > LARGEST_CACHED:
        return
    with _cache_lock:
        if _cached_bytes + size > CACHE_BYTES:
            kv_cache.clear()
            _cached_bytes = 0
        kv_cache[raw] = entry
        _cached_bytes += size


def cached_bytes() -> int:
    """Bytes the KeyValue cache holds now (keys and fragments), for tests and the collector's stats."""
    return _cached_bytes


def _header(raw: bytes) -> _Header | None:
    # KeyValue wire form: 0x0a <key length> key 0x12 <value length> AnyValue, lengths < 128.
    p = raw[1] + 2
    if raw[0] != 0x0A or raw[1] > 0x7F or len(raw) < p + 3 or raw[p] != 0x12 or raw[p + 1] > 0x7F:
        return None
    if raw[p + 2] not in (0x0A, 0x18, 0x10, 0x21):
        return None
    try:
        key = raw[2:p].decode()
    except UnicodeDecodeError:
        return None  # the parsed path says why
    header = (_json_string(key) + ":", key, key in READ_KEYS, p + 2 + raw[p + 1], p + 3)
    if len(key_cache) < _KEY_CACHE_LIMIT:
        key_cache[raw[: p + 3]] = header
    return header


def _kv_entry_short(raw: bytes, header: _Header) -> Entry | None:
    key_fragment, key, read, size, at = header
    if len(raw) != size:
        return None
    tag = raw[at - 1]
    value: Any
    if tag == 0x0A:  # string_value
        if size == at or raw[at] + at + 1 != size:
            return None
        try:
            value = raw[at + 1 :].decode()
        except UnicodeDecodeError:
            raise OtlpDecodeError(f"attribute {key!r}: string value is not UTF-8") from None
        return key_fragment + _json_string(value), (key, value) if read else None
    if tag == 0x18:  # int_value (varint)
        try:
            value = AnyValue.FromString(raw[at - 1 :]).int_value
        except DecodeError:
            return None  # the parsed path says why
        return key_fragment + str(value), (key, value) if read else None
    if tag == 0x10 and size == at + 1 and raw[at] < 0x80:  # bool_value; 0x80 up: a varint cut short
        value = raw[at] != 0
        return key_fragment + ("true" if value else "false"), (key, value) if read else None
    if tag == 0x21 and size == at + _FIXED64:  # double_value (fixed64)
        value = _DOUBLE.unpack_from(raw, at)[0]
        return key_fragment + _dumps(value).decode(), (key, value) if read else None
    return None


def _kv_entry_parsed(raw: bytes) -> tuple[Entry, str]:
    try:
        kv = KeyValue.FromString(raw)
    except DecodeError as exc:
        raise OtlpDecodeError(f"undecodable attribute: {exc}") from None
    value = any_value_to_python(kv.value)
    fragment = _dumps({kv.key: value})[1:-1].decode()
    return (fragment, (kv.key, value) if kv.key in READ_KEYS else None), kv.key


def raw_attributes(raws: Iterable[bytes]) -> tuple[str, dict[str, Any]]:
    """The JSON object of serialized KeyValues, and the values of the keys the collector reads."""
    get = kv_cache.get
    entries = [get(raw) or kv_entry(raw) for raw in raws]
    read = dict(entry[1] for entry in entries if entry[1] is not None)
    return "{" + ",".join([entry[0] for entry in entries]) + "}", read


def cached_kv_entry(raw: bytes) -> Entry:
    """A KeyValue's entry, from the cache when it was seen before (the compiled walker's hook)."""
    return kv_cache.get(raw) or kv_entry(raw)


def check_attributes(raws: Iterable[bytes]) -> None:
    """Raises OtlpDecodeError unless every serialized KeyValue is well formed.

    A rejected span's attributes are never converted, but protobuf would parse them: a malformed one
    makes the whole request malformed (400), not a partial success.
    """
    get = kv_cache.get
    for raw in raws:
        get(raw) or kv_entry(raw)
