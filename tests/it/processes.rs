//! The real `notify-local` binary as separate processes: a clean stop on SIGTERM with the
//! private PostgreSQL removed, no loss or double delivery when a worker is SIGKILLed
//! mid-drain, and no claim left behind by a graceful shutdown.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use notify_tests::process::{Children, Process, processes_mentioning, worker_command};
use notify_tests::{TestDb, factory, notify_local_binary};

#[tokio::test]
async fn without_a_database_url_it_runs_a_private_postgres_and_sigterm_removes_it_completely() {
    let mut children = Children::default();
    let index = children.start(
        Command::new(notify_local_binary())
            .env_remove("DATABASE_URL")
            .env("PORT", "0")
            .env("APP_ROLE", "all")
            .env("RUST_LOG", "warn"),
    );
    let process = &mut children.0[index];
    let data_dir = process
        .wait_for_line("started a private PostgreSQL in", Duration::from_secs(60))
        .await;
    assert!(Path::new(&data_dir).is_dir(), "{data_dir} is not a folder");
    let address = process
        .wait_for_line("listening on", Duration::from_secs(60))
        .await;

    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let healthy = client
            .get(format!("{address}/health"))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .is_ok_and(|r| r.status() == reqwest::StatusCode::OK);
        if healthy {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "/health never answered 200:\n{}",
            process.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !processes_mentioning(&data_dir).is_empty(),
        "the private PostgreSQL should be running from {data_dir}"
    );
    // It takes a password, random per cluster, which the log never shows: another user
    // of the machine who finds the port cannot connect.
    let database = process
        .wait_for_line("database", Duration::from_secs(5))
        .await;
    assert!(database.contains("postgres:***@127.0.0.1:"), "{database}");
    let port = database
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .expect("port");
    let without_password = tokio_postgres::connect(
        &format!("postgres://postgres@127.0.0.1:{port}/postgres?sslmode=disable"),
        tokio_postgres::NoTls,
    )
    .await;
    assert!(
        without_password.is_err(),
        "connected to the private PostgreSQL without its password"
    );

    process.signal(libc::SIGTERM);
    let status = process.wait_exit(Duration::from_secs(30)).await;
    assert!(status.success(), "exit {status}:\n{}", process.log());
    assert!(
        !Path::new(&data_dir).exists(),
        "{data_dir} is still there after exit"
    );
    // The server's processes are reaped before notify-local exits; allow the kernel a
    // moment to tear down what remains.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut leftovers = processes_mentioning(&data_dir);
    while !leftovers.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        leftovers = processes_mentioning(&data_dir);
    }
    assert!(leftovers.is_empty(), "left running: {leftovers:?}");
}

#[tokio::test]
async fn a_worker_sigkilled_mid_drain_loses_nothing_and_delivers_nothing_twice() {
    const TOTAL: i64 = 2000;
    let db = TestDb::new().await;
    let ids = factory::create_due_bulk(&db.pool, TOTAL).await;
    assert_eq!(ids.len() as i64, TOTAL);

    // Small batches and two lanes per process so that the drain takes a few seconds.
    let env = [
        ("MOCK_LATENCY_MS", "20"),
        ("MOCK_FAILURE_RATE", "0"),
        ("JOB_VISIBILITY_TIMEOUT_SECONDS", "3"),
        ("PROVIDER_TIMEOUT_MS", "1000"),
        ("WORKER_POLL_INTERVAL_MS", "100"),
        ("WORKER_BATCH_SIZE", "5"),
        ("WORKER_CONCURRENCY", "2"),
    ];
    let mut children = Children::default();
    for _ in 0..3 {
        children.start(&mut worker_command(&db.url, &env));
    }
    let victim_pid = children.0[0].pid();

    // Well into the drain (about a second in)...
    db.wait_for_count(
        "SELECT count(*) FROM notifications WHERE status = 'SENT'",
        Duration::from_secs(30),
        |sent| sent >= 400,
        || {
            children
                .0
                .iter()
                .map(Process::log)
                .collect::<Vec<_>>()
                .join("\n")
        },
    )
    .await;
    let victim = &mut children.0[0];
    // ...freeze the victim at a moment when it holds claims, then kill it: deterministic
    // "died with work in hand", whatever the timing of the drain.
    let held_by_victim = format!(
        "SELECT count(*) FROM notifications
         WHERE status = 'PROCESSING' AND claimed_by LIKE 'sweeper-{victim_pid}-%'"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let orphaned = loop {
        victim.signal(libc::SIGSTOP);
        let held = db.count(&held_by_victim).await;
        if held > 0 {
            victim.signal(libc::SIGKILL);
            break held;
        }
        victim.signal(libc::SIGCONT);
        assert!(
            Instant::now() < deadline,
            "the victim never held a claim:\n{}",
            victim.log()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let status = victim.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    let pending_at_kill = db
        .count("SELECT count(*) FROM notifications WHERE status = 'PENDING'")
        .await;
    // A replacement joins mid-drain.
    children.start(&mut worker_command(&db.url, &env));

    let logs = || children.logs();
    db.wait_for_count(
        "SELECT count(*) FROM notifications WHERE status IN ('PENDING', 'PROCESSING')",
        Duration::from_secs(60),
        |left| left == 0,
        logs,
    )
    .await;

    let sent = db
        .count("SELECT count(*) FROM notifications WHERE status = 'SENT'")
        .await;
    let twice = db
        .count("SELECT count(*) FROM simulated_deliveries WHERE calls > 1")
        .await;
    eprintln!(
        "victim held {orphaned}; {pending_at_kill} PENDING at the kill; {twice} keys called twice"
    );
    assert_eq!(
        sent,
        TOTAL,
        "every notification sent; none lost\n{}",
        logs()
    );
    assert_eq!(
        db.count("SELECT count(*) FROM simulated_deliveries").await,
        TOTAL
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM notifications n
             JOIN simulated_deliveries d ON d.delivery_key = n.id"
        )
        .await,
        TOTAL,
        "every notification delivered under its own key"
    );
    // Only the victim's orphans were attempted twice: each was recovered with its attempt
    // kept and claimed once more; never more than one worker can hold (batch 5 x 2
    // lanes). The count taken while it was frozen is no exact figure either way: the
    // server finishes a statement the victim had already sent, so a claim may commit after
    // the count and a record may finish claims the count still saw.
    let retried = db
        .count("SELECT count(*) FROM notifications WHERE attempt_count > 1")
        .await;
    assert!(
        retried <= 10,
        "{retried} notifications took more than one attempt; the victim held {orphaned}"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM notifications WHERE attempt_count > 2")
            .await,
        0
    );
    assert_eq!(
        db.count(
        "SELECT count(*) FROM simulated_deliveries d JOIN notifications n ON n.id = d.delivery_key
             WHERE d.calls > 1 AND n.attempt_count < 2"
        )
        .await,
        0,
        "a key called twice must belong to a recovered claim"
    );
    assert_eq!(
        db.count(
            "SELECT count(DISTINCT notification_id) FROM webhook_events WHERE status = 'SENT'"
        )
        .await,
        TOTAL
    );
    assert_eq!(db.count("SELECT count(*) FROM webhook_events").await, TOTAL);
    assert!(
        pending_at_kill > 0,
        "the kill should land mid-drain (nothing was left PENDING)"
    );
}

#[tokio::test]
async fn sigterm_during_a_drain_leaves_no_claim_behind_and_refunds_untried_work() {
    const TOTAL: i64 = 500;
    let db = TestDb::new().await;
    factory::create_due_bulk(&db.pool, TOTAL).await;
    let mut children = Children::default();
    let index = children.start(&mut worker_command(
        &db.url,
        &[
            ("MOCK_LATENCY_MS", "200"),
            ("MOCK_FAILURE_RATE", "0"),
            ("WORKER_BATCH_SIZE", "10"),
            ("WORKER_CONCURRENCY", "2"),
            ("WORKER_POLL_INTERVAL_MS", "100"),
        ],
    ));
    let process = &mut children.0[index];

    // Stop it mid-drain (a few hundred ms in: the first batch is through) while it has
    // work in hand. Whether that work is already at the provider (finished and recorded)
    // or not yet started (released) depends on timing; both must leave no claim behind.
    db.wait_for_count(
        "SELECT count(*) FROM notifications WHERE status = 'SENT'",
        Duration::from_secs(30),
        |sent| sent > 0,
        || process.log(),
    )
    .await;
    db.wait_for_count(
        "SELECT count(*) FROM notifications WHERE status = 'PROCESSING'",
        Duration::from_secs(30),
        |held| held > 0,
        || process.log(),
    )
    .await;
    process.signal(libc::SIGTERM);
    let status = process.wait_exit(Duration::from_secs(30)).await;
    assert!(status.success(), "exit {status}:\n{}", process.log());

    assert_eq!(
        db.count("SELECT count(*) FROM notifications WHERE status = 'PROCESSING'")
            .await,
        0,
        "claims left behind"
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM notifications WHERE status = 'PENDING' AND attempt_count <> 0"
        )
        .await,
        0,
        "an untried notification kept its attempt"
    );
    let sent = db
        .count("SELECT count(*) FROM notifications WHERE status = 'SENT'")
        .await;
    let pending = db
        .count("SELECT count(*) FROM notifications WHERE status = 'PENDING'")
        .await;
    eprintln!("after SIGTERM: {sent} SENT, {pending} PENDING");
    assert_eq!(sent + pending, TOTAL, "only SENT or untried PENDING");
    assert!(pending > 0, "it stopped claiming");
    assert_eq!(
        db.count("SELECT count(*) FROM notifications WHERE status = 'SENT' AND attempt_count <> 1")
            .await,
        0
    );
}

/// `notify-local keys`: a name the table refuses is refused by the command first, in
/// words, and an error from the database never prints its DETAIL (which quotes the row,
/// a key's hash among it).
#[tokio::test]
async fn the_keys_command_refuses_a_bad_name_in_words_and_prints_no_row() {
    let db = TestDb::new().await;
    let run = |args: &[&str]| {
        Command::new(notify_local_binary())
            .env("DATABASE_URL", &db.url)
            .env("RUST_LOG", "warn")
            .args(args)
            .output()
            .expect("notify-local runs")
    };
    for name in [String::new(), "n".repeat(201)] {
        let output = run(&["keys", "create", "--scope", "client", "--name", &name]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{stderr}");
        assert!(
            stderr.contains("--name must be 1 to 200 characters"),
            "{stderr}"
        );
        assert!(!stderr.contains("DETAIL"), "{stderr}");
    }
    let output = run(&["keys", "create", "--scope", "client", "--name", "ok"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        db.count("SELECT count(*) FROM api_keys WHERE name = 'ok'")
            .await,
        1
    );
}
