/* header_values.c — prints every constant, size and offset that evq.h declares, as
 * "NAME VALUE" lines, for tests/header.rs to compare with the Rust definitions.
 * Assigning each function to a pointer of the exact type makes the compiler check
 * every declaration's signature, and linking checks that the library exports it. */
#include <evq.h>

#include <stddef.h>
#include <stdio.h>

#define SHOW(name) printf("%s %lld\n", #name, (long long)(name))
#define SHOWU(name) printf("%s %llu\n", #name, (unsigned long long)(name))

int main(void)
{
    int (*p_declare)(int, int, int *) = declare_interest;
    int (*p_next)(int, event_descr_t *, struct timeval *) = get_next_event;
    evq_t *(*p_open)(const char *) = evq_open;
    void (*p_close)(evq_t *) = evq_close;
    int (*p_decl)(evq_t *, int, unsigned, unsigned, uint64_t, unsigned *) = evq_declare;
    int (*p_wait)(evq_t *, evq_event_t *, int, int) = evq_wait;
    int (*p_notify)(const evq_t *) = evq_notify;
    evq_notifier_t *(*p_notifier)(const evq_t *) = evq_notifier;
    int (*p_nnotify)(const evq_notifier_t *) = evq_notifier_notify;
    void (*p_nfree)(evq_notifier_t *) = evq_notifier_free;
    int (*p_close_fd)(evq_t *, int) = evq_close_fd;
    int (*p_forget_fd)(evq_t *, int) = evq_forget_fd;
    const char *(*p_name)(const evq_t *) = evq_backend_name;
    const char *(*p_strerror)(int) = evq_strerror;
    int (*p_last)(void) = evq_last_error;
    void *volatile fns[] = {(void *)p_declare, (void *)p_next, (void *)p_open, (void *)p_close,
                   (void *)p_decl, (void *)p_wait, (void *)p_notify, (void *)p_notifier,
                   (void *)p_nnotify, (void *)p_nfree, (void *)p_close_fd,
                   (void *)p_forget_fd, (void *)p_name, (void *)p_strerror, (void *)p_last};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (!fns[i])
            return 1;

    SHOW(EVENT_READ);
    SHOW(EVENT_WRITE);
    SHOW(EVENT_EXCEPT);
    SHOW(EVENT_HUP);
    SHOW(EVENT_ERROR);
    SHOW(EVQ_READ);
    SHOW(EVQ_WRITE);
    SHOW(EVQ_EXCEPT);
    SHOW(EVQ_HUP);
    SHOW(EVQ_ERROR);
    SHOW(EVQ_NOTIFY);
    SHOWU(EVQ_NOTIFY_TOKEN);
    SHOW(EVQ_MODE_LEVEL);
    SHOW(EVQ_MODE_EVENT);
    SHOW(EVQ_MODE_ONESHOT);
    SHOW(EVQ_WAKE_ONE);
    SHOW(EVQ_BATCH_MAX);
    SHOW(EVQ_OK);
    SHOW(EVQ_EBADF);
    SHOW(EVQ_EINVAL);
    SHOW(EVQ_ENOMEM);
    SHOW(EVQ_EUNSUPPORTED);
    SHOW(EVQ_EUNKNOWN_BACKEND);
    SHOW(EVQ_EOS);
    SHOW(EVQ_EINTERNAL);
    SHOW(EVQ_EBUSY);

    SHOW(sizeof(event_descr_t));
    SHOW(_Alignof(event_descr_t));
    SHOW(offsetof(event_descr_t, fd));
    SHOW(offsetof(event_descr_t, mask));
    SHOW(sizeof(evq_event_t));
    SHOW(_Alignof(evq_event_t));
    SHOW(offsetof(evq_event_t, token));
    SHOW(offsetof(evq_event_t, fd));
    SHOW(offsetof(evq_event_t, mask));
    return 0;
}
