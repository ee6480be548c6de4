//! The peer comparison's verdicts: pure functions of the records.

use super::peers::{Point, Records, EVQ_COMPLETION};
use crate::stats::{spread, Spread};
use crate::verdict::ClaimCheck;

pub(super) const THROUGHPUT: &str = "evq serve answers ≥ 1.2× nginx's and ≥ 1.0× h2o's requests/s (same files, same client, one worker each; HTTP server issue)";
pub(super) const P99: &str =
    "evq serve's p99 latency is at most nginx's and h2o's (HTTP server issue)";
pub(super) const DROP: &str = "with 10,000 idle connections held open, evq serve's throughput drops ≤ 2% (nginx's drop stated beside it; HTTP server issue)";
pub(super) const MEMORY: &str = "user-space memory per idle connection is ≤ 256 B for evq serve (nginx ~470 B; HTTP server issue)";
pub(super) const COMPLETION: &str = "evq serve on io_uring completions answers ≥ 1.15× evq serve on epoll and ≥ 1.3× h2o's requests/s (keep-alive, one thread each; issue 17)";
pub(super) const COMPLETION_COLD: &str = "evq serve on io_uring completions is flat under cold connections: ≤ 2% fewer replies/s and ≤ 256 B of user memory per idle connection (a multishot recv holds no buffer; issue 17)";

/// The records with the questions every check and note asks of them.
pub(super) struct View<'a> {
    pub(super) r: &'a Records,
    /// The servers, evq first.
    pub(super) names: Vec<&'a str>,
    /// The headline file size (the largest).
    pub(super) big: usize,
    /// The baseline cold count (the smallest).
    pub(super) lo: usize,
    /// The largest cold count.
    pub(super) hi: usize,
}

impl<'a> View<'a> {
    pub(super) fn new(r: &'a Records) -> View<'a> {
        View {
            names: r.servers.iter().map(String::as_str).collect(),
            big: *r.plan.sizes.last().unwrap_or(&1024),
            lo: r.plan.colds[0],
            hi: *r.plan.colds.last().unwrap_or(&0),
            r,
        }
    }

    /// The measured (not skipped) points of one server, cold count and size.
    pub(super) fn summary(
        &self,
        server: &'a str,
        cold: usize,
        size: usize,
    ) -> impl Iterator<Item = &'a Point> + 'a {
        self.r
            .points
            .iter()
            .filter(move |p| p.server == server && p.cold == cold && p.reply_size == size)
            .filter(|p| p.skipped.is_none())
    }

    /// The spread of one measure over those points.
    pub(super) fn spread_of(
        &self,
        server: &'a str,
        cold: usize,
        size: usize,
        f: fn(&Point) -> f64,
    ) -> Option<Spread> {
        spread(self.summary(server, cold, size).map(f).collect())
    }

    /// Its median.
    pub(super) fn med(
        &self,
        server: &'a str,
        cold: usize,
        size: usize,
        f: fn(&Point) -> f64,
    ) -> Option<f64> {
        self.spread_of(server, cold, size, f).map(|s| s.median)
    }

    /// `one`'s median replies/s over `other`'s, at no cold connections.
    pub(super) fn ratio_of(&self, one: &'a str, other: &'a str, size: usize) -> Option<f64> {
        self.med(one, self.lo, size, rps)
            .zip(self.med(other, self.lo, size, rps))
            .map(|(e, o)| e / o)
    }

    /// "128 B 1.20×, 1024 B 1.31×" against `other`.
    pub(super) fn ratios_text(&self, other: &'a str) -> String {
        self.ratios_of("evq", other)
    }

    /// The same for `one` against `other`.
    pub(super) fn ratios_of(&self, one: &'a str, other: &'a str) -> String {
        self.r
            .plan
            .sizes
            .iter()
            .map(|&s| {
                self.ratio_of(one, other, s)
                    .map_or(format!("{s} B -"), |r| format!("{s} B {r:.2}×"))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether `one`'s ratio over `other` is at least `min` at every size
    /// (`None` if a size lacks either).
    fn all_at_least(&self, one: &'a str, other: &'a str, min: f64) -> Option<bool> {
        let r: Option<Vec<f64>> = self
            .r
            .plan
            .sizes
            .iter()
            .map(|&s| self.ratio_of(one, other, s))
            .collect();
        r.map(|r| r.iter().all(|&x| x >= min))
    }

    /// A server's drop in replies/s from no cold connections to the largest cold
    /// count it was measured at, and that count: one minus the median of the
    /// repeats' own ratios (a repeat measures a server's cold counts back to
    /// back, so each ratio compares one moment of the machine), or, in
    /// records without such pairs, of the ratio of the medians.
    pub(super) fn drop_of(&self, n: &'a str) -> Option<(f64, usize)> {
        let (lo, big) = (self.lo, self.big);
        let c = self
            .r
            .plan
            .colds
            .iter()
            .rev()
            .copied()
            .find(|&c| c > lo && self.med(n, c, big, rps).is_some())?;
        if let Some(pairs) = self.pair_ratios(n, c) {
            return Some((1.0 - pairs.median, c));
        }
        let at = self.med(n, c, big, rps)?;
        let base = self.med(n, lo, big, rps)?;
        Some((1.0 - at / base, c))
    }

    /// The spread of a server's replies/s at `cold` over those at no cold
    /// connections, repeat by repeat (the headline size).
    pub(super) fn pair_ratios(&self, n: &'a str, cold: usize) -> Option<Spread> {
        let base = |repeat: usize| {
            self.summary(n, self.lo, self.big)
                .find(|b| b.repeat == repeat)
                .map(rps)
        };
        spread(
            self.summary(n, cold, self.big)
                .filter_map(|p| Some(rps(p) / base(p.repeat)?))
                .collect(),
        )
    }

    /// " (repeat pairs a–b)" for a server's cold ratio, or nothing with fewer
    /// than two pairs.
    pub(super) fn pairs_text(&self, n: &'a str, cold: usize) -> String {
        match self.pair_ratios(n, cold) {
            Some(s) if s.n > 1 => format!(
                " (median of {} repeat pairs, {:+.1}% to {:+.1}%)",
                s.n,
                // + 0.0: a ratio of exactly 1 prints +0.0, not -0.0.
                100.0 * (s.min - 1.0) + 0.0,
                100.0 * (s.max - 1.0) + 0.0
            ),
            _ => String::new(),
        }
    }

    /// A server's median bytes of anonymous memory per idle connection at the
    /// largest cold count.
    pub(super) fn bytes_per_conn(&self, n: &str, cold: usize) -> Option<f64> {
        spread(
            self.r
                .points
                .iter()
                .filter(|p| p.server == n && p.cold == cold && p.skipped.is_none())
                .filter_map(|p| p.bytes_per_idle_conn)
                .collect(),
        )
        .map(|s| s.median)
    }
}

pub(super) fn rps(p: &Point) -> f64 {
    p.replies_per_s
}

fn p99(p: &Point) -> f64 {
    p.p99_ms
}

/// 1. Throughput ratios at no cold connections, every size.
pub(super) fn throughput(v: &View) -> ClaimCheck {
    let all_at_least = |other, min| v.all_at_least("evq", other, min);
    let rate_text = v
        .names
        .iter()
        .map(|n| match v.spread_of(n, v.lo, v.big, rps) {
            Some(s) => format!("{n} {:.0} ({:.0}–{:.0})", s.median, s.min, s.max),
            None => format!("{n} -"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    ClaimCheck::judged(
        THROUGHPUT,
        format!(
            "replies/s at {} cold, {} B, median (min–max) of {}: {rate_text}. evq/nginx: {}; evq/h2o: {}; evq/lighttpd (no target): {}",
            v.lo,
            v.big,
            v.r.plan.repeats,
            v.ratios_text("nginx"),
            v.ratios_text("h2o"),
            v.ratios_text("lighttpd")
        ),
        all_at_least("nginx", 1.2).zip(all_at_least("h2o", 1.0)).map(|(a, b)| a && b),
        "holds if, at every reply size measured, evq's median replies/s is at least 1.2× nginx's and at least 1.0× h2o's; not measured if nginx or h2o is missing",
    )
}

/// 2. p99 at no cold connections.
pub(super) fn p99_latency(v: &View) -> ClaimCheck {
    let sizes = &v.r.plan.sizes;
    let p99_text = v
        .names
        .iter()
        .map(|n| {
            let per: Vec<String> = sizes
                .iter()
                .map(|&s| {
                    v.med(n, v.lo, s, p99)
                        .map_or("-".into(), |x| format!("{x:.2}"))
                })
                .collect();
            format!("{n} {}", per.join("/"))
        })
        .collect::<Vec<_>>()
        .join(", ");
    let holds: Option<bool> = sizes
        .iter()
        .map(|&s| {
            let e = v.med("evq", v.lo, s, p99)?;
            let n = v.med("nginx", v.lo, s, p99)?;
            let h = v.med("h2o", v.lo, s, p99)?;
            Some(e <= n && e <= h)
        })
        .collect::<Option<Vec<bool>>>()
        .map(|all| all.iter().all(|&b| b));
    ClaimCheck::judged(
        P99,
        format!(
            "median p99 ms at {} cold ({} B): {p99_text}",
            v.lo,
            sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("/")
        ),
        holds,
        "holds if, at every reply size, evq's median p99 is no larger than nginx's and h2o's; not measured if either is missing",
    )
}

/// 3. The drop at the largest cold count.
pub(super) fn drop(v: &View) -> ClaimCheck {
    let (lo, hi, big) = (v.lo, v.hi, v.big);
    let drops_text = v
        .names
        .iter()
        .map(|n| match v.drop_of(n) {
            Some((d, c)) if c == hi => {
                format!("{n} {:+.1}%{}", -100.0 * d + 0.0, v.pairs_text(n, c))
            }
            Some((d, c)) => format!("{n} {:+.1}% (at {c}; {hi} not held)", -100.0 * d),
            None => format!("{n} -"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let evq_drop = v.drop_of("evq").filter(|&(_, c)| c == hi && hi > lo);
    let evq_spread = |c: usize| {
        v.spread_of("evq", c, big, rps).map_or("-".into(), |s| {
            format!("{:.0} ({:.0}–{:.0})", s.median, s.min, s.max)
        })
    };
    ClaimCheck::judged(
        DROP,
        format!(
            "change in replies/s ({big} B) from {lo} to {hi} cold connections: {drops_text}; evq's replies/s median (min–max): {} at {lo}, {} at {hi}",
            evq_spread(lo),
            evq_spread(hi)
        ),
        evq_drop.map(|(d, _)| d <= 0.02),
        &format!(
            "holds if evq's replies/s at {hi} cold connections is at least 98% of that at {lo} (the median of the repeats' own ratios: a repeat measures a server's cold counts back to back); this run's largest cold count is {hi} (the issue's figure is at 10,000; the quick and smoke runs use fewer)"
        ),
    )
}

/// 4. Bytes per idle connection at the largest cold count.
pub(super) fn memory(v: &View) -> ClaimCheck {
    let hi = v.hi;
    let bpc_text = v
        .names
        .iter()
        .map(|n| {
            v.bytes_per_conn(n, hi)
                .map_or(format!("{n} -"), |b| format!("{n} {b:.0} B"))
        })
        .collect::<Vec<_>>()
        .join(", ");
    let base_text = v
        .names
        .iter()
        .map(|n| {
            let b = spread(
                v.r.points
                    .iter()
                    .filter(|p| p.server == *n && p.skipped.is_none() && p.rss_anon_before > 0)
                    .map(|p| p.rss_anon_before as f64)
                    .collect(),
            );
            b.map_or(format!("{n} -"), |b| {
                format!("{n} {:.1} MiB", b.median / 1048576.0)
            })
        })
        .collect::<Vec<_>>()
        .join(", ");
    let evq_by_count =
        v.r.plan
            .colds
            .iter()
            .filter(|&&c| c > 0)
            .filter_map(|&c| v.bytes_per_conn("evq", c).map(|b| format!("{c}: {b:.0} B")))
            .collect::<Vec<_>>()
            .join(", ");
    let bpc_text = format!(
        "{bpc_text} (anonymous RSS before the cold connections, median: {base_text}; nginx's sums master and worker and includes the connection slots it preallocates for worker_connections); evq at each cold count: {evq_by_count}"
    );
    let enough = hi >= 1000;
    ClaimCheck::judged(
        MEMORY,
        if enough {
            format!("(anonymous RSS with {hi} cold connections held − before) / connections held, median over points: {bpc_text}")
        } else {
            format!("only {hi} cold connections in this run: too few for page-granular RSS ({bpc_text})")
        },
        if enough {
            v.bytes_per_conn("evq", hi).map(|b| b <= 256.0)
        } else {
            None
        },
        "holds if evq's median growth of anonymous resident memory (heap and stacks, not the binary's pages, which the kernel may drop and fault back) per held idle connection is at most 256 B (anonymous memory counted page by page from /proc/PID/smaps_rollup); needs at least 1,000 connections so that 4 KiB pages do not dominate; every server, evq included, is a fresh process at every point",
    )
}

/// 5. The completion server against the readiness one and h2o.
pub(super) fn completion(v: &View) -> ClaimCheck {
    let c = EVQ_COMPLETION;
    let spread_text = |n: &str| {
        v.spread_of(n, v.lo, v.big, rps)
            .map_or(format!("{n} -"), |s| {
                format!("{n} {:.0} ({:.0}–{:.0})", s.median, s.min, s.max)
            })
    };
    ClaimCheck::judged(
        COMPLETION,
        format!(
            "replies/s at {} cold, {} B, median (min–max) of {}: {}, {}, {}. completion/epoll: {}; completion/h2o: {}; completion/nginx: {}",
            v.lo,
            v.big,
            v.r.plan.repeats,
            spread_text(c),
            spread_text("evq"),
            spread_text("h2o"),
            v.ratios_of(c, "evq"),
            v.ratios_of(c, "h2o"),
            v.ratios_of(c, "nginx"),
        ),
        v.all_at_least(c, "evq", 1.15)
            .zip(v.all_at_least(c, "h2o", 1.3))
            .map(|(a, b)| a && b),
        &format!(
            "holds if, at every reply size, evq-completion's median replies/s is at least 1.15× evq serve's on {} and at least 1.3× h2o's; not measured if the kernel has no completions or h2o is missing",
            v.r.backend
        ),
    )
}

/// 6. The completion server under the largest cold count.
pub(super) fn completion_cold(v: &View) -> ClaimCheck {
    let (c, hi) = (EVQ_COMPLETION, v.hi);
    let drop = v.drop_of(c).filter(|&(_, at)| at == hi && hi > v.lo);
    let bytes = v.bytes_per_conn(c, hi).filter(|_| hi >= 1000);
    let epoll = v.drop_of("evq").filter(|&(_, at)| at == hi);
    ClaimCheck::judged(
        COMPLETION_COLD,
        format!(
            "{c}: replies/s {} from {} to {hi} cold connections ({} B), {} of anonymous memory per idle connection; evq on {}: {}, {}",
            drop.map_or("-".into(), |(d, at)| format!("{:+.1}%{}", -100.0 * d, v.pairs_text(c, at))),
            v.lo,
            v.big,
            v.bytes_per_conn(c, hi).map_or("-".into(), |b| format!("{b:.0} B")),
            v.r.backend,
            epoll.map_or("-".into(), |(d, _)| format!("{:+.1}%", -100.0 * d)),
            v.bytes_per_conn("evq", hi).map_or("-".into(), |b| format!("{b:.0} B")),
        ),
        drop.zip(bytes).map(|((d, _), b)| d <= 0.02 && b <= 256.0),
        &format!(
            "holds if evq-completion's replies/s at {hi} cold connections is at least 98% of that at {} (the median of the repeats' own ratios) and its anonymous memory grows at most 256 B per held idle connection; needs at least 1,000 cold connections (this run's largest: {hi}; the issue's figure is at 10,000)",
            v.lo
        ),
    )
}
