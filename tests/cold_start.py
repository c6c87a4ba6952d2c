#!/usr/bin/env python3
"""Cold-start initialisation time of the Lambda bootstraps.

Measures what Lambda reports as "Init Duration": from starting the process until it asks
the Runtime API for its first event (GET /2018-06-01/runtime/invocation/next). A stub
Runtime API on 127.0.0.1 records the arrival of that request; the process is then stopped.
Each function runs --runs times (after one unmeasured run that warms the page cache) and
the median, minimum and maximum are printed as a Markdown table.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<migrated database> \\
        python3 tests/cold_start.py --runs 15 --lambda-dir target/lambda

The database must be migrated (`notify-local migrate`): intake-api looks for API keys at
start-up. Nothing is invoked; no AWS account is needed.
"""

import argparse
import http.server
import os
import statistics
import subprocess
import sys
import threading
import time

NEXT = "/2018-06-01/runtime/invocation/next"


class RuntimeApi(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.first_next = threading.Event()
        self.first_next_at = 0


class Handler(http.server.BaseHTTPRequestHandler):
    # lambda_runtime's graceful shutdown registers a no-op extension during init (as on
    # Lambda): answer like the Extensions API; its wait for events is never answered.
    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        self.rfile.read(length)
        if self.path.endswith("/extension/register"):
            body = b'{"functionName":"notify","functionVersion":"$LATEST","handler":"bootstrap"}'
            self.send_response(200)
            self.send_header("Lambda-Extension-Identifier", "cold-start-probe")
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()

    def do_GET(self):
        if self.path.endswith(NEXT) and not self.server.first_next.is_set():
            self.server.first_next_at = time.perf_counter_ns()
            self.server.first_next.set()
        # No event is ever handed out: the connection closes and the process is stopped.

    def log_message(self, *args):
        pass


def measure(bootstrap, env, api, timeout):
    api.first_next.clear()
    started = time.perf_counter_ns()
    process = subprocess.Popen(
        [bootstrap], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        if not api.first_next.wait(timeout):
            process.kill()
            _, stderr = process.communicate()
            raise SystemExit(
                f"{bootstrap} did not reach the Runtime API within {timeout} s:\n"
                + stderr.decode(errors="replace")[-2000:]
            )
        return (api.first_next_at - started) / 1e6
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--lambda-dir", default="target/lambda")
    parser.add_argument("--timeout", type=float, default=20.0)
    args = parser.parse_args()
    database_url = os.environ.get("DATABASE_URL")
    if not database_url:
        raise SystemExit("DATABASE_URL must name a migrated database")

    api = RuntimeApi()
    threading.Thread(target=api.serve_forever, daemon=True).start()
    host, port = api.server_address

    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AWS_LAMBDA_RUNTIME_API": f"{host}:{port}",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "example",
        "AWS_SESSION_TOKEN": "example",
        "AWS_EC2_METADATA_DISABLED": "true",
        "DATABASE_URL": database_url,
        "DATABASE_POOL_MAX": "2",
        "UNSUBSCRIBE_SECRET": "cold start measurement only, at least 32 characters",
        "RUST_LOG": "info",
    }
    # (label, binary, extra environment): as template.yaml configures each function.
    cases = [
        ("intake-api", "intake-api", {"ALLOW_ANONYMOUS": "true"}),
        ("sweeper", "sweeper", {}),
        ("webhook-drainer", "webhook-drainer",
         {"WEBHOOK_URL": "https://hooks.example.com/notify"}),
        ("dlq-redrive", "dlq-redrive",
         {"SCHEDULER_GROUP_NAME": "notify-queue-redrive",
          "SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/notify-queue-redrive"}),
        ("provider-events", "provider-events", {"DATABASE_POOL_MAX": "1"}),
    ]

    print(f"| function | binary size | init median | min | max | runs |")
    print(f"|---|---:|---:|---:|---:|---:|")
    for label, binary, extra in cases:
        bootstrap = os.path.join(args.lambda_dir, binary, "bootstrap")
        if not os.path.exists(bootstrap):
            raise SystemExit(f"{bootstrap} is missing: run cargo lambda build --release first")
        env = dict(base, AWS_LAMBDA_FUNCTION_NAME=binary, **extra)
        measure(bootstrap, env, api, args.timeout)  # warm-up, not counted
        times = [measure(bootstrap, env, api, args.timeout) for _ in range(args.runs)]
        size_mib = os.path.getsize(bootstrap) / (1024 * 1024)
        print(
            f"| {label} | {size_mib:.1f} MiB | {statistics.median(times):.1f} ms "
            f"| {min(times):.1f} ms | {max(times):.1f} ms | {len(times)} |",
            flush=True,
        )
    api.shutdown()


if __name__ == "__main__":
    sys.exit(main())
