//! The notes kept with the generated figures (not regenerated): profiles of the drain
//! and the batch intake, the digest measured by hand, the queue table's first subset run,
//! how B9 was diagnosed, and what the storage changes were measured with.

use std::fmt::Write as _;

pub fn write(w: &mut String) {
    let _ = writeln!(w, "{HOT_PATH_NOTES}");
    let _ = writeln!(w, "{CURRENT_PROFILE_NOTES}");
    let _ = writeln!(w, "{B11_PROFILE_NOTES}");
    let _ = writeln!(w, "{B6_START_NOTES}");
    let _ = writeln!(w, "{PROFILE_NOTES}");
    let _ = writeln!(w, "{DIGEST_NOTES}");
    let _ = writeln!(w, "{STORAGE_NOTES}");
    let _ = writeln!(w, "{CAMPAIGN_NOTES}");
    let _ = writeln!(w, "{LANES_AND_LISTINGS_NOTES}");
}

/// What the hot-path changes after the last full run were measured with (kept with the
/// generated figures, not regenerated).
const HOT_PATH_NOTES: &str = "\
## Hot-path changes after the full run (2026-12-07, 2-core Intel Xeon host)

After ff87bb3 the claim returns one more column per row (how long each notification may
still be handed to the provider), a step's batch is sorted in claim order across its
channels, and the record statement names the results fenced out of it (looked for only
when some row was not recorded). One run of the benchmarks these could move, at 1a45dd5
with nothing else running:
`notify-bench --only B2,B5,B8 --workers 1 --runs 1 --no-build --no-docs`.

| | this run (1a45dd5) | full run above (ff87bb3), median (range) |
|---|---|---|
| B2 | 10,132 /s; 168 µs PostgreSQL CPU per notification; 1.10 × the best batch-100 floor (9,176 /s) | 10,937 /s; 156 µs; 1.13 (1.03–1.24) × floor |
| B5 HIGH p99 | 94.6 ms | 94.3 (82.7–96.3) ms |
| B7 | 2,233 B per notification | 2,229 B |

The drain's ratio to its floor stays within the full run's range, and B7 did not move.
A later change hands a batch over several providers out in runs of one provider; every
benchmark sends each batch through a single provider, which is handed it whole, as
before.

Housekeeping (the expiry, the recovery of expired claims, retention and campaign
completion) now also runs on a task of its own beside the lanes, four times a second,
whoever reaches each part first; before, it ran only when a lane started a step. The
builds before (fdec524) and after (2c0fd68) alternated on an idle 2-core AMD EPYC host,
one run each:
`notify-bench --only B4 --runs 1 --no-build --no-docs`, five runs each, p99 17.2–35.0 ms
(median 19.9) before and 15.7–28.0 ms (median 21.2) after, p50 medians 5.96 and 6.01 ms;
`--only B2 --workers 1`, four runs each, 9,051–10,166 /s (mean 9,692) at 171–191 µs
before and 8,821–11,237 /s (mean 9,749) at 152–195 µs after. No difference beyond the
noise.

Time-ordered notification ids were measured once more (9320e0d with UUIDv7 ids and the two
listings of `notifications` built oldest first, alternated with 9320e0d as it is, two
runs each of `--only B1,B2,B7 --workers 1 --runs 1`): B7 2,297 and 2,309 B against 2,227
and 2,231 B (primary key 61–62 B against 49–51 B, `notifications_list_all` 79–80 B
against 66 B), B1 39,184 and 41,582 /s against 42,663 and 42,459 /s. The ids stay random
(see \"Time-ordered ids, tried and left out\" below for why).

Two checks added since touch every request or the retention step. A keyed route that
reads no body now refuses one with properties; the check looks up the route on every
POST. Alternated with 6925b09 on an idle 2-core AMD EPYC host,
`notify-bench --only B3 --runs 1 --no-build --no-docs`, two runs each: 0.67 and 0.77 ×
the floor before (p99 5.85 and 5.19 ms), 0.78 and 0.73 × after (p99 4.96 and 5.09 ms).
No cost beyond the noise. Retention's purge now deletes a notification's webhook events
itself, so that they are counted, where a trigger deleted them before; B10 at 6925b09 is
in the B10 section.

### Attempts keyed by their notification (V28, 2026-12-07)

`delivery_attempts` had two B-trees, its primary key on `id` and
`delivery_attempts_by_notification (notification_id, id)`; every statement reads attempts
by notification, so V28 makes the second the primary key and drops the first. Two builds,
without and with V28, alternated five times each on the idle 2-core AMD EPYC host
(`notify-bench --only B2,B7 --workers 1 --runs 1 --no-build --no-docs`): B7 2,222–2,231 B
per notification without, 2,203–2,212 B with (`delivery_attempts` 203–204 → 181 B); B2
PostgreSQL CPU 95–110 µs (mean 102) without, 95–107 µs (mean 101) with, drains of
15,369–17,269 /s and 15,769–17,970 /s. The storage falls by one index entry per provider
call; the CPU difference is inside the noise.

### The routing and paced-claim changes of 2026-12-07

Routing now joins `campaigns` (a `campaign.done` event goes to the campaign's creator) and
the paced claim returns whether it took a circuit's probe. Release builds of a4b01b9 and
4c56671 alternated three times on the idle 2-core AMD EPYC host, `notify-bench --only B2
--workers 1 --runs 1 --no-build --no-docs`: PostgreSQL CPU per notification 108, 112 and
103 µs before, 104, 102 and 113 µs after. The paced claim, before (ddf6475) and after
(4c56671), alternated twice, `notify-bench --only B9 --runs 1 --no-build --no-docs`:
transactional p99 85.8 and 84.1 ms before, 83.4 and 93.2 ms after; the campaign drained in
66.2 and 66.1 s before, 66.2 and 65.9 s after. Neither moves beyond the noise.

### Tried and dropped: one trigger per statement (2026-12-07, 2-core Intel Xeon host)

An insert into `notifications` fires three statement triggers (the queue, the counts, the
campaign counts) and so does an update; a claim and a record run eight statements in
triggers between them. A profile of the one-worker B2 drain at cedd3b7 (`perf record -a
-g`, shares of PostgreSQL's samples with the function anywhere on the stack): the
PL/pgSQL triggers 14.5 %, index insertion 12.2 %, executor start-up 6.4 %, CHECK
constraints 6.1 %, `ON CONFLICT` arbitration 4.2 %, plan-cache checks 3.8 %. A migration
that replaced the three triggers of each event by one running a single statement (the
same writes as parts of one query, old and new rows joined once, the queue row updated in
place instead of upserted, the campaign counts read only from rows whose status changed)
was built and alternated with cedd3b7: `notify-bench --only B2 --workers 1 --runs 1
--no-build --no-docs`, four runs each, 135–141 µs of PostgreSQL CPU per notification
(12,047–12,579 /s) without it and 140–142 µs (11,850–12,049 /s) with it; `--only B3
--runs 1`, two runs each, 0.79 and 0.77 × the floor without, 0.72 and 0.76 with. The
triggers' cost is their per-row work, not their number, so it was left out.

### The claim held in the queue table alone: a prototype, measured and not kept (2026-12-07)

The step the profile below names for B2 (the claim stops writing the notification row)
was built far enough to drain: the claim locked and updated only the queue row (status,
token, lease, attempt count, three columns added to `queue`), the start fence and the
re-check read the claim there, and the record updated the notification from PENDING
straight to its outcome, its trigger deleting the queue row. Reads of the status, cancel,
erasure and the counts of PROCESSING were left as they were, so it was never a candidate
to land. Release builds of fd2cd62 and of the prototype alternated three times on the
idle 2-core Intel Xeon host, `notify-bench --only B2,B7,B8 --workers 1 --runs 1
--no-build --no-docs`, PostgreSQL CPU per notification:

| | fd2cd62 | prototype |
|---|---|---|
| B2 (1 worker) | 144, 151, 144 µs | 140, 139, 135 µs |
| floor batch 100 x 1 conn | 147, 148 µs | 141, 140, 135 µs |
| floor batch 500 x 1 conn | 87, 86 µs | 77, 76, 76 µs |
| sweeper statements batch 100 x 1 conn | 241, 229 µs | 220, 216, 210 µs |
| B7 | 2,204–2,208 B | 2,207 and 1,995 B |

(The first fd2cd62 run's floor rows were not kept.) The claim's own write of the
notification is 6–12 % of the database's CPU per notification: 5–15 µs here, far from the
80 µs that stand between B2 and 60 µs. B7 does not move: the notifications' heap stays at
765 B, because the release `UPDATE` of B2 has already moved each row to a new page and
the claim's version fitted in the room `fillfactor` leaves there; the 1,995 B run is one
in which a vacuum had truncated the emptied queue table before the bytes were read (queue
172 B instead of 384 B).

### The pause's start and the refused-call totals (V29, 2026-12-07)

The statement that records each batch sent by a real provider now also keeps when a
channel's pause began and adds the batch's throttled and misconfiguration-refused calls to
running totals (one upsert, written only by a batch that had one). It runs once per batch
of a real provider, never in B2. Release builds of cedd3b7 and fd2cd62 alternated four
times on the idle 2-core Intel Xeon host, `notify-bench --only B11 --runs 1 --no-build
--no-docs`: 5,685, 5,416, 5,161 and 5,229 /s before, 5,465, 5,259, 5,165 and 5,124 /s
after (means 5,373 and 5,253 /s, both drifting down over the 4 minutes). The difference is
inside the spread of each build's own runs.
The same build, `--only B2,B7,B8 --workers 1 --runs 1 --no-build --no-docs`, once: B2
11,536 /s at 144 µs of PostgreSQL CPU per notification, 1.04 × the best batch-100 floor of
the run (11,074 /s, two connections); B7 2,204 B per notification.

### Plans that read whole tables (V30 and the claims by key, 2026-12-08, 2-core Intel Xeon host)

B10's drain target failed in runs where a round collapsed: of five soaks of f5f9115 and
of a build with only the claims changed, four had a round at 0.37–0.53 of the first. In
three of them retention fell behind (up to 157,200 finished notifications kept after a
round, against about 50,000) and the tables grew to 1.03–2.21 × round 1 by the end.
PostgreSQL's log named the cause: in each of those three soaks a retention step was
cancelled by the 30 s statement timeout inside the trigger that deletes a notification's
queue row, and `auto_explain` (statements over 250 ms, nested ones included, on for the
last of them) timed one such step at 13.7 s and showed the plan. That plan,
kept by PL/pgSQL on the connection, had been made while the queue was nearly empty: a
nested loop over every entry of the queue's primary key and, for each, the whole batch
of deleted rows. V30 names the rows by key and plans that function without sequential
scans.

The claims had the same weakness in another form: the update joined the rows the claim
picked, the planner guessed a tenth of the due rows from the `LIMIT` expressions, and
once statistics showed a backlog it hashed the whole `notifications` table on every
claim. Over 100,000 due notifications with fresh statistics, a claim of 100 took 57–97
ms that way and 2.9–4.3 ms by key (`EXPLAIN (ANALYZE)` of `claim_channel.sql` in `psql`,
six executions each). B2 never met it: its statistics are taken before the release, when
nothing is due.

`notify-bench --only B10 --runs 1 --no-build --no-docs`, one soak at a time on the idle
host, in the order listed:

| build | last round ÷ first | lowest round ÷ first | most kept after a round | final bytes ÷ round 1 | retention steps past the timeout |
|---|---|---|---|---|---|
| f5f9115 | 0.91 | 0.53 | 80,000 | 0.54 | 0 |
| claims by key | 1.03 | 1.01 | 80,500 | 0.52 | 0 |
| f5f9115 | 0.68 | 0.37 | 145,000 | 1.03 | 1 |
| claims by key | 0.76 | 0.40 | 141,100 | 1.29 | 1 |
| claims by key | 0.70 | 0.42 | 157,200 | 2.21 | 1 |
| V30 | 0.76 | 0.76 | 51,100 | 0.96 | 0 |
| V30 | 0.99 | 0.81 | 53,200 | 0.55 | 0 |
| V30 | 0.82 | 0.76 | 71,500 | 1.00 | 0 |

With V30 no round fell below 0.76 of the first, retention kept up in every round, the
bytes target held in all three soaks and the slowest retention step took 277 ms. The
drain target was met in one of the three: what remains is the share of the database's
CPU that retention's deletes and their vacuums take beside the drain, which the first
round does not pay (the B10 section above).

The drain B2 measures did not move, as expected of plans it never met. Release builds of
f5f9115 and 7ff2954 alternated twice, `notify-bench --only B2,B7,B8 --workers 1 --runs 1
--no-build --no-docs`: B2 11,573 and 11,152 /s at 141 and 150 µs of PostgreSQL CPU per
notification before, 12,167 and 10,908 /s at 136 and 149 µs after; the best batch-100
floor of the same runs 12,451 and 14,740 /s before, 11,501 and 14,169 /s after (ratios
0.93 and 0.76, 1.06 and 0.77); B7 2,203 and 2,207 B before, 2,212 and 2,210 B after.
";

/// How B9's misses were diagnosed, from runs outside a full run (kept with the generated
/// figures, not regenerated).
const CAMPAIGN_NOTES: &str = "\
## B9 before the full run: how campaign isolation was diagnosed (2026-12-01)

Not regenerated by the bench: the runs that led to the current design, before B9 joined
the full run (whose figure is in the table above).
`notify-bench --only B9 --size N --runs 1 --no-docs` (release build), one run per row,
this 2-core machine. The first rows were taken while other builds shared the machine, so
compare within a row group, not across the whole table.

| commit | N | expansion | campaign drained | busiest campaign second | transactional `sent_at − due` | `SendEmail` calls |
|---|---|---|---|---|---|---|
| 0675cdc (load ≈ 10) | 100,000 | 110.9 s | 126.1 s | 2,340 | p50 3.29 s, p99 7.03 s | 100,000 |
| 0675cdc (load ≈ 3–4, a build beside it) | 100,000 | 127.8 s | 498.5 s | 2,000 | p99 49.1 s | **100,053** |
| d13131b (load ≈ 2, nothing beside it) | 100,000 | 24.6 s | 134.2 s | 3,031 | p50 1.59 s, p90 10.3 s, p99 12.9 s | 100,000 |
| d13131b, system PostgreSQL | 20,000 | 2.1–2.6 s | 15.2 s | 2,975–3,189 | p50 200–241 ms, p99 1.00–1.39 s | 20,000 |
| 16d3853 (load ≈ 2, nothing beside it) | 100,000 | 20.5 s | 140.1 s | 3,072 | p50 2.20 s, p90 7.18 s, p99 8.58 s | 100,000 |
| fd565c6, system PostgreSQL, 2 runs | 20,000 | 2.5–2.7 s | 18.2–20.8 s | 2,954–2,998 | p50 256–744 ms, p99 1.78–1.85 s | 20,000 |

Target: expansion ≤ 10 s, campaign ≤ 1,500 /s + burst (3,000 in any one second),
transactional p99 ≤ 250 ms, one call per recipient. Met now: one call per recipient,
expansion at 20,000. Not met: expansion at 100,000, transactional p99, and the busiest
second is over 3,000 by up to 6 % (tokens are taken at the claim; the calls reach the
stand-in a few milliseconds apart, the same arrival jitter the pacing tests allow for).

What the samples of `pg_stat_activity` showed at 0675cdc, and what changed:

- **The token bucket never refilled under contention.** The claim stamped the bucket with
  the clock at the end of its statement but counted the refill only up to the start, so
  the time every claim spent running was lost; with claims back to back the bucket stayed
  at 0.6–0.97 tokens while 16,813 bulk notifications waited. It is now stamped with the
  instant the refill was counted to.
- **Claims stepped over what others had claimed.** A paced claim waited for the channel's
  row inside its own statement, so its snapshot dated from before the wait (up to 8.7 s,
  seen with `EXPLAIN ANALYZE`), and it then spent seconds, holding the channel, stepping
  over rows claimed meanwhile, which made the next claim wait longer. The claim now waits
  for the channel in a statement of its own, in a short transaction, and reads the queue
  after the wait.
- **Every wake-up woke every lane** (64 lanes × 50 transactional notifications a second)
  onto a pool of 10 connections: 843 steps failed waiting for a connection, 22 batches of
  claims could not be released and waited out their 300 s lease, and results that could
  not be recorded were sent again when their lease expired (the 53 extra calls). Now a
  wake-up wakes one idle lane, a sweeper runs no more lanes than its pool has connections
  (one kept for maintenance), and recording and releasing are retried instead of left to
  the lease.
- **Each batch's report to the circuit breaker locked the channel's row.** It now reads
  the circuit without a lock and writes only when the circuit moves or a pause grows.
- **Transactional deliveries queued behind bulk ones for a place.** Bulk work may now hold
  at most three quarters of `WORKER_CONCURRENCY`.

Tried and reverted: a lane that claims only transactional work, woken by every wake-up.
Two runs at 20,000 gave p50 890–990 ms and p99 3.1–4.4 s: its claim per wake-up holds
the channel's lock as long as a bulk claim does, and the lock was already the queue
(50 snapshots of `pg_stat_activity` 0.3 s apart: of 400 busy backends seen, 318 waiting for the channel's row,
41 running a claim). Making each paced claim cheaper, or fewer and larger, comes first.

What is left at 100,000: the worker delivers about 750 /s here (the AWS SDK's signing and
the stand-in share the two cores with PostgreSQL and the API), below the campaign's 1,500
tokens a second, so bulk batches wait inside the worker, every lane is busy with one, and
a transactional notification waits for a lane to finish its batch. The next step is to
claim bulk work only when a bulk place is free, so that backlog stays in the queue, where
transactional work is claimed first.

### What changed on 2026-12-02 (2-core AMD EPYC host, nothing else running)

`DATABASE_URL='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'
notify-bench --only B9 --runs 1 --no-build --no-docs` at 100,000, one run per row, all
on the same host within 80 minutes:

| build | expansion | campaign drained | busiest campaign second | transactional `sent_at − due` |
|---|---|---|---|---|
| 0ff8f56 (before) | 20.1 s | 67.1 s | 2,673 | p99 739 ms |
| bulk held ≤ the bulk places | 21.7 s | 246.0 s | 590 | p50 104 ms, p99 212 ms |
| bulk held ≤ twice the bulk places | 24.2 s | 149.3 s | 1,045 | p50 123 ms, p99 305 ms |
| twice, and statements prepared again every 10 s | 22.7 s | 95.5 s | 1,577 | p50 78 ms, p99 1,029 ms |
| twice, and every 3 s, all connections at once | 24.0 s | 103.2 s | 1,413 | p50 88 ms, p90 141 ms, p99 209 ms |
| **twice, and every 3 s, each connection when a step takes it (main)** | 26.5 s | 116.2 s | 1,643 | p50 95 ms, p90 171 ms, p99 345 ms |

- **Four minutes without a delivery.** Two runs of the first new build stalled at about
  1,500 sent for four minutes, transactional work included. `auto_explain` showed each
  paced claim running 1–4 s on a generic plan made while the tables were empty: a nested
  loop with a sequential scan of `notifications` per queue row. The 0675cdc row above
  (498 s, p99 49 s) has the same signature. A sweeper now drops a connection's prepared statements
  when a claim or a fence takes it and they are 3 s old, so plans follow the tables' size.
  Dropping every connection's at once was faster (the row above) but could reach a
  connection between warming a pipeline's statements and sending it, which would reorder
  the pipeline (planning every execution instead costs 1.4–1.9 ms
  per claim: measured with `EXPLAIN (ANALYZE, SUMMARY)` under
  `plan_cache_mode=force_custom_plan`).
- **A campaign's backlog stays in the queue.** Lanes take tickets for bulk work before
  the claim (at most twice the bulk places per process), so a transactional notification
  is claimed by the next claim instead of waiting for a lane to work through a hundred
  bulk ones. Tickets equal to the bulk places gave the best latency but a quarter of the
  campaign's rate: a ticket is held from the claim on, and here the claim and the fence
  took longer than the 5 ms delivery.

Met now at 100,000: the campaign within 1,500 /s + burst, one call per recipient.
Not met: transactional p99 ≤ 250 ms (345 ms in the one run of main; 209 ms with the
unsafe variant), expansion ≤ 10 s (26.5 s; the expanding transactions share the 2 cores
with a drain at 860 /s). The campaign drains at 860 /s of its 1,500 /s share on this
host.

### Campaign expansion on 2026-12-02 (2-core Intel Xeon host, noisy)

`notify-bench --only B9 --runs 1 --no-build --no-docs` at 100,000, with
`pg_stat_statements` loaded to split each chunk's database time (means per statement,
one chunk = 1,000 recipients):

| build | expansion | page of ids | profiles read | insert | transactional p99 |
|---|---|---|---|---|---|
| 9e33aa5 (before), 05:41 | 19.0 s | — | — | — | 145 ms |
| page from the cursor + `ANALYZE`, 05:55 | 13.5 s | 0.6 ms | 6.1 ms | 76 ms | 151 ms |
| 9e33aa5 again, 06:53 | 22.6 s | 26.2 ms | 33.1 ms | 99 ms | 194 ms |
| main, two runs, 07:06 | 19.2 s, 20.4 s | 0.7–1.0 ms | 8.5–10.4 ms | 119–126 ms | 188 ms, 197 ms |
| `ANALYZE` after the first insert, 07:22 | 12.4 s | — | — | — | 115 ms |

(The 9e33aa5 rows ran with the bench's old polling, five reads a second, and measured
the expansion from the POST to the first read that found the campaign QUEUED; the others
from the campaign's timestamps.)

- **Each page read every id after the cursor.** The keyset of a campaign of every
  profile was `$2 IS NULL OR recipient_id > $2`: a generic plan cannot start an index
  range at a bound that may be absent, so after five executions each page read the
  owner's ids from the first. Right after a bulk import the table had no statistics,
  and the custom plans sorted every id after the cursor instead. The first page now
  passes `''`, and the first chunk runs `ANALYZE recipients` (before its first page in
  the runs above; since then after its insert, with `SKIP_LOCKED`, so that a first chunk
  that keeps failing does not analyze the table every 250 ms, at the cost of one slow
  first page); `tests/it/database.rs` checks the generic plan starts in the index at the
  cursor.
- **The bench's own polling.** B9 read `GET /campaigns/{id}` five times a second, and
  each read counts the campaign's notifications by status (140 ms of database time at
  100,000). It now reads once a second, and the expansion is the campaign's
  `progressed_at` (stamped by the last chunk) minus its `created_at`.
- **What is left is the insert.** Inserting a chunk's 1,000 rows took 76 ms in the
  05:55 run and 119–126 ms in the 07:06 runs, beside a drain at 1,000–1,500 /s: the
  expansion is one connection among a dozen busy ones on two cores, and its share moves
  with theirs. Expanding two chunks
  at once (the second inserted beside the lead, advancing the checkpoint only from where
  the lead committed) brought one run to 10.4 s, but raised transactional p99 to
  211–325 ms over four runs against 151–197 ms without it, so it was left out: B9 is
  about the campaign not reaching transactional work.

The host's speed moved by half within the hour (the unchanged build: 19.0 s, then
22.6 s; the drain of the same campaign 71–102 s), so compare rows taken close together.
Not met: expansion ≤ 10 s. Met in every run above: transactional p99 ≤ 250 ms, the
campaign within 1,500 /s + burst, one call per recipient.

### Paced claims on 2026-12-02 (2-core AMD EPYC host, 7–45 % steal)

`notify-bench --only B9 --runs 1 --no-build --no-docs` at 100,000, with
`pg_stat_statements` counting the worker's statements (reset before each run):

| build | paced claims | rows per claim | waits for the channel's row | records | expansion | campaign drained | busiest campaign second | transactional p99 |
|---|---|---|---|---|---|---|---|---|
| c096407 (before), 12:40 | — | — | — | — | 19.3 s | 138.3 s | 1,360 | 293 ms |
| c096407, 12:45 | 10,575 | 9.9 | 447 s in all, 42 ms each | 6,509 | 18.6 s | 98.6 s | 1,692 | 211 ms |
| turns, refused lanes still taking bulk places, 12:54 | 3,534 | 30.9 | under 1 s | 3,399 | 13.7 s | 182.9 s | 1,131 | 131 ms |
| turns (4021684), 13:00 | 1,728 | 60.4 | under 2 s | 1,718 | 18.4 s | 84.1 s | 1,718 | 180 ms |
| 4021684 again, 13:27 | 1,818 | 57.6 | 4.2 s in all, 2.3 ms each | 1,745 | 22.6 s | 89.0 s | 1,749 | 244 ms |

- **Claims as fast as the lock allowed.** Every lane whose batch was done claimed again
  at once, so the claims of the channel followed each other back to back: each found
  only the tokens refilled while the one before ran, about ten at 1,500 /s, and the
  lanes spent 42 ms each waiting for the channel's row. Each ten notifications then
  cost a claim, a fence, a re-check and a record. A process now claims a paced channel
  at most once per turn, `WORKER_BATCH_SIZE` ÷ the channel's rate (50 ms here, and never
  more), unless its last claim came back full; a lane refused the turn takes no bulk
  places and one idle lane wakes at the next turn (`shared/src/sweeper/pacing.rs`).
  Claims fell from 10,575 to about 1,800 and carry six times the rows; the database
  time of claims and records over the run fell from 62 s (25.4 s claiming, 36.6 s
  recording) to 37–39 s.
- **The first variant starved the turn.** Lanes refused their turn still took bulk
  places for the free channels' claims, so the lane whose turn it was found few left:
  31 rows a claim, and the campaign drained at 547 /s.
- **Expansion did not follow.** Its inserts took 82–116 ms a chunk in these runs, and
  each chunk spent another 45–100 ms outside the database (timed in the worker: reading
  the page 24 ms, admitting 50 ms, inserting 175 ms, committing 27 ms in the 28.6 s run
  at 13:08, when steal reached 45 %): on this host at this time, the inserts alone
  take 8–12 s of the 10 s target.

- **A connection per chunk.** Timed in the worker, the 28.6 s run at 13:08 spent 24 ms
  a chunk before its first statement's answer came back, though the database spent
  1.4 ms on the page: each chunk took a connection from the pool the delivery lanes
  share, and waited for one. The expansion now keeps one connection from chunk to
  chunk; at 13:44 (c662b8b with timing logs) reading a page took 5.5 ms a chunk,
  admitting 22 ms, inserting 87 ms, committing 5 ms: 12.8 s for the 100,000 (p99
  169 ms, drained in 82.1 s). Two runs of the same change without the logs, at 13:37
  and 13:38, gave 14.5 s and 19.0 s (p99 281 ms and 183 ms).

- **A turn held back claims that took all they could.** A turn opened again at once
  only after a claim of a whole batch (100), but a bulk claim is capped by the bulk
  places its lane holds (at most 96 here), so no bulk claim ever counted: one claim per
  50 ms, about 60 rows each, and the campaign drained at 940–1,240 /s of its
  1,500 /s. The turn now opens again after a claim that took all it was allowed (a
  whole batch, or a bulk notification for every bulk place its lane held). Three runs
  at 14:19–14:22, with the host quieter than above (no steal at the start of each):
  campaign drained in 69.8 s, 68.0 s and 71.3 s (1,400–1,470 /s), busiest campaign
  second 2,328, 2,361 and 2,008 calls, transactional p99 158, 123 and 124 ms,
  expansion 12.4, 10.3 and 10.2 s.

Not met: expansion ≤ 10 s (12.8–28.6 s over the seven runs with turns before the last
change, 10.2–12.4 s over the three after it), and transactional p99 ≤ 250 ms in two
runs before the last change (361 ms at 13:08, 45 % steal; 281 ms at 13:37; 123–244 ms
in the eight others). Met in every run with turns: the campaign within 1,500 /s + burst
(busiest second 973–2,361 calls), one call per recipient.

### Campaign expansion on 2026-12-03 (2-core Intel Xeon host)

`notify-bench --only B9 --runs 1 --no-build --no-docs` at 100,000, one run per row
group, `pg_stat_statements` reset before each run:

| build | expansion | chunk insert (mean) | transactional p99 | campaign drained |
|---|---|---|---|---|
| 4e43965 (before), 2 runs | 11.6 s, 15.4 s | 71.6 ms (first run) | 119 ms, 193 ms | 68.6 s, 76.6 s |
| 01012f0 (counts kept), 3 runs | 14.3 s, 11.9 s, 9.8 s | 91.5 ms (first run) | 132 ms, 140 ms, 108 ms | 75.4 s, 72.4 s, 67.6 s |
| 670d731 (next chunk prepared ahead), 3 runs | 8.0 s, 9.4 s, 9.2 s | 59.9, 67.3, 70.5 ms | 123 ms, 170 ms, 127 ms | 68.1 s, 75.8 s, 71.1 s |

- **The cores were full.** Sampled with `top` during the expansion (4e43965 and
  01012f0): the expanding backend had 51–60 % of one core, the nine lane backends
  7–13 % each, the worker process 33–40 %, the bench and its SES stand-in 8–13 %. The
  expansion gets what the paced drain leaves, so what it wins comes from doing less.
- **Counting a campaign on every read.** In the first run the bench's once-a-second
  `GET /campaigns/{id}` cost 64 × 109 ms = 7.0 s of database time and the completion
  step 75 × 27 ms = 2.0 s, each counting the campaign's rows. The counts are now kept by
  triggers (migration V15, `campaign_counts`) and both reads left the top of
  `pg_stat_statements`. On the expansion alone the change was lost in the host's noise
  (9.8–14.3 s against 11.6–15.4 s).
- **Everything around the insert.** A chunk spent about a quarter of its time outside
  its insert: the page of ids, the profiles and suppressions read for the audience
  rules, building the rows, and the round trips between them. The next chunk is now
  prepared on a spare connection while this chunk's insert runs, and used only from the
  checkpoint it was prepared for (`tests/it/content/campaigns.rs` alternates two
  expanders to show a stale one is dropped); the pinned template version is read once.

Met in all three runs of 670d731: expansion ≤ 10 s (8.0–9.4 s), transactional p99
≤ 250 ms (123–170 ms), the campaign within 1,500 /s + burst (busiest second
2,073–2,198 calls of the 3,000 allowed), one call per recipient. The complete run that
followed on the same build (the table above, 09:00–09:20) gave 9.5 s, 9.6 s and 11.1 s:
expansion ≤ 10 s is met by the median, not yet in every run on this host.

### Claims that find nothing, 2026-12-03 afternoon (2-core AMD EPYC host)

A sweeper step claims every channel it serves. In B9 nothing is due on SMS or PUSH, so
each step's claims of those two channels find nothing — and each is still an `UPDATE`
of `notifications`, for which PostgreSQL fires the three statement-level triggers of
the table over empty transition tables. Migration V16 makes every trigger function
return at once when its statement changed no row. One B9 run before and one after,
`pg_stat_statements.track = all`, reset before each run:

| build | empty claims | their database time | per claim |
|---|---|---|---|
| ce19b0d (before) | 27,472 | 10.4 s | 0.379 ms |
| 755ce6a (V16) | 25,398 | 3.7 s | 0.146 ms |

- **This host was slower than the morning's.** `notify-bench --only B2 --runs 1` here
  drained 5,861 /s with 309 µs of PostgreSQL CPU per notification, where the complete
  run of the morning (Intel Xeon host) measured 8,428 /s and 214 µs: about 0.7 × the
  speed. B9 without profiling on 755ce6a gave expansion 15.9 s and 18.5 s,
  transactional p99 182 ms and 201 ms, busiest campaign second 1,749 and 1,604 calls
  (of 3,000 allowed), the campaign drained in 87.3 s and 93.9 s. Expansion ≤ 10 s is
  missed on a host this slow; transactional p99 and the campaign's rate are met.
- **Where the rest goes: updates that are not HOT.** 75 s into a B9 run,
  `pg_stat_user_tables` counted 169,514 updates of `notifications`, 108,687 of them HOT
  (64 %). A campaign's row averages 573 bytes; at `fillfactor = 70` a page takes nine
  and keeps room for about five more versions, while a claim and a record make two per
  row. Every update that does not fit writes all seven indexes of the table, and the
  chunk insert of the expansion (122 ms per 1,000 rows, of which the queue trigger
  15–40 ms) competes with that work for the two cores. Narrower rows, or the claim's
  fields kept only in `queue`, are the next step for the expansion and the drain alike.
  Tried and not kept: `fillfactor = 50` raised the HOT share to 90 % (137,551 of
  153,726 and 140,538 of 156,598) but grew the table 1.37 × (132 MB against 96 MB at
  the same moment), and B9 alternated with V16 on the same host gave expansion 16.1 s
  and 17.0 s against 19.0 s and 11.6 s: no gain the noise does not cover.

### Two chunks in flight, 2026-12-03 evening (2-core AMD EPYC host, e9a1f78)

`notify-bench --only B9 --no-build --no-docs` on an idle host, five runs (`--runs 1`
twice, `--runs 3` once): expansion 7.5 s, 8.5 s, 9.8 s, 10.4 s and 12.4 s;
transactional p99 109–141 ms; busiest campaign second 1,852–2,197 calls; the campaign
drained in 67–78 s. The expansion target sits on the line on this host class.

- **The insert is the critical path.** Timing each chunk (one run, 101 chunks): the
  insert took 101 ms per 1,000 rows on average, the next chunk's page and audience
  rules on the spare connection 40 ms, longer than the insert in 1 chunk of 101.
- **CPU, not waits.** `perf record -a -F 499` for 8 s of the expansion: PostgreSQL 54 %
  of the samples, the two `notify-*` runtimes 21 %, idle 23 %; no PostgreSQL function
  above 2.1 % (allocation, copies, hash lookups, B-tree compares).
- **The row's cost alone.** 100 inserts of 1,000 campaign-shaped rows by one `psql`
  session into a freshly migrated database: 4.4–6.0 s (44–60 µs a row, four runs);
  without the queue trigger 4.2 s; dropping one index at a time (five of
  `notifications`, three of `queue`) gave 5.0–6.6 s, inside the run-to-run spread.
- **Tried and not kept: two chunks at once.** The chunk after the current one inserted
  in its own transaction on the spare connection, committing after the first through a
  checkpoint advance guarded by the expected position (47 of 54 pairs committed):
  expansion 11.6 s, 11.1 s and 9.5 s, against 7.5–12.4 s one chunk at a time. Both
  inserts draw on the same two cores. What would move the figure is a cheaper row;
  the queue trigger is a quarter of it.

### Cheaper identifier checks, 2026-12-04 (2-core AMD EPYC host, V17)

- **Where a chunk's row time went.** `EXPLAIN (ANALYZE, WAL)` of one 1,000-row campaign
  insert into a freshly migrated database: 30–40 ms in the insert itself, 12 ms in the
  queue trigger, 2–3 ms in the campaign counts, 1 ms in the general counts; 1.2 MB of WAL.
  Taking parts away from the 100-chunk `psql` insert (runs alternated, 3.6–4.0 s as
  migrated): without the two listing indexes of `queue` 3.1–3.3 s, without the queue
  trigger 2.9–3.2 s, without the two regular-expression checks of `notifications`
  (`category`, `recipient_id`) 3.0–3.1 s; a database collated `C` instead of `C.UTF-8`
  4.0 s either way.
- **The checks, not the indexes.** The two regular expressions cost 7 µs a row (one
  million evaluations: 7.1 s; trimming the allowed bytes off the value's UTF-8 and testing
  for nothing left: 1.3 s). Migration V17 checks the same rules that way (200,000 random
  strings and the length edges: the same verdicts); the 100-chunk insert went from
  3.6–4.0 s to 2.9–3.4 s (three alternated pairs). The listing indexes serve the
  dead-letter queue and every open-status listing, so they stay.
- **B9 with V17.** `notify-bench --only B9 --no-build --no-docs` on an idle host, before
  and after, same day: expansion 7.3 s and 7.5 s before; 6.1 s, 6.2 s, 6.6 s, 6.5 s and
  5.4 s after; transactional p99 96–105 ms after (104–112 ms before); the campaign drained
  in 67 s both ways.
";

/// What B6's start is made of and what was tried on it (kept with the generated
/// figures, not regenerated).
const B6_START_NOTES: &str = "\
## B6: where the start goes (2026-12-07, 2-core Intel Xeon host)

The full run above missed the 50 ms start target (api 48.9 ms, worker 53.8 ms: medians of
five starts per role, median of three runs; B6 runs right after B5 has drained 100,000
rows). Measured by hand on the idle host with the database already
migrated (spawn `notify-local`, poll `/health` every millisecond until it answers 200;
median of 7 or 9 starts): api 20.4–28.1 ms, worker 32.7–46.1 ms over six sets.

- **Where the worker's start goes** (a build printing timestamps, 7 starts): migrations
  7–14 ms (their own connection, the advisory lock, the runner's read of its history);
  the sweeper's start 10–20 ms (a pool connection 4–8 ms, then writing each channel's
  rates and health 5–9 ms); the key check 2–15 ms (its pool connection opened while the
  lanes open theirs).
- **Tried and dropped:** reading the keys before the loops start, so that the sweeper's
  start reuses that connection. Three alternated sets of 9 starts: medians 46.1, 33.3 and
  32.7 ms before, 44.0, 45.4 and 36.1 ms after. No gain beyond the noise.
- **Kept (2026-12-07): the schema check on a pool connection.** `notify-local` now reads
  the migration history (versions and checksums) on the first connection of its pool and
  runs the migrator, with its own connection and the advisory lock, only when the history
  differs from the embedded migrations; with one role (`api` or `worker`, as B6 starts
  them) the sweeper's start or the key check then finds that connection open. Three alternated sets of 7 starts each on a migrated database,
  idle 2-core AMD EPYC host (`bench/scripts/start_time.py`: spawn, poll `/health` every millisecond):
  worker medians 22.7, 22.5 and 24.2 ms before, 18.5, 19.6 and 17.3 ms after; api 16.0,
  18.1 and 18.8 ms before, 11.1, 12.9 and 12.9 ms after.
- **Tried and dropped (2026-12-07):** the sweeper's start and the key check side by side
  (`tokio::join!`) on top of the schema check. Three alternated sets of 9 worker starts:
  medians 19.3, 19.4 and 17.3 ms without, 18.5, 17.6 and 20.1 ms with. No gain beyond the
  noise.
- **B6 as the benchmark takes it, after the schema check** (fd2cd62, 2-core Intel Xeon
  host, `notify-bench --only B2,B6 --workers 1 --runs 1 --no-build --no-docs`, three runs):
  start → ready api 11.1, 12.2 and 10.6 ms, worker 19.6, 20.1 and 16.6 ms; worker RSS idle
  17.5–17.6 MB, peak 19.9–20.1 MB. Inside the 50 ms and 30 MB targets; the full run above
  (48.9 and 53.8 ms) predates the schema check.
";

/// Where B11's worker time went and what one boxed call won back (kept with the
/// generated figures, not regenerated).
const B11_PROFILE_NOTES: &str = "\
## B11: where the worker's time goes with a real provider (profile of 2026-12-06, 2-core Intel Xeon host)

Measured by hand during `notify-bench --only B11 --runs 1 --no-build --no-docs` (that run
drained 4,516 /s): a release build with symbols (`CARGO_PROFILE_RELEASE_STRIP=false
CARGO_PROFILE_RELEASE_DEBUG=line-tables-only cargo build --release --bins --workspace`),
`perf record --call-graph dwarf,16384 -F 499 -p <worker pid> -- sleep 5` once the drain
was under way, then `perf script` and, for each function, the share of the worker's
samples with it anywhere on the stack (so shares overlap).

- **The AWS SDK is most of the worker.** Its orchestrator (building, signing, sending and
  parsing one `SendEmail` per notification) 47 %; SigV4 signing inside it 11 %; hyper's
  HTTP/1 client 10 %. malloc and free 11 %; `memcpy` 12 % inclusive.
- **One copy was ours** (ff87bb3): about 5 % of the samples moved the SDK's large call
  future, once into the gate's `FuturesOrdered` and again on its first poll. Each call is
  now boxed as it enters the gate. Two alternated pairs of runs (`--only B11 --runs 1
  --no-build --no-docs`), the machine full (35–38 of 39–42 core-seconds taken): before,
  4,826 and 5,136 /s at 137 and 128 µs of worker CPU per notification; after, 5,148 and
  5,097 /s at 124 and 122 µs.
- **PostgreSQL costs more per notification here than in B2** (about 200 against 140 µs):
  a paced claim locks the channel's `channel_health` row and its token bucket `FOR UPDATE`,
  and the provider's message ids fill the partial index `delivery_attempts_by_message`
  (`WHERE provider_message_id IS NOT NULL`), which the simulated provider of B2 leaves
  empty.
- **So one 2-core host is full at about 5,000–5,600 /s.** PostgreSQL about 200 µs, the
  worker about 125 µs and the SES stand-in in the bench process 29–31 µs: about 355 µs of
  CPU per notification against 2 core-seconds a second, 5,600 /s before any wait. In a
  deployment the provider is not on the database's host and PostgreSQL has its own
  cores; the sweeper's share is what one container costs (about 0.6 of a core at
  5,000 /s).
- **The full run above** (ff87bb3, 2026-12-07) drained B11 at 4,616 /s, short of 5,000,
  on a host whose floors ran about a quarter below those of the run before it (best
  batch-100 floor 9,721 against 12,811 /s at 0aab2ef): B11 ÷ that floor went from 0.34
  to 0.49 between the two runs, while the absolute rate moved from 4,783 to 4,616 /s.
";

/// Where the database's CPU goes in B2 and B1 on the current schema, and the storage
/// changes of the same evening (kept with the generated figures, not regenerated).
const CURRENT_PROFILE_NOTES: &str = "\
## Where the database's time goes now (profile of 2026-12-04, migrations up to V21)

Measured by hand on the 2-core host, nothing else running: `perf record -a -g -- sleep 7`
started when the one-worker B2 drain began (`notify-bench --only B2 --workers 1 --runs 1
--no-build --no-docs`; that run drained 11,388 /s at 151 µs of PostgreSQL CPU per
notification), then `perf script` and, for each function, the share of PostgreSQL's
samples with it anywhere on the stack (so shares overlap).

- **B2 is PostgreSQL CPU.** PostgreSQL took 88 % of all samples, the worker process 5.6 %,
  idle 5.6 %.
- **Inside PostgreSQL** (49,109 samples): the triggers run at the end of each statement
  21.3 % (the PL/pgSQL statement triggers that keep the queue table and the counters
  14.1 %, the foreign-key checks of `delivery_attempts` and `webhook_events` 5.8 % plus
  1.0 % for the row lock each takes); index reads 15.6 %; index insertion 10.0 % and
  `ON CONFLICT` arbitration 3.8 %; executor start-up 7.5 % and plan-cache checks 3.6 %
  (many small statements: every trigger runs its own); CHECK constraints 5.5 %; heap
  pruning 2.6 %; WAL insertion 2.2 %, WAL flush 1.9 %, commit 2.5 %.
- **V20** replaced the one SQL function the record called per row
  (`notification_latency_bucket`, a query PostgreSQL could not inline): before it, in the
  same measurement, SQL-function calls were 3.4 % of PostgreSQL's samples and the
  PL/pgSQL triggers 18.1 %; after it 0.0 % and 14.1 %.
- **Why 60 µs is out of reach of this schema.** A delivered notification costs two
  versions of its 314–370 B row, an update and a delete of its queue row, an attempt, an
  outbox event, a reservation and the simulated provider's row, and the counter upserts of
  two statement triggers. Without any trigger or foreign key the shares above would leave
  roughly 119 µs (151 µs less 21.3 %). The target needs the claim to stop writing the notification row (the
  queue row holding the claim and its lease) and the counters kept in fewer statements.
  Both were measured on 2026-12-07 (the sections on one trigger per statement and on the
  claim held in the queue table, above): the first saved nothing, the second 6–12 %. What
  remains is per-row work spread over the six tables a delivery writes to, so 60 µs needs
  fewer rows and index entries per delivery, not fewer statements.
- **B1** (same method during `--only B1 --runs 1`, 36,695 /s in that run): PostgreSQL
  50 % of all samples, idle 36 %, the API process 11 %. Inside PostgreSQL: index insertion
  40.6 % (key comparisons alone 17.3 %), the statement triggers 20.2 %, CHECK constraints
  7.0 %, heap insertion 5.7 %. Each notification enters 7 indexes (4 on `notifications`, 3
  on `queue`). More calls in flight do not use the idle time: `--b1-inflight 2` and `4`
  alternated gave 46,045 and 45,734 /s with two, 36,359 and 38,506 /s with four.

### Storage changes of the same evening

`notify-bench --only B2,B7 --workers 1 --runs 1 --no-build --no-docs`, one run per row,
one after the other on the idle host.

| schema | B7 per notification | what moved | B2 in the same run |
|---|---|---|---|
| V18 | 2,448 B | — | 11,882 /s, 142 µs |
| V19: `queue_list_waiting_by_owner` holds owned rows only | 2,349 B | queue 487 → 388 B (that index 102 → 0 B; the bench's notifications have no owner) | 11,782 /s, 145 µs |
| V21: reservations filed under a hash of the recipient | 2,286 B | reservations 207 → 147 B (heap 85 → 61, by recipient 79 → 44) | 12,095 /s, 143 µs |
| tried on V18: `fillfactor` 45 on `notifications` instead of 70 | 2,400 B | heap 765 → 745 B, its indexes 357 → 334 B | 11,618 /s, 148 µs |
| tried on V21: the three listings of `notifications` ascending | 2,292 B | `notifications_list_all` 66 → 69 B | 11,583 /s, 146 µs |

Both tries were left out. A lower `fillfactor` makes more of the release's updates HOT
but reserves as much heap as it saves. Ascending listings did not fill better: the 5,000
rows of one batch call share one `created_at`, so their random ids land all over the last
pages either way.

### Foreign keys replaced by a statement trigger (V22, 2026-12-05)

`delivery_attempts` and `webhook_events` lost their foreign keys to `notifications`; a
statement trigger deletes a deleted notification's attempts and events in one statement
per table. Two builds, 004355a with V22 and 2dbfd4a without it, alternated on the idle
2-core Intel Xeon host of the full run of 2026-12-05 (004355a): `notify-bench --only B2,B7,B10 --workers 1
--runs 1 --no-build --no-docs`, two runs each, in the order V22, V21, V22, V21.

| schema | B2 | B10 round 1 | B10 rounds 2–10, mean | ÷ round 1 | last ÷ first | largest tables ÷ round 1 | left after round 10 |
|---|---|---|---|---|---|---|---|
| V22 | 15,221 /s, 103 µs | 15,874 /s | 13,807 /s | 0.87 | 0.93 | 1.47 | 93,100 |
| V21 | 14,976 /s, 109 µs | 14,199 /s | 11,742 /s | 0.83 | 0.76 | 2.04 | 179,800 |
| V22 | 16,071 /s, 101 µs | 15,877 /s | 14,078 /s | 0.89 | 0.84 | 1.87 | 80,000 |
| V21 | 14,700 /s, 113 µs | 13,818 /s | 12,184 /s | 0.88 | 0.81 | 1.64 | 81,400 |

The drain beside retention gained 16–18 % and PostgreSQL CPU per notification in B2 fell
5–11 %; in the first V21 run retention fell behind (180,000 finished notifications
waiting after the tenth round, twice the usual). The last round against the first stays
noisy (0.84 and 0.93 with V22): the first round drains with little retention beside it.
A profile of one V22 soak (`perf record -a -g -- sleep 20` from its fourth round) puts
`VACUUM` at 4.0 % of PostgreSQL's samples and deleting heap rows at 0.8 %.

### The owner's foreign key (V23, 2026-12-05)

`notify-bench` makes its notifications without an API key, so no figure above pays for
the check V23 removed: every notification made with a key looked its key up and took a
share lock on the key's row. Measured with `pgbench` instead, on two copies of the
migrated schema (one with the foreign key, one without), each holding one client key,
alternated three times each on the same host, 10 s per run:
`pgbench -n -c 8 -j 2 -T 10 -f single.sql` (one `INSERT` of a PENDING notification owned
by the key) gave 4,247 /s without the check against 4,058 /s with it (mean of three,
+5 %); `pgbench -n -c 2 -j 2 -T 10 -f batch.sql` (one `INSERT … SELECT` of 5,000 such
rows) gave 8–11 % more rows a second in each pair. Over one more 10 s single-insert run
each (`pg_stat_slru` reset before): with the check PostgreSQL zeroed 136 pages of
multixact members and looked members up 71,200 times, two for each insert; without it,
none.

### Tried and dropped: retention that yields to a backlog (2026-12-05)

Retention deletes beside the drain, so one idea was to slow it while the queue is
backlogged: a step left behind followed after four times its time (a fifth of its
lane) instead of a quarter (four fifths) whenever a claim had come back full in the last
second. Two builds alternated on the idle 2-core Intel Xeon host,
`notify-bench --only B10 --runs 1 --no-build --no-docs` each: with the slower retention
the drain fell round by round to 0.42 of the first (5,011 against 11,908 /s), 670,000
finished notifications were still waiting after the tenth round, and the tables grew to
5.5 times their size after the first; the unchanged build beside it drained its last
round at 0.83 of its first and ended at 0.69 times the first round's bytes. Bloat costs
the drain far more than retention's deletes do: retention has to keep pace, and keeps its
four fifths.

### B3 on the AMD EPYC host of 2026-12-05 04:40

The full run above gave B3 0.70 (0.65–0.80) of its floor, a B3-only run right after it
(`--only B3 --runs 3`) 0.71 (0.66–0.72); the Intel Xeon host of the run before gave 0.77.
Alternated once more against a build whose local runner skipped the new check for a first
API key (`--only B3 --runs 1`, one each): 0.66 without the check, 0.69 with it, so the
check costs nothing measurable. What grew is PostgreSQL's CPU per request beyond the
floor's: 475 against 408 µs here, 332 against 316 µs on the Intel host.
";

/// The queue table's first figures, from a subset run (kept with the generated figures,
/// not regenerated).
const STORAGE_NOTES: &str = "\
## The queue table (migration V13): one subset run on a busy machine, 2026-12-01

Not regenerated by the bench; kept until a complete run on a quiet machine replaces it.
`cargo run --release -p notify-bench -- --only B1,B2,B6,B7,B8 --workers 1 --runs 1
--no-build` once, at 100,000 notifications, while other builds and a test suite used the
same 2 cores (others' CPU: 56 % of a core during B2, 127 % during the floors). Rates and
CPU per notification are therefore not comparable with the first-round table above; the
storage figures are.

| figure | this run | first round (table above) |
|---|---|---|
| B2, 1 worker | 6,362 /s; floor batch 100 × 1 conn 3,070 /s (2.07 ×) | 14,928 /s; floor 6,645 /s (2.25 ×) |
| PostgreSQL CPU per notification, B2 | 217 µs | 119 µs |
| B7, every table a notification writes to | 2,724 B | — (queue and attempts were not counted) |
| B7, the four tables the first round counted | 1,809 B | 2,490 B |
| `notifications` (heap + indexes) | 1,169 B (heap 806, 6 indexes 363) | 1,951 B (heap 1,319, 8 indexes 632) |
| `queue`, right after the drain (not yet vacuumed) | 689 B | — |
| `delivery_attempts` / `webhook_events` / reservations / simulated deliveries | 227 / 281 / 211 / 148 B | — / 241 / 218 / 147 B |

The notification row's transitions are HOT updates now (no index on `notifications`
covers a column a transition changes); their churn moved to the queue table, whose
100,000-row working set is still allocated right after the drain. B7 ≤ 1 kB is not met.
";

/// `GET /digest` over 1,000,000 notifications, measured by hand before M2 joined a full
/// run (kept with the generated figures, not regenerated).
const DIGEST_NOTES: &str = "\
## GET /digest over 1,000,000 notifications (measured by hand, 2026-12-01)

Target: ≤ 200 ms. Row M2 of the results times it on M1's database in every full run from
now on; these figures were taken by hand before one had run, with the machine shared
(load average ≈ 11 on 2 cores). The database: a fresh one (`notify-local migrate`), filled with M1's
three seed statements at 1,000,000 (`bench/src/scenarios/seed.rs`, `$1` = 1000000, then
`ANALYZE`): 1,000,000 notifications, 950,000 webhook events. One `APP_ROLE=api`
`notify-local` (anonymous), 3 untimed then 30 timed sequential `GET /digest` from Python's
`urllib` on 127.0.0.1:

| database | build | p50 | p95 | max |
|---|---|---|---|---|
| as seeded (no dead-lettering in the last hour; 9 lanes late, given-up events) | debug | 11.8 ms | 24.4 ms | 24.4 ms |
| 20,000 dead-lettered in the last hour, 9,406 webhook events given up in the last day | debug | 77.5 ms | 96.1 ms | 97.1 ms |
| the same | release | 84.9 ms | 127.1 ms | 191.3 ms |
| the 20,000 moved two hours back | release | 33.4 ms | 55.7 ms | 64.2 ms |

`cargo run --release --bin notify-bench -- --only M1 --runs 1` (M2 on M1's database as
seeded, reqwest keep-alive client, same afternoon): p50 1.42 ms, p95 7.92 ms, max 8.22 ms
(that run's M1, for scale: `GET /metrics` p95 68.5 ms JSON, 73.1 ms Prometheus).

The time grows with the dead-lettering of the last hour (the five top errors are a
group-by over those rows), not with the table: every other finding reads a partial index
top-down (`queue_claim_order` once per channel, class and priority,
`webhook_events_due`, `webhook_events_given_up_recent`), the suppressions of the last
week, the maintained counts and the keys.

The per-destination backlog (2026-12-07): the outbox statement of the digest
(`shared/sql/webhook_events/digest_outbox.sql`) on a database holding 1,000,000 routed
webhook events all due more than 300 s ago (half to one endpoint, half to `WEBHOOK_URL`;
`ANALYZE`d), run three times in `psql`: 12.5, 15.0 and 7.1 ms. `EXPLAIN ANALYZE` shows
one ordered range of `webhook_events_due` stopping at the 10,000 oldest (2.8 ms), so the
time does not grow with the backlog.
";

/// A one-off profile of the B2 drain, kept with the generated figures (not regenerated).
const PROFILE_NOTES: &str = "\
## Where the drain's time went before the queue table (profile of 2026-11-30, commits 3ad9196–6784490)

Not regenerated by the bench; it describes the schema before the queue table (migration
V13 moved the claim, lease and status indexes off `notifications`, so its transitions are
now HOT updates). Measured by hand on the same machine with the same
one-worker B2 pass (100,000 notifications, default worker settings, PostgreSQL reached
over TLS on loopback).

- **The drain is bound by PostgreSQL CPU.** Over the drain PostgreSQL used 1.4–1.8 of the
  2 cores (≈ 100 µs of PostgreSQL CPU per notification) while the worker process used
  ≈ 7 µs per notification (≈ 10% of a core). More worker processes add contention, not
  throughput (table above).
- **Per statement** (server-side durations from `log_min_duration_statement = 0` on the
  bench database, 1,001 batches of 100, 10 lanes in flight, so each includes waiting for
  a core): `record` 12.1 ms per batch (33% of server time), `claim` 9.8 ms (28%), the
  `COMMIT` of the fence/admission transaction 8.0 ms (22%: waiting for the WAL flush
  behind the other lanes' writes), reservation insert 1.4 ms (4%), simulated provider
  1.0 ms (3%), start fence 0.7 ms (2%), reservation read 0.35 ms, recipient locks
  0.24 ms. Each batch costs 9 round trips: claim; BEGIN; locks + fence (pipelined);
  reservation read; `SELECT now()` (sent whenever none of the batch's recipients has a live
  reservation, i.e. always here); reservation insert; COMMIT; provider; record.
- **Inside PostgreSQL** (`perf record -e cpu-clock`, postgres processes): index insertion
  26% (`ExecInsertIndexTuples`), index scans and probes 15–22% (claim CTEs, the
  `unnest` joins of fence/provider/record), bottom-up index deletion 5% (version churn of
  non-HOT updates), the `webhook_events → notifications` foreign-key check 4%
  (`AfterTriggerEndQuery`/SPI, plus a `FOR KEY SHARE` lock on the row just updated),
  `ON CONFLICT` arbitration 4%, WAL insertion 2–4%.
- **Why so much index work:** every transition of a notification changes `status` (and
  `next_attempt_at` or the lease), which are indexed or in partial-index predicates, so no
  update is HOT. Over its life one notification writes 4 heap versions and 23 index
  entries (6 on insert, 6 on release, 6 on claim, 5 on record); the drain alone writes 11
  of them plus the outbox row (3 index entries), the reservation (2) and the simulated
  delivery (1). `notifications_list_by_status` is the largest index after a drain
  (≈ 230 B per notification, every transition inserts a new key) — the main reason B7 is
  2.5 kB per notification.
- **Settings, not code:** `WORKER_BATCH_SIZE=500` drained 20,700 and 22,300 /s (the latter
  with `WORKER_CONCURRENCY=4`) against 14,500 and 17,600 /s at the default 100 in the same
  half hour; `WORKER_CONCURRENCY=2` or `4` at batch 100 was slower (9,800–12,100 /s).
  `synchronous_commit=off` did not change the drain beyond the noise (13,300 → 14,500 /s).
- **Start → ready** (B6) was ≈ 100 ms at 3ad9196, ≈ 75 ms of it building the TLS
  connector twice; 6784490 builds one per process and none for `sslmode=disable`. Since
  then (probe by hand, spawn → `/health` 200): api ≈ 13 ms and worker ≈ 35 ms without TLS;
  api ≈ 60 ms and worker ≈ 80 ms over TLS on loopback (this server has `ssl = on`; one
  connector build ≈ 35 ms plus the handshakes). The worker is slower because its ten lanes
  open their connections (and LISTEN its own) at once.
";

/// What V18, the lane count and the B7 breakdown were measured with (kept with the
/// generated figures, not regenerated).
const LANES_AND_LISTINGS_NOTES: &str = "\
## Lanes, listings and what B7 is made of (2026-12-04 evening, 2-core AMD EPYC host)

Subset runs alternated on an otherwise idle host, one run each unless more are given;
every command is `notify-bench --no-build --no-docs --runs 1` with the options named.

- **Four lanes instead of nine** (`--only B2,B5 --workers 1 --env WORKER_LANES=N`; nine is
  what the default settings ran before, one lane per pooled connection but the one kept for
  maintenance):

  | lanes | B2 drain | B5 HIGH p99 | B5 LOW drain |
  |---|---|---|---|
  | 9 | 12,170 and 12,215 /s | 122 and 117 ms | 11,242 and 11,689 /s |
  | 4 | 12,452 and 12,854 /s | 59.9 and 62.6 ms | 11,303 and 11,431 /s |
  | 3 | 10,195 /s | 51.1 ms | 11,626 /s |
  | 2 | 12,081 /s | 40.6 ms | 10,704 /s |

  The drain is bound by PostgreSQL CPU either way; past a few lanes the extra ones only
  queue statements there, and a HIGH notification claimed into a batch waits behind every
  one of them. `WORKER_LANES` now defaults to 4. B11 is the exception: with the SES stub
  answering in 5 ms a lane spends most of its batch in the database, so lanes keep calls
  going (`--only B11 --env WORKER_LANES=N`: 4 lanes 4,620 and 4,625 /s, 6 lanes 5,189 /s,
  9 lanes 5,592 and 5,799 /s); B11 runs with `WORKER_LANES=9`. B9 with 9 and 4 lanes:
  transactional p99 96.8 and 100 ms, expansion 5.8 and 6.0 s.
- **V18: the queue's listings leave PROCESSING out** (`--only B2,B7 --workers 1`, V17 and
  V18 alternated): B7 2,526 and 2,532 B per notification before, 2,457 and 2,466 after;
  the queue 559 and 564 B before (its two listings 274 B), 489 and 490 B after (191 B);
  B2 11,851 and 11,385 /s before, 11,548 and 11,782 /s after.
- **Time-ordered ids, tried and left out.** V18 with UUIDv7 notification ids and every
  listing rebuilt ascending, alternated with V18 as kept: B7 2,574 to 2,594 B against
  2,457 to 2,466 B (the notifications' heap 807 to 829 B against 768 to 775, its primary key
  60 to 63 B against 51 to 52, `notifications_list_all` 78 to 81 B against 67 to 69); B1
  43,665 to 48,661 /s against 40,171 to 41,437; B2 11,682 to 12,739 /s against 11,548 to
  11,782. Loaded by one statement at a time an ordered key fills its index far better
  (100,000 rows in `psql`: 32 B per id against 44 B for random ids), but B1 has two batch
  calls in flight: two ordered streams interleave, every insertion lands just left of the
  right edge, and those pages split in half. The storage target counts more than the
  intake gain, so ids stay random.
- **Why the notifications table is 1.1 kB of B7.** Its rows are 314 B as created, 362 B
  while claimed, 370 B once SENT (`pg_column_size`). 100,000 rows loaded in 20 statements
  of 5,000 as B1 does take 482 B per notification of heap (`fillfactor` 70). The B2 release
  is one `UPDATE` of every row: PostgreSQL cannot prune versions its own statement made
  dead, so once a page's free room is gone the rest of its rows move to new pages (41,474
  of 100,000 updates were HOT) and the heap grows to 764 B per notification, with a second
  entry in every index of the table for each row that moved (primary key 42 to 51 B). No
  production path updates every open notification at once (a notification falls due by
  the clock); the claim and the record that follow, each its own short transaction, prune
  as they go. The section B7: where the bytes are gives the rest, index by index.
";
