//! The database's limits as the service meets them: nothing waits forever on a stalled
//! database or a drained pool, made-up API keys never reach it, `/health` says plainly
//! when it is gone, a client's listing by status is served by its own index, and the
//! claims find what they picked by key.

use std::time::{Duration, Instant};

use notify_shared::auth::{self, Authenticator, Scope};
use notify_shared::config::{Config, DatabaseTimeouts};
use notify_shared::db;
use notify_shared::intake::{self, AppState, Routes};
use notify_tests::TestDb;
use reqwest::StatusCode;
use serde_json::Value;

/// Serves the whole API on `pool` with `auth`; returns its base URL.
async fn serve(pool: db::DbPool, auth: Authenticator) -> String {
    let config = Config::from_vars(Default::default()).expect("defaults");
    let router = intake::router(AppState::new(pool, &config, auth), Routes::Full);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}")
}

fn short(pool_wait_ms: u64, statement_ms: u64) -> DatabaseTimeouts {
    DatabaseTimeouts {
        pool_wait: Duration::from_millis(pool_wait_ms),
        statement: Duration::from_millis(statement_ms),
        ..DatabaseTimeouts::default()
    }
}

#[tokio::test]
async fn a_drained_pool_answers_503_after_the_pool_timeout_instead_of_hanging() {
    let db = TestDb::new().await;
    let pool = db::create_pool_with(&db.url, 1, &short(300, 30_000)).expect("pool");
    let base = serve(pool.clone(), Authenticator::anonymous()).await;
    let _held = pool.get().await.expect("the only connection");
    let started = Instant::now();
    let response = reqwest::get(format!("{base}/notifications"))
        .await
        .expect("request");
    let waited = started.elapsed();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(waited < Duration::from_secs(3), "answered after {waited:?}");
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["statusCode"], 503);
}

#[tokio::test]
async fn a_statement_that_runs_past_the_statement_timeout_is_cancelled() {
    let db = TestDb::new().await;
    let pool = db::create_pool_with(&db.url, 1, &short(5_000, 200)).expect("pool");
    let conn = pool.get().await.expect("connection");
    let started = Instant::now();
    let error = conn
        .execute("SELECT pg_sleep(5)", &[])
        .await
        .expect_err("cancelled");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(
        error.code(),
        Some(&tokio_postgres::error::SqlState::QUERY_CANCELED)
    );
}

#[tokio::test]
async fn made_up_api_keys_are_refused_without_a_database_connection() {
    let db = TestDb::new().await;
    let pool = db::create_pool_with(&db.url, 1, &short(300, 30_000)).expect("pool");
    let (_, key) = {
        let conn = pool.get().await.expect("connection");
        auth::create_key(&conn, "ops", Scope::Operator)
            .await
            .expect("key")
    };
    let base = serve(pool.clone(), Authenticator::with_keys(pool.clone())).await;
    let client = reqwest::Client::new();
    // The first request reads the active keys.
    let warm = client
        .get(format!("{base}/notifications"))
        .bearer_auth(&key)
        .send()
        .await
        .expect("request");
    assert_eq!(warm.status(), StatusCode::OK);

    // With the only connection taken, fifty made-up keys are still refused at once: none
    // of them waits for the pool.
    let _held = pool.get().await.expect("the only connection");
    let started = Instant::now();
    let attempts = (0..50).map(|_| {
        let made_up = format!(
            "nq_{}_{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        client
            .get(format!("{base}/notifications"))
            .bearer_auth(made_up)
            .send()
    });
    for response in futures::future::join_all(attempts).await {
        assert_eq!(
            response.expect("request").status(),
            StatusCode::UNAUTHORIZED
        );
    }
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "refused in {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn health_without_a_database_answers_its_own_error_body() {
    // Nothing listens on port 1.
    let pool = db::create_pool_with(
        "postgres://postgres@127.0.0.1:1/none?sslmode=disable",
        1,
        &short(500, 1_000),
    )
    .expect("pool");
    let base = serve(pool, Authenticator::anonymous()).await;
    let response = reqwest::get(format!("{base}/health"))
        .await
        .expect("request");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["status"], "error", "{body}");
    assert_eq!(body["error"]["database"]["status"], "down", "{body}");
    assert!(
        body.get("statusCode").is_none(),
        "not the error envelope: {body}"
    );
}

/// The text of the statement file `name` under `shared/sql`, without `.sql`.
pub(crate) fn statement_file(name: &str) -> String {
    std::fs::read_to_string(format!("{}/{name}.sql", notify_shared::sql::SQL_DIR))
        .unwrap_or_else(|error| panic!("statement {name}: {error}"))
}

/// The plan `explain` (an EXPLAIN statement) prints, one line per row.
async fn explain(conn: &tokio_postgres::Client, explain: &str) -> String {
    conn.query(explain, &[])
        .await
        .expect("explain")
        .iter()
        .map(|row| row.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

/// 200,000 notifications of 10 clients: a client's dead-letter queue is read from an index
/// of the queue table, never by walking the notifications.
#[tokio::test]
async fn a_client_listing_by_status_reads_its_own_index() {
    let db = TestDb::new().await;
    let conn = db.pool.get().await.expect("connection");
    conn.batch_execute(
        "INSERT INTO api_keys (id, name, scope, secret_hash)
         SELECT gen_random_uuid(), 'client ' || g, 'client', repeat('0', 64)
         FROM generate_series(1, 10) AS g;
         INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel,
                                    priority, payload, status, scheduled_at, next_attempt_at,
                                    attempt_count, max_attempts, dead_lettered_at, sent_at,
                                    owner_key_id, created_at)
         SELECT gen_random_uuid(), 'k' || g, repeat('0', 64), 'r' || g || '@example.com',
                'EMAIL', 1, '{}', CASE WHEN g % 50 = 0 THEN 'DEAD_LETTERED' ELSE 'SENT' END,
                now(), now(), 6, 6,
                CASE WHEN g % 50 = 0 THEN now() END, CASE WHEN g % 50 <> 0 THEN now() END,
                (SELECT id FROM api_keys ORDER BY id OFFSET g % 10 LIMIT 1),
                now() - g * interval '1 millisecond'
         FROM generate_series(1, 200000) AS g;
         ANALYZE notifications;
         ANALYZE queue;",
    )
    .await
    .expect("load");
    let owner: uuid::Uuid = conn
        .query_one("SELECT id FROM api_keys ORDER BY id LIMIT 1", &[])
        .await
        .expect("owner")
        .get(0);
    let statement = statement_file("notifications/list_by_owner_status");
    conn.batch_execute(&format!("PREPARE listing AS {statement}"))
        .await
        .expect("prepare");
    let plan = explain(
        &conn,
        &format!(
            "EXPLAIN EXECUTE listing('{owner}', 'DEAD_LETTERED', 'infinity',
                                     'ffffffff-ffff-ffff-ffff-ffffffffffff', 21, NULL, NULL)"
        ),
    )
    .await;
    // The open-status branch reads a queue index (the planner picks the one with or
    // without the owner by their sizes); nothing walks the notifications.
    assert!(plan.contains(" using queue_list_waiting"), "{plan}");
    assert!(!plan.contains("Seq Scan"), "{plan}");
}

/// Over backlogs the statistics know of (notifications due, notifications expired before
/// they were sent, routed webhook events), the claims and the expiry find the rows they
/// picked by key. Joined to those rows instead, they hashed the whole table on every claim.
#[tokio::test]
async fn the_claims_find_the_rows_they_picked_by_key_when_statistics_show_a_backlog() {
    let db = TestDb::new().await;
    let conn = db.pool.get().await.expect("connection");
    conn.batch_execute(
        "INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel,
                                    priority, payload, scheduled_at, next_attempt_at,
                                    max_attempts, class, category, status, expires_at)
         SELECT gen_random_uuid(), 'k' || g, repeat('0', 64), 'r' || g || '@example.com',
                'EMAIL', 1, '{}', now(), now(), 6, 'TRANSACTIONAL', 'general', 'PENDING',
                CASE WHEN g % 2 = 0 THEN now() - interval '1 minute' END
         FROM generate_series(1, 6000) AS g;
         INSERT INTO webhook_events (id, type, notification_id, status, attempt_count,
                                     redrive_generation, occurred_at, routed_at)
         SELECT gen_random_uuid(), 'notification.sent', gen_random_uuid(), 'SENT', 1, 0,
                now(), now()
         FROM generate_series(1, 3000);
         ANALYZE notifications, queue, webhook_events;",
    )
    .await
    .expect("load");
    for (name, arguments, table) in [
        (
            "notifications/claim_channel",
            "'EMAIL', 100, 'plan-check', 60000, 100",
            "notifications",
        ),
        (
            "notifications/claim_paced",
            "'EMAIL', 100, 'plan-check', 60000, 100",
            "notifications",
        ),
        ("notifications/expire", "100", "notifications"),
        (
            "webhook_events/claim",
            "100, 60000, 5, 'lease expired'",
            "webhook_events",
        ),
    ] {
        let statement = statement_file(name);
        conn.batch_execute(&format!("DEALLOCATE ALL; PREPARE picked AS {statement}"))
            .await
            .expect("prepare");
        let plan = explain(&conn, &format!("EXPLAIN EXECUTE picked({arguments})")).await;
        assert!(
            !plan.contains(&format!("Seq Scan on {table}")),
            "{name} reads all of {table}:\n{plan}"
        );
    }
}

/// A campaign of every profile walks `recipients` a page at a time: each page, on the
/// plan a prepared statement keeps and right after a bulk import, starts in the index at
/// the cursor instead of reading every id before it or sorting every id after it.
#[tokio::test]
async fn a_page_of_profiles_starts_at_its_cursor_in_the_index() {
    let db = TestDb::new().await;
    let conn = db.pool.get().await.expect("connection");
    conn.batch_execute(
        "INSERT INTO recipients (owner, recipient_id, email)
         SELECT '00000000-0000-0000-0000-000000000000', 'r' || lpad(g::text, 6, '0'),
                'r' || g || '@example.com'
         FROM generate_series(1, 50000) AS g;",
    )
    .await
    .expect("load");
    let statement = statement_file("recipients/page_ids");
    let analyze = statement_file("recipients/analyze");
    conn.batch_execute(&format!(
        "{analyze}; SET plan_cache_mode = force_generic_plan; PREPARE page AS {statement}"
    ))
    .await
    .expect("prepare");
    let plan = explain(
        &conn,
        "EXPLAIN (ANALYZE, FORMAT TEXT)
         EXECUTE page('00000000-0000-0000-0000-000000000000', 'r040000', 1000)",
    )
    .await;
    assert!(
        plan.contains("Index Cond: ((owner = $1) AND (recipient_id > $2))")
            || plan.contains("Index Cond: (recipient_id > $2)"),
        "{plan}"
    );
    assert!(!plan.contains("Sort"), "{plan}");
    assert!(!plan.contains("Rows Removed by Filter"), "{plan}");
}

/// The checks on a notification's `category` and `recipient_id` (V17: trimming allowed
/// bytes instead of matching a regular expression) accept exactly what the rules'
/// regular expressions accept, at the edges of length, first character and alphabet.
#[tokio::test]
async fn identifier_checks_accept_exactly_what_their_rules_accept() {
    let db = TestDb::new().await;
    let conn = db.pool.get().await.expect("connection");
    let category_rule = "^[a-z0-9][a-z0-9_.-]{0,63}$";
    let recipient_id_rule = "^[A-Za-z0-9._:@-]{1,128}$";
    let mut values: Vec<String> = [
        "general",
        "a",
        "0",
        "a_b.c-d",
        "_a",
        "-a",
        ".a",
        "A",
        "aB",
        "aA",
        "a.Z",
        "é",
        "aé",
        "a b",
        "",
        "a\n",
        "\na",
        "a/b",
        "a:b",
        "r@x.y",
        "A.b_c:d@e-f",
        "€",
        "*",
        "a%",
        "a'",
    ]
    .iter()
    .map(|value| value.to_string())
    .collect();
    for length in [63, 64, 65, 127, 128, 129] {
        values.push("a".repeat(length));
        values.push("Z".repeat(length));
    }
    let insert = "INSERT INTO notifications (id, idempotency_key, fingerprint, recipient,
                      channel, priority, payload, scheduled_at, next_attempt_at, max_attempts,
                      category, recipient_id)
                  VALUES (gen_random_uuid(), gen_random_uuid()::text, repeat('0', 64), 'r',
                          'EMAIL', 1, '{}', now(), now(), 1, $1, $2)";
    // The constraint that refused a value, if one did: any other failure fails the test.
    let refused_by = |stored: Result<u64, tokio_postgres::Error>| match stored {
        Ok(_) => None,
        Err(error) => Some(
            error
                .as_db_error()
                .and_then(|db| db.constraint())
                .unwrap_or_else(|| panic!("not a constraint: {error}"))
                .to_string(),
        ),
    };
    for value in &values {
        let category_ok: bool = conn
            .query_one("SELECT $1 ~ $2", &[value, &category_rule])
            .await
            .expect("rule")
            .get(0);
        let refused = refused_by(conn.execute(insert, &[value, &"r1"]).await);
        assert_eq!(
            refused.as_deref(),
            (!category_ok).then_some("notifications_category_check"),
            "category {value:?}"
        );

        let recipient_id_ok: bool = conn
            .query_one("SELECT $1 ~ $2", &[value, &recipient_id_rule])
            .await
            .expect("rule")
            .get(0);
        let refused = refused_by(conn.execute(insert, &[&"general", value]).await);
        assert_eq!(
            refused.as_deref(),
            (!recipient_id_ok).then_some("notifications_recipient_id_check"),
            "recipient_id {value:?}"
        );
    }
}

/// Every status, listed with and without an owner, a page of two at a time, returns
/// exactly the notifications in it: the waiting ones from the queue's listings, the
/// PROCESSING ones (which those listings leave out) from the lease index, the final ones
/// from the notifications.
#[tokio::test]
async fn listing_each_status_pages_through_exactly_its_notifications() {
    use notify_shared::domain::Status;
    use notify_shared::queue::{self, ListFilter};

    let db = TestDb::new().await;
    let conn = db.pool.get().await.expect("connection");
    conn.batch_execute(
        "INSERT INTO api_keys (id, name, scope, secret_hash)
         SELECT gen_random_uuid(), 'client ' || g, 'client', repeat('0', 64)
         FROM generate_series(1, 2) AS g;
         INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel,
                                    priority, payload, status, scheduled_at, next_attempt_at,
                                    attempt_count, max_attempts, claim_token, claimed_by,
                                    lease_expires_at, sent_at, failed_at, dead_lettered_at,
                                    cancelled_at, suppressed_at, suppressed_reason, expired_at,
                                    owner_key_id, created_at)
         SELECT gen_random_uuid(), s.status || '-' || g, repeat('0', 64), 'r' || g || '@example.com',
                'EMAIL', 1, '{}', s.status, now(), now(),
                CASE WHEN s.status = 'PENDING' THEN 0 ELSE 1 END, 6,
                CASE WHEN s.status = 'PROCESSING' THEN gen_random_uuid() END,
                CASE WHEN s.status = 'PROCESSING' THEN 'sweeper-test' END,
                CASE WHEN s.status = 'PROCESSING' THEN now() + interval '1 minute' END,
                CASE WHEN s.status = 'SENT' THEN now() END,
                CASE WHEN s.status = 'FAILED' THEN now() END,
                CASE WHEN s.status = 'DEAD_LETTERED' THEN now() END,
                CASE WHEN s.status = 'CANCELLED' THEN now() END,
                CASE WHEN s.status = 'SUPPRESSED' THEN now() END,
                CASE WHEN s.status = 'SUPPRESSED' THEN 'UNSUBSCRIBED' END,
                CASE WHEN s.status = 'EXPIRED' THEN now() END,
                (SELECT id FROM api_keys ORDER BY id OFFSET g % 2 LIMIT 1),
                now() - g * interval '1 millisecond'
         FROM unnest(ARRAY['PENDING', 'PROCESSING', 'SENT', 'FAILED', 'DEAD_LETTERED',
                           'CANCELLED', 'SUPPRESSED', 'EXPIRED']) AS s (status)
         CROSS JOIN generate_series(1, 5) AS g;",
    )
    .await
    .expect("load");
    let owner: uuid::Uuid = conn
        .query_one("SELECT id FROM api_keys ORDER BY id LIMIT 1", &[])
        .await
        .expect("owner")
        .get(0);

    for status in Status::ALL {
        for owner in [None, Some(owner)] {
            let expected: std::collections::HashSet<uuid::Uuid> = conn
                .query(
                    "SELECT id FROM notifications
                     WHERE status = $1 AND ($2::uuid IS NULL OR owner_key_id = $2)",
                    &[&status.as_str(), &owner],
                )
                .await
                .expect("expected")
                .iter()
                .map(|row| row.get(0))
                .collect();
            assert_eq!(expected.len(), if owner.is_some() { 2 } else { 5 });
            let mut listed = Vec::new();
            let mut filter = ListFilter {
                owner,
                status: Some(status),
                limit: 2,
                ..ListFilter::default()
            };
            for _ in 0..4 {
                let page = queue::list(&conn, &filter).await.expect("list");
                listed.extend(page.items.iter().map(|n| n.id));
                match page.next {
                    Some(next) => filter.after = Some(next),
                    None => break,
                }
            }
            assert_eq!(listed.len(), expected.len(), "{status:?} of {owner:?}");
            assert_eq!(
                listed
                    .iter()
                    .copied()
                    .collect::<std::collections::HashSet<_>>(),
                expected,
                "{status:?} of {owner:?}"
            );
        }
    }
}
