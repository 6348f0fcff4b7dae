"""What every adapter of shmstress's worker protocol (docs/worker-protocol.md) writes the same way:
exit codes, the clocks an event carries, and events as lines of at most PIPE_BUF bytes, long
results split over continuation lines. Each adapter puts this folder on sys.path itself
(subjects/<name>/adapter.py runs as a script, by path); it holds no subject.toml, so it is no
subject.
"""

import json
import os
import threading
import time

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_ENV = 2
EXIT_UNAVAILABLE = 3
EXIT_BUG = 70

PIPE_BUF = 4096
SHM_DIR = '/dev/shm'


def mono_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def cpu_wait_ns() -> int:
    """This thread's cumulative wait for a CPU (run_delay, docs/worker-protocol.md), or -1.

    Only the main thread's counts: the supervisor checks the claims against the main thread's final
    value, and the ops run there (gloo's threads do not).
    """
    if threading.current_thread() is not threading.main_thread():
        return -1
    try:
        fd = os.open('/proc/thread-self/schedstat', os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # e.g. EMFILE in an exhaustion scenario: leave the field out
        return -1
    try:
        return int(os.read(fd, 128).split()[1])
    except (OSError, ValueError, IndexError):
        return -1
    finally:
        os.close(fd)


def env_int(key: str, default: int) -> int:
    value = os.environ.get(key, '')
    try:
        return int(value) if value != '' else default
    except ValueError:
        return default


def encode(event: dict) -> bytes:
    text = json.dumps(event, ensure_ascii=False, separators=(',', ':'))
    return (text + '\n').encode('utf-8', 'replace')  # lone surrogates (odd file names) -> '?'


def cut(event: dict) -> bytes:
    """One line for an event that cannot be split further: what does not fit is cut, marked "truncated"."""
    data = encode(event)
    if len(data) <= PIPE_BUF:
        return data
    event = json.loads(json.dumps(event))  # a private deep copy
    for key in ('value', 'args'):
        if key in event:
            event[key] = {'truncated': True}
    error = event.get('error')
    if isinstance(error, dict):
        error['message'] = str(error.get('message', ''))[:256] + '... (truncated)'
    data = encode(event)
    if len(data) > PIPE_BUF:  # still too long: keep only what identifies the event
        keep = ('t', 'type', 'pid', 'job', 'rank', 'local_rank', 'worker', 'op', 'id')
        event = {k: event[k] for k in keep if k in event}
        event['truncated'] = True
        data = encode(event)
    return data


PAGE = os.sysconf('SC_PAGESIZE')


def append_line(fd: int, line: bytes) -> None:
    """Append one event line so that it lies within one page of the file.

    A SIGKILL stops write(2) to a regular file between the pages it copies, so a line spanning a
    page boundary can be torn by a kill, and a torn event makes the trial unknown (the harness
    kills right after events on purpose). Spaces fill the page first when the line would cross:
    JSON allows the leading whitespace, so the line still parses alone (as the native worker's
    EventLog does, harness/events.cc)."""
    try:
        used = os.lseek(fd, 0, os.SEEK_END) % PAGE  # ESPIPE for a pipe: nothing to pad; O_APPEND writes at the end
        if len(line) <= PAGE and used + len(line) > PAGE:
            os.write(fd, b' ' * (PAGE - used))
    except OSError:
        pass
    os.write(fd, line)


def lines(event: dict) -> list:
    """The event as lines of at most PIPE_BUF bytes each, nothing dropped (worker-protocol.md,
    "Large values: continuation lines"): the lists of its `value` and `args` are split over
    lines that repeat the event's identity, every line but the last marked "continues". Only a
    single string too long for any line is cut (marked "truncated")."""
    data = encode(event)
    if len(data) <= PIPE_BUF:
        return [data]
    event = json.loads(json.dumps(event))  # a private deep copy
    error = event.get('error')
    if isinstance(error, dict) and isinstance(error.get('message'), str) and len(error['message']) > 1024:
        error['message'] = error['message'][:1024] + '... (truncated)'
        event['truncated'] = True
    # The skeleton: the event with every list of value/args empty; each line is a skeleton
    # holding a run of one list's elements (so nothing is counted twice when merged).
    items = []
    skeleton = dict(event)
    for key in ('value', 'args'):
        holder = event.get(key)
        if isinstance(holder, dict):
            skeleton[key] = {k: ([] if isinstance(v, list) else v) for k, v in holder.items()}
            items += [(key, k, x) for k, v in holder.items() if isinstance(v, list) for x in v]
    # Room for what any line may carry on top of the skeleton: "continues", and
    # "truncated" once an element has been cut.
    base = len(encode(dict(skeleton, continues=True, truncated=True)))
    if base > PIPE_BUF or not items:
        return [cut(event)]
    out, line, size = [], None, base

    def flush(last: bool) -> None:
        if line is not None:
            if not last:
                line['continues'] = True
            out.append(encode(line))

    for key, name, x in items:
        cost = len(json.dumps(x, ensure_ascii=False, separators=(',', ':')).encode('utf-8', 'replace')) + 1
        if base + cost > PIPE_BUF:  # one element too long for any line: say so, keep the rest
            x = {'truncated': True} if isinstance(x, (dict, list)) else str(x)[:256]
            cost = len(json.dumps(x).encode()) + 1
            skeleton['truncated'] = True
        if line is None or size + cost > PIPE_BUF:
            flush(last=False)
            line = json.loads(json.dumps(skeleton))
            size = base
        line[key][name].append(x)
        size += cost
    if skeleton.get('truncated'):
        line['truncated'] = True
    flush(last=True)
    return out
