//! The signal that tells loops to stop: SIGTERM / Ctrl-C for processes, or a time limit
//! for a Lambda invocation. Loops check it between steps; a step checks it before it
//! hands claimed work to the provider.

use std::time::Instant;

use tokio::sync::watch;

/// Sets the stop flag; every clone of the paired [`StopSignal`] sees it.
#[derive(Debug)]
pub struct StopHandle(watch::Sender<bool>);

impl StopHandle {
    pub fn stop(&self) {
        self.0.send_replace(true);
    }
}

#[derive(Debug, Clone)]
pub struct StopSignal {
    flag: watch::Receiver<bool>,
    deadline: Option<Instant>,
}

impl StopSignal {
    pub fn new() -> (StopHandle, StopSignal) {
        let (sender, receiver) = watch::channel(false);
        (
            StopHandle(sender),
            StopSignal {
                flag: receiver,
                deadline: None,
            },
        )
    }

    /// A signal that never fires by itself (tests drive steps one by one).
    pub fn never() -> StopSignal {
        let (_, signal) = Self::new();
        signal
    }

    /// The same signal, also firing at `deadline`.
    pub fn with_deadline(&self, deadline: Instant) -> StopSignal {
        let deadline = self.deadline.map_or(deadline, |d| d.min(deadline));
        StopSignal {
            flag: self.flag.clone(),
            deadline: Some(deadline),
        }
    }

    pub fn is_stopped(&self) -> bool {
        *self.flag.borrow() || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Resolves once the flag is set or the deadline passes.
    pub async fn stopped(&self) {
        let mut flag = self.flag.clone();
        let flagged = async move {
            loop {
                if *flag.borrow_and_update() {
                    return;
                }
                if flag.changed().await.is_err() {
                    // The handle is gone: the flag can never be set.
                    std::future::pending::<()>().await;
                }
            }
        };
        match self.deadline {
            Some(deadline) => {
                tokio::select! {
                    () = flagged => {}
                    () = tokio::time::sleep_until(deadline.into()) => {}
                }
            }
            None => flagged.await,
        }
    }
}

/// Sets the handle on SIGTERM or Ctrl-C.
pub fn stop_on_signals(handle: StopHandle) {
    tokio::spawn(async move {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = terminate => {}
        }
        tracing::info!("stop requested; finishing work in progress");
        handle.stop();
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_flag_and_the_deadline_both_stop() {
        let (handle, signal) = StopSignal::new();
        assert!(!signal.is_stopped());
        let soon = signal.with_deadline(Instant::now() + Duration::from_millis(20));
        tokio::time::timeout(Duration::from_secs(2), soon.stopped())
            .await
            .expect("deadline fires");
        assert!(soon.is_stopped() && !signal.is_stopped());
        handle.stop();
        tokio::time::timeout(Duration::from_secs(2), signal.stopped())
            .await
            .expect("flag fires");
        assert!(signal.is_stopped());
    }
}
