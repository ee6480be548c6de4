/* devpollperf.c — the Solaris /dev/poll "devpollperf" test, ported to the paper's
 * API: N pipes, interest in every read end; each round writes one byte to a random
 * pipe, calls get_next_event, checks that exactly that pipe is reported, and reads
 * the byte back. With an event queue the cost per round should not grow with N.
 *
 *   devpollperf [npipes [rounds [seed]]]     (defaults 1000 10000 1)
 *
 * Prints the time per round; exits 1 on any wrong or missing event.
 */
#define _GNU_SOURCE
#include <evq.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int npipes = argc > 1 ? atoi(argv[1]) : 1000;
    long rounds = argc > 2 ? atol(argv[2]) : 10000;
    unsigned seed = argc > 3 ? (unsigned)atoi(argv[3]) : 1;
    if (npipes <= 0 || rounds <= 0) {
        fprintf(stderr, "usage: devpollperf [npipes [rounds [seed]]]\n");
        return 2;
    }

    /* Two descriptors a pipe, plus a few: raise the soft limit if needed. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)(2 * npipes + 16)) {
        rl.rlim_cur = (rlim_t)(2 * npipes + 16);
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max)
            rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    int (*pipes)[2] = calloc((size_t)npipes, sizeof *pipes);
    int *owner = NULL; /* read fd -> pipe index */
    int maxfd = 0;
    if (!pipes) {
        perror("calloc");
        return 1;
    }
    for (int i = 0; i < npipes; i++) {
        if (pipe2(pipes[i], O_NONBLOCK | O_CLOEXEC) < 0) {
            fprintf(stderr, "pipe %d: %s\n", i, strerror(errno));
            return 1;
        }
        if (pipes[i][0] > maxfd)
            maxfd = pipes[i][0];
        int state;
        if (declare_interest(pipes[i][0], EVENT_READ, &state) < 0) {
            fprintf(stderr, "declare_interest(%d): %s\n", pipes[i][0], strerror(errno));
            return 1;
        }
        if (state & EVENT_READ) {
            fprintf(stderr, "fresh pipe %d reported readable\n", i);
            return 1;
        }
    }
    owner = malloc(((size_t)maxfd + 1) * sizeof *owner);
    if (!owner) {
        perror("malloc");
        return 1;
    }
    for (int i = 0; i < npipes; i++)
        owner[pipes[i][0]] = i;

    srand(seed);
    event_descr_t ev[16];
    struct timeval timeout = {5, 0};
    double start = now();
    for (long r = 0; r < rounds; r++) {
        int i = rand() % npipes;
        char c = (char)r;
        if (write(pipes[i][1], &c, 1) != 1) {
            perror("write");
            return 1;
        }
        int n = get_next_event(16, ev, &timeout);
        if (n != 1 || ev[0].fd != pipes[i][0] || !(ev[0].mask & EVENT_READ)) {
            fprintf(stderr, "round %ld: wrote pipe %d (fd %d), got %d events, first fd %d (%s)\n",
                    r, i, pipes[i][0], n, n > 0 ? ev[0].fd : -1, n < 0 ? strerror(errno) : "");
            return 1;
        }
        char back;
        if (read(ev[0].fd, &back, 1) != 1 || back != c || owner[ev[0].fd] != i) {
            fprintf(stderr, "round %ld: read back the wrong byte\n", r);
            return 1;
        }
    }
    double elapsed = now() - start;
    printf("devpollperf: %d pipes, %ld rounds, %.3f s, %.2f us/round\n", npipes, rounds,
           elapsed, elapsed / rounds * 1e6);

    for (int i = 0; i < npipes; i++) {
        close(pipes[i][0]);
        close(pipes[i][1]);
    }
    free(owner);
    free(pipes);
    return 0;
}
