// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * evq_semantics.c - /dev/evq against the paper's semantics (SEEDS 000) and
 * this module's own promises (kernel/README.md). Runs inside the VM as root.
 */
#include "evq_user.h"
#include "tap.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#define MS 1000000LL

static void pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		abort();
}

static void put(int fd, int n)
{
	char buf[256] = { 0 };

	if (write(fd, buf, n) != n)
		abort();
}

static int drain(int fd)
{
	char buf[4096];
	int total = 0, n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		total += n;
	return total;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int tcp_listener(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (void *)addr, sizeof(*addr)) || listen(l, 1024) ||
	    getsockname(l, (void *)addr, &len))
		abort();
	return l;
}

/* --------------------------------------------------------------- */

static void state_at_registration(void)
{
	int q = evq_open(), sv[2];
	unsigned state = 0;

	pair(sv);
	REQUIRE(q >= 0, "open /dev/evq: %s", strerror(errno));
	CHECK(evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_LEVEL, 0, 1, &state) == 0, "declare");
	CHECK(!(state & EVQ_READ), "nothing written yet: %#x", state);
	CHECK(state & EVQ_WRITE, "a fresh socket is writable: %#x", state);
	put(sv[1], 3);
	CHECK(evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_LEVEL, 0, 1, &state) == 0, "re-declare");
	CHECK(state & EVQ_READ, "data is there: %#x", state);
	close(sv[0]);
	close(sv[1]);
	close(q);
}

/* SEEDS 000: data between accept() and declare_interest() is not lost. */
static void accept_then_register_race(void)
{
	struct sockaddr_in a;
	int l = tcp_listener(&a), c = socket(AF_INET, SOCK_STREAM, 0), s, q = evq_open();
	unsigned state = 0;

	REQUIRE(connect(c, (void *)&a, sizeof(a)) == 0, "connect: %s", strerror(errno));
	for (int i = 0; i < 1000 && (s = accept4(l, NULL, NULL, SOCK_NONBLOCK)) < 0; i++)
		usleep(1000);
	REQUIRE(s >= 0, "accept");
	put(c, 18);
	usleep(20000);
	CHECK(evq_declare(q, s, EVQ_READ, EVQ_MODE_EVENT, 0, 9, &state) == 0, "declare");
	CHECK(state & EVQ_READ, "data queued before registration: %#x", state);
	close(s);
	close(c);
	close(l);
	close(q);
}

static void level_reports_until_drained(void)
{
	int q = evq_open(), sv[2];
	struct evq_event ev[8];

	pair(sv);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_LEVEL, 0, 5, NULL);
	CHECK(evq_get(q, ev, 8, 0) == 0, "idle socket reported");
	put(sv[1], 10);
	for (int round = 0; round < 3; round++) {
		int n = evq_get(q, ev, 8, 1000 * MS);

		CHECK(n == 1, "round %d: %d events", round, n);
		CHECK(n == 1 && ev[0].token == 5 && ev[0].fd == sv[0] && (ev[0].mask & EVQ_READ),
		      "round %d: token %llu fd %d mask %#x", round, (unsigned long long)ev[0].token,
		      ev[0].fd, ev[0].mask);
	}
	CHECK(drain(sv[0]) == 10, "drain");
	CHECK(evq_get(q, ev, 8, 0) == 0, "reported after drain");
	close(sv[0]);
	close(sv[1]);
	close(q);
}

static void event_mode_once_per_happening(void)
{
	int q = evq_open(), sv[2], n;
	struct evq_event ev[8];

	pair(sv);
	evq_declare(q, sv[0], EVQ_READ | EVQ_WRITE, EVQ_MODE_EVENT, 0, 3, NULL);
	n = evq_get(q, ev, 8, 0);
	CHECK(n <= 1, "writable at registration reported at most once: %d", n);
	for (int i = 0; i < 3; i++)
		CHECK(evq_get(q, ev, 8, 0) == 0, "always-writable socket re-reported");
	put(sv[1], 1);
	n = evq_get(q, ev, 8, 1000 * MS);
	CHECK(n == 1, "%d events", n);
	CHECK((ev[0].mask & (EVQ_READ | EVQ_WRITE)) == (EVQ_READ | EVQ_WRITE),
	      "mask is the state at dequeue: %#x", ev[0].mask);
	CHECK(evq_get(q, ev, 8, 0) == 0, "coalesced event delivered twice");
	put(sv[1], 1);
	CHECK(evq_get(q, ev, 8, 1000 * MS) == 1, "new data is a new happening");
	CHECK(drain(sv[0]) == 2, "drain");
	CHECK(evq_get(q, ev, 8, 0) == 0, "drained");
	close(sv[0]);
	close(sv[1]);
	close(q);
}

static void event_mode_suppresses_stale(void)
{
	int q = evq_open(), sv[2];
	struct evq_event ev[8];

	pair(sv);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_EVENT, 0, 3, NULL);
	put(sv[1], 4);
	CHECK(drain(sv[0]) == 4, "drain");
	CHECK(evq_get(q, ev, 8, 0) == 0, "an event whose cause was consumed was reported");
	close(sv[0]);
	close(sv[1]);
	close(q);
}

static void oneshot_disarms(void)
{
	int q = evq_open(), sv[2];
	struct evq_event ev[8];

	pair(sv);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_ONESHOT, 0, 8, NULL);
	put(sv[1], 1);
	CHECK(evq_get(q, ev, 8, 1000 * MS) == 1, "first");
	CHECK(evq_get(q, ev, 8, 0) == 0, "oneshot fired twice");
	put(sv[1], 1);
	CHECK(evq_get(q, ev, 8, 0) == 0, "disarmed oneshot fired");
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_ONESHOT, 0, 8, NULL);
	CHECK(evq_get(q, ev, 8, 1000 * MS) == 1 && ev[0].token == 8, "re-armed");
	close(sv[0]);
	close(sv[1]);
	close(q);
}

static void empty_interest_revokes(void)
{
	int q = evq_open(), sv[2];
	struct evq_event ev[8];
	struct evq_stats st;
	unsigned state = 0;

	pair(sv);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_LEVEL, 0, 1, NULL);
	put(sv[1], 1);
	CHECK(evq_declare(q, sv[0], 0, 0, 0, 1, &state) == 0, "revoke");
	CHECK(state & EVQ_READ, "revoke still reports state: %#x", state);
	evq_stats(q, &st);
	CHECK(st.registered == 0, "registered %llu", (unsigned long long)st.registered);
	CHECK(evq_get(q, ev, 8, 30 * MS) == 0, "event after revoke");
	close(sv[0]);
	close(sv[1]);
	close(q);
}

static void modify_changes_interest_and_token(void)
{
	int q = evq_open(), sv[2];
	struct evq_event ev[8];

	pair(sv);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_LEVEL, 0, 1, NULL);
	CHECK(evq_get(q, ev, 8, 0) == 0, "idle");
	evq_declare(q, sv[0], EVQ_WRITE, EVQ_MODE_LEVEL, 0, 2, NULL);
	CHECK(evq_get(q, ev, 8, 1000 * MS) == 1, "one event");
	CHECK(ev[0].token == 2 && (ev[0].mask & EVQ_WRITE) && !(ev[0].mask & EVQ_READ),
	      "token %llu mask %#x", (unsigned long long)ev[0].token, ev[0].mask);
	close(sv[0]);
	close(sv[1]);
	close(q);
}

static void one_pending_event_per_descriptor(void)
{
	int q = evq_open(), sv[2];
	struct evq_event ev[64];

	pair(sv);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_EVENT, 0, 1, NULL);
	for (int i = 0; i < 10; i++)
		put(sv[1], 1);
	CHECK(evq_get(q, ev, 64, 1000 * MS) == 1, "ten arrivals, one event");
	close(sv[0]);
	close(sv[1]);
	close(q);
}

static void fifo_among_ready(void)
{
	int q = evq_open(), sv[20][2], order[20], got = 0, delivered[20];
	struct evq_event ev[3];

	for (int i = 0; i < 20; i++) {
		pair(sv[i]);
		evq_declare(q, sv[i][0], EVQ_READ, EVQ_MODE_EVENT, 0, i, NULL);
	}
	CHECK(evq_get(q, ev, 3, 0) == 0, "idle");
	for (int i = 0; i < 20; i++) {
		order[i] = (i * 7 + 3) % 20;
		put(sv[order[i]][1], 1);
	}
	while (got < 20) {
		int n = evq_get(q, ev, 3, 1000 * MS);

		REQUIRE(n > 0, "stalled after %d", got);
		for (int k = 0; k < n && got < 20; k++)
			delivered[got++] = (int)ev[k].token;
	}
	for (int i = 0; i < 20; i++)
		CHECK(delivered[i] == order[i], "position %d: %d, wanted %d", i, delivered[i], order[i]);
	for (int i = 0; i < 20; i++) {
		close(sv[i][0]);
		close(sv[i][1]);
	}
	close(q);
}

/* 1,000 ready descriptors and a batch of 1: all delivered within 1,000 calls. */
static void no_starvation_batch_of_one(void)
{
	enum { N = 1000 };
	static int sv[N][2];
	static char seen[N];
	int q = evq_open(), distinct = 0;
	struct evq_event ev;

	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < N; i++) {
		pair(sv[i]);
		evq_declare(q, sv[i][0], EVQ_READ, EVQ_MODE_LEVEL, 0, i, NULL);
		put(sv[i][1], 1);
	}
	for (int i = 0; i < N; i++) {
		int n = evq_get(q, &ev, 1, 1000 * MS);

		REQUIRE(n == 1, "call %d: %d", i, n);
		if (!seen[ev.token]++)
			distinct++;
	}
	CHECK(distinct == N, "starved %d descriptors", N - distinct);
	for (int i = 0; i < N; i++) {
		close(sv[i][0]);
		close(sv[i][1]);
	}
	close(q);
}

static void timeouts(void)
{
	int q = evq_open(), sv[2];
	struct evq_event ev[8];
	int64_t t;

	pair(sv);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_LEVEL, 0, 1, NULL);
	t = now_ns();
	CHECK(evq_get(q, ev, 8, 60 * MS) == 0, "events on an idle queue");
	t = now_ns() - t;
	CHECK(t >= 60 * MS, "returned early: %lld ns", (long long)t);
	t = now_ns();
	CHECK(evq_get(q, ev, 8, 0) == 0, "zero timeout");
	put(sv[1], 1);
	t = now_ns();
	CHECK(evq_get(q, ev, 8, 30000 * MS) == 1, "ready");
	CHECK(now_ns() - t < 5000 * MS, "waited to fill the batch");
	close(sv[0]);
	close(sv[1]);
	close(q);
}

struct waker {
	int fd;
	int delay_ms;
};

static void *waker_thread(void *arg)
{
	struct waker *w = arg;

	usleep(w->delay_ms * 1000);
	put(w->fd, 1);
	return NULL;
}

static void blocking_wait_is_woken(void)
{
	int q = evq_open(), sv[2];
	struct evq_event ev[8];
	struct waker w;
	pthread_t th;
	int64_t t = now_ns();

	pair(sv);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_EVENT, 0, 4, NULL);
	w.fd = sv[1];
	w.delay_ms = 50;
	pthread_create(&th, NULL, waker_thread, &w);
	CHECK(evq_get(q, ev, 8, -1) == 1, "woken");
	CHECK(now_ns() - t >= 40 * MS, "returned early");
	pthread_join(th, NULL);
	close(sv[0]);
	close(sv[1]);
	close(q);
}

static void on_usr1(int sig)
{
	(void)sig;
}

static void signal_interrupts_with_eintr(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	int q = evq_open(), sv[2], n;
	struct evq_event ev[8];

	pair(sv);
	sigaction(SIGUSR1, &sa, NULL);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_LEVEL, 0, 1, NULL);
	if (fork() == 0) {
		usleep(50000);
		kill(getppid(), SIGUSR1);
		_exit(0);
	}
	n = evq_get(q, ev, 8, 5000 * MS);
	CHECK(n == -EINTR, "got %d", n);
	wait(NULL);
	put(sv[1], 1);
	CHECK(evq_get(q, ev, 8, 1000 * MS) == 1, "event after EINTR");
	close(sv[0]);
	close(sv[1]);
	close(q);
}

/* close() without revoke, then the number reused: no stale event, old file released. */
static void closed_and_reused_number(void)
{
	int q = evq_open(), a[2], b[2], number, n;
	struct evq_event ev[8];
	char c;

	pair(a);
	pair(b);
	number = a[0];
	evq_declare(q, number, EVQ_READ, EVQ_MODE_LEVEL, 0, 1, NULL);
	put(a[1], 1); /* pending on the old file */
	REQUIRE(dup2(b[0], number) == number, "dup2"); /* closes the old file's number */
	/* No re-declare yet: the pending event is for a file the number no longer names. */
	n = evq_get(q, ev, 8, 30 * MS);
	CHECK(n == 0, "stale event delivered: %d (token %llu)", n, (unsigned long long)ev[0].token);
	/* Noticing the stale registration released the old file: its peer sees the close. */
	CHECK(write(a[1], "x", 1) < 0 && errno == EPIPE, "old file still open");
	/* EOF, or a reset because the old file died with our byte unread. */
	n = recv(a[1], &c, 1, MSG_DONTWAIT);
	CHECK(n == 0 || (n < 0 && errno == ECONNRESET), "peer saw no close: %d %s", n, strerror(errno));
	evq_declare(q, number, EVQ_READ, EVQ_MODE_LEVEL, 0, 2, NULL);
	CHECK(evq_get(q, ev, 8, 30 * MS) == 0, "spurious event for the new registration");
	put(b[1], 1);
	n = evq_get(q, ev, 8, 1000 * MS);
	CHECK(n == 1 && ev[0].token == 2, "new registration works: %d", n);
	close(number);
	close(a[1]);
	close(b[0]);
	close(b[1]);
	close(q);
}

/* The number reused and declared again before any dequeue: the declare replaces the old registration. */
static void reused_number_declared_again(void)
{
	int q = evq_open(), a[2], b[2], number, keep, n;
	struct evq_event ev[8];
	struct evq_stats st;

	pair(a);
	pair(b);
	number = a[0];
	keep = dup(a[0]); /* the old file outlives the number */
	evq_declare(q, number, EVQ_READ, EVQ_MODE_EVENT, 0, 1, NULL);
	REQUIRE(dup2(b[0], number) == number, "dup2");
	CHECK(evq_declare(q, number, EVQ_READ, EVQ_MODE_EVENT, 0, 2, NULL) == 1,
	      "declare did not say it replaced the old file's registration");
	CHECK(evq_declare(q, number, EVQ_READ, EVQ_MODE_EVENT, 0, 2, NULL) == 0, "plain modify");
	put(a[1], 1);
	n = evq_get(q, ev, 8, 50 * MS);
	CHECK(n == 0, "old file's event delivered to the new registration: %d", n);
	evq_stats(q, &st);
	CHECK(st.registered == 1 && st.stale_dropped == 1, "registered %llu stale %llu",
	      (unsigned long long)st.registered, (unsigned long long)st.stale_dropped);
	put(b[1], 1);
	n = evq_get(q, ev, 8, 1000 * MS);
	CHECK(n == 1 && ev[0].token == 2, "new file's event: %d", n);
	close(keep);
	close(number);
	close(a[1]);
	close(b[0]);
	close(b[1]);
	close(q);
}

/* Revoke goes by number: after a close without revoke it still lets the file go. */
static void revoke_after_close_releases_the_file(void)
{
	int q = evq_open(), sv[2], number;
	char c;

	pair(sv);
	number = sv[0];
	evq_declare(q, number, EVQ_READ, EVQ_MODE_LEVEL, 0, 1, NULL);
	close(number);
	CHECK(recv(sv[1], &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN, "closed too early?");
	CHECK(evq_declare(q, number, 0, 0, 0, 1, NULL) == -EBADF, "revoke of a closed number");
	CHECK(recv(sv[1], &c, 1, MSG_DONTWAIT) == 0, "the queue still holds the file");
	close(sv[1]);
	close(q);
}

/* A dup keeps the file alive after the registered number is closed: still no event. */
static void dup_kept_file_yields_nothing(void)
{
	int q = evq_open(), sv[2], dupfd;
	struct evq_event ev[8];
	struct evq_stats st;

	pair(sv);
	dupfd = dup(sv[0]);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_LEVEL, 0, 1, NULL);
	close(sv[0]);
	put(sv[1], 1);
	CHECK(evq_get(q, ev, 8, 30 * MS) == 0, "event for a closed number");
	evq_stats(q, &st);
	CHECK(st.stale_dropped >= 1 && st.registered == 0, "stale %llu registered %llu",
	      (unsigned long long)st.stale_dropped, (unsigned long long)st.registered);
	close(dupfd);
	close(sv[1]);
	close(q);
}

/* close() without revoke and no further event: the sweep still lets the file go. */
static void idle_closed_registration_is_swept(void)
{
	int q = evq_open(), sv[2], fillers[64][2], got_eof = 0;
	struct evq_event ev[8];
	char c;

	for (int i = 0; i < 64; i++) {
		pair(fillers[i]);
		evq_declare(q, fillers[i][0], EVQ_READ, EVQ_MODE_LEVEL, 0, 100 + i, NULL);
	}
	pair(sv);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_LEVEL, 0, 1, NULL);
	close(sv[0]);
	/* 65 registrations, 8 checked per idle call: 9 calls cover them all. */
	for (int i = 0; i < 20 && !got_eof; i++) {
		evq_get(q, ev, 8, 0);
		got_eof = recv(sv[1], &c, 1, MSG_DONTWAIT) == 0;
	}
	CHECK(got_eof, "the closed socket is still held open by the queue");
	for (int i = 0; i < 64; i++) {
		close(fillers[i][0]);
		close(fillers[i][1]);
	}
	close(sv[1]);
	close(q);
}

static void hangup_is_reported(void)
{
	int q = evq_open(), sv[2];
	struct evq_event ev[8];

	pair(sv);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_EVENT, 0, 1, NULL);
	close(sv[1]);
	CHECK(evq_get(q, ev, 8, 1000 * MS) == 1, "no event for hang-up");
	CHECK(ev[0].mask & EVQ_READ && ev[0].mask & EVQ_HUP, "mask %#x", ev[0].mask);
	close(sv[0]);
	close(q);
}

static void many_kinds_of_files(void)
{
	int q = evq_open(), p[2], efd, tfd, fd;
	struct evq_event ev[8];
	uint64_t one = 1;
	struct itimerspec its = { .it_value = { 0, 10 * MS } };
	unsigned state;

	REQUIRE(pipe2(p, O_NONBLOCK) == 0, "pipe");
	efd = eventfd(0, EFD_NONBLOCK);
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
	evq_declare(q, p[0], EVQ_READ, EVQ_MODE_EVENT, 0, 1, NULL);
	evq_declare(q, efd, EVQ_READ, EVQ_MODE_EVENT, 0, 2, NULL);
	evq_declare(q, tfd, EVQ_READ, EVQ_MODE_EVENT, 0, 3, NULL);
	put(p[1], 1);
	CHECK(write(efd, &one, 8) == 8, "eventfd write");
	timerfd_settime(tfd, 0, &its, NULL);
	int seen = 0;
	for (int i = 0; i < 10 && seen != 7; i++) {
		int n = evq_get(q, ev, 8, 1000 * MS);

		for (int k = 0; k < n; k++)
			seen |= 1 << (ev[k].token - 1);
	}
	CHECK(seen == 7, "pipe, eventfd and timerfd seen: %#x", seen);
	/* Regular files: refused as epoll refuses them. */
	fd = open("/init", O_RDONLY);
	CHECK(evq_declare(q, fd, EVQ_READ, 0, 0, 4, &state) == -EPERM, "regular file");
	/* A queue in a queue could hold itself: refused. */
	CHECK(evq_declare(q, q, EVQ_READ, 0, 0, 5, NULL) == -EINVAL, "evq in evq");
	int dp = open("/dev/poll", O_RDWR);
	CHECK(evq_declare(q, dp, EVQ_READ, 0, 0, 6, NULL) == -EINVAL, "/dev/poll in evq");
	close(dp);
	close(fd);
	close(p[0]);
	close(p[1]);
	close(efd);
	close(tfd);
	close(q);
}

/*
 * POLLFREE: a signalfd's wait queue is its poller's sighand, freed when that
 * process exits while the file lives on. The hook must unlink itself
 * (__wake_up_pollfree WARNs otherwise) and removal must not touch the dead head.
 */
static void pollfree_signalfd(void)
{
	int q = evq_open(), sfd, status;
	sigset_t set;
	struct evq_stats st;
	struct evq_event ev[8];
	pid_t child;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	sfd = signalfd(-1, &set, SFD_NONBLOCK);
	REQUIRE(q >= 0 && sfd >= 0, "set-up");
	child = fork();
	if (child == 0) {
		/* Hooks this child's sighand->signalfd_wqh. */
		_exit(evq_declare(q, sfd, EVQ_READ, EVQ_MODE_LEVEL, 0, 1, NULL) == 0 ? 0 : 1);
	}
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child declare");
	evq_stats(q, &st);
	CHECK(st.pollfree >= 1, "no POLLFREE seen (%llu)", (unsigned long long)st.pollfree);
	evq_get(q, ev, 8, 0);
	CHECK(evq_declare(q, sfd, 0, 0, 0, 1, NULL) == 0, "revoke after POLLFREE");
	close(sfd);
	close(q);
}

/*
 * Wake-one with rotation: four queues registered on one listening socket,
 * each connection wakes exactly one, in turn.
 */
static void wake_one_rotates_over_four_queues(void)
{
	struct sockaddr_in a;
	int l = tcp_listener(&a), q[4], expect = 0;
	struct evq_event ev[8];

	for (int i = 0; i < 4; i++) {
		q[i] = evq_open();
		CHECK(evq_declare(q[i], l, EVQ_READ, EVQ_MODE_EVENT, EVQ_WAKE_ONE, i, NULL) == 0,
		      "declare %d", i);
	}
	for (int conn = 0; conn < 12; conn++) {
		int c = socket(AF_INET, SOCK_STREAM, 0), woken = -1, count = 0, s;

		REQUIRE(connect(c, (void *)&a, sizeof(a)) == 0, "connect");
		for (int tries = 0; tries < 1000 && woken < 0; tries++) {
			for (int i = 0; i < 4; i++)
				if (evq_get(q[i], ev, 8, 0) == 1) {
					woken = i;
					count++;
				}
			if (woken < 0)
				usleep(1000);
		}
		for (int i = 0; i < 4; i++)
			count += evq_get(q[i], ev, 8, 0);
		CHECK(count == 1, "connection %d woke %d queues", conn, count);
		CHECK(woken == expect, "connection %d woke queue %d, rotation expected %d", conn,
		      woken, expect);
		expect = (expect + 1) % 4;
		s = accept(l, NULL, NULL);
		close(s);
		close(c);
	}
	for (int i = 0; i < 4; i++)
		close(q[i]);
	close(l);
}

/* Without wake-one, every queue hears every connection (the herd). */
static void without_wake_one_all_hear(void)
{
	struct sockaddr_in a;
	int l = tcp_listener(&a), q[4], c, count = 0;
	struct evq_event ev[8];

	for (int i = 0; i < 4; i++) {
		q[i] = evq_open();
		evq_declare(q[i], l, EVQ_READ, EVQ_MODE_EVENT, 0, i, NULL);
	}
	c = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(connect(c, (void *)&a, sizeof(a)) == 0, "connect");
	for (int i = 0; i < 4; i++)
		count += evq_get(q[i], ev, 8, 1000 * MS) == 1;
	CHECK(count == 4, "%d of 4 queues heard", count);
	for (int i = 0; i < 4; i++)
		close(q[i]);
	close(c);
	close(l);
}

/* --------------------------------------------------------- the ring */

static void ring_delivers_without_a_syscall(void)
{
	int q = evq_open(), sv[4][2];
	struct evq_uring r;
	struct evq_event ev[8];
	unsigned n;

	REQUIRE(evq_ring_map(q, 64, &r) == 0, "ring");
	CHECK(r.hdr->entries == 64 && r.hdr->abi_version == EVQ_ABI_VERSION, "header");
	for (int i = 0; i < 4; i++) {
		pair(sv[i]);
		evq_declare(q, sv[i][0], EVQ_READ, EVQ_MODE_EVENT, 0, 10 + i, NULL);
	}
	put(sv[2][1], 1);
	put(sv[0][1], 1);
	/* Posted by the wake-ups themselves: visible with no call at all. */
	n = evq_ring_take(&r, ev, 8);
	CHECK(n == 2, "%u events in the ring", n);
	CHECK(n == 2 && ev[0].token == 12 && ev[1].token == 10, "FIFO: %llu %llu",
	      (unsigned long long)ev[0].token, (unsigned long long)ev[1].token);
	CHECK(n == 2 && ev[0].mask == EVQ_READ, "mask %#x", ev[0].mask);
	/* Two wake-ups before consumption: one slot (coalesced). */
	put(sv[1][1], 1);
	put(sv[1][1], 1);
	n = evq_ring_take(&r, ev, 8);
	CHECK(n == 1 && ev[0].token == 11, "coalesced: %u", n);
	CHECK(r.hdr->coalesced >= 1, "coalesced counter %llu", (unsigned long long)r.hdr->coalesced);
	/* Revoke cancels a live slot. */
	put(sv[3][1], 1);
	evq_declare(q, sv[3][0], 0, 0, 0, 13, NULL);
	CHECK(evq_ring_take(&r, ev, 8) == 0, "revoked registration's slot delivered");
	/* The wait path: sleeps while empty, returns as the ring fills. */
	CHECK(evq_ring_get(q, &r, ev, 8, 20 * MS) == 0, "empty ring");
	for (int i = 0; i < 4; i++)
		drain(sv[i][0]);
	/* A READ|WRITE registration goes through the ready list: full current mask. */
	evq_declare(q, sv[0][0], EVQ_READ | EVQ_WRITE, EVQ_MODE_EVENT, 0, 20, NULL);
	n = evq_ring_get(q, &r, ev, 8, 1000 * MS);
	CHECK(n == 1 && ev[0].token == 20 && ev[0].mask == EVQ_WRITE, "initial state %u %#x", n,
	      ev[0].mask);
	put(sv[0][1], 1);
	n = evq_ring_get(q, &r, ev, 8, 1000 * MS);
	CHECK(n == 1 && ev[0].mask == (EVQ_READ | EVQ_WRITE), "current mask %#x", ev[0].mask);
	struct evq_wait w = { .events = (uintptr_t)ev, .array_max = 8 };
	CHECK(ioctl(q, EVQ_GET_NEXT_EVENT, &w) < 0 && errno == EINVAL, "array call on a ring queue");
	munmap(r.hdr, r.bytes);
	for (int i = 0; i < 4; i++) {
		close(sv[i][0]);
		close(sv[i][1]);
	}
	close(q);
}

static void ring_level_and_oneshot(void)
{
	int q = evq_open(), a[2], b[2];
	struct evq_uring r;
	struct evq_event ev[8];

	REQUIRE(evq_ring_map(q, 16, &r) == 0, "ring");
	pair(a);
	pair(b);
	evq_declare(q, a[0], EVQ_READ, EVQ_MODE_LEVEL, 0, 1, NULL);
	evq_declare(q, b[0], EVQ_READ, EVQ_MODE_ONESHOT, 0, 2, NULL);
	put(a[1], 5);
	put(b[1], 5);
	for (int round = 0; round < 3; round++) {
		int n = evq_ring_get(q, &r, ev, 8, 200 * MS), level = 0, oneshot = 0;

		for (int k = 0; k < n; k++) {
			level += ev[k].token == 1;
			oneshot += ev[k].token == 2;
		}
		CHECK(level == 1, "round %d: level reported %d times", round, level);
		CHECK(oneshot == (round == 0), "round %d: oneshot reported %d times", round, oneshot);
	}
	drain(a[0]);
	CHECK(evq_ring_get(q, &r, ev, 8, 0) == 0, "level reported after drain");
	evq_declare(q, b[0], EVQ_READ, EVQ_MODE_ONESHOT, 0, 2, NULL);
	CHECK(evq_ring_get(q, &r, ev, 8, 200 * MS) == 1 && ev[0].token == 2, "oneshot re-armed");
	munmap(r.hdr, r.bytes);
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);
	close(q);
}

/*
 * A oneshot that fired into the ring (here at its declaration, writable) and
 * is not taken yet: data that arrives before the take joins its one report,
 * as a later wake-up joins any live slot. (evq-fuzz's model found the report
 * saying WRITE alone for a readable socket.) Still one report per arming.
 */
static void ring_oneshot_slot_gathers_later_arrivals(void)
{
	int q = evq_open(), sv[2];
	struct evq_uring r;
	struct evq_event ev[4];
	int n;

	REQUIRE(evq_ring_map(q, 16, &r) == 0, "ring");
	pair(sv);
	evq_declare(q, sv[0], EVQ_READ | EVQ_WRITE, EVQ_MODE_ONESHOT, 0, 7, NULL);
	put(sv[1], 1);
	n = evq_ring_get(q, &r, ev, 4, 200 * MS);
	CHECK(n == 1 && ev[0].token == 7, "got %d events", n);
	CHECK(n == 1 && ev[0].mask == (EVQ_READ | EVQ_WRITE), "mask 0x%x, want READ|WRITE",
	      n ? ev[0].mask : 0);
	put(sv[1], 1);
	CHECK(evq_ring_get(q, &r, ev, 4, 0) == 0, "disarmed oneshot reported again");
	munmap(r.hdr, r.bytes);
	close(sv[0]);
	close(sv[1]);
	close(q);
}

/* A descriptor closed without revoke (no dup): its wake-up posts nothing to the ring. */
static void ring_plain_close_posts_nothing(void)
{
	int q = evq_open(), sv[2];
	struct evq_uring r;
	struct evq_event ev[4];
	struct evq_stats st;

	REQUIRE(evq_ring_map(q, 16, &r) == 0, "ring");
	pair(sv);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_LEVEL, 0, 1, NULL);
	close(sv[0]);
	put(sv[1], 1);
	CHECK(r.hdr->tail == r.hdr->head, "posted for a closed number");
	CHECK(evq_ring_get(q, &r, ev, 4, 50 * MS) == 0, "event for a closed number");
	evq_stats(q, &st);
	CHECK(st.registered == 0 && st.stale_dropped == 1, "registered %llu stale %llu",
	      (unsigned long long)st.registered, (unsigned long long)st.stale_dropped);
	munmap(r.hdr, r.bytes);
	close(sv[1]);
	close(q);
}

/* A ring of 8 slots, 300 ready registrations: every one delivered once, in order. */
static void ring_overflow_loses_nothing(void)
{
	enum { N = 300 };
	static int sv[N][2];
	static int count[N];
	int q = evq_open(), got = 0, in_order = 1, last = -1;
	struct evq_uring r;
	struct evq_event ev[5];

	REQUIRE(evq_ring_map(q, 8, &r) == 0, "ring");
	memset(count, 0, sizeof(count));
	for (int i = 0; i < N; i++) {
		pair(sv[i]);
		evq_declare(q, sv[i][0], EVQ_READ, EVQ_MODE_EVENT, 0, i, NULL);
	}
	for (int i = 0; i < N; i++)
		put(sv[i][1], 1);
	/* 8 in the ring; the first that did not fit, and all after it (FIFO), wait in the ready list. */
	CHECK(r.hdr->tail - r.hdr->head == 8, "%u in the ring", r.hdr->tail - r.hdr->head);
	CHECK(r.hdr->overflowed >= 1, "overflowed %llu", (unsigned long long)r.hdr->overflowed);
	while (got < N) {
		int n = evq_ring_get(q, &r, ev, 5, 1000 * MS);

		REQUIRE(n > 0, "stalled after %d: %d", got, n);
		for (int k = 0; k < n; k++) {
			count[ev[k].token]++;
			if ((int)ev[k].token < last)
				in_order = 0;
			last = (int)ev[k].token;
		}
		got += n;
	}
	for (int i = 0; i < N; i++)
		CHECK(count[i] == 1, "token %d delivered %d times", i, count[i]);
	CHECK(in_order, "not FIFO");
	CHECK(evq_ring_get(q, &r, ev, 5, 0) == 0, "extra events");
	munmap(r.hdr, r.bytes);
	for (int i = 0; i < N; i++) {
		close(sv[i][0]);
		close(sv[i][1]);
	}
	close(q);
}

/* ---------------------------------------------------------- bad input */

static void bad_input_is_refused_and_loses_nothing(void)
{
	int q = evq_open(), sv[2], closed_fd;
	struct evq_event ev[8];
	struct evq_interest in = { .interest = EVQ_READ };
	struct evq_wait w = { 0 };
	struct evq_stats st;
	void *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *kernel_ptr = (void *)0xffff888000000000UL;

	pair(sv);
	closed_fd = dup(sv[0]);
	close(closed_fd);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_LEVEL, 0, 1, NULL);
	CHECK(evq_declare(q, -1, EVQ_READ, 0, 0, 2, NULL) == -EBADF, "fd -1");
	CHECK(evq_declare(q, closed_fd, EVQ_READ, 0, 0, 2, NULL) == -EBADF, "closed fd");
	CHECK(evq_declare(q, 1 << 30, EVQ_READ, 0, 0, 2, NULL) == -EBADF, "huge fd");
	CHECK(evq_declare(q, sv[1], 0x80, 0, 0, 2, NULL) == -EINVAL, "unknown interest bit");
	CHECK(evq_declare(q, sv[1], EVQ_HUP, 0, 0, 2, NULL) == -EINVAL, "state bit as interest");
	CHECK(evq_declare(q, sv[1], EVQ_READ, 3, 0, 2, NULL) == -EINVAL, "unknown mode");
	CHECK(evq_declare(q, sv[1], EVQ_READ, 0, 0x2, 2, NULL) == -EINVAL, "unknown flag");
	in.fd = sv[1];
	in.reserved = 1;
	CHECK(ioctl(q, EVQ_DECLARE_INTEREST, &in) < 0 && errno == EINVAL, "reserved");
	CHECK(ioctl(q, EVQ_DECLARE_INTEREST, NULL) < 0 && errno == EFAULT, "NULL argument");
	CHECK(ioctl(q, EVQ_DECLARE_INTEREST, kernel_ptr) < 0 && errno == EFAULT, "kernel pointer");
	/* A read-only argument: refused before anything is registered. */
	/* (The page is zeroes: fd 0, interest 0, a revoke that must not happen.) */
	CHECK(ioctl(q, EVQ_DECLARE_INTEREST, ro) < 0 && errno == EFAULT, "read-only argument");
	evq_stats(q, &st);
	CHECK(st.registered == 1, "registered %llu after bad declares", (unsigned long long)st.registered);

	w.array_max = 0;
	w.events = (uintptr_t)ev;
	CHECK(ioctl(q, EVQ_GET_NEXT_EVENT, &w) < 0 && errno == EINVAL, "array_max 0");
	w.array_max = EVQ_MAX_EVENTS + 1;
	CHECK(ioctl(q, EVQ_GET_NEXT_EVENT, &w) < 0 && errno == EINVAL, "absurd array_max");
	w.array_max = 8;
	w.flags = 0x80;
	CHECK(ioctl(q, EVQ_GET_NEXT_EVENT, &w) < 0 && errno == EINVAL, "unknown wait flag");
	w.flags = EVQ_WAIT_RING;
	w.events = 0;
	w.array_max = 0;
	CHECK(ioctl(q, EVQ_GET_NEXT_EVENT, &w) < 0 && errno == EINVAL, "ring wait without a ring");
	CHECK(ioctl(q, EVQ_GET_NEXT_EVENT, NULL) < 0 && errno == EFAULT, "NULL wait");
	CHECK(ioctl(q, 0xE7FF, NULL) < 0 && errno == ENOTTY, "unknown ioctl");

	/* Something ready, a pointer that faults: EFAULT, and the event stays. */
	put(sv[1], 1);
	w.flags = 0;
	w.array_max = 8;
	w.events = (uintptr_t)kernel_ptr;
	CHECK(ioctl(q, EVQ_GET_NEXT_EVENT, &w) < 0 && errno == EFAULT, "kernel array");
	w.events = (uintptr_t)ro;
	CHECK(ioctl(q, EVQ_GET_NEXT_EVENT, &w) < 0 && errno == EFAULT, "read-only array");
	w.events = 8; /* user range, unmapped */
	CHECK(ioctl(q, EVQ_GET_NEXT_EVENT, &w) < 0 && errno == EFAULT, "unmapped array");
	CHECK(evq_get(q, ev, 8, 1000 * MS) == 1 && ev[0].token == 1, "event lost after EFAULT");

	/* Ring set-up. */
	struct evq_ring_setup s = { .entries = 3 };
	CHECK(ioctl(q, EVQ_SETUP_RING, &s) < 0 && errno == EINVAL, "entries not a power of two");
	s.entries = 0;
	CHECK(ioctl(q, EVQ_SETUP_RING, &s) < 0 && errno == EINVAL, "0 entries");
	s.entries = EVQ_RING_MAX_ENTRIES * 2;
	CHECK(ioctl(q, EVQ_SETUP_RING, &s) < 0 && errno == EINVAL, "too many entries");
	s.entries = 16;
	s.flags = 1;
	CHECK(ioctl(q, EVQ_SETUP_RING, &s) < 0 && errno == EINVAL, "ring flags");
	CHECK(mmap(NULL, 4096 * 2, PROT_READ | PROT_WRITE, MAP_SHARED, q, 0) == MAP_FAILED &&
		      errno == ENODEV, "mmap before set-up");
	s.flags = 0;
	CHECK(ioctl(q, EVQ_SETUP_RING, &s) == 0, "set-up");
	CHECK(ioctl(q, EVQ_SETUP_RING, &s) < 0 && errno == EBUSY, "second ring");
	CHECK(mmap(NULL, s.mmap_bytes * 2, PROT_READ | PROT_WRITE, MAP_SHARED, q, 0) == MAP_FAILED &&
		      errno == EINVAL, "mmap too long");
	CHECK(mmap(NULL, s.mmap_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, q, 0) == MAP_FAILED &&
		      errno == EINVAL, "private mapping");
	CHECK(mmap(NULL, s.mmap_bytes, PROT_READ, MAP_SHARED, q, 4096) == MAP_FAILED &&
		      errno == EINVAL, "offset");
	munmap(ro, 4096);
	close(sv[0]);
	close(sv[1]);
	close(q);
}

/* A process that writes nonsense into the ring's head hurts only itself. */
static void ring_garbage_head_is_harmless(void)
{
	int q = evq_open(), sv[2];
	struct evq_uring r;
	struct evq_event ev[4];

	REQUIRE(evq_ring_map(q, 4, &r) == 0, "ring");
	pair(sv);
	evq_declare(q, sv[0], EVQ_READ, EVQ_MODE_LEVEL, 0, 1, NULL);
	for (uint32_t junk = 0; junk < 64; junk++) {
		r.hdr->head = junk * 0x9e3779b9u;
		put(sv[1], 1);
		struct evq_wait w = { .flags = EVQ_WAIT_RING };
		ioctl(q, EVQ_GET_NEXT_EVENT, &w);
	}
	/* Back to sense: head = tail, then the event still comes. */
	r.hdr->head = r.hdr->tail;
	CHECK(evq_ring_get(q, &r, ev, 4, 1000 * MS) >= 1, "no event after a confused head");
	munmap(r.hdr, r.bytes);
	close(sv[0]);
	close(sv[1]);
	close(q);
}

/* Both devices, briefly: what the load/unload loop runs between insmod and rmmod. */
static void devpoll_smoke(void)
{
	int dp = open("/dev/poll", O_RDWR), sv[2];
	struct pollfd p, out[2];
	struct dvpoll dv = { .dp_fds = out, .dp_nfds = 2, .dp_timeout = 1000 };

	REQUIRE(dp >= 0, "open /dev/poll: %s", strerror(errno));
	pair(sv);
	p.fd = sv[0];
	p.events = POLLIN;
	CHECK(write(dp, &p, sizeof(p)) == sizeof(p), "write");
	put(sv[1], 1);
	CHECK(ioctl(dp, DP_POLL, &dv) == 1, "DP_POLL");
	close(sv[0]);
	close(sv[1]);
	close(dp);
}

int main(int argc, char **argv)
{
	struct rlimit rl = { 65536, 65536 };

	setrlimit(RLIMIT_NOFILE, &rl);
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1 && !strcmp(argv[1], "--smoke")) {
		RUN(state_at_registration);
		RUN(ring_delivers_without_a_syscall);
		RUN(devpoll_smoke);
		return tap_done("evq_semantics --smoke");
	}
	printf("# evq_semantics: /dev/evq\n");
	RUN(state_at_registration);
	RUN(accept_then_register_race);
	RUN(level_reports_until_drained);
	RUN(event_mode_once_per_happening);
	RUN(event_mode_suppresses_stale);
	RUN(oneshot_disarms);
	RUN(empty_interest_revokes);
	RUN(modify_changes_interest_and_token);
	RUN(one_pending_event_per_descriptor);
	RUN(fifo_among_ready);
	RUN(no_starvation_batch_of_one);
	RUN(timeouts);
	RUN(blocking_wait_is_woken);
	RUN(signal_interrupts_with_eintr);
	RUN(closed_and_reused_number);
	RUN(reused_number_declared_again);
	RUN(revoke_after_close_releases_the_file);
	RUN(dup_kept_file_yields_nothing);
	RUN(idle_closed_registration_is_swept);
	RUN(hangup_is_reported);
	RUN(many_kinds_of_files);
	RUN(pollfree_signalfd);
	RUN(wake_one_rotates_over_four_queues);
	RUN(without_wake_one_all_hear);
	RUN(ring_delivers_without_a_syscall);
	RUN(ring_level_and_oneshot);
	RUN(ring_oneshot_slot_gathers_later_arrivals);
	RUN(ring_plain_close_posts_nothing);
	RUN(ring_overflow_loses_nothing);
	RUN(bad_input_is_refused_and_loses_nothing);
	RUN(ring_garbage_head_is_harmless);
	return tap_done("evq_semantics");
}
