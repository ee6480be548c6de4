/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/* tap.h - a tiny TAP-style harness: CHECK() records a failure and goes on. */
#ifndef TAP_H
#define TAP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_failures, tap_tests, tap_case_failed;
static const char *tap_case;

#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                        \
			printf("#   %s:%d: %s: CHECK(%s) failed: ", __FILE__, __LINE__, \
			       tap_case, #cond);                                      \
			printf(__VA_ARGS__);                                          \
			printf("\n");                                                 \
			tap_case_failed = 1;                                          \
		}                                                                     \
	} while (0)

/* Aborts the case when a set-up step fails (the condition is evaluated once). */
#define REQUIRE(cond, ...)                                                            \
	do {                                                                          \
		int required_ = !!(cond);                                             \
		CHECK(required_, __VA_ARGS__);                                        \
		if (!required_)                                                       \
			return;                                                       \
	} while (0)

#define RUN(fn)                                                                       \
	do {                                                                          \
		tap_case = #fn;                                                       \
		tap_case_failed = 0;                                                  \
		fn();                                                                 \
		tap_tests++;                                                          \
		if (tap_case_failed)                                                  \
			tap_failures++;                                               \
		printf("%s %d - %s\n", tap_case_failed ? "not ok" : "ok", tap_tests,  \
		       #fn);                                                          \
		fflush(stdout);                                                       \
	} while (0)

static inline int tap_done(const char *suite)
{
	printf("# %s: %d tests, %d failed\n", suite, tap_tests, tap_failures);
	return tap_failures ? 1 : 0;
}

#endif
