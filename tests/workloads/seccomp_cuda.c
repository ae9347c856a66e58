// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A CUDA job in a container: under a seccomp filter shaped like Docker's
 * default profile, a known set of CUDA runtime calls, whose every return a
 * return probe sees. On x86-64 6.11+ those returns make system call 335
 * (uretprobe), which the filter does not list: on a kernel without the
 * pass-through (cf6cb56ef244, 6.14, 6.12.14, 6.13.3) a tracer's return probe
 * kills this process at its first traced return. It prints its own truth as
 * one JSON line and exits with status 7, so that a test tells "ran to its end"
 * from any death or other exit.
 *
 *   seccomp_cuda [--wait] [--exec]
 *     --wait  print "ready" once under the filter, then wait for a line on
 *             stdin before the calls (for --pid tests)
 *     --exec  install the filter, then execute this program again under it,
 *             as a container's process starts: the dynamic loader and the
 *             libraries' constructors run under the filter too. Without it
 *             the filter goes on first thing in main (libcudart is loaded by
 *             then, but it starts itself, and loads the driver, at the first
 *             call).
 *
 * The filter. Docker's profile is an allowlist by name with a default of
 * ERRNO(EPERM): any system call it does not know, 335 included (it predates
 * it), fails with EPERM. A literal list of the ~350 names it allows would be
 * long and no more faithful, so the same set is written the other way round,
 * with the same default: the numbers up to 334 (every call Linux had when
 * the profile last grew, and the calls glibc and libcudart make) are allowed
 * except the ones the profile leaves out (below: mount, bpf, perf_event_open,
 * keyctl, ...); clone3 is ENOSYS, as in Docker, so that glibc falls back to
 * clone; of the numbers above 334, only those the profile names are allowed;
 * everything else, 335 first, is EPERM. What the profile allows only for some
 * arguments or with a capability it does not grant by default (clone with
 * namespace flags, personality) is allowed here: this workload never makes
 * those calls, and a filter on arguments would only add ways to be wrong. An
 * ABI other than x86-64's (i386's int 0x80, x32) is denied: a 64-bit program
 * makes none.
 *
 * Run it with the GPU simulator (LD_LIBRARY_PATH) or with the real runtime and
 * no GPU (every call fails at once, but is made and returns).
 */
#define _GNU_SOURCE   /* syscall */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "handshake.h"

#define MEMCPY_N 5
#define MEMCPY_BYTES 4096u
#define LAUNCH_N 4
#define SYNC_N 3
#define EXIT_DONE 7
#define EXECED_ENV "SECCOMP_CUDA_EXECED"

/* A host function standing in for a kernel: its address is the launch handle. */
__attribute__((noinline, used)) void seccomp_kernel(void) { __asm__ volatile(""); }

#if defined(__x86_64__)
/* Numbers up to 334 that Docker's default profile does not allow (x86-64 numbering). */
static const unsigned denied_low[] = {
	103 /* syslog */, 134 /* uselib */, 136 /* ustat */, 139 /* sysfs */, 153 /* vhangup */,
	155 /* pivot_root */, 156 /* _sysctl */, 163 /* acct */, 164 /* settimeofday */, 165 /* mount */,
	166 /* umount2 */, 167 /* swapon */, 168 /* swapoff */, 169 /* reboot */, 172 /* iopl */,
	173 /* ioperm */, 174 /* create_module */, 175 /* init_module */, 176 /* delete_module */,
	177 /* get_kernel_syms */, 178 /* query_module */, 179 /* quotactl */, 180 /* nfsservctl */,
	181 /* getpmsg */, 182 /* putpmsg */, 183 /* afs_syscall */, 184 /* tuxcall */, 185 /* security */,
	212 /* lookup_dcookie */, 227 /* clock_settime */, 236 /* vserver */, 237 /* mbind */,
	238 /* set_mempolicy */, 239 /* get_mempolicy */, 246 /* kexec_load */, 248 /* add_key */,
	249 /* request_key */, 250 /* keyctl */, 272 /* unshare */, 279 /* move_pages */,
	298 /* perf_event_open */, 300 /* fanotify_init */, 303 /* name_to_handle_at */,
	304 /* open_by_handle_at */, 305 /* clock_adjtime */, 308 /* setns */, 312 /* kcmp */,
	313 /* finit_module */, 320 /* kexec_file_load */, 321 /* bpf */, 323 /* userfaultfd */,
};

/* Numbers above 334 that the profile names (the rest, 335 uretprobe first, are unknown to it). */
static const unsigned allowed_high[] = {
	424 /* pidfd_send_signal */, 434 /* pidfd_open */, 436 /* close_range */, 437 /* openat2 */,
	438 /* pidfd_getfd */, 439 /* faccessat2 */, 440 /* process_madvise */, 441 /* epoll_pwait2 */,
	444 /* landlock_create_ruleset */, 445 /* landlock_add_rule */, 446 /* landlock_restrict_self */,
	447 /* memfd_secret */, 448 /* process_mrelease */, 449 /* futex_waitv */, 451 /* cachestat */,
	452 /* fchmodat2 */, 453 /* map_shadow_stack */, 454 /* futex_wake */, 455 /* futex_wait */,
	456 /* futex_requeue */,
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define LOW_MAX 334u
#define CLONE3_NR 435u
#define X32_BIT 0x40000000u
#define RET_EPERM (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
/* Header 4, x32 2, the pairs, clone3 2, the range 2, the default 1. */
#define FILTER_MAX (4 + 2 + 2 * N_OF(denied_low) + 2 + 2 + 2 * N_OF(allowed_high) + 1)

/* Each test is its own pair (compare, return), so no jump is longer than one instruction. */
static void rule(struct sock_filter *f, unsigned short *n, unsigned nr, unsigned action)
{
	f[(*n)++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1);
	f[(*n)++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action);
}

/* 0, or -1 with errno (no filter: the run would prove nothing, so the caller stops). */
static int install_filter(void)
{
	struct sock_filter f[FILTER_MAX];
	unsigned short n = 0;
	struct sock_fprog prog;

	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, RET_EPERM);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_BIT, 0, 1);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, RET_EPERM);
	for (size_t i = 0; i < N_OF(denied_low); i++)
		rule(f, &n, denied_low[i], RET_EPERM);
	rule(f, &n, CLONE3_NR, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, LOW_MAX, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	for (size_t i = 0; i < N_OF(allowed_high); i++)
		rule(f, &n, allowed_high[i], SECCOMP_RET_ALLOW);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, RET_EPERM);

	prog.len = n;
	prog.filter = f;
	/* As an unprivileged container process: no new privileges, so no CAP_SYS_ADMIN needed. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}
#else
static int install_filter(void)
{
	errno = ENOSYS;
	return -1;
}
#endif

/* The Seccomp: field of /proc/self/status (2: a filter), -1 when absent. */
static int seccomp_mode(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	int mode = -1;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Seccomp: %d", &mode) == 1)
			break;
	if (f)
		fclose(f);
	return mode;
}

int main(int argc, char **argv)
{
	int wait = 0, reexec = 0, unknown_errno, malloc_status;
	static char host[MEMCPY_BYTES];
	void *dev = (void *)0x7000000000ull; /* never dereferenced without a GPU */
	void *args[1] = { NULL };
	int memcpys = 0, launches = 0, syncs = 0;
	long r;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--wait"))
			wait = 1;
		else if (!strcmp(argv[i], "--exec"))
			reexec = 1;
		else
			return unknown_argument(argv[0], argv[i]);
	}
	if (!getenv(EXECED_ENV)) {
		if (install_filter()) {
			fprintf(stderr, "seccomp_cuda: no seccomp filter: %s\n", strerror(errno));
			return 1;
		}
		if (reexec) {
			/* The filter (and no-new-privileges) survive the exec; the marker says it is in place. */
			if (setenv(EXECED_ENV, "1", 1) == 0)
				execv("/proc/self/exe", argv);
			fprintf(stderr, "seccomp_cuda: exec under the filter: %s\n", strerror(errno));
			return 1;
		}
	}
	unsetenv(EXECED_ENV);
	/* The default is EPERM, not ENOSYS: a number no kernel has is refused by the filter. */
	r = syscall(1000);
	unknown_errno = r < 0 ? errno : 0;
	if (wait && ready_then_wait())
		return 1;

	malloc_status = (int)cudaMalloc(&dev, MEMCPY_BYTES);
	if (malloc_status != cudaSuccess)
		dev = (void *)0x7000000000ull;
	for (int i = 0; i < MEMCPY_N; i++, memcpys++)
		cudaMemcpy(dev, host, MEMCPY_BYTES, cudaMemcpyHostToDevice);
	for (int i = 0; i < LAUNCH_N; i++, launches++)
		cudaLaunchKernel((const void *)seccomp_kernel, (dim3){ 8, 1, 1 }, (dim3){ 128, 1, 1 }, args, 0, 0);
	for (int i = 0; i < SYNC_N; i++, syncs++)
		cudaDeviceSynchronize();
	cudaFree(dev);

	/* Printed after the calls: every one of them returned (2 for cudaMalloc and cudaFree). */
	printf("{\"seccomp\":%d,\"execed\":%d,\"unknown_syscall_errno\":%d,\"malloc_status\":%d,"
	       "\"calls\":{\"cudaMalloc\":1,\"cudaMemcpy\":%d,\"cudaLaunchKernel\":%d,\"cudaDeviceSynchronize\":%d,"
	       "\"cudaFree\":1},\"returned\":%d,\"exit\":%d}\n",
	       seccomp_mode(), reexec, unknown_errno, malloc_status, memcpys, launches, syncs,
	       2 + memcpys + launches + syncs, EXIT_DONE);
	fflush(stdout);
	return EXIT_DONE;
}
