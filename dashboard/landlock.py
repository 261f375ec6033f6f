"""Linux Landlock for the SQL console's process: it may read a few folders and write nothing, anywhere.

DuckDB's own settings (`enable_external_access`, `allowed_directories`) allow reading and writing alike in the
folders they open, and the console must read the store's segments. So the console runs its queries in a child
process that first asks the kernel (Landlock, Linux 5.13+) to refuse it every file write, creation, removal,
rename and truncation, every TCP bind and connect, and every read outside the folders it names. The rules hold
for that process for good: no statement, setting or DuckDB bug can lift them.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Iterable
from pathlib import Path

# x86_64 and the generic syscall table (arm64) share these numbers.
_CREATE_RULESET = 444
_ADD_RULE = 445
_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_EXECUTE = 1 << 0
_WRITE_FILE = 1 << 1
_READ_FILE = 1 << 2
_READ_DIR = 1 << 3
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE_CHAR = 1 << 6
_MAKE_DIR = 1 << 7
_MAKE_REG = 1 << 8
_MAKE_SOCK = 1 << 9
_MAKE_FIFO = 1 << 10
_MAKE_BLOCK = 1 << 11
_MAKE_SYM = 1 << 12
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_IOCTL_DEV = 1 << 15  # ABI 5
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1

READ = _READ_FILE | _READ_DIR


class LandlockUnavailable(Exception):
    """No Landlock here (not Linux, older than 5.13, or turned off): the console cannot be sealed."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when there is none."""
    if not os.uname().sysname == "Linux":
        return 0
    version = _libc().syscall(
        _CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
    )
    return max(int(version), 0)


def _handled_fs(abi: int) -> int:
    rights = (
        _EXECUTE | _WRITE_FILE | _READ_FILE | _READ_DIR | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR
    )
    rights |= _MAKE_REG | _MAKE_SOCK | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def restrict_to_reading(folders: Iterable[Path]) -> int:
    """Seals this process: it may read files beneath `folders` (those that exist), and write nothing anywhere.

    Files already open stay usable (DuckDB's open catalog). Returns the ABI version applied; raises
    LandlockUnavailable when the kernel cannot do it, so the caller refuses to run rather than run unsealed.
    """
    abi = abi_version()
    if abi < 1:
        raise LandlockUnavailable("this kernel offers no Landlock (Linux 5.13 or later is needed)")
    libc = _libc()
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    attr = struct.pack("=QQ", _handled_fs(abi), net) if net else struct.pack("=Q", _handled_fs(abi))
    ruleset = libc.syscall(
        _CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)
    )
    if ruleset < 0:
        raise LandlockUnavailable(f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}")
    try:
        for folder in folders:
            _allow_reading(libc, ruleset, folder)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise LandlockUnavailable(f"prctl(NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")
        if libc.syscall(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:
            raise LandlockUnavailable(f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return abi


def _allow_reading(libc: ctypes.CDLL, ruleset: int, folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # nothing there to read yet (a store without a snapshot has no derived/)
    try:
        access = READ if folder.is_dir() else _READ_FILE
        rule = struct.pack("=Qi", access, fd)  # struct landlock_path_beneath_attr is packed
        if (
            libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.c_char_p(rule), ctypes.c_uint32(0))
            != 0
        ):
            raise LandlockUnavailable(
                f"landlock_add_rule({folder}) failed: {os.strerror(ctypes.get_errno())}"
            )
    finally:
        os.close(fd)
