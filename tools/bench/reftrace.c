// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reference tracer for the benchmarks: attaches the empty programs of
 * ref.bpf.c to one function of one library in one process (entry, or entry
 * and return), says "attached", and holds them until stdin closes or SIGTERM.
 *
 *   reftrace PID LIBRARY SYMBOL [--ret] [--record]
 *                        --record: instead of empty programs, the least
 *                        that records what dlbpf records of the call
 *                        (ref.bpf.c), its ring buffer drained every 10 ms
 *   reftrace [--sched] [--syscalls]
 *                        empty programs on the scheduler's tracepoints,
 *                        on the syscall events the files source uses
 *                        (read, pread64, readv, preadv, openat, close), or both
 *   reftrace --sizes     record sizes of the event ABI, as JSON
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "dlbpf/events.h"
#include "capture/elfsym.h"
#include "ref.skel.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static struct bpf_link *attach(struct bpf_program *p, int pid, const char *lib, unsigned long off, int ret)
{
	LIBBPF_OPTS(bpf_uprobe_multi_opts, o, .offsets = &off, .cnt = 1, .retprobe = ret);

	return bpf_program__attach_uprobe_multi(p, pid, lib, NULL, &o);
}

static int drop_record(void *ctx, void *data, size_t size)
{
	(void)ctx;
	(void)data;
	(void)size;
	return 0;
}

/* Drains the record programs' ring buffer on a timer, as dlbpf does, until stop. */
static void *drain(void *arg)
{
	struct ring_buffer *rb = arg;

	while (!stop) {
		usleep(10000);
		ring_buffer__consume(rb);
	}
	return NULL;
}

static void wait_for_end(void)
{
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	printf("attached\n");
	fflush(stdout);
	while (!stop) {
		char buf[64];

		if (read(STDIN_FILENO, buf, sizeof(buf)) <= 0)
			break;
	}
}

/*
 * Empty programs on sched_switch, sched_wakeup, sched_wakeup_new and
 * sched_waking, on the files source's syscall events, or both, held until
 * stdin closes.
 */
static bool has_prefix(const char *s, const char *const *prefixes)
{
	for (; *prefixes; prefixes++)
		if (!strncmp(s, *prefixes, strlen(*prefixes)))
			return true;
	return false;
}

static int hold_tracepoints(bool sched, bool syscalls, bool fentry, bool kprobes)
{
	static const char *const fentry_progs[] = { "ref_fe_", "ref_fx_", NULL };
	static const char *const kprobe_progs[] = { "ref_kp_", "ref_kr_", NULL };
	struct ref *skel = ref__open();
	int err;

	if (!skel)
		return 1;
	bpf_program__set_autoload(skel->progs.ref_entry, false);
	bpf_program__set_autoload(skel->progs.ref_return, false);
	bpf_program__set_autoload(skel->progs.ref_switch, sched);
	bpf_program__set_autoload(skel->progs.ref_wakeup, sched);
	bpf_program__set_autoload(skel->progs.ref_wakeup_new, sched);
	bpf_program__set_autoload(skel->progs.ref_waking, sched);
	{
		struct bpf_program *p;

		/* Every syscall event program: the same events as the files source's. */
		bpf_object__for_each_program(p, skel->obj) {
			const char *name = bpf_program__name(p);

			if (!strncmp(name, "ref_sys_", 8))
				bpf_program__set_autoload(p, syscalls);
			else if (has_prefix(name, fentry_progs))
				bpf_program__set_autoload(p, fentry);
			else if (has_prefix(name, kprobe_progs))
				bpf_program__set_autoload(p, kprobes);
		}
	}
	err = ref__load(skel) || ref__attach(skel);
	if (err) {
		fprintf(stderr, "reftrace: cannot load or attach the floor's programs\n");
		ref__destroy(skel);
		return 1;
	}
	wait_for_end();
	ref__destroy(skel);
	return 0;
}

int main(int argc, char **argv)
{
	struct bpf_link *le = NULL, *lr = NULL;
	struct ring_buffer *rb = NULL;
	struct dl_elf_syms syms;
	const struct dl_elf_sym *sym;
	struct bpf_program *entry, *exit_prog;
	struct ref *skel;
	pthread_t drainer;
	int pid, ret, record;

	if (argc == 2 && !strcmp(argv[1], "--sizes")) {
		printf("{\"cuda\":%zu,\"bio\":%zu,\"sched\":%zu,\"proc\":%zu,\"mark\":%zu,\"hdr\":%zu,"
		       "\"launch\":%zu,\"call_short\":%zu}\n",
		       sizeof(struct dl_cuda_ev), sizeof(struct dl_bio_ev), sizeof(struct dl_sched_ev),
		       sizeof(struct dl_proc_ev), sizeof(struct dl_mark_ev), sizeof(struct dl_hdr),
		       sizeof(struct dl_launch_ev), sizeof(struct dl_call_short_ev));
		return 0;
	}
	if (argc >= 2 && (!strcmp(argv[1], "--sched") || !strcmp(argv[1], "--syscalls") ||
			  !strcmp(argv[1], "--fentry") || !strcmp(argv[1], "--kprobes"))) {
		bool sched = false, syscalls = false, fentry = false, kprobes = false;

		for (int i = 1; i < argc; i++) {
			if (!strcmp(argv[i], "--sched"))
				sched = true;
			else if (!strcmp(argv[i], "--syscalls"))
				syscalls = true;
			else if (!strcmp(argv[i], "--fentry"))
				fentry = true;
			else if (!strcmp(argv[i], "--kprobes"))
				kprobes = true;
			else
				return fprintf(stderr, "reftrace: unknown option %s\n", argv[i]), 2;
		}
		return hold_tracepoints(sched, syscalls, fentry, kprobes);
	}
	if (argc < 4) {
		fprintf(stderr, "usage: %s PID LIBRARY SYMBOL [--ret] [--record] | [--sched] [--syscalls] [--fentry] [--kprobes] | --sizes\n",
			argv[0]);
		return 2;
	}
	pid = atoi(argv[1]);
	ret = record = 0;
	for (int i = 4; i < argc; i++) {
		if (!strcmp(argv[i], "--ret"))
			ret = 1;
		else if (!strcmp(argv[i], "--record"))
			record = 1;
		else
			return fprintf(stderr, "reftrace: unknown option %s\n", argv[i]), 2;
	}
	if (dl_elf_syms_load(argv[2], &syms)) {
		fprintf(stderr, "reftrace: cannot read %s\n", argv[2]);
		return 1;
	}
	sym = dl_elf_sym_by_name(&syms, argv[3]);
	if (!sym) {
		fprintf(stderr, "reftrace: no %s in %s\n", argv[3], argv[2]);
		return 1;
	}
	skel = ref__open();
	if (!skel)
		return 1;
	entry = !record ? skel->progs.ref_entry : ret ? skel->progs.ref_rec_enter : skel->progs.ref_rec_launch;
	exit_prog = record ? skel->progs.ref_rec_return : skel->progs.ref_return;
	bpf_program__set_autoload(skel->progs.ref_entry, !record);
	bpf_program__set_autoload(skel->progs.ref_return, !record);
	bpf_program__set_autoload(entry, true);
	bpf_program__set_autoload(exit_prog, true);
	if (ref__load(skel)) {
		fprintf(stderr, "reftrace: cannot load ref.bpf.o\n");
		return 1;
	}
	le = attach(entry, pid, argv[2], sym->offset, 0);
	if (le && ret)
		lr = attach(exit_prog, pid, argv[2], sym->offset, 1);
	dl_elf_syms_free(&syms);
	if (!le || (ret && !lr)) {
		fprintf(stderr, "reftrace: attach failed\n");
		return 1;
	}
	if (record) {
		rb = ring_buffer__new(bpf_map__fd(skel->maps.ref_rb), drop_record, NULL, NULL);
		if (!rb || pthread_create(&drainer, NULL, drain, rb)) {
			fprintf(stderr, "reftrace: cannot drain the ring buffer\n");
			return 1;
		}
	}
	wait_for_end();
	stop = 1;
	if (rb) {
		pthread_join(drainer, NULL);
		ring_buffer__free(rb);
	}
	bpf_link__destroy(lr);
	bpf_link__destroy(le);
	ref__destroy(skel);
	return 0;
}
