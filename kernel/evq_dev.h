/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/* evq_dev.h - the two misc devices evq.ko registers. */
#ifndef EVQ_DEV_H
#define EVQ_DEV_H

#include <linux/fs.h>
#include <linux/miscdevice.h>

extern const struct file_operations evq_fops;
extern const struct file_operations devpoll_fops;
extern struct miscdevice evq_miscdev;
extern struct miscdevice devpoll_miscdev;

#endif
