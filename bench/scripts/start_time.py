"""Start → ready of notify-local, by hand: spawn the binary, poll /health every
millisecond until it answers 200, stop it; repeat and print the median.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<migrated db>?sslmode=disable \
        python3 bench/scripts/start_time.py target/release/notify-local worker 7 3911

Arguments: the binary, APP_ROLE, the number of starts, the port.
"""

import os
import statistics
import subprocess
import sys
import time
import urllib.request


def main() -> None:
    binary, role, starts, port = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if "DATABASE_URL" not in os.environ:
        raise SystemExit("DATABASE_URL must name a migrated database")
    env = dict(os.environ, APP_ROLE=role, PORT=str(port), RUST_LOG="warn")
    times = []
    for _ in range(starts):
        began = time.perf_counter()
        process = subprocess.Popen(
            [binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.perf_counter() - began > 10:
                    raise SystemExit("not ready after 10 s")
                time.sleep(0.001)
            times.append((time.perf_counter() - began) * 1000)
        finally:
            process.terminate()
            process.wait()
        time.sleep(0.3)
    each = " ".join(f"{t:.1f}" for t in times)
    print(f"{role} {binary}: median {statistics.median(times):.1f} ms ({each})")


if __name__ == "__main__":
    main()
