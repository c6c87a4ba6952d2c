//! Upgrading a database an older release left: every row keeps its state, and the work
//! that was open is found by the new schema's claim, recovery and listings.

use notify_shared::content::campaigns;
use notify_shared::db;
use notify_shared::domain::Channel;
use notify_shared::queue::{self, ClaimMode};
use notify_tests::db::server_url;
use std::time::Duration;

/// The last migration before the queue table.
const BEFORE_QUEUE: i32 = 12;
/// The last migration before campaigns record their progress.
const BEFORE_CAMPAIGN_PROGRESS: i32 = 13;
/// The last migration before campaigns' counts are kept rather than counted.
const BEFORE_CAMPAIGN_COUNTS: i32 = 14;
/// The last migration before reservations are filed under a hash of the recipient.
const BEFORE_HASHED_RESERVATIONS: i32 = 20;

/// A fresh database migrated up to `version`: (server URL, its name, its URL).
async fn scratch_at(version: i32) -> (String, String, String) {
    let admin_url = server_url();
    let name = format!("notify_upgrade_{}", uuid::Uuid::new_v4().simple());
    let admin = db::connect(&admin_url).await.expect("connect");
    admin
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .await
        .expect("create");
    let url = notify_local::scratch::with_database(&admin_url, &name);
    db::migrate_up_to(&url, version).await.expect("old schema");
    (admin_url, name, url)
}

/// Claims up to ten due EMAIL notifications, as a sweeper of the new release would;
/// returns how many it got.
async fn claim_due_email(conn: &deadpool_postgres::Client) -> usize {
    queue::claim(
        conn,
        Channel::Email,
        ClaimMode::Free,
        "new-worker",
        queue::Limit::of(10),
        Duration::from_secs(60),
    )
    .await
    .expect("claim")
    .len()
}

#[tokio::test]
async fn the_queue_migration_keeps_every_row_and_its_state_and_open_work_stays_claimable() {
    let (admin_url, name, url) = scratch_at(BEFORE_QUEUE).await;

    let old = db::connect(&url).await.expect("connect");
    // One notification in every status, each with the columns its constraints require.
    old.batch_execute(
        "INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel,
             priority, payload, status, scheduled_at, next_attempt_at, attempt_count,
             max_attempts, claim_token, claimed_by, lease_expires_at, sent_at, failed_at,
             dead_lettered_at, cancelled_at, suppressed_at, suppressed_reason, expired_at,
             expires_at, created_at)
         SELECT gen_random_uuid(), s, repeat('0', 64), s || '@example.com', 'EMAIL', 1, '{}', s,
                now() - interval '1 minute',
                CASE WHEN s = 'PENDING' THEN now() - interval '1 minute' ELSE now() END,
                CASE WHEN s IN ('PENDING', 'CANCELLED', 'SUPPRESSED', 'EXPIRED') THEN 0 ELSE 1 END,
                6,
                CASE WHEN s = 'PROCESSING' THEN gen_random_uuid() END,
                CASE WHEN s = 'PROCESSING' THEN 'old-worker' END,
                CASE WHEN s = 'PROCESSING' THEN now() - interval '1 second' END,
                CASE WHEN s = 'SENT' THEN now() END,
                CASE WHEN s = 'FAILED' THEN now() END,
                CASE WHEN s = 'DEAD_LETTERED' THEN now() END,
                CASE WHEN s = 'CANCELLED' THEN now() END,
                CASE WHEN s = 'SUPPRESSED' THEN now() END,
                CASE WHEN s = 'SUPPRESSED' THEN 'CATEGORY_OPT_OUT' END,
                CASE WHEN s = 'EXPIRED' THEN now() END,
                CASE WHEN s = 'EXPIRED' THEN now() - interval '1 second' END,
                now() - interval '1 hour'
         FROM unnest(ARRAY['PENDING', 'PROCESSING', 'SENT', 'FAILED', 'DEAD_LETTERED',
                           'CANCELLED', 'SUPPRESSED', 'EXPIRED']) AS s",
    )
    .await
    .expect("rows of the old release");
    let snapshot = "SELECT string_agg(concat_ws('|', id, status, attempt_count, max_attempts,
                           claim_token, lease_expires_at, next_attempt_at, sent_at, failed_at,
                           dead_lettered_at, cancelled_at, suppressed_reason, expired_at),
                           E'\\n' ORDER BY idempotency_key) FROM notifications";
    let before: String = old.query_one(snapshot, &[]).await.expect("before").get(0);
    drop(old);

    db::migrate(&url).await.expect("upgrade");
    let new = db::connect(&url).await.expect("connect");
    let after: String = new.query_one(snapshot, &[]).await.expect("after").get(0);
    assert_eq!(after, before, "every row and its state survive the upgrade");

    let queued: String = new
        .query_one(
            "SELECT string_agg(q.status, ',' ORDER BY q.status) FROM queue q
             JOIN notifications n ON n.id = q.id AND n.status = q.status
             AND n.next_attempt_at = q.next_attempt_at
             AND n.lease_expires_at IS NOT DISTINCT FROM q.lease_expires_at",
            &[],
        )
        .await
        .expect("queue")
        .get(0);
    assert_eq!(
        queued, "DEAD_LETTERED,FAILED,PENDING,PROCESSING",
        "exactly the open notifications are queued, mirrored"
    );

    // The pending one is claimed, the expired claim is recovered.
    let pool = db::create_pool(&url, 1).expect("pool");
    let conn = pool.get().await.expect("pooled connection");
    assert_eq!(claim_due_email(&conn).await, 1);
    let recovered = queue::recover_expired(&conn, Duration::from_secs(60), 10)
        .await
        .expect("recover");
    assert_eq!(recovered.requeued, 1);
    drop(conn);
    pool.close();
    drop(new);
    notify_local::scratch::drop_database(&admin_url, &name)
        .await
        .expect("drop");
}

#[tokio::test]
async fn campaigns_expanding_at_the_upgrade_start_their_progress_clock_then_and_are_not_stalled() {
    let (admin_url, name, url) = scratch_at(BEFORE_CAMPAIGN_PROGRESS).await;

    let old = db::connect(&url).await.expect("connect");
    // A campaign created two hours ago and still expanding, and one long done.
    old.batch_execute(
        "INSERT INTO templates (template_id, channel, latest_version) VALUES ('news', 'EMAIL', 1);
         INSERT INTO template_versions (template_id, version, default_locale, locales, sample_data)
         VALUES ('news', 1, 'en', '{\"en\": {\"subject\": \"News\", \"text\": \"News\"}}', '{}');
         INSERT INTO campaigns (id, owner, idempotency_key, fingerprint, name, channel,
                                template_id, template_version, data, category, priority,
                                recipient_ids, audience_size, status, created_at, finished_at)
         SELECT gen_random_uuid(), '00000000-0000-0000-0000-000000000000', s, repeat('0', 64), s,
                'EMAIL', 'news', 1, '{}', 'general', 2, ARRAY['a', 'b'], 2, s,
                now() - interval '2 hours', CASE WHEN s = 'DONE' THEN now() - interval '1 hour' END
         FROM unnest(ARRAY['EXPANDING', 'DONE']) AS s",
    )
    .await
    .expect("campaigns of the old release");
    drop(old);

    db::migrate(&url).await.expect("upgrade");
    let new = db::connect(&url).await.expect("connect");
    let fresh = new
        .query_one(
            "SELECT bool_and(progressed_at > now() - interval '1 minute') FROM campaigns",
            &[],
        )
        .await
        .expect("progress")
        .get::<_, bool>(0);
    assert!(fresh, "the clock starts at the upgrade, not at creation");
    let pool = db::create_pool(&url, 1).expect("pool");
    let conn = pool.get().await.expect("pooled connection");
    let stalled = campaigns::stalled(&conn, 300, 20).await.expect("stalled");
    assert_eq!(
        stalled,
        Vec::new(),
        "nothing is stalled right after the upgrade"
    );
    drop(conn);
    pool.close();
    let indexed: i64 = new
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'campaigns_expanding_by_progress'",
            &[],
        )
        .await
        .expect("index")
        .get(0);
    assert_eq!(indexed, 1);
    drop(new);
    notify_local::scratch::drop_database(&admin_url, &name)
        .await
        .expect("drop");
}

#[tokio::test]
async fn campaign_counts_start_from_the_notifications_there_and_every_open_one_is_queued() {
    let (admin_url, name, url) = scratch_at(BEFORE_CAMPAIGN_COUNTS).await;
    let campaign = uuid::Uuid::new_v4();
    let other = uuid::Uuid::new_v4();

    let old = db::connect(&url).await.expect("connect");
    // Three PENDING and two SENT of one campaign, one PENDING of another, one of none.
    old.execute(
        "INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel,
             priority, payload, status, scheduled_at, next_attempt_at, attempt_count,
             max_attempts, sent_at)
         SELECT gen_random_uuid(), 'k' || i, repeat('0', 64), i || '@example.com', 'EMAIL', 0,
                CASE WHEN c IS NULL THEN '{}'::jsonb
                     ELSE jsonb_build_object('$template', jsonb_build_object(
                              'id', 'news', 'version', 1, 'locale', 'en', 'campaign', c),
                          'data', '{}'::jsonb) END,
                s, now(), now(), CASE WHEN s = 'SENT' THEN 1 ELSE 0 END, 5,
                CASE WHEN s = 'SENT' THEN now() END
         FROM (VALUES (1, $1::text, 'PENDING'), (2, $1, 'PENDING'), (3, $1, 'PENDING'),
                      (4, $1, 'SENT'), (5, $1, 'SENT'), (6, $2, 'PENDING'),
                      (7, NULL, 'PENDING')) AS v(i, c, s)",
        &[&campaign.to_string(), &other.to_string()],
    )
    .await
    .expect("notifications of the old release");
    // Two written while V13 ran, between its copy and its triggers: one never queued, one
    // queued with the state it had at the copy (due tomorrow then, due now since).
    old.batch_execute(
        "DELETE FROM queue WHERE id = (SELECT id FROM notifications WHERE idempotency_key = 'k2');
         UPDATE queue SET next_attempt_at = now() + interval '1 day'
         WHERE id = (SELECT id FROM notifications WHERE idempotency_key = 'k3')",
    )
    .await
    .expect("the ones V13 missed");
    drop(old);

    db::migrate(&url).await.expect("upgrade");
    let pool = db::create_pool(&url, 1).expect("pool");
    let conn = pool.get().await.expect("pooled connection");
    let counts = |pending: i64, processing: i64, sent: i64| {
        let mut expected = std::collections::HashMap::new();
        for (status, n) in [
            ("PENDING", pending),
            ("PROCESSING", processing),
            ("SENT", sent),
        ] {
            if n > 0 {
                expected.insert(status.to_string(), n);
            }
        }
        expected
    };
    assert_eq!(
        campaigns::counts(&conn, campaign).await.expect("counts"),
        counts(3, 0, 2),
        "the upgrade counts what is there"
    );
    assert_eq!(
        campaigns::counts(&conn, other).await.expect("counts"),
        counts(1, 0, 0)
    );

    // A claim takes the five PENDING ones, the two V13 missed among them, and the counts
    // follow.
    assert_eq!(claim_due_email(&conn).await, 5);
    assert_eq!(
        campaigns::counts(&conn, campaign).await.expect("counts"),
        counts(0, 3, 2),
        "a transition moves the counts in the same statement"
    );
    assert_eq!(
        campaigns::counts(&conn, other).await.expect("counts"),
        counts(0, 1, 0)
    );
    // Deleting finished rows, as retention does, leaves what they reached counted.
    conn.execute("DELETE FROM notifications WHERE status = 'SENT'", &[])
        .await
        .expect("delete");
    assert_eq!(
        campaigns::counts(&conn, campaign).await.expect("counts"),
        counts(0, 3, 2)
    );
    drop(conn);
    pool.close();
    notify_local::scratch::drop_database(&admin_url, &name)
        .await
        .expect("drop");
}

#[tokio::test]
async fn reservations_taken_before_the_upgrade_still_count_against_their_recipient() {
    let (admin_url, name, url) = scratch_at(BEFORE_HASHED_RESERVATIONS).await;
    let old = db::connect(&url).await.expect("connect");
    // Two live reservations of one recipient, one of another, one out of the window.
    old.batch_execute(
        "INSERT INTO rate_limit_reservations (notification_id, recipient, reserved_at)
         VALUES ('00000000-0000-0000-0000-00000000000a', 'ada@example.com', now()),
                ('00000000-0000-0000-0000-00000000000b', 'ada@example.com', now()),
                ('00000000-0000-0000-0000-00000000000c', 'bob@example.com', now()),
                ('00000000-0000-0000-0000-00000000000d', 'ada@example.com',
                 now() - interval '2 hours')",
    )
    .await
    .expect("old reservations");
    drop(old);

    db::migrate(&url).await.expect("upgrade");
    let conn = db::connect(&url).await.expect("connect");
    // A sweeper of the previous release, still running during the rollout, reserves with
    // its own statement: the reservation is filed under the hash all the same.
    conn.execute(
        "INSERT INTO rate_limit_reservations (notification_id, recipient, reserved_at)
         SELECT id, recipient, now() FROM unnest($1::uuid[], $2::text[]) AS r(id, recipient)
         ON CONFLICT (notification_id)
         DO UPDATE SET recipient = EXCLUDED.recipient, reserved_at = EXCLUDED.reserved_at",
        &[&vec![uuid::Uuid::from_u128(0xe)], &vec!["ada@example.com"]],
    )
    .await
    .expect("the previous release's reservation");
    let live = crate::database::statement_file("rate_limit_reservations/live");
    let recipients = vec!["ada@example.com", "eve@example.com"];
    let window_ms: i64 = 3_600_000;
    let mut found: Vec<(String, uuid::Uuid)> = conn
        .query(live.as_str(), &[&recipients, &window_ms])
        .await
        .expect("live reservations")
        .iter()
        .map(|row| (row.get("recipient"), row.get("notification_id")))
        .collect();
    found.sort();
    let ada = |last: &str| {
        let id = format!("00000000-0000-0000-0000-00000000000{last}");
        ("ada@example.com".to_string(), id.parse().expect("uuid"))
    };
    assert_eq!(found, vec![ada("a"), ada("b"), ada("e")]);
    // The read pruned the expired one of the recipients it was asked for.
    let left: i64 = conn
        .query_one("SELECT count(*) FROM rate_limit_reservations", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(left, 4);
    drop(conn);
    notify_local::scratch::drop_database(&admin_url, &name)
        .await
        .expect("drop");
}

/// A process starting on a current schema checks the history on a pool connection and
/// neither waits for the migration lock nor runs the migrator; a schema behind is migrated
/// (under the lock), and a history whose checksum differs is refused, as a full run does.
#[tokio::test]
async fn a_current_schema_starts_without_the_lock_and_one_behind_or_diverged_goes_through_it() {
    let (admin_url, name, url) = scratch_at(BEFORE_HASHED_RESERVATIONS).await;
    let pool = db::create_pool(&url, 2).expect("pool");
    let versions = "SELECT count(*) FROM refinery_schema_history";
    let behind: i64 = pool
        .get()
        .await
        .expect("conn")
        .query_one(versions, &[])
        .await
        .expect("count")
        .get(0);

    // Behind: migrated, and so only once the lock (held here) is released.
    let holder = db::connect(&url).await.expect("connect");
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&db::MIGRATION_LOCK_KEY])
        .await
        .expect("take the migration lock");
    let waiting = tokio::spawn({
        let (pool, url) = (pool.clone(), url.clone());
        async move { db::migrate_unless_current(&pool, &url).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "a schema behind waits for the migration lock"
    );
    holder
        .execute("SELECT pg_advisory_unlock($1)", &[&db::MIGRATION_LOCK_KEY])
        .await
        .expect("release");
    waiting.await.expect("task").expect("migrated");
    let current: i64 = pool
        .get()
        .await
        .expect("conn")
        .query_one(versions, &[])
        .await
        .expect("count")
        .get(0);
    assert!(current > behind, "{behind} → {current}");

    // Current: returns at once although the lock is held.
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&db::MIGRATION_LOCK_KEY])
        .await
        .expect("take the migration lock");
    tokio::time::timeout(
        Duration::from_secs(5),
        db::migrate_unless_current(&pool, &url),
    )
    .await
    .expect("a current schema does not wait for the lock")
    .expect("current");
    holder
        .execute("SELECT pg_advisory_unlock($1)", &[&db::MIGRATION_LOCK_KEY])
        .await
        .expect("release");

    // Diverged: a recorded checksum that is not the embedded migration's is refused.
    holder
        .execute(
            "UPDATE refinery_schema_history SET checksum = '1' WHERE version = 1",
            &[],
        )
        .await
        .expect("diverge");
    let refused = db::migrate_unless_current(&pool, &url).await;
    assert!(refused.is_err(), "a diverged history is refused");

    drop((holder, pool));
    notify_local::scratch::drop_database(&admin_url, &name)
        .await
        .expect("drop");
}

/// The last migration before every rotated secret keeps its own end.
const BEFORE_ROTATED_SECRETS: i32 = 26;

#[tokio::test]
async fn a_previous_secret_inside_its_day_still_signs_after_the_upgrade() {
    let (admin_url, name, url) = scratch_at(BEFORE_ROTATED_SECRETS).await;
    let old = db::connect(&url).await.expect("connect");
    old.batch_execute(
        "INSERT INTO webhook_endpoints (id, owner_key_id, operator, url, secret, previous_secret,
                                        previous_secret_valid_until)
         VALUES ('00000000-0000-0000-0000-00000000000a', gen_random_uuid(), false,
                 'https://a.example.com/in', 'whsec_bmV3', 'whsec_b2xk',
                 '2999-01-01T00:00:00Z'),
                ('00000000-0000-0000-0000-00000000000b', gen_random_uuid(), false,
                 'https://b.example.com/in', 'whsec_bmV3', 'whsec_b2xk',
                 now() - interval '1 second'),
                ('00000000-0000-0000-0000-00000000000c', gen_random_uuid(), false,
                 'https://c.example.com/in', 'whsec_bmV3', NULL, NULL)",
    )
    .await
    .expect("endpoints of the old release");
    drop(old);

    db::migrate(&url).await.expect("upgrade");
    let new = db::connect(&url).await.expect("connect");
    let rows: Vec<(String, String, Vec<String>, Vec<String>)> = new
        .query(
            "SELECT url, secret, previous_secrets,
                    ARRAY(SELECT to_char(u AT TIME ZONE 'UTC', 'YYYY-MM-DD')
                          FROM unnest(previous_secrets_valid_until) AS u)
             FROM webhook_endpoints ORDER BY id",
            &[],
        )
        .await
        .expect("endpoints")
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
        .collect();
    let row = |url: &str, previous: &[&str], until: &[&str]| {
        (
            url.to_string(),
            "whsec_bmV3".to_string(),
            previous.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            until.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        rows,
        vec![
            row("https://a.example.com/in", &["whsec_b2xk"], &["2999-01-01"]),
            row("https://b.example.com/in", &[], &[]),
            row("https://c.example.com/in", &[], &[]),
        ]
    );
    drop(new);
    notify_local::scratch::drop_database(&admin_url, &name)
        .await
        .expect("drop");
}

/// The last migration before attempts are keyed by their notification.
const BEFORE_ATTEMPTS_KEYED_BY_NOTIFICATION: i32 = 27;

#[tokio::test]
async fn attempts_keep_their_order_when_keyed_by_their_notification() {
    let (admin_url, name, url) = scratch_at(BEFORE_ATTEMPTS_KEYED_BY_NOTIFICATION).await;
    let old = db::connect(&url).await.expect("connect");
    old.batch_execute(
        "INSERT INTO delivery_attempts (notification_id, attempt, worker, started_at,
                                        finished_at, outcome, error)
         SELECT n, a, 'old-worker', now(), now(), o, o
         FROM unnest(ARRAY['00000000-0000-0000-0000-00000000000a'::uuid,
                           '00000000-0000-0000-0000-00000000000b'::uuid,
                           '00000000-0000-0000-0000-00000000000a'::uuid,
                           '00000000-0000-0000-0000-00000000000a'::uuid],
                     ARRAY[1, 1, 1, 2],
                     ARRAY['THROTTLED', 'DELIVERED', 'TEMPORARY', 'DELIVERED'])
              WITH ORDINALITY AS t(n, a, o, i)
         ORDER BY i",
    )
    .await
    .expect("attempts of the old release");
    drop(old);

    db::migrate(&url).await.expect("upgrade");
    let new = db::connect(&url).await.expect("connect");
    let listing = crate::database::statement_file("delivery_attempts/list");
    let first: Vec<(i32, String)> = new
        .query(listing.as_str(), &[&uuid::Uuid::from_u128(0xa)])
        .await
        .expect("list")
        .iter()
        .map(|row| (row.get("attempt"), row.get("outcome")))
        .collect();
    assert_eq!(
        first,
        [
            (1, "THROTTLED".to_string()),
            (1, "TEMPORARY".to_string()),
            (2, "DELIVERED".to_string())
        ]
    );
    let key: String = new
        .query_one(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint
             WHERE conname = 'delivery_attempts_pkey'",
            &[],
        )
        .await
        .expect("key")
        .get(0);
    assert_eq!(key, "PRIMARY KEY (notification_id, id)");
    drop(new);
    notify_local::scratch::drop_database(&admin_url, &name)
        .await
        .expect("drop");
}
