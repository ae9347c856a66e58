/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The kernel function that handles system call NAME on the target architecture,
 * for BPF (bpf/files.bpf.c attaches to it) and user space (user/capture/env.c
 * looks it up in BTF and tries it first): one place, so both name the same.
 * Kernels built with the syscall wrappers (ARCH_HAS_SYSCALL_WRAPPER) give each
 * handler the architecture's prefix and one argument, the task's saved
 * registers: arch/x86/include/asm/syscall_wrapper.h (__x64_sys_NAME) and
 * arch/arm64/include/asm/syscall_wrapper.h (__arm64_sys_NAME). Checked in
 * Debian's arm64 6.1 and 6.12 BTF: __arm64_sys_read, _pread64, _readv,
 * _preadv, _openat and _close, each `long (const struct pt_regs *regs)`.
 */
#ifndef DLBPF_SYSCALL_HANDLER_H
#define DLBPF_SYSCALL_HANDLER_H

/* BPF objects say their target with __TARGET_ARCH_*; user space is built for its own. */
#if defined(__TARGET_ARCH_x86) || (!defined(__TARGET_ARCH_arm64) && defined(__x86_64__))
#define DL_SYSCALL_HANDLER(name) "__x64_sys_" name
#elif defined(__TARGET_ARCH_arm64) || defined(__aarch64__)
#define DL_SYSCALL_HANDLER(name) "__arm64_sys_" name
#else
#error "dlbpf/syscall_handler.h knows x86-64's and arm64's syscall handler names only"
#endif

#endif /* DLBPF_SYSCALL_HANDLER_H */
