#!/usr/bin/python3
"""A subject that writes events which do not fit the worker protocol (wrong
types, unknown types, garbage, a torn line, a huge event split over
continuation lines), then exits 0. Every trial it runs must end up unknown
with history errors — never abort the run, `check` or `report`."""
import json
import os
import sys
import time

fd = int(os.environ.get('SHMSTRESS_EVENTS_FD', '3'))
job = int(os.environ.get('SHMSTRESS_JOB', '-1'))
rank = int(os.environ.get('SHMSTRESS_RANK', '-1'))
pid = os.getpid()


def raw(data: bytes) -> None:
    os.write(fd, data)


def ev(**fields) -> None:
    base = {'t': time.monotonic_ns(), 'pid': pid, 'job': job, 'rank': rank, 'local_rank': rank}
    base.update(fields)
    raw((json.dumps(base) + '\n').encode())


ev(type='subject', available=True, name='bad-events')
ev(type=1)                                            # a number where the type goes
ev(type='invoke', op='acquire', id='one', args=[])   # id and args of the wrong type
ev(type='gossip', note='unknown type')
ev(type='subject', available='yes', reason=5)
ev(type='trial', phase=7)
raw(b'not json at all\n')
raw(b'{"t": 1, "type": "ok", "op": "clean", "id": 9, "value": {"removed": ["/a",')  # torn
ev(type='invoke', op='clean', id=1, args={})
names = ['/bad-events.%06d_shard_states' % i for i in range(300)]
half = len(names) // 2
ev(type='ok', op='clean', id=1, continues=True, value={'removed': names[:half], 'kept': [], 'skipped': []})
ev(type='ok', op='clean', id=1, value={'removed': names[half:], 'kept': [], 'skipped': []})
sys.exit(0)
