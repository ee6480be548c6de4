// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * evq_bench.c - the in-VM experiments, printed as EVQ-JSON lines:
 *
 *  figure1   devpollperf's loop (SEEDS 004; the lab's Figure 1): n pipes, then
 *            iterations of "write a byte to a random pipe, wait, read it",
 *            waiting with each mechanism: kmod ring, kmod ioctl (level and
 *            event), epoll (LT and ET), poll, select, the in-kernel /dev/poll,
 *            and no wait at all (the floor). Cost per event at 1, 100, 1,000
 *            and 10,000 descriptors (plus 4,000 for the seed's claim), methods
 *            interleaved within each repetition, medians reported.
 *  wakeone   4 worker threads, each with its own queue on one listening
 *            socket, 4 closed-loop clients: wakeups per connection and how the
 *            connections spread (kmod wake-one with rotation, kmod without,
 *            epoll, epoll EPOLLEXCLUSIVE).
 *
 * Times come from a TCG guest: only ratios between methods measured in the
 * same run mean anything. Usage: evq_bench quick|full
 */
#include "evq_user.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* How guest time relates to work in this boot (set by vm-test on the kernel command line). */
static const char *clock_kind(void)
{
	const char *c = getenv("EVQ_CLOCK");

	return c && *c ? c : "tcg-realtime";
}

/* ------------------------------------------------------------ figure 1 */

enum method {
	M_NONE, M_KMOD_RING, M_KMOD_IOCTL, M_KMOD_IOCTL_EVENT, M_EPOLL, M_EPOLL_ET,
	M_DEVPOLL, M_POLL, M_SELECT, M_COUNT
};
static const char *method_name[M_COUNT] = {
	"none", "kmod-ring", "kmod-ioctl", "kmod-ioctl-event", "epoll", "epoll-et",
	"devpoll", "poll", "select",
};

struct pipes {
	int n;
	int *rd, *wr;
	int maxfd;
};

static void pipes_open(struct pipes *p, int n)
{
	p->n = n;
	p->rd = calloc(n, sizeof(int));
	p->wr = calloc(n, sizeof(int));
	p->maxfd = 0;
	for (int i = 0; i < n; i++) {
		int fds[2];

		if (pipe2(fds, O_NONBLOCK | O_CLOEXEC)) {
			perror("pipe2");
			exit(2);
		}
		p->rd[i] = fds[0];
		p->wr[i] = fds[1];
		if (fds[0] > p->maxfd)
			p->maxfd = fds[0];
	}
}

static void pipes_close(struct pipes *p)
{
	for (int i = 0; i < p->n; i++) {
		close(p->rd[i]);
		close(p->wr[i]);
	}
	free(p->rd);
	free(p->wr);
}

static uint64_t rng;

static unsigned next_pipe(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

/*
 * One measured run: `iters` rounds of write, wait, read. Returns ns per event,
 * or -1 if a wait reported the wrong descriptor (counted as a failure).
 */
static double run_method(enum method m, struct pipes *p, long iters)
{
	int n = p->n, q = -1, ep = -1, dp = -1, bad = 0;
	struct evq_uring ring = { 0 };
	struct evq_event ev[64];
	struct epoll_event eev[64];
	struct pollfd *pfd = NULL, out[64];
	unsigned long *shadow = NULL, *set = NULL;
	size_t words = (size_t)p->maxfd / (8 * sizeof(long)) + 1;
	char c;
	int64_t t0, t1;

	switch (m) {
	case M_KMOD_RING:
	case M_KMOD_IOCTL:
	case M_KMOD_IOCTL_EVENT:
		q = evq_open();
		if (m == M_KMOD_RING && evq_ring_map(q, 1024, &ring)) {
			perror("ring");
			exit(2);
		}
		for (int i = 0; i < n; i++)
			evq_declare(q, p->rd[i], EVQ_READ,
				    m == M_KMOD_IOCTL ? EVQ_MODE_LEVEL : EVQ_MODE_EVENT, 0, i, NULL);
		break;
	case M_EPOLL:
	case M_EPOLL_ET:
		ep = epoll_create1(EPOLL_CLOEXEC);
		for (int i = 0; i < n; i++) {
			struct epoll_event e = { .events = EPOLLIN | (m == M_EPOLL_ET ? EPOLLET : 0),
						 .data.u64 = i };
			epoll_ctl(ep, EPOLL_CTL_ADD, p->rd[i], &e);
		}
		break;
	case M_DEVPOLL:
		dp = open("/dev/poll", O_RDWR);
		pfd = calloc(n, sizeof(*pfd));
		for (int i = 0; i < n; i++) {
			pfd[i].fd = p->rd[i];
			pfd[i].events = POLLIN;
		}
		if (write(dp, pfd, n * sizeof(*pfd)) != (ssize_t)(n * sizeof(*pfd))) {
			perror("devpoll write");
			exit(2);
		}
		break;
	case M_POLL:
		pfd = calloc(n, sizeof(*pfd));
		for (int i = 0; i < n; i++) {
			pfd[i].fd = p->rd[i];
			pfd[i].events = POLLIN;
		}
		break;
	case M_SELECT:
		/* SEEDS 000's improved select: a shadow set copied in, a word-wise scan. */
		shadow = calloc(words, sizeof(long));
		set = calloc(words, sizeof(long));
		for (int i = 0; i < n; i++)
			shadow[p->rd[i] / (8 * sizeof(long))] |= 1UL << (p->rd[i] % (8 * sizeof(long)));
		break;
	default:
		break;
	}

	t0 = now_ns();
	for (long it = 0; it < iters; it++) {
		unsigned r = next_pipe(n);
		int got = -1, k;

		if (write(p->wr[r], "x", 1) != 1)
			bad++;
		switch (m) {
		case M_NONE:
			got = r;
			break;
		case M_KMOD_RING:
			k = evq_ring_get(q, &ring, ev, 64, -1);
			got = k == 1 ? (int)ev[0].token : -1;
			break;
		case M_KMOD_IOCTL:
		case M_KMOD_IOCTL_EVENT:
			k = evq_get(q, ev, 64, -1);
			got = k == 1 ? (int)ev[0].token : -1;
			break;
		case M_EPOLL:
		case M_EPOLL_ET:
			k = epoll_wait(ep, eev, 64, -1);
			got = k == 1 ? (int)eev[0].data.u64 : -1;
			break;
		case M_DEVPOLL: {
			struct dvpoll dv = { .dp_fds = out, .dp_nfds = 64, .dp_timeout = -1 };

			k = ioctl(dp, DP_POLL, &dv);
			got = k == 1 && out[0].fd == p->rd[r] ? (int)r : -1;
			break;
		}
		case M_POLL:
			k = poll(pfd, n, -1);
			/* The application's scan for results is part of poll's cost. */
			for (int i = 0; i < n && k > 0; i++)
				if (pfd[i].revents) {
					got = i;
					k--;
				}
			break;
		case M_SELECT:
			memcpy(set, shadow, words * sizeof(long));
			k = select(p->maxfd + 1, (fd_set *)set, NULL, NULL, NULL);
			for (size_t w = 0; w < words && k > 0; w++)
				while (set[w]) {
					int fd = (int)(w * 8 * sizeof(long)) + __builtin_ctzl(set[w]);

					set[w] &= set[w] - 1;
					got = fd == p->rd[r] ? (int)r : -1;
					k--;
				}
			break;
		default:
			break;
		}
		if (got != (int)r)
			bad++;
		if (read(p->rd[r], &c, 1) != 1)
			bad++;
	}
	t1 = now_ns();

	if (q >= 0) {
		if (m == M_KMOD_RING)
			munmap(ring.hdr, ring.bytes);
		close(q);
	}
	if (ep >= 0)
		close(ep);
	if (dp >= 0)
		close(dp);
	free(pfd);
	free(shadow);
	free(set);
	if (bad) {
		printf("# %s at %d fds: %d wrong or failed waits\n", method_name[m], n, bad);
		return -1;
	}
	return (double)(t1 - t0) / iters;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int figure1(int full)
{
	static const int sizes[] = { 1, 100, 1000, 4000, 10000 };
	const int nsizes = sizeof(sizes) / sizeof(sizes[0]);
	const int reps = full ? 5 : 3;
	const long base = full ? 20000 : 4000;
	double res[5][M_COUNT][5];
	int failures = 0;

	for (int s = 0; s < nsizes; s++) {
		struct pipes p;

		pipes_open(&p, sizes[s]);
		/* Warm-up: every pipe gets its buffer page before anything is timed. */
		for (int i = 0; i < p.n; i++) {
			char c;

			if (write(p.wr[i], "x", 1) != 1 || read(p.rd[i], &c, 1) != 1)
				failures++;
		}
		for (int rep = 0; rep < reps; rep++)
			for (int m = 0; m < M_COUNT; m++) {
				long iters = base;

				/* poll and select cost O(n) per call: fewer rounds, same per-event figure. */
				if ((m == M_POLL || m == M_SELECT) && sizes[s] > 100)
					iters = base * 100 / sizes[s] > 200 ? base * 100 / sizes[s] : 200;
				rng = 0x5eed1999ULL + rep;
				res[s][m][rep] = run_method(m, &p, iters);
				if (res[s][m][rep] < 0)
					failures++;
			}
		for (int m = 0; m < M_COUNT; m++) {
			double v[5], min, max;

			memcpy(v, res[s][m], sizeof(double) * reps);
			qsort(v, reps, sizeof(double), cmp_double);
			min = v[0];
			max = v[reps - 1];
			printf("EVQ-JSON {\"kind\":\"figure1\",\"method\":\"%s\",\"fds\":%d,"
			       "\"ns_per_event\":%.1f,\"min\":%.1f,\"max\":%.1f,\"reps\":%d}\n",
			       method_name[m], sizes[s], v[reps / 2], min, max, reps);
		}
		fflush(stdout);
		pipes_close(&p);
	}
	return failures;
}

/* --------------------------------------------------- fixed costs */

/* What one call costs with nothing to do: the floor under each mechanism. */
static void overhead(void)
{
	enum { N = 20000 };
	int q = evq_open(), ep = epoll_create1(0), dp = open("/dev/poll", O_RDWR);
	struct evq_event ev[64];
	struct epoll_event eev[64];
	struct pollfd out[64];
	struct evq_stats st;
	const char *names[] = { "getppid", "epoll_wait-empty", "kmod-get-empty", "kmod-ioctl-enotty",
				"kmod-stats", "devpoll-empty" };

	for (int which = 0; which < 6; which++) {
		int64_t t0 = now_ns();

		for (int i = 0; i < N; i++) {
			switch (which) {
			case 0: getppid(); break;
			case 1: epoll_wait(ep, eev, 64, 0); break;
			case 2: evq_get(q, ev, 64, 0); break;
			case 3: ioctl(q, 0xE7FF, NULL); break;
			case 4: ioctl(q, EVQ_STATS, &st); break;
			case 5: {
				struct dvpoll dv = { .dp_fds = out, .dp_nfds = 64, .dp_timeout = 0 };
				ioctl(dp, DP_POLL, &dv);
				break;
			}
			}
		}
		printf("EVQ-JSON {\"kind\":\"overhead\",\"call\":\"%s\",\"ns_per_call\":%.1f}\n",
		       names[which], (double)(now_ns() - t0) / N);
	}
	/* One level-ready descriptor that stays ready: the dequeue path alone. */
	int pfds[2];
	char c;

	pipe2(pfds, O_NONBLOCK);
	(void)!write(pfds[1], "x", 1);
	evq_declare(q, pfds[0], EVQ_READ, EVQ_MODE_LEVEL, 0, 0, NULL);
	struct epoll_event e = { .events = EPOLLIN };
	epoll_ctl(ep, EPOLL_CTL_ADD, pfds[0], &e);
	const char *names2[] = { "epoll_wait-ready", "kmod-get-ready" };
	for (int which = 0; which < 2; which++) {
		int64_t t0 = now_ns();

		for (int i = 0; i < N; i++) {
			if (which == 0)
				epoll_wait(ep, eev, 64, 0);
			else
				evq_get(q, ev, 64, 0);
		}
		printf("EVQ-JSON {\"kind\":\"overhead\",\"call\":\"%s\",\"ns_per_call\":%.1f}\n",
		       names2[which], (double)(now_ns() - t0) / N);
	}
	(void)!read(pfds[0], &c, 1);
	/* write + read of a byte with the pipe watched by nobody, epoll, kmod: the wake-up callback. */
	const char *names3[] = { "write-read-unwatched", "write-read-epoll", "write-read-kmod" };
	int p2[2], ep2 = epoll_create1(0), q2 = evq_open();

	pipe2(p2, O_NONBLOCK);
	for (int which = 0; which < 3; which++) {
		int64_t t0;

		if (which == 1)
			epoll_ctl(ep2, EPOLL_CTL_ADD, p2[0], &e);
		if (which == 2) {
			epoll_ctl(ep2, EPOLL_CTL_DEL, p2[0], NULL);
			evq_declare(q2, p2[0], EVQ_READ, EVQ_MODE_EVENT, 0, 0, NULL);
		}
		t0 = now_ns();
		for (int i = 0; i < N; i++) {
			(void)!write(p2[1], "x", 1);
			(void)!read(p2[0], &c, 1);
		}
		printf("EVQ-JSON {\"kind\":\"overhead\",\"call\":\"%s\",\"ns_per_call\":%.1f}\n",
		       names3[which], (double)(now_ns() - t0) / N);
	}
	close(p2[0]);
	close(p2[1]);
	close(ep2);
	close(q2);
	close(pfds[0]);
	close(pfds[1]);
	close(q);
	close(ep);
	close(dp);
}

/* ------------------------------------------------------------ wake-one */

enum wmethod { W_KMOD_WAKEONE, W_KMOD_ALL, W_EPOLL_EXCLUSIVE, W_EPOLL_ALL, W_COUNT };
static const char *wmethod_name[W_COUNT] = {
	"kmod-wakeone", "kmod-all", "epoll-exclusive", "epoll-all",
};

#define WORKERS 4
#define CLIENTS 2

struct wshared {
	enum wmethod m;
	int listener;
	struct sockaddr_in addr;
	int per_client;
	volatile int stop;
	long wakeups[WORKERS], futile[WORKERS], accepted[WORKERS], rescued[WORKERS];
};

struct wworker {
	struct wshared *sh;
	int id;
};

static void *wake_worker(void *arg)
{
	struct wworker *w = arg;
	struct wshared *sh = w->sh;
	int q, ep = -1;
	struct evq_event ev[8];
	struct epoll_event eev[8];

	if (sh->m == W_KMOD_WAKEONE || sh->m == W_KMOD_ALL) {
		q = evq_open();
		evq_declare(q, sh->listener, EVQ_READ, EVQ_MODE_EVENT,
			    sh->m == W_KMOD_WAKEONE ? EVQ_WAKE_ONE : 0, 0, NULL);
	} else {
		struct epoll_event e = { .events = EPOLLIN | EPOLLET |
					 (sh->m == W_EPOLL_EXCLUSIVE ? EPOLLEXCLUSIVE : 0) };
		q = ep = epoll_create1(0);
		epoll_ctl(ep, EPOLL_CTL_ADD, sh->listener, &e);
	}
	while (!sh->stop) {
		int n = ep >= 0 ? epoll_wait(ep, eev, 8, 100) : evq_get(q, ev, 8, 100 * 1000000LL);
		int s;

		/*
		 * One accept per wake-up, as the Stevens prefork servers do: the
		 * event names one arrival. With no more clients than workers an
		 * arrival always finds a queue without a pending event, so none
		 * is stranded; a timed-out wait still tries (and counts a rescue).
		 */
		s = accept4(sh->listener, NULL, NULL, SOCK_NONBLOCK);
		if (n > 0) {
			sh->wakeups[w->id]++;
			if (s < 0)
				sh->futile[w->id]++;
		} else if (s >= 0) {
			sh->rescued[w->id]++;
		}
		if (s >= 0) {
			sh->accepted[w->id]++;
			close(s);
		}
	}
	close(q);
	return NULL;
}

static void *wake_client(void *arg)
{
	struct wshared *sh = arg;
	char c;

	for (int i = 0; i < sh->per_client; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);

		if (connect(s, (void *)&sh->addr, sizeof(sh->addr)) == 0)
			(void)!read(s, &c, 1); /* closed loop: wait for the server's close */
		close(s);
	}
	return NULL;
}

static void wakeone(int full)
{
	for (int m = 0; m < W_COUNT; m++) {
		struct wshared sh = { .m = m, .per_client = full ? 1000 : 300 };
		struct wworker w[WORKERS];
		pthread_t wt[WORKERS], ct[CLIENTS];
		socklen_t len = sizeof(sh.addr);
		long wakeups = 0, futile = 0, total = 0, max = 0, min = -1, rescued = 0;
		int64_t t0;

		sh.listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		sh.addr.sin_family = AF_INET;
		sh.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		bind(sh.listener, (void *)&sh.addr, sizeof(sh.addr));
		listen(sh.listener, 1024);
		getsockname(sh.listener, (void *)&sh.addr, &len);
		for (int i = 0; i < WORKERS; i++) {
			w[i].sh = &sh;
			w[i].id = i;
			pthread_create(&wt[i], NULL, wake_worker, &w[i]);
		}
		usleep(200000); /* every worker registered and asleep */
		t0 = now_ns();
		for (int i = 0; i < CLIENTS; i++)
			pthread_create(&ct[i], NULL, wake_client, &sh);
		for (int i = 0; i < CLIENTS; i++)
			pthread_join(ct[i], NULL);
		usleep(200000);
		sh.stop = 1;
		for (int i = 0; i < WORKERS; i++)
			pthread_join(wt[i], NULL);
		for (int i = 0; i < WORKERS; i++) {
			wakeups += sh.wakeups[i];
			futile += sh.futile[i];
			rescued += sh.rescued[i];
			total += sh.accepted[i];
			if (sh.accepted[i] > max)
				max = sh.accepted[i];
			if (min < 0 || sh.accepted[i] < min)
				min = sh.accepted[i];
		}
		printf("EVQ-JSON {\"kind\":\"wakeone\",\"clock\":\"%s\",\"cpus\":%ld,\"method\":\"%s\",\"queues\":%d,"
		       "\"clients\":%d,\"connections\":%ld,\"wakeups\":%ld,\"futile\":%ld,\"rescued\":%ld,"
		       "\"wakeups_per_connection\":%.3f,\"accepted\":[%ld,%ld,%ld,%ld],"
		       "\"max_min_share\":%.3f,\"seconds\":%.2f}\n",
		       clock_kind(), sysconf(_SC_NPROCESSORS_ONLN), wmethod_name[m], WORKERS, CLIENTS, total,
		       wakeups, futile, rescued,
		       total ? (double)wakeups / total : 0.0, sh.accepted[0], sh.accepted[1],
		       sh.accepted[2], sh.accepted[3], min > 0 ? (double)max / min : -1.0,
		       (now_ns() - t0) / 1e9);
		fflush(stdout);
		close(sh.listener);
	}
}

/* A few rounds of two methods, for reading under ftrace's function_graph. */
static void trace_rounds(void)
{
	struct pipes p;

	pipes_open(&p, 100);
	rng = 1;
	run_method(M_EPOLL, &p, 3);
	run_method(M_KMOD_IOCTL, &p, 3);
	pipes_close(&p);
}

int main(int argc, char **argv)
{
	int full = argc > 1 && !strcmp(argv[1], "full");
	int only_wakeone = argc > 2 && !strcmp(argv[2], "wakeone");

	if (argc > 1 && !strcmp(argv[1], "trace")) {
		trace_rounds();
		return 0;
	}
	struct rlimit rl = { 65536, 65536 };
	int failures;

	setrlimit(RLIMIT_NOFILE, &rl);
	printf("# evq_bench %s\n", full ? "full" : "quick");
	printf("EVQ-JSON {\"kind\":\"bench_env\",\"clock\":\"%s\",\"cpus\":%ld,\"size\":\"%s\"}\n",
	       clock_kind(), sysconf(_SC_NPROCESSORS_ONLN), full ? "full" : "quick");
	if (only_wakeone) {
		wakeone(full);
		return 0;
	}
	overhead();
	failures = figure1(full);
	wakeone(full);
	printf("# evq_bench: %d failed runs\n", failures);
	return failures ? 1 : 0;
}
