//! Every statement file under `shared/sql/` prepares against the migrated schema, so a
//! renamed column or table fails here, naming the file, rather than at run time.

use std::path::{Path, PathBuf};

use notify_shared::sql::SQL_DIR;
use notify_tests::TestDb;

/// Every `.sql` file under `dir`, at any depth, sorted.
fn statement_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let entries = std::fs::read_dir(&folder)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", folder.display()));
        for entry in entries {
            let path = entry.expect("folder entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "sql") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

#[tokio::test]
async fn every_statement_file_prepares_against_a_freshly_migrated_database() {
    let db = TestDb::new().await;
    let client = db.pool.get().await.expect("connection");
    // The check has teeth: preparing is checked against the schema.
    assert!(
        client
            .prepare("SELECT no_such_column FROM notifications")
            .await
            .is_err(),
        "a statement naming a missing column prepared"
    );

    let files = statement_files(Path::new(SQL_DIR));
    assert!(
        files.len() >= 30,
        "only {} statement files under {SQL_DIR}",
        files.len()
    );
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", file.display()));
        let name = file.strip_prefix(SQL_DIR).unwrap_or(file).display();
        if text.trim().is_empty() {
            failures.push(format!("{name}: empty"));
            continue;
        }
        if let Err(error) = client.prepare(&text).await {
            let reason = error
                .as_db_error()
                .map_or_else(|| error.to_string(), |db| db.message().to_string());
            failures.push(format!("{name}: {reason}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} statements do not prepare:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

/// The plan PostgreSQL chooses for the statement in `shared/sql/<file>` with `params`.
async fn plan(
    client: &deadpool_postgres::Object,
    file: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> String {
    let path = Path::new(SQL_DIR).join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    let rows = client
        .query(&format!("EXPLAIN {text}"), params)
        .await
        .unwrap_or_else(|error| panic!("EXPLAIN {file}: {error}"));
    rows.iter()
        .map(|row| row.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn the_claims_find_the_rows_they_picked_by_key_when_statistics_show_a_backlog() {
    let db = TestDb::new().await;
    // Backlogs the statistics know of: notifications due, notifications expired before
    // they were sent, routed webhook events. Joined to the rows a claim picked, the tables
    // were read whole (a hash join over a sequential scan) on every claim.
    for expires_at in ["NULL", "now() - interval '1 minute'"] {
        db.execute(
            &format!(
                "INSERT INTO notifications (id, idempotency_key, fingerprint, recipient,
                                            channel, priority, payload, scheduled_at,
                                            next_attempt_at, max_attempts, class, category,
                                            status, expires_at)
                 SELECT gen_random_uuid(), gen_random_uuid()::text, repeat('f', 64),
                        'r' || i || '@example.com', 'EMAIL', 1, '{{}}'::jsonb, now(), now(), 6,
                        'TRANSACTIONAL', 'general', 'PENDING', {expires_at}
                 FROM generate_series(1, 3000) AS i"
            ),
            &[],
        )
        .await;
    }
    db.execute(
        "INSERT INTO webhook_events (id, type, notification_id, status, attempt_count,
                                     redrive_generation, occurred_at, routed_at)
         SELECT gen_random_uuid(), 'notification.sent', gen_random_uuid(), 'SENT', 1, 0,
                now(), now()
         FROM generate_series(1, 3000)",
        &[],
    )
    .await;
    db.execute("ANALYZE notifications, queue, webhook_events", &[])
        .await;
    let client = db.pool.get().await.expect("connection");

    let claim: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
        [&"EMAIL", &100i64, &"plan-check", &60_000i64, &100i64];
    let webhook_claim: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
        [&100i64, &60_000i64, &5i32, &"lease expired"];
    let expire: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&100i64];
    for (file, params, table) in [
        (
            "notifications/claim_channel.sql",
            &claim[..],
            "notifications",
        ),
        ("notifications/claim_paced.sql", &claim[..], "notifications"),
        (
            "webhook_events/claim.sql",
            &webhook_claim[..],
            "webhook_events",
        ),
        ("notifications/expire.sql", &expire[..], "notifications"),
    ] {
        let plan = plan(&client, file, params).await;
        assert!(
            !plan.contains(&format!("Seq Scan on {table}")),
            "{file} reads all of {table}:\n{plan}"
        );
    }
}
