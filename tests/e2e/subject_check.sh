#!/usr/bin/env bash
# subject-check passes the native worker and the Streaming adapter (on the
# stand-in), and fails a program that speaks no protocol, saying why.
source "$(dirname "$0")/lib.sh"
S=$1
"$S" subject-check "$S" >"$SCRATCH/native.txt" || { cat "$SCRATCH/native.txt"; fail "the native worker failed subject-check"; }
SHMSTRESS_STREAMING_PATH=$PWD/tests/streaming_standin "$S" subject-check "/usr/bin/python3 subjects/streaming/adapter.py" \
  >"$SCRATCH/adapter.txt" || { cat "$SCRATCH/adapter.txt"; fail "the Streaming adapter failed subject-check"; }
set +e
"$S" subject-check /bin/true >"$SCRATCH/true.txt"
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "/bin/true passed subject-check (exit $rc)"
grep -q '^FAIL  a clean single-rank trial succeeds' "$SCRATCH/true.txt" || fail "no reason given for /bin/true"
echo "subject-check: native and adapter pass, /bin/true fails ($(grep -c '^FAIL' "$SCRATCH/true.txt") checks)"
