/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A set of uprobes on one file of one process, attached the cheapest way the
 * kernel allows: one uprobe_multi link (6.6+), or one classic uprobe per
 * function. Each probe's cookie goes with its link (5.15+) or, where the kernel
 * has no attach cookies for uprobes, into the BPF map probe_cookies under the
 * probed file and offset (bpf/common.bpf.h, dl_site_cookie).
 */
#ifndef DLBPF_UPROBES_H
#define DLBPF_UPROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bpf_program;
struct bpf_link;

struct dl_uprobe_mode {
	bool multi;          /* uprobe_multi links */
	bool cookies;        /* attach cookies on classic uprobes */
	int cookie_map_fd;   /* probe_cookies, where !cookies */
	/*
	 * Where !cookies: whether a probe can find its file offset (the kernel's VMA cache,
	 * 3.15-6.0). Without either, calls cannot be told apart: attaching fails with ENOTSUP.
	 */
	bool site_cookies;
};

/* The probes of one file: one link, or one per function. */
struct dl_plink;

struct dl_uprobe_set {
	pid_t pid;                 /* 0: every process that maps the file */
	const char *path;          /* the file, as the kernel should open it (/proc/self/fd/N) */
	uint64_t dev, inode;       /* the file, as pid's mappings name it: major << 32 | minor, inode */
	const unsigned long *off;  /* file offsets */
	const uint64_t *cookie;
	size_t n;
	bool ret;                  /* return probes */
};

/* NULL with errno set on failure; prog: the multi or the classic program, as m->multi says. */
struct dl_plink *dl_plink_attach(struct dl_uprobe_mode *m, struct bpf_program *prog, const struct dl_uprobe_set *s);
/* Whether l holds classic uprobes (one per function), which dl_plink_destroy detaches in turn. */
bool dl_plink_single(const struct dl_plink *l);
/* Links it holds (one, or one per function). */
size_t dl_plink_count(const struct dl_plink *l);
/* Moves its links to out (dl_plink_count of them) and frees it, for a detach in one batch. */
void dl_plink_take(struct dl_plink *l, struct bpf_link **out);
/* Detaches (classic uprobes one after the other: the kernel takes them in turn) and frees; NULL is fine. */
void dl_plink_destroy(struct dl_plink *l);
/*
 * The same, by a thread of its own, so that the caller does not wait: what is queued goes in one
 * batch (multi links at once, classic uprobes in the order given). For probes that fire for no one
 * (their process is gone). dl_plinks_flush waits until every one is detached.
 */
void dl_plink_destroy_later(struct dl_plink *l);
void dl_plinks_flush(void);
/* Destroys links from threads of their own, so that their grace periods overlap. */
void dl_links_destroy_parallel(struct bpf_link **links, size_t n);

#endif
