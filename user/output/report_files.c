// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <inttypes.h>
#include <stdlib.h>
#include "output/report.h"
#include "output/report_files.h"
#include "util.h"

/* A report shows where the bytes went, not an inventory: the JSON has the rest. */
#define TEXT_FILES 3

void dl_report_files_text(FILE *f, const struct dl_proc_files *pf, struct dl_sbuf *esc)
{
	size_t n;
	const struct dl_file_stat **top = dl_files_top(pf, TEXT_FILES, &n);
	char rb[32], db[32];

	for (size_t i = 0; i < n; i++) {
		const struct dl_file_stat *fs = top[i];

		const char *lead = i ? "        " : "files   ";

		dl_fmt_bytes(rb, sizeof(rb), fs->read_bytes);
		dl_fmt_bytes(db, sizeof(db), fs->disk_bytes);
		if (fs->reads)
			fprintf(f, "  %s %s: read %s in %" PRIu64 " calls (%.3f ms), %s from disk", lead, dl_text(esc, fs->path),
				rb, fs->reads, (double)fs->read_ns / 1e6, db);
		else
			fprintf(f, "  %s %s: mapped", lead, dl_text(esc, fs->path));
		if (fs->fault_bytes) {
			dl_fmt_bytes(db, sizeof(db), fs->fault_bytes);
			fprintf(f, "%s%s from disk by page faults", fs->reads ? ", and " : ", ", db);
		}
		fputc('\n', f);
	}
	if (pf->files.n > n && n)
		fprintf(f, "           (%zu more files read or opened: see the JSON summary)\n", pf->files.n - n);
	free(top);
}

static void tally_json(struct dl_json *j, const char *key, const struct dl_read_tally *t, bool files)
{
	dl_json_key(j, key);
	dl_json_obj_begin(j);
	if (files)
		dl_json_ku64(j, "files", t->files);
	dl_json_ku64(j, "reads", t->reads);
	dl_json_ku64(j, "read_bytes", t->read_bytes);
	dl_json_ku64(j, "read_ns", t->read_ns);
	dl_json_ku64(j, "disk_bytes", t->disk_bytes);
	dl_json_obj_end(j);
}

void dl_report_files_json(struct dl_json *j, const struct dl_proc_files *pf)
{
	size_t n;
	const struct dl_file_stat **top = dl_files_top(pf, DL_FILES_LISTED, &n);
	struct dl_read_tally more = pf->more;

	dl_json_key(j, "files");
	dl_json_arr_begin(j);
	for (size_t i = 0; i < n; i++) {
		const struct dl_file_stat *fs = top[i];

		dl_json_obj_begin(j);
		dl_json_kstr(j, "path", fs->path);
		dl_json_ku64(j, "read_bytes", fs->read_bytes);
		dl_json_ku64(j, "reads", fs->reads);
		dl_json_ku64(j, "read_ns", fs->read_ns);
		dl_json_ku64(j, "disk_bytes", fs->disk_bytes);
		dl_json_ku64(j, "small_reads", fs->small_reads);
		dl_json_ku64(j, "fault_bytes", fs->fault_bytes);
		dl_json_key(j, "truncated");
		dl_json_bool(j, fs->truncated);
		dl_json_obj_end(j);
	}
	dl_json_arr_end(j);
	/* "files_more" is every read not listed: files past the listed ones, and past the tracked ones. */
	for (size_t i = 0; i < pf->files.n; i++) {
		const struct dl_file_stat *fs = &pf->files.v[i];

		if (!fs->reads)
			continue;
		more.files++;
		more.reads += fs->reads;
		more.read_bytes += fs->read_bytes;
		more.read_ns += fs->read_ns;
		more.disk_bytes += fs->disk_bytes;
	}
	for (size_t i = 0; i < n; i++) {
		if (!top[i]->reads)
			continue;   /* read by page faults only: not in the tally */
		more.files--;
		more.reads -= top[i]->reads;
		more.read_bytes -= top[i]->read_bytes;
		more.read_ns -= top[i]->read_ns;
		more.disk_bytes -= top[i]->disk_bytes;
	}
	tally_json(j, "files_more", &more, true);
	tally_json(j, "files_unknown_fd", &pf->unknown, false);
	dl_json_ku64(j, "read_errors", pf->read_errors);
	free(top);
}
