# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The compiled OTLP protobuf walker: ExportTraceServiceRequest wire bytes → Arrow column buffers.

Decoding in Python spends its time creating objects (a message per span, a value per attribute, a
string per fragment); this walks the wire bytes once and writes every column straight into growable
C buffers that become Arrow arrays without a Python object per span. Only what is rare goes through
Python (attribute values that are doubles, arrays, kvlists or bytes; spans whose layer must be
inferred or whose contract values are not plain strings and ints; rejected spans' reasons), through
the hooks otlp_decode passes in, so the rules live in one place. A request this walker finds
malformed raises NotPlainWire, and otlp_decode lets its pure-Python reference decoder explain it.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memcpy, memset, strlen
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.long cimport PyLong_FromLongLong
from cpython.unicode cimport PyUnicode_DecodeUTF8


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL


class NotPlainWire(ValueError):
    """The body is not a well-formed request this walker reads; the reference decoder decides."""


# --- growable buffers ---------------------------------------------------------------------------

cdef struct Buf:
    char* p
    Py_ssize_t n
    Py_ssize_t cap


cdef int buf_reserve(Buf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t need = b.n + extra
    cdef Py_ssize_t cap
    cdef char* p
    if need <= b.cap:
        return 0
    cap = b.cap * 2
    if cap < need:
        cap = need
    if cap < 1024:
        cap = 1024
    p = <char*>realloc(b.p, cap)
    if p == NULL:
        raise MemoryError()
    b.p = p
    b.cap = cap
    return 0


cdef inline int buf_put(Buf* b, const char* s, Py_ssize_t k) except -1:
    if k == 0:
        return 0
    if b.n + k > b.cap:
        buf_reserve(b, k)
    memcpy(b.p + b.n, s, k)
    b.n += k
    return 0


cdef inline int buf_byte(Buf* b, char c) except -1:
    if b.n + 1 > b.cap:
        buf_reserve(b, 1)
    b.p[b.n] = c
    b.n += 1
    return 0


cdef inline int buf_i32(Buf* b, Py_ssize_t v) except -1:
    cdef int32_t x
    if v > 0x7FFFFFFF:
        raise NotPlainWire("a column exceeds 2 GiB")
    x = <int32_t>v
    return buf_put(b, <char*>&x, 4)


cdef inline int buf_i64(Buf* b, int64_t v) except -1:
    return buf_put(b, <char*>&v, 8)


cdef bytes buf_take(Buf* b):
    """The buffer's bytes, its memory freed at once (a large request's columns are copied one by one)."""
    cdef bytes data = PyBytes_FromStringAndSize(b.p, b.n)
    free(b.p)
    b.p, b.n, b.cap = NULL, 0, 0
    return data


# A string column: UTF-8 data, int32 offsets, one validity byte per row (packed into bits at the end).
cdef struct StrCol:
    Buf data
    Buf offsets
    Buf valid
    Py_ssize_t rows


cdef inline int str_end(StrCol* c, bint valid) except -1:
    """Closes the row whose bytes were just written to c.data."""
    buf_i32(&c.offsets, c.data.n)
    buf_byte(&c.valid, 1 if valid else 0)
    c.rows += 1
    return 0


cdef inline int str_put(StrCol* c, const char* s, Py_ssize_t k) except -1:
    buf_put(&c.data, s, k)
    return str_end(c, True)


cdef inline int str_null(StrCol* c) except -1:
    return str_end(c, False)


cdef int str_py(StrCol* c, object text) except -1:
    """A Python str, or None as null."""
    cdef Py_ssize_t k
    cdef const char* s
    if text is None:
        return str_null(c)
    s = PyUnicode_AsUTF8AndSize(text, &k)
    return str_put(c, s, k)


cdef int str_truncate(StrCol* c, Py_ssize_t rows) except -1:
    c.data.n = (<int32_t*>c.offsets.p)[rows]
    c.offsets.n = (rows + 1) * 4
    c.valid.n = rows
    c.rows = rows
    return 0


cdef struct IntCol:
    Buf data
    Buf valid
    Py_ssize_t rows


cdef inline int int_put(IntCol* c, int64_t v) except -1:
    buf_i64(&c.data, v)
    buf_byte(&c.valid, 1)
    c.rows += 1
    return 0


cdef inline int int_null(IntCol* c) except -1:
    buf_i64(&c.data, 0)
    buf_byte(&c.valid, 0)
    c.rows += 1
    return 0


cdef int int_truncate(IntCol* c, Py_ssize_t rows) except -1:
    c.data.n = rows * 8
    c.valid.n = rows
    c.rows = rows
    return 0


cdef object packed_validity(Buf* valid, Py_ssize_t rows):
    """(bitmap bytes or None, null count) of one-byte-per-row validity flags."""
    cdef Py_ssize_t i, nulls = 0
    cdef const uint8_t* v = <const uint8_t*>valid.p
    cdef bytes bitmap
    cdef uint8_t* bits
    for i in range(rows):
        if not v[i]:
            nulls += 1
    if nulls == 0:
        return None, 0
    bitmap = PyBytes_FromStringAndSize(NULL, (rows + 7) // 8)
    bits = <uint8_t*>PyBytes_AS_STRING(bitmap)
    memset(bits, 0, (rows + 7) // 8)
    for i in range(rows):
        if v[i]:
            bits[i >> 3] |= <uint8_t>(1 << (i & 7))
    return bitmap, nulls


# --- the columns --------------------------------------------------------------------------------

# String columns: the span's, then EVENT_TYPE's, then LINK_TYPE's.
cdef enum:
    S_TRACE, S_SPAN, S_PARENT, S_TSTATE, S_NAME, S_KIND, S_ATTRS, S_STATUS, S_STATUS_MSG,
    S_SESSION, S_TURN, S_LAYER,
    SE_NAME, SE_ATTRS,
    SL_TRACE, SL_SPAN, SL_TSTATE, SL_ATTRS,
    N_STR

cdef enum:
    I_FLAGS, I_START, I_END, I_DROPPED_ATTRS, I_DROPPED_EVENTS, I_DROPPED_LINKS, I_HLC,
    IE_TIME, IE_DROPPED, IE_HLC,
    IL_DROPPED, IL_FLAGS,
    N_INT

STRING_COLUMNS = (
    "trace_id", "span_id", "parent_span_id", "trace_state", "name", "kind", "attributes", "status_code",
    "status_message", "span_session_id", "span_turn_id", "layer",
    "events.name", "events.attributes",
    "links.trace_id", "links.span_id", "links.trace_state", "links.attributes",
)
INT_COLUMNS = (
    "flags", "start_time_unix_nano", "end_time_unix_nano", "dropped_attributes_count",
    "dropped_events_count", "dropped_links_count", "hlc",
    "events.time_unix_nano", "events.dropped_attributes_count", "events.hlc",
    "links.dropped_attributes_count", "links.flags",
)

cdef const char* SPAN_KINDS[6]
SPAN_KINDS[:] = [b"unspecified", b"internal", b"server", b"client", b"producer", b"consumer"]
cdef const char* STATUS_CODES[3]
STATUS_CODES[:] = [b"unset", b"ok", b"error"]
cdef const char* HEX = b"0123456789abcdef"
cdef int64_t INT64_MAX = 0x7FFFFFFFFFFFFFFF

# Attribute keys the collector reads (otlp_decode._READ_KEYS; checked equal at import there).
READ_KEYS = (
    "service.name", "service.instance.id", "session.id", "gen_ai.conversation.id", "turnlens.turn.id",
    "turnlens.layer", "turnlens.hlc", "gen_ai.operation.name", "openinference.span.kind",
    "server.address", "peer.service", "http.request.method", "http.method",
)
cdef enum:
    K_SERVICE, K_INSTANCE, K_SESSION, K_CONVERSATION, K_TURN, K_LAYER, K_HLC, N_READ = 13
cdef bytes _READ_BLOB = b"".join(key.encode() for key in READ_KEYS)
cdef const char* READ_TEXT = _READ_BLOB
cdef Py_ssize_t READ_START[13]
cdef Py_ssize_t READ_LEN[13]
cdef Py_ssize_t _at = 0
for _i, _key in enumerate(READ_KEYS):
    READ_START[_i] = _at
    READ_LEN[_i] = len(_key)
    _at += len(_key)


cdef inline int read_key(const uint8_t* key, Py_ssize_t n) noexcept:
    cdef int i
    for i in range(N_READ):
        if READ_LEN[i] == n and memcmp(READ_TEXT + READ_START[i], key, n) == 0:
            return i
    return -1


# Field numbers of the OTLP messages (opentelemetry/proto/trace/v1/trace.proto and its imports).
cdef enum:
    REQUEST_RESOURCE_SPANS = 1
cdef enum:
    RS_RESOURCE = 1, RS_SCOPE_SPANS = 2, RS_SCHEMA_URL = 3
cdef enum:
    RESOURCE_ATTRIBUTES = 1, RESOURCE_DROPPED = 2
cdef enum:
    SS_SCOPE = 1, SS_SPANS = 2, SS_SCHEMA_URL = 3
cdef enum:
    SCOPE_NAME = 1, SCOPE_VERSION = 2, SCOPE_ATTRIBUTES = 3, SCOPE_DROPPED = 4
cdef enum:
    SPAN_TRACE_ID = 1, SPAN_SPAN_ID = 2, SPAN_TRACE_STATE = 3, SPAN_PARENT = 4, SPAN_NAME = 5, SPAN_KIND = 6,
    SPAN_START = 7, SPAN_END = 8, SPAN_ATTRIBUTES = 9, SPAN_DROPPED_ATTRS = 10, SPAN_EVENTS = 11,
    SPAN_DROPPED_EVENTS = 12, SPAN_LINKS = 13, SPAN_DROPPED_LINKS = 14, SPAN_STATUS = 15, SPAN_FLAGS = 16
cdef enum:
    STATUS_MESSAGE = 2, STATUS_CODE = 3
cdef enum:
    EVENT_TIME = 1, EVENT_NAME = 2, EVENT_ATTRIBUTES = 3, EVENT_DROPPED = 4
cdef enum:
    LINK_TRACE_ID = 1, LINK_SPAN_ID = 2, LINK_TRACE_STATE = 3, LINK_ATTRIBUTES = 4, LINK_DROPPED = 5,
    LINK_FLAGS = 6
# Wire types, and the one-byte tags (field << 3 | wire type) of a KeyValue and its AnyValue.
cdef enum:
    WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5
cdef enum:
    TAG_KV_KEY = 0x0A, TAG_KV_VALUE = 0x12, TAG_STRING = 0x0A, TAG_BOOL = 0x10, TAG_INT = 0x18


# A read attribute's last value on the current span or event.
cdef enum:
    V_ABSENT, V_STR, V_INT, V_BOOL, V_PY

cdef struct ReadVal:
    int kind
    const uint8_t* p
    Py_ssize_t n
    int64_t i
    Py_ssize_t obj  # index into the walk's list of Python values (V_PY)


# --- wire primitives ----------------------------------------------------------------------------

cdef inline const uint8_t* varint(const uint8_t* p, const uint8_t* end, uint64_t* out) except NULL:
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        if p >= end or shift > 63:
            raise NotPlainWire("truncated varint")
        b = p[0]
        p += 1
        v |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            out[0] = v
            return p
        shift += 7


cdef inline const uint8_t* length(const uint8_t* p, const uint8_t* end, Py_ssize_t* out) except NULL:
    cdef uint64_t v = 0
    p = varint(p, end, &v)
    if v > <uint64_t>(end - p):
        raise NotPlainWire("length past the end")
    out[0] = <Py_ssize_t>v
    return p


# One field: its number and wire type, and its value (varint/fixed) or its bytes (length-delimited).
cdef struct Field:
    uint32_t number
    uint32_t wire
    uint64_t value
    const uint8_t* p
    Py_ssize_t n


cdef inline const uint8_t* next_field(const uint8_t* p, const uint8_t* end, Field* f) except NULL:
    cdef uint64_t key
    p = varint(p, end, &key)
    f.number = <uint32_t>(key >> 3)
    f.wire = <uint32_t>(key & 7)
    if f.number == 0 or key >> 32:
        raise NotPlainWire("invalid field number")
    if f.wire == 0:
        return varint(p, end, &f.value)
    if f.wire == 2:
        p = length(p, end, &f.n)
        f.p = p
        return p + f.n
    if f.wire == 1:
        if end - p < 8:
            raise NotPlainWire("truncated fixed64")
        memcpy(&f.value, p, 8)
        return p + 8
    if f.wire == 5:
        if end - p < 4:
            raise NotPlainWire("truncated fixed32")
        f.value = 0
        memcpy(&f.value, p, 4)
        return p + 4
    raise NotPlainWire("unsupported wire type")


cdef inline int expect(Field* f, uint32_t wire) except -1:
    """A known field sent with another wire type: protobuf would keep it as unknown; not plain."""
    if f.wire != wire:
        raise NotPlainWire("unexpected wire type")
    return 0


# Eight bytes at a time: ASCII needs no UTF-8 check, and plain ASCII (no control character, quote or
# backslash) no JSON escape. The tests are the classic SWAR ones, exact for "any byte".
cdef uint64_t HIGH = 0x8080808080808080
cdef uint64_t ONES = 0x0101010101010101


cdef inline uint64_t load8(const uint8_t* s) noexcept:
    cdef uint64_t w
    memcpy(&w, s, 8)
    return w


cdef inline bint plain8(uint64_t w) noexcept:
    cdef uint64_t x
    if w & HIGH:
        return False
    if (w - ONES * 0x20) & ~w & HIGH:  # a byte below 0x20
        return False
    x = w ^ (ONES * 0x22)  # a quote
    if (x - ONES) & ~x & HIGH:
        return False
    x = w ^ (ONES * 0x5C)  # a backslash
    return not ((x - ONES) & ~x & HIGH)


cdef bint valid_utf8(const uint8_t* s, Py_ssize_t n) noexcept:
    """Strict UTF-8, as Python's decoder and protobuf check it (no surrogates, overlongs, > U+10FFFF)."""
    cdef Py_ssize_t i = 0
    cdef uint8_t c, c1
    while i < n:
        c = s[i]
        if c < 0x80:
            if i + 8 <= n and not (load8(s + i) & HIGH):
                i += 8
            else:
                i += 1
            continue
        if c < 0xC2 or c > 0xF4:
            return False
        if c < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
            continue
        if i + 2 >= n:
            return False
        c1 = s[i + 1]
        if (c1 & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80:
            return False
        if c < 0xF0:
            if (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 > 0x9F):
                return False
            i += 3
            continue
        if i + 3 >= n or (s[i + 3] & 0xC0) != 0x80:
            return False
        if (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 > 0x8F):
            return False
        i += 4
    return True


cdef inline int need_utf8(const uint8_t* s, Py_ssize_t n) except -1:
    if not valid_utf8(s, n):
        raise NotPlainWire("a string field is not UTF-8")
    return 0


cdef int json_string(Buf* b, const uint8_t* s, Py_ssize_t n) except -1:
    """A JSON string of valid UTF-8, escaped as json.encoder.encode_basestring and orjson do."""
    cdef Py_ssize_t i, run = 0
    cdef uint8_t c
    cdef char esc[6]
    buf_reserve(b, n + 2)
    b.p[b.n] = b'"'
    b.n += 1
    i = 0
    while i < n:
        if i + 8 <= n and plain8(load8(s + i)):
            i += 8
            continue
        c = s[i]
        if c >= 0x20 and c != b'"' and c != b'\\':
            i += 1
            continue
        if i > run:
            buf_put(b, <const char*>s + run, i - run)
        i += 1
        run = i
        if c == b'"':
            buf_put(b, b'\\"', 2)
        elif c == b'\\':
            buf_put(b, b'\\\\', 2)
        elif c == b'\n':
            buf_put(b, b'\\n', 2)
        elif c == b'\r':
            buf_put(b, b'\\r', 2)
        elif c == b'\t':
            buf_put(b, b'\\t', 2)
        elif c == 0x08:
            buf_put(b, b'\\b', 2)
        elif c == 0x0C:
            buf_put(b, b'\\f', 2)
        else:
            esc[0] = b'\\'
            esc[1] = b'u'
            esc[2] = b'0'
            esc[3] = b'0'
            esc[4] = HEX[c >> 4]
            esc[5] = HEX[c & 15]
            buf_put(b, esc, 6)
    if n > run:
        buf_put(b, <const char*>s + run, n - run)
    buf_byte(b, b'"')
    return 0


cdef int decimal(Buf* b, int64_t v) except -1:
    cdef char digits[24]
    cdef int k = 24
    cdef uint64_t u
    if v < 0:
        u = <uint64_t>0 - <uint64_t>v
    else:
        u = <uint64_t>v
    while True:
        k -= 1
        digits[k] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    if v < 0:
        k -= 1
        digits[k] = b'-'
    return buf_put(b, digits + k, 24 - k)


cdef int hex_id(StrCol* c, const uint8_t* s, Py_ssize_t n) except -1:
    cdef Py_ssize_t i
    buf_reserve(&c.data, 2 * n)
    for i in range(n):
        c.data.p[c.data.n] = HEX[s[i] >> 4]
        c.data.p[c.data.n + 1] = HEX[s[i] & 15]
        c.data.n += 2
    return str_end(c, True)


cdef inline bint all_zero(const uint8_t* s, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        if s[i]:
            return False
    return True


# --- the walk -----------------------------------------------------------------------------------

cdef class Walk:
    """The columns of one request as C buffers; hooks are otlp_decode's functions for the rare cases."""

    cdef StrCol s[N_STR]
    cdef IntCol i[N_INT]
    cdef Buf event_offsets
    cdef Buf link_offsets
    cdef public list contexts
    cdef public list reasons
    cdef list values  # Python attribute values of the span being read (ReadVal.obj indexes it)
    cdef ReadVal reads[N_READ]
    cdef bint any_read
    cdef object kv_entry, contract_values, as_int, span_problem, link_problem
    cdef object resource_hook, context_hook, check_attributes

    def __cinit__(self, *args):
        memset(self.s, 0, sizeof(self.s))
        memset(self.i, 0, sizeof(self.i))
        memset(&self.event_offsets, 0, sizeof(Buf))
        memset(&self.link_offsets, 0, sizeof(Buf))

    def __dealloc__(self):
        cdef int k
        for k in range(N_STR):
            free(self.s[k].data.p)
            free(self.s[k].offsets.p)
            free(self.s[k].valid.p)
        for k in range(N_INT):
            free(self.i[k].data.p)
            free(self.i[k].valid.p)
        free(self.event_offsets.p)
        free(self.link_offsets.p)

    def __init__(self, hooks):
        cdef int k
        (self.kv_entry, self.contract_values, self.as_int, self.span_problem,
         self.link_problem, self.resource_hook, self.context_hook, self.check_attributes) = hooks
        self.contexts = []
        self.reasons = []
        self.values = []
        for k in range(N_STR):
            buf_i32(&self.s[k].offsets, 0)
        buf_i32(&self.event_offsets, 0)
        buf_i32(&self.link_offsets, 0)

    # --- results, read by otlp_decode ---

    @property
    def spans(self) -> int:
        return self.s[S_TRACE].rows

    def take_string_column(self, int k):
        """(rows, validity bitmap or None, null count, int32 offsets, UTF-8 data) of string column k.

        Once per column: its buffers are handed over (copied, then freed)."""
        cdef StrCol* c = &self.s[k]
        if c.offsets.p == NULL:
            raise RuntimeError("string column already taken")
        bitmap, nulls = packed_validity(&c.valid, c.rows)
        return c.rows, bitmap, nulls, buf_take(&c.offsets), buf_take(&c.data)

    def take_int_column(self, int k):
        """(rows, validity bitmap or None, null count, int64 data) of integer column k, once."""
        cdef IntCol* c = &self.i[k]
        if c.rows and c.data.p == NULL:
            raise RuntimeError("integer column already taken")
        bitmap, nulls = packed_validity(&c.valid, c.rows)
        return c.rows, bitmap, nulls, buf_take(&c.data)

    def take_list_offsets(self):
        """The int32 offsets of the events and links lists, one more than the spans each; once."""
        return buf_take(&self.event_offsets), buf_take(&self.link_offsets)

    # --- request, resource, scope ---

    cdef int request(self, const uint8_t* p, const uint8_t* end) except -1:
        cdef Field f
        while p < end:
            p = next_field(p, end, &f)
            if f.number == REQUEST_RESOURCE_SPANS:
                expect(&f, WIRE_LEN)
                self.resource_spans(f.p, f.p + f.n)
        return 0

    cdef int resource_spans(self, const uint8_t* p, const uint8_t* end) except -1:
        cdef Field f
        cdef const uint8_t* start = p
        cdef const uint8_t* resource = NULL
        cdef Py_ssize_t resource_n = 0
        cdef object schema_url = ""
        # first the resource and schema_url, which may come after the scopes on the wire
        while p < end:
            p = next_field(p, end, &f)
            if f.number == RS_RESOURCE:
                expect(&f, WIRE_LEN)
                if resource != NULL:
                    raise NotPlainWire("two resources: protobuf merges them")
                resource, resource_n = f.p, f.n
            elif f.number == RS_SCHEMA_URL:
                expect(&f, WIRE_LEN)
                schema_url = self.text(f.p, f.n)
            elif f.number == RS_SCOPE_SPANS:
                expect(&f, WIRE_LEN)
        raws, dropped = self.attribute_list(resource, resource_n, RESOURCE_ATTRIBUTES, RESOURCE_DROPPED)
        resource_values = self.resource_hook(raws)
        p = start
        while p < end:
            p = next_field(p, end, &f)
            if f.number == RS_SCOPE_SPANS:
                self.scope_spans(f.p, f.p + f.n, resource_values, dropped, schema_url)
        return 0

    cdef object text(self, const uint8_t* s, Py_ssize_t n):
        need_utf8(s, n)
        return PyUnicode_DecodeUTF8(<const char*>s, n, NULL)

    cdef tuple attribute_list(self, const uint8_t* p, Py_ssize_t n, uint32_t attributes, uint32_t dropped):
        """A Resource's or Scope's attributes as serialized KeyValues, and its dropped count."""
        cdef Field f
        cdef const uint8_t* end = p + n
        cdef list raws = []
        cdef uint32_t count = 0
        while p != NULL and p < end:
            p = next_field(p, end, &f)
            if f.number == attributes:
                expect(&f, WIRE_LEN)
                raws.append(PyBytes_FromStringAndSize(<const char*>f.p, f.n))
            elif f.number == dropped:
                expect(&f, WIRE_VARINT)
                count = <uint32_t>f.value
        return raws, count

    cdef int scope_spans(self, const uint8_t* p, const uint8_t* end, object resource_values,
                         uint32_t resource_dropped, object resource_schema_url) except -1:
        cdef Field f
        cdef const uint8_t* start = p
        cdef const uint8_t* scope = NULL
        cdef const uint8_t* q
        cdef const uint8_t* scope_end
        cdef Py_ssize_t scope_n = 0
        cdef object schema_url = ""
        cdef object name = ""
        cdef object version = ""
        while p < end:
            p = next_field(p, end, &f)
            if f.number == SS_SCOPE:
                expect(&f, WIRE_LEN)
                if scope != NULL:
                    raise NotPlainWire("two scopes: protobuf merges them")
                scope, scope_n = f.p, f.n
            elif f.number == SS_SCHEMA_URL:
                expect(&f, WIRE_LEN)
                schema_url = self.text(f.p, f.n)
            elif f.number == SS_SPANS:
                expect(&f, WIRE_LEN)
        raws, dropped = self.attribute_list(scope, scope_n, SCOPE_ATTRIBUTES, SCOPE_DROPPED)
        if scope != NULL:
            q, scope_end = scope, scope + scope_n
            while q < scope_end:
                q = next_field(q, scope_end, &f)
                if f.number == SCOPE_NAME:
                    expect(&f, WIRE_LEN)
                    name = self.text(f.p, f.n)
                elif f.number == SCOPE_VERSION:
                    expect(&f, WIRE_LEN)
                    version = self.text(f.p, f.n)
        context = self.context_hook(
            resource_values, resource_dropped, resource_schema_url, name, version, raws, dropped, schema_url
        )
        self.contexts.append((context, self.s[S_TRACE].rows))
        p = start
        while p < end:
            p = next_field(p, end, &f)
            if f.number == SS_SPANS:
                self.span(f.p, f.p + f.n)
        return 0

    # --- attributes ---

    cdef int attributes(self, StrCol* c, const uint8_t* p, const uint8_t* end, uint32_t number,
                        bint track) except -1:
        """Writes the JSON object of the `number` fields of a message; tracks read keys if asked."""
        cdef Field f
        cdef bint first = True
        cdef Buf* b = &c.data
        buf_byte(b, b'{')
        while p < end:
            p = next_field(p, end, &f)
            if f.number != number:
                continue
            expect(&f, WIRE_LEN)
            if not first:
                buf_byte(b, b',')
            first = False
            self.key_value(b, f.p, f.n, track)
        buf_byte(b, b'}')
        return str_end(c, True)

    cdef int key_value(self, Buf* b, const uint8_t* s, Py_ssize_t n, bint track) except -1:
        """One KeyValue's `"key":value` fragment. Strings, ints and bools in their plain wire form are
        written here; anything else (and anything not plain) is otlp_decode's _kv_entry's to convert."""
        cdef const uint8_t* end = s + n
        cdef const uint8_t* p = s
        cdef const uint8_t* key = NULL
        cdef const uint8_t* value = NULL
        cdef Py_ssize_t key_n = 0, value_n = 0, text_n = 0
        cdef uint64_t v = 0
        cdef uint8_t tag
        cdef int which
        cdef ReadVal* r
        # 0x0a <len> key 0x12 <len> AnyValue{ exactly one of 0x0a string, 0x10 bool, 0x18 int }
        if n < 4 or p[0] != TAG_KV_KEY:
            return self.python_kv(b, s, n, track)
        p = length(p + 1, end, &key_n)
        key = p
        p += key_n
        if p >= end or p[0] != TAG_KV_VALUE:
            return self.python_kv(b, s, n, track)
        p = length(p + 1, end, &value_n)
        if p + value_n != end or value_n < 2 or not valid_utf8(key, key_n):
            return self.python_kv(b, s, n, track)
        tag = p[0]
        value = p + 1
        which = read_key(key, key_n) if track else -1
        if tag == TAG_STRING:
            value = length(value, end, &text_n)
            if value + text_n != end or not valid_utf8(value, text_n):
                return self.python_kv(b, s, n, track)
            json_string(b, key, key_n)
            buf_byte(b, b':')
            json_string(b, value, text_n)
            if which >= 0:
                r = &self.reads[which]
                r.kind, r.p, r.n = V_STR, value, text_n
                self.any_read = True
            return 0
        if tag == TAG_INT or tag == TAG_BOOL:
            value = varint(value, end, &v)
            if value != end:
                return self.python_kv(b, s, n, track)
            json_string(b, key, key_n)
            buf_byte(b, b':')
            if tag == TAG_INT:
                decimal(b, <int64_t>v)
            elif v:
                buf_put(b, b"true", 4)
            else:
                buf_put(b, b"false", 5)
            if which >= 0:
                r = &self.reads[which]
                r.kind, r.i = (V_INT if tag == TAG_INT else V_BOOL), <int64_t>v
                self.any_read = True
            return 0
        return self.python_kv(b, s, n, track)

    cdef int python_kv(self, Buf* b, const uint8_t* s, Py_ssize_t n, bint track) except -1:
        cdef Py_ssize_t k
        cdef const char* text
        cdef int which
        cdef ReadVal* r
        fragment, read = self.kv_entry(PyBytes_FromStringAndSize(<const char*>s, n))
        text = PyUnicode_AsUTF8AndSize(fragment, &k)
        buf_put(b, text, k)
        if track and read is not None:
            key = read[0].encode()
            which = read_key(<const uint8_t*><const char*>key, len(key))
            if which >= 0:
                r = &self.reads[which]
                r.kind, r.obj = V_PY, len(self.values)
                self.values.append(read[1])
                self.any_read = True
        return 0

    cdef object read_value(self, int k):
        cdef ReadVal* r = &self.reads[k]
        if r.kind == V_STR:
            return PyUnicode_DecodeUTF8(<const char*>r.p, r.n, NULL)
        if r.kind == V_INT:
            return PyLong_FromLongLong(r.i)
        if r.kind == V_BOOL:
            return r.i != 0
        return self.values[r.obj]

    cdef void clear_reads(self) noexcept:
        cdef int k
        for k in range(N_READ):
            self.reads[k].kind = V_ABSENT
        self.any_read = False

    # --- spans ---

    cdef int span(self, const uint8_t* p, const uint8_t* end) except -1:
        cdef Field f
        cdef const uint8_t* start = p
        cdef const uint8_t* trace = NULL
        cdef const uint8_t* span_id = NULL
        cdef const uint8_t* parent = NULL
        cdef const uint8_t* trace_state = NULL
        cdef const uint8_t* name = NULL
        cdef const uint8_t* status = NULL
        cdef const uint8_t* status_message = NULL
        cdef const uint8_t* link_trace
        cdef const uint8_t* link_span
        cdef const uint8_t* q
        cdef const uint8_t* e
        cdef Py_ssize_t trace_n = 0, span_n = 0, parent_n = 0, trace_state_n = 0, name_n = 0
        cdef Py_ssize_t status_n = 0, status_message_n = 0, link_trace_n, link_span_n
        cdef uint64_t start_time = 0, end_time = 0, latest_event = 0, flags = 0
        cdef int32_t kind = 0, status_code = 0
        cdef uint32_t dropped_attrs = 0, dropped_events = 0, dropped_links = 0
        cdef Py_ssize_t links = 0, events_before
        cdef bint bad_link = False
        cdef int k
        bad_link_ids = None
        while p < end:
            p = next_field(p, end, &f)
            k = f.number
            if k == SPAN_TRACE_ID:
                expect(&f, WIRE_LEN)
                trace, trace_n = f.p, f.n
            elif k == SPAN_SPAN_ID:
                expect(&f, WIRE_LEN)
                span_id, span_n = f.p, f.n
            elif k == SPAN_TRACE_STATE:
                expect(&f, WIRE_LEN)
                need_utf8(f.p, f.n)
                trace_state, trace_state_n = f.p, f.n
            elif k == SPAN_PARENT:
                expect(&f, WIRE_LEN)
                parent, parent_n = f.p, f.n
            elif k == SPAN_NAME:
                expect(&f, WIRE_LEN)
                need_utf8(f.p, f.n)
                name, name_n = f.p, f.n
            elif k == SPAN_KIND:
                expect(&f, WIRE_VARINT)
                kind = <int32_t>f.value
            elif k == SPAN_START:
                expect(&f, WIRE_FIXED64)
                start_time = f.value
            elif k == SPAN_END:
                expect(&f, WIRE_FIXED64)
                end_time = f.value
            elif k == SPAN_DROPPED_ATTRS:
                expect(&f, WIRE_VARINT)
                dropped_attrs = <uint32_t>f.value
            elif k == SPAN_DROPPED_EVENTS:
                expect(&f, WIRE_VARINT)
                dropped_events = <uint32_t>f.value
            elif k == SPAN_DROPPED_LINKS:
                expect(&f, WIRE_VARINT)
                dropped_links = <uint32_t>f.value
            elif k == SPAN_STATUS:
                expect(&f, WIRE_LEN)
                if status != NULL:
                    raise NotPlainWire("two statuses: protobuf merges them")
                status, status_n = f.p, f.n
            elif k == SPAN_FLAGS:
                expect(&f, WIRE_FIXED32)
                flags = f.value
            elif k == SPAN_ATTRIBUTES or k == SPAN_EVENTS:
                expect(&f, WIRE_LEN)
            elif k == SPAN_LINKS:
                expect(&f, WIRE_LEN)
                links += 1
                if not bad_link:
                    self.link_ids(f.p, f.p + f.n, &link_trace, &link_trace_n, &link_span, &link_span_n)
                    if (link_trace_n != 16 or link_span_n != 8 or all_zero(link_trace, 16)
                            or all_zero(link_span, 8)):
                        bad_link = True
                        bad_link_ids = (
                            PyBytes_FromStringAndSize(<const char*>link_trace, link_trace_n),
                            PyBytes_FromStringAndSize(<const char*>link_span, link_span_n),
                        )
        if status != NULL:
            q, e = status, status + status_n
            while q < e:
                q = next_field(q, e, &f)
                if f.number == STATUS_MESSAGE:
                    expect(&f, WIRE_LEN)
                    need_utf8(f.p, f.n)
                    status_message, status_message_n = f.p, f.n
                elif f.number == STATUS_CODE:
                    expect(&f, WIRE_VARINT)
                    status_code = <int32_t>f.value
        # the reference decoder's checks, in its order
        if (trace_n != 16 or span_n != 8 or (parent_n and parent_n != 8) or end_time > <uint64_t>INT64_MAX
                or start_time > <uint64_t>INT64_MAX or all_zero(trace, 16) or all_zero(span_id, 8)):
            self.check_rejected(start, end)
            self.reasons.append(self.span_problem(
                PyBytes_FromStringAndSize(<const char*>trace, trace_n),
                PyBytes_FromStringAndSize(<const char*>span_id, span_n),
                PyBytes_FromStringAndSize(<const char*>parent, parent_n), start_time, end_time,
            ))
            return 0
        if bad_link:
            self.check_rejected(start, end)
            self.reasons.append(self.link_problem(*bad_link_ids))
            return 0
        # events, then the span's attributes (the reference's order: both may raise)
        events_before = self.i[IE_TIME].rows
        p = start
        while p < end:
            p = next_field(p, end, &f)
            if f.number == SPAN_EVENTS:
                self.event(f.p, f.p + f.n, &latest_event)
        if latest_event > <uint64_t>INT64_MAX:
            str_truncate(&self.s[SE_NAME], events_before)
            str_truncate(&self.s[SE_ATTRS], events_before)
            int_truncate(&self.i[IE_TIME], events_before)
            int_truncate(&self.i[IE_DROPPED], events_before)
            int_truncate(&self.i[IE_HLC], events_before)
            self.check_rejected(start, end)
            self.reasons.append("event timestamp outside the int64 range")
            return 0
        self.clear_reads()
        self.values.clear()
        self.attributes(&self.s[S_ATTRS], start, end, 9, True)
        hex_id(&self.s[S_TRACE], trace, 16)
        hex_id(&self.s[S_SPAN], span_id, 8)
        if parent_n:
            hex_id(&self.s[S_PARENT], parent, 8)
        else:
            str_null(&self.s[S_PARENT])
        if trace_state_n:
            str_put(&self.s[S_TSTATE], <const char*>trace_state, trace_state_n)
        else:
            str_null(&self.s[S_TSTATE])
        int_put(&self.i[I_FLAGS], <int64_t>flags)
        str_put(&self.s[S_NAME], <const char*>name, name_n)
        if kind < 0 or kind > 5:
            kind = 0
        str_put(&self.s[S_KIND], SPAN_KINDS[kind], strlen(SPAN_KINDS[kind]))
        int_put(&self.i[I_START], <int64_t>start_time)
        if end_time:
            int_put(&self.i[I_END], <int64_t>end_time)
        else:
            int_null(&self.i[I_END])
        int_put(&self.i[I_DROPPED_ATTRS], dropped_attrs)
        int_put(&self.i[I_DROPPED_EVENTS], dropped_events)
        int_put(&self.i[I_DROPPED_LINKS], dropped_links)
        if status_code < 0 or status_code > 2:
            status_code = 0
        str_put(&self.s[S_STATUS], STATUS_CODES[status_code], strlen(STATUS_CODES[status_code]))
        if status_message_n:
            str_put(&self.s[S_STATUS_MSG], <const char*>status_message, status_message_n)
        else:
            str_null(&self.s[S_STATUS_MSG])
        self.contract(kind)
        buf_i32(&self.event_offsets, self.i[IE_TIME].rows)
        if links:
            p = start
            while p < end:
                p = next_field(p, end, &f)
                if f.number == SPAN_LINKS:
                    self.link(f.p, f.p + f.n)
        buf_i32(&self.link_offsets, self.s[SL_TRACE].rows)
        return 0

    cdef int check_rejected(self, const uint8_t* p, const uint8_t* end) except -1:
        """A rejected span's events, links and attributes are not read, but protobuf would still have
        parsed them: a malformed one makes the whole request malformed, as the reference decoder says.
        Attributes go to otlp_attributes.check_attributes: the span's, then each event's, then each link's."""
        cdef Field f, g
        cdef const uint8_t* q
        cdef const uint8_t* e
        cdef list span_raws = [], event_raws = [], link_raws = []
        while p < end:
            p = next_field(p, end, &f)
            if f.number == SPAN_ATTRIBUTES:
                expect(&f, WIRE_LEN)
                span_raws.append(PyBytes_FromStringAndSize(<const char*>f.p, f.n))
            if f.number != SPAN_EVENTS and f.number != SPAN_LINKS:
                continue
            q, e = f.p, f.p + f.n
            while q < e:
                q = next_field(q, e, &g)
                if f.number == SPAN_EVENTS:
                    if g.number == EVENT_TIME:
                        expect(&g, WIRE_FIXED64)
                    elif g.number == EVENT_NAME:
                        expect(&g, WIRE_LEN)
                        need_utf8(g.p, g.n)
                    elif g.number == EVENT_ATTRIBUTES:
                        expect(&g, WIRE_LEN)
                        event_raws.append(PyBytes_FromStringAndSize(<const char*>g.p, g.n))
                    elif g.number == EVENT_DROPPED:
                        expect(&g, WIRE_VARINT)
                else:
                    if g.number == LINK_TRACE_ID or g.number == LINK_SPAN_ID:
                        expect(&g, WIRE_LEN)
                    elif g.number == LINK_TRACE_STATE:
                        expect(&g, WIRE_LEN)
                        need_utf8(g.p, g.n)
                    elif g.number == LINK_ATTRIBUTES:
                        expect(&g, WIRE_LEN)
                        link_raws.append(PyBytes_FromStringAndSize(<const char*>g.p, g.n))
                    elif g.number == LINK_DROPPED:
                        expect(&g, WIRE_VARINT)
                    elif g.number == LINK_FLAGS:
                        expect(&g, WIRE_FIXED32)
        self.check_attributes(span_raws + event_raws + link_raws)
        return 0

    cdef int contract(self, int32_t kind) except -1:
        """span_session_id, span_turn_id, layer and hlc: here when plain, else otlp_decode's rules."""
        cdef ReadVal* session = &self.reads[K_SESSION]
        cdef ReadVal* turn = &self.reads[K_TURN]
        cdef ReadVal* layer = &self.reads[K_LAYER]
        cdef ReadVal* hlc = &self.reads[K_HLC]
        cdef int k
        if session.kind == V_ABSENT:
            session = &self.reads[K_CONVERSATION]
        if (not self.any_read) or (
            (session.kind == V_ABSENT or session.kind == V_STR)
            and (turn.kind == V_ABSENT or turn.kind == V_STR)
            and layer.kind == V_STR and layer.n > 0
            and (hlc.kind == V_ABSENT or hlc.kind == V_INT)
        ):
            if session.kind == V_STR:
                str_put(&self.s[S_SESSION], <const char*>session.p, session.n)
            else:
                str_null(&self.s[S_SESSION])
            if turn.kind == V_STR:
                str_put(&self.s[S_TURN], <const char*>turn.p, turn.n)
            else:
                str_null(&self.s[S_TURN])
            if layer.kind == V_STR:
                str_put(&self.s[S_LAYER], <const char*>layer.p, layer.n)
            else:
                str_null(&self.s[S_LAYER])
            if hlc.kind == V_INT:
                int_put(&self.i[I_HLC], hlc.i)
            else:
                int_null(&self.i[I_HLC])
            return 0
        read = {}
        for k in range(N_READ):
            if self.reads[k].kind != V_ABSENT:
                read[READ_KEYS[k]] = self.read_value(k)
        session_id, turn_id, layer_name, hlc_value = self.contract_values(
            PyUnicode_DecodeUTF8(SPAN_KINDS[kind], strlen(SPAN_KINDS[kind]), NULL), read
        )
        str_py(&self.s[S_SESSION], session_id)
        str_py(&self.s[S_TURN], turn_id)
        str_py(&self.s[S_LAYER], layer_name)
        if hlc_value is None:
            int_null(&self.i[I_HLC])
        else:
            int_put(&self.i[I_HLC], hlc_value)
        return 0

    cdef int link_ids(self, const uint8_t* p, const uint8_t* end, const uint8_t** trace, Py_ssize_t* trace_n,
                      const uint8_t** span_id, Py_ssize_t* span_n) except -1:
        cdef Field f
        trace[0], trace_n[0], span_id[0], span_n[0] = NULL, 0, NULL, 0
        while p < end:
            p = next_field(p, end, &f)
            if f.number == LINK_TRACE_ID:
                expect(&f, WIRE_LEN)
                trace[0], trace_n[0] = f.p, f.n
            elif f.number == LINK_SPAN_ID:
                expect(&f, WIRE_LEN)
                span_id[0], span_n[0] = f.p, f.n
        return 0

    cdef int event(self, const uint8_t* p, const uint8_t* end, uint64_t* latest) except -1:
        cdef Field f
        cdef const uint8_t* start = p
        cdef const uint8_t* name = NULL
        cdef Py_ssize_t name_n = 0
        cdef uint64_t time = 0
        cdef uint32_t dropped = 0
        cdef ReadVal* hlc = &self.reads[K_HLC]
        while p < end:
            p = next_field(p, end, &f)
            if f.number == EVENT_TIME:
                expect(&f, WIRE_FIXED64)
                time = f.value
            elif f.number == EVENT_NAME:
                expect(&f, WIRE_LEN)
                need_utf8(f.p, f.n)
                name, name_n = f.p, f.n
            elif f.number == EVENT_DROPPED:
                expect(&f, WIRE_VARINT)
                dropped = <uint32_t>f.value
            elif f.number == EVENT_ATTRIBUTES:
                expect(&f, WIRE_LEN)
        self.clear_reads()
        self.values.clear()
        self.attributes(&self.s[SE_ATTRS], start, end, 3, True)
        if time > latest[0]:
            latest[0] = time
        int_put(&self.i[IE_TIME], <int64_t>time)
        str_put(&self.s[SE_NAME], <const char*>name, name_n)
        int_put(&self.i[IE_DROPPED], dropped)
        if hlc.kind == V_INT:
            int_put(&self.i[IE_HLC], hlc.i)
        elif hlc.kind == V_ABSENT:
            int_null(&self.i[IE_HLC])
        else:
            value = self.as_int(self.read_value(K_HLC))
            if value is None:
                int_null(&self.i[IE_HLC])
            else:
                int_put(&self.i[IE_HLC], value)
        return 0

    cdef int link(self, const uint8_t* p, const uint8_t* end) except -1:
        cdef Field f
        cdef const uint8_t* start = p
        cdef const uint8_t* trace = NULL
        cdef const uint8_t* span_id = NULL
        cdef const uint8_t* trace_state = NULL
        cdef Py_ssize_t trace_state_n = 0
        cdef uint32_t dropped = 0
        cdef uint64_t flags = 0
        while p < end:
            p = next_field(p, end, &f)
            if f.number == LINK_TRACE_ID:
                trace = f.p
            elif f.number == LINK_SPAN_ID:
                span_id = f.p
            elif f.number == LINK_TRACE_STATE:
                expect(&f, WIRE_LEN)
                need_utf8(f.p, f.n)
                trace_state, trace_state_n = f.p, f.n
            elif f.number == LINK_DROPPED:
                expect(&f, WIRE_VARINT)
                dropped = <uint32_t>f.value
            elif f.number == LINK_FLAGS:
                expect(&f, WIRE_FIXED32)
                flags = f.value
            elif f.number == LINK_ATTRIBUTES:
                expect(&f, WIRE_LEN)
        hex_id(&self.s[SL_TRACE], trace, 16)
        hex_id(&self.s[SL_SPAN], span_id, 8)
        if trace_state_n:
            str_put(&self.s[SL_TSTATE], <const char*>trace_state, trace_state_n)
        else:
            str_null(&self.s[SL_TSTATE])
        self.attributes(&self.s[SL_ATTRS], start, end, 4, False)
        int_put(&self.i[IL_DROPPED], dropped)
        int_put(&self.i[IL_FLAGS], <int64_t>flags)
        return 0


def walk(body, hooks) -> Walk:
    """Walks a serialized ExportTraceServiceRequest into a Walk's column buffers.

    Raises NotPlainWire when the body is malformed or uses wire forms this walker leaves to the
    reference decoder (merged singular messages, mistyped known fields, groups).
    """
    cdef const uint8_t[::1] view = body
    cdef Walk result = Walk(hooks)
    if view.shape[0]:
        result.request(&view[0], &view[0] + view.shape[0])
    return result
