/* fig3_echo.c — Figure 3 of Banga, Mogul & Druschel (USENIX 1999), "Simplified
 * example of how the new API might be used", made into a working TCP echo server
 * on libevq. main_loop() and InvokeAcceptHandler() are the figure's code (line
 * numbers in the comments); the figure omits the other helpers, which are supplied
 * below.
 *
 * Every connection is declared with EVENT_READ|EVENT_WRITE, as in the figure. With
 * the paper's event semantics (libevq's default on epoll) an idle connection is
 * not reported again and again, so the server sleeps in get_next_event.
 *
 *   fig3_echo [-p port] [-s] [-t seconds]
 *     -p  TCP port on 127.0.0.1 (default 7007; 0 picks a free one)
 *     -s  print counters at every timeout (once a second when idle)
 *     -t  exit after this many seconds
 *   SIGTERM/SIGINT: print the counters and exit 0.
 */
#define _GNU_SOURCE
#include <evq.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TRUE 1
#define MAX_FDS 4096
#define OUTBUF 65536

/* Per-connection state the figure leaves out: bytes read but not yet echoed. */
struct conn {
    int open;
    int read_blocked; /* stopped reading because out[] is full */
    size_t len;
    char out[OUTBUF];
};
static struct conn *conns; /* indexed by fd */
static int listen_fd = -1;

static volatile sig_atomic_t stop;
static int print_stats;
static time_t deadline;
static unsigned long returns_with_events, events_seen, timeouts, accepted,
    bytes_echoed;

static void PrintCounters(const char *why)
{
    printf("%s: returns=%lu events=%lu timeouts=%lu accepted=%lu echoed=%lu\n", why,
           returns_with_events, events_seen, timeouts, accepted, bytes_echoed);
    fflush(stdout);
}

static void SetNonblocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        perror("fcntl(O_NONBLOCK)");
        exit(1);
    }
}

static int ListeningOn(int fd) { return fd == listen_fd; }

static void CloseConnection(int fd)
{
    conns[fd].open = 0;
    close(fd); /* closing removes the interest: no declare_interest(fd, 0) needed */
}

static void DoTimeoutProcessing(void)
{
    timeouts++;
    if (print_stats)
        PrintCounters("timeout");
    if (deadline && time(NULL) >= deadline)
        stop = 1;
}

/* Sends what is pending; returns -1 if the connection died. */
static int Flush(int fd)
{
    struct conn *c = &conns[fd];
    while (c->len > 0) {
        ssize_t n = write(fd, c->out, c->len);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return 0; /* an EVENT_WRITE will say when there is room */
            return -1;
        }
        memmove(c->out, c->out + n, c->len - (size_t)n);
        c->len -= (size_t)n;
        bytes_echoed += (size_t)n;
    }
    return 0;
}

/* Reads until EAGAIN (event semantics: no second report for data already there)
 * and echoes everything back. */
static void InvokeReadHandler(int fd)
{
    struct conn *c = &conns[fd];
    if (!c->open)
        return;
    for (;;) {
        if (c->len == OUTBUF) {
            c->read_blocked = 1; /* resume when the peer takes some output */
            return;
        }
        ssize_t n = read(fd, c->out + c->len, OUTBUF - c->len);
        if (n > 0) {
            c->len += (size_t)n;
            if (Flush(fd) < 0) {
                CloseConnection(fd);
                return;
            }
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        CloseConnection(fd); /* end of file, or an error */
        return;
    }
}

static void InvokeWriteHandler(int fd)
{
    struct conn *c = &conns[fd];
    if (!c->open)
        return;
    if (Flush(fd) < 0) {
        CloseConnection(fd);
        return;
    }
    if (c->read_blocked && c->len < OUTBUF) {
        c->read_blocked = 0;
        InvokeReadHandler(fd);
    }
}

static void Accepted(int newfd)
{
    accepted++;
    if (newfd >= MAX_FDS) {
        close(newfd);
        return;
    }
    conns[newfd].open = 1;
    conns[newfd].read_blocked = 0;
    conns[newfd].len = 0;
}

/* ---- Figure 3 ---------------------------------------------------------- */

#define MAX_EVENTS 64                          /*  1 */
struct event_descr_t event_array[MAX_EVENTS]; /*  2 */

static void InvokeAcceptHandler(int listenfd);

static void main_loop(struct timeval timeout) /*  4 */
{
    int i, n; /*  6 */

    while (TRUE && !stop) { /*  8 (and stop on SIGTERM) */
        /* 9: the figure passes &event_array; the array itself is the pointer. */
        n = get_next_event(MAX_EVENTS, event_array, &timeout);
        if (n < 1) {                               /* 10 */
            if (n < 0)
                perror("get_next_event");
            DoTimeoutProcessing(); continue; /* 11 */
        }
        returns_with_events++;
        events_seen += (unsigned long)n;

        for (i = 0; i < n; i++) {                   /* 14 */
            if (event_array[i].mask & EVENT_READ) {  /* 15 */
                if (ListeningOn(event_array[i].fd))   /* 16 */
                    InvokeAcceptHandler(event_array[i].fd); /* 17 */
                else                                /* 18 */
                    InvokeReadHandler(event_array[i].fd); /* 19 */
            }
            if (event_array[i].mask & EVENT_WRITE)  /* 20 */
                InvokeWriteHandler(event_array[i].fd); /* 21 */
        }
        if (deadline && time(NULL) >= deadline)
            stop = 1;
    }
}

static void InvokeAcceptHandler(int listenfd) /* 26 */
{
    int newfd, statemask; /* 28 */

    while ((newfd = accept(listenfd, NULL, NULL)) >= 0) { /* 30 */
        Accepted(newfd);
        if (newfd >= MAX_FDS)
            continue;
        SetNonblocking(newfd);                          /* 31 */
        if (declare_interest(newfd, EVENT_READ | EVENT_WRITE, /* 32 */
                             &statemask) < 0) {         /* 33 */
            perror("declare_interest");
            CloseConnection(newfd);
            continue;
        }
        if (statemask & EVENT_READ)  /* 34 */
            InvokeReadHandler(newfd); /* 35 */
    }
}

/* ---- setup ------------------------------------------------------------- */

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    int port = 7007, opt;
    while ((opt = getopt(argc, argv, "p:st:")) != -1) {
        switch (opt) {
        case 'p': port = atoi(optarg); break;
        case 's': print_stats = 1; break;
        case 't': deadline = time(NULL) + atoi(optarg); break;
        default:
            fprintf(stderr, "usage: fig3_echo [-p port] [-s] [-t seconds]\n");
            return 2;
        }
    }

    conns = calloc(MAX_FDS, sizeof *conns);
    if (!conns) {
        perror("calloc");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&addr, sizeof addr) < 0 ||
        listen(listen_fd, 1024) < 0 ||
        getsockname(listen_fd, (struct sockaddr *)&addr, &len) < 0) {
        perror("listen");
        return 1;
    }
    SetNonblocking(listen_fd); /* "in initialization code not shown here" */
    if (declare_interest(listen_fd, EVENT_READ, NULL) < 0) {
        perror("declare_interest(listen)");
        return 1;
    }
    printf("listening on 127.0.0.1:%d\n", ntohs(addr.sin_port));
    fflush(stdout);

    struct timeval timeout = {1, 0};
    main_loop(timeout);

    PrintCounters("exit");
    for (int fd = 0; fd < MAX_FDS; fd++)
        if (conns[fd].open)
            close(fd);
    close(listen_fd);
    free(conns);
    return 0;
}
