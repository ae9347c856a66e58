// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Naming code addresses of traced processes: a function of this binary by
 * its symbol, in a live process and in a child that has exited since its
 * mappings were noted; and the once-per-address rule, which a miss that may
 * pass reopens a bounded number of times (a name lost to a failed read is
 * looked up again at the address's next record, but a vanished process is
 * not looked up on every record).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "capture/symbolize.h"

__attribute__((noinline, used)) int symbolize_probe_target(int x)
{
	return x * 5 + 2;
}

static void test_live_and_exited(void)
{
	struct dl_symbolizer *sz = dl_symbolizer_new();
	uint64_t addr = (uint64_t)(uintptr_t)&symbolize_probe_target + 1;
	struct dl_code_loc loc;
	int pipefd[2], status;
	char go;
	pid_t child;

	dl_symbolize_loc(sz, getpid(), addr, &loc);
	CHECK(!strcmp(loc.sym, "symbolize_probe_target") && loc.sym_off == 1, "self: '%s'+%llu", loc.sym,
	      (unsigned long long)loc.sym_off);
	CHECK(strstr(loc.obj, "test_symbolize") != NULL, "self: object '%s'", loc.obj);

	/* A fork has this binary at the same address; it is gone (reaped) when named. */
	CHECK(pipe(pipefd) == 0, "pipe");
	child = fork();
	if (child == 0) {
		close(pipefd[1]);
		(void)!read(pipefd[0], &go, 1);
		_exit(symbolize_probe_target(0) == 2 ? 0 : 1);
	}
	close(pipefd[0]);
	CHECK(dl_symbolizer_note(sz, child, NULL) == 0, "note of the live child");
	close(pipefd[1]);
	CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status), "child");
	CHECK(kill(child, 0) != 0, "child reaped");
	dl_symbolize_loc(sz, child, addr, &loc);
	CHECK(!strcmp(loc.sym, "symbolize_probe_target"), "exited child: '%s' in '%s'", loc.sym, loc.obj);
	dl_symbolizer_free(sz);
}

static void test_first_and_misses(void)
{
	struct dl_symbolizer *sz = dl_symbolizer_new();
	const uint64_t a = (uint64_t)(uintptr_t)&symbolize_probe_target;
	struct dl_code_loc loc;
	pid_t gone;
	int reads = 0, bad = 0;

	CHECK(dl_symbolizer_first(sz, getpid(), a + 7), "first");
	CHECK(!dl_symbolizer_first(sz, getpid(), a + 7), "asked again");

	/* Named at the first look: settled, never looked up again. */
	CHECK(dl_symbolize_once(sz, getpid(), a, a, &loc) == 0 && loc.final &&
	      !strcmp(loc.sym, "symbolize_probe_target"), "self: '%s' final %d", loc.sym, loc.final);
	CHECK(dl_symbolize_once(sz, getpid(), a, a, &loc) == -1, "self: looked up again once named");
	CHECK(dl_symbolize_once(sz, getpid(), a | DL_SYMBOLIZE_SITE_KEY, a, &loc) == 0,
	      "the same address as a site: a name of its own");

	/*
	 * A process gone before its mappings were noted: a look misses each time.
	 * Records close together share one read of its maps (a look of no new
	 * read is no try); a read each DL_SYMBOLIZE_REREAD_NS, and the name is
	 * settled after the third miss.
	 */
	gone = fork();
	if (gone == 0)
		_exit(0);
	CHECK(waitpid(gone, NULL, 0) == gone, "child");
	for (int i = 0; i < 100 && !bad; i++) {
		int n = dl_symbolize_once(sz, gone, a, a, &loc);

		if (n != i || loc.final || loc.obj[0] || loc.reused != (i > 0))
			bad = i + 1;
	}
	CHECK(!bad, "100 records at once: record %d was not a look of no new read (the first one reads)", bad - 1);
	for (int i = 0; i < 100; i++) {
		usleep(110 * 1000);   /* past DL_SYMBOLIZE_REREAD_NS (100 ms) */
		reads++;
		if (dl_symbolize_once(sz, gone, a, a, &loc) < 0)
			break;
		CHECK(!loc.reused, "a look after the interval reads the maps again");
	}
	/* Two reads after the first miss settle it: the look after them finds it settled. */
	CHECK(reads == 3, "settled at look %d after the interval (expected: the third)", reads);
	dl_symbolizer_free(sz);
}

int main(void)
{
	test_live_and_exited();
	test_first_and_misses();
	return check_report("test_symbolize");
}
