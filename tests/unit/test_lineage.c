// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Input lineage (analysis/lineage): which wake-up ended each input wait of a
 * main thread, and what its producer did since its previous hand-off. Every
 * expected figure is worked out by hand from the records fed (times in us).
 */
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "records.h"
#include "analysis/lineage.h"
#include "records/stream.h"

#define US(x) ((uint64_t)(x) * 1000ull)
#define MAIN 100
#define W1 200
#define W2 300
#define STRANGER 999

static struct dl_lineage lin;

static void sched(uint32_t pid, uint64_t a, uint64_t b, uint32_t state, uint32_t next)
{
	struct dl_sched_ev e = test_sched(pid, pid, US(a), US(b) - US(a), state, next);

	dl_lineage_note(&lin, &e.h);
}

static void wake(uint32_t waker, uint32_t wakee, uint64_t ts, uint32_t ctx)
{
	struct dl_wake_ev e = { .h = { .size = sizeof(e), .kind = DL_EV_WAKE, .ts = US(ts), .tgid = wakee, .tid = wakee },
				.waker_tgid = waker, .waker_tid = waker, .wakee_tgid = wakee, .wakee_tid = wakee,
				.ctx = ctx, .wakee_state = DL_ST_SLEEP };

	dl_lineage_note(&lin, &e.h);
}

static void open_fd(uint32_t pid, int fd, const char *path)
{
	struct dl_file_open_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_FILE_OPEN, .ts = 1, .tgid = pid, .tid = pid };
	e.fd = fd;
	snprintf(e.path, sizeof(e.path), "%s", path);
	dl_lineage_note(&lin, &e.h);
}

static void read_fd(uint32_t pid, int fd, uint64_t ts, int64_t ret)
{
	struct dl_file_read_ev e = { .h = { .size = sizeof(e), .kind = DL_EV_FILE_READ, .ts = US(ts), .tgid = pid, .tid = pid },
				     .dur_ns = 10, .ret = ret, .fd = fd, .call = DL_READ_PREAD64 };

	dl_lineage_note(&lin, &e.h);
}

static void proc_ev(uint32_t tid, uint32_t what, uint64_t ts)
{
	struct dl_proc_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_PROC, .ts = US(ts), .tgid = tid, .tid = tid };
	e.what = what;
	dl_lineage_note(&lin, &e.h);
}

/* In the table, and the index finds it where it is. */
static bool has_thread(uint32_t tid)
{
	uint64_t i;

	return dl_u64map_get(&lin.by_tid, tid, &i) && i < lin.threads.n && lin.threads.v[i].tid == tid;
}

/* The main thread's spans from the store, as the correlator hands its own to a step. */
static struct dl_step_lineage step(uint64_t a, uint64_t b, const struct dl_span *cuda, size_t ncuda,
				   const struct dl_span *disk, size_t ndisk)
{
	struct dl_step_lineage out;
	uint64_t i = 0;
	const struct dl_lin_thread *t = dl_u64map_get(&lin.by_tid, MAIN, &i) ? &lin.threads.v[i] : NULL;
	struct dl_lin_query q = { .pid = MAIN, .main_tid = MAIN, .start = US(a), .end = US(b), .cuda = cuda,
				  .ncuda = ncuda, .sched = t ? t->spans.v : NULL, .nsched = t ? t->spans.n : 0,
				  .disk = disk, .ndisk = ndisk };

	dl_lineage_step(&lin, &q, &out);
	return out;
}

/*
 * A pin thread (PIN) between a worker (W1) and the main thread: the main
 * thread waits 9000-10000, woken by PIN; PIN waited for the batch 6000-9000,
 * woken by W1 at 8990, after handing over its previous batch at 5000; W1
 * decoded 3000-8990 after its previous post to PIN at 3000, and waited for a
 * free slot before that, woken by MAIN (a loop back: the chain ends there).
 */
#define PIN 101

static void test_chain(void)
{
	struct dl_step_lineage s;

	memset(&lin, 0, sizeof(lin));
	sched(W1, 1000, 2900, DL_ST_SLEEP, DL_ST_RUNNING);
	wake(MAIN, W1, 2900, DL_WAKE_TASK);
	sched(W1, 2900, 3000, DL_ST_RUNNING, DL_ST_RUNNING);
	wake(W1, PIN, 3000, DL_WAKE_TASK);
	sched(W1, 3000, 8990, DL_ST_RUNNING, DL_ST_SLEEP);
	sched(PIN, 3000, 5000, DL_ST_RUNNING, DL_ST_RUNNING);
	wake(PIN, MAIN, 5000, DL_WAKE_TASK);
	sched(PIN, 5000, 6000, DL_ST_RUNNING, DL_ST_SLEEP);
	sched(PIN, 6000, 9000, DL_ST_SLEEP, DL_ST_RUNQ);
	wake(W1, PIN, 8990, DL_WAKE_TASK);
	sched(PIN, 9000, 9010, DL_ST_RUNQ, DL_ST_RUNNING);
	sched(PIN, 9010, 10000, DL_ST_RUNNING, DL_ST_SLEEP);
	wake(PIN, MAIN, 10000, DL_WAKE_TASK);
	sched(MAIN, 0, 9000, DL_ST_RUNNING, DL_ST_SLEEP);
	sched(MAIN, 9000, 10005, DL_ST_SLEEP, DL_ST_RUNNING);
	sched(MAIN, 10005, 12000, DL_ST_RUNNING, DL_ST_SLEEP);

	s = step(8500, 11000, NULL, 0, NULL, 0);
	CHECK(s.woken && s.waker_tid == PIN, "woken by %u, not the pin thread", s.waker_tid);
	/* PIN's window: its previous hand-off at 5000 to this one at 10000. */
	CHECK_EQ_U64(s.since_ns, US(5000));
	CHECK_EQ_U64(s.handoff_ns, US(10000));
	/* One hop up: W1 ended PIN's wait 6000-9000 (3000 us), its window its post at 3000 to the one at 8990. */
	CHECK(s.nchain == 1 && s.chain[0].tid == W1 && s.chain[0].traced, "chain %u, first %u", s.nchain,
	      s.nchain ? s.chain[0].tid : 0);
	CHECK_EQ_U64(s.chain[0].ended_ns, US(3000));
	CHECK_EQ_U64(s.chain[0].since_ns, US(3000));
	CHECK_EQ_U64(s.chain[0].handoff_ns, US(8990));
	CHECK_EQ_U64(s.chain[0].oncpu_ns, US(5990));
	CHECK_EQ_U64(s.chain[0].other_wait_ns, 0);
	dl_lineage_free(&lin);
}


/*
 * A multiprocessing.Queue worker: the feeder thread FEED (of worker process
 * WRK) hands batches to the main thread; the worker's main thread WRK made
 * them. MAIN's index feeder IDX (of MAIN's process) hands WRK its indexes.
 *
 *   1000  FEED hands the previous batch to MAIN (before the step at 3000)
 *   1000-1500 WRK runs; 1500-2000 it waits for indexes, IDX wakes it at 2000
 *   2000-5000 WRK runs; 5000-5500 in D reading 4096 bytes of /data/a (from the
 *   disk, which the tree's reads in flight cover); 5500-6000 runs; at 6000 it
 *   puts the batch (wakes FEED), then waits for indexes until IDX at 9000
 *   FEED sleeps 1000-6000, runs 6000-6500, wakes MAIN at 4200 and 6500
 *   MAIN waits 4000-4200 and 4300-6500 in the step 3000-8000
 *
 * The wake-up at 4200 is part of the same batch (it crossed the pipe in two
 * writes): the window opens at the worker's previous hand-off before the
 * step, 1000, then at its indexes, 2000. FEED worked 500 us in it, WRK 4500:
 * WRK made the batch. Its wait from 6000 until its next indexes is idle.
 */
#define WRK 200
#define FEED 201
#define IDX 102

static void sched_t(uint32_t tgid, uint32_t tid, uint64_t a, uint64_t b, uint32_t state, uint32_t next)
{
	struct dl_sched_ev e = test_sched(tgid, tid, US(a), US(b) - US(a), state, next);

	dl_lineage_note(&lin, &e.h);
}

static void wake_t(uint32_t waker_tgid, uint32_t waker, uint32_t wakee_tgid, uint32_t wakee, uint64_t ts)
{
	struct dl_wake_ev e = { .h = { .size = sizeof(e), .kind = DL_EV_WAKE, .ts = US(ts), .tgid = wakee_tgid, .tid = wakee },
				.waker_tgid = waker_tgid, .waker_tid = waker, .wakee_tgid = wakee_tgid, .wakee_tid = wakee,
				.ctx = DL_WAKE_TASK, .wakee_state = DL_ST_SLEEP };

	dl_lineage_note(&lin, &e.h);
}

static void test_feeder_relay(void)
{
	const struct dl_span disk = { US(5000), US(5500), 0 };
	struct dl_file_read_ev rd = { .h = { .size = sizeof(rd), .kind = DL_EV_FILE_READ, .ts = US(5000), .tgid = WRK,
					     .tid = WRK },
				      .dur_ns = US(500), .ret = 4096, .disk_bytes = 4096, .fd = 3, .call = DL_READ_PREAD64 };
	struct dl_step_lineage s;

	memset(&lin, 0, sizeof(lin));
	open_fd(WRK, 3, "/data/a");
	sched_t(MAIN, MAIN, 0, 4000, DL_ST_RUNNING, DL_ST_SLEEP);
	sched_t(MAIN, MAIN, 4000, 4200, DL_ST_SLEEP, DL_ST_RUNNING);
	sched_t(MAIN, MAIN, 4200, 4300, DL_ST_RUNNING, DL_ST_SLEEP);
	sched_t(MAIN, MAIN, 4300, 6500, DL_ST_SLEEP, DL_ST_RUNNING);
	sched_t(MAIN, MAIN, 6500, 8000, DL_ST_RUNNING, DL_ST_RUNNING);
	wake_t(WRK, FEED, MAIN, MAIN, 1000);
	sched_t(WRK, WRK, 1000, 1500, DL_ST_RUNNING, DL_ST_SLEEP);
	sched_t(WRK, WRK, 1500, 2000, DL_ST_SLEEP, DL_ST_RUNNING);
	wake_t(MAIN, IDX, WRK, WRK, 2000);
	sched_t(WRK, WRK, 2000, 5000, DL_ST_RUNNING, DL_ST_DISK);
	dl_lineage_note(&lin, &rd.h);
	sched_t(WRK, WRK, 5000, 5500, DL_ST_DISK, DL_ST_RUNNING);
	sched_t(WRK, WRK, 5500, 6000, DL_ST_RUNNING, DL_ST_SLEEP);
	wake_t(WRK, WRK, WRK, FEED, 6000);
	sched_t(WRK, WRK, 6000, 9000, DL_ST_SLEEP, DL_ST_RUNNING);
	wake_t(MAIN, IDX, WRK, WRK, 9000);
	sched_t(WRK, FEED, 1000, 6000, DL_ST_SLEEP, DL_ST_RUNNING);
	sched_t(WRK, FEED, 6000, 6500, DL_ST_RUNNING, DL_ST_SLEEP);
	wake_t(WRK, FEED, MAIN, MAIN, 4200);
	wake_t(WRK, FEED, MAIN, MAIN, 6500);

	s = step(3000, 8000, NULL, 0, &disk, 1);
	CHECK(s.woken && s.waker_pid == WRK && s.waker_tid == FEED, "woken by %u/%u", s.waker_pid, s.waker_tid);
	CHECK_EQ_U64(s.waits, 2);
	CHECK_EQ_U64(s.wait_ns, US(2400));
	CHECK_EQ_U64(s.woken_wait_ns, US(2400));
	CHECK(s.producer && s.producer_tid == WRK, "producer %u, not the worker's main thread", s.producer_tid);
	CHECK(s.after_handoff, "a window from a hand-off");
	CHECK_EQ_U64(s.handoff_ns, US(6500));
	CHECK_EQ_U64(s.since_ns, US(2000));
	CHECK_EQ_U64(s.oncpu_ns, US(3500));
	CHECK_EQ_U64(s.io_wait_ns, US(500));
	CHECK_EQ_U64(s.runq_ns, 0);
	CHECK_EQ_U64(s.other_wait_ns, 0);
	CHECK_EQ_U64(s.idle_ns, US(500));
	CHECK_EQ_U64(s.read_bytes, 4096);
	CHECK_EQ_U64(s.disk_bytes, 4096);
	CHECK(s.nfiles == 1 && !strcmp(s.files[0].path, "/data/a") && s.files[0].disk_bytes == 4096 &&
	      s.files[0].reads == 1, "files %u", s.nfiles);
	/* The worker's wait for its indexes is no upstream: no hop. */
	CHECK_EQ_U64(s.nchain, 0);
	dl_lineage_free(&lin);
}

/*
 * The feeder relay's batch fetched instead of read: WRK faults in 8192 bytes
 * of a mapped file at 2500 (a block read outside any read call, of the inode
 * its open named), then receives 65536 bytes from tcp 10.0.0.5:443 in one
 * call 4000-5500, blocked in it 4100-5400 (S) and running around that. FEED
 * receives 100 bytes from another server in its window, blocked in nothing
 * WRK does. The window (2000, 6500]: both receives' bytes, WRK's 1300 us
 * blocked as the network wait, all of it under the first server; the mapped
 * file with its fault bytes and no read call.
 */
static void recv_t(uint32_t tgid, uint32_t tid, uint64_t ts, uint64_t dur, int64_t ret, uint8_t last_octet)
{
	struct dl_net_recv_ev e = { .h = { .size = sizeof(e), .kind = DL_EV_NET_RECV, .ts = US(ts), .tgid = tgid, .tid = tid },
				    .dur_ns = US(dur), .ret = ret, .raddr = { 10, 0, 0, last_octet }, .laddr = { 10, 0, 0, 1 },
				    .family = 2, .protocol = 6, .rport = 443, .lport = 40000, .call = DL_READ_RECVFROM };

	dl_lineage_note(&lin, &e.h);
}

static void test_fetched_batch(void)
{
	struct dl_file_open_ev op;
	struct dl_bio_submit_ev sub = { .h = { .size = sizeof(sub), .kind = DL_EV_BIO_SUBMIT, .ts = US(2500), .tgid = WRK,
					       .tid = WRK },
				        .bytes = 8192, .ino32 = 77 };
	struct dl_step_lineage s;

	memset(&lin, 0, sizeof(lin));
	memset(&op, 0, sizeof(op));
	op.h = (struct dl_hdr){ .size = sizeof(op), .kind = DL_EV_FILE_OPEN, .ts = 1, .tgid = WRK, .tid = WRK };
	op.fd = 5;
	op.ino32 = 77;
	snprintf(op.path, sizeof(op.path), "/data/m");
	dl_lineage_note(&lin, &op.h);
	sched_t(MAIN, MAIN, 0, 4000, DL_ST_RUNNING, DL_ST_SLEEP);
	sched_t(MAIN, MAIN, 4000, 6500, DL_ST_SLEEP, DL_ST_RUNNING);
	sched_t(MAIN, MAIN, 6500, 8000, DL_ST_RUNNING, DL_ST_RUNNING);
	wake_t(WRK, FEED, MAIN, MAIN, 1000);
	sched_t(WRK, WRK, 1000, 1500, DL_ST_RUNNING, DL_ST_SLEEP);
	sched_t(WRK, WRK, 1500, 2000, DL_ST_SLEEP, DL_ST_RUNNING);
	wake_t(MAIN, IDX, WRK, WRK, 2000);
	dl_lineage_note(&lin, &sub.h);
	sched_t(WRK, WRK, 2000, 4100, DL_ST_RUNNING, DL_ST_SLEEP);
	sched_t(WRK, WRK, 4100, 5400, DL_ST_SLEEP, DL_ST_RUNNING);
	recv_t(WRK, WRK, 4000, 1500, 65536, 5);
	sched_t(WRK, WRK, 5400, 6000, DL_ST_RUNNING, DL_ST_SLEEP);
	wake_t(WRK, WRK, WRK, FEED, 6000);
	sched_t(WRK, WRK, 6000, 9000, DL_ST_SLEEP, DL_ST_RUNNING);
	wake_t(MAIN, IDX, WRK, WRK, 9000);
	sched_t(WRK, FEED, 1000, 6000, DL_ST_SLEEP, DL_ST_RUNNING);
	recv_t(WRK, FEED, 6100, 10, 100, 6);
	sched_t(WRK, FEED, 6000, 6500, DL_ST_RUNNING, DL_ST_SLEEP);
	wake_t(WRK, FEED, MAIN, MAIN, 6500);

	s = step(3000, 8000, NULL, 0, NULL, 0);
	CHECK(s.producer && s.producer_tid == WRK, "producer %u, not the worker's main thread", s.producer_tid);
	CHECK_EQ_U64(s.since_ns, US(2000));
	CHECK_EQ_U64(s.handoff_ns, US(6500));
	CHECK_EQ_U64(s.other_wait_ns, US(1300));
	CHECK_EQ_U64(s.net_wait_ns, US(1300));
	CHECK_EQ_U64(s.net_bytes, 65536 + 100);
	CHECK_EQ_U64(s.net_recvs, 2);
	CHECK(s.nendpoints == 2 && !strcmp(s.endpoints[0].name, "tcp 10.0.0.5:443") && s.endpoints[0].wait_ns == US(1300) &&
	      s.endpoints[0].bytes == 65536 && !strcmp(s.endpoints[1].name, "tcp 10.0.0.6:443") &&
	      s.endpoints[1].wait_ns == 0 && s.endpoints[1].bytes == 100,
	      "endpoints %u: %s", s.nendpoints, s.nendpoints ? s.endpoints[0].name : "");
	CHECK_EQ_U64(s.reads, 0);
	CHECK_EQ_U64(s.fault_bytes, 8192);
	CHECK(s.nfiles == 1 && !strcmp(s.files[0].path, "/data/m") && s.files[0].fault_bytes == 8192 &&
	      s.files[0].reads == 0 && s.files[0].read_bytes == 0, "files %u", s.nfiles);
	dl_lineage_free(&lin);
}

/*
 * A window of six files, read interleaved so that a table of four that
 * evicts would drop /d/b and take it back short: the step lists the four
 * with the most bytes, each whole (b 25, a 20, f 20, e 12; c and d 10 each).
 */
static void test_window_files(void)
{
	static const struct {
		const char *path;
		int64_t bytes;
	} rd[] = { { "/d/a", 10 }, { "/d/b", 10 }, { "/d/c", 10 }, { "/d/d", 10 }, { "/d/e", 12 }, { "/d/f", 20 },
		   { "/d/b", 15 }, { "/d/a", 10 } };
	struct dl_step_lineage s;

	memset(&lin, 0, sizeof(lin));
	for (int i = 0; i < 6; i++)
		open_fd(WRK, 10 + i, rd[i].path);
	sched_t(MAIN, MAIN, 0, 4000, DL_ST_RUNNING, DL_ST_SLEEP);
	sched_t(MAIN, MAIN, 4000, 6500, DL_ST_SLEEP, DL_ST_RUNNING);
	sched_t(MAIN, MAIN, 6500, 8000, DL_ST_RUNNING, DL_ST_RUNNING);
	wake_t(WRK, WRK, MAIN, MAIN, 1000);
	sched_t(WRK, WRK, 1000, 1500, DL_ST_RUNNING, DL_ST_SLEEP);
	sched_t(WRK, WRK, 1500, 2000, DL_ST_SLEEP, DL_ST_RUNNING);
	wake_t(MAIN, IDX, WRK, WRK, 2000);
	for (int i = 0; i < 8; i++) {
		struct dl_file_read_ev e = { .h = { .size = sizeof(e), .kind = DL_EV_FILE_READ, .ts = US(2100 + 100 * (uint64_t)i),
						    .tgid = WRK, .tid = WRK },
					     .dur_ns = US(10), .ret = rd[i].bytes, .call = DL_READ_READ };

		/* The fd the path was opened on: the first of that path's in rd[]. */
		for (int k = 0; k < 6; k++)
			if (!strcmp(rd[k].path, rd[i].path)) {
				e.fd = 10 + k;
				break;
			}
		dl_lineage_note(&lin, &e.h);
	}
	sched_t(WRK, WRK, 2000, 6500, DL_ST_RUNNING, DL_ST_SLEEP);
	wake_t(WRK, WRK, MAIN, MAIN, 6500);
	sched_t(WRK, WRK, 6500, 9000, DL_ST_SLEEP, DL_ST_RUNNING);

	s = step(3000, 8000, NULL, 0, NULL, 0);
	CHECK(s.producer && s.producer_tid == WRK, "producer %u", s.producer_tid);
	CHECK_EQ_U64(s.read_bytes, 97);
	CHECK_EQ_U64(s.reads, 8);
	CHECK(s.nfiles == 4 && !strcmp(s.files[0].path, "/d/b") && s.files[0].read_bytes == 25 && s.files[0].reads == 2 &&
	      !strcmp(s.files[1].path, "/d/a") && s.files[1].read_bytes == 20 && !strcmp(s.files[2].path, "/d/f") &&
	      s.files[2].read_bytes == 20 && !strcmp(s.files[3].path, "/d/e") && s.files[3].read_bytes == 12,
	      "files %u: %s %llu", s.nfiles, s.nfiles ? s.files[0].path : "",
	      (unsigned long long)(s.nfiles ? s.files[0].read_bytes : 0));
	dl_lineage_free(&lin);
}

/* Wakers of the consumer's own process are told apart by thread (thread loaders); others by process. */
static void test_totals_by_thread(void)
{
	struct dl_lin_totals t = { 0 };
	struct dl_step_lineage a = { .wait_ns = 10, .woken = true, .waker_ctx = DL_WAKE_TASK, .woken_wait_ns = 10,
				     .waker_pid = MAIN, .waker_tid = 7 };
	struct dl_step_lineage b = a, c = a;

	b.waker_tid = 8;
	c.waker_pid = W1, c.waker_tid = W1 + 1;   /* another process's second thread: that process */
	dl_lin_totals_add(&t, &a, MAIN);
	dl_lin_totals_add(&t, &b, MAIN);
	dl_lin_totals_add(&t, &a, MAIN);
	dl_lin_totals_add(&t, &c, MAIN);
	CHECK(t.nwakers == 3 && t.wakers[0].tid == 7 && t.wakers[0].steps == 2 && t.wakers[1].tid == 8 &&
	      t.wakers[2].pid == W1 && t.wakers[2].tid == 0, "%u wakers", t.nwakers);
}

/* Adds a step to the totals, and its window's on-CPU time weighed by the wait it ended to *oncpu. */
static void add_total(struct dl_lin_totals *tot, const struct dl_step_lineage *s, uint64_t *oncpu)
{
	uint64_t window = s->oncpu_ns + s->io_wait_ns + s->runq_ns + s->other_wait_ns;

	if (s->producer && s->woken && s->waker_ctx == DL_WAKE_TASK && window)
		*oncpu += (uint64_t)((double)s->oncpu_ns * ((double)s->woken_wait_ns / (double)window));
	dl_lin_totals_add(tot, s, MAIN);
}

int main(void)
{
	struct dl_lin_totals tot = { 0 };
	uint64_t oncpu_weighed = 0;
	struct dl_step_lineage s;
	const struct dl_span disk[] = { { US(2500), US(4000), 0 } };
	const struct dl_span cuda[] = { { US(13500), US(15500), DL_CAT_GPU_WAIT } };

	/* Worker 1: its previous hand-off at 1000, then read (D, partly with the tree's reads in flight), a CPU wait, decoding. */
	wake(W1, MAIN, 1000, DL_WAKE_TASK);
	sched(W1, 1000, 2000, DL_ST_RUNNING, DL_ST_DISK);
	sched(W1, 2000, 5000, DL_ST_DISK, DL_ST_RUNQ);
	sched(W1, 5000, 6000, DL_ST_RUNQ, DL_ST_RUNNING);
	sched(W1, 6000, 12000, DL_ST_RUNNING, DL_ST_RUNNING);
	open_fd(W1, 3, "/data/a");
	open_fd(W1, 4, "/data/b");
	read_fd(W1, 3, 500, 100);     /* before the window */
	read_fd(W1, 3, 2000, 4096);
	read_fd(W1, 4, 3000, 8192);
	read_fd(W1, 4, 3500, -5);     /* a failed read counts nowhere */
	/* The main thread waits for it, 8000 to 11010, woken at 11000; then waits on the GPU inside a CUDA call. */
	sched(MAIN, 0, 8000, DL_ST_RUNNING, DL_ST_SLEEP);
	sched(MAIN, 8000, 11010, DL_ST_SLEEP, DL_ST_RUNQ);
	wake(W1, MAIN, 11000, DL_WAKE_TASK);
	sched(MAIN, 11010, 11020, DL_ST_RUNQ, DL_ST_RUNNING);
	sched(MAIN, 11020, 14000, DL_ST_RUNNING, DL_ST_SLEEP);
	sched(MAIN, 14000, 15000, DL_ST_SLEEP, DL_ST_RUNNING);
	wake(W2, MAIN, 14990, DL_WAKE_TASK);   /* inside the CUDA call: a GPU wait, not input */
	sched(MAIN, 15000, 21000, DL_ST_RUNNING, DL_ST_SLEEP);

	s = step(7000, 20000, cuda, 1, disk, 1);
	CHECK_EQ_U64(s.wait_ns, US(3010));
	CHECK_EQ_U64(s.waits, 1);
	CHECK(s.woken && s.waker_pid == W1 && s.waker_tid == W1 && s.waker_ctx == DL_WAKE_TASK, "woken by %u", s.waker_pid);
	CHECK_EQ_U64(s.woken_wait_ns, US(3010));
	CHECK(s.producer && s.after_handoff, "producer %d after hand-off %d", s.producer, s.after_handoff);
	CHECK_EQ_U64(s.since_ns, US(1000));
	CHECK_EQ_U64(s.handoff_ns, US(11000));
	CHECK_EQ_U64(s.oncpu_ns, US(1000) + US(5000));      /* 1000-2000 and 6000-11000 */
	CHECK_EQ_U64(s.io_wait_ns, US(1500));               /* D while reads were in flight, 2500-4000 */
	CHECK_EQ_U64(s.other_wait_ns, US(1500));            /* the rest of the D */
	CHECK_EQ_U64(s.runq_ns, US(1000));
	CHECK_EQ_U64(s.read_bytes, 4096 + 8192);
	CHECK_EQ_U64(s.reads, 2);
	CHECK(s.nfiles == 2 && !strcmp(s.files[0].path, "/data/b") && s.files[0].read_bytes == 8192 &&
	      !strcmp(s.files[1].path, "/data/a") && s.files[1].reads == 1, "files %u", s.nfiles);
	add_total(&tot, &s, &oncpu_weighed);

	/* Round robin: worker 2 hands over the next batch; its first hand-off, so its window starts at its first record. */
	sched(W2, 15000, 29995, DL_ST_RUNNING, DL_ST_SLEEP);
	sched(MAIN, 21000, 30000, DL_ST_SLEEP, DL_ST_RUNNING);
	wake(W2, MAIN, 29990, DL_WAKE_TASK);
	/* Recorded before the wake-up of 14990: edges come from every CPU, kept in time order. */
	wake(W2, MAIN, 14980, DL_WAKE_TASK);
	s = step(20000, 40000, NULL, 0, NULL, 0);
	CHECK(s.woken && s.waker_pid == W2, "woken by %u", s.waker_pid);
	CHECK_EQ_U64(s.wait_ns, US(9000));
	/* The hand-off at 14990 is its previous one: the window starts there. */
	CHECK(s.producer && s.after_handoff, "after hand-off %d", s.after_handoff);
	CHECK_EQ_U64(s.since_ns, US(14990));
	CHECK_EQ_U64(s.oncpu_ns, US(29990) - US(15000));
	CHECK_EQ_U64(s.reads, 0);
	add_total(&tot, &s, &oncpu_weighed);

	/* Woken from a softirq (a block completion): no producer. */
	sched(MAIN, 30000, 41000, DL_ST_RUNNING, DL_ST_DISK);
	sched(MAIN, 41000, 45000, DL_ST_DISK, DL_ST_RUNNING);
	wake(0, MAIN, 44990, DL_WAKE_SOFTIRQ);
	s = step(40000, 50000, NULL, 0, NULL, 0);
	CHECK(s.woken && s.waker_ctx == DL_WAKE_SOFTIRQ && s.waker_pid == 0 && !s.producer, "ctx %u", s.waker_ctx);
	CHECK_EQ_U64(s.wait_ns, US(4000));
	add_total(&tot, &s, &oncpu_weighed);

	/* No wake-up seen. */
	sched(MAIN, 45000, 51000, DL_ST_RUNNING, DL_ST_SLEEP);
	sched(MAIN, 51000, 52000, DL_ST_SLEEP, DL_ST_RUNNING);
	s = step(50000, 60000, NULL, 0, NULL, 0);
	CHECK(!s.woken && !s.producer && s.wait_ns == US(1000) && s.waits == 1, "woken %d", s.woken);
	add_total(&tot, &s, &oncpu_weighed);

	/* Woken by a task of which nothing else was traced. */
	sched(MAIN, 52000, 61000, DL_ST_RUNNING, DL_ST_SLEEP);
	sched(MAIN, 61000, 62000, DL_ST_SLEEP, DL_ST_RUNNING);
	wake(STRANGER, MAIN, 61990, DL_WAKE_TASK);
	s = step(60000, 70000, NULL, 0, NULL, 0);
	CHECK(s.woken && s.waker_pid == STRANGER && !s.producer, "woken by %u, producer %d", s.waker_pid, s.producer);
	add_total(&tot, &s, &oncpu_weighed);

	/*
	 * The wake-up raced the sleep: sched_waking came 10 us before the switch-out. One 2 ms before it is
	 * past the race's 1 ms and ended nothing; one inside the wait the step is still blocked in at its end
	 * belongs to the next step.
	 */
	sched(MAIN, 62000, 71000, DL_ST_RUNNING, DL_ST_SLEEP);
	wake(W2, MAIN, 69000, DL_WAKE_TASK);
	wake(W1, MAIN, 70990, DL_WAKE_TASK);
	sched(MAIN, 71000, 72000, DL_ST_SLEEP, DL_ST_RUNNING);
	sched(MAIN, 72000, 79000, DL_ST_RUNNING, DL_ST_SLEEP);
	sched(MAIN, 79000, 81000, DL_ST_SLEEP, DL_ST_RUNNING);
	wake(W2, MAIN, 80990, DL_WAKE_TASK);
	s = step(70000, 80000, NULL, 0, NULL, 0);
	CHECK(s.woken && s.waker_pid == W1, "woken by %u", s.waker_pid);
	CHECK_EQ_U64(s.wait_ns, US(1000) + US(1000));
	CHECK_EQ_U64(s.waits, 2);
	CHECK_EQ_U64(s.woken_wait_ns, US(1000));
	/* Its window runs from its hand-off at 11000: 11000-12000 closed, then the state it entered, running. */
	CHECK_EQ_U64(s.since_ns, US(11000));
	CHECK_EQ_U64(s.oncpu_ns, US(70990) - US(11000));
	add_total(&tot, &s, &oncpu_weighed);

	/* The totals: by waker process, most wait first; the rest is the interrupts' and the unexplained. */
	dl_lin_totals_sort(&tot);
	CHECK_EQ_U64(tot.wait_ns, US(3010) + US(9000) + US(4000) + US(1000) + US(1000) + US(2000));
	CHECK(tot.nwakers == 3 && tot.wakers[0].pid == W2 && tot.wakers[0].wait_ns == US(9000) &&
	      tot.wakers[1].pid == W1 && tot.wakers[1].wait_ns == US(3010) + US(1000) && tot.wakers[1].steps == 2 &&
	      tot.wakers[2].pid == STRANGER, "wakers %u: %u %u", tot.nwakers, tot.wakers[0].pid, tot.wakers[1].pid);
	CHECK_EQ_U64(tot.irq_wait_ns, US(4000));
	CHECK_EQ_U64(tot.other_wait_ns, US(4000) + US(1000) + US(1000));
	CHECK_EQ_U64(tot.producers, 3);
	/*
	 * The producers' on-CPU time, each window's weighed by the wait it ended (3010, 9000 and 1000 us
	 * of the main thread's): no more than those waits, and more than nothing (they ran in each).
	 */
	CHECK_EQ_U64(tot.oncpu_ns, oncpu_weighed);
	CHECK(oncpu_weighed > 0 && oncpu_weighed <= US(3010) + US(9000) + US(1000), "weighed on-CPU %llu ns",
	      (unsigned long long)oncpu_weighed);

	/* Forgetting keeps each producer's last hand-off before the cut: the next window still starts there. */
	dl_lineage_forget_before(&lin, US(75000), 0);
	sched(MAIN, 81000, 90000, DL_ST_RUNNING, DL_ST_SLEEP);
	sched(MAIN, 90000, 91000, DL_ST_SLEEP, DL_ST_RUNNING);
	wake(W1, MAIN, 90990, DL_WAKE_TASK);
	s = step(85000, 95000, NULL, 0, NULL, 0);
	CHECK(s.woken && s.waker_pid == W1 && s.after_handoff && s.since_ns == US(70990), "since %llu",
	      (unsigned long long)s.since_ns);

	/* The stream knows the kind's size: one cut short is malformed and reaches no sink. */
	{
		struct dl_stream st = { 0 };
		struct dl_wake_ev e = { .h = { .size = sizeof(e), .kind = DL_EV_WAKE, .ts = 5, .tgid = MAIN, .tid = MAIN } };

		CHECK(dl_stream_emit(&st, &e, sizeof(e)) == 0 && st.malformed == 0, "a whole wake-up refused");
		e.h.size = sizeof(e) - 4;
		CHECK(dl_stream_emit(&st, &e, sizeof(e) - 4) == -1 && st.malformed == 1, "a short wake-up accepted");
		dl_stream_free(&st);
	}

	/*
	 * Threads that exited go once no step reaches back to them, whatever they did (a job that
	 * starts threads by the thousand); one whose tid came back as a new thread stays, and so
	 * does one that exited after the cut.
	 */
	{
		size_t before;

		sched(500, 96000, 97000, DL_ST_RUNNING, 0);
		wake(500, MAIN, 96990, DL_WAKE_TASK);
		proc_ev(500, DL_PROC_EXIT, 97000);
		sched(501, 96000, 97000, DL_ST_RUNNING, 0);
		proc_ev(501, DL_PROC_EXIT, 97000);
		proc_ev(501, DL_PROC_THREAD, 97500);
		sched(502, 96000, 99000, DL_ST_RUNNING, 0);
		proc_ev(502, DL_PROC_EXIT, 99000);
		before = lin.threads.n;
		dl_lineage_forget_before(&lin, US(75000), US(98000));
		CHECK(lin.threads.n == before - 1, "%zu threads of %zu kept", lin.threads.n, before);
		CHECK(!has_thread(500) && has_thread(501) && has_thread(502) && has_thread(MAIN) && has_thread(W1),
		      "the wrong threads forgotten");
		/* The rest of the table still finds each thread (the last one moved into the freed slot). */
		wake(W2, 502, 99500, DL_WAKE_TASK);
		CHECK(has_thread(502) && lin.threads.n == before - 1, "a moved thread found again");
	}

	/* An unknown waker context has a name too, for the JSON. */
	CHECK(!strcmp(dl_wake_ctx_name(DL_WAKE_KTHREAD), "kthread") && !strcmp(dl_wake_ctx_name(77), "unknown"), "names");
	dl_lineage_free(&lin);
	test_chain();
	test_feeder_relay();
	test_fetched_batch();
	test_window_files();
	test_totals_by_thread();
	return check_report("test_lineage");
}
