#!/usr/bin/env python3
"""Writes the seed corpus for records_fuzz into lib/fuzz/corpus/.

Each seed is one selector byte (records_fuzz.cc's Decoder enum) followed by a
record that its decoder accepts, so the fuzzer starts from the valid shapes
instead of having to discover magic numbers and nested lengths. Layouts are
those of lib/src/records.h on x86-64 Linux (pthread_mutex_t is 40 bytes); a
seed that drifts from the layout only makes a weaker seed, never a wrong test.

Usage: python3 lib/fuzz/make_corpus.py   (rewrites the corpus; run from anywhere)
"""
import pathlib
import struct

# records_fuzz.cc's Decoder enum.
REGISTRY_PADDED, REGISTRY_RAW, SLOT, BARRIER_PADDED, BARRIER_RAW, DIRS, LEGACY, UTF8 = range(8)

REGISTRY_MAGIC = 0x31474552434D4853  # "SHMCREG1"
BARRIER_MAGIC = 0x31524142434D4853  # "SHMCBAR1"
MUTEX = bytes(40)
MAX_RANKS, SLOTS = 64, 256
JOB_KEY_MAX, REASON_MAX, DIR_BLOB = 128, 256, 4096
SLOT_SIZE = 32 + JOB_KEY_MAX + MAX_RANKS * 16 + REASON_MAX + DIR_BLOB  # 5536
REGISTRY_SIZE = 80 + SLOTS * SLOT_SIZE
BARRIER_SIZE = 80 + REASON_MAX + MAX_RANKS * 24  # 1872


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
    return struct.pack("<QIIIIIIQ", REGISTRY_MAGIC, 1, REGISTRY_SIZE, SLOTS, 0, 3, 0, 9) + MUTEX


def slot(state: int, reason: str) -> bytes:
    blob = dir_blob([("/tmp/shm/a", False), ("/data/caf\u00e9", True)])
    holders = struct.pack("<iIQ", 1234, 1, 5) + struct.pack("<iIQ", 1235, 2, 6)
    holders += bytes(MAX_RANKS * 16 - len(holders))
    rec = struct.pack("<IIIIQII", state, 2, 2, len(blob), 7, 8 if state == 3 else 0, 0)
    rec += cstr("job-\u03b1", JOB_KEY_MAX) + holders + cstr(reason, REASON_MAX) + blob
    return rec  # the rest of the dir field is zero-filled by the fuzz target


def barrier(broken: bool, full: bool) -> bytes:
    rec = struct.pack("<QIIIIIIII", BARRIER_MAGIC, 1, BARRIER_SIZE, 0, 3, 41, 1, 8 if broken else 0, 0)
    rec += MUTEX + cstr("participant 2 (pid 99) died" if broken else "", REASON_MAX)
    rec += struct.pack("<iIQII", 1234, 1, 5, 42, 0) + struct.pack("<iIQII", 1235, 2, 6, 41, 0)
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
}


def main() -> None:
    out = pathlib.Path(__file__).resolve().parent / "corpus"
    out.mkdir(exist_ok=True)
    for name, (selector, rec) in SEEDS.items():
        (out / name).write_bytes(bytes([selector]) + rec)


if __name__ == "__main__":
    main()
