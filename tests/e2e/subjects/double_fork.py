#!/usr/bin/env python3
"""A subject whose worker leaves processes behind the way a careless data
loader does: it forks a child that starts its own session and forks a
grandchild, then exits at once. Both descendants run `sleep` with argv[0] set
to $SHMSTRESS_TEST_TOKEN so a test can look for them on the whole machine.
The harness's orphan audit must find both and nothing may outlive the trial.
Only for tests/e2e/no_orphans.sh."""
import json
import os
import sys
import time

token = os.environ.get("SHMSTRESS_TEST_TOKEN", "shmstress-orphan")
if sys.argv[1:] != ["worker"]:
    sys.exit(2)
if os.environ.get("SHMSTRESS_ROLE") == "cleanup":
    sys.exit(0)

fd = int(os.environ.get("SHMSTRESS_EVENTS_FD", "3"))


def emit(event):
    event.update(t=time.monotonic_ns(), pid=os.getpid(), job=int(os.environ["SHMSTRESS_JOB"]),
                 rank=int(os.environ["SHMSTRESS_RANK"]), local_rank=int(os.environ["SHMSTRESS_LOCAL_RANK"]))
    os.write(fd, (json.dumps(event) + "\n").encode())


# Tell the test (through the history) which pids the descendants have, as the
# worker sees them, before it goes.
r, w = os.pipe()
child = os.fork()
if child == 0:
    os.close(r)
    os.setsid()  # out of the worker's process group: a killpg would miss it
    grandchild = os.fork()
    if grandchild == 0:
        os.close(w)
        os.execv("/bin/sleep", [token + "-grandchild", "30"])
    os.write(w, f"{os.getpid()} {grandchild}\n".encode())
    os.close(w)
    os.execv("/bin/sleep", [token + "-child", "30"])
os.close(w)
pids = os.read(r, 64).decode().split()
emit({"type": "invoke", "op": "clean", "id": 1, "args": {}})
emit({"type": "ok", "op": "clean", "id": 1, "value": {"removed": [], "kept": [], "skipped": [], "left_behind": pids}})
sys.exit(0)
