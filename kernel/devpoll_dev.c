// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * devpoll_dev.c - /dev/poll with Solaris poll(7d) semantics (SEEDS 004), on
 * the same queue as /dev/evq: every entry is a level registration, so DP_POLL
 * costs what is ready, not what is registered.
 *
 *  - write(2) of struct pollfd records: an fd already in the set gets the new
 *    events ORed in (unless its number now names another file: then the entry
 *    starts afresh); POLLREMOVE removes; a negative fd is ignored.
 *  - An fd that is not open, or a file without poll (a regular file), is kept
 *    as a "plain" entry that DP_POLL checks like poll(2) does on every call:
 *    POLLNVAL while the number is not open, the default mask for a file that
 *    cannot be polled. An entry whose number was closed without POLLREMOVE
 *    becomes plain when the queue notices (README.md), so it reports POLLNVAL.
 *  - DP_POLL returns a dense array of at most dp_nfds ready entries; DP_ISPOLLED
 *    answers whether an fd is in the set.
 */

#include <linux/file.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include "evq_core.h"
#include "evq_dev.h"

#define DP_EVENTS_ALL (POLLIN | POLLPRI | POLLOUT | POLLERR | POLLHUP | POLLNVAL | POLLRDNORM | \
		       POLLRDBAND | POLLWRNORM | POLLWRBAND | POLLMSG | POLLREMOVE | POLLRDHUP)
#define DP_WRITE_CHUNK 32

/* An entry the queue cannot hook (not open, or no poll method). */
struct dp_plain {
	struct list_head link;
	int fd;
	u16 events;
};

struct dp_set {
	struct evq_queue q;
	/* fd -> struct dp_plain, and the same entries in a list for DP_POLL: q.mtx. */
	struct xarray plain;
	struct list_head plain_list;
	unsigned long nplain;
};

static struct dp_set *dp_of(struct evq_queue *q)
{
	return container_of(q, struct dp_set, q);
}

static struct dp_plain *dp_plain_lookup(struct dp_set *dp, int fd)
{
	return xa_load(&dp->plain, fd);
}

static void dp_plain_remove(struct dp_set *dp, struct dp_plain *p)
{
	xa_erase(&dp->plain, p->fd);
	list_del(&p->link);
	dp->nplain--;
	kfree(p);
}

static int dp_plain_set(struct dp_set *dp, int fd, u16 events)
{
	struct dp_plain *p = dp_plain_lookup(dp, fd);
	int err;

	if (p) {
		p->events = events;
		return 0;
	}
	p = kmalloc(sizeof(*p), GFP_KERNEL_ACCOUNT);
	if (!p)
		return -ENOMEM;
	p->fd = fd;
	p->events = events;
	err = xa_insert(&dp->plain, fd, p, GFP_KERNEL_ACCOUNT);
	if (err) {
		kfree(p);
		return err;
	}
	list_add_tail(&p->link, &dp->plain_list);
	dp->nplain++;
	return 0;
}

/* A watched number closed (or reused) without POLLREMOVE: it reports POLLNVAL from now on. */
static void dp_on_stale(struct evq_queue *q, struct evq_reg *reg)
{
	struct dp_set *dp = dp_of(q);
	int fd = reg->fd;
	u16 events = reg->dp_events;

	q->stats.stale_dropped++;
	evq_reg_release(q, reg);
	/* Out of memory: the entry is simply gone, which poll(7d) also allows. */
	dp_plain_set(dp, fd, events);
}

/* Applies one written record. q.mtx held. */
static int dp_apply(struct dp_set *dp, const struct pollfd *pfd)
{
	struct evq_queue *q = &dp->q;
	struct evq_reg *reg;
	struct dp_plain *plain;
	struct file *file;
	u16 events;
	__poll_t state;
	int err;

	if (pfd->fd < 0)
		return 0; /* ignored, as poll(2) ignores it */
	if ((u16)pfd->events & ~DP_EVENTS_ALL)
		return -EINVAL;
	reg = evq_reg_lookup(q, pfd->fd);
	plain = dp_plain_lookup(dp, pfd->fd);
	if (pfd->events & POLLREMOVE) {
		if (reg)
			evq_reg_release(q, reg);
		if (plain)
			dp_plain_remove(dp, plain);
		return 0; /* removing what is not there is not an error */
	}

	file = fget(pfd->fd);
	if (file && evq_file_is_ours(file)) {
		fput(file);
		return -EINVAL;
	}
	events = (u16)pfd->events;
	if (reg && reg->file == file)
		events |= reg->dp_events; /* Solaris ORs into the entry */
	else if (plain)
		events |= plain->events;

	if (!file || !file_can_poll(file)) {
		if (reg)
			evq_reg_release(q, reg);
		err = dp_plain_set(dp, pfd->fd, events);
		if (file)
			fput(file);
		return err;
	}
	err = evq_reg_declare(q, pfd->fd, file, demangle_poll(events) | EPOLLERR | EPOLLHUP,
			      EVQ_MODE_LEVEL, false, (u64)pfd->fd, events, &state);
	fput(file);
	if (err > 0)
		err = 0; /* an entry for the number's old file was replaced */
	/* Looked up again: the declare's sweep may have turned a stale entry plain. */
	plain = err ? NULL : dp_plain_lookup(dp, pfd->fd);
	if (plain)
		dp_plain_remove(dp, plain);
	return err;
}

static ssize_t dp_write(struct file *file, const char __user *buf, size_t count, loff_t *ppos)
{
	struct dp_set *dp = file->private_data;
	struct pollfd chunk[DP_WRITE_CHUNK];
	size_t done = 0;
	ssize_t err = 0;

	if (count % sizeof(struct pollfd))
		return -EINVAL;
	while (done < count) {
		size_t n = min_t(size_t, (count - done) / sizeof(struct pollfd), DP_WRITE_CHUNK);
		size_t i;

		if (copy_from_user(chunk, buf + done, n * sizeof(struct pollfd))) {
			err = -EFAULT;
			break;
		}
		mutex_lock(&dp->q.mtx);
		for (i = 0; i < n; i++) {
			err = dp_apply(dp, &chunk[i]);
			if (err)
				break;
			done += sizeof(struct pollfd);
		}
		mutex_unlock(&dp->q.mtx);
		if (err)
			break;
		if (fatal_signal_pending(current)) {
			err = -EINTR;
			break;
		}
		cond_resched();
	}
	/* As write(2): what was applied counts; an error only if nothing was. */
	return done ? done : err;
}

/* The plain entries, checked as poll(2) checks them. q.mtx held. */
static long dp_poll_plain(struct dp_set *dp, struct pollfd __user *out, unsigned long max)
{
	struct dp_plain *p;
	long n = 0;

	list_for_each_entry(p, &dp->plain_list, link) {
		__poll_t filter = demangle_poll(p->events) | EPOLLERR | EPOLLHUP;
		struct pollfd r = { .fd = p->fd, .events = p->events };
		struct file *f;

		if (n == max)
			break;
		f = fget(p->fd);
		if (!f) {
			r.revents = POLLNVAL;
		} else {
			r.revents = mangle_poll(vfs_poll(f, NULL) & filter);
			fput(f);
		}
		if (!r.revents)
			continue;
		if (copy_to_user(out + n, &r, sizeof(r)))
			return -EFAULT;
		n++;
	}
	return n;
}

static long dp_ioctl_poll(struct dp_set *dp, struct dvpoll __user *uarg)
{
	struct dvpoll dv;
	struct pollfd __user *ufds;
	struct evq_out out;
	long plain = 0, res;
	s64 timeout_ns;

	if (copy_from_user(&dv, uarg, sizeof(dv)))
		return -EFAULT;
	if (dv.dp_nfds > DP_MAX_NFDS)
		return -EINVAL;
	if (!dv.dp_nfds)
		return 0;
	ufds = (struct pollfd __user *)dv.dp_fds;
	if (!access_ok(ufds, dv.dp_nfds * sizeof(struct pollfd)))
		return -EFAULT;
	timeout_ns = dv.dp_timeout < 0 ? -1 : (s64)dv.dp_timeout * NSEC_PER_MSEC;

	if (dp->nplain) {
		mutex_lock(&dp->q.mtx);
		plain = dp_poll_plain(dp, ufds, dv.dp_nfds);
		mutex_unlock(&dp->q.mtx);
		if (plain < 0)
			return plain;
		if (plain == dv.dp_nfds)
			return plain;
		if (plain)
			timeout_ns = 0;
	}
	out.kind = EVQ_OUT_POLLFD;
	out.buf = ufds + plain;
	out.max = dv.dp_nfds - plain;
	res = evq_wait_events(&dp->q, &out, timeout_ns);
	if (res < 0)
		return plain ? plain : res;
	return plain + res;
}

static long dp_ioctl_ispolled(struct dp_set *dp, struct pollfd __user *uarg)
{
	struct pollfd pfd;
	struct evq_reg *reg;
	struct dp_plain *plain;
	long found = 0;

	if (copy_from_user(&pfd, uarg, sizeof(pfd)))
		return -EFAULT;
	if (pfd.fd < 0)
		return 0;
	mutex_lock(&dp->q.mtx);
	reg = evq_reg_lookup(&dp->q, pfd.fd);
	plain = dp_plain_lookup(dp, pfd.fd);
	if (reg) {
		pfd.events = reg->dp_events;
		found = 1;
	} else if (plain) {
		pfd.events = plain->events;
		found = 1;
	}
	mutex_unlock(&dp->q.mtx);
	if (!found)
		return 0;
	pfd.revents = 0;
	return copy_to_user(uarg, &pfd, sizeof(pfd)) ? -EFAULT : 1;
}

static long dp_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct dp_set *dp = file->private_data;

	switch (cmd) {
	case DP_POLL:
		return dp_ioctl_poll(dp, (struct dvpoll __user *)arg);
	case DP_ISPOLLED:
		return dp_ioctl_ispolled(dp, (struct pollfd __user *)arg);
	default:
		return -ENOTTY;
	}
}

static int dp_open(struct inode *inode, struct file *file)
{
	struct dp_set *dp = kzalloc(sizeof(*dp), GFP_KERNEL_ACCOUNT);

	if (!dp)
		return -ENOMEM;
	evq_queue_init(&dp->q, EVQ_KIND_DEVPOLL, dp_on_stale);
	xa_init(&dp->plain);
	INIT_LIST_HEAD(&dp->plain_list);
	file->private_data = dp;
	return 0;
}

static int dp_release(struct inode *inode, struct file *file)
{
	struct dp_set *dp = file->private_data;
	struct dp_plain *p, *tmp;

	evq_queue_release(&dp->q);
	list_for_each_entry_safe(p, tmp, &dp->plain_list, link)
		kfree(p);
	xa_destroy(&dp->plain);
	kfree(dp);
	return 0;
}

const struct file_operations devpoll_fops = {
	.owner = THIS_MODULE,
	.open = dp_open,
	.release = dp_release,
	.write = dp_write,
	.unlocked_ioctl = dp_ioctl,
	.llseek = noop_llseek,
};

struct miscdevice devpoll_miscdev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "poll",
	.fops = &devpoll_fops,
	.mode = 0666,
};
