/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * evq_core.h - the queue shared by /dev/evq and /dev/poll: registrations
 * watched through each file's own poll() and wait queues, a FIFO ready list,
 * and an optional result ring mapped into the process.
 *
 * The pieces mirror fs/eventpoll.c (Linux 6.1):
 *   struct evq_queue  ~ struct eventpoll   (mtx, lock, wq, rdllist)
 *   struct evq_reg    ~ struct epitem      (one per (queue, fd))
 *   struct evq_pwq    ~ struct eppoll_entry (one per wait queue the file uses)
 *   evq_ptable_queue_proc ~ ep_ptable_queue_proc
 *   evq_poll_callback     ~ ep_poll_callback, with its POLLFREE handling
 * kernel/README.md explains the design, the locking and the ring protocol.
 */
#ifndef EVQ_CORE_H
#define EVQ_CORE_H

#include <linux/types.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/xarray.h>
#include <linux/poll.h>
#include "include/uapi/evq.h"

struct evq_queue;
struct evq_reg;

/* A wait-queue hook on one of the watched file's wait queues (eppoll_entry). */
struct evq_pwq {
	struct evq_pwq *next;
	struct evq_reg *reg;
	wait_queue_entry_t wait;
	/*
	 * The head we are linked on; NULL once a POLLFREE wake-up unlinked us
	 * (written with release by the callback, read with acquire).
	 */
	wait_queue_head_t *whead;
};

/* One registration: a (queue, fd) pair (epitem). */
struct evq_reg {
	/* On q->rdllist, or on a dequeuer's private list: q->lock. */
	struct list_head rdllink;
	/* On q->recheck (ring mode, level registrations posted to the ring): q->lock. */
	struct list_head recheck;
	struct evq_queue *q;
	/* Our own reference: the file outlives every hook we put on it. */
	struct file *file;
	struct evq_pwq *pwqlist; /* q->mtx */
	u64 token;               /* q->lock for writes; read by callbacks */
	__poll_t events;         /* wanted poll bits, EPOLLERR | EPOLLHUP included */
	u32 report;              /* EVQ_* bits an event may carry: interest | HUP | ERR */
	int fd;
	u32 ring_seq;            /* index of our ring slot when in_ring: q->lock */
	u16 dp_events;           /* /dev/poll: events exactly as written */
	u8 mode;                 /* EVQ_MODE_* */
	u8 wake_one;             /* fixed for the life of the hooks */
	u8 disabled;             /* oneshot delivered, not yet re-declared: q->lock */
	u8 in_ring;              /* ring_seq names a slot we posted: q->lock */
};

/* The mapped result ring (see struct evq_ring_header for the protocol). */
struct evq_ring {
	void *mem;                   /* vmalloc_user() area, header first */
	struct evq_ring_header *hdr;
	struct evq_event *ev;
	size_t bytes;
	u32 entries;
	u32 mask;
	u32 tail;                    /* kernel's copy of hdr->tail: q->lock */
};

enum evq_kind { EVQ_KIND_EVQ, EVQ_KIND_DEVPOLL };

struct evq_queue {
	/* Serialises registration changes and dequeues (ep->mtx). */
	struct mutex mtx;
	/* Ready list, ring producer, registration flags read by callbacks (ep->lock). */
	spinlock_t lock;
	/* GET_NEXT_EVENT / DP_POLL sleepers; only touched under q->lock. */
	wait_queue_head_t wq;
	struct list_head rdllist;
	struct list_head recheck;
	/* fd -> struct evq_reg: q->mtx. */
	struct xarray regs;
	unsigned long sweep_cursor;
	/* Set once (under mtx and lock) by EVQ_SETUP_RING, freed at release. */
	struct evq_ring *ring;
	/* Ring mode: a dequeuer holds popped registrations; wake-ups must queue behind them. */
	bool producing;
	u8 kind;
	/* What to do with a registration whose fd was closed or reused. */
	void (*on_stale)(struct evq_queue *q, struct evq_reg *reg);
	struct evq_stats stats; /* counters: q->lock (wake-up ones) or q->mtx */
};

/* How dequeued events are written out. */
enum evq_out_kind { EVQ_OUT_EVENTS, EVQ_OUT_POLLFD, EVQ_OUT_RING };

struct evq_out {
	enum evq_out_kind kind;
	void __user *buf;  /* struct evq_event[] or struct pollfd[] */
	unsigned int max;
};

int evq_core_cache_init(void);
void evq_core_cache_exit(void);
extern unsigned long evq_max_watches;

void evq_queue_init(struct evq_queue *q, enum evq_kind kind,
		    void (*on_stale)(struct evq_queue *, struct evq_reg *));
void evq_queue_release(struct evq_queue *q);

/* q->mtx held. */
struct evq_reg *evq_reg_lookup(struct evq_queue *q, int fd);
int evq_reg_declare(struct evq_queue *q, int fd, struct file *file, __poll_t events,
		    u8 mode, bool wake_one, u64 token, u16 dp_events, __poll_t *state);
void evq_reg_release(struct evq_queue *q, struct evq_reg *reg);
bool evq_reg_stale(const struct evq_reg *reg);
void evq_sweep(struct evq_queue *q, unsigned int n);

/* Takes q->mtx itself. Returns events written (or ring entries available) or -errno. */
long evq_wait_events(struct evq_queue *q, struct evq_out *out, s64 timeout_ns);

int evq_ring_setup(struct evq_queue *q, struct evq_ring_setup *setup);
int evq_ring_mmap(struct evq_queue *q, struct vm_area_struct *vma);

/* Poll bits <-> EVQ_* bits. */
static inline __poll_t evq_interest_to_poll(u32 interest)
{
	__poll_t p = EPOLLERR | EPOLLHUP;

	if (interest & EVQ_READ)
		p |= EPOLLIN | EPOLLRDNORM | EPOLLRDHUP;
	if (interest & EVQ_WRITE)
		p |= EPOLLOUT | EPOLLWRNORM;
	if (interest & EVQ_EXCEPT)
		p |= EPOLLPRI;
	return p;
}

static inline u32 evq_poll_to_state(__poll_t p)
{
	/*
	 * The five low poll bits (IN PRI OUT ERR HUP) by table; the NORM and
	 * RDHUP variants folded in. On the dequeue path of every event.
	 */
	static const u8 low[32] = {
#define EVQ_LOW(b) ((((b) & 1) ? EVQ_READ : 0) | (((b) & 2) ? EVQ_EXCEPT : 0) |   \
		    (((b) & 4) ? EVQ_WRITE : 0) | (((b) & 8) ? EVQ_ERR : 0) |      \
		    (((b) & 16) ? EVQ_HUP : 0))
		EVQ_LOW(0),  EVQ_LOW(1),  EVQ_LOW(2),  EVQ_LOW(3),  EVQ_LOW(4),  EVQ_LOW(5),
		EVQ_LOW(6),  EVQ_LOW(7),  EVQ_LOW(8),  EVQ_LOW(9),  EVQ_LOW(10), EVQ_LOW(11),
		EVQ_LOW(12), EVQ_LOW(13), EVQ_LOW(14), EVQ_LOW(15), EVQ_LOW(16), EVQ_LOW(17),
		EVQ_LOW(18), EVQ_LOW(19), EVQ_LOW(20), EVQ_LOW(21), EVQ_LOW(22), EVQ_LOW(23),
		EVQ_LOW(24), EVQ_LOW(25), EVQ_LOW(26), EVQ_LOW(27), EVQ_LOW(28), EVQ_LOW(29),
		EVQ_LOW(30), EVQ_LOW(31),
#undef EVQ_LOW
	};
	u32 s;

	BUILD_BUG_ON(EPOLLIN != 1 || EPOLLPRI != 2 || EPOLLOUT != 4 || EPOLLERR != 8 ||
		     EPOLLHUP != 16);
	s = low[(__force u32)p & 31];
	if (p & EPOLLRDNORM)
		s |= EVQ_READ;
	if (p & EPOLLWRNORM)
		s |= EVQ_WRITE;
	if (p & EPOLLRDHUP)
		s |= EVQ_HUP;
	return s;
}

/* The interest a registration's poll bits stand for (EVQ_READ/WRITE/EXCEPT). */
static inline u32 evq_reg_interest(const struct evq_reg *reg)
{
	return evq_poll_to_state(reg->events) & EVQ_INTEREST_ALL;
}

bool evq_file_is_ours(const struct file *file);

#endif /* EVQ_CORE_H */
