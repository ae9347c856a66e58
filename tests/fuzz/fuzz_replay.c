// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `dlbpf report FILE` on arbitrary bytes: the recording reader, then every sink
 * main.c wires (summary, correlator, recorder, both timeline formats) and every
 * report (text, steps, JSON), as a replay would run them.
 *
 * Besides "no crash, no hang, no sanitizer report", it checks what a recording
 * promises: what the recorder writes replays record for record, a step's
 * categories add up to its duration, both JSON outputs (the summary and the
 * Chrome timeline) are JSON and the Perfetto trace is whole packets, whatever
 * the recording held.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis/correlate.h"
#include "analysis/diagnose.h"
#include "analysis/summary.h"
#include "log.h"
#include "output/report.h"
#include "output/report_diag.h"
#include "output/timeline.h"
#include "records/recenc.h"
#include "records/record.h"
#include "records/stream.h"
#include "util.h"
#include "harness.h"
#include "json_check.h"
#include "mutate_records.h"

static struct memfile input, summary_json;
static struct outpath rerecorded, trace_json, trace_pb;
static FILE *devnull;


/* What the sinks were given, as a count and a running hash of the bytes. */
struct digest {
	uint64_t n, hash;
};

static CHECKER int digest_sink(void *ctx, const struct dl_rec *r)
{
	struct digest *d = ctx;

	d->n++;
	d->hash = dl_hash_bytes(r->h, r->h->size) ^ (d->hash * 0x100000001b3ull);
	return 0;
}

struct steps {
	struct dl_step_printer printer;
	struct dl_timeline *trace[2];
};

static CHECKER void check_json(char *buf, size_t size, const char *what)
{
	size_t at;
	const char *why = json_check(buf, size, &at);

	if (why)
		FAIL("the %s is not JSON: %s at byte %zu of %zu: '%.40s'", what, why, at, size,
		     buf + (at > 20 ? at - 20 : 0));
	free(buf);
}

/*
 * A Perfetto trace is packets end to end, each field 1 (TracePacket) with a length that
 * stays inside the file; what is inside them test_perfetto decodes.
 */
static CHECKER void check_packets(const struct outpath *o)
{
	size_t size, at = 0, n = 0;
	unsigned char *buf = (unsigned char *)outpath_get(o, &size);

	while (at < size) {
		uint64_t len = 0;
		int shift = 0;

		if (buf[at++] != 0x0a)
			FAIL("pftrace: byte %zu (packet %zu) is not the tag of a TracePacket", at - 1, n);
		do {
			if (at >= size || shift > 63)
				FAIL("pftrace: packet %zu's length is cut short", n);
			len |= (uint64_t)(buf[at] & 0x7f) << shift;
			shift += 7;
		} while (buf[at++] & 0x80);
		if (len > size - at)
			FAIL("pftrace: packet %zu claims %llu bytes, %zu remain", n, (unsigned long long)len, size - at);
		at += len;
		n++;
	}
	free(buf);
}

static void on_step(void *ctx, const struct dl_step *st)
{
	struct steps *s = ctx;
	uint64_t sum = 0;

	for (int c = 0; c < DL_CAT_COUNT; c++)
		sum += st->cat_ns[c];
	if (sum != st->dur_ns)
		FAIL("step %u of pid %d: categories add up to %llu ns, the step lasts %llu ns", st->index, st->pid,
		     (unsigned long long)sum, (unsigned long long)st->dur_ns);
	dl_print_step(&s->printer, st);
	for (int i = 0; i < 2; i++)
		dl_timeline_step(s->trace[i], st);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fail_init();
	memfile_open(&input, "fuzz-recording");
	outpath_open(&rerecorded, "rerecorded.dlbpf");
	outpath_open(&trace_json, "trace.json");
	outpath_open(&trace_pb, "trace.pftrace");
	memfile_open(&summary_json, "fuzz-summary-json");
	devnull = fopen("/dev/null", "w");
	if (!devnull)
		abort();
	/* Every message is formatted (they carry recorded strings); libFuzzer's -close_fd_mask drops them. */
	dl_log_level = DL_LOG_DEBUG;
	return 0;
}

/* Options a user may give `dlbpf report`, chosen by the input so each one is fuzzed. */
static void options_of(const uint8_t *data, size_t size, struct dl_corr_opts *copts, struct dl_diag_opts *dopts)
{
	static const char *const step_on[] = { NULL, "cudaMemcpyAsync", "cudaStreamSynchronize", "train_step" };
	uint64_t h = dl_hash_bytes(data, size);

	memset(copts, 0, sizeof(*copts));
	memset(dopts, 0, sizeof(*dopts));
	copts->step_on = step_on[h % 4];
	if (h & 0x10)
		copts->pcie_gbps = dopts->pcie_gbps = 16;
	if (h & 0x20)
		dopts->disk_mbps = 500;
}

/*
 * A compact body is mutated as records too, half the time: decoded to records
 * (up to the first that does not decode), mutated, encoded again, the rest of
 * the bytes kept behind. The other half its bytes are mutated as they are, to
 * reach the decoder's own checks.
 */
static size_t mutate_compact(uint8_t *data, size_t size, size_t max_size, unsigned seed, size_t start)
{
	static uint8_t flat[1 << 20];
	static struct dl_recenc codec;
	size_t at = start, len = 0, tail, out;
	const char *why;
	long used;

	if (seed % 2 || start > size)
		return LLVMFuzzerMutate(data, size, max_size);
	dl_recenc_init(&codec);
	while (len + DL_RECENC_MAX_SIZE + 8 <= sizeof(flat) &&
	       (used = dl_recdec_next(&codec, data + at, size - at, flat + len, &why)) > 0) {
		uint16_t sz;

		memcpy(&sz, flat + len, sizeof(sz));   /* back to back: not aligned */
		at += (size_t)used;
		len += sz;
	}
	tail = size - at;
	len = mutate_records(flat, len, sizeof(flat) - DL_RECENC_MAX_SIZE, seed / 2, 0);
	/* Encoded again from the start: each record as the encoder would write it, then the undecoded tail. */
	dl_recenc_init(&codec);
	{
		static uint8_t enc[(1 << 20) + DL_RECENC_MAX_BYTES];
		size_t elen = 0;

		for (size_t r = 0; r + sizeof(struct dl_hdr) <= len && elen < (1 << 20);) {
			uint16_t sz;

			memcpy(&sz, flat + r, sizeof(sz));
			if (sz < sizeof(struct dl_hdr) || r + sz > len)
				break;
			elen += dl_recenc_put(&codec, flat + r, enc + elen);
			r += sz;
		}
		out = start + elen + tail;
		if (out > max_size)
			return LLVMFuzzerMutate(data, size, max_size);
		memmove(data + start + elen, data + at, tail);
		memcpy(data + start, enc, elen);
	}
	return out;
}

/* Records are mutated as records past the header the input has (a broken one: bytes only). */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned seed)
{
	struct dl_rec_header h = { 0 };

	if (size >= sizeof(h) && !memcmp(data, DL_REC_MAGIC, 8))
		memcpy(&h, data, sizeof(h));
	if (h.header_size >= sizeof(h) && DL_REC_ENCODING(h.abi_version) == DL_REC_COMPACT)
		return mutate_compact(data, size, max_size, seed, h.header_size);
	return mutate_records(data, size, max_size, seed, h.header_size ? h.header_size : size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum dl_timeline_format fmts[2] = { DL_TIMELINE_PFTRACE, DL_TIMELINE_JSON };
	struct steps steps = { .printer = { .f = devnull } };
	struct dl_corr_opts copts;
	struct dl_diag_opts dopts;
	struct dl_stream s = {}, again = {};
	struct digest given = {}, replayed = {};
	struct dl_recorder rec;
	struct dl_rec_header h;
	struct dl_summary sum;
	struct dl_correlator *corr;
	struct dl_step_stage stage;
	struct dl_report_model model;
	struct dl_diagnosis *diag;
	char err[512] = "", err2[512] = "";
	int ret, err_open;
	FILE *json;

	memfile_put(&input, data, size);
	options_of(data, size, &copts, &dopts);
	for (int i = 0; i < 2; i++) {
		const char *path = fmts[i] == DL_TIMELINE_JSON ? trace_json.path : trace_pb.path;

		steps.trace[i] = dl_timeline_open(path, fmts[i], &err_open);
		if (!steps.trace[i])
			FAIL("cannot open %s: %d", path, err_open);
		if (dl_rec_header_read(input.path, &h, err, sizeof(err)) == 0)
			dl_timeline_set_clocks(steps.trace[i], h.mono_ns, h.boot_ns, h.real_ns);
	}
	if (dl_recorder_open(&rec, rerecorded.path, DL_REC_COMPACT))
		FAIL("cannot write %s", rerecorded.path);

	dl_summary_init(&sum);
	corr = dl_corr_new(&copts);
	stage = (struct dl_step_stage){ .corr = corr, .fn = on_step, .ctx = &steps };
	diag = dl_xcalloc(1, sizeof(*diag));
	dl_stream_add(&s, dl_summary_sink, &sum);
	dl_stream_add(&s, dl_recorder_sink, &rec);
	for (int i = 0; i < 2; i++)
		dl_stream_add(&s, dl_timeline_sink, steps.trace[i]);
	dl_stream_add(&s, dl_corr_sink, corr);
	dl_stream_add(&s, digest_sink, &given);
	dl_stream_add(&s, dl_step_stage_sink, &stage);

	err[0] = '\0';
	ret = dl_replay(input.path, &s, NULL, err, sizeof(err));
	if (ret != 0 && !err[0])
		FAIL("replay failed without a message");
	/* A malformed record whose size can be trusted is counted and skipped: the replay goes on (ret 0). */

	/* A failed replay still leaves the sinks what came before: report it, as a stopped live run would. */
	dl_corr_finish(corr);
	dl_corr_take_steps(corr, on_step, &steps);
	dl_diagnose(corr, &sum, &dopts, diag);
	dl_report_model_build(&model, &sum, corr, diag);
	dl_report_text(devnull, &model);
	dl_report_steps_text(devnull, &model);
	json = fopen(summary_json.path, "w");
	if (!json || dl_report_json(json, &model) || fclose(json))
		FAIL("writing the JSON summary to %s failed", summary_json.path);
	for (int i = 0; i < 2; i++)
		if (dl_timeline_close(steps.trace[i], NULL))
			FAIL("writing the %s timeline failed", fmts[i] == DL_TIMELINE_JSON ? "JSON" : "protobuf");
	{
		size_t n;

		check_json(memfile_get(&summary_json, &n), n, "JSON summary");
		check_json(outpath_get(&trace_json, &n), n, "JSON timeline");
	}
	check_packets(&trace_pb);
	if (dl_recorder_close(&rec))
		FAIL("writing %s failed", rerecorded.path);
	if (rec.records != given.n)
		FAIL("the recorder wrote %llu records of the %llu given", (unsigned long long)rec.records,
		     (unsigned long long)given.n);

	/* What was recorded replays to the same records, whatever the input was. */
	dl_stream_add(&again, digest_sink, &replayed);
	if (dl_replay(rerecorded.path, &again, NULL, err2, sizeof(err2)))
		FAIL("a recording dlbpf wrote does not replay: %s (the input's replay: %s)", err2, err[0] ? err : "ok");
	if (replayed.n != given.n || replayed.hash != given.hash)
		FAIL("re-recorded: %llu records replayed of %llu written, or different bytes",
		     (unsigned long long)replayed.n, (unsigned long long)given.n);

	dl_stream_free(&again);
	dl_stream_free(&s);
	dl_report_model_free(&model);
	dl_corr_free(corr);
	free(diag);
	dl_summary_free(&sum);
	return 0;
}
