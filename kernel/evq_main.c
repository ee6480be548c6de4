// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * evq_main.c - module entry: the slab caches and the two misc devices,
 * /dev/evq (SEEDS 000 + 002) and /dev/poll (SEEDS 004). kernel/README.md
 * has the design.
 */

#include <linux/module.h>
#include <linux/moduleparam.h>
#include "evq_core.h"
#include "evq_dev.h"

module_param_named(max_watches, evq_max_watches, ulong, 0644);
MODULE_PARM_DESC(max_watches, "Registrations allowed across all queues (as epoll's max_user_watches)");

bool evq_file_is_ours(const struct file *file)
{
	return file->f_op == &evq_fops || file->f_op == &devpoll_fops;
}

static int __init evq_init(void)
{
	int err = evq_core_cache_init();

	if (err)
		return err;
	err = misc_register(&evq_miscdev);
	if (err)
		goto out_caches;
	err = misc_register(&devpoll_miscdev);
	if (err)
		goto out_evq;
	return 0;

out_evq:
	misc_deregister(&evq_miscdev);
out_caches:
	evq_core_cache_exit();
	return err;
}

static void __exit evq_exit(void)
{
	misc_deregister(&devpoll_miscdev);
	misc_deregister(&evq_miscdev);
	evq_core_cache_exit();
}

module_init(evq_init);
module_exit(evq_exit);

MODULE_LICENSE("Dual MIT/GPL");
MODULE_AUTHOR("evq project");
MODULE_DESCRIPTION("/dev/evq (declare_interest/get_next_event, mapped result ring, wake-one) and Solaris /dev/poll");
