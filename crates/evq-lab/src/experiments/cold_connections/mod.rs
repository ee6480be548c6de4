//! Experiment 3, cold connections (SEEDS 000 Figure 8, 9 and Table 2; SEEDS 002's
//! dead connections), in three parts measured one after the other:
//!
//! - [`throughput`]: `evq serve` per backend, replies/s as idle connections pile
//!   up (Figure 8);
//! - [`detail`]: latency against offered rate and event notification's share of
//!   CPU at a fixed cold load (Figure 9, Table 2);
//! - [`peers`]: `evq serve` beside nginx, h2o and lighttpd (the HTTP server
//!   issue's figures).
//!
//! A part that fails leaves its claims not measured; the others still count.

mod detail;
mod detail_judge;
mod peers;
mod peers_judge;
mod peers_report;
mod throughput;
mod throughput_judge;

use crate::experiment::{Ctx, Experiment, Judged, Outcome, RunSize};
use serde::{Deserialize, Serialize};
use std::io;

/// The scenario.
pub struct ColdConnections;

/// The three parts' plans.
pub struct Plan {
    throughput: throughput::Plan,
    detail: detail::Plan,
    peers: peers::Plan,
}

/// What the three parts measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// Figure 8.
    pub throughput: Outcome<throughput::Records>,
    /// Figure 9 and Table 2.
    pub detail: Outcome<detail::Records>,
    /// The peer servers.
    pub peers: Outcome<peers::Records>,
}

fn strings(claims: &[&str]) -> Vec<String> {
    claims.iter().map(|c| c.to_string()).collect()
}

fn throughput_claims() -> Vec<String> {
    strings(&[throughput_judge::FLAT, throughput_judge::RT_FLAT])
}

fn detail_claims() -> Vec<String> {
    strings(&[
        detail_judge::TABLE2,
        detail_judge::LATENCY,
        detail_judge::SATURATION,
    ])
}

fn peer_claims() -> Vec<String> {
    strings(&[
        peers_judge::THROUGHPUT,
        peers_judge::P99,
        peers_judge::DROP,
        peers_judge::MEMORY,
        peers_judge::COMPLETION,
        peers_judge::COMPLETION_COLD,
    ])
}

impl Experiment for ColdConnections {
    type Plan = Plan;
    type Records = Records;

    const NAME: &'static str = "cold-connections";
    const SEED: &'static str =
        "000 Banga, Mogul, Druschel (USENIX 1999): Figures 8 and 9, Table 2; 002 dead connections";
    fn claims(&self) -> Vec<String> {
        let mut all = throughput_claims();
        all.extend(detail_claims());
        all.extend(peer_claims());
        all
    }

    fn plan(&self, size: RunSize) -> Plan {
        Plan {
            throughput: throughput::plan(size),
            detail: detail::plan(size),
            peers: peers::plan(size),
        }
    }

    fn measure(&self, plan: Plan, ctx: &Ctx) -> io::Result<Records> {
        Ok(Records {
            throughput: Outcome::of(throughput::measure(plan.throughput, ctx)),
            detail: Outcome::of(detail::measure(plan.detail, ctx)),
            peers: Outcome::of(peers::measure(plan.peers, ctx)),
        })
    }

    fn judge(&self, r: &Records) -> Judged {
        let mut judged = r.throughput.judge(
            &throughput_claims(),
            "the cold-connection sweep failed",
            throughput_judge::judge,
        );
        judged.extend(r.detail.judge(
            &detail_claims(),
            "the fixed-cold-load sweep failed",
            detail_judge::judge,
        ));
        judged.extend(
            r.peers
                .judge(&peer_claims(), "the peer comparison failed", |p| {
                    let v = peers_judge::View::new(p);
                    Judged {
                        checks: vec![
                            peers_judge::throughput(&v),
                            peers_judge::p99_latency(&v),
                            peers_judge::drop(&v),
                            peers_judge::memory(&v),
                            peers_judge::completion(&v),
                            peers_judge::completion_cold(&v),
                        ],
                        notes: peers_report::notes(&v),
                        commands: peers_report::commands(&v),
                        figures: peers_report::figures(&v),
                    }
                }),
        );
        judged
    }
}

#[cfg(test)]
mod tests;
