/* The floor: the chain on epoll with no library at all. One epoll instance,
 * every read end added once (level-triggered, the pipe's index as its data),
 * then epoll_wait for up to 1,024 events and the callback for each — the
 * system calls every epoll loop on this chain makes (epoll_wait, then one recv
 * and one send per event) and next to nothing else. No library can do the
 * chain for less, so a contender's time over this one's is what its library
 * costs, and this one's time over the fastest library's bounds what any
 * library could still gain. */
#include "bench_common.h"
#include <errno.h>
#include <sys/epoll.h>

#define EVENTS_PER_WAIT 1024

int main(int argc, char **argv) {
    setup(argc, argv);
    int reps = atoi(argv[4]);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) {
        perror("epoll_create1");
        return 1;
    }
    for (int i = 0; i < num_pipes; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, pipes[2 * i], &ev) < 0) {
            perror("epoll_ctl");
            return 1;
        }
    }
    static struct epoll_event events[EVENTS_PER_WAIT];
    printf("{\"library\":\"raw-epoll\",\"version\":\"none\",\"backend\":\"epoll\",\"us_per_run\":[");
    for (int r = 0; r < reps; r++) {
        start_run();
        double t0 = now_us();
        while (count != fired) {
            int got = epoll_wait(ep, events, EVENTS_PER_WAIT, -1);
            if (got < 0 && errno == EINTR)
                continue;
            if (got < 0) {
                perror("epoll_wait");
                return 1;
            }
            for (int i = 0; i < got; i++)
                on_readable((int)events[i].data.u64);
        }
        printf("%s%.2f", r ? "," : "", now_us() - t0);
    }
    printf("],\"reads\":%ld}\n", total_reads);
    return 0;
}
