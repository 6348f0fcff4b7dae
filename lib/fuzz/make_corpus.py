#!/usr/bin/env python3
"""Writes the seed corpus for records_fuzz into lib/fuzz/corpus/.

Each seed is one selector byte (records_fuzz.cc's Decoder enum) followed by a
record that its decoder accepts, so the fuzzer starts from the valid shapes
instead of having to discover magic numbers and nested lengths. Layouts are
those of lib/src/records.h (layout version 3) on x86-64 Linux (a LockWord is
16 bytes: owner u64, seq u32, waiters u32); a seed that drifts from the layout
only makes a weaker seed, never a wrong test.

Usage: python3 lib/fuzz/make_corpus.py   (rewrites the corpus; run from anywhere)
"""
import pathlib
import struct

# records_fuzz.cc's Decoder enum.
REGISTRY_PADDED, REGISTRY_RAW, SLOT, BARRIER_PADDED, BARRIER_RAW, DIRS, LEGACY, UTF8, UTF8_PREFIX = range(9)

REGISTRY_MAGIC = 0x31474552434D4853  # "SHMCREG1"
BARRIER_MAGIC = 0x31524142434D4853  # "SHMCBAR1"
VERSION = 3
LOCK = struct.pack("<QII", 0, 5, 0)
MAX_RANKS, SLOTS = 64, 256
JOB_KEY_MAX, REASON_MAX, DIR_BLOB = 128, 256, 4096
OWNER_SIZE = 32  # pid, lease cell, lease token, start time, pid namespace
SLOT_SIZE = 24 + JOB_KEY_MAX + MAX_RANKS * (OWNER_SIZE + 8) + REASON_MAX + DIR_BLOB  # 7064
PART_SIZE = OWNER_SIZE + 16  # owner, state, pad, 64-bit arrival mark
REGISTRY_SIZE = 64 + SLOTS * SLOT_SIZE  # 1808448
BARRIER_SIZE = 64 + REASON_MAX + MAX_RANKS * PART_SIZE  # 3392


def owner(pid: int, cell: int, token: int) -> bytes:
    return struct.pack("<iIQQQ", pid, cell, token, 5, 4026531836)


def cstr(s: str, cap: int) -> bytes:
    b = s.encode()
    return b + bytes(cap - len(b))


def dir_blob(dirs) -> bytes:
    out = b""
    for path, remote in dirs:
        p = path.encode()
        out += struct.pack("<BH", 1 if remote else 0, len(p)) + p
    return out


def registry_header() -> bytes:
    return struct.pack("<QIIIIIIQQ", REGISTRY_MAGIC, VERSION, REGISTRY_SIZE, SLOTS, 0, 3, 0, 9, 123456789) + LOCK


def slot(state: int, reason: str) -> bytes:
    blob = dir_blob([("/tmp/shm/a", False), ("/data/caf\u00e9", True)])
    holders = owner(1234, 17, 0xABCDEF) + struct.pack("<II", 1, 0)
    holders += owner(1235, 18, 0x123456) + struct.pack("<II", 2, 0)
    holders += bytes(MAX_RANKS * (OWNER_SIZE + 8) - len(holders))
    rec = struct.pack("<IIIIQ", state, 2, len(blob), 8 if state == 3 else 0, 7)
    rec += cstr("job-\u03b1", JOB_KEY_MAX) + holders + cstr(reason, REASON_MAX) + blob
    return rec  # the rest of the dir field is zero-filled by the fuzz target


def barrier(broken: bool, full: bool) -> bytes:
    # magic, version, layout size, retired, num_procs, round (generation 41, 1 arrived), broken, seq, waiters, claim
    rec = struct.pack("<QIIIIQIIII", BARRIER_MAGIC, VERSION, BARRIER_SIZE, 0, 3, 41 << 32 | 1, 8 if broken else 0, 77, 1, 0)
    rec += LOCK + cstr("participant 2 (pid 99) died" if broken else "", REASON_MAX)
    rec += owner(1234, 3, 0xFEED) + struct.pack("<IIQ", 1, 0, 42) + owner(1235, 4, 0xBEEF) + struct.pack("<IIQ", 2, 0, 41)
    if full:
        rec += bytes(BARRIER_SIZE - len(rec))
    return rec


def legacy(dirs, prefix: str) -> bytes:
    body = b"".join(d.encode() + b"\0" for d in dirs) + prefix.encode()
    return struct.pack("<i", 4 + len(body)) + body


SEEDS = {
    "registry_header": (REGISTRY_PADDED, registry_header()),
    "registry_truncated": (REGISTRY_RAW, registry_header()),
    "slot_active": (SLOT, slot(2, "")),
    "slot_poisoned": (SLOT, slot(3, "ranks disagree on local dirs")),
    "barrier_header": (BARRIER_PADDED, barrier(False, False)),
    "barrier_broken_full": (BARRIER_RAW, barrier(True, True)),
    "dirs": (DIRS, dir_blob([("/tmp/a", False), ("/data/\u00fc/\U0001d11e", True)])),
    "legacy_locals": (LEGACY, legacy(["/tmp/a", "/mnt/caf\u00e9"], "3")),
    "legacy_released": (LEGACY, struct.pack("<i", 0)),
    "utf8": (UTF8, "h\u00e9llo \u20ac \U0001d11e /\U0010ffff".encode()),
    "utf8_prefix": (UTF8_PREFIX, bytes([13]) + ("ab\u20ac" * 9).encode()),
}


def main() -> None:
    out = pathlib.Path(__file__).resolve().parent / "corpus"
    out.mkdir(exist_ok=True)
    for name, (selector, rec) in SEEDS.items():
        (out / name).write_bytes(bytes([selector]) + rec)


if __name__ == "__main__":
    main()
