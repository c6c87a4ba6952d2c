//! A short transaction whose `BEGIN` and `COMMIT` travel in the same round trip as the
//! statements beside them. tokio-postgres sends a request the first time its future is
//! polled, and `tokio::join!` polls its futures in the order written the first time, so
//! `join!(tx.begin(), a, b)` sends `BEGIN`, `a`, `b` as one pipeline and the server runs
//! them in that order. Two rules keep the order true:
//!
//! - the statements of a pipeline are prepared before it (a statement still being prepared
//!   would be sent after the ones behind it): [`crate::sql::Statement::prepare`] caches
//!   per connection, so warm the cache first and the pipeline costs no extra round trip;
//! - statements whose order matters to each other live in one future that sends them in
//!   order (e.g. `futures::future::try_join`).
//!
//! The server ends a transaction whose statement failed at the next `COMMIT` (as a
//! rollback), so a pipeline that ends in `COMMIT` leaves the connection clean whatever
//! failed before it; the caller still reads every result. A transaction dropped while open
//! (an error path that could not roll back, a cancelled future) takes its connection out
//! of the pool and closes it, so the server rolls it back and no one reuses it mid-way.

use deadpool_postgres::Object;

pub struct PipelinedTransaction {
    /// `None` only while dropping.
    client: Option<Object>,
    /// Until its `COMMIT` or `ROLLBACK` answered, the connection may be inside it.
    open: bool,
}

impl PipelinedTransaction {
    /// A transaction on `client`, begun by the first pipeline's [`begin`](Self::begin).
    pub fn new(client: Object) -> Self {
        PipelinedTransaction {
            client: Some(client),
            open: true,
        }
    }

    /// The connection, for the statements inside the transaction.
    pub fn client(&self) -> &Object {
        self.client
            .as_ref()
            .expect("the connection is only taken while dropping")
    }

    /// `BEGIN`: the first future of the first pipeline.
    pub async fn begin(&self) -> Result<(), tokio_postgres::Error> {
        self.client().batch_execute("BEGIN").await
    }

    /// `COMMIT`: the last future of the last pipeline. Call [`ended`](Self::ended) with
    /// its result.
    pub async fn commit(&self) -> Result<(), tokio_postgres::Error> {
        self.client().batch_execute("COMMIT").await
    }

    /// Ends the transaction after a failed statement and hands the connection back
    /// clean; if even that fails, the connection is closed instead.
    pub async fn roll_back(mut self) {
        let result = self.client().batch_execute("ROLLBACK").await;
        self.open = result.is_err();
    }

    /// The answer to [`commit`](Self::commit): when the server answered, the
    /// transaction is over (committed, or rolled back after an earlier failure) and the
    /// connection can be reused.
    pub fn ended(mut self, commit: &Result<(), tokio_postgres::Error>) {
        self.open = match commit {
            Ok(()) => false,
            Err(error) => error.as_db_error().is_none(),
        };
    }
}

impl Drop for PipelinedTransaction {
    fn drop(&mut self) {
        if self.open
            && let Some(client) = self.client.take()
        {
            // Out of the pool: dropping the client closes the connection.
            drop(Object::take(client));
        }
    }
}
