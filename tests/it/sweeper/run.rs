//! The sweeper loop: wake-ups by LISTEN/NOTIFY.

use std::sync::Arc;
use std::time::{Duration, Instant};

use notify_shared::notification::Status;
use notify_shared::queue;
use notify_shared::stop::StopSignal;
use notify_shared::sweeper;
use notify_shared::wake;
use notify_tests::TestDb;
use notify_tests::doubles::Fixed;
use notify_tests::factory::{self, Spec};
use notify_tests::worker::{self, simulated, worker_config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inserted_due_notification_wakes_an_idle_sweeper_long_before_its_next_poll() {
    let db = TestDb::new().await;
    let (handle, stop) = StopSignal::new();
    let wake = wake::listen(db.url.clone(), queue::WAKE_CHANNEL, stop.clone());
    // The listener bumps once when its LISTEN is in place.
    let mut connected = wake.clone();
    tokio::time::timeout(Duration::from_secs(10), connected.notified())
        .await
        .expect("the listener connects");

    let sweeper = worker::sweeper(&db.pool, Arc::new(simulated(db.pool.clone())))
        .random(Fixed(0.0))
        .config(
            worker_config()
                .concurrency(1)
                .poll_interval(Duration::from_secs(10)),
        )
        .build();
    let running = tokio::spawn(sweeper::run(Arc::new(sweeper), wake, stop.clone()));
    // Let the loop finish its first steps and settle into waiting. This can only make the
    // test stricter: if the insert were picked up by a start-up step, it would pass anyway.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let inserted_at = Instant::now();
    let n = factory::create(&db.pool, Spec::default()).await;
    let mut status = Status::Pending;
    while inserted_at.elapsed() < Duration::from_secs(1) {
        status = factory::load(&db.pool, n.id).await.status;
        if status == Status::Sent {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waited = inserted_at.elapsed();
    handle.stop();
    let total = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the loop stops")
        .expect("the loop ends cleanly");
    assert_eq!(status, Status::Sent, "not sent {waited:?} after insertion");
    assert_eq!(total.sent, 1, "{total:?}");
}
