// Does a multishot io_uring recv always end when its TCP peer sends a few bytes
// and resets at once? evq::completion's quirk o says not always (Linux 6.18):
// this program, on liburing alone, shows it is the kernel, not evq.
//
//   gcc -O2 -o /tmp/mrr scripts/repro/multishot-recv-reset.c -luring
//   /tmp/mrr CONNS SETUP PEEK     (defaults 2000 1 0)
//
// CONNS clients (a forked child) each connect, send 46 bytes of a request head
// and close with SO_LINGER 0 (a reset). The parent accepts them with a
// multishot accept and arms a multishot recv (provided buffers) on each; a
// recv's final completion closes its socket. Two seconds after the last
// client, it prints how many recvs never ended ("stuck"), with poll's revents
// and SO_ERROR for the first few. SETUP: 0 plain ring, 1 SINGLE_ISSUER |
// DEFER_TASKRUN (as evq), 2 SINGLE_ISSUER, 3 COOP_TASKRUN. PEEK 1 adds evq's
// workaround (a MSG_PEEK after each data completion; an error other than
// EAGAIN ends the connection). Seen here, with two CPU hogs beside it: stuck
// 1 in 8 runs of 5,000 without the peek, for setups 1 and 2; 0 with it.
#define _GNU_SOURCE
#include <liburing.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <poll.h>

#define NBUF 256
#define BSZ 4096
#define BGID 1
enum { ST_FREE, ST_OPEN, ST_DATA, ST_ENDED };
static int state[65536];

static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}

int main(int argc, char **argv) {
  int conns = argc > 1 ? atoi(argv[1]) : 2000;
  int flags = argc > 2 ? atoi(argv[2]) : 1; // see SETUP above
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1; setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
  bind(lfd, (void *)&a, sizeof a); listen(lfd, 4096);
  socklen_t al = sizeof a; getsockname(lfd, (void *)&a, &al);
  pid_t kid = fork();
  if (kid == 0) {
    for (int i = 0; i < conns; i++) {
      int s = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(s, (void *)&a, sizeof a)) { perror("connect"); continue; }
      write(s, "GET /small HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ", 46);
      struct linger l = {1, 0}; setsockopt(s, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      close(s);
      if (i % 4 == 0) usleep(100);
    }
    _exit(0);
  }
  struct io_uring ring; struct io_uring_params p = {0};
  if (flags == 1) p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  if (flags == 2) p.flags = IORING_SETUP_SINGLE_ISSUER;
  if (flags == 3) p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
  p.flags |= IORING_SETUP_CQSIZE; p.cq_entries = 4096;
  if (io_uring_queue_init_params(256, &ring, &p)) { perror("init"); return 1; }
  struct io_uring_buf_ring *br; int ret;
  if (posix_memalign((void **)&br, 4096, NBUF * sizeof(struct io_uring_buf))) return 1;
  io_uring_buf_ring_init(br);
  struct io_uring_buf_reg reg = {.ring_addr = (unsigned long)br, .ring_entries = NBUF, .bgid = BGID};
  if ((ret = io_uring_register_buf_ring(&ring, &reg, 0))) { fprintf(stderr, "buf ring %d\n", ret); return 1; }
  char *bufs = malloc(NBUF * BSZ);
  for (int i = 0; i < NBUF; i++) io_uring_buf_ring_add(br, bufs + i * BSZ, BSZ, i, io_uring_buf_ring_mask(NBUF), i);
  io_uring_buf_ring_advance(br, NBUF);
  struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
  io_uring_prep_multishot_accept(sqe, lfd, NULL, NULL, 0); io_uring_sqe_set_data64(sqe, 1ULL << 32);
  int accepted = 0, ended = 0, probed = 0; int probe = argc > 3 ? atoi(argv[3]) : 0; double quiet_since = 0; int kid_done = 0;
  for (;;) {
    struct __kernel_timespec ts = {0, 50000000};
    struct io_uring_cqe *cqe;
    io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, NULL);
    unsigned head, n = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      n++;
      unsigned long long d = cqe->user_data;
      if (d >> 32) {
        if (cqe->res >= 0) {
          int fd = cqe->res; accepted++; state[fd] = ST_OPEN;
          struct io_uring_sqe *s = io_uring_get_sqe(&ring);
          if (!s) { io_uring_submit(&ring); s = io_uring_get_sqe(&ring); }
          io_uring_prep_recv_multishot(s, fd, NULL, 0, 0);
          s->flags |= IOSQE_BUFFER_SELECT; s->buf_group = BGID; io_uring_sqe_set_data64(s, fd);
        } else fprintf(stderr, "accept %d\n", cqe->res);
      } else {
        int fd = (int)d;
        if (cqe->flags & IORING_CQE_F_BUFFER) {
          int bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
          io_uring_buf_ring_add(br, bufs + bid * BSZ, BSZ, bid, io_uring_buf_ring_mask(NBUF), 0);
          io_uring_buf_ring_advance(br, 1);
        }
        if (cqe->res > 0 && state[fd] == ST_OPEN) state[fd] = ST_DATA;
        if (probe && cqe->res > 0 && (cqe->flags & IORING_CQE_F_MORE)) {
          char b; ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
          if (r < 0 && errno != EAGAIN) { probed++; state[fd] = ST_ENDED; ended++; struct io_uring_sqe *cs = io_uring_get_sqe(&ring); io_uring_prep_cancel_fd(cs, fd, 0); io_uring_sqe_set_data64(cs, 0xffffffffULL); }
        }
        if (d == 0xffffffffULL) continue;
        if (!(cqe->flags & IORING_CQE_F_MORE) && state[fd] != ST_ENDED) {
          if (cqe->res == -ENOBUFS) fprintf(stderr, "ENOBUFS fd %d\n", fd);
          state[fd] = ST_ENDED; ended++; close(fd);
        }
      }
    }
    io_uring_cq_advance(&ring, n);
    if (!kid_done && waitpid(kid, NULL, WNOHANG) == kid) { kid_done = 1; quiet_since = now(); }
    if (kid_done && now() - quiet_since > 2.0) break;
  }
  int stuck = 0, stuck_data = 0;
  for (int fd = 0; fd < 65536; fd++) if (state[fd] == ST_OPEN || state[fd] == ST_DATA) {
    stuck++; if (state[fd] == ST_DATA) stuck_data++;
    struct pollfd pf = {fd, POLLIN, 0}; poll(&pf, 1, 0);
    int err = 0; socklen_t el = sizeof err; getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    char b[64]; ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT);
    if (stuck <= 5) fprintf(stderr, "stuck fd %d state %d revents %#x so_error %d recv %zd errno %d\n", fd, state[fd], pf.revents, err, r, r < 0 ? errno : 0);
  }
  printf("probed-reset %d ", probed); printf("flags %d conns %d accepted %d ended %d stuck %d (after data %d)\n", flags, conns, accepted, ended, stuck, stuck_data);
  return 0;
}
