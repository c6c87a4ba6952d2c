//! "How each figure is taken": the protocol of each scenario with this invocation's
//! sizes, and where the raw figures are.

use std::fmt::Write as _;

use crate::args::Options;
use crate::report::Results;
use crate::stats::int;

pub fn write(w: &mut String, results: &Results, options: &Options) {
    let _ = writeln!(w, "## How each figure is taken\n");
    let env = if results.settings.notify_local_env.is_empty() {
        String::new()
    } else {
        format!(
            " Extra environment: {}.",
            results
                .settings
                .notify_local_env
                .iter()
                .map(|(k, v)| format!("`{k}={v}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let _ = writeln!(
        w,
        "- Every `notify-local` runs with `MOCK_LATENCY_MS=0 MOCK_FAILURE_RATE=0`, no \
         `WEBHOOK_URL` (webhook events are still written to the outbox by the record statement, \
         as in production) and otherwise default settings: `WORKER_BATCH_SIZE=100`, \
         `WORKER_CONCURRENCY=10`, `WORKER_LANES=4`, `DATABASE_POOL_MAX=10`, `WORKER_POLL_INTERVAL_MS=1000` with \
         LISTEN/NOTIFY wake-ups, the per-recipient rate limit on (every notification has its \
         own recipient, so it never refuses), `RUST_LOG=info`.{env}\n\
         - **B1**: {} notifications, `EMAIL`, `NORMAL`, `delaySeconds: 86400`, each with its own \
         recipient and key, in 20 calls of `POST /notifications/batch` (bodies serialised \
         before the clock starts), {} call(s) in flight, one `APP_ROLE=api` process; time from \
         the first call to the last answer; every item must answer 201. Each B2 pass loads its \
         own set this way; the B1 figure is the load before the one-worker drain.\n\
         - **B2**: the API process is stopped, N `APP_ROLE=worker` processes are started and \
         left idle for a second, then one transaction runs `UPDATE notifications SET \
         scheduled_at = now(), next_attempt_at = now()` on every PENDING one (found through \
         the queue table) and \
         `pg_notify` on the wake-up channel (what intake sends for work due now). The clock \
         starts at its commit and stops at the last `sent_at`; completion (no PENDING or \
         PROCESSING row in the queue table) is polled every 250 ms and \
         progress (`count(*)` of the outbox) every second, so that watching costs the drain \
         little.\n\
         - **B3**: {:.0} s measured after a 1 s warm-up, 8 client tasks in a closed loop on one \
         keep-alive HTTP client, each request a new key and recipient, due tomorrow; \
         latencies are client-side. The floor is the intake's own statement for such a request, \
         from 8 pooled connections for the same time on a fresh database: `queue::insert` \
         with its idempotency and wake-up parts and its look-up of the address on the \
         suppression list.\n\
         - **B4**: one API and one idle worker process; {} `POST /notifications` with `sendAt` \
         = the client's clock, paced at 100/s; latency = `sent_at − scheduled_at` from the \
         database.\n\
         - **B5**: {} LOW notifications loaded as in B1 and released as in B2 with one worker \
         process; meanwhile HIGH notifications due now arrive through the API at 50/s until the \
         LOW backlog is gone; latency of the HIGH ones as in B4.\n\
         - **B6**: VmRSS of the worker after start and one idle second; VmHWM after the \
         one-worker B2 drain; start → ready = spawn until `/health` answers 200, median of 5 \
         per role, database already running and migrated; sizes of the stripped release \
         binaries.\n\
         - **B7**: `pg_total_relation_size` of every table a notification writes to \
         (`notifications`, `queue`, `delivery_attempts`, `webhook_events`, \
         `rate_limit_reservations`, `simulated_deliveries`) right after the one-worker drain \
         (no VACUUM), divided by the number of notifications.\n\
         - **B8**: described above; it runs right after the one-worker drain of the same run, \
         and the headline ratio divides that drain by the faster of the two bare floors at \
         batch 100. Neighbours' load still differs between the two; PostgreSQL CPU per \
         notification (B2 and B8 tables) is the comparison they disturb least.",
        int(options.bulk() as f64),
        results.settings.intake_calls_in_flight,
        options.single_duration().as_secs_f64(),
        int(options.idle_count() as f64),
        int(options.bulk() as f64),
    );
    let _ = writeln!(
        w,
        "- **B9**: a fresh database holds {} recipient profiles with email addresses; one \
         API and one worker process run with SES for email (the stand-in of B11, {:.0} ms), \
         `EMAIL_RATE_PER_SECOND=2000`, `EMAIL_TRANSACTIONAL_RESERVED_PER_SECOND=500`, \
         `WORKER_CONCURRENCY=64` and `WORKER_BATCH_SIZE=500`. An EMAIL template is published, \
         TRANSACTIONAL HIGH notifications (`sendAt` = the client's clock) are posted at \
         50 /s from 2 s before `POST /campaigns` (all recipients, BULK, LOW) until the \
         campaign is DONE. Expansion = from the POST to the campaign leaving EXPANDING \
         (polled every 200 ms); the campaign's busiest second = the most of its `SendEmail` \
         calls the stand-in received in any one-second window (its share is 1,500 /s, plus \
         the token bucket's burst); transactional latency = `sent_at − scheduled_at` of \
         every transactional notification. Every recipient must get exactly one call.\n\
         - **B11**: the one-worker B2 pass (same load, release and clock) with email sent for \
         real through the SES provider, one `SendEmail` call through the AWS SDK per \
         notification. The API and the worker run with `EMAIL_PROVIDER=ses`, \
         `SES_FROM_ADDRESS=bench@example.com`, `AWS_REGION=us-east-1`, dummy credentials and \
         `AWS_ENDPOINT_URL` pointing at a stand-in for SES v2 (`notify_local::aws_stub`) that \
         notify-bench serves on 127.0.0.1 from its own process and that answers every call \
         after {:.0} ms; the worker has `WORKER_CONCURRENCY={}`, enough calls in flight to \
         cover that latency, and `WORKER_LANES={}`: a lane spends most of its batch in database \
         statements when the provider answers this fast, so more lanes than the default four \
         keep more calls going. Payloads carry `subject` and `text`, so intake's SES checks \
         pass. It runs right after B8 and is shown beside the one-worker B2 drain and the \
         best floor at batch 100 of the same run. Every notification must end SENT with the \
         stand-in's message id, and the stand-in must have received exactly one call per \
         notification; the bench process's CPU includes the stand-in's.\n\
         - **M1**: a fresh database receives {} notifications from one `INSERT … SELECT … \
         FROM generate_series` (1,000,000 from `--size 100000` up, 10 × `--size` below): \
         created over 30 days, every channel, priority and class, 90% SENT with a message id, \
         3% FAILED, 2% DEAD_LETTERED, 1.5% CANCELLED and 3.5% PENDING due up to a day ahead, \
         one in 53 held back by the rate limit; then one webhook event per final notification \
         (97% delivered, 1% given up, 2% waiting), the delivery-latency histogram filled as \
         migration V7 fills it (an insert files no deliveries), and `ANALYZE`. The counts the \
         triggers keep come from those single statements, so each sits in one shard. One \
         `APP_ROLE=api` process then answers 3 untimed and 30 timed sequential `GET /metrics` \
         (JSON), then the same with `?format=prometheus`, on one keep-alive HTTP client; \
         latencies are client-side, p50 and p95 by nearest rank, and the headline is the \
         slower format's p95. Every JSON answer must count every stored notification. M2: the \
         same process then answers 3 untimed and 30 timed `GET /digest` on that database \
         (the seed's dead-lettering and given-up webhook events give every aggregate rows to \
         read); the headline is their p95.\n",
        int(options.bulk() as f64),
        crate::scenarios::real::STUB_LATENCY.as_secs_f64() * 1000.0,
        crate::scenarios::real::STUB_LATENCY.as_secs_f64() * 1000.0,
        options.b11_concurrency,
        crate::scenarios::real::B11_LANES,
        int(options.metrics_rows() as f64),
    );
    let _ = writeln!(
        w,
        "Raw figures of every run, including every latency sample: \
         [`benchmarks/results.json`](benchmarks/results.json) (written with this file; every \
         run, whatever its size, also writes `target/bench/results.json`); process logs of the \
         last run in `target/bench/logs/`."
    );
}
