/* hello.c — the smallest libevq program: a pipe, declare_interest, a write,
 * get_next_event, a read.
 *
 *   cc hello.c $(pkg-config --cflags --libs evq) -o hello && ./hello
 */
#include <evq.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
    int p[2], state;
    event_descr_t ev[8];
    struct timeval timeout = {5, 0};
    char buf[16];

    if (pipe(p) < 0) {
        perror("pipe");
        return 1;
    }
    if (declare_interest(p[0], EVENT_READ, &state) < 0) {
        perror("declare_interest");
        return 1;
    }
    printf("declared interest in fd %d, state 0x%x\n", p[0], (unsigned)state);

    if (write(p[1], "hello", 5) != 5) {
        perror("write");
        return 1;
    }
    int n = get_next_event(8, ev, &timeout);
    if (n != 1 || ev[0].fd != p[0] || !(ev[0].mask & EVENT_READ)) {
        fprintf(stderr, "expected one read event on fd %d, got %d (%s)\n", p[0], n,
                n < 0 ? strerror(errno) : "");
        return 1;
    }
    ssize_t got = read(p[0], buf, sizeof buf - 1);
    if (got != 5) {
        perror("read");
        return 1;
    }
    buf[got] = '\0';
    printf("event: fd %d mask 0x%x, read \"%s\"\n", ev[0].fd, ev[0].mask, buf);

    close(p[0]); /* closing removes the interest */
    close(p[1]);
    return 0;
}
