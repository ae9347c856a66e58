// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/diagnose.h"
#include "util.h"

#define SKETCH_FACTOR 10.0      /* a step 10x over its paper sketch is a finding of its own */
#define SMALL_PER_STEP 16       /* small copies per step worth batching */

static struct dl_finding *add_finding(struct dl_diagnosis *d, const char *rule, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static struct dl_finding *add_finding(struct dl_diagnosis *d, const char *rule, const char *fmt, ...)
{
	struct dl_finding *f;
	va_list ap;

	if (d->nfindings == DL_MAX_FINDINGS)
		return NULL;
	f = &d->findings[d->nfindings++];
	memset(f, 0, sizeof(*f));
	f->rule = rule;
	va_start(ap, fmt);
	vsnprintf(f->message, sizeof(f->message), fmt, ap);
	va_end(ap);
	return f;
}

/* A rule's evidence is fixed by its code: one past DL_MAX_EVIDENCE is a bug, not data to drop. */
static void evidence(struct dl_finding *f, const char *key, double value)
{
	if (!f)
		return;
	assert(f->nev < DL_MAX_EVIDENCE);
	f->ev[f->nev++] = (struct dl_evidence){ .key = key, .value = value };
}

static void evidence_text(struct dl_finding *f, const char *key, const char *text)
{
	if (!f)
		return;
	assert(f->nev < DL_MAX_EVIDENCE);
	f->ev[f->nev++] = (struct dl_evidence){ .key = key, .text = text };
}

/* Per-step medians of the whole run, for messages. */
struct run_facts {
	size_t nsteps;
	uint64_t median_ns, p90_ns;
	double cpu_ns;               /* per step: the stepping thread's on-CPU time */
	double io_bytes, workers_cpu_ns, h2d_bytes, d2h_bytes, kernels, small, io_ns;
	double collectives, comm_bytes;   /* per step */
	double comm_after_share;         /* of comm_wait: behind kernels enqueued before the collective */
	struct dl_copy_facts copy;   /* summed over processes */
	double disk_peak_mbps;       /* fastest disk throughput over a step's reads in flight */
};

/* Sums the counters (not the bandwidths) of one process's copy facts into another's. */
static void copy_facts_add(struct dl_copy_facts *to, const struct dl_copy_facts *f)
{
	const uint64_t *src = (const uint64_t *)f;
	uint64_t *dst = (uint64_t *)to;

	/* Every field up to best_gbps is a uint64_t counter. */
	for (size_t i = 0; i < offsetof(struct dl_copy_facts, best_gbps) / sizeof(uint64_t); i++)
		dst[i] += src[i];
}

static void gather(const struct dl_correlator *c, struct dl_diagnosis *d, struct run_facts *rf)
{
	struct dl_step_stats st;
	const struct dl_step_fold *f = &st.sum;

	memset(rf, 0, sizeof(*rf));
	for (size_t i = 0; i < dl_corr_nprocs(c); i++)
		copy_facts_add(&rf->copy, &dl_corr_proc(c, i)->copy);
	dl_corr_stats(c, NULL, &st);
	for (int cat = 0; cat < DL_CAT_COUNT; cat++)
		d->cat_ns[cat] += f->cat_ns[cat];
	d->total_ns += f->dur_ns;
	rf->disk_peak_mbps = f->io_peak_mbps;
	rf->nsteps = d->nsteps = f->n;
	if (f->n) {
		double n = (double)f->n;

		rf->median_ns = st.median_ns;
		rf->p90_ns = st.p90_ns;
		rf->io_bytes = (double)f->io_read_bytes / n;
		rf->io_ns = (double)f->io_ns / n;
		rf->workers_cpu_ns = (double)f->workers_cpu_ns / n;
		rf->cpu_ns = (double)f->cat_ns[DL_CAT_CPU] / n;
		rf->h2d_bytes = (double)f->h2d_bytes / n;
		rf->d2h_bytes = (double)f->d2h_bytes / n;
		rf->kernels = (double)f->kernels / n;
		rf->small = (double)f->small_copies / n;
		rf->collectives = (double)f->collectives / n;
		rf->comm_bytes = (double)f->comm_bytes / n;
		if (f->cat_ns[DL_CAT_COMM_WAIT])
			rf->comm_after_share = (double)f->comm_after_compute_ns / (double)f->cat_ns[DL_CAT_COMM_WAIT];
	}
	dl_fold_free(&st.sum);
}

static void verdict_message(struct dl_diagnosis *d, const struct run_facts *rf)
{
	double share = 100 * d->share, ms = (double)d->total_ns / 1e6 / (double)(rf->nsteps ? rf->nsteps : 1);
	const uint64_t *cat = d->cat_ns;

	switch (d->verdict) {
	case DL_V_GPU:
		snprintf(d->message, sizeof(d->message),
			 "%.0f%% of step time the host waits for the GPU: input, copies and launches keep up. "
			 "Speed up the device work itself (fused or faster kernels, mixed precision, a larger batch).",
			 share);
		break;
	case DL_V_COMM:
		snprintf(d->message, sizeof(d->message),
			 "%.0f%% of step time the host waits for communication: the last work it waits on is NCCL "
			 "collectives (%.0f per step, %.1f MB).%s Overlap communication with compute (gradient "
			 "bucketing, no synchronization right after the all-reduce), send fewer bytes (bf16 "
			 "gradients, larger but fewer buckets), or check the interconnect (NCCL_DEBUG=INFO names "
			 "the transport).",
			 share, rf->collectives, rf->comm_bytes / 1e6,
			 rf->comm_after_share >= 0.5 ? " Kernels were queued ahead of them in most of these waits: "
						       "some of the time may be compute, which the host cannot "
						       "tell apart (a device profiler can)."
						     : "");
		break;
	case DL_V_INPUT: {
		double inflight = ms > 0 ? 100.0 * rf->io_ns / 1e6 / ms : 0;
		bool disk_bound = inflight >= 50;

		snprintf(d->message, sizeof(d->message),
			 "%.0f%% of step time the main thread waits for data (%.0f%% blocked on disk reads, %.0f%% on "
			 "the data loaders); in an average step of %.1f ms the workers use %.1f ms of CPU and read "
			 "%.1f MB, with reads in flight %.0f%% of the time. %s",
			 share, dl_pct(cat[DL_CAT_IO_WAIT], d->total_ns), dl_pct(cat[DL_CAT_INPUT_WAIT], d->total_ns),
			 ms, rf->workers_cpu_ns / 1e6, rf->io_bytes / 1e6, inflight,
			 disk_bound ? "The loaders wait on the disk: read in larger requests, cache the data set in "
				      "memory, or use faster storage."
				    : "Add data-loader workers (num_workers), prefetch more, or cache / pre-process "
				      "the data set.");
		break;
	}
	case DL_V_COPY:
		snprintf(d->message, sizeof(d->message),
			 "%.0f%% of step time is spent in host-device copies (%.1f MB to the GPU per step, %.0f%% of "
			 "copies from pageable memory, %.0f small copies per step). Pin host memory, copy "
			 "asynchronously on a side stream to overlap compute, and batch small copies.",
			 share, rf->h2d_bytes / 1e6, dl_pct(rf->copy.pageable, rf->copy.copies), rf->small);
		break;
	case DL_V_LAUNCH:
		snprintf(d->message, sizeof(d->message),
			 "%.0f%% of step time goes to launching kernels (%.0f launches in an average %.1f ms step). Fuse "
			 "kernels, capture the step in a CUDA graph (torch.compile mode=\"reduce-overhead\"), or do "
			 "more work per launch with a larger batch.",
			 share, rf->kernels, ms);
		break;
	case DL_V_HOST:
		snprintf(d->message, sizeof(d->message),
			 "%.0f%% of step time the main thread computes on the CPU outside CUDA. Move preprocessing "
			 "into the data-loader workers and profile the framework / Python side of the step.",
			 share);
		break;
	case DL_V_CONTENTION:
		snprintf(d->message, sizeof(d->message),
			 "%.0f%% of step time the main thread is runnable but waits for a CPU: other threads or "
			 "processes compete for the cores. Use fewer worker threads (OMP_NUM_THREADS, num_workers) "
			 "or give the main thread a core of its own.",
			 share);
		break;
	default:
		break;
	}
}

/*
 * The host blocked on collectives: how much of the step, and the bus bandwidth
 * that implies. The wait also holds compute queued ahead of the collective and
 * NCCL's latency, so the bandwidth is a lower bound of what the link gave.
 */
static void comm_finding(struct dl_diagnosis *d, const struct run_facts *rf)
{
	double share = d->total_ns ? (double)d->cat_ns[DL_CAT_COMM_WAIT] / (double)d->total_ns : 0;
	double wait_ns = (double)d->cat_ns[DL_CAT_COMM_WAIT] / (double)(rf->nsteps ? rf->nsteps : 1);
	double gbps = wait_ns > 0 ? rf->comm_bytes / wait_ns : 0;
	struct dl_finding *x;

	if (share < 0.05)
		return;
	x = add_finding(d, "exposed-communication",
			"%.0f%% of step time (%.2f ms per step) the host waits on NCCL collectives, %.1f MB in %.0f "
			"collectives per step: at least %.2f GB/s of bus bandwidth (bytes / wait). Communication is "
			"not hidden behind compute: start it earlier (overlap with the backward pass) or make it "
			"smaller.%s",
			100 * share, wait_ns / 1e6, rf->comm_bytes / 1e6, rf->collectives, gbps,
			rf->comm_after_share > 0 ? " Kernels were queued ahead of the collectives in part of the wait "
						   "(after_compute_share): that part may be compute."
						 : "");
	evidence(x, "share", share);
	evidence(x, "comm_wait_ms_per_step", wait_ns / 1e6);
	evidence(x, "bytes_per_step", rf->comm_bytes);
	evidence(x, "collectives_per_step", rf->collectives);
	evidence(x, "implied_bus_gbps", gbps);
	evidence(x, "after_compute_share", rf->comm_after_share);
}

static double pcie_peak(const struct dl_summary *s, const struct dl_diag_opts *o, const char **src)
{
	if (o && o->pcie_gbps > 0) {
		*src = "option";
		return o->pcie_gbps;
	}
	if (s->pcie_mbps) {
		*src = "sysfs link";
		return s->pcie_mbps / 1e3;
	}
	*src = "default (PCIe Gen4 x16)";
	return 24;
}

static uint64_t small_of(const struct dl_site_stat *st) { return st->small_copies; }
static uint64_t sync_large_of(const struct dl_site_stat *st) { return st->sync_h2d_large; }

/*
 * " Most (N) come from SITE." for the site of any process with the most of
 * count, so a finding names the line to change; "" when no site has any.
 */
static void where_from(const struct dl_correlator *c, uint64_t (*count)(const struct dl_site_stat *), char *buf,
		       size_t len)
{
	const struct dl_site_stat *best = NULL;
	char label[240];

	buf[0] = '\0';
	for (size_t i = 0; i < dl_corr_nprocs(c); i++) {
		const struct dl_sites *s = &dl_corr_proc(c, i)->sites;

		for (size_t k = 0; k < s->v.n; k++)
			if (count(&s->v.v[k]) && (!best || count(&s->v.v[k]) > count(best)))
				best = &s->v.v[k];
	}
	if (!best)
		return;
	dl_site_stat_label(best, label, sizeof(label));
	snprintf(buf, len, " Most (%llu) come from %s.", (unsigned long long)count(best), label);
}

static void copy_findings(struct dl_diagnosis *d, const struct run_facts *rf, const struct dl_correlator *c)
{
	char from[300];

	const struct dl_copy_facts *f = &rf->copy;
	struct dl_finding *x;

	/* Pageable copies of real size: the driver stages them through a pinned bounce buffer. */
	if (f->pageable_bytes >= (uint64_t)rf->nsteps << 20 && f->pageable_bytes >= 1u << 20) {
		x = add_finding(d, "pageable-copies",
				"%llu of %llu copies (%.1f MB per step) come from pageable memory: the driver stages "
				"them through a bounce buffer at a fraction of the link's bandwidth and the async "
				"ones block the caller. Pin the host buffers (DataLoader(pin_memory=True), "
				"cudaHostAlloc or cudaHostRegister).",
				(unsigned long long)f->pageable, (unsigned long long)f->copies,
				rf->nsteps ? (double)f->pageable_bytes / 1e6 / (double)rf->nsteps : 0);
		evidence(x, "pageable_copies", (double)f->pageable);
		evidence(x, "pageable_bytes", (double)f->pageable_bytes);
		evidence(x, "pageable_ms", (double)f->pageable_ns / 1e6);
	}
	if (rf->small >= SMALL_PER_STEP) {
		where_from(c, small_of, from, sizeof(from));
		x = add_finding(d, "small-copies",
				"%.0f copies under 64 KiB per step (%.1f ms per step): each pays the per-transfer "
				"latency. Batch them into fewer, larger transfers (one contiguous buffer per batch).%s",
				rf->small, rf->nsteps ? (double)f->small_ns / 1e6 / (double)rf->nsteps : 0, from);
		evidence(x, "small_per_step", rf->small);
		evidence(x, "le_256B", (double)f->small_hist[0]);
		evidence(x, "le_1KiB", (double)f->small_hist[1]);
		evidence(x, "le_4KiB", (double)f->small_hist[2]);
		evidence(x, "le_16KiB", (double)f->small_hist[3]);
		evidence(x, "le_64KiB", (double)f->small_hist[4]);
	}
	if (f->sync_h2d_large) {
		where_from(c, sync_large_of, from, sizeof(from));
		x = add_finding(d, "sync-copies",
				"%llu synchronous host-to-device copies over 64 KiB: the host stops until each is "
				"done. Use cudaMemcpyAsync from pinned memory on a stream (non_blocking=True) so "
				"copies overlap with compute.%s",
				(unsigned long long)f->sync_h2d_large, from);
		evidence(x, "sync_h2d_over_64KiB", (double)f->sync_h2d_large);
	}
	if (f->misaligned_ptr || f->odd_size) {
		x = add_finding(d, "misaligned-buffers",
				"%llu of %llu copies of 4 KiB or more use host buffers not 64-byte aligned, and %llu "
				"have sizes that are not a multiple of 16 bytes (tensor-core tiles want multiples of "
				"8 fp16 elements). Allocate aligned buffers and pad dimensions.",
				(unsigned long long)f->misaligned_ptr, (unsigned long long)f->aligned_checked,
				(unsigned long long)f->odd_size);
		evidence(x, "misaligned_host_ptr", (double)f->misaligned_ptr);
		evidence(x, "size_not_multiple_of_16", (double)f->odd_size);
		evidence(x, "checked", (double)f->aligned_checked);
	}
}

static const char *verdict_phrase(enum dl_verdict v)
{
	/* Designated: a verdict added to the enum must not shift the others' phrases. */
	static const char *const p[DL_V_COUNT] = {
		[DL_V_GPU] = "the GPU", [DL_V_COMM] = "waiting for communication", [DL_V_INPUT] = "waiting for input",
		[DL_V_COPY] = "host-device copies", [DL_V_LAUNCH] = "kernel launches", [DL_V_HOST] = "host CPU work",
		[DL_V_CONTENTION] = "waiting for a CPU",
	};

	return v < DL_V_COUNT && p[v] ? p[v] : "?";
}

static void sketch(struct dl_diagnosis *d, const struct run_facts *rf, const struct dl_summary *s,
		   const struct dl_diag_opts *o)
{
	struct dl_sketch *k = &d->sketch;

	k->pcie_gbps = pcie_peak(s, o, &k->pcie_src);
	k->disk_mbps = rf->disk_peak_mbps;
	k->disk_src = "measured";
	if (o && o->disk_mbps > 0) {
		k->disk_mbps = o->disk_mbps;
		k->disk_src = "option";
	}
	k->cuda = dl_summary_cuda_loaded(s);
	k->disk_bytes = rf->io_bytes;
	k->pcie_bytes = k->cuda ? rf->h2d_bytes + rf->d2h_bytes : 0;
	k->disk_ns = k->disk_mbps > 0 ? k->disk_bytes / (k->disk_mbps * 1e6) * 1e9 : 0;
	k->pcie_ns = k->pcie_bytes / (k->pcie_gbps * 1e9) * 1e9;
	k->bound_ns = k->disk_ns > k->pcie_ns ? k->disk_ns : k->pcie_ns;
	k->bound_by = k->disk_ns > k->pcie_ns || !k->cuda ? "disk" : "PCIe";
	k->cpu_ns = rf->cpu_ns + rf->workers_cpu_ns;
	k->step_ns = (double)rf->median_ns;
}

static void sketch_finding(struct dl_diagnosis *d, const struct run_facts *rf)
{
	const struct dl_sketch *k = &d->sketch;
	struct dl_finding *x;
	char disk_peak[64];

	/*
	 * A step that waits on the GPU is bounded by compute, which the sketch does
	 * not know; a step that moves nothing has no sketch to be over ("0x").
	 */
	if (d->verdict == DL_V_GPU || !rf->nsteps || !(k->bound_ns > 0) || k->step_ns < SKETCH_FACTOR * k->bound_ns)
		return;
	if (k->disk_mbps > 0)
		snprintf(disk_peak, sizeof(disk_peak), "disk %.0f MB/s %s", k->disk_mbps, k->disk_src);
	else
		snprintf(disk_peak, sizeof(disk_peak), "disk peak unknown: too few reads to measure, see --disk-mbps");
	if (k->cuda)
		x = add_finding(d, "below-paper-sketch",
				"A step moves %.2f MB from disk and %.2f MB over PCIe: at the peaks (%s, PCIe %.1f GB/s "
				"%s) that is %.3f ms, bounded by %s; steps take %.2f ms (median), %.0fx the sketch. The "
				"time goes to %s, not to moving data.",
				k->disk_bytes / 1e6, k->pcie_bytes / 1e6, disk_peak, k->pcie_gbps, k->pcie_src,
				k->bound_ns / 1e6, k->bound_by, k->step_ns / 1e6,
				k->bound_ns > 0 ? k->step_ns / k->bound_ns : 0, verdict_phrase(d->verdict));
	else   /* no CUDA runtime: no PCIe hop to name */
		x = add_finding(d, "below-paper-sketch",
				"A step reads %.2f MB from disk: at the peak (%s) that is %.3f ms; steps take %.2f ms "
				"(median), %.0fx the sketch, and use %.2f ms of CPU. The time goes to %s, not to "
				"moving data.",
				k->disk_bytes / 1e6, disk_peak, k->bound_ns / 1e6, k->step_ns / 1e6,
				k->bound_ns > 0 ? k->step_ns / k->bound_ns : 0, k->cpu_ns / 1e6, verdict_phrase(d->verdict));
	evidence(x, "sketch_ms", k->bound_ns / 1e6);
	evidence(x, "step_ms", k->step_ns / 1e6);
	evidence(x, "ratio", k->bound_ns > 0 ? k->step_ns / k->bound_ns : 0);
	evidence(x, "disk_mbps", k->disk_mbps);
	if (k->cuda)
		evidence(x, "pcie_gbps", k->pcie_gbps);
	else
		evidence(x, "cpu_ms", k->cpu_ns / 1e6);
	evidence_text(x, "bound_by", k->bound_by);
}

/*
 * A read syscall costs about the same whatever its size until the copy
 * dominates: a loader reading in small calls spends its time in syscalls and
 * (uncached) in one device round trip per call. Flagged when most calls on
 * files were small and they took a share of the reading threads' time that
 * the severity scale (DESIGN.md: 5% moderate) counts. Files no loader could
 * read in larger calls (/proc, /sys, files under a page) are left out, and
 * the file named is the one the most small-read bytes came from: a counter
 * read once a step outnumbers the shards in calls, never in bytes.
 */
#define SMALL_READ_SHARE 0.05

static void small_reads_finding(struct dl_diagnosis *d, const struct dl_summary *s)
{
	uint64_t reads = 0, small = 0, small_ns = 0, loader_ns = 0, worst_bytes = 0;
	const char *worst = NULL;
	struct dl_finding *x;
	double share;

	for (size_t i = 0; i < s->n; i++) {
		const struct dl_proc_files *pf = &s->procs[i].files;

		for (size_t k = 0; k < pf->files.n; k++) {
			const struct dl_file_stat *f = &pf->files.v[k];

			if (dl_file_small_by_nature(f))
				continue;   /* /proc, /sys, a file under a page: no larger read to make */
			reads += f->reads;
			small += f->small_reads;
			small_ns += f->small_ns;
			/* The file named is the one most of the small reads' bytes came from, not the most calls. */
			if (f->small_bytes > worst_bytes) {
				worst_bytes = f->small_bytes;
				worst = f->path;
			}
		}
		loader_ns += dl_files_reader_ns(pf);
	}
	if (!small || !worst || small * 2 <= reads || !loader_ns)
		return;
	share = (double)small_ns / (double)loader_ns;
	if (share < SMALL_READ_SHARE)
		return;
	x = add_finding(d, "small-reads",
			"%llu of %llu read calls on files (%.0f%%) returned under %u KiB, most bytes on %s; they took "
			"%.1f ms, %.0f%% of the reading threads' time. Read in larger requests (1 MiB or more), "
			"pack small samples into a record format (tar shards, TFRecord, WebDataset) read "
			"sequentially, or let readahead work (posix_fadvise POSIX_FADV_SEQUENTIAL; no O_DIRECT "
			"for small reads).",
			(unsigned long long)small, (unsigned long long)reads, 100.0 * (double)small / (double)reads,
			DL_SMALL_READ_BYTES >> 10, worst, (double)small_ns / 1e6, 100.0 * share);
	evidence(x, "small_reads", (double)small);
	evidence(x, "reads", (double)reads);
	evidence(x, "small_read_ns", (double)small_ns);
	evidence(x, "loader_ns", (double)loader_ns);
	evidence(x, "loader_share", share);
	evidence(x, "file_small_bytes", (double)worst_bytes);
	evidence_text(x, "file", worst);
}

/*
 * A loader's time in socket receives, per remote endpoint over every process
 * (a data set's workers fetch from the same store). A request and its response
 * cost a round trip and the server's time to the first byte, then the bytes at
 * the rate the path allows: the first receive after a send waits the former,
 * the others the latter. Where the first-byte waits are most of the wait, the
 * fetches are latency-bound (many small requests, each paying the round trip);
 * otherwise bandwidth-bound. Flagged on the small-reads scale: a share of the
 * receiving threads' time the severity scale counts (DESIGN.md: 5% moderate).
 */
#define NET_WAIT_SHARE 0.05
#define NET_ENDPOINTS 256
/* Findings for the endpoints waited on most: more would drown the others. */
#define NET_FINDINGS 3

struct net_total {
	const char *name;
	uint64_t bytes, recvs, recv_ns, responses, response_ns, srtt_us;
	uint64_t receivers_ns;   /* the time of the threads that received, in the processes that received from it */
};

static void net_endpoint_finding(struct dl_diagnosis *d, const struct net_total *w)
{
	double share = (double)w->recv_ns / (double)w->receivers_ns;
	double first_share = (double)w->response_ns / (double)w->recv_ns;
	uint64_t stream_ns = w->recv_ns - w->response_ns;
	struct dl_finding *x;

	if (w->responses && first_share >= 0.5) {
		double per = (double)w->response_ns / (double)w->responses;

		x = add_finding(d, "net-latency",
				"Receiving from %s took %.0f%% of the receiving threads' time (%.1f ms): %llu responses "
				"waited %.2f ms each for their first byte, %.0f%% of the wait (a round trip and the "
				"server's time%s), for %.1f KB each. Latency-bound: every small request pays a full "
				"round trip. Keep more requests in flight (more loader workers, or concurrent requests "
				"per worker), fetch larger objects or shards per request (fewer round trips per byte), "
				"or cache the data set locally.",
				w->name, 100.0 * share, (double)w->recv_ns / 1e6, (unsigned long long)w->responses,
				per / 1e6, 100.0 * first_share,
				w->srtt_us && per > 2e3 * (double)w->srtt_us ? ", mostly the server's: TCP's round trip is far less"
									   : "",
				(double)w->bytes / (double)w->responses / 1e3);
	} else {
		x = add_finding(d, "net-bandwidth",
				"Receiving from %s took %.0f%% of the receiving threads' time (%.1f ms): %.1f MB in %llu "
				"receives at %.1f MB/s once a response was flowing; first bytes took %.0f%% of the wait. "
				"Bandwidth-bound: the rate from that endpoint is the limit. More connections in parallel "
				"help where the limit is per connection (object stores cap a connection's rate); "
				"otherwise cache the data set locally or nearer, or move fewer bytes (compressed or "
				"smaller samples).",
				w->name, 100.0 * share, (double)w->recv_ns / 1e6, (double)w->bytes / 1e6,
				(unsigned long long)w->recvs,
				stream_ns ? (double)w->bytes / ((double)stream_ns / 1e9) / 1e6 : 0.0, 100.0 * first_share);
	}
	evidence_text(x, "endpoint", w->name);
	evidence(x, "recv_ns", (double)w->recv_ns);
	evidence(x, "receivers_ns", (double)w->receivers_ns);
	evidence(x, "share", share);
	evidence(x, "responses", (double)w->responses);
	evidence(x, "response_ns", (double)w->response_ns);
	evidence(x, "bytes", (double)w->bytes);
	evidence(x, "recvs", (double)w->recvs);
	evidence(x, "srtt_us", (double)w->srtt_us);
}

static int by_recv_ns(const void *a, const void *b)
{
	const struct net_total *x = a, *y = b;

	return x->recv_ns == y->recv_ns ? strcmp(x->name, y->name) : x->recv_ns < y->recv_ns ? 1 : -1;
}

static void net_findings(struct dl_diagnosis *d, const struct dl_summary *s)
{
	struct net_total t[NET_ENDPOINTS];
	size_t n = 0;
	int made = 0;

	for (size_t i = 0; i < s->n; i++) {
		const struct dl_proc_net *pn = &s->procs[i].net;
		uint64_t receivers_ns = pn->eps.n ? dl_files_threads_ns(&s->procs[i].files, &pn->receiver_tids) : 0;

		for (size_t k = 0; k < pn->eps.n; k++) {
			const struct dl_net_endpoint *ep = &pn->eps.v[k];
			size_t at = 0;

			while (at < n && strcmp(t[at].name, ep->name))
				at++;
			if (at == n) {
				if (n == NET_ENDPOINTS)
					continue;   /* a job with more endpoints than this spreads its wait thin */
				t[n++] = (struct net_total){ .name = ep->name };
			}
			t[at].bytes += ep->bytes;
			t[at].recvs += ep->recvs;
			t[at].recv_ns += ep->recv_ns;
			t[at].responses += ep->responses;
			t[at].response_ns += ep->response_ns;
			t[at].receivers_ns += receivers_ns;
			if (ep->srtt_us && (!t[at].srtt_us || ep->srtt_us < t[at].srtt_us))
				t[at].srtt_us = ep->srtt_us;
		}
	}
	qsort(t, n, sizeof(t[0]), by_recv_ns);
	for (size_t i = 0; i < n && made < NET_FINDINGS; i++)
		if (t[i].recv_ns && t[i].receivers_ns && (double)t[i].recv_ns >= NET_WAIT_SHARE * (double)t[i].receivers_ns) {
			net_endpoint_finding(d, &t[i]);
			made++;
		}
}

/*
 * An input-bound job: which worker its waits ended on (the wake-ups'
 * producers, analysis/lineage) and what that worker did between hand-offs,
 * since each cause has its own fix.
 */
static void producer_finding(struct dl_diagnosis *d, const struct dl_correlator *c, const struct dl_summary *s)
{
	const struct dl_corr_proc *best = NULL;
	struct dl_lin_totals t;
	const struct dl_proc *wp;
	struct dl_finding *x;
	uint64_t window;
	double cpu, disk, runq, other, net;
	const char *what, *fix, *bound;
	char others[128] = "", netwhat[192], netpart[64] = "";
	uint32_t nthreads = 0, top_ep = 0;

	for (size_t i = 0; i < dl_corr_nprocs(c); i++) {
		const struct dl_corr_proc *p = dl_corr_proc(c, i);

		if (p->lineage.producers && (!best || p->lineage.wait_ns > best->lineage.wait_ns))
			best = p;
	}
	if (!best)
		return;
	t = best->lineage;
	dl_lin_totals_sort(&t);
	window = t.oncpu_ns + t.io_wait_ns + t.runq_ns + t.other_ns;
	if (!window || !t.nwakers)
		return;
	cpu = dl_pct(t.oncpu_ns, window);
	disk = dl_pct(t.io_wait_ns, window);
	runq = dl_pct(t.runq_ns, window);
	other = dl_pct(t.other_ns, window);
	/* Of the time blocked otherwise, what the producers spent in socket receives: a fetch from a server. */
	net = dl_pct(t.net_wait_ns, window);
	for (uint32_t i = 1; i < t.nendpoints; i++)
		if (t.endpoints[i].wait_ns > t.endpoints[top_ep].wait_ns)
			top_ep = i;
	if (net > 0)
		snprintf(netpart, sizeof(netpart), " (%.0f%% of it in socket receives)", net);
	if (net > cpu && net > disk && net > runq && net >= other - net && net >= disk - net && t.nendpoints) {
		snprintf(netwhat, sizeof(netwhat), "network-bound: waiting on %s most (%.1f MB in %" PRIu64 " receives over "
			 "the steps)", t.endpoints[top_ep].name, t.endpoints[top_ep].bytes / 1e6, t.endpoints[top_ep].recvs);
		what = netwhat;
		fix = "Overlap the fetches: more concurrent requests per loader, or more loaders; fetch larger objects or "
		      "shards; or cache the data set near the job (the net-latency or net-bandwidth finding says which "
		      "limit it is).";
		bound = "network";
	} else if (other > cpu && other > disk && other > runq) {
		what = "blocked on something other than the disk: its own upstream (a remote fetch, a queue, a lock)";
		fix = "Find what the loaders wait on (py-spy dump, or dlbpf -v for their wake-ups); add loaders if "
		      "they each wait on a fetch.";
		bound = "other";
	} else if (runq >= cpu && runq >= disk) {
		what = "starved of CPU: runnable, waiting for a CPU";
		fix = "Give the loaders CPUs (fewer competing processes, CPU affinity, fewer threads per process).";
		bound = "cpu-starved";
	} else if (disk >= cpu) {
		what = "disk-bound: blocked on its reads";
		fix = "Read in larger requests, cache the data set in memory, or use faster storage.";
		bound = "disk";
	} else {
		what = "CPU-bound: decoding on its CPU";
		fix = "Add data-loader workers or make decoding cheaper (pre-processed data, a cheaper format).";
		bound = "cpu";
	}
	for (uint32_t i = 1; i < t.nwakers && i < 4; i++) {
		size_t n = strlen(others);

		snprintf(others + n, sizeof(others) - n, "%s%s %u (%.0f%%)", i == 1 ? ", then " : ", ",
			 t.wakers[i].tid ? "thread" : "process", t.wakers[i].tid ? t.wakers[i].tid : t.wakers[i].pid,
			 dl_pct(t.wakers[i].wait_ns, t.wait_ns));
	}
	/* Worker processes are told apart by process; threads of the consumer's own process (loaders) by thread. */
	for (uint32_t i = 0; i < t.nwakers; i++)
		nthreads += t.wakers[i].tid != 0;
	wp = dl_summary_find(s, (pid_t)t.wakers[0].pid);
	x = add_finding(d, "input-producer",
			"The main thread's input waits end on %s %u (%s) for %.0f%% of their time%s. Making their "
			"batches the producers spent %.0f%% of their time on CPU, %.0f%% blocked on disk, %.0f%% "
			"waiting for a CPU and %.0f%% blocked otherwise%s: %s. %s",
			t.wakers[0].tid ? "loader thread" : "worker process",
			t.wakers[0].tid ? t.wakers[0].tid : t.wakers[0].pid, wp ? wp->comm : "?",
			dl_pct(t.wakers[0].wait_ns, t.wait_ns), others, cpu, disk, runq, other, netpart, what, fix);
	evidence(x, "worker_pid", t.wakers[0].pid);
	evidence(x, "worker_tid", t.wakers[0].tid);
	evidence_text(x, "worker_comm", wp ? wp->comm : "");
	evidence(x, "wait_share", (double)t.wakers[0].wait_ns / (double)t.wait_ns);
	evidence(x, "workers", t.nwakers - nthreads);
	evidence(x, "own_threads", nthreads);
	evidence(x, "oncpu_share", cpu / 100);
	evidence(x, "io_wait_share", disk / 100);
	evidence(x, "runq_share", runq / 100);
	evidence(x, "other_wait_share", other / 100);
	evidence(x, "net_wait_share", net / 100);
	/* The correlator's copy: the evidence outlives this function's. */
	evidence_text(x, "net_endpoint", t.nendpoints ? best->lineage.endpoints[top_ep].name : "");
	evidence_text(x, "bound_by", bound);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * A producer's time per batch, from its latest windows: their median. A
 * window spans several batches when the hand-offs between woke no one (the
 * consumer was not waiting: no wake-up to see), and a wait may end on a
 * wake-up that hands on no batch (a lock, the rest of a batch larger than
 * the pipe it crosses), whose window is short: the median stands for the
 * single batches as long as they are most windows, and no short or long
 * outlier moves it. Returns 0 without two windows.
 */
static double batch_ns(const struct dl_lin_totals *t, uint32_t w, uint64_t *n_out)
{
	uint64_t n = t->wakers[w].windows < DL_LIN_WINDOWS ? t->wakers[w].windows : DL_LIN_WINDOWS;
	uint64_t v[DL_LIN_WINDOWS];

	*n_out = n >= 2 ? n : 0;
	if (n < 2)
		return 0;
	memcpy(v, t->wakers[w].window_ns, n * sizeof(v[0]));
	qsort(v, n, sizeof(v[0]), cmp_u64);
	return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2;
}

/*
 * The producers' time per batch against the consumer's time per step without
 * its wait: how many producers would keep up (the seed's order-of-magnitude
 * sketch). A producer's batch time is its window between hand-offs, its own waits in it
 * (a fetch, its upstream) included: while the consumer waits for it, it is
 * not ahead, so none of that is a wait for a free slot.
 */
static void worker_findings(struct dl_diagnosis *d, const struct run_facts *rf, const struct dl_correlator *c)
{
	const struct dl_corr_proc *best = NULL;
	struct dl_lin_totals t;
	struct dl_finding *x;
	double t_batch, t_step, cpu_share, disk_rate = 0, per_batch_bytes, now, weighed = 0, waited = 0;
	uint64_t windows = 0;
	unsigned need, cpus = dl_corr_cpus(c);

	for (size_t i = 0; i < dl_corr_nprocs(c); i++) {
		const struct dl_corr_proc *p = dl_corr_proc(c, i);

		if (p->lineage.producers && (!best || p->lineage.wait_ns > best->lineage.wait_ns))
			best = p;
	}
	if (!best || !rf->nsteps)
		return;
	t = best->lineage;
	dl_lin_totals_sort(&t);
	/*
	 * Each producer's batch time weighed by the consumer's wait on it: a
	 * thread that ends only a few short waits (a queue's feeder thread handing
	 * over the GIL, between batches it did not make) has windows that span its
	 * sleep, and counted as often as a worker's it would make the batches
	 * look several times longer than they are.
	 */
	for (uint32_t i = 0; i < t.nwakers; i++) {
		uint64_t n;
		double b = batch_ns(&t, i, &n);

		if (!n)
			continue;
		windows += n;
		weighed += b * (double)t.wakers[i].wait_ns;
		waited += (double)t.wakers[i].wait_ns;
	}
	if (windows < 3 || !t.nwakers || waited <= 0)
		return;
	t_batch = weighed / waited;
	t_step = (double)(d->total_ns - d->cat_ns[DL_CAT_IO_WAIT] - d->cat_ns[DL_CAT_INPUT_WAIT]) / (double)rf->nsteps;
	if (t_step <= 0)
		return;
	/*
	 * The producers now: at one batch per t_batch each, the steps' pace says
	 * how many there are; counting the wakers would miss those whose batches
	 * are always ready in time (producers fall into step with each other).
	 */
	now = t_batch * (double)rf->nsteps / (double)d->total_ns;
	need = (unsigned)ceil(t_batch / t_step);
	cpu_share = t.oncpu_ns + t.io_wait_ns + t.runq_ns + t.other_ns
		? (double)t.oncpu_ns / (double)(t.oncpu_ns + t.io_wait_ns + t.runq_ns + t.other_ns) : 0;
	/*
	 * What reached the disk, not what was read: reads the page cache served ask nothing of it (page
	 * faults count). The windows' rate, weighed as their parts are, over a batch's time: a window of
	 * two batches (a hand-off that woke no one) brings twice the bytes in twice the time, and one that
	 * ended a short wait of another thread weighs little.
	 */
	per_batch_bytes = t.oncpu_ns + t.io_wait_ns + t.runq_ns + t.other_ns
		? t.disk_rate_weighed / (double)(t.oncpu_ns + t.io_wait_ns + t.runq_ns + t.other_ns) * t_batch : 0;
	if (per_batch_bytes > 0 && rf->disk_peak_mbps > 0)
		disk_rate = rf->disk_peak_mbps * 1e6 / per_batch_bytes;
	if (need > (unsigned)lround(now)) {
		static const struct {
			const char *name, *text;
		} limits[] = {
			{ "cpu", " CPU decode is the limit: that many need that many free cores." },
			{ "disk", " Reading is the limit: more producers help while the disk has bandwidth to spare." },
			{ "cpu-starved", " They wait for a CPU: more producers will not help without free cores." },
			{ "other", " Their own waits (a fetch, an upstream queue) are the limit: more producers overlap them." },
			{ "network", " Their fetches over the network are the limit: more producers (or more requests in "
				     "flight each) overlap them while the server and the link have bandwidth to spare." },
		};
		/* The network's part is within other_ns: it is the limit where it is most of that and beats the rest. */
		uint64_t net_ns = dl_min_u64(t.net_wait_ns, t.other_ns);
		uint64_t part[] = { t.oncpu_ns, t.io_wait_ns, t.runq_ns, t.other_ns - net_ns, net_ns };
		int limit = 0;
		char disk[200] = "";

		/* What the producers' windows went to most: the resource more of them would need. */
		/* What k producers of one batch per t_batch each, on CPU for cpu_share of it, ask of the CPUs. */
		double main_cpu = (double)(d->cat_ns[DL_CAT_CPU] + d->cat_ns[DL_CAT_LAUNCH] + d->cat_ns[DL_CAT_CUDA_OTHER] +
					   d->cat_ns[DL_CAT_H2D] + d->cat_ns[DL_CAT_D2H]) / (double)d->total_ns;
		double cores = (double)cpus - main_cpu, useful = 0, best_step = 0;
		unsigned with_cores = 0;
		char cpu_note[300] = "";

		for (int k = 1; k < 5; k++)
			if (part[k] > part[limit])
				limit = k;
		if (limit == 0 && cpus && cpu_share > 0 && cores > 0) {
			/* Enough to keep those cores busy: past that, producers only share them. */
			useful = ceil(cores / cpu_share);
			if (useful < need) {
				best_step = t_batch * cpu_share / cores;
				snprintf(cpu_note, sizeof(cpu_note), " The job ran on %u CPUs: beside the main thread's %.0f%% of "
					 "one, about %.1f are left to decode, which about %.0f keep busy; then a step takes no "
					 "less than about %.1f ms. More cores or cheaper decoding go further.",
					 cpus, 100 * main_cpu, cores, useful, best_step / 1e6);
			}
		}
		if (limit == 2 && cpus) {
			/* Starved: their batches take that long for want of a CPU, which more of them only share. */
			double own_ns = t_batch * (1 - (double)t.runq_ns / (double)(t.oncpu_ns + t.io_wait_ns + t.runq_ns +
										  t.other_ns));

			with_cores = (unsigned)ceil(own_ns / t_step);
			snprintf(cpu_note, sizeof(cpu_note), " Without that wait a batch takes %.1f ms: about %u producers with "
				 "a core each would keep it fed, and the job ran on %u CPUs.", own_ns / 1e6, with_cores, cpus);
		}
		if (disk_rate > 0)
			snprintf(disk, sizeof(disk), " The disk reads %.1f MB per batch at %.0f MB/s peak, so it allows up to %.0f "
				 "batches/s (the job needs %.0f): %s.", per_batch_bytes / 1e6, rf->disk_peak_mbps, disk_rate,
				 1e9 / t_step, disk_rate * t_step / 1e9 >= 1 ? "the disk is not the limit"
									   : "the disk is the limit too");
		x = add_finding(d, "too-few-workers",
				"Each producer needs %.1f ms per batch (%.0f%% of it on CPU), the main thread consumes one "
				"per %.1f ms: about %u producers would keep it fed (the steps' pace says about %.0f run "
				"now).%s%s%s",
				t_batch / 1e6, 100 * cpu_share, t_step / 1e6, need, now, disk, limits[limit].text, cpu_note);
		evidence_text(x, "limit", limits[limit].name);
		evidence(x, "batch_ms", t_batch / 1e6);
		evidence(x, "step_ms_without_wait", t_step / 1e6);
		evidence(x, "workers_now", now);
		evidence(x, "workers_needed", need);
		evidence(x, "cpu_share", cpu_share);
		evidence(x, "disk_batches_per_s", disk_rate);
		evidence(x, "disk_mb_per_batch", per_batch_bytes / 1e6);
		evidence(x, "cpus", cpus);
		if (with_cores)
			evidence(x, "workers_with_cores", with_cores);
		if (best_step > 0) {
			evidence(x, "workers_for_cpus", useful);
			evidence(x, "best_step_ms", best_step / 1e6);
		}
	}
}

static bool made_cuda_calls(const struct dl_proc *w)
{
	for (int a = 0; a < DL_API_COUNT; a++)
		if (w->calls[a].count)
			return true;
	return false;
}


/* The median work of process i's siblings (others with work, under its name); *k: how many. */
static uint64_t sibling_median(const struct dl_summary *s, const uint64_t *work, size_t i, uint64_t *buf, size_t *k)
{
	*k = 0;
	for (size_t j = 0; j < s->n; j++)
		if (j != i && work[j] && !strcmp(s->procs[j].comm, s->procs[i].comm))
			buf[(*k)++] = work[j];
	if (!*k)
		return 0;
	qsort(buf, *k, sizeof(*buf), cmp_u64);
	return *k % 2 ? buf[*k / 2] : (buf[*k / 2 - 1] + buf[*k / 2]) / 2;
}

/*
 * One loader far slower than its siblings. A DataLoader deals batches to its
 * worker processes in turn and hands them over in order, so each makes as
 * many batches, and a worker's time at work (on CPU and blocked on disk, not
 * waiting for a free slot) over the trace is its time per batch times the
 * same count: one at twice the median of the others' stalls the loop on
 * every batch of its own. Workers: the main process's children that made no
 * CUDA call, under one name.
 */
static void slow_worker_finding(struct dl_diagnosis *d, const struct dl_correlator *c, const struct dl_summary *s)
{
	const struct dl_corr_proc *main_p = NULL;
	uint64_t *work, *buf, median = 0;
	size_t slow = SIZE_MAX, siblings = 0;

	for (size_t i = 0; i < dl_corr_nprocs(c); i++) {
		const struct dl_corr_proc *p = dl_corr_proc(c, i);

		if (p->nsteps && (!main_p || p->lineage.wait_ns > main_p->lineage.wait_ns))
			main_p = p;
	}
	if (!main_p)
		return;
	work = dl_xcalloc(s->n + 1, sizeof(*work));
	buf = dl_xcalloc(s->n + 1, sizeof(*buf));
	for (size_t i = 0; i < s->n; i++) {
		const struct dl_proc *w = &s->procs[i];

		if (w->ppid == main_p->pid && !made_cuda_calls(w))
			work[i] = w->sched.oncpu_ns + w->sched.disk_ns;
	}
	for (size_t i = 0; i < s->n; i++) {
		size_t k;
		uint64_t m = work[i] ? sibling_median(s, work, i, buf, &k) : 0;

		if (m && work[i] >= 2 * m && (slow == SIZE_MAX || work[i] > work[slow])) {
			slow = i;
			median = m;
			siblings = k;
		}
	}
	if (slow != SIZE_MAX) {
		struct dl_finding *x = add_finding(
			d, "slow-worker",
			"Loader pid %d works %.1fx as long as the median of its %zu siblings (%.0f ms against %.0f ms "
			"on CPU and disk over the trace): with batches dealt to the loaders in turn, as a DataLoader "
			"deals them, the loop waits on each of its batches. Find what makes its share slow (its files, "
			"its samples, its CPU's load) or deal work by readiness.",
			s->procs[slow].pid, (double)work[slow] / (double)median, siblings, (double)work[slow] / 1e6,
			(double)median / 1e6);

		evidence(x, "worker_pid", s->procs[slow].pid);
		evidence(x, "work_ms", (double)work[slow] / 1e6);
		evidence(x, "median_others_ms", (double)median / 1e6);
		evidence(x, "ratio", (double)work[slow] / (double)median);
		evidence(x, "siblings", (double)siblings);
	}
	free(work);
	free(buf);
}

/* The stepping thread's lines of one kind, most first. */
static void thread_lines(struct dl_diag_pylines *py, const struct dl_corr_proc *p, const struct dl_summary *s,
			 uint32_t why)
{
	size_t idx[DL_DIAG_PYLINES];

	py->why = why;
	py->pid = (uint32_t)p->pid;
	py->tid = p->main_tid;
	py->from = dl_pylines_from(&s->pylines, p->steps_from_ns);
	py->to = p->steps_to_ns;
	py->n = dl_pylines_top(&s->pylines, py->tid, why, py->from, py->to, idx, py->weight, DL_DIAG_PYLINES,
			       &py->total);
	for (size_t i = 0; i < py->n; i++) {
		py->top[i] = &s->pylines.stacks.v[idx[i]];
		py->line_weight[i] = dl_pylines_line_weight(&s->pylines, py->top[i], py->from, py->to);
	}
}

/* Every other thread's CPU samples, by the line of the job's own code they landed under. */
static void others_lines(struct dl_diag_pylines *py, const struct dl_corr_proc *p, const struct dl_summary *s)
{
	size_t idx[DL_DIAG_PYLINES];

	py->why = DL_PYSTACK_CPU;
	py->others = true;
	py->pid = (uint32_t)p->pid;
	py->tid = p->main_tid;
	py->from = dl_pylines_from(&s->pylines, p->steps_from_ns);
	py->to = p->steps_to_ns;
	py->n = dl_pylines_top_others(&s->pylines, py->tid, DL_PYSTACK_CPU, py->from, py->to, idx, py->weight,
				      DL_DIAG_PYLINES, &py->total);
	for (size_t i = 0; i < py->n; i++) {
		py->top[i] = &s->pylines.stacks.v[idx[i]];
		py->line_weight[i] = py->weight[i];
	}
}

int dl_diag_pyline_text(const struct dl_diag_pylines *py, char *buf, size_t len)
{
	const struct dl_pystack_stat *top = py->n ? py->top[0] : NULL;
	uint32_t own;
	char at[160], inside[170] = "";

	if (!top || !py->total)
		return 0;
	own = dl_pystack_own_frame(top);
	if (own) {
		dl_pyframe_text(top, 0, at, sizeof(at));
		snprintf(inside, sizeof(inside), " inside %s", at);
	}
	dl_pyframe_text(top, own, at, sizeof(at));
	return snprintf(buf, len, "%s%s, %.0f%% of %s", at, inside, dl_pct(py->line_weight[0], py->total),
			py->why == DL_PYSTACK_WAIT ? "its waits of a millisecond or more"
			: py->others              ? "their CPU samples"
						  : "its CPU samples");
}

/*
 * The stepping thread's lines: where it waited and where its CPU samples
 * landed; the verdict's message names the job's own line (and where inside
 * the libraries it was, when elsewhere) for input-bound and host-compute-bound.
 */
static void verdict_lines(struct dl_diagnosis *d, const struct dl_correlator *c, const struct dl_summary *s)
{
	const struct dl_corr_proc *best = NULL;
	const struct dl_diag_pylines *py;
	size_t len, n = 0;
	char where[400];

	for (size_t i = 0; i < dl_corr_nprocs(c); i++) {
		const struct dl_corr_proc *p = dl_corr_proc(c, i);
		size_t steps = p->nsteps + p->folded.n;

		if (steps && (!best || steps > n))
			best = p, n = steps;
	}
	if (!best || !best->main_tid)
		return;
	thread_lines(&d->py_wait, best, s, DL_PYSTACK_WAIT);
	thread_lines(&d->py_cpu, best, s, DL_PYSTACK_CPU);
	others_lines(&d->py_others_cpu, best, s);
	if (d->verdict != DL_V_INPUT && d->verdict != DL_V_HOST)
		return;
	py = d->verdict == DL_V_INPUT ? &d->py_wait : &d->py_cpu;
	if (!dl_diag_pyline_text(py, where, sizeof(where)))
		return;
	len = strlen(d->message);
	snprintf(d->message + len, sizeof(d->message) - len, " The main thread %s at %s.",
		 py->why == DL_PYSTACK_WAIT ? "waited" : "computed", where);
	/* Input-bound: what the loaders computed while it waited. */
	if (d->verdict == DL_V_INPUT && dl_diag_pyline_text(&d->py_others_cpu, where, sizeof(where))) {
		len = strlen(d->message);
		snprintf(d->message + len, sizeof(d->message) - len, " The other threads (the loaders) computed most "
			 "at %s.", where);
	}
}

void dl_diagnose(const struct dl_correlator *c, const struct dl_summary *s, const struct dl_diag_opts *o,
		 struct dl_diagnosis *d)
{
	struct run_facts rf;
	struct dl_finding *x;
	uint64_t events;

	memset(d, 0, sizeof(*d));
	gather(c, d, &rf);
	if (d->nsteps) {
		d->verdict = dl_verdict_of(d->cat_ns, &d->share);
		d->severity = dl_severity_of(d->verdict, d->share);
		verdict_message(d, &rf);
		verdict_lines(d, c, s);
		for (int v = 0; v < DL_V_COUNT; v++) {
			double share = d->total_ns ? (double)dl_verdict_ns(d->cat_ns, v) / (double)d->total_ns : 0;

			if (v == (int)d->verdict || v == DL_V_GPU || share < 0.05)
				continue;
			d->secondary[d->nsecondary].verdict = (enum dl_verdict)v;
			d->secondary[d->nsecondary].share = share;
			d->secondary[d->nsecondary].severity = dl_severity_of(v, share);
			d->nsecondary++;
		}
		copy_findings(d, &rf, c);
		comm_finding(d, &rf);
		if (d->verdict == DL_V_INPUT) {
			producer_finding(d, c, s);
			worker_findings(d, &rf, c);
			slow_worker_finding(d, c, s);
		}
		sketch(d, &rf, s, o);
		sketch_finding(d, &rf);
	}
	small_reads_finding(d, s);
	net_findings(d, s);
	if (s->async_io_ops) {
		x = add_finding(d, "async-io",
				"%.1f MB in %llu requests for the job's files were read or written by kernel threads "
				"(the writeback of pages it dirtied) during the trace: they are not attributed to one "
				"of its processes, so their disk time may be under-counted.",
				(double)s->async_io_bytes / 1e6, (unsigned long long)s->async_io_ops);
		evidence(x, "bytes", (double)s->async_io_bytes);
		evidence(x, "requests", (double)s->async_io_ops);
	}
	events = dl_summary_kernel_events(s);
	if (s->drops_total) {
		double lost = 100.0 * (double)s->drops_total / (double)(events + s->drops_total);

		/* Only ring-buffer drops have an option to fix them; full maps and deep nesting do not. */
		bool ring = s->drops[DL_DROP_CUDA] + s->drops[DL_DROP_BIO] + s->drops[DL_DROP_SCHED] +
			    s->drops[DL_DROP_PROC];

		x = add_finding(d, "dropped-events",
				"%llu events (%.2f%%) were lost in the kernel: counts and breakdowns may be off by "
				"about that much. %s",
				(unsigned long long)s->drops_total, lost,
				ring ? "Use a larger --ringbuf-mb or a shorter --drain-ms."
				     : "A BPF map was full, or CUDA calls nested too deep: see the drops by source.");
		evidence(x, "dropped", (double)s->drops_total);
		evidence(x, "percent", lost);
	}
	if (s->recursion_misses) {
		x = add_finding(d, "skipped-runs",
				"the kernel skipped %llu runs of dlbpf's BPF programs (a tracepoint fired while the same "
				"program ran on that CPU): what they would have recorded is missing.",
				(unsigned long long)s->recursion_misses);
		evidence(x, "skipped", (double)s->recursion_misses);
	}
}
