#!/usr/bin/env bash
# shmcoord is an installable CMake package: a release build (failpoints
# compiled out) installs, and a separate project finds it and runs.
source "$(dirname "$0")/lib.sh"
src=$(pwd)
cmake -S "$src" -B "$SCRATCH/lib" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHMSTRESS_LIB_ONLY=ON \
  -DSHMCOORD_FAILPOINTS=OFF >/dev/null
cmake --build "$SCRATCH/lib" --target shmcoord >/dev/null
cmake --install "$SCRATCH/lib" --prefix "$SCRATCH/prefix" >/dev/null
cmake -S "$src/tests/consumer" -B "$SCRATCH/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$SCRATCH/prefix" >/dev/null
cmake --build "$SCRATCH/consumer" >/dev/null
out=$("$SCRATCH/consumer/consumer")
echo "$out"
[[ $out == "prefix 0, failpoints off" ]] || fail "consumer said: $out"
[[ -z $(ls /dev/shm | grep '^shmconsumer\.') ]] || fail "the consumer left segments behind"
