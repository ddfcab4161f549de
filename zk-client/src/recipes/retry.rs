//! Retry policies: exponential backoff that knows which failures may be retried for which
//! operations.
//!
//! - CONNECTIONLOSS and OPERATIONTIMEOUT leave the outcome unknown: the operation may have been
//!   applied. Only [`Idempotence::Idempotent`] operations (reads, versioned writes whose retry fails
//!   harmlessly, deletes that accept NONODE) are retried after them.
//! - THROTTLEDOP means the server refused the request unapplied: any operation may be retried.
//! - SESSIONEXPIRED, AUTHFAILED and every answer from the server about the data (NONODE,
//!   BADVERSION, ...) are never retried: the application must see them. Session expiry in
//!   particular means ephemerals, watches and with them locks and leadership are gone.

use crate::{Error, Result};
use std::future::Future;
use std::time::Duration;

/// Whether running an operation twice has the same effect as running it once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idempotence {
    /// Safe to repeat after an unknown outcome.
    Idempotent,
    /// Repeating could apply it twice (an unversioned create of a sequential node, an increment).
    NotIdempotent,
}

/// Exponential backoff with full jitter: attempt `n` (from 0) sleeps a random time up to
/// `min(initial * 2^n, max_delay)`; at most `max_retries` retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Delay bound of the first retry.
    pub initial: Duration,
    /// Largest delay bound.
    pub max_delay: Duration,
    /// Retries after the first attempt; 0 never retries.
    pub max_retries: u32,
}

impl Default for RetryPolicy {
    /// 100 ms doubling up to 5 s, 10 retries: about 30 s at most, a session timeout's worth.
    fn default() -> Self {
        RetryPolicy {
            initial: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            max_retries: 10,
        }
    }
}

impl RetryPolicy {
    /// Exponential backoff from `initial` up to `max_delay`, `max_retries` times.
    pub fn exponential(initial: Duration, max_delay: Duration, max_retries: u32) -> RetryPolicy {
        RetryPolicy { initial, max_delay, max_retries }
    }

    /// Whether failure `e` of an operation of kind `kind` may be retried at all.
    pub fn retryable(e: Error, kind: Idempotence) -> bool {
        match e {
            Error::ThrottledOp => true,
            Error::ConnectionLoss | Error::OperationTimeout => kind == Idempotence::Idempotent,
            _ => false,
        }
    }

    /// The upper bound of the pause before retry number `attempt` (0-based).
    pub fn delay_bound(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max_delay)
    }

    /// Runs `op` until it succeeds, fails in a way that may not be retried, or the retries are
    /// used up (then its last error is returned).
    pub async fn run<T, F, Fut>(&self, kind: Idempotence, mut op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut attempt = 0;
        loop {
            match op().await {
                Ok(v) => return Ok(v),
                Err(e) if attempt < self.max_retries && RetryPolicy::retryable(e, kind) => {
                    let bound = self.delay_bound(attempt);
                    let ms = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX);
                    let pause = if ms == 0 { 0 } else { rand::random::<u64>() % (ms + 1) };
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn what_is_retried() {
        use Idempotence::*;
        assert!(RetryPolicy::retryable(Error::ConnectionLoss, Idempotent));
        assert!(!RetryPolicy::retryable(Error::ConnectionLoss, NotIdempotent));
        assert!(RetryPolicy::retryable(Error::ThrottledOp, NotIdempotent));
        for e in [Error::SessionExpired, Error::AuthFailed, Error::NoNode, Error::BadVersion] {
            assert!(!RetryPolicy::retryable(e, Idempotent), "{e:?}");
        }
    }

    #[test]
    fn backoff_doubles_to_the_cap() {
        let p = RetryPolicy::exponential(Duration::from_millis(10), Duration::from_millis(70), 5);
        let d: Vec<u128> = (0..5).map(|a| p.delay_bound(a).as_millis()).collect();
        assert_eq!(d, [10, 20, 40, 70, 70]);
        assert_eq!(p.delay_bound(1000), Duration::from_millis(70));
    }

    #[tokio::test]
    async fn expiry_reaches_the_caller_and_loss_is_retried_only_when_idempotent() {
        let p = RetryPolicy::exponential(Duration::from_millis(1), Duration::from_millis(2), 3);
        let n = AtomicU32::new(0);
        let r: Result<()> = p
            .run(Idempotence::Idempotent, || async {
                n.fetch_add(1, Ordering::SeqCst);
                Err(Error::SessionExpired)
            })
            .await;
        assert_eq!((r, n.load(Ordering::SeqCst)), (Err(Error::SessionExpired), 1));
        n.store(0, Ordering::SeqCst);
        let r: Result<()> = p
            .run(Idempotence::NotIdempotent, || async {
                n.fetch_add(1, Ordering::SeqCst);
                Err(Error::ConnectionLoss)
            })
            .await;
        assert_eq!((r, n.load(Ordering::SeqCst)), (Err(Error::ConnectionLoss), 1));
        n.store(0, Ordering::SeqCst);
        let r = p
            .run(Idempotence::Idempotent, || async {
                if n.fetch_add(1, Ordering::SeqCst) < 2 {
                    Err(Error::ConnectionLoss)
                } else {
                    Ok(7)
                }
            })
            .await;
        assert_eq!((r, n.load(Ordering::SeqCst)), (Ok(7), 3));
        n.store(0, Ordering::SeqCst);
        let r: Result<()> = p
            .run(Idempotence::Idempotent, || async {
                n.fetch_add(1, Ordering::SeqCst);
                Err(Error::ConnectionLoss)
            })
            .await;
        assert_eq!((r, n.load(Ordering::SeqCst)), (Err(Error::ConnectionLoss), 4), "1 try + 3 retries");
    }
}
