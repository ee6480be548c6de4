//! How a registration delivers events: its [`Mode`] and the per-registration
//! [`Options`] given to `declare_interest`.

/// When a registered descriptor produces events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Level: reported on every `get_next_event` while the state answers the interest
    /// (what `select`/`poll` do). The default.
    #[default]
    Level,
    /// The paper's *event* mode (SEEDS 000 §3): reported when something *happens* —
    /// data arrives, buffer space frees — and coalesced until dequeued, the mask giving
    /// the state at dequeue time. An always-writable socket with write interest is
    /// reported once, not on every call. (`EPOLLET` on epoll.)
    Event,
    /// Reported once, then disarmed until `declare_interest` is called again
    /// (`EPOLLONESHOT`). Lets several threads share a queue without double dispatch.
    Oneshot,
}

/// The per-registration choices of `declare_interest`.
///
/// ```
/// use evq::{Mode, Options};
/// let opts = Options::new(42).mode(Mode::Event);
/// assert_eq!(opts.token(), 42);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    token: u64,
    mode: Mode,
    wake_one: bool,
}

impl Options {
    /// Level-triggered delivery carrying `token` in every event.
    pub const fn new(token: u64) -> Options {
        Options {
            token,
            mode: Mode::Level,
            wake_one: false,
        }
    }

    /// Sets the delivery mode.
    pub const fn mode(mut self, mode: Mode) -> Options {
        self.mode = mode;
        self
    }

    /// Asks that, of several queues interested in this descriptor, only one be woken
    /// per event (SEEDS 000's `SO_WAKEUP_ONE`, 003's `EV_WAKEONE`; `EPOLLEXCLUSIVE`).
    /// Backends without it refuse the registration (see
    /// [`Capabilities::wake_one`](crate::Capabilities)).
    pub const fn wake_one(mut self, on: bool) -> Options {
        self.wake_one = on;
        self
    }

    /// The user token carried by every event of this registration.
    pub const fn token(&self) -> u64 {
        self.token
    }

    /// The delivery mode.
    pub const fn delivery_mode(&self) -> Mode {
        self.mode
    }

    /// Whether wake-one delivery was asked for.
    pub const fn is_wake_one(&self) -> bool {
        self.wake_one
    }
}
