// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * evq_core.c - registrations, wake-up hooks, the ready list and its dequeue.
 *
 * The mechanism is fs/eventpoll.c's (Linux 6.1), reduced to what the paper's
 * API needs and extended where the paper asks for more:
 *
 *  - A registration hooks every wait queue the file's poll() names, through a
 *    poll table whose queue proc is evq_ptable_queue_proc (ep_ptable_queue_proc).
 *    Wake-ups run evq_poll_callback (ep_poll_callback) under the waker's
 *    wait-queue lock, so it takes only the queue's spinlock and never sleeps.
 *  - POLLFREE (a wait queue that dies before the file: signalfd, binder) is
 *    handled as epoll does: the callback unlinks itself and publishes a NULL
 *    head with release; removal reads the head with acquire under RCU.
 *  - The queue holds a reference to each registered file (as io_uring's
 *    requests do), because a module has no hook in __fput; a closed or reused
 *    descriptor number is detected by comparing the caller's fd table with the
 *    file at dequeue, at declare and by an incremental sweep (README.md).
 *  - Wake-one: the hook is an exclusive wait entry (EPOLLEXCLUSIVE); when it
 *    takes an event it moves itself to the tail of the file's wait queue, so
 *    the next event goes to the next queue (DragonFly's EV_WAKEONE "mkII").
 *  - The ready list is FIFO; level registrations go back to its tail after
 *    delivery (no starvation with any batch size); event registrations are
 *    re-polled at dequeue and suppressed when no longer ready.
 *  - An optional ring mapped into the process receives events straight from
 *    wake-ups (SEEDS 002's /dev/epoll result area), falling back to the ready
 *    list when full.
 */

#include <linux/file.h>
#include <linux/fdtable.h>
#include <linux/fs.h>
#include <linux/hrtimer.h>
#include <linux/mm.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include "evq_core.h"

/* Registrations taken off the ready list per lock hold. */
#define EVQ_CHUNK 16
/* Registrations checked for a closed descriptor per declare, and per sleep. */
#define EVQ_SWEEP_DECLARE 2
#define EVQ_SWEEP_IDLE 8

static struct kmem_cache *evq_reg_cache __read_mostly;
static struct kmem_cache *evq_pwq_cache __read_mostly;
static atomic_long_t evq_watches = ATOMIC_LONG_INIT(0);
unsigned long evq_max_watches = 1UL << 20;

int evq_core_cache_init(void)
{
	evq_reg_cache = KMEM_CACHE(evq_reg, SLAB_HWCACHE_ALIGN | SLAB_ACCOUNT);
	if (!evq_reg_cache)
		return -ENOMEM;
	evq_pwq_cache = KMEM_CACHE(evq_pwq, SLAB_ACCOUNT);
	if (!evq_pwq_cache) {
		kmem_cache_destroy(evq_reg_cache);
		return -ENOMEM;
	}
	return 0;
}

void evq_core_cache_exit(void)
{
	/* A leaked registration makes these complain loudly (the VM test looks). */
	kmem_cache_destroy(evq_pwq_cache);
	kmem_cache_destroy(evq_reg_cache);
}

/* ------------------------------------------------------------ the ring */

/*
 * The slot @reg posted, while the consumer has not passed it (head <= slot <
 * tail); NULL otherwise. Past head the slot was taken (or skipped by a
 * confused process): either way it is no longer @reg's. q->lock held.
 */
static struct evq_event *evq_ring_live_slot_locked(struct evq_ring *ring, struct evq_reg *reg,
						   u32 head)
{
	if (!reg->in_ring)
		return NULL;
	if ((u32)(ring->tail - reg->ring_seq) > (u32)(ring->tail - head)) {
		reg->in_ring = 0;
		return NULL;
	}
	return &ring->ev[reg->ring_seq & ring->mask];
}

/*
 * Posts @mask for @reg into the ring: merged into the registration's live slot
 * if it has one (returns 0), else a new slot (returns 1), or -1 if the ring is
 * full. q->lock held.
 */
static int evq_ring_post_locked(struct evq_queue *q, struct evq_reg *reg, u32 mask, bool polled)
{
	struct evq_ring *ring = q->ring;
	struct evq_event *slot;
	u32 head, used;

	/*
	 * Acquire pairs with the consumer's release store of head, made after
	 * it finished with the slots it passed: we may reuse them now.
	 * head is written by the process; a value that makes no sense (more
	 * used than there are slots) reads as "full", so a confused process
	 * only delays its own events (they wait in the ready list), never
	 * corrupts anything.
	 */
	head = smp_load_acquire(&ring->hdr->head);
	used = ring->tail - head;
	if (used > ring->entries) {
		ring->hdr->overflowed++;
		return -1;
	}
	slot = evq_ring_live_slot_locked(ring, reg, head);
	if (slot) {
		u32 old = READ_ONCE(slot->mask);

		/*
		 * The consumer takes a slot with xchg(mask, 0). Either our
		 * cmpxchg lands first and the consumer gets the merged bits, or
		 * it sees 0 and we post a new slot: no wake-up is lost. A mask
		 * the kernel just polled is the whole state: it replaces.
		 */
		while (old) {
			u32 seen = cmpxchg(&slot->mask, old, polled ? mask : old | mask);

			if (seen == old) {
				ring->hdr->coalesced++;
				return 0;
			}
			old = seen;
		}
		reg->in_ring = 0;
	}
	if (used == ring->entries) {
		ring->hdr->overflowed++;
		return -1;
	}
	slot = &ring->ev[ring->tail & ring->mask];
	WRITE_ONCE(slot->token, reg->token);
	WRITE_ONCE(slot->fd, reg->fd);
	WRITE_ONCE(slot->mask, mask);
	reg->ring_seq = ring->tail;
	reg->in_ring = 1;
	ring->tail++;
	/* Publishes the slot: pairs with the consumer's acquire load of tail. */
	smp_store_release(&ring->hdr->tail, ring->tail);
	return 1;
}

/*
 * Merges @mask into @reg's live slot, if it has one; never posts a new slot.
 * For a oneshot that fired into the ring and was not taken yet: a later
 * wake-up coalesces into its slot as into any live slot (the one report then
 * says what happened up to the take, as event mode's does), and a oneshot
 * still posts at most one slot per arming. q->lock held.
 */
static void evq_ring_merge_locked(struct evq_queue *q, struct evq_reg *reg, u32 mask)
{
	struct evq_ring *ring = q->ring;
	struct evq_event *slot;
	u32 head, old;

	if (!ring || !reg->in_ring || !mask)
		return;
	/* Acquire as in evq_ring_post_locked; a nonsensical head merges nothing. */
	head = smp_load_acquire(&ring->hdr->head);
	if (ring->tail - head > ring->entries)
		return;
	slot = evq_ring_live_slot_locked(ring, reg, head);
	if (!slot)
		return;
	old = READ_ONCE(slot->mask);
	while (old) {
		u32 seen = cmpxchg(&slot->mask, old, old | mask);

		if (seen == old) {
			ring->hdr->coalesced++;
			return;
		}
		old = seen;
	}
	/* Taken meanwhile: that was the arming's one report. */
	reg->in_ring = 0;
}

/* Withdraws @reg's live slot (revoke, modify, release). q->lock held. */
static void evq_ring_cancel_locked(struct evq_queue *q, struct evq_reg *reg)
{
	struct evq_event *slot;

	if (!q->ring || !reg->in_ring)
		return;
	slot = evq_ring_live_slot_locked(q->ring, reg, smp_load_acquire(&q->ring->hdr->head));
	if (slot)
		xchg(&slot->mask, 0);
	reg->in_ring = 0;
}

static u32 evq_ring_used(struct evq_ring *ring)
{
	u32 used = ring->tail - smp_load_acquire(&ring->hdr->head);

	return used > ring->entries ? ring->entries : used;
}

/* Tells the process whether events wait in the ready list. q->lock held. */
static void evq_note_backlog_locked(struct evq_queue *q)
{
	if (q->ring)
		WRITE_ONCE(q->ring->hdr->backlog, !list_empty(&q->rdllist));
}

/* ------------------------------------------------------- queueing */

/* Wakes one GET_NEXT_EVENT sleeper. q->lock held (all q->wq changes are). */
static void evq_wake_locked(struct evq_queue *q, bool sync)
{
	if (waitqueue_active(&q->wq)) {
		if (sync)
			wake_up_sync(&q->wq);
		else
			wake_up(&q->wq);
	}
}

/* What delivering through the ring implies for the registration. q->lock held. */
static void evq_after_post_locked(struct evq_queue *q, struct evq_reg *reg)
{
	if (reg->mode == EVQ_MODE_ONESHOT)
		reg->disabled = 1;
	else if (reg->mode == EVQ_MODE_LEVEL && list_empty(&reg->recheck))
		/* Re-polled at the next GET_NEXT_EVENT that finds the ring drained. */
		list_add_tail(&reg->recheck, &q->recheck);
}

/*
 * Makes @reg pending after a wake-up with key @pollflags (0: the waker gave
 * none), or, with @known, after a poll whose result @pollflags is the whole
 * current state. Returns true if that made a new pending event, false if an
 * event already pending absorbed it (coalescing). q->lock held.
 */
static bool evq_enqueue_locked(struct evq_queue *q, struct evq_reg *reg,
			       __poll_t pollflags, bool known, bool sync)
{
	/*
	 * Ring fast path. Only when nothing waits in the ready list (FIFO), the
	 * wake-up's key speaks for every interest bit (a key of EPOLLIN says
	 * nothing about EPOLLOUT, so a READ|WRITE registration goes through the
	 * ready list, where dequeue polls its whole state), and someone besides
	 * us still holds the file: when our reference is the last, every
	 * descriptor for it was closed, and the dequeue path, which checks the
	 * fd table, drops the registration instead of posting for a dead number.
	 */
	if (q->ring && pollflags && list_empty(&q->rdllist) && !q->producing &&
	    file_count(reg->file) > 1) {
		u32 interest = evq_reg_interest(reg);
		u32 state = evq_poll_to_state(pollflags & reg->events);

		if (known || (state & interest) == interest) {
			int posted = evq_ring_post_locked(q, reg, state & reg->report, known);

			if (posted >= 0) {
				evq_after_post_locked(q, reg);
				if (posted) {
					q->ring->hdr->posted++;
					evq_wake_locked(q, sync);
				}
				return posted;
			}
			/* Full: the ready list keeps it until the ring drains. */
		}
	}
	if (!list_empty(&reg->rdllink))
		return false;
	list_add_tail(&reg->rdllink, &q->rdllist);
	evq_note_backlog_locked(q);
	evq_wake_locked(q, sync);
	return true;
}

/* ----------------------------------------------- wait-queue hooks */

/*
 * The wake-up callback (ep_poll_callback). Runs under the waker's wait-queue
 * lock, possibly in IRQ context: only q->lock, never sleeps.
 * Returns 1 when a wake-one hook took the event (so the wake-up stops here).
 */
static int evq_poll_callback(wait_queue_entry_t *wait, unsigned int mode, int sync, void *key)
{
	struct evq_pwq *pwq = container_of(wait, struct evq_pwq, wait);
	struct evq_reg *reg = pwq->reg;
	struct evq_queue *q = reg->q;
	__poll_t pollflags = key_to_poll(key);
	unsigned long flags;
	bool took = false;

	spin_lock_irqsave(&q->lock, flags);
	/* A key that does not answer the interest. */
	if (pollflags && !(pollflags & reg->events))
		goto out_unlock;
	/*
	 * A disarmed oneshot: nothing new, but if it fired into the ring and its
	 * slot is not taken yet, the key's bits join that slot (README, "The
	 * ring": a later wake-up merges into a live slot). Without this its one
	 * report lacked what arrived between the post and the take.
	 */
	if (reg->disabled) {
		if (pollflags & ~POLLFREE)
			evq_ring_merge_locked(q, reg,
					      evq_poll_to_state(pollflags & reg->events) & reg->report);
		goto out_unlock;
	}
	took = evq_enqueue_locked(q, reg, pollflags & ~POLLFREE, false, sync);
	if (took)
		q->stats.wakeups++;
	if (took && reg->wake_one && !(pollflags & POLLFREE))
		q->stats.rotations++;
	if (pollflags & POLLFREE)
		q->stats.pollfree++;
out_unlock:
	spin_unlock_irqrestore(&q->lock, flags);

	if (pollflags & POLLFREE) {
		/*
		 * The wait queue head is going away (__wake_up_pollfree). As in
		 * ep_poll_callback: unlink ourselves (not __remove_wait_queue: a
		 * racing evq_remove_wait_queue may still call remove_wait_queue
		 * after us), then publish NULL with release. After that store
		 * nothing protects reg, q or even wait: touch none of them.
		 */
		list_del_init(&wait->entry);
		smp_store_release(&pwq->whead, NULL);
		return 0;
	}
	if (!reg->wake_one)
		return 1;
	if (took) {
		/*
		 * Wake-one with rotation (DragonFly "mkII"): we hold the waker's
		 * wait-queue lock, and returning 1 ends this exclusive wake-up,
		 * so moving ourselves to the tail is safe; the next event goes
		 * to the next exclusive waiter. A hook whose event is already
		 * pending returns 0 and passes the event on ("mkIII": prefer a
		 * queue that is not busy).
		 */
		list_move_tail(&wait->entry, &pwq->whead->head);
		return 1;
	}
	return 0;
}

struct evq_pqueue {
	poll_table pt;
	struct evq_reg *reg; /* NULL once a hook allocation failed */
};

/* Called by the file's poll() for each wait queue it uses (ep_ptable_queue_proc). */
static void evq_ptable_queue_proc(struct file *file, wait_queue_head_t *whead, poll_table *pt)
{
	struct evq_pqueue *epq = container_of(pt, struct evq_pqueue, pt);
	struct evq_reg *reg = epq->reg;
	struct evq_pwq *pwq;

	if (unlikely(!reg))
		return;
	pwq = kmem_cache_alloc(evq_pwq_cache, GFP_KERNEL);
	if (unlikely(!pwq)) {
		epq->reg = NULL;
		return;
	}
	init_waitqueue_func_entry(&pwq->wait, evq_poll_callback);
	pwq->whead = whead;
	pwq->reg = reg;
	if (reg->wake_one)
		add_wait_queue_exclusive(whead, &pwq->wait);
	else
		add_wait_queue(whead, &pwq->wait);
	pwq->next = reg->pwqlist;
	reg->pwqlist = pwq;
}

/* ep_remove_wait_queue. */
static void evq_remove_wait_queue(struct evq_pwq *pwq)
{
	wait_queue_head_t *whead;

	rcu_read_lock();
	/*
	 * A head cleared by POLLFREE is freed only after an RCU grace period.
	 * Reading NULL needs the acquire that pairs with the callback's
	 * release; reading a head, we rely on its lock (taken below), which
	 * the POLLFREE wake-up holds while it unlinks us.
	 */
	whead = smp_load_acquire(&pwq->whead);
	if (whead)
		remove_wait_queue(whead, &pwq->wait);
	rcu_read_unlock();
}

static void evq_unregister_pollwait(struct evq_reg *reg)
{
	struct evq_pwq *pwq;

	while ((pwq = reg->pwqlist)) {
		reg->pwqlist = pwq->next;
		evq_remove_wait_queue(pwq);
		kmem_cache_free(evq_pwq_cache, pwq);
	}
}

/* ------------------------------------------------- registrations */

struct evq_reg *evq_reg_lookup(struct evq_queue *q, int fd)
{
	return xa_load(&q->regs, fd);
}

/*
 * True when the caller's descriptor @reg->fd no longer names @reg->file: it
 * was closed without a revoke, or closed and reused for another file.
 */
bool evq_reg_stale(const struct evq_reg *reg)
{
	struct file *now;

	rcu_read_lock();
	now = files_lookup_fd_rcu(current->files, reg->fd);
	rcu_read_unlock();
	return now != reg->file; /* only compared, never dereferenced */
}

/* Unhooks, unlinks and frees @reg, dropping our file reference. q->mtx held. */
void evq_reg_release(struct evq_queue *q, struct evq_reg *reg)
{
	/*
	 * Once every hook is off its wait queue (under that queue's lock) no
	 * callback can be running on reg, so what follows races with none.
	 */
	evq_unregister_pollwait(reg);
	spin_lock_irq(&q->lock);
	list_del_init(&reg->rdllink);
	list_del_init(&reg->recheck);
	evq_ring_cancel_locked(q, reg);
	spin_unlock_irq(&q->lock);
	xa_erase(&q->regs, reg->fd);
	fput(reg->file);
	kmem_cache_free(evq_reg_cache, reg);
	atomic_long_dec(&evq_watches);
	q->stats.registered--;
}

static int evq_reg_insert(struct evq_queue *q, int fd, struct file *file, __poll_t events,
			  u8 mode, bool wake_one, u64 token, u16 dp_events, __poll_t *state)
{
	struct evq_pqueue epq;
	struct evq_reg *reg;
	__poll_t revents;
	int err;

	if (atomic_long_inc_return(&evq_watches) > READ_ONCE(evq_max_watches)) {
		atomic_long_dec(&evq_watches);
		return -ENOSPC;
	}
	reg = kmem_cache_zalloc(evq_reg_cache, GFP_KERNEL);
	if (!reg) {
		atomic_long_dec(&evq_watches);
		return -ENOMEM;
	}
	INIT_LIST_HEAD(&reg->rdllink);
	INIT_LIST_HEAD(&reg->recheck);
	reg->q = q;
	reg->file = get_file(file);
	reg->fd = fd;
	reg->token = token;
	reg->events = events;
	reg->report = evq_reg_interest(reg) | EVQ_HUP | EVQ_ERR;
	reg->mode = mode;
	reg->wake_one = wake_one;
	reg->dp_events = dp_events;
	err = xa_insert(&q->regs, fd, reg, GFP_KERNEL);
	if (err) {
		fput(file);
		kmem_cache_free(evq_reg_cache, reg);
		atomic_long_dec(&evq_watches);
		return err == -EBUSY ? -EEXIST : err;
	}
	q->stats.registered++;

	/*
	 * Hook the file's wait queues and read its state in one poll() call:
	 * poll_wait() comes before the state is computed in every poll
	 * implementation, so a change after the state was read wakes our hook.
	 * That is the paper's race-free statemask.
	 */
	init_poll_funcptr(&epq.pt, evq_ptable_queue_proc);
	epq.pt._key = events;
	epq.reg = reg;
	revents = vfs_poll(file, &epq.pt);
	if (unlikely(!epq.reg)) {
		evq_reg_release(q, reg);
		return -ENOMEM;
	}
	*state = revents;
	if (revents & events) {
		spin_lock_irq(&q->lock);
		evq_enqueue_locked(q, reg, revents, true, false);
		spin_unlock_irq(&q->lock);
	}
	return 0;
}

static int evq_reg_modify(struct evq_queue *q, struct evq_reg *reg, __poll_t events,
			  u8 mode, u64 token, u16 dp_events, __poll_t *state)
{
	poll_table pt;
	__poll_t revents;

	spin_lock_irq(&q->lock);
	reg->events = events;
	reg->report = evq_reg_interest(reg) | EVQ_HUP | EVQ_ERR;
	reg->mode = mode;
	reg->token = token;
	reg->dp_events = dp_events;
	reg->disabled = 0;
	/* A slot carries the old token and mask: withdraw it. */
	evq_ring_cancel_locked(q, reg);
	if (mode != EVQ_MODE_LEVEL)
		list_del_init(&reg->recheck);
	spin_unlock_irq(&q->lock);

	/*
	 * The unlock above orders the new interest before this poll: a wake-up
	 * that saw the old interest and ignored the event happened before, so
	 * this poll sees its state (ep_modify uses smp_mb() for the same).
	 */
	init_poll_funcptr(&pt, NULL);
	pt._key = events;
	revents = vfs_poll(reg->file, &pt);
	*state = revents;
	if (revents & events) {
		spin_lock_irq(&q->lock);
		evq_enqueue_locked(q, reg, revents, true, false);
		spin_unlock_irq(&q->lock);
	}
	return 0;
}

/*
 * Registers or modifies interest of @q in @file, which the caller's
 * descriptor @fd names (the caller holds a reference). q->mtx held.
 * *@state receives the file's whole poll state after the registration.
 * Returns 1 when a registration for another file under the same number was
 * replaced (the number was closed and reused behind the queue's back), 0 for
 * a plain add or modify, or -errno.
 */
int evq_reg_declare(struct evq_queue *q, int fd, struct file *file, __poll_t events,
		    u8 mode, bool wake_one, u64 token, u16 dp_events, __poll_t *state)
{
	struct evq_reg *reg = xa_load(&q->regs, fd);
	bool replaced = reg && reg->file != file;
	int err;

	/* Housekeeping for registrations closed without a revoke (may take this one). */
	evq_sweep(q, EVQ_SWEEP_DECLARE);
	reg = xa_load(&q->regs, fd);
	if (reg && reg->file != file) {
		/* The number was closed and reused: the old registration is dead. */
		q->stats.stale_dropped++;
		evq_reg_release(q, reg);
		reg = NULL;
	}
	if (reg && reg->wake_one != wake_one) {
		/* Exclusive and shared hooks differ: hook again. */
		evq_reg_release(q, reg);
		reg = NULL;
	}
	if (reg)
		err = evq_reg_modify(q, reg, events, mode, token, dp_events, state);
	else
		err = evq_reg_insert(q, fd, file, events, mode, wake_one, token, dp_events, state);
	return err ? err : replaced;
}

/*
 * Checks up to @n registrations, round robin, for a descriptor closed or
 * reused behind the queue's back, and hands those to q->on_stale. This bounds
 * how long a file closed without revoke stays open through our reference.
 * q->mtx held.
 */
void evq_sweep(struct evq_queue *q, unsigned int n)
{
	while (n--) {
		struct evq_reg *reg = xa_find(&q->regs, &q->sweep_cursor, ULONG_MAX, XA_PRESENT);

		if (!reg) {
			if (!q->sweep_cursor)
				return;
			q->sweep_cursor = 0;
			continue;
		}
		q->sweep_cursor = (unsigned long)reg->fd + 1;
		if (evq_reg_stale(reg))
			q->on_stale(q, reg);
	}
}

/* ------------------------------------------------------- dequeue */

struct evq_batch {
	struct evq_reg *reg[EVQ_CHUNK];
	__poll_t revents[EVQ_CHUNK];
	/* Registrations whose descriptor was found closed or reused. */
	struct evq_reg *stale[EVQ_CHUNK];
	unsigned int nstale;
	/* Registrations polled and found not ready (their ring slots are stale). */
	struct evq_reg *quiet[EVQ_CHUNK];
	unsigned int nquiet;
};

/*
 * The caller's descriptor @reg->fd no longer names @reg->file. For the pop
 * path: q->lock is held with interrupts off, which is an RCU read-side
 * section for the fd table (RCU flavours are one since 4.20), so the lookup
 * needs no rcu_read_lock() of its own.
 */
static bool evq_reg_stale_locked(const struct evq_reg *reg)
{
	lockdep_assert_irqs_disabled();
	return files_lookup_fd_raw(current->files, reg->fd) != reg->file;
}

/*
 * Moves up to @want live registrations from @txlist into @b; disarmed
 * oneshots are dropped, stale ones set aside in @b->stale. q->lock held.
 */
static __always_inline unsigned int evq_pop_locked(struct list_head *txlist, struct evq_batch *b,
						   unsigned int want)
{
	unsigned int k = 0;

	b->nstale = 0;
	while (k < want && b->nstale < EVQ_CHUNK && !list_empty(txlist)) {
		struct evq_reg *reg = list_first_entry(txlist, struct evq_reg, rdllink);

		list_del_init(&reg->rdllink);
		if (reg->disabled)
			continue;
		if (unlikely(evq_reg_stale_locked(reg)))
			b->stale[b->nstale++] = reg;
		else
			b->reg[k++] = reg;
	}
	return k;
}

/* Stale registrations found by evq_pop_locked. q->mtx held, q->lock not. */
static noinline void evq_drop_stale(struct evq_queue *q, struct evq_batch *b)
{
	unsigned int i;

	for (i = 0; i < b->nstale; i++)
		q->on_stale(q, b->stale[i]);
	b->nstale = 0;
}

/*
 * Polls the popped registrations, keeping those still ready (compacted at the
 * front of @b). q->mtx held, q->lock not.
 */
static __always_inline unsigned int evq_poll_batch(struct evq_queue *q, struct evq_batch *b,
						   unsigned int k)
{
	poll_table pt;
	unsigned int i, n = 0;

	if (unlikely(b->nstale))
		evq_drop_stale(q, b);
	init_poll_funcptr(&pt, NULL);
	b->nquiet = 0;
	for (i = 0; i < k; i++) {
		struct evq_reg *reg = b->reg[i];
		__poll_t revents;

		pt._key = reg->events;
		revents = vfs_poll(reg->file, &pt) & reg->events;
		if (!revents) {
			/* The paper's suppression: no longer meaningful. */
			b->quiet[b->nquiet++] = reg;
			continue;
		}
		b->reg[n] = reg;
		b->revents[n] = revents;
		n++;
	}
	return n;
}

/* What a delivered registration does next. q->lock held. */
static void evq_commit_locked(struct evq_queue *q, struct evq_reg *reg)
{
	if (reg->mode == EVQ_MODE_ONESHOT)
		reg->disabled = 1;
	else if (reg->mode == EVQ_MODE_LEVEL && list_empty(&reg->rdllink))
		/* epoll's level rule: back to the tail, re-polled next time. */
		list_add_tail(&reg->rdllink, &q->rdllist);
}

/*
 * Writes @n events straight into user memory (as epoll_put_uevent does: no
 * staging copy). Returns false if the memory faulted.
 */
static __always_inline bool evq_put_events(struct evq_batch *b, unsigned int n,
					   enum evq_out_kind kind, void __user *ubuf)
{
	unsigned int i;

	if (kind == EVQ_OUT_EVENTS) {
		struct evq_event __user *uev = ubuf;

		if (!user_write_access_begin(uev, n * sizeof(*uev)))
			return false;
		for (i = 0; i < n; i++) {
			struct evq_reg *reg = b->reg[i];
			u32 mask = evq_poll_to_state(b->revents[i]) & reg->report;

			unsafe_put_user(reg->token, &uev[i].token, fault);
			unsafe_put_user(reg->fd, &uev[i].fd, fault);
			unsafe_put_user(mask, &uev[i].mask, fault);
		}
	} else {
		struct pollfd __user *upfd = ubuf;

		if (!user_write_access_begin(upfd, n * sizeof(*upfd)))
			return false;
		for (i = 0; i < n; i++) {
			struct evq_reg *reg = b->reg[i];

			unsafe_put_user(reg->fd, &upfd[i].fd, fault);
			unsafe_put_user(reg->dp_events, &upfd[i].events, fault);
			unsafe_put_user(mangle_poll(b->revents[i]), &upfd[i].revents, fault);
		}
	}
	user_write_access_end();
	return true;
fault:
	user_write_access_end();
	return false;
}

/*
 * Dequeues into a user array (ep_send_events). The ready list is taken
 * whole onto a private list, so a level registration re-queued during this
 * call is not seen twice; what is left goes back to the head, in order.
 */
static long evq_send_events(struct evq_queue *q, struct evq_out *out)
{
	size_t size = out->kind == EVQ_OUT_EVENTS ? sizeof(struct evq_event) : sizeof(struct pollfd);
	/* Only what evq_pop_locked wrote is read: no need to clear it on every call. */
	struct evq_batch b __attribute__((uninitialized));
	LIST_HEAD(txlist);
	unsigned int res = 0, k, n, i;
	long err = 0;

	b.nstale = 0;
	mutex_lock(&q->mtx);
	spin_lock_irq(&q->lock);
	list_splice_init(&q->rdllist, &txlist);
	while (res < out->max && !list_empty(&txlist) &&
	       (k = evq_pop_locked(&txlist, &b, min_t(unsigned int, out->max - res, EVQ_CHUNK)))) {
		spin_unlock_irq(&q->lock);
		n = evq_poll_batch(q, &b, k);
		if (n && !evq_put_events(&b, n, out->kind, (char __user *)out->buf + (size_t)res * size)) {
			/* Nothing is lost: the ready ones go back first in line. */
			spin_lock_irq(&q->lock);
			for (i = n; i-- > 0;)
				if (list_empty(&b.reg[i]->rdllink))
					list_add(&b.reg[i]->rdllink, &txlist);
			err = -EFAULT;
			break;
		}
		spin_lock_irq(&q->lock);
		for (i = 0; i < n; i++)
			evq_commit_locked(q, b.reg[i]);
		res += n;
	}
	list_splice(&txlist, &q->rdllist);
	/* Others sleeping on this queue may take what is left (ep_done_scan). */
	if (!list_empty(&q->rdllist))
		evq_wake_locked(q, false);
	spin_unlock_irq(&q->lock);
	if (unlikely(b.nstale))
		evq_drop_stale(q, &b);
	mutex_unlock(&q->mtx);
	return res ? res : err;
}

/*
 * Ring mode: re-polls the level registrations posted since the last call
 * (epoll's level rule: a level registration is reported on every call while
 * ready; a live slot absorbs the repeat), moves ready registrations into the
 * ring (their masks polled now) and returns how many entries are unconsumed.
 */
static long evq_ring_produce(struct evq_queue *q)
{
	struct evq_ring *ring = q->ring;
	struct evq_batch b __attribute__((uninitialized));
	LIST_HEAD(txlist);
	unsigned int k, n, i;
	long used;

	mutex_lock(&q->mtx);
	spin_lock_irq(&q->lock);
	{
		struct evq_reg *reg, *tmp;

		list_for_each_entry_safe(reg, tmp, &q->recheck, recheck) {
			list_del_init(&reg->recheck);
			if (list_empty(&reg->rdllink))
				list_add_tail(&reg->rdllink, &q->rdllist);
		}
	}
	list_splice_init(&q->rdllist, &txlist);
	q->producing = true;
	for (;;) {
		u32 room = ring->entries - evq_ring_used(ring);

		k = evq_pop_locked(&txlist, &b, min_t(u32, room, EVQ_CHUNK));
		if (!k)
			break;
		spin_unlock_irq(&q->lock);
		n = evq_poll_batch(q, &b, k);
		spin_lock_irq(&q->lock);
		/*
		 * A live slot of a registration polled quiet reports a state that
		 * is gone (a level registration drained since it was posted):
		 * withdrawn, so level stays level on the ring.
		 */
		for (i = 0; i < b.nquiet; i++)
			evq_ring_cancel_locked(q, b.quiet[i]);
		for (i = 0; i < n; i++) {
			struct evq_reg *reg = b.reg[i];
			u32 mask = evq_poll_to_state(b.revents[i]) & reg->report;

			if (evq_ring_post_locked(q, reg, mask, true) < 0) {
				/* Only a process writing nonsense to head gets here. */
				unsigned int j;

				for (j = n; j-- > i;)
					if (list_empty(&b.reg[j]->rdllink))
						list_add(&b.reg[j]->rdllink, &txlist);
				break;
			}
			ring->hdr->produced++;
			evq_after_post_locked(q, reg);
		}
		if (i < n)
			break;
	}
	list_splice(&txlist, &q->rdllist);
	q->producing = false;
	evq_note_backlog_locked(q);
	used = evq_ring_used(ring);
	spin_unlock_irq(&q->lock);
	if (unlikely(b.nstale))
		evq_drop_stale(q, &b);
	mutex_unlock(&q->mtx);
	return used;
}

static bool evq_available_locked(struct evq_queue *q)
{
	if (!list_empty(&q->rdllist))
		return true;
	return q->ring && q->ring->tail != smp_load_acquire(&q->ring->hdr->head);
}

/* ep_autoremove_wake_function: off the queue on every wake-up, so each wake-up reaches a new sleeper. */
static int evq_autoremove_wake_function(struct wait_queue_entry *wq_entry, unsigned int mode,
					int sync, void *key)
{
	int ret = default_wake_function(wq_entry, mode, sync, key);

	list_del_init_careful(&wq_entry->entry);
	return ret;
}

/*
 * Sleeps until something is ready, the deadline passes or a signal comes.
 * Returns false on timeout. Kept out of line: the harvesting fast path need
 * not pay for setting up a wait entry.
 */
static noinline bool evq_sleep(struct evq_queue *q, ktime_t *to, u64 slack)
{
	wait_queue_entry_t wait;
	bool avail, timed_out = false;

	init_wait(&wait);
	wait.func = evq_autoremove_wake_function;
	spin_lock_irq(&q->lock);
	/* Wakers test waitqueue_active() under q->lock: no barrier needed. */
	__set_current_state(TASK_INTERRUPTIBLE);
	avail = evq_available_locked(q);
	if (!avail)
		__add_wait_queue_exclusive(&q->wq, &wait);
	spin_unlock_irq(&q->lock);

	if (!avail)
		timed_out = !schedule_hrtimeout_range(to, slack, HRTIMER_MODE_ABS);
	__set_current_state(TASK_RUNNING);

	if (!list_empty_careful(&wait.entry)) {
		spin_lock_irq(&q->lock);
		__remove_wait_queue(&q->wq, &wait);
		spin_unlock_irq(&q->lock);
	}
	return !timed_out;
}

/* One harvest: into the ring or into the caller's array. */
static __always_inline long evq_harvest(struct evq_queue *q, struct evq_out *out)
{
	if (out->kind == EVQ_OUT_RING)
		return evq_ring_produce(q);
	/*
	 * Nothing on the ready list: no need for the mutex (ep_poll's
	 * ep_events_available). A registration a concurrent dequeuer holds on
	 * its private list is not lost: that dequeuer puts back what it leaves
	 * and wakes the sleepers, and evq_sleep looks again under q->lock
	 * before it sleeps.
	 */
	if (list_empty_careful(&q->rdllist))
		return 0;
	return evq_send_events(q, out);
}

/* Nothing was ready at the first look: sweep, then sleep, harvest, repeat. */
static noinline long evq_wait_slow(struct evq_queue *q, struct evq_out *out, s64 timeout_ns)
{
	ktime_t expires = 0, *to = NULL;
	bool timed_out = false;
	u64 slack = 0;
	long res;

	if (timeout_ns > 0) {
		expires = ktime_add_safe(ktime_get(), ns_to_ktime(timeout_ns));
		to = &expires;
		slack = current->timer_slack_ns;
	} else if (timeout_ns == 0) {
		timed_out = true;
	}

	for (;;) {
		/* Nothing ready: a good moment to look for closed descriptors. */
		mutex_lock(&q->mtx);
		evq_sweep(q, EVQ_SWEEP_IDLE);
		mutex_unlock(&q->mtx);
		if (timed_out)
			return 0;
		if (signal_pending(current))
			return -EINTR;
		/* One more harvest follows a timeout: a wake-up may have raced it. */
		timed_out = !evq_sleep(q, to, slack);
		res = evq_harvest(q, out);
		if (res)
			return res;
	}
}

/*
 * GET_NEXT_EVENT / DP_POLL (ep_poll): harvest, or sleep until something is
 * ready. The deadline is taken when the first look found nothing, so a call
 * that finds events ready pays for no clock read, timer or wait entry.
 */
long evq_wait_events(struct evq_queue *q, struct evq_out *out, s64 timeout_ns)
{
	long res = evq_harvest(q, out);

	if (res)
		return res;
	return evq_wait_slow(q, out, timeout_ns);
}

/* ---------------------------------------------------- ring set-up */

int evq_ring_setup(struct evq_queue *q, struct evq_ring_setup *setup)
{
	struct evq_ring *ring;
	size_t bytes;
	int err = 0;

	if (setup->flags || !setup->entries || setup->entries > EVQ_RING_MAX_ENTRIES ||
	    !is_power_of_2(setup->entries))
		return -EINVAL;
	BUILD_BUG_ON(sizeof(struct evq_ring_header) > PAGE_SIZE);
	bytes = PAGE_ALIGN(PAGE_SIZE + (size_t)setup->entries * sizeof(struct evq_event));

	ring = kzalloc(sizeof(*ring), GFP_KERNEL_ACCOUNT);
	if (!ring)
		return -ENOMEM;
	ring->mem = vmalloc_user(bytes); /* zeroed, VM_USERMAP: mappable */
	if (!ring->mem) {
		kfree(ring);
		return -ENOMEM;
	}
	ring->hdr = ring->mem;
	ring->ev = ring->mem + PAGE_SIZE;
	ring->bytes = bytes;
	ring->entries = setup->entries;
	ring->mask = setup->entries - 1;
	ring->hdr->entries = setup->entries;
	ring->hdr->abi_version = EVQ_ABI_VERSION;

	mutex_lock(&q->mtx);
	if (q->ring) {
		err = -EBUSY;
	} else {
		spin_lock_irq(&q->lock);
		q->ring = ring; /* wake-ups read it under q->lock */
		spin_unlock_irq(&q->lock);
	}
	mutex_unlock(&q->mtx);
	if (err) {
		vfree(ring->mem);
		kfree(ring);
		return err;
	}
	setup->mmap_bytes = bytes;
	setup->events_offset = PAGE_SIZE;
	setup->reserved = 0;
	return 0;
}

int evq_ring_mmap(struct evq_queue *q, struct vm_area_struct *vma)
{
	struct evq_ring *ring;

	mutex_lock(&q->mtx);
	ring = q->ring;
	mutex_unlock(&q->mtx);
	if (!ring)
		return -ENODEV;
	if (vma->vm_pgoff || vma->vm_end - vma->vm_start != ring->bytes)
		return -EINVAL;
	/* A private copy would hide head from us (and tail from the process). */
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	/* A forked child does not inherit the consumer's side. */
	vma->vm_flags |= VM_DONTCOPY;
	/* The mapping holds the file, so the ring is freed only after munmap. */
	return remap_vmalloc_range(vma, ring->mem, 0);
}

/* ------------------------------------------------------- the queue */

void evq_queue_init(struct evq_queue *q, enum evq_kind kind,
		    void (*on_stale)(struct evq_queue *, struct evq_reg *))
{
	mutex_init(&q->mtx);
	spin_lock_init(&q->lock);
	init_waitqueue_head(&q->wq);
	INIT_LIST_HEAD(&q->rdllist);
	INIT_LIST_HEAD(&q->recheck);
	xa_init(&q->regs);
	q->kind = kind;
	q->on_stale = on_stale;
}

void evq_queue_release(struct evq_queue *q)
{
	struct evq_reg *reg;
	unsigned long fd;

	mutex_lock(&q->mtx);
	xa_for_each(&q->regs, fd, reg)
		evq_reg_release(q, reg);
	mutex_unlock(&q->mtx);
	xa_destroy(&q->regs);
	if (q->ring) {
		vfree(q->ring->mem);
		kfree(q->ring);
	}
	mutex_destroy(&q->mtx);
}
