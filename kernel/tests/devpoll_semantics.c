// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * devpoll_semantics.c - the in-kernel /dev/poll against Solaris poll(7d)
 * (SEEDS 004) as kernel/README.md states it for Linux.
 */
#define _GNU_SOURCE
#include "tap.h"
#include "evq.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static int dp_open(void)
{
	return open("/dev/poll", O_RDWR | O_CLOEXEC);
}

static int dp_add(int dp, int fd, short events)
{
	struct pollfd p = { .fd = fd, .events = events };
	ssize_t n = write(dp, &p, sizeof(p));

	return n == sizeof(p) ? 0 : -errno;
}

static int dp_poll(int dp, struct pollfd *out, unsigned long n, int timeout_ms)
{
	struct dvpoll dv = { .dp_fds = out, .dp_nfds = n, .dp_timeout = timeout_ms };
	int r = ioctl(dp, DP_POLL, &dv);

	return r < 0 ? -errno : r;
}

static int dp_ispolled(int dp, int fd, short *events)
{
	struct pollfd p = { .fd = fd };
	int r = ioctl(dp, DP_ISPOLLED, &p);

	if (r == 1 && events)
		*events = p.events;
	return r < 0 ? -errno : r;
}

static void pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		abort();
}

static void put(int fd)
{
	if (write(fd, "x", 1) != 1)
		abort();
}

static void basic_dense_array(void)
{
	int dp = dp_open(), sv[8][2], n;
	struct pollfd out[16];

	REQUIRE(dp >= 0, "open /dev/poll: %s", strerror(errno));
	for (int i = 0; i < 8; i++) {
		pair(sv[i]);
		CHECK(dp_add(dp, sv[i][0], POLLIN) == 0, "add");
	}
	CHECK(dp_poll(dp, out, 16, 0) == 0, "idle set reported");
	put(sv[5][1]);
	put(sv[2][1]);
	n = dp_poll(dp, out, 16, 1000);
	CHECK(n == 2, "%d ready", n);
	CHECK(n == 2 && out[0].fd == sv[5][0] && out[1].fd == sv[2][0], "dense, in arrival order");
	CHECK(n >= 1 && out[0].events == POLLIN && (out[0].revents & POLLIN), "events %#x revents %#x",
	      out[0].events, out[0].revents);
	/* Level-triggered: reported again until read. */
	CHECK(dp_poll(dp, out, 16, 0) == 2, "level");
	for (int i = 0; i < 8; i++) {
		close(sv[i][0]);
		close(sv[i][1]);
	}
	close(dp);
}

static void writes_or_events_and_remove(void)
{
	int dp = dp_open(), sv[2];
	short ev = 0;
	struct pollfd out[4];

	pair(sv);
	dp_add(dp, sv[0], POLLIN);
	dp_add(dp, sv[0], POLLOUT);
	CHECK(dp_ispolled(dp, sv[0], &ev) == 1, "ispolled");
	CHECK(ev == (POLLIN | POLLOUT), "ORed events %#x", ev);
	CHECK(dp_poll(dp, out, 4, 1000) == 1 && (out[0].revents & POLLOUT), "writable");
	CHECK(dp_add(dp, sv[0], POLLREMOVE) == 0, "remove");
	CHECK(dp_ispolled(dp, sv[0], NULL) == 0, "still polled after POLLREMOVE");
	CHECK(dp_poll(dp, out, 4, 0) == 0, "removed fd reported");
	CHECK(dp_add(dp, sv[0], POLLREMOVE) == 0, "removing what is not there");
	CHECK(dp_add(dp, -1, POLLIN) == 0, "negative fd ignored");
	CHECK(dp_ispolled(dp, -1, NULL) == 0, "negative fd polled");
	close(sv[0]);
	close(sv[1]);
	close(dp);
}

static void invalid_and_regular_files(void)
{
	int dp = dp_open(), sv[2], file, closed, n;
	struct pollfd out[4];

	pair(sv);
	closed = dup(sv[0]);
	close(closed);
	CHECK(dp_add(dp, closed, POLLIN) == 0, "not-open fd accepted");
	n = dp_poll(dp, out, 4, 0);
	CHECK(n == 1 && out[0].fd == closed && out[0].revents == POLLNVAL, "POLLNVAL: %d %#x", n,
	      n > 0 ? out[0].revents : 0);
	dp_add(dp, closed, POLLREMOVE);
	file = open("/init", O_RDONLY);
	CHECK(dp_add(dp, file, POLLIN | POLLOUT) == 0, "regular file");
	n = dp_poll(dp, out, 4, 0);
	CHECK(n == 1 && out[0].revents == (POLLIN | POLLOUT), "regular file always ready: %#x",
	      n > 0 ? out[0].revents : 0);
	CHECK(dp_add(dp, dp, POLLIN) == -EINVAL, "/dev/poll in itself");
	close(file);
	close(sv[0]);
	close(sv[1]);
	close(dp);
}

/*
 * Closed without POLLREMOVE: never a stale event. Once noticed, the entry
 * follows the number as poll(2) would: POLLNVAL while it is not open, the new
 * file's state if it was reused (Solaris revalidates the same way).
 */
static void closed_without_remove(void)
{
	int dp = dp_open(), a[2], b[2], c[2], number, n, nval = 0;
	struct pollfd out[4];

	pair(a);
	pair(b);
	number = a[0];
	dp_add(dp, number, POLLIN);
	REQUIRE(dup2(b[0], number) == number, "dup2");
	put(a[1]); /* the old file fires */
	n = dp_poll(dp, out, 4, 100);
	CHECK(n == 0, "stale event for the reused number: %d %#x", n, n > 0 ? out[0].revents : 0);
	put(b[1]);
	n = dp_poll(dp, out, 4, 1000);
	CHECK(n == 1 && out[0].fd == number && out[0].revents == POLLIN, "reused number: %d %#x", n,
	      n > 0 ? out[0].revents : 0);
	/* Written again, it is watched again. */
	dp_add(dp, number, POLLIN);
	n = dp_poll(dp, out, 4, 1000);
	CHECK(n == 1 && out[0].revents == POLLIN, "re-watched: %d %#x", n, n > 0 ? out[0].revents : 0);
	dp_add(dp, number, POLLREMOVE);

	/* Closed and not reused: POLLNVAL, within two calls (the first notices). */
	pair(c);
	dp_add(dp, c[0], POLLIN);
	close(c[0]);
	put(c[1]);
	for (int i = 0; i < 2 && !nval; i++) {
		n = dp_poll(dp, out, 4, 0);
		nval = n == 1 && out[0].fd == c[0] && out[0].revents == POLLNVAL;
	}
	CHECK(nval, "no POLLNVAL for a closed entry");
	close(c[1]);
	close(number);
	close(a[1]);
	close(b[0]);
	close(b[1]);
	close(dp);
}

static void no_starvation_small_array(void)
{
	enum { N = 1000 };
	static int sv[N][2];
	static char seen[N];
	int dp = dp_open(), distinct = 0, base;
	struct pollfd out[1];

	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < N; i++) {
		pair(sv[i]);
		dp_add(dp, sv[i][0], POLLIN);
		put(sv[i][1]);
	}
	base = sv[0][0];
	for (int i = 0; i < N; i++) {
		REQUIRE(dp_poll(dp, out, 1, 1000) == 1, "call %d", i);
		for (int k = 0; k < N; k++)
			if (sv[k][0] == out[0].fd && !seen[k]++)
				distinct++;
	}
	(void)base;
	CHECK(distinct == N, "starved %d", N - distinct);
	for (int i = 0; i < N; i++) {
		close(sv[i][0]);
		close(sv[i][1]);
	}
	close(dp);
}

static void bad_input(void)
{
	int dp = dp_open(), sv[2];
	struct pollfd p = { 0 }, out[2];
	struct dvpoll dv = { .dp_fds = out, .dp_nfds = DP_MAX_NFDS + 1UL };
	void *kernel_ptr = (void *)0xffff888000000000UL;

	pair(sv);
	CHECK(write(dp, &p, 3) < 0 && errno == EINVAL, "partial record");
	p.fd = sv[0];
	p.events = 0x4000;
	CHECK(write(dp, &p, sizeof(p)) < 0 && errno == EINVAL, "unknown event bit");
	CHECK(write(dp, kernel_ptr, sizeof(p)) < 0 && errno == EFAULT, "kernel buffer");
	CHECK(ioctl(dp, DP_POLL, &dv) < 0 && errno == EINVAL, "absurd dp_nfds");
	dv.dp_nfds = 0;
	CHECK(ioctl(dp, DP_POLL, &dv) == 0, "zero dp_nfds");
	dp_add(dp, sv[0], POLLIN);
	put(sv[1]);
	dv.dp_nfds = 2;
	dv.dp_fds = kernel_ptr;
	CHECK(ioctl(dp, DP_POLL, &dv) < 0 && errno == EFAULT, "kernel dp_fds");
	dv.dp_fds = (void *)8;
	CHECK(ioctl(dp, DP_POLL, &dv) < 0 && errno == EFAULT, "unmapped dp_fds");
	CHECK(ioctl(dp, DP_POLL, NULL) < 0 && errno == EFAULT, "NULL dvpoll");
	CHECK(ioctl(dp, DP_ISPOLLED, NULL) < 0 && errno == EFAULT, "NULL pollfd");
	CHECK(ioctl(dp, 0xD0FF, NULL) < 0 && errno == ENOTTY, "unknown ioctl");
	CHECK(dp_poll(dp, out, 2, 1000) == 1, "event lost after EFAULT");
	/* Two records, the second bad: the first applies, write says so. */
	struct pollfd two[2] = { { .fd = sv[1], .events = POLLOUT }, { .fd = sv[1], .events = 0x4000 } };
	CHECK(write(dp, two, sizeof(two)) == sizeof(two[0]), "partial write count");
	CHECK(dp_ispolled(dp, sv[1], NULL) == 1, "first record applied");
	close(sv[0]);
	close(sv[1]);
	close(dp);
}

int main(void)
{
	struct rlimit rl = { 65536, 65536 };

	setrlimit(RLIMIT_NOFILE, &rl);
	printf("# devpoll_semantics: /dev/poll\n");
	RUN(basic_dense_array);
	RUN(writes_or_events_and_remove);
	RUN(invalid_and_regular_files);
	RUN(closed_without_remove);
	RUN(no_starvation_small_array);
	RUN(bad_input);
	return tap_done("devpoll_semantics");
}
