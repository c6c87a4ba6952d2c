#!/usr/bin/env bash
# Fuzzes the HTTP API of a real notify-local with Schemathesis, from the OpenAPI document
# the process serves at /api/docs-json.
#
# notify-local runs with APP_ROLE=all and no DATABASE_URL: it starts a private PostgreSQL,
# and with no API keys in that fresh database every route is open (anonymous mode). The
# document's bearer requirement is therefore dropped from the copy Schemathesis reads.
#
# Every check runs except `use_after_free`: DELETE /notifications/{id} cancels, and a
# cancelled notification stays readable as CANCELLED by contract. tests/schemathesis.toml
# lists the only other exceptions (rules the document states in words only).
#
# Passes when Schemathesis reports no failure, at least FUZZ_MIN_REQUESTS requests were
# generated, no response was a 5xx, and notify-local did not panic. Prints one `fuzz:` line
# with the figures.
#
# Environment: SCHEMATHESIS (default .venv/bin/schemathesis), FUZZ_MAX_EXAMPLES (per
# operation and phase, default 150), FUZZ_MIN_REQUESTS (default 1000), FUZZ_SEED (default
# random; printed, so that a failure can be replayed).
set -euo pipefail
cd "$(dirname "$0")/.."

schemathesis="${SCHEMATHESIS:-.venv/bin/schemathesis}"
python="${PYTHON:-.venv/bin/python}"
max_examples="${FUZZ_MAX_EXAMPLES:-150}"
min_requests="${FUZZ_MIN_REQUESTS:-1000}"
seed="${FUZZ_SEED:-$RANDOM$RANDOM}"

[ -x "$schemathesis" ] || {
    echo "fuzz: $schemathesis not found; install it with: python3 -m venv .venv && .venv/bin/pip install schemathesis" >&2
    exit 2
}

work="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        # SIGTERM: notify-local stops its private PostgreSQL and removes its folder.
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 1 300); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cargo build --quiet --bin notify-local
target_dir="$(cargo metadata --format-version 1 --no-deps |
    "$python" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"

env -u DATABASE_URL APP_ROLE=all PORT=0 RUST_LOG=warn MOCK_LATENCY_MS=5 \
    "$target_dir/debug/notify-local" >/dev/null 2>"$work/server.log" &
server_pid=$!

base=""
for _ in $(seq 1 600); do
    base="$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$work/server.log" | head -n 1)"
    [ -n "$base" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; echo "fuzz: notify-local exited" >&2; exit 1; }
    sleep 0.1
done
[ -n "$base" ] || { cat "$work/server.log" >&2; echo "fuzz: notify-local did not start" >&2; exit 1; }
for _ in $(seq 1 300); do
    curl -fsS -o /dev/null "$base/health" && break
    sleep 0.1
done
curl -fsS -o /dev/null "$base/health"

# The document as served, less the bearer requirement that anonymous mode does not apply.
curl -fsS "$base/api/docs-json" | "$python" -c '
import json, sys
doc = json.load(sys.stdin)
doc.pop("security", None)
for path in doc["paths"].values():
    for operation in path.values():
        if isinstance(operation, dict):
            operation.pop("security", None)
json.dump(doc, sys.stdout)
' >"$work/openapi.json"

echo "fuzz: notify-local at $base, seed $seed, $max_examples examples per operation and phase"
# One worker: with several, Schemathesis's threads trip a CPython 3.11 bug in ast.parse
# (gh-106905) that ends the run with a spurious "Runtime Error".
status=0
PYTHONDONTWRITEBYTECODE=1 \
"$schemathesis" --config-file tests/schemathesis.toml run "$work/openapi.json" \
    --url "$base" \
    --checks all --exclude-checks use_after_free \
    --max-examples "$max_examples" \
    --seed "$seed" \
    --workers 1 \
    --request-timeout 10 \
    --report har --report-dir "$work/report" || status=$?

read -r requests server_errors < <("$python" - "$work/report" <<'EOF'
import glob, json, sys
entries = []
for path in glob.glob(sys.argv[1] + "/*.json"):
    with open(path) as f:
        entries += json.load(f)["log"]["entries"]
print(len(entries), sum(1 for e in entries if e["response"]["status"] >= 500))
EOF
)
panics="$(grep -c panicked "$work/server.log" || true)"

echo "fuzz: $requests requests generated, $server_errors 5xx responses, $panics panics, schemathesis exit $status (seed $seed)"
if [ "$status" -ne 0 ] || [ "$server_errors" -ne 0 ] || [ "$panics" -ne 0 ] || [ "$requests" -lt "$min_requests" ]; then
    [ "$panics" -eq 0 ] || grep -A5 panicked "$work/server.log" >&2
    echo "fuzz: FAILED (needs exit 0, no 5xx, no panic and at least $min_requests requests)" >&2
    exit 1
fi
echo "fuzz: passed"
