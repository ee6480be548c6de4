// The floor under any HTTP/1.1 load client on this machine: N keep-alive connections,
// each sending a request and waiting for the whole reply before the next (httperf's
// --num-calls model), with nothing else: no parsing (the reply's length is learnt
// once, from one exchange, and replies are counted by bytes), no timers, no
// statistics. What it costs per reply is what the kernel charges the client for a
// send and a receive; `evq load` and httperf can be read against it.
//
//   cc -O2 -o floor_client floor_client.c -luring
//   ./floor_client epoll PORT CONNS CALLS   # send + recv a reply, one epoll_wait a batch
//   ./floor_client uring PORT CONNS CALLS   # sends and recvs batched into io_uring_enter
//
// It asks for GET /f1k on 127.0.0.1 (the file the issue 6 runs serve) and prints
// replies/s and CPU (user + system, getrusage) per reply. An experiment, not a tool:
// it trusts the server (fixed-length replies, no errors).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char REQ[] = "GET /f1k HTTP/1.1\r\nHost: 127.0.0.1:8089\r\nUser-Agent: floor\r\n\r\n";
#define MAXC 1024
static int fds[MAXC];
static long got[MAXC], left[MAXC];
static char bufs[MAXC][4096];

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static double cpu(void) { struct rusage r; getrusage(RUSAGE_SELF, &r); return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6; }

static int dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, (void *)&a, sizeof a)) { perror("connect"); exit(1); }
  return fd;
}

int main(int argc, char **argv) {
  if (argc < 5) { fprintf(stderr, "floor epoll|uring PORT CONNS CALLS\n"); return 2; }
  int port = atoi(argv[2]), n = atoi(argv[3]); long calls = atol(argv[4]);
  int uring = !strcmp(argv[1], "uring");
  // Learn the reply's length from one blocking exchange.
  int p = dial(port); write(p, REQ, sizeof REQ - 1);
  char b[8192]; ssize_t r = read(p, b, sizeof b); close(p);
  if (r <= 0) { perror("first reply"); return 1; }
  b[r < (ssize_t)sizeof b ? r : (ssize_t)sizeof b - 1] = 0;
  char *cl = strcasestr(b, "content-length:"), *end = strstr(b, "\r\n\r\n");
  if (!cl || !end) { fprintf(stderr, "first reply has no Content-Length\n"); return 1; }
  long replen = (end - b) + 4 + atol(cl + 15);
  for (int i = 0; i < n; i++) { fds[i] = dial(port); left[i] = calls; }
  long total = (long)n * calls, done = 0;
  double t0 = now(), c0 = cpu();
  if (!uring) {
    int ep = epoll_create1(0);
    for (int i = 0; i < n; i++) {
      struct epoll_event e = {.events = EPOLLIN | EPOLLET, .data.u32 = i};
      epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e);
      send(fds[i], REQ, sizeof REQ - 1, MSG_DONTWAIT);
    }
    struct epoll_event evs[256];
    while (done < total) {
      int k = epoll_wait(ep, evs, 256, -1);
      for (int j = 0; j < k; j++) {
        int i = evs[j].data.u32;
        ssize_t m = recv(fds[i], bufs[i], sizeof bufs[i], MSG_DONTWAIT);
        if (m <= 0) continue;
        got[i] += m;
        while (got[i] >= replen) {
          got[i] -= replen; done++;
          if (--left[i] > 0) send(fds[i], REQ, sizeof REQ - 1, MSG_DONTWAIT);
        }
      }
    }
  } else {
    struct io_uring ring;
    struct io_uring_params prm = {.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN, .cq_entries = 4096};
    prm.flags |= IORING_SETUP_CQSIZE;
    if (io_uring_queue_init_params(1024, &ring, &prm)) { perror("uring"); return 1; }
    io_uring_register_files(&ring, fds, n);
    for (int i = 0; i < n; i++) {
      struct io_uring_sqe *s = io_uring_get_sqe(&ring);
      io_uring_prep_send(s, i, REQ, sizeof REQ - 1, 0); s->flags |= IOSQE_FIXED_FILE | IOSQE_CQE_SKIP_SUCCESS;
      io_uring_sqe_set_data64(s, 1ull << 32 | i);
      s = io_uring_get_sqe(&ring);
      io_uring_prep_recv(s, i, bufs[i], sizeof bufs[i], 0); s->flags |= IOSQE_FIXED_FILE;
      io_uring_sqe_set_data64(s, i);
    }
    while (done < total) {
      io_uring_submit_and_wait(&ring, 1);
      struct io_uring_cqe *cqe; unsigned head, seen = 0;
      io_uring_for_each_cqe(&ring, head, cqe) {
        seen++;
        unsigned long long d = cqe->user_data; int i = d & 0xffffffff;
        if (d >> 32) { if (cqe->res < 0) { fprintf(stderr, "send %d\n", cqe->res); return 1; } continue; }
        if (cqe->res <= 0) { fprintf(stderr, "recv %d\n", cqe->res); return 1; }
        got[i] += cqe->res;
        while (got[i] >= replen) {
          got[i] -= replen; done++;
          if (--left[i] > 0) {
            struct io_uring_sqe *s = io_uring_get_sqe(&ring);
            io_uring_prep_send(s, i, REQ, sizeof REQ - 1, 0); s->flags |= IOSQE_FIXED_FILE | IOSQE_CQE_SKIP_SUCCESS;
            io_uring_sqe_set_data64(s, 1ull << 32 | i);
          }
        }
        if (left[i] > 0 || got[i] > 0) {
          struct io_uring_sqe *s = io_uring_get_sqe(&ring);
          io_uring_prep_recv(s, i, bufs[i], sizeof bufs[i], 0); s->flags |= IOSQE_FIXED_FILE;
          io_uring_sqe_set_data64(s, i);
        }
      }
      io_uring_cq_advance(&ring, seen);
    }
  }
  double t1 = now(), c1 = cpu();
  printf("%s: %ld replies, %.0f replies/s, %.2f us CPU/reply\n", argv[1], done, done / (t1 - t0), (c1 - c0) * 1e6 / done);
  return 0;
}
