//! A small work-stealing executor whose idle workers drive the reactor.
//!
//! Tasks are [`async_task`] allocations; each worker has a FIFO queue
//! (`crossbeam-deque`), a task woken on a worker goes to that worker's queue, one
//! woken elsewhere to a shared injector, and an idle worker steals. A worker with
//! nothing to run sleeps through [`Reactor::sleep`]: the first idle worker waits on
//! evq's queue and dispatches events to the tasks it is about to run; the others
//! park in line behind it. Waking an idle worker is a futex wake-up if it is parked
//! and a `Notifier` write if it is blocked in the queue.
//!
//! With one worker (`Executor::with_threads(0)` and [`Executor::block_on`]) this is
//! a current-thread runtime: no lock is contended, no cross-thread wake-up is sent,
//! and every registration is made at once by the thread that owns the queue.

use crate::reactor::{lock, ActiveLoop, Reactor, Sleeper};
use async_task::Runnable;
use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use std::cell::RefCell;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Tasks run between two zero-timeout looks at the queue by a busy worker, so a
/// worker that never runs dry still picks up I/O (tokio's `event_interval`).
const EVENT_INTERVAL: u32 = 61;

static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

/// A multi-threaded executor on evq's reactor. Cheap to clone (a handle); the
/// worker threads stop, and unfinished tasks are dropped, when the last clone is
/// dropped.
///
/// ```
/// use evq_async::Executor;
/// let ex = Executor::with_threads(1);
/// let sum = ex.block_on(async {
///     let tasks: Vec<_> = (0..4u32).map(|i| ex.spawn(async move { i * 2 })).collect();
///     let mut sum = 0;
///     for t in tasks {
///         sum += t.await;
///     }
///     sum
/// });
/// assert_eq!(sum, 12);
/// ```
#[derive(Clone)]
pub struct Executor {
    handle: Arc<Handle>,
}

/// Dropped with the last `Executor` clone: stops the workers.
struct Handle {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

struct Shared {
    id: usize,
    injector: Injector<Runnable>,
    workers: Mutex<Vec<Arc<WorkerSlot>>>,
    /// `workers.len()`, read without the lock.
    worker_count: AtomicUsize,
    /// Workers idle (between deciding there is nothing to run and waking).
    idle: AtomicUsize,
    shutdown: AtomicBool,
}

struct WorkerSlot {
    stealer: Stealer<Runnable>,
    sleeper: Arc<Sleeper>,
    idle: AtomicBool,
}

/// This thread's worker context, while it runs an executor's loop.
struct Local {
    executor: usize,
    queue: Worker<Runnable>,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

/// A spawned task: await it for its output; dropping it cancels the task (use
/// [`Task::detach`] to let it run on).
#[must_use = "a dropped Task is cancelled; call detach() to let it run"]
pub struct Task<T>(async_task::Task<T>);

impl<T> Task<T> {
    /// Lets the task run to completion on its own; its output is dropped.
    pub fn detach(self) {
        self.0.detach()
    }

    /// Cancels the task and waits until it is stopped; returns its output if it
    /// had already finished.
    pub async fn cancel(self) -> Option<T> {
        self.0.cancel().await
    }

    /// True if the task has finished (its output, if any, is ready).
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

impl<T> Future for Task<T> {
    type Output = T;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("workers", &lock(&self.handle.shared.workers).len())
            .finish()
    }
}

impl Default for Executor {
    fn default() -> Executor {
        Executor::new()
    }
}

impl Executor {
    /// An executor with one background worker per available CPU but one: the
    /// thread that calls [`Executor::block_on`] is the last worker. Under
    /// `taskset -c 0` that is no background thread at all.
    pub fn new() -> Executor {
        let cpus = thread::available_parallelism().map_or(1, |n| n.get());
        Executor::with_threads(cpus - 1)
    }

    /// An executor with `threads` background workers (0: tasks run only inside
    /// [`Executor::block_on`]).
    ///
    /// # Panics
    /// If a worker thread cannot be spawned.
    pub fn with_threads(threads: usize) -> Executor {
        let shared = Arc::new(Shared {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            injector: Injector::new(),
            workers: Mutex::new(Vec::new()),
            worker_count: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
        });
        let handles = (0..threads)
            .map(|i| {
                let shared = shared.clone();
                thread::Builder::new()
                    .name(format!("evq-async-worker-{i}"))
                    .spawn(move || {
                        let _active = ActiveLoop::enter();
                        shared.run_worker::<std::future::Pending<()>>(None);
                    })
                    .expect("evq-async: cannot spawn a worker thread")
            })
            .collect();
        Executor {
            handle: Arc::new(Handle {
                shared,
                threads: Mutex::new(handles),
            }),
        }
    }

    /// Spawns `future` as a task; it starts on a worker (or in `block_on`).
    pub fn spawn<F>(&self, future: F) -> Task<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let shared = self.handle.shared.clone();
        let (runnable, task) = async_task::Builder::new()
            .propagate_panic(true)
            .spawn(move |()| future, move |r| shared.schedule(r));
        runnable.schedule();
        Task(task)
    }

    /// Runs `future` on the calling thread, which serves as one more worker of this
    /// executor until the future completes.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let _active = ActiveLoop::enter();
        self.handle
            .shared
            .run_worker(Some(future))
            .expect("the main future completes")
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let shared = &self.shared;
        shared.shutdown.store(true, Ordering::SeqCst);
        for w in lock(&shared.workers).iter() {
            w.sleeper.wake_up();
        }
        for t in lock(&self.threads).drain(..) {
            if t.thread().id() != thread::current().id() {
                let _ = t.join();
            }
        }
        // Unfinished tasks are cancelled: dropping a runnable drops its future.
        loop {
            match shared.injector.steal() {
                Steal::Success(r) => drop(r),
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
    }
}

/// Wakes the main future of a `block_on` worker.
struct MainWaker {
    woken: AtomicBool,
    sleeper: Arc<Sleeper>,
}

impl Wake for MainWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        self.sleeper.wake_up();
    }
}

impl Shared {
    fn schedule(&self, runnable: Runnable) {
        let leftover = LOCAL.with(|l| match l.try_borrow() {
            Ok(local) => match &*local {
                Some(local) if local.executor == self.id => {
                    local.queue.push(runnable);
                    None
                }
                _ => Some(runnable),
            },
            Err(_) => Some(runnable),
        });
        if let Some(runnable) = leftover {
            if self.shutdown.load(Ordering::Acquire) {
                // Nobody will run it: cancel the task now.
                drop(runnable);
                return;
            }
            self.injector.push(runnable);
        }
        // Pairs with the fence in `run_worker` between announcing idleness and
        // looking for work once more: one of the two sides sees the other.
        fence(Ordering::SeqCst);
        if self.idle.load(Ordering::SeqCst) > 0 {
            self.wake_one();
        }
    }

    fn wake_one(&self) {
        let workers = lock(&self.workers);
        for w in workers.iter() {
            if w.idle.swap(false, Ordering::SeqCst) {
                self.idle.fetch_sub(1, Ordering::SeqCst);
                w.sleeper.wake_up();
                return;
            }
        }
    }

    fn has_work(&self, local: &Worker<Runnable>) -> bool {
        !local.is_empty()
            || !self.injector.is_empty()
            || (self.worker_count.load(Ordering::Relaxed) > 1
                && lock(&self.workers).iter().any(|w| !w.stealer.is_empty()))
    }

    fn find_task(&self, local: &Worker<Runnable>) -> Option<Runnable> {
        if let Some(r) = local.pop() {
            return Some(r);
        }
        // Checked first: stealing from an empty injector is not free.
        while !self.injector.is_empty() {
            match self.injector.steal_batch_and_pop(local) {
                Steal::Success(r) => return Some(r),
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
        if self.worker_count.load(Ordering::Relaxed) < 2 {
            return None;
        }
        for w in lock(&self.workers).iter() {
            loop {
                match w.stealer.steal_batch_and_pop(local) {
                    Steal::Success(r) => return Some(r),
                    Steal::Retry => continue,
                    Steal::Empty => break,
                }
            }
        }
        None
    }

    /// The worker loop; with `main`, also polls it and returns its output.
    fn run_worker<F: Future>(self: &Arc<Self>, main: Option<F>) -> Option<F::Output> {
        let queue = Worker::new_fifo();
        let sleeper = Sleeper::for_current_thread();
        let slot = Arc::new(WorkerSlot {
            stealer: queue.stealer(),
            sleeper: sleeper.clone(),
            idle: AtomicBool::new(false),
        });
        {
            let mut workers = lock(&self.workers);
            workers.push(slot.clone());
            self.worker_count.store(workers.len(), Ordering::Relaxed);
        }
        let previous = LOCAL.with(|l| {
            l.borrow_mut().replace(Local {
                executor: self.id,
                queue,
            })
        });
        let main_waker = Arc::new(MainWaker {
            // A worker with a main future polls it first; one without never looks.
            woken: AtomicBool::new(main.is_some()),
            sleeper: sleeper.clone(),
        });
        let waker = Waker::from(main_waker.clone());
        let mut cx = Context::from_waker(&waker);
        let mut main = pin!(main);
        let reactor = Reactor::get().ok();
        let mut ticks = 0u32;

        let out = loop {
            if self.shutdown.load(Ordering::Acquire) {
                break None;
            }
            if let Some(main) = main.as_mut().as_pin_mut() {
                if main_waker.woken.swap(false, Ordering::SeqCst) {
                    if let Poll::Ready(v) = main.poll(&mut cx) {
                        break Some(v);
                    }
                }
            }
            let task = LOCAL.with(|l| {
                let l = l.borrow();
                let local = l.as_ref().expect("worker context");
                self.find_task(&local.queue)
            });
            if let Some(runnable) = task {
                runnable.run();
                ticks = ticks.wrapping_add(1);
                if ticks % EVENT_INTERVAL == 0 {
                    if let Some(r) = reactor {
                        r.try_drive(Some(Duration::ZERO), None);
                    }
                }
                continue;
            }
            // Nothing to run: announce idleness, then look once more (see
            // `schedule`), then sleep.
            slot.idle.store(true, Ordering::SeqCst);
            self.idle.fetch_add(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let work = LOCAL.with(|l| {
                let l = l.borrow();
                self.has_work(&l.as_ref().expect("worker context").queue)
            });
            if !work
                && !main_waker.woken.load(Ordering::SeqCst)
                && !self.shutdown.load(Ordering::SeqCst)
            {
                match reactor {
                    Some(r) => r.sleep(&sleeper),
                    None => sleeper.park(),
                }
            }
            if slot.idle.swap(false, Ordering::SeqCst) {
                self.idle.fetch_sub(1, Ordering::SeqCst);
            }
            sleeper.take_notification();
        };

        // Leave: tasks still queued here go to the injector for the others.
        let local = LOCAL.with(|l| std::mem::replace(&mut *l.borrow_mut(), previous));
        {
            let mut workers = lock(&self.workers);
            workers.retain(|w| !Arc::ptr_eq(w, &slot));
            self.worker_count.store(workers.len(), Ordering::Relaxed);
        }
        if let Some(local) = local {
            while let Some(r) = local.queue.pop() {
                if self.shutdown.load(Ordering::Acquire) {
                    drop(r);
                } else {
                    self.injector.push(r);
                }
            }
        }
        if !self.injector.is_empty() {
            fence(Ordering::SeqCst);
            if self.idle.load(Ordering::SeqCst) > 0 {
                self.wake_one();
            }
        }
        out
    }
}
