// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "capture/calib.h"
#include "dlbpf.skel.h"
#include "records/clock.h"
#include "log.h"

#define CALLS 801                 /* per variant and temperature; odd: one middle call */
#define FLUSH_BYTES (1u << 20)    /* larger than a core's L2 on the machines dlbpf meets */

#ifdef __x86_64__
/* The CUDA runtime's entry points begin push %rbp; mov %rsp,%rbp (objdump of libcudart 13): so does this. */
__asm__(".text\n"
	".globl dl_calib_target\n"
	".type dl_calib_target,@function\n"
	"dl_calib_target:\n"
	"\tpush %rbp\n"
	"\tmov %rsp,%rbp\n"
	"\tlea 1(%rdi),%eax\n"
	"\tpop %rbp\n"
	"\tret\n"
	".size dl_calib_target, .-dl_calib_target\n");
int dl_calib_target(int x);
#else
__attribute__((noinline)) int dl_calib_target(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}
#endif

/* The file offset of addr in this process's executable mapping of it. */
static int offset_of(const void *addr, unsigned long *off)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int err = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, pgoff;
		char perms[5];

		if (sscanf(line, "%lx-%lx %4s %lx", &lo, &hi, perms, &pgoff) != 4)
			continue;
		if ((unsigned long)addr >= lo && (unsigned long)addr < hi && perms[2] == 'x') {
			*off = (unsigned long)addr - lo + pgoff;
			err = 0;
			break;
		}
	}
	fclose(f);
	return err;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The median call, in ns; cold: the caches flushed before each. */
static double median_call(volatile unsigned char *flush, bool cold)
{
	static uint64_t ns[CALLS];
	volatile int sink = 0;

	for (int i = 0; i < CALLS; i++) {
		uint64_t t0, t1;

		if (cold)
			for (size_t k = 0; k < FLUSH_BYTES; k += 64)
				flush[k]++;
		t0 = dl_now_ns();
		sink = dl_calib_target(sink);
		t1 = dl_now_ns();
		ns[i] = t1 - t0;
	}
	qsort(ns, CALLS, sizeof(ns[0]), cmp_u64);
	return (double)ns[CALLS / 2];
}

void dl_calib_syscalls(double *read_ns, double *write_ns)
{
	static uint64_t r[CALLS], w[CALLS];
	char c = 0;

	/* Interleaved call by call: a neighbour's burst lands on both. */
	for (int i = 0; i < CALLS; i++) {
		uint64_t t0 = dl_now_ns(), t1, t2;

		if (read(-1, &c, 1) >= 0)
			break;
		t1 = dl_now_ns();
		if (write(-1, &c, 1) >= 0)
			break;
		t2 = dl_now_ns();
		r[i] = t1 - t0;
		w[i] = t2 - t1;
	}
	qsort(r, CALLS, sizeof(r[0]), cmp_u64);
	qsort(w, CALLS, sizeof(w[0]), cmp_u64);
	*read_ns = (double)r[CALLS / 2];
	*write_ns = (double)w[CALLS / 2];
}

/* The same kind of link as the CUDA probes get on this kernel (uprobe_multi, or a classic uprobe). */
static struct bpf_link *attach(const struct dl_tracer *t, bool ret, unsigned long off)
{
	struct bpf_program *prog;

	if (dl_tracer_features(t)->uprobe_multi) {
		LIBBPF_OPTS(bpf_uprobe_multi_opts, o, .offsets = &off, .cnt = 1, .retprobe = ret);

		prog = ret ? dl_tracer_skel(t)->progs.calib_return : dl_tracer_skel(t)->progs.calib_entry;
		return bpf_program__attach_uprobe_multi(prog, getpid(), "/proc/self/exe", NULL, &o);
	}
	LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = ret);
	prog = ret ? dl_tracer_skel(t)->progs.calib_ret_one : dl_tracer_skel(t)->progs.calib_entry_one;
	return bpf_program__attach_uprobe_opts(prog, getpid(), "/proc/self/exe", off, &o);
}

int dl_calib_run(struct dl_tracer *t, struct dl_calib *out)
{
	uint64_t t0 = dl_now_ns();
	unsigned char *flush = calloc(1, FLUSH_BYTES);
	struct bpf_link *entry = NULL, *ret = NULL;
	double none[2], in[2], both[2];
	unsigned long off;
	int err;

	memset(out, 0, sizeof(*out));
	if (!flush)
		return -ENOMEM;
	err = offset_of((const void *)dl_calib_target, &off);
	if (err)
		goto done;
	/* Interleaved by temperature, each variant once: a neighbour's burst spoils one figure, not a trend. */
	for (int cold = 0; cold < 2; cold++) {
		none[cold] = median_call(flush, cold);
		entry = attach(t, false, off);
		if (!entry) {
			err = -errno;
			goto done;
		}
		in[cold] = median_call(flush, cold);
		ret = attach(t, true, off);
		if (!ret) {
			err = -errno;
			goto done;
		}
		both[cold] = median_call(flush, cold);
		bpf_link__destroy(ret);
		bpf_link__destroy(entry);
		ret = entry = NULL;
	}
	out->uprobe_hot_ns = in[0] - none[0] > 0 ? in[0] - none[0] : 0;
	out->uretprobe_hot_ns = both[0] - in[0] > 0 ? both[0] - in[0] : 0;
	/* Cold is never charged below hot: a flush that happened to help is noise. */
	out->uprobe_ns = in[1] - none[1] > out->uprobe_hot_ns ? in[1] - none[1] : out->uprobe_hot_ns;
	out->uretprobe_ns = both[1] - in[1] > out->uretprobe_hot_ns ? both[1] - in[1] : out->uretprobe_hot_ns;
done:
	bpf_link__destroy(ret);
	bpf_link__destroy(entry);
	free(flush);
	out->took_ns = dl_now_ns() - t0;
	if (err)
		dl_warn("--overhead-budget: cannot time a uprobe on dlbpf itself (%s): probe costs are BPF run time only",
			strerror(-err));
	else
		dl_info("--overhead-budget: a uprobe costs %.0f ns (%.0f hot), a return probe %.0f ns (%.0f hot); "
			"timed in %.1f ms", out->uprobe_ns, out->uprobe_hot_ns, out->uretprobe_ns, out->uretprobe_hot_ns,
			(double)out->took_ns / 1e6);
	return err;
}
