"""Types of the compiled OTLP walker (collector/_otlp_wire.pyx), for mypy and readers."""

from collections.abc import Callable
from typing import Any

STRING_COLUMNS: tuple[str, ...]
INT_COLUMNS: tuple[str, ...]
READ_KEYS: tuple[str, ...]

class NotPlainWire(ValueError): ...

class Walk:
    contexts: list[tuple[tuple[Any, ...], int]]
    reasons: list[str]
    @property
    def spans(self) -> int: ...
    def take_string_column(self, k: int) -> tuple[int, bytes | None, int, bytes, bytes]: ...
    def take_int_column(self, k: int) -> tuple[int, bytes | None, int, bytes]: ...
    def take_list_offsets(self) -> tuple[bytes, bytes]: ...

def walk(body: bytes | bytearray | memoryview, hooks: tuple[Callable[..., Any], ...]) -> Walk: ...
