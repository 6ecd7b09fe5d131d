//! [`Watermark`]: a position that only rises, which tasks wait on.
//!
//! Waiters are woken in the order they began waiting (tokio's `Notify`). tokio's `watch`
//! channel would do the same job, but it spreads its waiting receivers over several `Notify`s
//! picked by a thread-local random number, so the order in which it wakes them — and so the
//! order in which their tasks run — changes from run to run. A deterministic simulation cannot
//! have that: a position many tasks wait on (the store's published position, which every follow
//! cursor and long poll waits on) is a `Watermark`.
//!
//! Invariant: the value never decreases; every raise that moves it wakes every waiter.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// A rising position with waiters (see the module doc).
#[derive(Debug, Default)]
pub struct Watermark {
    value: AtomicU64,
    notify: Notify,
}

impl Watermark {
    /// A watermark at `value`.
    pub fn new(value: u64) -> Watermark {
        Watermark { value: AtomicU64::new(value), notify: Notify::new() }
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.value.load(Ordering::Acquire)
    }

    /// Raises the value to `to` (a lower `to` changes nothing); wakes the waiters when it moved.
    pub fn raise(&self, to: u64) {
        if self.value.fetch_max(to, Ordering::AcqRel) < to {
            self.notify.notify_waiters();
        }
    }

    /// Completes with the value once `ready` holds for it.
    pub async fn wait_until(&self, ready: impl Fn(u64) -> bool) -> u64 {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the value is read, so a raise in between is not missed.
            notified.as_mut().enable();
            let v = self.get();
            if ready(v) {
                return v;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiters_see_every_raise_and_the_value_never_falls() {
        let w = std::sync::Arc::new(Watermark::new(5));
        assert_eq!(w.wait_until(|v| v >= 5).await, 5);
        let waiter = {
            let w = w.clone();
            tokio::spawn(async move { w.wait_until(|v| v >= 9).await })
        };
        tokio::task::yield_now().await;
        w.raise(7);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        w.raise(3);
        assert_eq!(w.get(), 7);
        w.raise(10);
        assert_eq!(waiter.await.unwrap(), 10);
    }
}
