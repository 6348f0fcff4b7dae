#!/usr/bin/env bash
# Arrows point down DESIGN.md's table: harness/ and injectors/ include nothing
# from reports/ or cli/, and reports/ nothing from cli/. The run loop emits
# events (harness/run_events.h); reports subscribe.
#   layering_test.sh SOURCE_DIR
set -euo pipefail
root=${1:?usage: layering_test.sh SOURCE_DIR}
for d in harness injectors reports cli; do
  [[ -d $root/$d ]] || { echo "FAIL: no $root/$d" >&2; exit 1; }
done
[[ -f $root/harness/run.cc ]] || { echo "FAIL: no harness/run.cc under $root" >&2; exit 1; }
bad=0
check() {  # check PATTERN DIR...
  local pattern=$1; shift
  local hits
  hits=$(cd "$root" && grep -rnE "$pattern" "$@" --include='*.h' --include='*.cc' || true)
  if [[ -n $hits ]]; then
    echo "FAIL: an include points up:" >&2
    echo "$hits" >&2
    bad=1
  fi
}
# harness/fuzz/ holds test drivers of the whole offline path (check, then
# what `report` draws), like tests/: not part of the harness library.
check '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<](\.\./)*(reports|cli)/' --exclude-dir=fuzz harness injectors
check '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<](\.\./)*cli/' reports
# The check itself: it must see an include that does point up.
probe=$(printf '#include "reports/reports.h"\n' | grep -cE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<](\.\./)*(reports|cli)/' || true)
[[ $probe == 1 ]] || { echo "FAIL: the include pattern does not match a known bad include" >&2; exit 1; }
(( bad == 0 )) && echo "layering: ok"
exit $bad
