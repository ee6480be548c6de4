/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * evq_user.h - small user-space helpers over the evq.ko ABI, shared by the
 * in-VM tests and benchmarks: the two ioctls, and the ring consumer written
 * exactly as kernel/README.md's protocol says.
 */
#ifndef EVQ_USER_H
#define EVQ_USER_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include "evq.h"

static inline int evq_open(void)
{
	return open("/dev/evq", O_RDWR | O_CLOEXEC);
}

/* Returns 0 (or 1, see EVQ_DECLARE_INTEREST) and the state, or -errno. */
static inline int evq_declare(int q, int fd, unsigned interest, unsigned mode, unsigned flags,
			      uint64_t token, unsigned *state)
{
	struct evq_interest in = {
		.fd = fd, .interest = interest, .mode = mode, .flags = flags, .token = token,
	};

	int r = ioctl(q, EVQ_DECLARE_INTEREST, &in);

	if (r < 0)
		return -errno;
	if (state)
		*state = in.state;
	return r; /* 1: replaced a registration of the number's previous file */
}

/* Returns the number of events, or -errno. */
static inline int evq_get(int q, struct evq_event *ev, unsigned max, int64_t timeout_ns)
{
	struct evq_wait w = {
		.events = (uint64_t)(uintptr_t)ev, .array_max = max, .timeout_ns = timeout_ns,
	};
	int n = ioctl(q, EVQ_GET_NEXT_EVENT, &w);

	return n < 0 ? -errno : n;
}

static inline int evq_stats(int q, struct evq_stats *s)
{
	return ioctl(q, EVQ_STATS, s) < 0 ? -errno : 0;
}

struct evq_uring {
	struct evq_ring_header *hdr;
	struct evq_event *ev;
	uint32_t mask;
	size_t bytes;
};

/* EVQ_SETUP_RING + mmap. Returns 0 or -errno. */
static inline int evq_ring_map(int q, uint32_t entries, struct evq_uring *r)
{
	struct evq_ring_setup s = { .entries = entries };
	void *p;

	if (ioctl(q, EVQ_SETUP_RING, &s) < 0)
		return -errno;
	p = mmap(NULL, s.mmap_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, q, 0);
	if (p == MAP_FAILED)
		return -errno;
	r->hdr = p;
	r->ev = (struct evq_event *)((char *)p + s.events_offset);
	r->mask = entries - 1;
	r->bytes = s.mmap_bytes;
	return 0;
}

/*
 * Takes up to `max` events from the ring without a system call. Each slot's
 * mask is taken with an atomic exchange (0 = cancelled by the kernel); head
 * is published with release after the slots are read.
 */
static inline unsigned evq_ring_take(struct evq_uring *r, struct evq_event *out, unsigned max)
{
	uint32_t head = r->hdr->head;
	uint32_t tail = __atomic_load_n(&r->hdr->tail, __ATOMIC_ACQUIRE);
	unsigned n = 0, looked = 0;

	/* At most one ring's worth: a head the process scribbled on stays bounded. */
	while (head != tail && n < max && looked++ <= r->mask) {
		struct evq_event *slot = &r->ev[head & r->mask];
		uint32_t mask = __atomic_exchange_n(&slot->mask, 0, __ATOMIC_ACQ_REL);

		if (mask) {
			out[n].token = slot->token;
			out[n].fd = slot->fd;
			out[n].mask = mask;
			n++;
		}
		head++;
	}
	__atomic_store_n(&r->hdr->head, head, __ATOMIC_RELEASE);
	return n;
}

/* The ring's get_next_event: the ring first, the ioctl only when it is empty. */
static inline int evq_ring_get(int q, struct evq_uring *r, struct evq_event *out, unsigned max,
			       int64_t timeout_ns)
{
	for (;;) {
		unsigned n = evq_ring_take(r, out, max);
		struct evq_wait w = { .flags = EVQ_WAIT_RING, .timeout_ns = timeout_ns };
		int avail;

		if (n)
			return n;
		avail = ioctl(q, EVQ_GET_NEXT_EVENT, &w);
		if (avail < 0)
			return -errno;
		if (avail == 0)
			return 0;
	}
}

#endif
