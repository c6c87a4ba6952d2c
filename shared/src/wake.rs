//! Wake-ups: a dedicated connection LISTENs for `NOTIFY`s sent when work becomes due now,
//! so an idle sweeper reacts at once instead of at its next poll.

use futures::StreamExt;
use tokio::sync::watch;
use tokio_postgres::AsyncMessage;

use crate::stop::StopSignal;

/// Each notification bumps the counter; waiters compare against what they saw last, so a
/// wake-up that arrives between two waits is never lost.
#[derive(Debug, Clone)]
pub struct Wake {
    receiver: watch::Receiver<u64>,
}

impl Wake {
    /// A wake-up source that never fires (tests; polling only).
    pub fn none() -> (watch::Sender<u64>, Wake) {
        let (sender, receiver) = watch::channel(0);
        (sender, Wake { receiver })
    }

    /// Waits for the next wake-up; returns immediately if one arrived since the last wait.
    pub async fn notified(&mut self) {
        if self.receiver.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Starts a task that LISTENs on `channel` and reconnects by itself after errors.
pub fn listen(database: crate::db::Database, channel: &'static str, stop: StopSignal) -> Wake {
    let (sender, wake) = Wake::none();
    tokio::spawn(async move {
        while !stop.is_stopped() {
            match listen_once(&database, channel, &sender, &stop).await {
                Ok(()) => break,
                Err(error) => {
                    tracing::warn!(error = %crate::telemetry::describe(&error), "wake-up listener lost its connection; reconnecting");
                    tokio::select! {
                        () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                        () = stop.stopped() => break,
                    }
                }
            }
        }
    });
    wake
}

async fn listen_once(
    database: &crate::db::Database,
    channel: &str,
    sender: &watch::Sender<u64>,
    stop: &StopSignal,
) -> anyhow::Result<()> {
    let (client, mut messages) = database.connect_raw().await?;
    let statement = format!("LISTEN {channel}");
    let listen = client.batch_execute(&statement);
    // The connection must be polled for LISTEN to complete.
    tokio::pin!(listen);
    loop {
        tokio::select! {
            result = &mut listen => { result?; break; }
            message = messages.next() => match message {
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error.into()),
                None => anyhow::bail!("connection closed"),
            }
        }
    }
    // Anything due may have been announced while we were not listening.
    sender.send_modify(|n| *n += 1);
    loop {
        tokio::select! {
            message = messages.next() => match message {
                Some(Ok(AsyncMessage::Notification(_))) => sender.send_modify(|n| *n += 1),
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error.into()),
                None => anyhow::bail!("connection closed"),
            },
            () = stop.stopped() => return Ok(()),
        }
    }
}
