/* libevent's test/bench.c shape, shared by the peer programs: n socketpairs, a
 * active, w writes chained along the pipes. Usage: prog n a w reps. Prints one
 * JSON line: {"library":..,"backend":..,"us_per_run":[..],"reads":N}. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int num_pipes, num_active, num_writes;
static int *pipes; /* pipes[2*i] read end, pipes[2*i+1] write end */
static int count, writes, fired;
static long total_reads;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void setup(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s n a w reps\n", argv[0]);
        exit(2);
    }
    num_pipes = atoi(argv[1]);
    num_active = atoi(argv[2]);
    num_writes = atoi(argv[3]);
    if (num_pipes < 1 || num_active < 1 || num_active > num_pipes || num_writes < 0) {
        fprintf(stderr, "bad n/a/w\n");
        exit(2);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    pipes = calloc(2 * (size_t)num_pipes, sizeof *pipes);
    for (int i = 0; i < num_pipes; i++) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, &pipes[2 * i]) < 0) {
            perror("socketpair");
            exit(1);
        }
        fcntl(pipes[2 * i], F_SETFL, O_NONBLOCK);
        fcntl(pipes[2 * i + 1], F_SETFL, O_NONBLOCK);
    }
}

/* The read callback's work, identical in every peer. */
static void on_readable(int idx) {
    char ch;
    if (recv(pipes[2 * idx], &ch, 1, 0) == 1) {
        count++;
        total_reads++;
    }
    if (writes) {
        int widx = idx + 1;
        if (widx >= num_pipes)
            widx -= num_pipes;
        if (send(pipes[2 * widx + 1], "e", 1, 0) == 1) {
            writes--;
            fired++;
        }
    }
}

static void start_run(void) {
    int space = num_pipes / num_active;
    for (int i = 0; i < num_active; i++)
        send(pipes[2 * (i * space) + 1], "e", 1, 0);
    fired = num_active;
    count = 0;
    writes = num_writes;
}
