/*
 * The floor for `evq pipebench`: the devpollperf loop (SEEDS 004) written with
 * direct syscalls and nothing else, so every evq figure is a ratio against the
 * same work measured in the same run.
 *
 * Each iteration writes one token to a pseudo-random descriptor (the same
 * xorshift64* sequence the Rust side uses), waits, and reads it back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

enum { RAW_NONE = 0, RAW_POLL = 1, RAW_EPOLL = 2 };

static inline uint64_t next_random(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Returns elapsed nanoseconds for the timed iterations, or -errno. For RAW_POLL,
 * *scan_ns receives the time spent scanning the result array: the user-space
 * half of poll's cost that SEEDS 004's Figure 2 isolates (tick-sampled getrusage
 * cannot resolve it in short runs). */
int64_t evq_raw_loop(int kind, const int *rfds, const int *wfds, int n, int64_t iters,
                     int64_t warmup, uint64_t seed, int token_bytes, int batch,
                     int64_t *scan_ns) {
    uint64_t token = 1, sink = 0;
    struct pollfd *pfds = NULL;
    struct epoll_event *evs = NULL;
    int ep = -1;
    int64_t start = 0, result, scanning = 0;

    if (n <= 0 || batch <= 0 || (token_bytes != 1 && token_bytes != 8))
        return -EINVAL;
    if (kind == RAW_POLL) {
        pfds = calloc((size_t)n, sizeof *pfds);
        if (!pfds)
            return -ENOMEM;
        for (int i = 0; i < n; i++) {
            pfds[i].fd = rfds[i];
            pfds[i].events = POLLIN;
        }
    } else if (kind == RAW_EPOLL) {
        ep = epoll_create1(EPOLL_CLOEXEC);
        evs = calloc((size_t)batch, sizeof *evs);
        if (ep < 0 || !evs) {
            result = ep < 0 ? -errno : -ENOMEM;
            goto out;
        }
        for (int i = 0; i < n; i++) {
            struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
            if (epoll_ctl(ep, EPOLL_CTL_ADD, rfds[i], &ev) < 0) {
                result = -errno;
                goto out;
            }
        }
    } else if (kind != RAW_NONE) {
        return -EINVAL;
    }

    for (int64_t it = 0; it < warmup + iters; it++) {
        if (it == warmup)
            start = now_ns();
        int p = (int)(next_random(&seed) % (uint64_t)n);
        if (write(wfds[p], &token, (size_t)token_bytes) != token_bytes) {
            result = -errno;
            goto out;
        }
        if (kind == RAW_NONE) {
            if (read(rfds[p], &sink, (size_t)token_bytes) != token_bytes) {
                result = -errno;
                goto out;
            }
        } else if (kind == RAW_POLL) {
            int ready = poll(pfds, (nfds_t)n, -1);
            if (ready < 0) {
                result = -errno;
                goto out;
            }
            /* The application's half of poll's cost: scan for results. */
            int64_t scan_start = it >= warmup ? now_ns() : 0;
            for (int i = 0; i < n && ready > 0; i++) {
                if (pfds[i].revents) {
                    ready--;
                    if (read(pfds[i].fd, &sink, (size_t)token_bytes) != token_bytes) {
                        result = -errno;
                        goto out;
                    }
                }
            }
            if (it >= warmup)
                scanning += now_ns() - scan_start;
        } else {
            int got = epoll_wait(ep, evs, batch, -1);
            if (got < 0) {
                result = -errno;
                goto out;
            }
            for (int i = 0; i < got; i++) {
                if (read(rfds[evs[i].data.u32], &sink, (size_t)token_bytes) != token_bytes) {
                    result = -errno;
                    goto out;
                }
            }
        }
    }
    result = now_ns() - start;
    if (scan_ns)
        *scan_ns = scanning;
out:
    free(pfds);
    free(evs);
    if (ep >= 0)
        close(ep);
    return result;
}
