//! [`TestKit::drain_until_idle`]: rounds of relay, deliveries and redeliveries until a
//! round changes nothing, playing the armed crashes on the way.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{DrainReport, TestKit, TestKitError};
use crate::inbox::crash_point::{self, CrashPoint};

/// Requeued dead letters one redelivery round takes per consumer.
const REQUEUED_PER_ROUND: u64 = 100;

/// How one step of a consumer ended.
enum Step<T> {
    Done(T),
    Crashed,
}

impl TestKit {
    /// Runs rounds until one does nothing: the relay publishes every claimable row; each
    /// consumer settles every message the broker accepted since its last round, in order,
    /// then redelivers its due parked messages and requeued dead letters. Events raised by
    /// handlers (on the kit's database) are published in the next round.
    ///
    /// Not waited for: rows and parked messages whose next attempt is in the future (with a
    /// [`ManualClock`](super::ManualClock), advance it — to
    /// [`DrainReport::next_retry_due`] — and drain again). Armed crashes are played where
    /// they are reached; the crashed relay or consumer is restarted at once.
    ///
    /// # Errors
    /// [`TestKitError::NotIdle`] after the round limit; [`TestKitError::CrashesNotReached`]
    /// when idle with crashes still armed; [`TestKitError::Timeout`] for a step that hangs;
    /// the relay's or a consumer's database error.
    pub async fn drain_until_idle(&mut self) -> Result<DrainReport, TestKitError> {
        let mut report = DrainReport::default();
        while report.rounds < self.max_rounds {
            report.rounds += 1;
            let relayed = self.relay_round(&mut report).await?;
            let consumed = self.consumer_round(&mut report).await?;
            if !relayed && !consumed {
                let crashes = self.armed_crashes();
                if !crashes.is_empty() {
                    return Err(TestKitError::CrashesNotReached {
                        crashes,
                        report: Box::new(report),
                    });
                }
                return Ok(report);
            }
        }
        Err(TestKitError::NotIdle {
            rounds: self.max_rounds,
            report: Box::new(report),
        })
    }

    /// The relay drains; a batch that hangs after publishing (an armed crash) kills it, and
    /// it starts again and drains. Returns whether anything changed.
    async fn relay_round(&mut self, report: &mut DrainReport) -> Result<bool, TestKitError> {
        let mut changed = false;
        loop {
            let hangs = self.broker.hangs();
            let broker = self.broker.clone();
            let step = self.step_timeout;
            let hung = broker.wait_until(Duration::MAX, |broker| broker.hangs() > hangs);
            let drained = tokio::select! {
                biased;
                _ = hung => None,
                drained = tokio::time::timeout(step, self.relay.drain()) => Some(drained),
            };
            let Some(drained) = drained else {
                // The relay's process died between publish and mark.
                report.crashes += 1;
                self.relay_crashes = self.relay_crashes.saturating_sub(1);
                self.restart_relay()?;
                changed = true;
                continue;
            };
            let relay = drained.map_err(|_| timeout("the relay's drain", step))??;
            report.relay(&relay);
            changed |= relay.published + relay.retried + relay.dead_lettered + relay.failed > 0;
            return Ok(changed);
        }
    }

    /// Every consumer settles what it has not acknowledged yet, then redelivers. Returns
    /// whether anything changed.
    async fn consumer_round(&mut self, report: &mut DrainReport) -> Result<bool, TestKitError> {
        let log = self.broker.published();
        let step = self.step_timeout;
        let mut changed = false;
        for index in 0..self.consumers.len() {
            // What the broker delivers: everything after the last acknowledged message.
            while let Some(envelope) = log.get(self.consumers[index].acknowledged) {
                let consumer = &self.consumers[index];
                let delivery = consumer.consumer.deliver(envelope);
                changed = true;
                match play(&consumer.crash_point, step, "a delivery", delivery).await? {
                    Step::Done(delivered) => {
                        report.delivered(&delivered?);
                        self.consumers[index].acknowledged += 1;
                    }
                    Step::Crashed => {
                        report.deliveries += 1;
                        self.consumer_crashed(index, report)?;
                    }
                }
            }
            changed |= self.redeliver(index, report).await?;
        }
        Ok(changed)
    }

    /// Consumer `index` redelivers its due parked messages and its requeued dead letters.
    async fn redeliver(
        &mut self,
        index: usize,
        report: &mut DrainReport,
    ) -> Result<bool, TestKitError> {
        let step = self.step_timeout;
        let consumer = &self.consumers[index];
        let redelivery_failed = |source| TestKitError::Redelivery {
            consumer: consumer.name.clone(),
            source,
        };
        let parked = consumer.consumer.redeliver_parked();
        let parked = match play(&consumer.crash_point, step, "a parked redelivery", parked).await? {
            Step::Done(parked) => parked.map_err(redelivery_failed)?,
            Step::Crashed => return self.consumer_crashed(index, report),
        };
        report.parked(&parked);
        let requeued = consumer.consumer.redeliver_requeued(REQUEUED_PER_ROUND);
        let requeued = match play(
            &consumer.crash_point,
            step,
            "a requeued redelivery",
            requeued,
        )
        .await?
        {
            Step::Done(requeued) => requeued.map_err(redelivery_failed)?,
            Step::Crashed => return self.consumer_crashed(index, report),
        };
        report.requeued(&requeued);
        Ok(parked.applied + parked.retried + parked.dead_lettered > 0
            || requeued.resolved + requeued.failed > 0)
    }

    /// Consumer `index`'s process died: count it and start it again.
    fn consumer_crashed(
        &mut self,
        index: usize,
        report: &mut DrainReport,
    ) -> Result<bool, TestKitError> {
        report.crashes += 1;
        self.consumers[index].restart()?;
        Ok(true)
    }
}

/// Runs `work` with `point` as its crash point: [`Step::Crashed`] (and `work` dropped, its
/// transaction with it) when it reaches an armed crash.
async fn play<T>(
    point: &Arc<CrashPoint>,
    step: Duration,
    what: &str,
    work: impl Future<Output = T>,
) -> Result<Step<T>, TestKitError> {
    let work = crash_point::scope(Arc::clone(point), work);
    tokio::select! {
        biased;
        () = point.reached() => Ok(Step::Crashed),
        done = tokio::time::timeout(step, work) => done.map(Step::Done).map_err(|_| timeout(what, step)),
    }
}

fn timeout(step: &str, after: Duration) -> TestKitError {
    TestKitError::Timeout {
        step: step.to_owned(),
        after,
    }
}
