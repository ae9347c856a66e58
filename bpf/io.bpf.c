// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Block I/O. A request is attributed to the task that starts it. Its bytes
 * are counted where the submitter runs: a DL_EV_BIO_SUBMIT record when the
 * request starts and for each bio of a traced task that joins a request
 * already started (a merge), which is what /proc/PID/io counts for reads.
 * The completion (a DL_EV_BIO record) says how long it took and how it ended.
 *
 * Counting at completion alone came out short by whole requests in about 1
 * run of 15 on a loaded kernel 6.18 VM: ftrace saw the block_rq_complete, no
 * BPF program did, and no recursion_misses were counted. The completion ran
 * in softirq on top of a task the kernel runs no BPF program for (there, the
 * threads of pid 1: not one of their syscalls reaches a BPF program). A
 * completion can also be skipped by the recursion guard. So a request whose
 * completion is never seen keeps its entry here until its pointer is started
 * again as a new request (or until the end, when user space reads what is
 * left): then it is written as DL_BIO_UNSEEN, and the entry can no longer
 * give a later request of another task to this one's submitter.
 *
 * Counting at issue over-counts (requests are reissued after a requeue), and
 * issue may run in kblockd's kworker. Completion runs in interrupt context,
 * so the submitter is whatever was saved at start.
 */
#include "common.bpf.h"
#include "dlbpf/io.h"

#define PF_KTHREAD 0x00200000
#define REQ_OP_MASK 0xff
#define REQ_OP_READ 0
#define REQ_OP_WRITE 1

/* Set by user space from the BTF of btf_trace_block_bio_backmerge: (q, rq, bio) before 5.11, (bio) since. */
const volatile bool bio_merge_bio_only = true;
/* Set from btf_trace_block_getrq: (q, bio, rw) before 5.11, (bio) since. */
const volatile bool getrq_bio_only = true;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DL_MAX_REQUESTS);
	__type(key, __u64);
	__type(value, struct dl_rq_start);
} requests SEC(".maps");

/*
 * Files whose pages a traced task dirtied (by device and inode number): a
 * kernel thread's write of their pages (writeback) is the job's async I/O;
 * a kernel thread's request for anyone else's file (another job's writes, a
 * journal) is no concern of the job's and is not recorded.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, DL_MAX_REQUESTS);
	__type(key, __u64);
	__type(value, __u8);
} job_inodes SEC(".maps");

#define PAGE_MAPPING_ANON 0x1ul
#define S_IFMT 00170000
#define S_IFREG 0100000

static __always_inline __u64 inode_key(struct inode *inode)
{
	return (__u64)BPF_CORE_READ(inode, i_sb, s_dev) << 40 ^ BPF_CORE_READ(inode, i_ino);
}

/* A traced task dirtied the inode (its pages or itself): fires in the dirtier's context. */
SEC("tp_btf/writeback_mark_inode_dirty")
int BPF_PROG(io_dirty, struct inode *inode, int flags)
{
	__u64 key;

	/*
	 * Regular files only: a block device's own inode (the file system's
	 * metadata buffers, which every writer on it dirties) would give the
	 * job every other writer's metadata.
	 */
	if ((BPF_CORE_READ(inode, i_mode) & S_IFMT) != S_IFREG || !dl_is_traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	key = inode_key(inode);
	bpf_map_update_elem(&job_inodes, &key, &(__u8){ 1 }, BPF_ANY);
	return 0;
}

/* The file whose page cache a bio's first page belongs to; NULL for anonymous memory (swap, direct I/O) or none. */
static __always_inline struct inode *bio_file(struct bio *bio)
{
	struct page *page = bio ? BPF_CORE_READ(bio, bi_io_vec, bv_page) : NULL;
	unsigned long mapping;

	if (!page)
		return NULL;
	mapping = (unsigned long)BPF_CORE_READ(page, mapping);
	if (!mapping || (mapping & PAGE_MAPPING_ANON))
		return NULL;
	return BPF_CORE_READ((struct address_space *)mapping, host);
}

/* The low 32 bits of a bio's regular file's inode (0: none; a block device's own inode is metadata). */
static __always_inline __u32 bio_ino32(struct bio *bio)
{
	struct inode *inode = bio_file(bio);

	if (!inode || (BPF_CORE_READ(inode, i_mode) & S_IFMT) != S_IFREG)
		return 0;
	return (__u32)BPF_CORE_READ(inode, i_ino);
}

/* Whether a kernel thread's request carries a page of a file a traced task dirtied (its first bio's first page). */
static __always_inline bool rq_of_job(struct request *rq)
{
	struct inode *inode = bio_file(BPF_CORE_READ(rq, bio));
	__u64 key;

	if (!inode)
		return false;
	key = inode_key(inode);
	return bpf_map_lookup_elem(&job_inodes, &key) != NULL;
}

struct bio___pre_5_12 {
	struct gendisk *bi_disk;
	__u8 bi_partno;
} __attribute__((preserve_access_index));

static __always_inline __u32 bio_dev(struct bio *bio)
{
	struct bio___pre_5_12 *old = (void *)bio;

	if (bpf_core_field_exists(bio->bi_bdev))
		return BPF_CORE_READ(bio, bi_bdev, bd_dev);
	return BPF_CORE_READ(old, bi_disk, major) << 20 | (BPF_CORE_READ(old, bi_disk, first_minor) +
							    BPF_CORE_READ(old, bi_partno));
}

/* The request's device: from its first bio (rq->part is set only after block_io_start). */
static __always_inline __u32 rq_dev(struct request *rq)
{
	struct bio *bio = BPF_CORE_READ(rq, bio);

	return bio ? bio_dev(bio) : BPF_CORE_READ(rq, part, bd_dev);
}

static __always_inline void emit_submit(__u64 ts, __u64 id, __u64 sector, __u32 bytes, __u32 dev, __u32 flags,
					struct bio *bio)
{
	struct dl_bio_submit_ev *e;

	/* Submissions run in the submitter's context: a read syscall in flight there caused this one. */
	if (!(flags & DL_BIO_WRITE) && dl_note_read_submit(bytes))
		flags |= DL_BIO_IN_READ;
	e = dl_reserve(sizeof(*e), DL_EV_BIO_SUBMIT, DL_DROP_BIO, ts, id >> 32, (__u32)id);
	if (!e)
		return;
	e->sector = sector;
	e->bytes = bytes;
	e->dev = dev;
	e->flags = flags;
	/* A read outside any read call: the file (a mapping's page fault) is named by the inode. */
	e->ino32 = flags & (DL_BIO_WRITE | DL_BIO_IN_READ) ? 0 : bio_ino32(bio);
	dl_submit(e);
}

/* A request that ended without a completion this side saw. */
static __always_inline void emit_unseen(const struct dl_rq_start *s)
{
	struct dl_bio_ev *e;

	e = dl_reserve(sizeof(*e), DL_EV_BIO, DL_DROP_BIO, s->ts, s->tgid, s->tid);
	if (!e)
		return;
	e->dur_ns = 0;
	e->sector = s->sector;
	e->bytes = s->remaining;
	e->dev = s->dev;
	e->flags = (s->flags & 0xffff) | DL_BIO_UNSEEN;
	e->complete_cpu = bpf_get_smp_processor_id();
	dl_submit(e);
}

/* enum req_flag_bits moves between kernels: its value comes from the running kernel's BTF. */
static __always_inline __u32 meta_flag(__u64 opf)
{
	return opf >> bpf_core_enum_value(enum req_flag_bits, __REQ_META) & 1 ? DL_BIO_META : 0;
}

enum start_how { START, INSERT, ISSUE };

static __always_inline int on_start(struct request *rq, enum start_how how)
{
	__u64 key = (__u64)rq, id = bpf_get_current_pid_tgid();
	struct task_struct *task = (void *)bpf_get_current_task();
	struct dl_rq_start s = {}, *old;
	__u32 op, tgid = id >> 32, opf = BPF_CORE_READ(rq, cmd_flags);
	bool kthread;

	op = opf & REQ_OP_MASK;
	if (op != REQ_OP_READ && op != REQ_OP_WRITE)
		return 0;
	old = bpf_map_lookup_elem(&requests, &key);
	if (old) {
		/* Older kernels (no block_io_start): an issue, or the insert after a requeue, is not a new request. */
		if (how == ISSUE || (how == INSERT && (old->flags & DL_RQ_REQUEUED))) {
			old->flags &= ~DL_RQ_REQUEUED;
			return 0;
		}
		emit_unseen(old);
	}
	kthread = BPF_CORE_READ(task, flags) & PF_KTHREAD;
	if (kthread ? !rq_of_job(rq) : !dl_is_traced(tgid)) {
		if (old)
			bpf_map_delete_elem(&requests, &key);
		return 0;
	}
	if (kthread)
		s.flags |= DL_BIO_ASYNC;
	if (op == REQ_OP_WRITE)
		s.flags |= DL_BIO_WRITE;
	s.flags |= meta_flag(opf);
	s.ts = bpf_ktime_get_ns();
	s.tgid = tgid;
	s.tid = (__u32)id;
	s.sector = BPF_CORE_READ(rq, __sector);
	s.remaining = BPF_CORE_READ(rq, __data_len);
	s.dev = rq_dev(rq);
	if (bpf_map_update_elem(&requests, &key, &s, BPF_ANY))
		dl_count_drop(DL_DROP_INFLIGHT);
	/*
	 * Kernel threads' requests are counted at completion only, as async I/O
	 * of no process; an empty request (a cache flush) carries no bytes.
	 * Older kernels count at block_getrq (below): by their insert or issue,
	 * bios merged in the plug are in the request's size already.
	 */
	if (!kthread && s.remaining && how == START)
		emit_submit(s.ts, id, s.sector, s.remaining, s.dev, s.flags & (DL_BIO_WRITE | DL_BIO_META),
			    BPF_CORE_READ(rq, bio));
	return 0;
}

/* Twins: user space enables block_io_start where the kernel has it (BTF probe), the pair below elsewhere. */
SEC("?raw_tp/block_io_start")
int BPF_PROG(io_start, struct request *rq)
{
	return on_start(rq, START);
}

SEC("?raw_tp/block_rq_insert")
int BPF_PROG(io_insert, struct request *rq)
{
	return on_start(rq, INSERT);
}

/* Older kernels: requests issued directly (no scheduler insert) are seen first here. */
SEC("?raw_tp/block_rq_issue")
int BPF_PROG(io_issue, struct request *rq)
{
	return on_start(rq, ISSUE);
}

/* Older kernels: a request is allocated for a bio of the task, as block_io_start would say. */
SEC("?raw_tp/block_getrq")
int BPF_PROG(io_getrq)
{
	struct bio *bio = (struct bio *)dl_ctx_pick(ctx, getrq_bio_only, 0, 1);
	__u64 id = bpf_get_current_pid_tgid();
	__u32 opf = BPF_CORE_READ(bio, bi_opf), op = opf & REQ_OP_MASK, bytes = BPF_CORE_READ(bio, bi_iter.bi_size);

	if ((op != REQ_OP_READ && op != REQ_OP_WRITE) || !bytes || !dl_is_traced(id >> 32))
		return 0;
	emit_submit(bpf_ktime_get_ns(), id, BPF_CORE_READ(bio, bi_iter.bi_sector), bytes, bio_dev(bio),
		    (op == REQ_OP_WRITE ? DL_BIO_WRITE : 0) | meta_flag(opf), bio);
	return 0;
}

/*
 * Every kernel: what is outstanding when the request goes to the device,
 * bios merged into it by then included, for the DL_BIO_UNSEEN record of a
 * request whose completion is not seen.
 */
SEC("raw_tp/block_rq_issue")
int BPF_PROG(io_dispatch, struct request *rq)
{
	__u64 key = (__u64)rq;
	struct dl_rq_start *s = bpf_map_lookup_elem(&requests, &key);

	if (s)
		s->remaining = BPF_CORE_READ(rq, __data_len);
	return 0;
}

/* Older kernels: a requeued request is inserted again; that insert must not start it anew. */
SEC("?raw_tp/block_rq_requeue")
int BPF_PROG(io_requeue, struct request *rq)
{
	__u64 key = (__u64)rq;
	struct dl_rq_start *s = bpf_map_lookup_elem(&requests, &key);

	if (s)
		s->flags |= DL_RQ_REQUEUED;
	return 0;
}

/* A request merged into another is freed without a completion: its bytes complete with the other. */
SEC("raw_tp/block_rq_merge")
int BPF_PROG(io_rq_merge, struct request *next)
{
	__u64 key = (__u64)next;

	bpf_map_delete_elem(&requests, &key);
	return 0;
}

static __always_inline int on_bio_merge(struct bio *bio)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 opf = BPF_CORE_READ(bio, bi_opf), op = opf & REQ_OP_MASK;

	if ((op != REQ_OP_READ && op != REQ_OP_WRITE) || !dl_is_traced(id >> 32))
		return 0;
	emit_submit(bpf_ktime_get_ns(), id, BPF_CORE_READ(bio, bi_iter.bi_sector), BPF_CORE_READ(bio, bi_iter.bi_size),
		    bio_dev(bio), DL_BIO_MERGED | (op == REQ_OP_WRITE ? DL_BIO_WRITE : 0) | meta_flag(opf), bio);
	return 0;
}

/* Raw tracepoint arguments are u64 slots: the bio is the first, or the third before 5.11. */
SEC("raw_tp/block_bio_backmerge")
int BPF_PROG(io_backmerge)
{
	return on_bio_merge((struct bio *)dl_ctx_pick(ctx, bio_merge_bio_only, 0, 2));
}

SEC("raw_tp/block_bio_frontmerge")
int BPF_PROG(io_frontmerge)
{
	return on_bio_merge((struct bio *)dl_ctx_pick(ctx, bio_merge_bio_only, 0, 2));
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(io_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq, now = bpf_ktime_get_ns();
	struct dl_rq_start *s = bpf_map_lookup_elem(&requests, &key);
	struct dl_bio_ev *e;
	__u32 flags;

	if (!s)
		return 0;
	flags = s->flags & 0xffff;
	if (error)
		flags |= DL_BIO_ERROR;
	if (nr_bytes < s->remaining)
		flags |= DL_BIO_PARTIAL;
	e = dl_reserve(sizeof(*e), DL_EV_BIO, DL_DROP_BIO, s->ts, s->tgid, s->tid);
	if (e) {
		e->dur_ns = now - s->ts;
		e->sector = BPF_CORE_READ(rq, __sector);
		e->bytes = nr_bytes;
		e->dev = BPF_CORE_READ(rq, part, bd_dev);
		e->flags = flags;
		e->complete_cpu = bpf_get_smp_processor_id();
		dl_submit(e);
	}
	if (flags & DL_BIO_PARTIAL)
		s->remaining -= nr_bytes;
	else
		bpf_map_delete_elem(&requests, &key);
	return 0;
}
