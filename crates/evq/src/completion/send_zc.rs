//! `send_zc`: `IORING_OP_SEND_ZC` (Linux 6.0; usage reports 6.2, asked for where
//! the kernel takes the flag and dropped the first time it refuses it). The kernel pins
//! the caller's pages instead of copying them into the socket, and says when it is
//! done with them in a second CQE (`IORING_CQE_F_NOTIF`) — which may come long after
//! the send's own CQE (when the peer has acknowledged the data, for TCP). The
//! buffer is handed back, and the single completion delivered, only then (quirk n).

use super::{CompletionRing, Fixed, Op, OpId, OpKind, Target};
use io_uring::{cqueue, opcode, types};

/// `IORING_SEND_ZC_REPORT_USAGE`: the notification says whether the kernel copied.
const REPORT_USAGE: u16 = 1 << 3;
/// `IORING_NOTIF_USAGE_ZC_COPIED`: set in a notification's result when it copied.
const USAGE_COPIED: u32 = 1 << 31;

impl CompletionRing {
    /// Sends all of `data` with zero copy (`IORING_OP_SEND_ZC`, `MSG_NOSIGNAL`),
    /// continuing short sends as [`send`](Self::send) does. One [`OpKind::SendZc`]
    /// completion carries the total and hands `data` back
    /// ([`Completion::take_buffers`](super::Completion::take_buffers)) — but only
    /// once the kernel has notified that it no longer reads the pages, which for TCP
    /// means once the peer acknowledged them, so a send_zc completes later than a
    /// send. Where the kernel copies after all (loopback does), the notification
    /// says so and [`CompletionStats::send_zc_copied`](super::CompletionStats)
    /// counts it. Zero copy pays off only for large buffers: see the module docs.
    pub fn send_zc(&mut self, fd: impl Into<Target>, data: Vec<u8>, token: u64) -> OpId {
        let mut op = Op::new(token, OpKind::SendZc, fd.into());
        op.bufs.push(data);
        let id = self.insert(op);
        self.push_send_zc(id);
        OpId(id)
    }

    /// Handles one CQE of a send_zc — the send's own, or a notification: `None`
    /// while a send or a notification is still due, or the final result.
    pub(super) fn send_zc_cqe(&mut self, id: u64, result: i32, flags: u32) -> Option<i32> {
        if cqueue::notif(flags) {
            if result as u32 & USAGE_COPIED != 0 {
                self.stats.send_zc_copied += 1;
            }
            self.op_mut(id).zc.notifs -= 1;
        } else {
            // A kernel before 6.2 refuses the usage-report flag (with a
            // notification still to come): send again without it; the copies
            // are then not counted.
            let refused = result == -libc::EINVAL && self.zc_report && self.op(id).sent == 0;
            let op = self.op_mut(id);
            op.zc.in_flight = false;
            if cqueue::more(flags) {
                op.zc.notifs += 1;
            }
            if refused {
                self.zc_report = false;
                self.push_send_zc(id);
                return None;
            }
            if result > 0 {
                op.sent += result as usize;
                if op.sent < op.bufs[0].len() && !op.cancelled {
                    self.stats.partial_sends += 1;
                    self.push_send_zc(id);
                    return None;
                }
            }
            let sent = op.sent;
            op.zc.result = if result >= 0 || sent > 0 {
                sent as i32
            } else {
                result
            };
        }
        let zc = &self.op(id).zc;
        (!zc.in_flight && zc.notifs == 0).then_some(zc.result)
    }

    fn push_send_zc(&mut self, id: u64) {
        let report = if self.zc_report { REPORT_USAGE } else { 0 };
        let o = self.op_mut(id);
        o.zc.in_flight = true;
        let rest = &o.bufs[0][o.sent..];
        let (ptr, len) = (rest.as_ptr(), rest.len().min(u32::MAX as usize) as u32);
        let e = on_target!(o.target, |f| opcode::SendZc::new(f, ptr, len)
            .flags(libc::MSG_NOSIGNAL)
            .zc_flags(report)
            .build());
        self.push(e.user_data(id));
    }
}

/// What a send_zc waits for before it may complete and hand its buffer back.
#[derive(Default)]
pub(super) struct ZeroCopy {
    /// A `SEND_ZC` request is in the kernel.
    pub(super) in_flight: bool,
    /// Notifications announced (`IORING_CQE_F_MORE`) and not yet received.
    pub(super) notifs: u32,
    /// The total (or the error) once the last send is done.
    pub(super) result: i32,
}

impl ZeroCopy {
    /// Whether the kernel may still read the op's buffer (for `Drop`).
    pub(super) fn busy(&self) -> bool {
        self.in_flight || self.notifs > 0
    }

    /// Accounts for one CQE seen while the ring is being dropped.
    pub(super) fn drop_cqe(&mut self, flags: u32) {
        if cqueue::notif(flags) {
            self.notifs = self.notifs.saturating_sub(1);
        } else {
            self.in_flight = false;
            if cqueue::more(flags) {
                self.notifs += 1;
            }
        }
    }
}
