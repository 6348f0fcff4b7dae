#!/usr/bin/env bash
# Arrows point down (DESIGN.md §1; docs/architecture.md, "Rooms and arrows"):
# every #include in a C/C++ file of a room names a file of that room or of a
# room its row in ROOMS lists. A room is a top folder, its subfolders
# included (harness/fuzz/ is the harness's, lib/fuzz/ the library's). An
# include is judged by the file it resolves to, as the build resolves it: the
# including file's folder, then the source root and the include folders of
# shmcoord (lib/include/, and lib/src/ for its own targets) and of the harness
# (harness/, for every target linking it), so a bare "stored.h" from reports/
# counts as an arrow into harness/. Includes that resolve to no file of the
# tree (the standard library, third-party packages) are no arrows.
# A top folder holding C/C++ sources that is not in ROOMS fails: a new room
# gets a row first, here and in docs/architecture.md's table, which must say
# what ROOMS says.
#   layering_test.sh SOURCE_DIR
set -euo pipefail

# room       may include (besides its own files)
ROOMS='
lib
harness      lib
injectors    harness lib
reports      harness lib
cli          reports injectors harness lib
bench        harness lib
fuzz         reports injectors harness lib
tests        cli reports injectors harness lib
'

declare -A MAY
while read -r room allowed; do
  [[ -n $room ]] && MAY[$room]=" $room $allowed "
done <<<"$ROOMS"

is_source() { [[ $1 =~ \.(h|hh|hpp|c|cc|cpp)$ ]]; }

# The tree's files, relative to it: git's view when it is a work tree (tracked
# and new files, not ignored ones such as build dirs), else every file outside
# build*/ and hidden folders.
tree_files() {
  local root=$1
  if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
     [[ $(git -C "$root" rev-parse --show-toplevel) == "$(cd "$root" && pwd -P)" ]]; then
    git -C "$root" ls-files --cached --others --exclude-standard
  else
    (cd "$root" && find . -mindepth 1 \( -name 'build*' -o -name '.*' \) -prune -o -type f -print | sed 's|^\./||')
  fi
}

# normalize PATH: PATH relative to the root with "." and ".." folded, in
# RESOLVED; fails for a path that leaves the root.
normalize() {
  local part
  local -a parts out=()
  IFS=/ read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    case $part in
      '' | .) ;;
      ..) ((${#out[@]} > 0)) || return 1; unset 'out[-1]' ;;
      *) out+=("$part") ;;
    esac
  done
  local IFS=/
  RESOLVED="${out[*]}"
}

# resolve ROOT FILE KIND INCLUDE: the included file relative to ROOT, if it is
# one of the tree's, in RESOLVED.
resolve() {
  local root=$1 file=$2 kind=$3 inc=$4 d
  local -a search=()
  [[ $kind == '"' ]] && search+=("${file%/*}")
  search+=(. lib/include lib/src harness)
  for d in "${search[@]}"; do
    if [[ -f $root/$d/$inc ]]; then
      normalize "$d/$inc"
      return
    fi
  done
  return 1
}

# check_tree ROOT: prints every arrow that points where its room may not go
# and every unlisted room; fails if there is one.
check_tree() {
  local root=$1 bad=0 f room n line inc kind target troom allowed
  local -A unlisted=()
  local re='^[[:space:]]*#[[:space:]]*include[[:space:]]*(["<])([^">]+)[">]'
  while IFS= read -r f; do
    is_source "$f" || continue
    [[ $f == */* ]] || continue  # files at the root belong to no room
    room=${f%%/*}
    if [[ -z ${MAY[$room]+x} ]]; then
      unlisted[$room]=1
      continue
    fi
    while IFS=: read -r n line; do
      [[ $line =~ $re ]] || continue
      kind=${BASH_REMATCH[1]} inc=${BASH_REMATCH[2]}
      resolve "$root" "$f" "$kind" "$inc" || continue
      target=$RESOLVED
      [[ $target == */* ]] || continue
      troom=${target%%/*}
      if [[ ${MAY[$room]} != *" $troom "* ]]; then
        allowed=${MAY[$room]# }
        echo "FAIL: $f:$n: $room/ includes $target: $room/ may include only ${allowed% }" >&2
        bad=1
      fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include' "$root/$f" || true)
  done < <(tree_files "$root")
  for room in "${!unlisted[@]}"; do
    echo "FAIL: $room/ holds C/C++ sources but has no row in ROOMS (layering_test.sh)" >&2
    bad=1
  done
  return $bad
}

# check_docs ROOT: docs/architecture.md's table of rooms ("Rooms and arrows")
# says what ROOMS says: the same rooms, each with the same arrows.
check_docs() {
  local doc=$1/docs/architecture.md bad=0 row room cell want got tok
  local -A seen=()
  [[ -f $doc ]] || { echo "FAIL: no $doc to state the rooms and arrows" >&2; return 1; }
  while IFS= read -r row; do
    [[ $row =~ ^\|\ \`([a-z_]+)/\`\ \| ]] || continue
    room=${BASH_REMATCH[1]}
    cell=${row%|}
    cell=${cell##*|}
    got=""
    while [[ $cell =~ \`([a-z_]+)/\`(.*) ]]; do
      got+="${BASH_REMATCH[1]} "
      cell=${BASH_REMATCH[2]}
    done
    seen[$room]=1
    if [[ -z ${MAY[$room]+x} ]]; then
      echo "FAIL: docs/architecture.md lists a room $room/ that ROOMS has no row for" >&2
      bad=1
      continue
    fi
    want=""
    for tok in ${MAY[$room]}; do [[ $tok == "$room" ]] || want+="$tok "; done
    got=$(tr ' ' '\n' <<<"$got" | sort | xargs)
    want=$(tr ' ' '\n' <<<"$want" | sort | xargs)
    if [[ $got != "$want" ]]; then
      echo "FAIL: docs/architecture.md says $room/ may include: ${got:-nothing}; ROOMS says: ${want:-nothing}" >&2
      bad=1
    fi
  done < <(sed -n '/^## Rooms and arrows/,/^## [^R]/p' "$doc")
  for room in "${!MAY[@]}"; do
    [[ -n ${seen[$room]+x} ]] || { echo "FAIL: docs/architecture.md has no row for $room/" >&2; bad=1; }
  done
  return $bad
}

# The check itself: on a made-up tree it must see an arrow up by a prefixed
# include, one by a bare include the harness's include path resolves, and a
# room without a row, and nothing else.
SELF_TEST_TREE=
trap '[[ -z $SELF_TEST_TREE ]] || rm -rf "$SELF_TEST_TREE"' EXIT
self_test() {
  SELF_TEST_TREE=$(mktemp -d)
  local t=$SELF_TEST_TREE
  mkdir -p "$t/lib/include/shmcoord" "$t/harness/fuzz" "$t/reports" "$t/cli" "$t/newroom"
  : >"$t/lib/include/shmcoord/a.h"
  : >"$t/harness/h.h"
  : >"$t/reports/reports.h"
  printf '#include "h.h"\n#include <shmcoord/a.h>\n#include <vector>\n' >"$t/harness/ok.cc"
  printf '#include "reports/reports.h"\n#include "harness/h.h"\n#include "h.h"\n' >"$t/cli/ok.cc"
  printf '#include "../h.h"\n  #  include "reports/reports.h"\n' >"$t/harness/fuzz/up.cc"
  printf '#include "h.h"\n' >"$t/lib/up.cc"
  printf '#include "lib/include/shmcoord/a.h"\n' >"$t/newroom/x.cc"
  local out
  out=$(check_tree "$t" 2>&1) && { echo "FAIL: the check passed a tree with arrows up" >&2; return 1; }
  local want=(
    "FAIL: harness/fuzz/up.cc:2: harness/ includes reports/reports.h"
    "FAIL: lib/up.cc:1: lib/ includes harness/h.h"
    "FAIL: newroom/ holds C/C++ sources but has no row"
  )
  for w in "${want[@]}"; do
    grep -qF "$w" <<<"$out" || { echo "FAIL: the check did not say: $w" >&2; echo "$out" >&2; return 1; }
  done
  [[ $(grep -c '^FAIL' <<<"$out") == "${#want[@]}" ]] || { echo "FAIL: the check said more:" >&2; echo "$out" >&2; return 1; }
}

root=${1:?usage: layering_test.sh SOURCE_DIR}
for d in lib harness injectors reports cli; do
  [[ -d $root/$d ]] || { echo "FAIL: no $root/$d" >&2; exit 1; }
done
self_test
check_tree "$root"
check_docs "$root"
echo "layering: ok"
