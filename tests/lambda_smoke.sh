#!/usr/bin/env bash
# Lambda smoke test: the six functions under the Lambda emulator (`cargo lambda watch`)
# against a fresh database on the local PostgreSQL server.
#
#   tests/lambda_smoke.sh
#
# Creates an empty database next to DATABASE_URL's (default postgres://postgres@127.0.0.1:5432/postgres),
# starts the emulator and a receiver (webhooks, and CloudFormation's response URL), migrates
# the database by invoking deploy-setup with the custom resource's Create event (then
# Update: nothing left), then:
# schedules a due notification through the API, reads it back, invokes sweeper,
# webhook-drainer and dlq-redrive once each with the fixtures in tests/events/, and checks
# their JSON summaries and the notification's final state; then gives provider-events the
# SES bounce, complaint and delivery fixtures, each twice (acted on once, then nothing), and
# checks the suppression rows and the attempt's deliveredAt. Bounded in time (LAMBDA_SMOKE_TIMEOUT,
# default 600 s); everything it started and the database are removed on exit, pass or fail.
# Needs cargo-lambda (on PATH or in .venv/bin), psql, curl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
[ -x "$ROOT/.venv/bin/cargo-lambda" ] && export PATH="$ROOT/.venv/bin:$PATH"

BASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
EVENTS=$ROOT/tests/events
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lambda-smoke.XXXXXX")
DB_NAME="notify_lambda_smoke_$$_$RANDOM"
STARTED=$SECONDS
WATCH_PID=""
RECEIVER_PID=""
WATCHDOG_PID=""
DB_CREATED=""

say() { printf '[lambda-smoke %3ds] %s\n' $((SECONDS - STARTED)) "$*"; }
fail() {
    say "FAIL: $*"
    if [ -s "$WORK/watch.log" ]; then
        echo "---- last lines of the emulator log ----"
        tail -n 40 "$WORK/watch.log"
    fi
    exit 1
}

# A URL with the database name replaced (keeps user, password, host, port and query).
with_database() {
    python3 -c 'import sys, urllib.parse as u
p = u.urlsplit(sys.argv[1])
print(u.urlunsplit((p.scheme, p.netloc, "/" + sys.argv[2], p.query, p.fragment)))' "$1" "$2"
}

# Every process below $1, deepest first (cargo-lambda starts `cargo run`, which starts the function).
descendants() {
    local child
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        descendants "$child"
        echo "$child"
    done
}

stop_process_tree() {
    local pid=$1
    [ -n "$pid" ] || return 0
    local tree
    tree="$(descendants "$pid") $pid"
    # shellcheck disable=SC2086
    kill -TERM $tree 2>/dev/null || true
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    # shellcheck disable=SC2086
    kill -KILL $tree 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    stop_process_tree "$WATCH_PID"
    stop_process_tree "$RECEIVER_PID"
    if [ -n "$DB_CREATED" ]; then
        psql -q -X "$BASE_URL" -c "DROP DATABASE IF EXISTS \"$DB_NAME\" WITH (FORCE)" >/dev/null 2>&1 ||
            echo "lambda-smoke: could not drop database $DB_NAME" >&2
    fi
    stop_process_tree "$WATCHDOG_PID"
    rm -rf "$WORK"
    if [ "$status" -eq 0 ]; then
        say "passed"
    else
        say "failed (exit $status)"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'say "terminated (time limit ${LAMBDA_SMOKE_TIMEOUT:-600} s?)"; exit 143' TERM

# The time limit: a watchdog that holds none of our output open.
( exec >/dev/null 2>&1; sleep "${LAMBDA_SMOKE_TIMEOUT:-600}"; kill -TERM $$ ) &
WATCHDOG_PID=$!

command -v cargo-lambda >/dev/null || fail "cargo-lambda not found (python3 -m venv .venv && .venv/bin/pip install cargo-lambda ziglang)"
command -v psql >/dev/null || fail "psql not found"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=${LAMBDA_SMOKE_PORT:-$(free_port)}
EMULATOR="http://127.0.0.1:$PORT"
API="$EMULATOR/lambda-url/intake-api"

# ---- build first, so the emulator starts each function at once (it runs `cargo run --bin <name>`)
say "building notify-local and the six functions (debug)"
cargo build -q --bin notify-local
for function in intake-api sweeper webhook-drainer dlq-redrive provider-events deploy-setup; do
    cargo build -q --bin "$function"
done

# ---- a fresh, empty database (deploy-setup migrates it below)
psql -q -X -v ON_ERROR_STOP=1 "$BASE_URL" -c "CREATE DATABASE \"$DB_NAME\"" >/dev/null
DB_CREATED=1
DB_URL=$(with_database "$BASE_URL" "$DB_NAME")
say "database $DB_NAME created (empty)"

# ---- a webhook receiver that counts what it is sent
RECEIVER_PORT=$(free_port)
python3 - "$RECEIVER_PORT" "$WORK/webhooks" "$WORK/cfn-response" <<'PY' &
import http.server, sys
port, out, cfn = int(sys.argv[1]), sys.argv[2], sys.argv[3]
class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        with open(out, "ab") as f:
            f.write(body + b"\n")
        self.send_response(204)
        self.end_headers()
    # CloudFormation's pre-signed response URL: the latest answer wins.
    def do_PUT(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        with open(cfn, "wb") as f:
            f.write(body)
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Receiver).serve_forever()
PY
RECEIVER_PID=$!

# ---- the emulator; every function inherits this environment
say "starting cargo lambda watch on $EMULATOR"
env DATABASE_URL="$DB_URL" \
    DATABASE_POOL_MAX=2 \
    ALLOW_ANONYMOUS=true \
    UNSUBSCRIBE_SECRET="lambda smoke test unsubscribe secret, forty+ characters" \
    MOCK_LATENCY_MS=0 \
    MOCK_FAILURE_RATE=0 \
    WORKER_POLL_INTERVAL_MS=100 \
    PROVIDER_TIMEOUT_MS=1000 \
    WEBHOOK_URL="http://127.0.0.1:$RECEIVER_PORT/webhooks" \
    WEBHOOK_TIMEOUT_MS=1000 \
    AWS_LAMBDA_FUNCTION_TIMEOUT=5 \
    AWS_REGION=us-east-1 \
    AWS_EC2_METADATA_DISABLED=true \
    RUST_LOG=info \
    cargo lambda watch -A 127.0.0.1 -P "$PORT" --ignore-changes >"$WORK/watch.log" 2>&1 &
WATCH_PID=$!
for _ in $(seq 1 120); do
    curl -s -o /dev/null -m 2 "$EMULATOR/" && break
    kill -0 "$WATCH_PID" 2>/dev/null || fail "cargo lambda watch exited"
    sleep 0.5
done
curl -s -o /dev/null -m 2 "$EMULATOR/" || fail "the emulator did not start listening"

# check_json <file> <python expression over `doc`> <what>
check_json() {
    python3 -c 'import json, sys
doc = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2], {"doc": doc, "json": json})
print(("ok   " if ok else "FAIL ") + sys.argv[3] + ": " + json.dumps(doc)[:300])
sys.exit(0 if ok else 1)' "$1" "$2" "$3" || fail "$3"
}

invoke() {
    local function=$1 fixture=$2 out=$3
    timeout 120 cargo lambda invoke -A 127.0.0.1 -P "$PORT" "$function" --data-file "$fixture" >"$out" ||
        fail "cargo lambda invoke $function --data-file $fixture"
}

# ---- the deploy's custom resource: migrations, answered at the response URL
cfn_event() {
    python3 - "$EVENTS/deploy-setup-$1.json" "http://127.0.0.1:$RECEIVER_PORT/cfn" "$WORK/cfn-$1.json" <<'PY'
import json, sys
event = json.load(open(sys.argv[1]))
event["ResponseURL"] = sys.argv[2]
# No Secrets Manager here: the operator key is covered by tests/it/deploy (moto).
del event["ResourceProperties"]["OperatorKeySecretArn"]
json.dump(event, open(sys.argv[3], "w"))
PY
}
say "invoke deploy-setup (CloudFormation Create): migrates the empty database"
cfn_event create
invoke deploy-setup "$WORK/cfn-create.json" "$WORK/setup-create.json"
check_json "$WORK/cfn-response" 'doc["Status"] == "SUCCESS" and int(doc["Data"]["MigrationsApplied"]) > 0' "deploy-setup Create answered CloudFormation"
say "invoke deploy-setup (CloudFormation Update): nothing left to migrate"
cfn_event update
invoke deploy-setup "$WORK/cfn-update.json" "$WORK/setup-update.json"
check_json "$WORK/cfn-response" 'doc["Status"] == "SUCCESS" and doc["Data"]["MigrationsApplied"] == "0"' "deploy-setup Update answered CloudFormation"
DATABASE_URL="$DB_URL" RUST_LOG=warn target/debug/notify-local migrate # agrees: up to date

# ---- the API through the emulator
say "GET /health"
status=$(curl -s -m 120 -o "$WORK/health.json" -w '%{http_code}' "$API/health") || fail "GET /health did not answer"
[ "$status" = 200 ] || fail "GET /health answered $status"
check_json "$WORK/health.json" 'doc["status"] == "ok"' "GET /health"

say "intake-api with an HTTP API payload v2 event (tests/events/intake-api-health.json)"
invoke intake-api "$EVENTS/intake-api-health.json" "$WORK/health-v2.json"
check_json "$WORK/health-v2.json" 'doc["statusCode"] == 200 and json.loads(doc["body"])["status"] == "ok"' "intake-api API Gateway v2 response"

say "POST /notifications (due now)"
status=$(curl -s -m 60 -o "$WORK/created.json" -w '%{http_code}' -X POST "$API/notifications" \
    -H 'content-type: application/json' \
    -d '{"recipient":"smoke@example.com","channel":"EMAIL","priority":"HIGH","idempotencyKey":"lambda-smoke-1","payload":{"template":"smoke"},"sendAt":"2020-01-01T00:00:00Z"}') ||
    fail "POST /notifications did not answer"
[ "$status" = 201 ] || fail "POST /notifications answered $status: $(cat "$WORK/created.json")"
check_json "$WORK/created.json" 'doc["status"] == "PENDING"' "created"
ID=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["id"])' "$WORK/created.json")

say "GET /notifications/$ID"
curl -s -f -m 60 -o "$WORK/pending.json" "$API/notifications/$ID" || fail "GET /notifications/$ID"
check_json "$WORK/pending.json" "doc[\"id\"] == \"$ID\" and doc[\"status\"] in (\"PENDING\", \"PROCESSING\", \"SENT\")" "read back"

# ---- the scheduled functions
say "invoke sweeper (EventBridge Scheduler input)"
invoke sweeper "$EVENTS/sweeper-schedule.json" "$WORK/sweeper.json"
check_json "$WORK/sweeper.json" 'doc["sent"] >= 1 and doc["claimed"] >= 1 and doc["failed"] == 0' "sweeper summary"

curl -s -f -m 60 -o "$WORK/sent.json" "$API/notifications/$ID" || fail "GET /notifications/$ID after the sweep"
check_json "$WORK/sent.json" 'doc["status"] == "SENT" and doc["sentAt"] is not None' "notification is SENT"

say "invoke webhook-drainer (EventBridge Scheduler input)"
invoke webhook-drainer "$EVENTS/webhook-drainer-schedule.json" "$WORK/drainer.json"
check_json "$WORK/drainer.json" 'doc["delivered"] >= 1' "webhook-drainer summary"
[ -s "$WORK/webhooks" ] || fail "the webhook receiver got nothing"
grep -q "\"jobId\":\"$ID\"" "$WORK/webhooks" || fail "no webhook for $ID: $(cat "$WORK/webhooks")"
say "ok   webhook received for $ID"

say "invoke dlq-redrive (operator request)"
invoke dlq-redrive "$EVENTS/dlq-redrive-dead-lettered.json" "$WORK/redrive.json"
check_json "$WORK/redrive.json" 'set(doc) >= {"retried", "remaining"} and doc["retried"] == 0 and doc["remaining"] == 0' "dlq-redrive summary"

curl -s -f -m 60 -o "$WORK/metrics.json" "$API/metrics" || fail "GET /metrics"
check_json "$WORK/metrics.json" 'doc["sent"] >= 1 and doc["pending"] == 0' "GET /metrics"

# ---- provider feedback: an SES permanent bounce through EventBridge
say "invoke provider-events (SES permanent bounce, tests/events/provider-events-bounce.json)"
invoke provider-events "$EVENTS/provider-events-bounce.json" "$WORK/bounce.json"
check_json "$WORK/bounce.json" 'doc == {"suppressed": 1, "delivered": 0, "ignored": 0}' "provider-events summary"
invoke provider-events "$EVENTS/provider-events-bounce.json" "$WORK/bounce-again.json"
check_json "$WORK/bounce-again.json" 'doc == {"suppressed": 0, "delivered": 0, "ignored": 1}' "provider-events repeated event changes nothing"
suppressed=$(psql -X -A -t -v ON_ERROR_STOP=1 "$DB_URL" -c \
    "SELECT channel || ' ' || address || ' ' || reason FROM suppressions WHERE reason = 'BOUNCED'") ||
    fail "reading the suppression list"
[ "$suppressed" = "EMAIL ada.lovelace@example.com BOUNCED" ] || fail "suppression list holds: $suppressed"
say "ok   the bounced address is suppressed, lower-case"

say "invoke provider-events (SES complaint, tests/events/provider-events-complaint.json)"
invoke provider-events "$EVENTS/provider-events-complaint.json" "$WORK/complaint.json"
check_json "$WORK/complaint.json" 'doc == {"suppressed": 1, "delivered": 0, "ignored": 0}' "provider-events complaint"
invoke provider-events "$EVENTS/provider-events-complaint.json" "$WORK/complaint-again.json"
check_json "$WORK/complaint-again.json" 'doc == {"suppressed": 0, "delivered": 0, "ignored": 1}' "provider-events repeated complaint changes nothing"
complained=$(psql -X -A -t -v ON_ERROR_STOP=1 "$DB_URL" -c \
    "SELECT channel || ' ' || address || ' ' || reason FROM suppressions WHERE reason = 'COMPLAINED'") ||
    fail "reading the suppression list"
[ "$complained" = "EMAIL grace.hopper@example.net COMPLAINED" ] || fail "suppression list holds: $complained"
say "ok   the complaining address is suppressed, lower-case"

# The delivery fixture names an SES message id: give it to the attempt the sweeper made
# above (the simulated provider's id is its own), as SES would have answered SendEmail.
MESSAGE_ID=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["detail"]["mail"]["messageId"])' "$EVENTS/provider-events-delivery.json")
psql -X -q -v ON_ERROR_STOP=1 "$DB_URL" -c \
    "UPDATE delivery_attempts SET provider_message_id = '$MESSAGE_ID' WHERE notification_id = '$ID'" ||
    fail "giving the attempt the fixture's message id"
say "invoke provider-events (SES delivery, tests/events/provider-events-delivery.json)"
invoke provider-events "$EVENTS/provider-events-delivery.json" "$WORK/delivery.json"
check_json "$WORK/delivery.json" 'doc == {"suppressed": 0, "delivered": 1, "ignored": 0}' "provider-events delivery"
invoke provider-events "$EVENTS/provider-events-delivery.json" "$WORK/delivery-again.json"
check_json "$WORK/delivery-again.json" 'doc == {"suppressed": 0, "delivered": 0, "ignored": 1}' "provider-events repeated delivery changes nothing"
curl -s -f -m 60 -o "$WORK/attempts.json" "$API/notifications/$ID/attempts" || fail "GET /notifications/$ID/attempts"
check_json "$WORK/attempts.json" 'len(doc["items"]) == 1 and doc["items"][0]["deliveredAt"] is not None' "the attempt has its deliveredAt"
