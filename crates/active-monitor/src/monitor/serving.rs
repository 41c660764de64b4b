//! The monitor's side of a dedicated server thread: waking it, handing
//! it the monitor, its stint and its sleep.

use ast_mutex::AbstractState;
use sync_core::sync::Arc as LoomArc;
use sync_core::sync::atomic::{Ordering::*, fence};
use sync_core::wait::Backoff;
use sync_core::waiter::Waiter;

use crate::saturation;
use crate::server::HELD;
use crate::unwind;

use super::*;

impl<T, S: AbstractState> Monitor<T, S> {
    /// Hands the monitor to the sleeping server (a submitter, after the
    /// fence of `after_push`). If the server withdrew its waiter (it saw a
    /// task and is awake), lets go of the monitor again: the server takes
    /// it.
    #[cold]
    pub(super) fn wake_server(&self) {
        if self.take() && !self.hand_to_server() {
            self.release_served();
            // Let go of: the async producers `release_served` woke for
            // space (see `notify_space`), before this thread may park.
            unwind::wake_deferred();
        }
    }

    /// Pops the server's waiter and wakes it holding the monitor. `false`
    /// (still holding) if it has none live: it withdrew, it is awake.
    /// The caller holds the monitor (the `sleeper` queue's consumer).
    pub(super) fn hand_to_server(&self) -> bool {
        let Some(srv) = &self.server else {
            return false;
        };
        let mut backoff = Backoff::new();
        loop {
            // SAFETY: we hold the monitor: the only consumer of `sleeper`,
            // after the previous holder (lock Acquire/Release).
            match unsafe { srv.sleeper.pop() } {
                // Release (in `notify`): the server, woken, sees the data
                // as we left it.
                Some(w) => {
                    if w.notify(HELD) {
                        return true;
                    }
                }
                None if srv.sleeper.is_empty() => return false,
                // The server is half-way through its push (see
                // `wait_for_push`).
                None => wait_for_push(&mut backoff),
            }
        }
    }

    /// Wakes the sleeping server so that it finds `stop` set (the last user
    /// handle's drop, after its fence). A holder other than the server
    /// pops the waiter; if someone else holds the monitor meanwhile, it
    /// lets go soon (a submitter handing over, or a combiner).
    pub(crate) fn wake_server_to_stop(&self) {
        let Some(srv) = &self.server else {
            return;
        };
        let mut backoff = Backoff::new();
        while !srv.sleeper.is_empty() {
            if !self.take() {
                sync_core::wait::give_way(None);
                continue;
            }
            // SAFETY: we hold the monitor: the `sleeper` queue's consumer.
            while let Some(w) = unsafe { srv.sleeper.pop() } {
                // `false`: withdrawn, that server is awake and sees `stop`.
                w.notify(crate::server::STOP);
            }
            // Release: pairs with the Acquire CAS in `take`.
            self.lock.store(0, Release);
            if srv.sleeper.is_empty() {
                return;
            }
            // Not empty yet: the server is half-way through its push (see
            // `wait_for_push`; the monitor is let go of meanwhile).
            wait_for_push(&mut backoff);
        }
    }

    /// Test hook: whether the server is half-way through queuing its
    /// waiter before it sleeps (`prepare_sleep`), seen as a holder sees it
    /// (`hand_to_server`): takes the monitor if it is idle (else `false`),
    /// pops `sleeper`, puts a waiter it popped back, and lets go. For a
    /// monitor that nobody else uses meanwhile (the release does not look
    /// for work).
    #[doc(hidden)]
    pub fn __test_sleeper_in_flight(&self) -> bool {
        let Some(srv) = &self.server else {
            return false;
        };
        if srv.sleeper.is_empty() || !self.take() {
            return false;
        }
        // SAFETY: we hold the monitor: the `sleeper` queue's consumer.
        let in_flight = match unsafe { srv.sleeper.pop() } {
            Some(w) => {
                // Still the server's to be woken by (or withdrawn: popped
                // by its next stint).
                srv.sleeper.push(w);
                false
            }
            None => !srv.sleeper.is_empty(),
        };
        self.unlock_plain();
        in_flight
    }

    /// Lets go of a monitor whose server serves (not saturated): a holder
    /// other than the server gives the queued tasks to the server, waking
    /// it if it sleeps, instead of running them.
    pub(super) fn release_served(&self) {
        let Some(srv) = &self.server else {
            return;
        };
        loop {
            // Release: pairs with the Acquire CAS in `take`.
            self.lock.store(0, Release);
            // SeqCst fence: pairs with the fence in `prepare_sleep`: either
            // we see the server's waiter, or the server sees the tasks
            // (and the lock free) and does not sleep.
            fence(SeqCst);
            let for_server = self.queue.front_ready() && !srv.sleeper.is_empty();
            // Producers waiting for space (the fence also pairs with the
            // one in `enqueue_for_space`): the server wakes them in its
            // stint, but the one that just drained the queue may have found
            // the monitor held by us and left them to our release.
            let for_space = !self.space.is_empty() && self.room_for_waiters();
            if !for_server && !for_space {
                return;
            }
            if !self.take() {
                // Another holder: its own release looks again.
                return;
            }
            if for_space {
                self.wake_space();
            }
            if for_server && self.hand_to_server() {
                return;
            }
        }
    }

    /// Wakes the monitor's server if it sleeps (it then takes the monitor,
    /// handed over held).
    pub(super) fn wake_sleeping_server(&self) {
        if let Some(srv) = &self.server {
            if !srv.sleeper.is_empty() {
                self.wake_server();
            }
        }
    }

    /// The server's stint: runs the queue until it is empty (and stays
    /// empty through `release`'s check), waking producers waiting for
    /// space every `batch` tasks, or until [`KEPT_DROPS_PER_STINT`] tasks
    /// wait to be dropped. The server holds the monitor.
    pub(crate) fn serve_server(&self) {
        if let Some(srv) = &self.server {
            // Our own withdrawn waiters, left by `prepare_sleep`: nobody
            // else pushes there, so this empties the queue, which thus
            // holds at most the waiters of one idle spell.
            // SAFETY: we hold the monitor: the `sleeper` queue's consumer.
            while unsafe { srv.sleeper.pop() }.is_some() {}
        }
        let mut n = 0;
        loop {
            match self.pop() {
                Some(task) => {
                    self.execute(task);
                    n += 1;
                    if n == self.batch {
                        n = 0;
                        self.wake_space();
                        // Tasks whose drop is user code wait for the end of
                        // the stint (`unwind::drop_later`): a long stint
                        // lets go now and then, so that they do not pile
                        // up. The server's loop drops them and comes back
                        // for the queued tasks (its `prepare_sleep` sees
                        // them).
                        // So do the task wakers the stint kept (producers
                        // just woken for space, completions, awaiters):
                        // they run once the server has let go of the
                        // monitor (see `notify_space`), not at the end of
                        // a stint that may last as long as tasks come.
                        if unwind::kept_drops() >= KEPT_DROPS_PER_STINT || unwind::task_wakes_kept()
                        {
                            self.unlock_plain();
                            return;
                        }
                    }
                }
                None => {
                    if self.release() {
                        return;
                    }
                }
            }
        }
    }

    /// An idle server watches the queue for [`SPIN`](crate::server::SPIN)
    /// (not when the CPUs are saturated: it then yields its CPU at once).
    /// `true` once a task is ready and the monitor is free to take.
    pub(crate) fn idle_watch(&self) -> bool {
        if saturation::saturated() {
            return false;
        }
        #[cfg(not(loom))]
        {
            let start = std::time::Instant::now();
            loop {
                for _ in 0..32 {
                    if self.work_for_server() {
                        return true;
                    }
                    sync_core::sync::hint::spin_loop();
                }
                if start.elapsed() >= crate::server::SPIN {
                    return false;
                }
            }
        }
        #[cfg(loom)]
        {
            self.work_for_server()
        }
    }

    /// Whether a task is ready and nobody holds the monitor.
    pub(crate) fn work_for_server(&self) -> bool {
        let s = self.lock.load(Relaxed);
        (s == 0 || s & STATE == HANDOVER) && self.queue.front_ready()
    }

    /// The server's step before it sleeps: queues `waiter` on `sleeper`,
    /// then looks for work once more. `None`: sleep (a submitter or a
    /// holder will hand the monitor over with `HELD`). `Some(held)`: do not
    /// sleep; `held` if the monitor was handed over meanwhile.
    pub(crate) fn prepare_sleep(&self, waiter: &LoomArc<Waiter>) -> Option<bool> {
        let srv = self.server.as_ref()?;
        srv.sleeper.push(LoomArc::clone(waiter));
        // SeqCst fence: pairs with the fences in `after_push` and
        // `release_served`: either they see our waiter and hand us the
        // monitor, or we see their task (and the monitor free).
        fence(SeqCst);
        // Relaxed `stop`: ordered by the fence (see `Users::drop`).
        if self.work_for_server() || srv.stop.load(Relaxed) {
            // Withdraw; a notify that won the race handed us the monitor
            // (`HELD`), or told us to stop (`STOP`: not a hand-over).
            return Some(matches!(waiter.cancel(), Err(HELD)));
        }
        None
    }
}

/// The tasks kept for dropping (see `unwind::drop_later`) at which a
/// server ends its stint early to drop them.
const KEPT_DROPS_PER_STINT: usize = 64;
