#include "bench_common.h"
#include <uv.h>

static void poll_cb(uv_poll_t *h, int status, int events) {
    (void)status;
    (void)events;
    on_readable((int)(intptr_t)h->data);
}

int main(int argc, char **argv) {
    setup(argc, argv);
    int reps = atoi(argv[4]);
    uv_loop_t *loop = uv_default_loop();
    uv_poll_t *polls = calloc((size_t)num_pipes, sizeof *polls);
    for (int i = 0; i < num_pipes; i++) {
        uv_poll_init_socket(loop, &polls[i], pipes[2 * i]);
        polls[i].data = (void *)(intptr_t)i;
        uv_poll_start(&polls[i], UV_READABLE, poll_cb);
    }
    printf("{\"library\":\"libuv\",\"version\":\"%s\",\"backend\":\"epoll\",\"us_per_run\":[", uv_version_string());
    for (int r = 0; r < reps; r++) {
        start_run();
        double t0 = now_us();
        while (count != fired)
            uv_run(loop, UV_RUN_ONCE);
        printf("%s%.2f", r ? "," : "", now_us() - t0);
    }
    printf("],\"reads\":%ld}\n", total_reads);
    return 0;
}
