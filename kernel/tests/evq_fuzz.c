// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * evq_fuzz.c - random ioctl, write and mmap sequences against /dev/evq and
 * /dev/poll from user space, with a second thread making files ready, closing
 * them and reusing their numbers underneath. Arguments are mostly plausible
 * and often absurd: bad descriptors, unknown bits, NULL, kernel, unmapped and
 * read-only pointers, huge counts, rings with nonsense heads.
 *
 * Passes when every call returns success or one of the documented errors and
 * the process survives; the host then checks the kernel log is clean.
 * Usage: evq_fuzz [calls] [seed]
 */
#include "evq_user.h"
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>

#define NQ 6       /* queues: 4 /dev/evq, 2 /dev/poll */
#define NT 48      /* target descriptors */
#define NE 64      /* an event buffer */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64*: repeatable from the seed. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static unsigned below(unsigned n)
{
	return (unsigned)(rnd() % n);
}

struct queue {
	int fd;
	int devpoll;
	struct evq_uring ring;
	int mapped;
};

static struct queue qs[NQ];
static int targets[NT];      /* numbers; the writer thread swaps files under them */
static int peers[NT];        /* the other end, for sockets and pipes (-1 if none) */
static pthread_mutex_t target_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int done;
static void *ro_page, *unmapped_page;
static unsigned long calls, unexpected, errs[160], events_seen;
static volatile const char *last_op = "start";
static volatile long long last_detail[4];

/* Says where the run is when it stops moving (a hang would otherwise be silent). */
static void *watchdog(void *arg)
{
	unsigned long seen = 0;

	(void)arg;
	while (!done) {
		sleep(20);
		if (calls == seen && !done) {
			printf("# evq_fuzz: stuck at %lu calls in %s (%lld %lld %lld %lld)\n", calls, last_op,
			       last_detail[0], last_detail[1], last_detail[2], last_detail[3]);
			fflush(stdout);
			(void)!system("for t in /proc/$PPID/task/*; do echo \"# task $t\"; sed 's/^/#   /' $t/stack; done");
		}
		fflush(stdout);
		seen = calls;
	}
	return NULL;
}

static const int allowed[] = { EBADF, EINVAL, EFAULT, EPERM, ENOSPC, ENOMEM, EBUSY,
			       ENODEV, ENOTTY, EINTR, EAGAIN, EPIPE, ECONNRESET };

static void note(const char *what, long r)
{
	calls++;
	if (r >= 0)
		return;
	int e = errno;

	if (e < 160)
		errs[e]++;
	for (unsigned i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		if (e == allowed[i])
			return;
	unexpected++;
	if (unexpected < 20)
		printf("# unexpected errno %d (%s) from %s\n", e, strerror(e), what);
}

/* A fresh file for target slot i, installed at its number (dup2) when it has one. */
static void refill_target(unsigned i)
{
	int fd = -1, peer = -1, sv[2];
	struct itimerspec its = { .it_value = { 0, 1000 }, .it_interval = { 0, 500000 } };
	sigset_t set;

	switch (i % 8) {
	case 0: case 1: case 2:
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv);
		fd = sv[0];
		peer = sv[1];
		break;
	case 3: case 4:
		pipe2(sv, O_NONBLOCK);
		fd = sv[0];
		peer = sv[1];
		break;
	case 5:
		fd = eventfd(0, EFD_NONBLOCK);
		break;
	case 6:
		fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
		timerfd_settime(fd, 0, &its, NULL);
		break;
	case 7:
		if (i == 7) {
			fd = open("/init", O_RDONLY); /* a regular file */
		} else {
			sigemptyset(&set);
			sigaddset(&set, SIGUSR2);
			fd = signalfd(-1, &set, SFD_NONBLOCK);
		}
		break;
	}
	pthread_mutex_lock(&target_lock);
	if (targets[i] >= 0 && fd >= 0) {
		/* Reuse the number at once: registrations on it are now stale. */
		dup2(fd, targets[i]);
		close(fd);
	} else if (fd >= 0) {
		targets[i] = fd;
	}
	if (peers[i] >= 0)
		close(peers[i]);
	peers[i] = peer;
	pthread_mutex_unlock(&target_lock);
}

static void *writer(void *arg)
{
	char buf[512] = { 0 };
	uint64_t one = 1;
	uint64_t local = 0x9e3779b97f4a7c15ULL;

	(void)arg;
	while (!done) {
		local ^= local << 13;
		local ^= local >> 7;
		local ^= local << 17;
		unsigned i = (unsigned)(local % NT), op = (unsigned)((local >> 20) % 100);

		pthread_mutex_lock(&target_lock);
		int fd = targets[i], peer = peers[i];

		if (op < 60 && peer >= 0)
			(void)!write(peer, buf, 1 + (local >> 40) % sizeof(buf));
		else if (op < 70 && i % 8 == 5)
			(void)!write(fd, &one, 8);
		else if (op < 90)
			while (read(fd, buf, sizeof(buf)) > 0)
				;
		pthread_mutex_unlock(&target_lock);
		if (op >= 98)
			refill_target(i);
		if (op == 97) {
			/* Hang up a peer: HUP wake-ups. */
			pthread_mutex_lock(&target_lock);
			if (peers[i] >= 0) {
				close(peers[i]);
				peers[i] = -1;
			}
			pthread_mutex_unlock(&target_lock);
		}
	}
	return NULL;
}

/*
 * The argument pointer for a call: mostly `good`, sometimes NULL, a kernel
 * address, an unmapped or read-only page, a random address, or a misaligned
 * copy of the same bytes (so a misaligned argument still means what it says:
 * a garbage timeout would make a legitimate, endless wait).
 */
static void *pick_pointer(void *good, size_t len)
{
	static char scratch[1024] __attribute__((aligned(64)));

	switch (below(20)) {
	case 0: return NULL;
	case 1: return (void *)0xffff888000000000UL;
	case 2: return unmapped_page;
	case 3: return ro_page;
	case 4:
		if (len + 1 > sizeof(scratch))
			return good;
		memcpy(scratch + 1, good, len);
		return scratch + 1;
	case 5: return (void *)(uintptr_t)(rnd() | 0x8000000000000000ULL); /* not user space */
	default: return good;
	}
}

static int pick_fd(void)
{
	switch (below(16)) {
	case 0: return -1;
	case 1: return (int)(rnd() & 0x7fffffff);
	case 2: return qs[below(NQ)].fd;        /* a queue: refused */
	case 3: return 1000 + below(100);       /* probably closed */
	default: return targets[below(NT)];
	}
}

static void reopen_queue(unsigned i)
{
	if (qs[i].mapped)
		munmap(qs[i].ring.hdr, qs[i].ring.bytes);
	qs[i].mapped = 0;
	close(qs[i].fd);
	qs[i].fd = open(qs[i].devpoll ? "/dev/poll" : "/dev/evq", O_RDWR);
}

static void op_declare(struct queue *q)
{
	struct evq_interest in = {
		.fd = pick_fd(),
		.interest = below(8) ? (unsigned)below(8) : (unsigned)rnd(),
		.mode = below(8) ? below(3) : below(8),
		.flags = below(4) ? below(2) : (unsigned)rnd(),
		.token = rnd(),
		.reserved = below(32) ? 0 : 1,
	};
	note("DECLARE_INTEREST", ioctl(q->fd, EVQ_DECLARE_INTEREST, pick_pointer(&in, sizeof(in))));
}

static void op_get(struct queue *q)
{
	static struct evq_event ev[NE];
	struct evq_wait w = {
		.array_max = below(4) ? 1 + below(NE) : (below(2) ? 0 : (unsigned)rnd()),
		.flags = below(8) ? (q->mapped ? EVQ_WAIT_RING : 0) : (unsigned)rnd() & 3,
		.timeout_ns = below(50) ? 0 : 1000,
	};
	long r;

	w.events = (uintptr_t)pick_pointer(ev, sizeof(ev));
	if (w.flags & EVQ_WAIT_RING && below(4)) {
		w.events = 0;
		w.array_max = 0;
	}
	void *wp = pick_pointer(&w, sizeof(w));
	last_detail[0] = w.timeout_ns;
	last_detail[1] = w.flags;
	last_detail[2] = w.array_max;
	last_detail[3] = wp == &w;
	r = ioctl(q->fd, EVQ_GET_NEXT_EVENT, wp);
	note("GET_NEXT_EVENT", r);
	if (r > 0 && !(w.flags & EVQ_WAIT_RING))
		events_seen += r;
	if (q->mapped) {
		if (below(64) == 0)
			q->ring.hdr->head = (uint32_t)rnd(); /* nonsense */
		else if (below(64) == 0)
			q->ring.hdr->head = q->ring.hdr->tail;
		events_seen += evq_ring_take(&q->ring, ev, NE);
	}
}

static void op_ring(struct queue *q)
{
	struct evq_ring_setup s = { .entries = below(4) ? 1u << below(12) : (unsigned)rnd() };
	void *p;

	if (q->mapped && below(2)) {
		note("munmap", munmap(q->ring.hdr, q->ring.bytes));
		q->mapped = 0;
		return;
	}
	if (ioctl(q->fd, EVQ_SETUP_RING, pick_pointer(&s, sizeof(s))) < 0) {
		note("SETUP_RING", -1);
		return;
	}
	calls++;
	if (q->mapped)
		return;
	p = mmap(NULL, s.mmap_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, q->fd, 0);
	if (p == MAP_FAILED) {
		note("mmap", -1);
		return;
	}
	q->ring.hdr = p;
	q->ring.ev = (struct evq_event *)((char *)p + s.events_offset);
	q->ring.mask = s.entries - 1;
	q->ring.bytes = s.mmap_bytes;
	q->mapped = 1;
}

static void op_devpoll(struct queue *q)
{
	struct pollfd recs[8], out[NE];
	unsigned n = 1 + below(8);
	struct dvpoll dv;
	long r;

	switch (below(3)) {
	case 0:
		for (unsigned k = 0; k < n; k++) {
			recs[k].fd = pick_fd();
			recs[k].events = below(8) ? (short)(below(2) ? POLLIN : POLLOUT | POLLIN)
						  : (below(2) ? POLLREMOVE : (short)rnd());
			recs[k].revents = 0;
		}
		note("write", write(q->fd, pick_pointer(recs, sizeof(recs)),
				    below(16) ? n * sizeof(struct pollfd) : below(100)));
		break;
	case 1:
		dv.dp_fds = pick_pointer(out, sizeof(out));
		dv.dp_nfds = below(8) ? 1 + below(NE) : rnd();
		dv.dp_timeout = below(50) ? 0 : 1;
		r = ioctl(q->fd, DP_POLL, pick_pointer(&dv, sizeof(dv)));
		note("DP_POLL", r);
		if (r > 0)
			events_seen += r;
		break;
	default:
		recs[0].fd = pick_fd();
		note("DP_ISPOLLED", ioctl(q->fd, DP_ISPOLLED, pick_pointer(recs, sizeof(recs))));
	}
}

/* A child registers a signalfd (its own sighand's wait queue), then exits: POLLFREE. */
static void op_pollfree(void)
{
	int q = qs[below(4)].fd, sfd;
	sigset_t set;
	pid_t child;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sfd = signalfd(-1, &set, SFD_NONBLOCK);
	child = fork();
	if (child == 0) {
		evq_declare(q, sfd, EVQ_READ, below(3), below(2), 1, NULL);
		_exit(0);
	}
	waitpid(child, NULL, 0);
	calls++;
	close(sfd); /* the queue may still hold it: dropped when swept */
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	char msg[160];
	int n = snprintf(msg, sizeof(msg), "# evq_fuzz: signal %d at address %p during %s\n", sig,
			 si->si_addr, last_op);

	(void)uc;
	(void)!write(1, msg, n);
	_exit(3);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_sigaction = on_segv, .sa_flags = SA_SIGINFO };

	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	unsigned long target = argc > 1 ? strtoul(argv[1], NULL, 0) : 1000000;
	struct rlimit rl = { 65536, 65536 };
	pthread_t th;

	rng_state = argc > 2 ? strtoull(argv[2], NULL, 0) : 0x5eed1999;
	setrlimit(RLIMIT_NOFILE, &rl);
	signal(SIGPIPE, SIG_IGN);
	ro_page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* Reserved, never accessible: an unmapped hole could be reused by a later mapping. */
	unmapped_page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (unsigned i = 0; i < NQ; i++) {
		qs[i].devpoll = i >= 4;
		qs[i].fd = open(qs[i].devpoll ? "/dev/poll" : "/dev/evq", O_RDWR);
		if (qs[i].fd < 0) {
			perror("open");
			return 2;
		}
	}
	for (unsigned i = 0; i < NT; i++) {
		targets[i] = -1;
		peers[i] = -1;
		refill_target(i);
	}
	pthread_create(&th, NULL, writer, NULL);
	pthread_t wd;
	pthread_create(&wd, NULL, watchdog, NULL);
	pthread_detach(wd);
	struct timespec t0, t1;
	unsigned long next_report = 100000;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (calls < target) {
		if (calls >= next_report) {
			clock_gettime(CLOCK_MONOTONIC, &t1);
			printf("# evq_fuzz: %lu calls, %.1f s\n", calls,
			       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
			fflush(stdout);
			next_report += 100000;
			(void)last_op;
		}
		unsigned qi = below(NQ), op = below(1000);
		struct queue *q = &qs[qi];

		if (op == 0) {
			last_op = "reopen";
			reopen_queue(qi);
		} else if (op == 1) {
			last_op = "pollfree";
			op_pollfree();
		} else if (op < 4) {
			/* Close a target behind every queue's back; a new file takes the number. */
			refill_target(below(NT));
		} else if (op < 10) {
			note("random ioctl", ioctl(q->fd, (unsigned)rnd(), pick_pointer(&rng_state, 8)));
		} else if (q->devpoll) {
			last_op = "devpoll";
			op_devpoll(q);
		} else if (op < 20) {
			last_op = "ring";
			op_ring(q);
		} else if (op < 30) {
			struct evq_stats st;
			note("STATS", ioctl(q->fd, EVQ_STATS, pick_pointer(&st, sizeof(st))));
		} else if (op < 550) {
			last_op = "declare";
			op_declare(q);
		} else {
			last_op = "get";
			op_get(q);
		}
	}
	done = 1;
	pthread_join(th, NULL);
	for (unsigned i = 0; i < NQ; i++)
		close(qs[i].fd);
	printf("EVQ-JSON {\"kind\":\"fuzz\",\"calls\":%lu,\"unexpected_errors\":%lu,\"events\":%lu,"
	       "\"EBADF\":%lu,\"EINVAL\":%lu,\"EFAULT\":%lu,\"EPERM\":%lu,\"ENOTTY\":%lu}\n",
	       calls, unexpected, events_seen, errs[EBADF], errs[EINVAL], errs[EFAULT], errs[EPERM],
	       errs[ENOTTY]);
	printf("# evq_fuzz: %lu calls, %lu unexpected errors, %lu events\n", calls, unexpected,
	       events_seen);
	return unexpected ? 1 : 0;
}
