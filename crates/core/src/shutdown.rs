//! The one stop signal every stage loop watches (after mini-redis's `Shutdown`).
//!
//! A [`Shutdown`] is cloned into every worker; [`ShutdownTrigger::trigger`] stops them all,
//! and so does dropping the trigger: a stage whose owner went away must not spin or hang.

use std::future::Future;

use tokio::sync::watch;

/// Held by whoever decides when the stages stop.
#[derive(Debug)]
pub struct ShutdownTrigger {
    tx: watch::Sender<bool>,
}

/// Watched by the stage loops.
#[derive(Debug, Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

/// A trigger and the signal it sets.
pub fn shutdown() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger { tx }, Shutdown { rx })
}

impl ShutdownTrigger {
    pub fn trigger(&self) {
        let _ = self.tx.send(true);
    }

    /// A new signal of this trigger.
    pub fn subscribe(&self) -> Shutdown {
        Shutdown {
            rx: self.tx.subscribe(),
        }
    }
}

impl Shutdown {
    /// True once triggered, or once the trigger is gone.
    pub fn is_shutdown(&self) -> bool {
        *self.rx.borrow() || self.rx.has_changed().is_err()
    }

    /// Returns when the stages are to stop.
    pub async fn recv(&mut self) {
        // An error means the trigger was dropped: that is a stop too.
        let _ = self.rx.wait_for(|stop| *stop).await;
    }

    /// Runs `work` unless the stop comes first: `None` means stop.
    pub async fn run_until<F: Future>(&mut self, work: F) -> Option<F::Output> {
        if self.is_shutdown() {
            return None;
        }
        tokio::select! {
            out = work => Some(out),
            _ = self.recv() => None,
        }
    }
}

/// Existing `watch` stop channels (`true` = stop) work as a signal too.
impl From<watch::Receiver<bool>> for Shutdown {
    fn from(rx: watch::Receiver<bool>) -> Self {
        Shutdown { rx }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn trigger_and_drop_both_stop() {
        let (t, mut s) = shutdown();
        assert!(!s.is_shutdown());
        let slow = tokio::time::sleep(Duration::from_secs(30));
        let waiter = tokio::spawn(async move { s.run_until(slow).await });
        t.trigger();
        assert_eq!(waiter.await.unwrap(), None);

        let (t, mut s) = shutdown();
        let c = t.subscribe();
        assert_eq!(s.run_until(async { 7 }).await, Some(7));
        drop(t);
        assert!(s.is_shutdown() && c.is_shutdown());
        assert_eq!(s.run_until(std::future::pending::<()>()).await, None);
    }
}
