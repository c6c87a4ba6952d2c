//! `PipelinedTransaction`: `BEGIN` and `COMMIT` sent in one pipeline with the statements
//! between them still make one transaction; a failure inside rolls all of it back and
//! leaves the connection clean; a transaction dropped while open takes its connection
//! with it instead of handing it back mid-transaction.

use std::time::Duration;

use notify_shared::db::{DbPool as Pool, PipelinedTransaction};
use notify_tests::TestDb;

async fn probe_table(db: &TestDb) {
    db.execute("CREATE TABLE pipeline_probe (n int NOT NULL)", &[])
        .await;
}

/// A pool of one connection, and a transaction on it that has begun and inserted a row.
async fn open_with_one_row(db: &TestDb) -> (Pool, PipelinedTransaction) {
    probe_table(db).await;
    let pool = db.new_pool(1);
    let tx = PipelinedTransaction::new(pool.get().await.expect("db"));
    let client = tx.client();
    let (begun, inserted) = tokio::join!(
        tx.begin(),
        client.execute("INSERT INTO pipeline_probe VALUES (1)", &[]),
    );
    begun.expect("begin");
    inserted.expect("insert");
    (pool, tx)
}

/// A row inserted on the pool's connection commits by itself: no transaction is open.
async fn insert_outside_any_transaction(pool: &Pool) {
    pool.get()
        .await
        .expect("db")
        .execute("INSERT INTO pipeline_probe VALUES (9)", &[])
        .await
        .expect("insert");
}

/// Backends of this database inside a transaction that nobody is running a statement in.
async fn idle_in_transaction(db: &TestDb) -> i64 {
    db.count(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
    )
    .await
}

#[tokio::test]
async fn begin_statements_and_commit_in_one_pipeline_commit_together() {
    let db = TestDb::new().await;
    probe_table(&db).await;
    let pool = db.new_pool(1);
    let tx = PipelinedTransaction::new(pool.get().await.expect("db"));
    let client = tx.client();
    // Prepared first, as the pipelines of the service are: a statement still being
    // prepared would be sent after the ones behind it.
    let insert = client
        .prepare("INSERT INTO pipeline_probe VALUES (1)")
        .await
        .expect("prepare");
    let count = client
        .prepare("SELECT count(*) FROM pipeline_probe")
        .await
        .expect("prepare");
    let (begun, first, second, committed) = tokio::join!(
        tx.begin(),
        client.execute(&insert, &[]),
        client.query_one(&count, &[]),
        tx.commit(),
    );
    tx.ended(&committed);
    begun.expect("begin");
    first.expect("insert");
    // The statements ran in the order sent: the count sees the insert before it.
    assert_eq!(second.expect("count").get::<_, i64>(0), 1);
    committed.expect("commit");
    assert_eq!(db.count("SELECT count(*) FROM pipeline_probe").await, 1);
    assert_eq!(
        pool.status().size,
        1,
        "the connection went back to the pool"
    );
}

#[tokio::test]
async fn a_failed_statement_rolls_back_the_whole_pipeline_and_leaves_the_connection_clean() {
    let db = TestDb::new().await;
    probe_table(&db).await;
    let pool = db.new_pool(1);
    let tx = PipelinedTransaction::new(pool.get().await.expect("db"));
    let client = tx.client();
    let insert = client
        .prepare("INSERT INTO pipeline_probe VALUES ($1)")
        .await
        .expect("prepare");
    let (begun, before, failed, after, committed) = tokio::join!(
        tx.begin(),
        client.execute(&insert, &[&Some(1i32)]),
        client.execute(&insert, &[&None::<i32>]),
        client.execute(&insert, &[&Some(3i32)]),
        tx.commit(),
    );
    tx.ended(&committed);
    begun.expect("begin");
    before.expect("the insert before the failure");
    assert!(failed.is_err(), "NULL violates NOT NULL");
    assert!(after.is_err(), "the transaction was aborted");
    // The server answers COMMIT of an aborted transaction with a rollback, not an error.
    committed.expect("commit");
    assert_eq!(db.count("SELECT count(*) FROM pipeline_probe").await, 0);
    assert_eq!(idle_in_transaction(&db).await, 0);
    insert_outside_any_transaction(&pool).await;
    assert_eq!(pool.status().size, 1, "the same connection, reused");
    assert_eq!(db.count("SELECT count(*) FROM pipeline_probe").await, 1);
}

#[tokio::test]
async fn a_rolled_back_transaction_hands_its_connection_back() {
    let db = TestDb::new().await;
    let (pool, tx) = open_with_one_row(&db).await;
    tx.roll_back().await;
    assert_eq!(pool.status().size, 1);
    assert_eq!(idle_in_transaction(&db).await, 0);
    assert_eq!(db.count("SELECT count(*) FROM pipeline_probe").await, 0);
}

#[tokio::test]
async fn a_transaction_dropped_while_open_closes_its_connection_and_writes_nothing() {
    let db = TestDb::new().await;
    let (pool, tx) = open_with_one_row(&db).await;
    assert_eq!(idle_in_transaction(&db).await, 1);
    drop(tx);
    assert_eq!(pool.status().size, 0, "the connection left the pool");
    // The server rolls the transaction back when it sees the connection close.
    db.wait_for_count(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
        Duration::from_secs(5),
        |open| open == 0,
        String::new,
    )
    .await;
    assert_eq!(db.count("SELECT count(*) FROM pipeline_probe").await, 0);
    insert_outside_any_transaction(&pool).await;
    assert_eq!(db.count("SELECT count(*) FROM pipeline_probe").await, 1);
}
