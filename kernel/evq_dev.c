// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * evq_dev.c - /dev/evq: each open file is one queue of the paper's API
 * (SEEDS 000): EVQ_DECLARE_INTEREST, EVQ_GET_NEXT_EVENT, and the result ring
 * of /dev/epoll (SEEDS 002) through EVQ_SETUP_RING + mmap.
 */

#include <linux/file.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include "evq_core.h"
#include "evq_dev.h"

/* A registration whose descriptor was closed or reused: the paper's implicit revoke. */
static void evq_dev_on_stale(struct evq_queue *q, struct evq_reg *reg)
{
	q->stats.stale_dropped++;
	evq_reg_release(q, reg);
}

static int evq_dev_open(struct inode *inode, struct file *file)
{
	struct evq_queue *q = kzalloc(sizeof(*q), GFP_KERNEL_ACCOUNT);

	if (!q)
		return -ENOMEM;
	evq_queue_init(q, EVQ_KIND_EVQ, evq_dev_on_stale);
	file->private_data = q;
	return 0;
}

static int evq_dev_release(struct inode *inode, struct file *file)
{
	struct evq_queue *q = file->private_data;

	evq_queue_release(q);
	kfree(q);
	return 0;
}

static noinline long evq_declare_interest(struct evq_queue *q, struct evq_interest __user *uarg)
{
	struct evq_interest in;
	__poll_t state = 0;
	struct fd f;
	long err;

	if (copy_from_user(&in, uarg, sizeof(in)))
		return -EFAULT;
	if (in.interest & ~EVQ_INTEREST_ALL || in.mode > EVQ_MODE_ONESHOT ||
	    in.flags & ~EVQ_INTEREST_FLAGS_ALL || in.reserved)
		return -EINVAL;
	if (in.fd < 0)
		return -EBADF;
	/* Fail on a read-only argument before anything changes. */
	if (put_user(0u, &uarg->state))
		return -EFAULT;
	f = fdget(in.fd);
	if (!in.interest) {
		/*
		 * Revoke goes by number: it works even when the number was closed
		 * behind the queue's back (our reference keeps the file alive), so
		 * close-after-forgetting-to-revoke can still be cleaned up. The
		 * state is reported when the number is open.
		 */
		struct evq_reg *reg;

		mutex_lock(&q->mtx);
		reg = evq_reg_lookup(q, in.fd);
		if (reg)
			evq_reg_release(q, reg);
		mutex_unlock(&q->mtx);
		if (!f.file)
			return -EBADF;
		state = vfs_poll(f.file, NULL);
		err = put_user(evq_poll_to_state(state), &uarg->state) ? -EFAULT : 0;
		goto out;
	}
	if (!f.file)
		return -EBADF;
	if (evq_file_is_ours(f.file)) {
		/* A queue holding a queue could hold itself: refused, no cycles. */
		err = -EINVAL;
		goto out;
	}
	if (!file_can_poll(f.file)) {
		/* Regular files are always ready; refused as epoll refuses them. */
		err = -EPERM;
		goto out;
	}

	mutex_lock(&q->mtx);
	err = evq_reg_declare(q, in.fd, f.file, evq_interest_to_poll(in.interest), in.mode,
			      in.flags & EVQ_WAKE_ONE, in.token, 0, &state);
	mutex_unlock(&q->mtx);
	/* 1: a registration for the file this number named before was replaced. */
	if (err >= 0 && put_user(evq_poll_to_state(state), &uarg->state))
		err = -EFAULT;
out:
	fdput(f);
	return err;
}

static __always_inline long evq_get_next_event(struct evq_queue *q, struct evq_wait __user *uarg)
{
	struct evq_wait w;
	struct evq_out out;

	/* Three loads, not a copy: this is on every dequeue. */
	if (!user_read_access_begin(uarg, sizeof(*uarg)))
		return -EFAULT;
	unsafe_get_user(w.events, &uarg->events, efault);
	unsafe_get_user(w.array_max, &uarg->array_max, efault);
	unsafe_get_user(w.flags, &uarg->flags, efault);
	unsafe_get_user(w.timeout_ns, &uarg->timeout_ns, efault);
	user_read_access_end();

	if (w.flags & ~EVQ_WAIT_FLAGS_ALL)
		return -EINVAL;
	if (w.flags & EVQ_WAIT_RING) {
		if (!READ_ONCE(q->ring) || w.events || w.array_max)
			return -EINVAL;
		out.kind = EVQ_OUT_RING;
		out.buf = NULL;
		out.max = 0;
	} else {
		/* Wake-ups post into a ring, not the ready list: read it there. */
		if (READ_ONCE(q->ring))
			return -EINVAL;
		if (!w.array_max || w.array_max > EVQ_MAX_EVENTS)
			return -EINVAL;
		out.kind = EVQ_OUT_EVENTS;
		out.buf = u64_to_user_ptr(w.events);
		out.max = w.array_max;
		if (!access_ok(out.buf, (size_t)w.array_max * sizeof(struct evq_event)))
			return -EFAULT;
	}
	return evq_wait_events(q, &out, w.timeout_ns);
efault:
	user_read_access_end();
	return -EFAULT;
}

static noinline long evq_setup_ring(struct evq_queue *q, struct evq_ring_setup __user *uarg)
{
	struct evq_ring_setup s;
	int err;

	if (copy_from_user(&s, uarg, sizeof(s)))
		return -EFAULT;
	err = evq_ring_setup(q, &s);
	if (err)
		return err;
	/* The ring exists now whatever happens to this copy; its size is in its header. */
	return copy_to_user(uarg, &s, sizeof(s)) ? -EFAULT : 0;
}

static noinline long evq_stats_ioctl(struct evq_queue *q, struct evq_stats __user *uarg)
{
	struct evq_stats s;

	mutex_lock(&q->mtx);
	spin_lock_irq(&q->lock);
	s = q->stats;
	spin_unlock_irq(&q->lock);
	mutex_unlock(&q->mtx);
	return copy_to_user(uarg, &s, sizeof(s)) ? -EFAULT : 0;
}

static long evq_dev_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct evq_queue *q = file->private_data;
	void __user *uarg = (void __user *)arg;

	/*
	 * The dequeue first and alone in this frame: the other commands are
	 * out of line, so their argument copies (and the stack protector
	 * they bring) cost a dequeue nothing.
	 */
	if (likely(cmd == EVQ_GET_NEXT_EVENT))
		return evq_get_next_event(q, uarg);
	switch (cmd) {
	case EVQ_DECLARE_INTEREST:
		return evq_declare_interest(q, uarg);
	case EVQ_SETUP_RING:
		return evq_setup_ring(q, uarg);
	case EVQ_STATS:
		return evq_stats_ioctl(q, uarg);
	default:
		return -ENOTTY;
	}
}

static int evq_dev_mmap(struct file *file, struct vm_area_struct *vma)
{
	return evq_ring_mmap(file->private_data, vma);
}

const struct file_operations evq_fops = {
	.owner = THIS_MODULE,
	.open = evq_dev_open,
	.release = evq_dev_release,
	.unlocked_ioctl = evq_dev_ioctl,
	/* Every argument has one layout for 32- and 64-bit callers. */
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = evq_dev_mmap,
	.llseek = noop_llseek,
};

struct miscdevice evq_miscdev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "evq",
	.fops = &evq_fops,
	.mode = 0666,
};
