#include "bench_common.h"
#include <event2/event.h>

static void read_cb(evutil_socket_t fd, short which, void *arg) {
    (void)fd;
    (void)which;
    on_readable((int)(intptr_t)arg);
}

int main(int argc, char **argv) {
    setup(argc, argv);
    int reps = atoi(argv[4]);
    struct event_base *base = event_base_new();
    for (int i = 0; i < num_pipes; i++) {
        struct event *ev = event_new(base, pipes[2 * i], EV_READ | EV_PERSIST, read_cb, (void *)(intptr_t)i);
        event_add(ev, NULL);
    }
    printf("{\"library\":\"libevent\",\"version\":\"%s\",\"backend\":\"%s\",\"us_per_run\":[", event_get_version(),
           event_base_get_method(base));
    for (int r = 0; r < reps; r++) {
        start_run();
        double t0 = now_us();
        while (count != fired)
            event_base_loop(base, EVLOOP_ONCE);
        printf("%s%.2f", r ? "," : "", now_us() - t0);
    }
    printf("],\"reads\":%ld}\n", total_reads);
    return 0;
}
