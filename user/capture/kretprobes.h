/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Return probes with a pool sized for a whole node, made as tracefs kprobe events.
 *
 * Why: a kretprobe takes an instance from a fixed pool at every entry of its function, in
 * every task, before any BPF filter runs, and holds it until the function returns. A task
 * blocked in read(2) holds one all the while. The kprobe PMU libbpf attaches through gives the
 * kernel's default pool, max(10, 2 * CPUs); every task on the node blocked in a read (pipes,
 * sockets, terminals: data-loader workers waiting on their queues) takes one, and the returns
 * after that are missed: on Debian's 5.10 with 2 CPUs, plain reads of a traced job were lost.
 * tracefs takes "r<maxactive>:" and counts the misses (kprobe_profile), so dlbpf asks for the
 * kernel's most and reports what was still missed, like any other loss.
 */
#ifndef DLBPF_CAPTURE_KRETPROBES_H
#define DLBPF_CAPTURE_KRETPROBES_H

#include <stdbool.h>
#include <stdint.h>
#include <bpf/libbpf.h>

#define DL_KRETPROBES_MAX 8

struct dl_kretprobes {
	struct {
		char event[48];            /* dlbpf/<event> in tracefs */
		struct bpf_program *prog;
		uint64_t missed;           /* read from kprobe_profile just before the event goes */
	} v[DL_KRETPROBES_MAX];
	size_t n;
	bool removed;                      /* dl_kretprobes_remove ran: the counts are final */
	int root;                          /* which tracefs root holds kprobe_events; -1 none found */
};

/* Whether tracefs takes kprobe events here (a writable kprobe_events). */
bool dl_kretprobes_possible(void);
/*
 * Attaches prog as a return probe of func with the kernel's largest instance pool. The link is
 * the caller's to destroy; dl_kretprobes_remove removes the events after that. NULL with
 * errno set on failure.
 */
struct bpf_link *dl_kretprobe_attach(struct dl_kretprobes *k, struct bpf_program *prog, const char *func);
/* The returns each event missed so far (kprobe_profile), summed; stored per event as well. */
uint64_t dl_kretprobes_read_missed(struct dl_kretprobes *k);
/* After the links are destroyed: the events are removed from tracefs. Missed counts stay. */
void dl_kretprobes_remove(struct dl_kretprobes *k);
/* What dl_kretprobes_read_missed last found for prog's event; 0 for a program not attached here. */
uint64_t dl_kretprobes_missed_by(const struct dl_kretprobes *k, const struct bpf_program *prog);

#endif
