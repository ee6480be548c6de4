/*
 * evq.h — libevq, scalable explicit event delivery for UNIX, from C.
 *
 * Two APIs over the same library (Rust crate `evq`, C face `evq-capi`):
 *
 *  1. The paper's (Banga, Mogul, Druschel, "A scalable and explicit event delivery
 *     mechanism for UNIX", USENIX 1999): declare_interest() / get_next_event() on a
 *     queue that belongs to the calling thread. Created on the thread's first call,
 *     on the backend named by the environment variable EVQ_BACKEND (epoll, uring,
 *     poll, rtsig-bulk, rtsig, select-improved, select) or else the best one
 *     (epoll); freed at thread exit.
 *     Event semantics: a descriptor is reported when something happens to it (data
 *     arrives, buffer space frees), not on every call while it stays ready, so an
 *     idle connection with EVENT_READ|EVENT_WRITE interest costs nothing. Read and
 *     write until EAGAIN before waiting again. The select/poll backends see only
 *     state, and cannot keep these semantics without losing an arrival that comes
 *     after the program drained a descriptor and before it waits again: there,
 *     declare_interest fails with EOPNOTSUPP. EVQ_PAPER_MODE=level asks for level
 *     semantics instead (any backend): a ready descriptor is reported on every
 *     call, so an always-writable socket with EVENT_WRITE interest makes
 *     get_next_event return at once, every time. EVQ_PAPER_MODE=event is the
 *     default; any other value is EINVAL.
 *     Errors: -1 with errno, like a system call.
 *
 *  2. A handle API (evq_*) for several queues per thread, a chosen backend, 64-bit
 *     tokens, level/event/oneshot modes, and cross-thread wake-up. Errors: a
 *     negative EVQ_E* code, with errno set as well.
 *
 * Every call is safe to make with any argument values listed as errors below;
 * pointers must otherwise point where the comments say. No call ever returns
 * EINTR: interrupted waits are resumed with the time that is left.
 *
 * Link: cc prog.c $(pkg-config --cflags --libs evq)   (after `make install`).
 */
#ifndef EVQ_H
#define EVQ_H

#include <stdint.h>
#include <sys/time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- 1. The paper's API ------------------------------------------------- */

/* Interest and state bits (the paper's values). */
#define EVENT_READ   0x1 /* readable: data, a pending connection, end-of-file */
#define EVENT_WRITE  0x2 /* writable */
#define EVENT_EXCEPT 0x4 /* exceptional condition (POLLPRI, TCP urgent data) */
/* evq extensions, reported in masks only (never in an interest mask). A hang-up
 * also sets EVENT_READ, and an error EVENT_READ|EVENT_WRITE, so a loop that only
 * tests EVENT_READ/EVENT_WRITE reads the end-of-file or error and closes. */
#define EVENT_HUP    0x8
#define EVENT_ERROR  0x10

/* One event. `struct event_descr_t` also names it, as in the paper's Figure 3. */
typedef struct event_descr_t {
    int fd;        /* the descriptor */
    unsigned mask; /* EVENT_* bits: its state when the event was dequeued */
} event_descr_t;

/* Registers, modifies, or (interestmask 0) revokes the calling thread's interest
 * in fd. Closing fd also removes the interest. If statemask is non-NULL it gets
 * fd's current state (EVENT_* bits), read after the interest is in place: data that
 * arrived before the call shows there, anything later produces an event.
 * Returns 0, or -1 with errno: EBADF (fd negative or closed), EINVAL (bits other
 * than EVENT_READ|EVENT_WRITE|EVENT_EXCEPT, or an unknown EVQ_BACKEND or
 * EVQ_PAPER_MODE), EOPNOTSUPP (event semantics on select, select-improved or poll;
 * see above), EPERM (a regular file, on epoll), EBUSY (called from a signal handler
 * that interrupted a call on the same thread), or another kernel error (EMFILE,
 * ENOMEM...). */
int declare_interest(int fd, int interestmask, int *statemask);

/* Dequeues up to array_max of the calling thread's events, in FIFO order, one per
 * descriptor. Returns at once if any is ready (it never waits to fill the array),
 * else waits until one is, or until *timeout passes (returns 0); a NULL timeout
 * waits forever. *timeout is read, never modified. At most EVQ_BATCH_MAX events are
 * returned per call. Returns the count, or -1 with errno: EINVAL (array_max <= 0,
 * ev_array NULL, tv_sec < 0 or tv_usec outside 0..999999, unknown EVQ_BACKEND),
 * EBUSY (as above), or the kernel's error. Descriptors must be non-blocking: an
 * event can be stale by the time it is handled. */
int get_next_event(int array_max, event_descr_t *ev_array, struct timeval *timeout);

/* ---- 2. The handle API -------------------------------------------------- */

/* A queue. One thread at a time may use it, except evq_notify (any thread). */
typedef struct evq evq_t;
/* Wakes a queue from any thread; outlives the queue (see evq_notifier). */
typedef struct evq_notifier evq_notifier_t;

/* One event from evq_wait. */
typedef struct evq_event {
    uint64_t token; /* the token given to evq_declare; EVQ_NOTIFY_TOKEN for evq_notify */
    int fd;         /* the descriptor; -1 for a notification */
    unsigned mask;  /* EVQ_* state bits (raw: a hang-up is EVQ_HUP, not also EVQ_READ) */
} evq_event_t;

/* Interest bits (evq_declare) and state bits (state, evq_event_t.mask). */
#define EVQ_READ   0x1
#define EVQ_WRITE  0x2
#define EVQ_EXCEPT 0x4
#define EVQ_HUP    0x8  /* state only */
#define EVQ_ERROR  0x10 /* state only */
#define EVQ_NOTIFY 0x40 /* state only: the event comes from evq_notify */
#define EVQ_NOTIFY_TOKEN UINT64_MAX

/* Modes for evq_declare. */
#define EVQ_MODE_LEVEL   0 /* reported on every wait while ready (any backend) */
#define EVQ_MODE_EVENT   1 /* reported when something happens (epoll, uring, rtsig,
                              rtsig-bulk; EVQ_EUNSUPPORTED on select and poll) */
#define EVQ_MODE_ONESHOT 2 /* reported once, then disarmed until declared again */
#define EVQ_WAKE_ONE 0x100 /* flag ORed into the mode: of several queues, wake one
                              (EPOLLEXCLUSIVE; epoll only, not with ONESHOT) */

/* Most events one get_next_event / evq_wait call returns. */
#define EVQ_BATCH_MAX 4096

/* Error codes. Stable: these numbers never change meaning. Negative, so a handle
 * call's return value is either a count/EVQ_OK or one of them. */
#define EVQ_OK                0
#define EVQ_EBADF            -1 /* bad file descriptor */
#define EVQ_EINVAL           -2 /* invalid argument (NULL, unknown bits, max <= 0) */
#define EVQ_ENOMEM           -3 /* out of memory */
#define EVQ_EUNSUPPORTED     -4 /* the backend cannot do it (errno EOPNOTSUPP) */
#define EVQ_EUNKNOWN_BACKEND -5 /* evq_open: no backend has that name (errno EINVAL) */
#define EVQ_EOS              -6 /* another OS error: see errno */
#define EVQ_EINTERNAL        -7 /* a bug in libevq (errno EIO); please report it */
#define EVQ_EBUSY            -8 /* paper API re-entered from a signal handler, or
                                   used during thread exit (errno EBUSY) */

/* Opens a queue on backend "epoll", "uring", "poll", "rtsig-bulk", "rtsig",
 * "select-improved" or "select", or with
 * NULL on EVQ_BACKEND / the best one. Returns NULL with errno set and the reason in
 * evq_last_error(): EVQ_EUNKNOWN_BACKEND, EVQ_EOS (EMFILE...), EVQ_ENOMEM. */
evq_t *evq_open(const char *backend);

/* Closes q (NULL is ignored). Its descriptors stay open; notifiers stay valid. */
void evq_close(evq_t *q);

/* Registers, modifies, or (interest 0) revokes interest in fd. interest: EVQ_READ|
 * EVQ_WRITE|EVQ_EXCEPT; mode: EVQ_MODE_* optionally | EVQ_WAKE_ONE; every event
 * carries token. If state is non-NULL it gets fd's current EVQ_* state, read after
 * the registration is in place. Returns EVQ_OK or EVQ_EBADF, EVQ_EINVAL,
 * EVQ_EUNSUPPORTED, EVQ_EOS. */
int evq_declare(evq_t *q, int fd, unsigned interest, unsigned mode, uint64_t token,
                unsigned *state);

/* Waits up to timeout_ms (negative: forever; 0: just look) and stores up to max
 * events (at most EVQ_BATCH_MAX). Returns the count (0 on timeout), or EVQ_EINVAL
 * (NULL q or events, max <= 0) or another negative code. */
int evq_wait(evq_t *q, evq_event_t *events, int max, int timeout_ms);

/* Wakes q from any thread while q is open: its current or next evq_wait returns an
 * event {EVQ_NOTIFY_TOKEN, -1, EVQ_NOTIFY}; calls coalesce. EVQ_OK or a code. */
int evq_notify(const evq_t *q);

/* A handle that wakes q from any thread and stays valid after evq_close(q)
 * (notifying does nothing harmful then). NULL (errno EINVAL) for a NULL q. */
evq_notifier_t *evq_notifier(const evq_t *q);
int evq_notifier_notify(const evq_notifier_t *n);
void evq_notifier_free(evq_notifier_t *n); /* NULL is ignored */

/* Revokes interest in fd (if any) and closes it; the stale-safe close.
 * EVQ_OK, or EVQ_EBADF if fd was not open (it is closed either way). */
int evq_close_fd(evq_t *q, int fd);

/* Forgets fd after the program closed it itself, making no call on the number
 * (which may name another file by now). EVQ_OK or EVQ_EINVAL (NULL q). */
int evq_forget_fd(evq_t *q, int fd);

/* The backend q runs on ("epoll", ...): a static string; NULL for a NULL q. */
const char *evq_backend_name(const evq_t *q);

/* A static description of an EVQ_E* code; any int is accepted. */
const char *evq_strerror(int code);

/* The EVQ_E* code of this thread's last failed evq call (EVQ_OK if none); like
 * errno, not reset by successful calls. For evq_open and evq_notifier. */
int evq_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* EVQ_H */
