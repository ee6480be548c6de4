/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * evq.h - the user-space ABI of evq.ko: /dev/evq (Banga, Mogul and Druschel's
 * declare_interest / get_next_event, with /dev/epoll's mapped result ring) and
 * /dev/poll (Solaris poll(7d)).
 *
 * One header for the module, the C tests and (as mirrored constants) the Rust
 * backend crates/evq/src/sys/kmod.rs. kernel/README.md explains every field.
 * All structures have fixed sizes and explicit padding: the same layout for
 * 32- and 64-bit callers (pointers travel as __u64).
 */
#ifndef _UAPI_EVQ_H
#define _UAPI_EVQ_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/ioctl.h>
#include <linux/poll.h>
#else
#include <linux/types.h>
#include <poll.h>
#include <sys/ioctl.h>
#endif

/* ---------------------------------------------------------------- /dev/evq */

#define EVQ_ABI_VERSION 1

/* Interest and state bits: the paper's own values (EVENT_READ = 0x1, ...). */
#define EVQ_READ   0x01u /* data, a connection or end-of-file can be read */
#define EVQ_WRITE  0x02u /* buffer space is free */
#define EVQ_EXCEPT 0x04u /* exceptional condition (POLLPRI) */
#define EVQ_HUP    0x08u /* state only: the peer hung up (POLLHUP/POLLRDHUP) */
#define EVQ_ERR    0x10u /* state only: an error is pending (POLLERR) */
#define EVQ_INTEREST_ALL (EVQ_READ | EVQ_WRITE | EVQ_EXCEPT)

/* Delivery modes. */
#define EVQ_MODE_LEVEL   0u /* reported on every dequeue while the state answers */
#define EVQ_MODE_EVENT   1u /* reported when something happens, coalesced until dequeued */
#define EVQ_MODE_ONESHOT 2u /* reported once, then disarmed until declared again */

/* evq_interest.flags */
#define EVQ_WAKE_ONE 0x1u /* of several queues on this file, wake one per event, rotating */
#define EVQ_INTEREST_FLAGS_ALL EVQ_WAKE_ONE

/*
 * EVQ_DECLARE_INTEREST: register, modify or (interest == 0) revoke interest in
 * `fd` (a descriptor of the calling process). On success `state` is the file's
 * whole current state (EVQ_* bits, not only the interest), read after the
 * registration is in place, so no change can fall between the two.
 * Returns 0, or 1 when the number's registration named another file (the
 * number was closed and reused without a revoke) and was replaced. A revoke
 * goes by number and works even on a number closed since (the registration is
 * dropped, then EBADF says the state cannot be read).
 * Errors: EBADF (fd not open), EINVAL (unknown bits, mode or flags, reserved
 * not 0, or fd is an evq or /dev/poll file), EPERM (the file cannot be polled:
 * regular files, as epoll), ENOSPC (the module's max_watches reached),
 * ENOMEM, EFAULT.
 */
struct evq_interest {
	__s32 fd;
	__u32 interest; /* EVQ_READ | EVQ_WRITE | EVQ_EXCEPT; 0 revokes */
	__u32 mode;     /* EVQ_MODE_* */
	__u32 flags;    /* EVQ_WAKE_ONE */
	__u64 token;    /* returned in every event of this registration */
	__u32 state;    /* out: current state, EVQ_* bits */
	__u32 reserved; /* must be 0 */
};

/* One event, in the array of EVQ_GET_NEXT_EVENT and in the ring. */
struct evq_event {
	__u64 token;
	__s32 fd;
	__u32 mask; /* EVQ_* bits; in the ring, 0 = consumed or cancelled */
};

/* evq_wait.flags */
#define EVQ_WAIT_RING 0x1u /* fill the mapped ring instead of `events` */
#define EVQ_WAIT_FLAGS_ALL EVQ_WAIT_RING

/* Largest array_max accepted (as epoll's EP_MAX_EVENTS). */
#define EVQ_MAX_EVENTS (0x7fffffff / 16)

/*
 * EVQ_GET_NEXT_EVENT: dequeue up to `array_max` events into `events` (FIFO, one
 * per registration, masks = state at dequeue), returning their number. Returns
 * at once if any is ready; otherwise sleeps until one is or `timeout_ns`
 * passes (< 0: no limit; 0: just look). Errors: EINVAL (array_max 0 or above
 * EVQ_MAX_EVENTS, unknown flags, a ring call on a queue without a ring or an
 * array call on one with a ring), EFAULT (bad `events`; nothing is lost),
 * EINTR (a signal; nothing is lost).
 * With EVQ_WAIT_RING, level registrations posted since the previous call are
 * polled again, the ready list is moved into the ring, and the call returns
 * the number of unconsumed ring entries (sleeping only while the ring is
 * empty); `events` and `array_max` must be 0.
 */
struct evq_wait {
	__u64 events;     /* user pointer to struct evq_event[array_max] */
	__u32 array_max;
	__u32 flags;      /* EVQ_WAIT_* */
	__s64 timeout_ns;
};

/*
 * EVQ_SETUP_RING: give the queue a result ring of `entries` slots (a power of
 * two, 1 .. EVQ_RING_MAX_ENTRIES), to be mapped with
 * mmap(NULL, mmap_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, qfd, 0).
 * From then on wake-ups post events straight into the ring (see the ring
 * protocol below). Errors: EINVAL, EBUSY (the queue has a ring), ENOMEM.
 */
#define EVQ_RING_MAX_ENTRIES (1u << 20)
struct evq_ring_setup {
	__u32 entries;        /* in */
	__u32 flags;          /* in: must be 0 */
	__u64 mmap_bytes;     /* out: the length to map */
	__u32 events_offset;  /* out: byte offset of struct evq_event[entries] */
	__u32 reserved;       /* out: 0 */
};

/*
 * The ring's header, at offset 0 of the mapping. `head` is written only by the
 * process, `tail` only by the kernel; each on its own cache line.
 *
 * Protocol (kernel/README.md, "The ring"): the kernel writes a slot (token,
 * fd, then mask != 0) and publishes it with a release store of `tail`. The
 * process loads `tail` with acquire, and for each slot from `head` takes the
 * mask with an atomic exchange to 0: a 0 means the kernel cancelled it (the
 * registration was revoked or modified) and the slot is skipped. It then
 * stores `head` with release. While a slot is unconsumed the kernel coalesces
 * later wake-ups of its registration into its mask (atomic compare-exchange),
 * so a registration has at most one live slot. When the ring is full, events
 * wait in the queue's ready list and EVQ_GET_NEXT_EVENT(EVQ_WAIT_RING) moves
 * them in: nothing is lost.
 */
struct evq_ring_header {
	__u32 head;          /* consumer index (process) */
	__u32 pad0[15];
	__u32 tail;          /* producer index (kernel) */
	__u32 pad1[15];
	__u32 entries;       /* slots, a power of two */
	__u32 abi_version;   /* EVQ_ABI_VERSION */
	__u64 posted;        /* statistics: entries posted by wake-ups */
	__u64 produced;      /* statistics: entries posted by EVQ_GET_NEXT_EVENT */
	__u64 coalesced;     /* statistics: wake-ups merged into a live slot */
	__u64 overflowed;    /* statistics: wake-ups sent to the ready list, ring full */
	__u32 backlog;       /* non-zero: events wait in the ready list (ring full, or a
	                      * mask the kernel must poll): call EVQ_GET_NEXT_EVENT
	                      * with EVQ_WAIT_RING before taking, to keep them in order */
	__u32 reserved;
};

/* EVQ_STATS: counters of the queue, for tests. */
struct evq_stats {
	__u64 registered;    /* live registrations */
	__u64 stale_dropped; /* registrations dropped because their fd was closed or reused */
	__u64 wakeups;       /* wake-up callbacks that queued an event */
	__u64 rotations;     /* wake-one wake-ups that took the event and rotated */
	__u64 pollfree;      /* POLLFREE wake-ups seen */
	__u64 reserved[3];
};

#define EVQ_IOC_MAGIC 0xE7
#define EVQ_DECLARE_INTEREST _IOWR(EVQ_IOC_MAGIC, 1, struct evq_interest)
#define EVQ_GET_NEXT_EVENT   _IOW(EVQ_IOC_MAGIC, 2, struct evq_wait)
#define EVQ_SETUP_RING       _IOWR(EVQ_IOC_MAGIC, 3, struct evq_ring_setup)
#define EVQ_STATS            _IOR(EVQ_IOC_MAGIC, 4, struct evq_stats)

/* ---------------------------------------------------------------- /dev/poll */

/*
 * Solaris poll(7d) on Linux. write(2) an array of struct pollfd: an fd already
 * in the set gets the new events ORed in; POLLREMOVE removes it; a negative fd
 * is ignored; an fd that is not open is accepted and reported POLLNVAL; a file
 * that cannot be polled (a regular file) is always ready, as poll(2) says.
 * ioctl(DP_POLL, struct dvpoll *) waits like poll(2) (dp_timeout in ms, -1 =
 * forever) and returns a dense array of at most dp_nfds ready entries
 * (events as registered, revents as poll(2) would set them).
 * ioctl(DP_ISPOLLED, struct pollfd *) returns 1 and sets events (revents 0) if
 * pfd->fd is in the set, else 0.
 * Solaris's numbers: DP_POLL = 0xD001, DP_ISPOLLED = 0xD002. POLLREMOVE is
 * Linux's reserved 0x1000 (Solaris uses 0x0800).
 */
#ifndef POLLREMOVE
#define POLLREMOVE 0x1000
#endif

struct dvpoll {
	struct pollfd *dp_fds; /* out array */
	unsigned long dp_nfds; /* its length (nfds_t) */
	int dp_timeout;        /* ms; -1 = no limit */
};

#define DPIOC       (0xD0 << 8)
#define DP_POLL     (DPIOC | 1)
#define DP_ISPOLLED (DPIOC | 2)

/* Largest dp_nfds accepted. */
#define DP_MAX_NFDS (0x7fffffff / 8)

#endif /* _UAPI_EVQ_H */
