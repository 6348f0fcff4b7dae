# Shared by the e2e scripts: a scratch dir removed on exit, and JSON queries
# through Debian's python3 (the pyenv one on PATH cannot be relied on).
set -euo pipefail
PY=/usr/bin/python3
SCRATCH=$(mktemp -d /tmp/shmstress-e2e.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
json() {  # json FILE EXPR  -> prints EXPR evaluated with j = the parsed file
  "$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}
fail() { echo "FAIL: $*" >&2; exit 1; }
no_timeouts() {  # no_timeouts RUN_DIR: fails (naming them) if any trial of the run ran into its timeout
  "$PY" - "$1" <<'PYEOF'
import glob, sys
hung = [d for d in glob.glob(sys.argv[1] + '/*/trial-*/history.jsonl')
        if any('"phase":"timeout"' in l.replace(' ', '') for l in open(d, errors='replace'))]
sys.exit(f'timed out: {hung}' if hung else 0)
PYEOF
}
