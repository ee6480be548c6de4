//! The designs: names, and what the harness must know about each.

use std::fmt;
use std::io;
use std::str::FromStr;

/// One server design.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Design {
    /// Iterative: one process accepts and serves.
    Serv00,
    /// One process accepts and forks a child per client.
    Serv01,
    /// Prefork, every child blocks in `accept` (no locking).
    Serv02,
    /// Prefork, children wait in `select`, then a non-blocking `accept`.
    Serv02l,
    /// Prefork, each child its own epoll, plain registration: all wake.
    Serv02lK,
    /// Prefork, epoll wake-one (`EPOLLEXCLUSIVE`) without rotation.
    Serv02lKone,
    /// Wake-one, rotating after every delivery (DragonFly mkII).
    Serv02lKoneR1,
    /// Wake-one, rotating every 16 deliveries (nginx-like).
    Serv02lKoneR16,
    /// Wake-one rotating after every delivery in a fair-share group (evq's
    /// default): a worker 8 connections ahead of the fewest steps out of the line
    /// until the others catch up, which keeps shares even while all are busy.
    Serv02lKoneFair,
    /// Wake-one through the kqueue personality (`EV_WAKEONE`, mkII rotation).
    Serv02lKoneKq,
    /// Prefork, `fcntl` lock around `accept`.
    Serv03,
    /// Prefork, process-shared pthread mutex around `accept`.
    Serv04,
    /// Prefork, the parent accepts and passes descriptors (`SCM_RIGHTS`).
    Serv05,
    /// One thread per client.
    Serv06,
    /// Prethreaded, mutex around `accept`.
    Serv07,
    /// Prethreaded, the main thread accepts and hands off.
    Serv08,
    /// Prethreaded, every thread blocks in `accept`.
    Serv09,
    /// One listening socket per worker process, `SO_REUSEPORT` (kernel sharding).
    Reuseport,
}

impl Design {
    /// Every design, in the order of the seed's table.
    pub const ALL: &'static [Design] = &[
        Design::Serv00,
        Design::Serv01,
        Design::Serv02,
        Design::Serv02l,
        Design::Serv02lK,
        Design::Serv02lKone,
        Design::Serv02lKoneR1,
        Design::Serv02lKoneR16,
        Design::Serv02lKoneFair,
        Design::Serv02lKoneKq,
        Design::Serv03,
        Design::Serv04,
        Design::Serv05,
        Design::Serv06,
        Design::Serv07,
        Design::Serv08,
        Design::Serv09,
        Design::Reuseport,
    ];

    /// The design's name (`serv02l-kone-r1`, `reuseport`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Design::Serv00 => "serv00",
            Design::Serv01 => "serv01",
            Design::Serv02 => "serv02",
            Design::Serv02l => "serv02l",
            Design::Serv02lK => "serv02l-k",
            Design::Serv02lKone => "serv02l-kone",
            Design::Serv02lKoneR1 => "serv02l-kone-r1",
            Design::Serv02lKoneR16 => "serv02l-kone-r16",
            Design::Serv02lKoneFair => "serv02l-kone-fair",
            Design::Serv02lKoneKq => "serv02l-kone-kq",
            Design::Serv03 => "serv03",
            Design::Serv04 => "serv04",
            Design::Serv05 => "serv05",
            Design::Serv06 => "serv06",
            Design::Serv07 => "serv07",
            Design::Serv08 => "serv08",
            Design::Serv09 => "serv09",
            Design::Reuseport => "reuseport",
        }
    }

    /// True if `accept` is non-blocking after a readiness wake-up (collisions
    /// possible).
    pub(crate) fn nonblocking_listener(self) -> bool {
        matches!(
            self,
            Design::Serv02l
                | Design::Serv02lK
                | Design::Serv02lKone
                | Design::Serv02lKoneR1
                | Design::Serv02lKoneR16
                | Design::Serv02lKoneFair
                | Design::Serv02lKoneKq
        )
    }

    /// Worker slots that serve connections (whose share is measured), and the total
    /// slots including an acceptor's.
    pub(crate) fn slots(self, workers: usize) -> (usize, usize) {
        match self {
            Design::Serv00 | Design::Serv01 | Design::Serv06 => (1, 1),
            Design::Serv05 | Design::Serv08 => (workers, workers + 1),
            _ => (workers, workers),
        }
    }
}

impl fmt::Display for Design {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Design {
    type Err = io::Error;
    fn from_str(s: &str) -> io::Result<Design> {
        Design::ALL
            .iter()
            .copied()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Design::ALL.iter().map(|d| d.name()).collect();
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("unknown design {s:?}; known: {}", names.join(", ")),
                )
            })
    }
}
