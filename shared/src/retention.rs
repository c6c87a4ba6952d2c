//! Retention: the maintenance step that keeps the tables flat. Finished notifications
//! (with their attempts, webhook events and reservations) and delivered webhook events are
//! deleted in bounded statements, oldest first, within a time budget per step, so a
//! backlog of old rows is worked off over several steps and never in one giant delete.
//! The statements live with their tables (`queue::purge`, `webhook::outbox::purge`); this
//! module paces them ([`Pacer`]: faster while behind), vacuums the small tables that turn
//! over faster than autovacuum looks at them ([`vacuum_due_tables`]) and reads the
//! running totals (`retention_counts`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use deadpool_postgres::{GenericClient, Pool};
use serde::Serialize;

use crate::config::RetentionConfig;
use crate::sql::{Statement, statement};
use crate::{queue, webhook};

const DELETED_SO_FAR: Statement = statement!("retention_counts/read");
const VACUUM_DUE: Statement = statement!("notifications/vacuum_due");

/// Every table a notification's life writes to: the tables [`vacuum_due_tables`] may
/// name (the only names ever put into a `VACUUM`), and the ones the benchmark weighs.
pub const NOTIFICATION_TABLES: [&str; 6] = [
    "notifications",
    "queue",
    "delivery_attempts",
    "webhook_events",
    "rate_limit_reservations",
    "simulated_deliveries",
];
/// Tables of more rows than this are left to autovacuum (see `notifications/vacuum_due`).
pub const VACUUM_MAX_ROWS: i64 = 2_000_000;

/// Rows per delete statement (the spec's bound is 5,000).
pub const BATCH: i64 = 5_000;
/// How long one step may keep deleting before it hands the connection back.
pub const STEP_BUDGET: Duration = Duration::from_millis(250);
/// How often a sweeper runs the step while retention is caught up.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// While a step ends on its budget with rows still waiting, the next one follows after
/// this fraction of the time the last one took. One step a second deletes one or two
/// batches (a 5,000-row statement took 200–400 ms on a busy 2-core machine), fewer than a
/// drain of several thousand a second finishes; so while behind, steps nearly follow each
/// other, yet hold at most four fifths of the time of the one lane that runs them, and a
/// sweeper with a single lane still delivers.
pub const BEHIND_PAUSE: f64 = 0.25;

/// Rows one step (or the whole history, in [`deleted_so_far`]) deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deleted {
    pub notifications_deleted: u64,
    pub webhook_events_deleted: u64,
}

/// What one step did, and whether it left rows behind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Step {
    pub deleted: Deleted,
    /// The budget ran out while the last batch of a table was full: more rows are due.
    pub behind: bool,
    pub took: Duration,
}

impl Step {
    /// How long to wait before the next step: [`INTERVAL`] once caught up; while behind,
    /// [`BEHIND_PAUSE`] of the time this one took.
    pub fn pause(&self) -> Duration {
        if self.behind {
            self.took.mul_f64(BEHIND_PAUSE)
        } else {
            INTERVAL
        }
    }
}

/// One step: full batches are repeated while the budget lasts; a short batch means the
/// table is caught up.
pub async fn step(pool: &Pool, retention: &RetentionConfig) -> anyhow::Result<Deleted> {
    Ok(timed_step(pool, retention).await?.deleted)
}

/// [`step`], telling whether it caught up and how long it took (what [`Pacer`] needs).
pub async fn timed_step(pool: &Pool, retention: &RetentionConfig) -> anyhow::Result<Step> {
    let started = Instant::now();
    let db = pool.get().await?;
    let mut deleted = Deleted::default();
    let mut behind = false;
    loop {
        let gone =
            queue::purge(&db, retention.notifications, retention.dead_letters, BATCH).await?;
        deleted.notifications_deleted += gone.notifications;
        deleted.webhook_events_deleted += gone.webhook_events;
        if gone.notifications < BATCH as u64 {
            break;
        }
        if started.elapsed() >= STEP_BUDGET {
            behind = true;
            break;
        }
    }
    loop {
        let gone = webhook::outbox::purge(&db, retention.webhook_events, BATCH).await?;
        deleted.webhook_events_deleted += gone;
        if gone < BATCH as u64 {
            break;
        }
        if started.elapsed() >= STEP_BUDGET {
            behind = true;
            break;
        }
    }
    Ok(Step {
        deleted,
        behind,
        took: started.elapsed(),
    })
}

/// When a process runs its next step: one at a time (a process's lanes share it), at
/// [`INTERVAL`] while caught up and sooner while behind ([`Step::pause`]).
#[derive(Debug, Default)]
pub struct Pacer {
    next: Mutex<Option<Instant>>,
    running: AtomicBool,
}

/// The right to run one step; dropping it without [`Turn::finish`] (a failed step) puts
/// the next one [`INTERVAL`] away.
pub struct Turn<'a> {
    pacer: &'a Pacer,
    pause: Duration,
}

impl Pacer {
    /// A turn when a step is due at `now` and none is running.
    pub fn take(&self, now: Instant) -> Option<Turn<'_>> {
        let due = self
            .next
            .lock()
            .map(|next| next.is_none_or(|at| now >= at))
            .unwrap_or(true);
        if !due || self.running.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(Turn {
            pacer: self,
            pause: INTERVAL,
        })
    }
}

impl Turn<'_> {
    /// The step ran: the next is due after its [`Step::pause`].
    pub fn finish(mut self, step: &Step) {
        self.pause = step.pause();
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if let Ok(mut next) = self.pacer.next.lock() {
            *next = Some(Instant::now() + self.pause);
        }
        self.pacer.running.store(false, Ordering::Release);
    }
}

/// Vacuums each table of a notification's life that its statistics say is due (see
/// `notifications/vacuum_due`): small tables that retention and the drain turn over faster
/// than autovacuum looks at them. `SKIP_LOCKED`: a table another vacuum holds is skipped.
/// Returns the tables vacuumed.
pub async fn vacuum_due_tables(pool: &Pool) -> anyhow::Result<Vec<&'static str>> {
    let db = pool.get().await?;
    let statement = VACUUM_DUE.prepare(&db).await?;
    let rows = db.query(&statement, &[&VACUUM_MAX_ROWS]).await?;
    let mut vacuumed = Vec::new();
    for row in rows {
        let name: String = row.try_get("table_name")?;
        // Only a name of the fixed list reaches the statement.
        if let Some(table) = NOTIFICATION_TABLES.iter().find(|t| **t == name) {
            db.batch_execute(&format!("VACUUM (SKIP_LOCKED) {table}"))
                .await?;
            vacuumed.push(*table);
        }
    }
    Ok(vacuumed)
}

/// Every row the retention step has deleted since the database was created.
pub async fn deleted_so_far(db: &impl GenericClient) -> Result<Deleted, tokio_postgres::Error> {
    let statement = DELETED_SO_FAR.prepare(db).await?;
    let row = db.query_one(&statement, &[]).await?;
    let count = |column: &str| -> Result<u64, tokio_postgres::Error> {
        Ok(u64::try_from(row.try_get::<_, i64>(column)?).unwrap_or(0))
    };
    Ok(Deleted {
        notifications_deleted: count("notifications")?,
        webhook_events_deleted: count("webhook_events")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(behind: bool, took_ms: u64) -> Step {
        Step {
            deleted: Deleted::default(),
            behind,
            took: Duration::from_millis(took_ms),
        }
    }

    #[test]
    fn a_caught_up_step_waits_the_interval_and_a_step_left_behind_hardly_waits() {
        assert_eq!(step(false, 40).pause(), INTERVAL);
        assert_eq!(step(true, 300).pause(), Duration::from_millis(75));
        // Retention holds at most four fifths of its lane's time while behind.
        let s = step(true, 280);
        let share = s.took.as_secs_f64() / (s.took + s.pause()).as_secs_f64();
        assert!((share - 0.8).abs() < 1e-9, "{share}");
    }

    #[test]
    fn one_step_at_a_time_and_the_next_follows_the_pause_of_the_last() {
        let pacer = Pacer::default();
        let now = Instant::now();
        let turn = pacer.take(now).expect("the first step is due at once");
        assert!(
            pacer.take(now).is_none(),
            "a second lane waits while one runs"
        );
        turn.finish(&step(true, 400));
        let after = Instant::now();
        assert!(pacer.take(after).is_none(), "the pause is not over yet");
        let turn = pacer
            .take(after + Duration::from_millis(101))
            .expect("due after a quarter of 400 ms");
        turn.finish(&step(false, 10));
        assert!(pacer.take(Instant::now() + INTERVAL / 2).is_none());
        let turn = pacer
            .take(Instant::now() + INTERVAL)
            .expect("due an interval after a caught-up step");
        // A step that failed (the turn dropped unfinished) is retried an interval later.
        drop(turn);
        assert!(pacer.take(Instant::now() + INTERVAL / 2).is_none());
        assert!(pacer.take(Instant::now() + INTERVAL).is_some());
    }
}
