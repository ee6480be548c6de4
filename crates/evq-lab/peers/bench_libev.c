#include "bench_common.h"
#include <ev.h>

static void read_cb(struct ev_loop *loop, ev_io *w, int revents) {
    (void)loop;
    (void)revents;
    on_readable((int)(intptr_t)w->data);
}

static const char *backend_name(unsigned b) {
    switch (b) {
    case EVBACKEND_SELECT: return "select";
    case EVBACKEND_POLL: return "poll";
    case EVBACKEND_EPOLL: return "epoll";
    default: return "other";
    }
}

int main(int argc, char **argv) {
    setup(argc, argv);
    int reps = atoi(argv[4]);
    struct ev_loop *loop = ev_default_loop(EVFLAG_AUTO);
    ev_io *ios = calloc((size_t)num_pipes, sizeof *ios);
    for (int i = 0; i < num_pipes; i++) {
        ev_io_init(&ios[i], read_cb, pipes[2 * i], EV_READ);
        ios[i].data = (void *)(intptr_t)i;
        ev_io_start(loop, &ios[i]);
    }
    printf("{\"library\":\"libev\",\"version\":\"%d.%d\",\"backend\":\"%s\",\"us_per_run\":[", ev_version_major(),
           ev_version_minor(), backend_name(ev_backend(loop)));
    for (int r = 0; r < reps; r++) {
        start_run();
        double t0 = now_us();
        while (count != fired)
            ev_run(loop, EVRUN_ONCE);
        printf("%s%.2f", r ? "," : "", now_us() - t0);
    }
    printf("],\"reads\":%ld}\n", total_reads);
    return 0;
}
