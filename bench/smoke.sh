#!/bin/sh
# The benchmark's CI smoke test: every scenario (B1-B8, B11, M1) at a tiny size, one run, with
# docs/BENCHMARKS.md left alone. About a minute once the release build is done.
# Uses DATABASE_URL when set, else a private PostgreSQL.
set -eu
cd "$(dirname "$0")/.."
exec cargo run --release -p notify-bench -- --size 2000 --runs 1 --no-docs "$@"
