//! The churn a consumer does to its own registrations, from its seed: modify,
//! revoke and revive, close and reuse the number (four ways), timers set and
//! cancelled, and the whole queue dropped and recreated — then, at the end, the
//! settling that re-arms everything and the count of what was left unread.

use crate::channel::{ChannelKind, ReadEnd};
use crate::consumer::{Consumer, Outcome, PendingTimer, Watch, TIMER_BIT};
use evq::{EventQueue, Interest, Mode, Options};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How a channel is closed and its number reused.
#[derive(Clone, Copy, Debug)]
enum Reuse {
    /// Revoke through the queue, then `dup2` a new file onto the number.
    RevokeThenDup2,
    /// `dup2` a new file onto the number behind the queue's back, then declare:
    /// the queue must notice the file changed (epoll: `ENOENT` on `MOD`, and, while
    /// the producer still holds an eventfd's file, stale events in the kernel set).
    Dup2Behind,
    /// `EventQueue::close`, then a new channel on whatever number comes.
    QueueClose,
    /// `close(2)`, then `EventQueue::forget` — the number may already name a file of
    /// another thread.
    CloseThenForget,
}

impl Consumer<'_> {
    /// One churn operation, chosen at random.
    pub(crate) fn churn(&mut self) -> io::Result<()> {
        if self.chans.is_empty() {
            return Ok(());
        }
        let i = self.rng.usize(0..self.chans.len());
        match self.rng.u16(0..1000) {
            0..=249 => {
                if self.chans[i].watch == Watch::Armed || self.chans[i].watch == Watch::Spent {
                    self.ledger.modifies += 1;
                    self.register(i, None)?;
                }
            }
            250..=399 => {
                if self.chans[i].watch != Watch::Armed {
                    return Ok(());
                }
                self.ledger.revokes += 1;
                let fd = self.chans[i].reader.raw_fd();
                let token = self.chans[i].token;
                self.queue
                    .declare_interest(fd, Interest::empty(), Options::new(0))?;
                self.retire(token);
                let until = self.round + self.rng.u64(1..50);
                self.chans[i].watch = Watch::Revoked { until };
                self.step("revoke", fd, token, until);
            }
            400..=599 => {
                let how = [
                    Reuse::RevokeThenDup2,
                    Reuse::Dup2Behind,
                    Reuse::QueueClose,
                    Reuse::CloseThenForget,
                ][self.rng.usize(0..4)];
                self.ledger.reuses += 1;
                self.reuse(i, how)?;
            }
            600..=849 => self.add_timer(),
            850..=989 => self.cancel_timer(),
            _ => {
                // Rare: a queue is expensive to rebuild, and one per thread is the rule.
                if self.rng.u8(0..10) == 0 {
                    self.ledger.recreates += 1;
                    self.recreate()?;
                }
            }
        }
        Ok(())
    }

    /// Revoked channels whose time is up are declared again (and read if ready).
    pub(crate) fn revive_due(&mut self) -> io::Result<()> {
        for i in 0..self.chans.len() {
            let due = match self.chans[i].watch {
                Watch::Revoked { until } => until <= self.round,
                // A oneshot left spent by `on_channel` is re-armed a little later.
                Watch::Spent => self.rng.u8(0..4) == 0,
                Watch::Armed => false,
            };
            if due {
                let mode = (self.chans[i].watch == Watch::Spent).then_some(Mode::Oneshot);
                self.register(i, mode)?;
            }
        }
        Ok(())
    }

    /// Closes channel `i` (its unread records are discarded on purpose, and counted
    /// so) and puts a new channel instance in its place, reusing the number as `how`
    /// says.
    fn reuse(&mut self, i: usize, how: Reuse) -> io::Result<()> {
        let slot = self.chans[i].slot;
        let old_token = self.chans[i].token;
        let old_fd = self.chans[i].reader.raw_fd();
        let (fresh, old_writer) = self.swap_writer(slot)?;
        let produced = old_writer.as_ref().map_or(0, |w| w.produced());
        let consumed = self.chans[i].reader.consumed;
        if consumed > produced {
            self.ledger.duplicated += 1;
            self.fail(
                "duplicated",
                old_fd,
                old_token,
                format!("read {consumed} records of {produced} produced"),
            );
        }
        self.ledger.discarded_on_close += produced.saturating_sub(consumed);
        self.retire(old_token);
        // A new channel instance: its delay clock starts at its registration.
        self.chans[i].watch = Watch::Revoked { until: 0 };
        self.step("reuse", old_fd, old_token, how as u64);
        let (kind, uid) = (fresh.kind(), fresh.uid());
        match how {
            Reuse::RevokeThenDup2 | Reuse::Dup2Behind => {
                if matches!(how, Reuse::RevokeThenDup2) {
                    self.queue
                        .declare_interest(old_fd, Interest::empty(), Options::new(0))?;
                }
                // The number stays ours throughout: dup2 replaces the file at once.
                let new_fd = fresh.into_raw_fd();
                // SAFETY: both descriptors are ours; `old_fd` keeps its number.
                let rc = unsafe { libc::dup2(new_fd, old_fd) };
                // SAFETY: `new_fd` came from `into_raw_fd` and is closed once, here.
                drop(unsafe { OwnedFd::from_raw_fd(new_fd) });
                if rc != old_fd {
                    return Err(io::Error::last_os_error());
                }
                self.chans[i].reader.replace_file(kind, uid);
                self.register(i, None)?;
                // An eventfd's old file lives on through its write end: behind the
                // queue's back it is still in the kernel's set (epoll) under the
                // old registration. Keep writing it for a while.
                self.bury(old_writer, matches!(how, Reuse::Dup2Behind));
            }
            Reuse::QueueClose => {
                let old = std::mem::replace(&mut self.chans[i].reader, fresh);
                self.queue.close(old.into_raw_fd())?;
                drop(old_writer);
                self.register(i, None)?;
            }
            Reuse::CloseThenForget => {
                let old = std::mem::replace(&mut self.chans[i].reader, fresh);
                drop(old);
                self.queue.forget(old_fd);
                self.register(i, None)?;
                self.bury(old_writer, true);
            }
        }
        Ok(())
    }

    /// Keeps an old eventfd's write end as a ghost (`haunted`) for 10–100 rounds,
    /// else drops it.
    fn bury(&mut self, writer: Option<crate::channel::WriteEnd>, haunted: bool) {
        match writer {
            Some(w) if haunted && w.kind() == ChannelKind::Eventfd => {
                let until = self.round + self.rng.u64(10..100);
                self.ghosts.push((w, until));
            }
            _ => {}
        }
    }

    /// Writes every ghost once and lets go of those whose time is up.
    pub(crate) fn haunt(&mut self) {
        let now = self.shared.now_ns();
        let round = self.round;
        self.ghosts.retain_mut(|(w, until)| {
            // The old file has no reader: nothing but the kernel's set sees this.
            let _ = w.write(1, now);
            *until > round
        });
    }

    fn add_timer(&mut self) {
        if self.timers.len() >= 64 {
            return;
        }
        let token = TIMER_BIT | self.next_token;
        self.next_token += 1;
        let deadline = Instant::now() + Duration::from_micros(self.rng.u64(0..20_000));
        let id = self.queue.add_timer(deadline, token);
        self.timers.insert(token, PendingTimer { id, deadline });
        self.step("timer-add", -1, token, 0);
    }

    fn cancel_timer(&mut self) {
        let Some(&token) = self.timers.keys().next() else {
            return;
        };
        let t = self.timers.remove(&token).expect("listed timer");
        self.step("timer-cancel", -1, token, 0);
        if self.queue.cancel_timer(t.id) {
            self.ledger.timers_cancelled += 1;
        } else {
            // The queue says it fired, but no event for it reached us.
            self.ledger.timers_lost += 1;
            self.fail(
                "lost",
                -1,
                token,
                "timer fired (cancel said so) but never delivered".into(),
            );
        }
    }

    /// Drops the queue and builds a new one: every registration, timer and the
    /// listeners are declared again under new tokens, as an application would.
    fn recreate(&mut self) -> io::Result<()> {
        self.absorb_stats();
        {
            let w = &self.shared.wakeups[self.cfg.id];
            let mut slot = w.notifier.lock().unwrap_or_else(|p| p.into_inner());
            let fresh = EventQueue::with_backend(self.cfg.backend)?;
            *slot = Some(fresh.notifier());
            drop(std::mem::replace(&mut self.queue, fresh));
            // A notification sent to the old queue died with it.
            w.acked
                .fetch_max(w.sent.load(Ordering::Acquire), Ordering::AcqRel);
        }
        self.step("recreate", -1, 0, 0);
        for t in self.tokens.values_mut() {
            t.live = false;
        }
        let timers: Vec<Instant> = self.timers.drain().map(|(_, t)| t.deadline).collect();
        for deadline in timers {
            let token = TIMER_BIT | self.next_token;
            self.next_token += 1;
            let id = self.queue.add_timer(deadline, token);
            self.timers.insert(token, PendingTimer { id, deadline });
        }
        for i in 0..self.chans.len() {
            if !matches!(self.chans[i].watch, Watch::Revoked { .. }) {
                self.register(i, None)?;
            }
        }
        self.register_listeners()
    }

    /// Adds this queue's own counters to the ledger (before it is dropped).
    fn absorb_stats(&mut self) {
        let s = self.queue.stats();
        self.ledger.overflows += s.overflows;
        self.ledger.rebuilds += s.rebuilds;
        self.ledger.stale_filtered += s.stale_dropped;
    }

    /// The drain phase: no more churn; everything revoked or spent is armed again,
    /// and the consumer says whether all its channels are read to the end and its
    /// timers fired.
    pub(crate) fn settle(&mut self) -> io::Result<()> {
        for i in 0..self.chans.len() {
            if self.chans[i].watch != Watch::Armed {
                let mode = (self.chans[i].watch == Watch::Spent).then_some(Mode::Oneshot);
                self.register(i, mode)?;
            }
        }
        let done = self.timers.is_empty() && self.unread().iter().all(|&(_, n)| n == 0);
        self.shared.drained[self.cfg.id].store(done, Ordering::Release);
        Ok(())
    }

    /// Per channel: (index, records produced and not read), reading what the
    /// producer reported under the slot's lock.
    pub(crate) fn unread(&self) -> Vec<(usize, u64)> {
        self.chans
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let w = self.shared.slots[c.slot]
                    .writer
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                let produced = w.as_ref().map_or(0, |w| w.produced());
                (i, produced.saturating_sub(c.reader.consumed))
            })
            .collect()
    }

    /// The end: what is still unread on a watched channel was lost, as are timers
    /// past their deadline that never fired.
    pub(crate) fn finish(mut self) -> Outcome {
        self.absorb_stats();
        for (i, n) in self.unread() {
            if n > 0 {
                self.ledger.lost += n;
                let (fd, token) = (self.chans[i].reader.raw_fd(), self.chans[i].token);
                self.fail(
                    "lost",
                    fd,
                    token,
                    format!(
                        "{n} records never reported ({:?} registration)",
                        self.chans[i].mode
                    ),
                );
            }
        }
        let late = Instant::now() - Duration::from_millis(500);
        let overdue: Vec<u64> = self
            .timers
            .iter()
            .filter(|(_, t)| t.deadline < late)
            .map(|(&k, _)| k)
            .collect();
        for token in overdue {
            self.ledger.timers_lost += 1;
            self.fail(
                "lost",
                -1,
                token,
                "timer past its deadline never fired".into(),
            );
        }
        self.last_notification_check();
        // The readers close here, then the queue.
        let chans = std::mem::take(&mut self.chans);
        drop(
            chans
                .into_iter()
                .map(|c| c.reader)
                .collect::<Vec<ReadEnd>>(),
        );
        Outcome {
            ledger: self.ledger,
            failures: self.failures,
        }
    }
}
