// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What a traced process controls in /proc: the paths in its maps (any bytes a
 * file name may hold, a mount over a library, a name with " (deleted)") and the
 * comm in its stat (spaces, parentheses, a ')' followed by forged fields), and
 * the cgroup path it may name (a container runtime, a pod, a Slurm job). The
 * same bytes go to the maps line parser, the maps file walk (through a FILE,
 * as /proc is read), the stat parser and the cgroup parser.
 *
 * Checked against what the formats promise, read here another way: a parsed
 * mapping ends where it starts or later, its permissions are at most four
 * characters, its path is the rest of its line; the walk hands over only file
 * mappings (an absolute path and an inode) and exactly those lines the line
 * parser accepts; a stat's comm is the bytes between the first '(' and the
 * last ')', its state the first non-blank byte after that ')'; a container,
 * pod or job found is made only of the bytes the stream's check allows
 * (dl_container_ok), and each id found lies in the input as it is.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "capture/cgroup.h"
#include "capture/procfs.h"
#include "records/stream.h"
#include "harness.h"

struct walk {
	const char *text;   /* the input as a NUL-terminated copy */
	size_t at;          /* where the next line the walk should accept is searched from */
	size_t seen;
};

/* The next line at or after w->at the walk must hand over: parsed, absolute path, an inode. */
static CHECKER int next_file_line(struct walk *w, struct dl_mapping *want)
{
	while (w->text[w->at]) {
		const char *line = w->text + w->at;
		size_t len = strcspn(line, "\n");
		char *copy = strndup(line, len + (line[len] == '\n'));
		int ok;

		if (!copy)
			abort();
		w->at += len + (line[len] == '\n');
		ok = dl_maps_parse_line(copy, want) == 0 && want->path[0] == '/' && want->inode != 0;
		free(copy);
		if (ok)
			return 1;
	}
	return 0;
}

static CHECKER int on_mapping(const struct dl_mapping *m, void *arg)
{
	struct walk *w = arg;
	struct dl_mapping want;

	if (!next_file_line(w, &want))
		FAIL("maps walk: mapping %zu (%s) is not a file mapping of the input", w->seen, m->path);
	if (memcmp(&want, m, sizeof(want)))
		FAIL("maps walk: mapping %zu differs from its line parsed alone (%s vs %s)", w->seen, m->path,
		     want.path);
	w->seen++;
	return 0;
}

/* The first line alone: a line is what the parser is given (its blank skip would run on into the next). */
static CHECKER void check_line(const char *text)
{
	struct dl_mapping m;
	size_t rest = strcspn(text, "\n");
	char *line = strndup(text, rest + (text[rest] == '\n'));

	if (!line)
		abort();
	if (dl_maps_parse_line(line, &m)) {
		free(line);
		return;
	}
	free(line);
	if (m.end < m.start)
		FAIL("maps line: end %llx before start %llx", (unsigned long long)m.end, (unsigned long long)m.start);
	if (strnlen(m.perms, sizeof(m.perms)) == sizeof(m.perms))
		FAIL("maps line: permissions not terminated");
	if (strnlen(m.path, sizeof(m.path)) == sizeof(m.path) || strchr(m.path, '\n'))
		FAIL("maps line: path not terminated or holding a newline");
	/* The path is the line's tail: what follows it is the newline or the end. */
	if (strlen(m.path) > rest || memcmp(text + rest - strlen(m.path), m.path, strlen(m.path)))
		FAIL("maps line: path '%s' is not the end of its line", m.path);
}

static CHECKER void check_stat(const char *text)
{
	struct dl_proc_stat st;
	const char *open = strchr(text, '('), *close = strrchr(text, ')');
	size_t len;
	const char *state;

	if (dl_stat_parse(text, &st))
		return;
	if (!open || !close || close < open)
		FAIL("stat: parsed without a '(' before a ')'");
	len = (size_t)(close - open - 1);
	if (len >= sizeof(st.comm))
		len = sizeof(st.comm) - 1;
	if (strlen(st.comm) > len || memcmp(st.comm, open + 1, strlen(st.comm)))
		FAIL("stat: comm '%s' is not what lies between the first '(' and the last ')'", st.comm);
	/* A NUL inside the name ends it early; anything else is kept whole. */
	if (strlen(st.comm) < len && open[1 + strlen(st.comm)] != '\0')
		FAIL("stat: comm '%s' cut short", st.comm);
	state = close + 1;
	while (*state == ' ' || (*state >= '\t' && *state <= '\r'))
		state++;
	if (st.state != *state)
		FAIL("stat: state '%c', the byte after the name is '%c'", st.state, *state);
	if (st.threads < 0)
		FAIL("stat: %d threads", st.threads);
}

/* The raw bytes, no NUL added: the parser reads a file's length, not a string. */
static CHECKER void check_cgroup(const uint8_t *data, size_t size)
{
	struct dl_container c;
	bool any = dl_cgroup_parse((const char *)data, size, &c);

	if (!dl_container_ok(&c))
		FAIL("cgroup: a field holds bytes the stream rejects");
	if (any != (c.id[0] || c.pod_uid[0] || c.slurm_job[0]))
		FAIL("cgroup: found %d with fields '%s' '%s' '%s'", any, c.id, c.pod_uid, c.slurm_job);
	if (c.runtime[0] && !c.id[0])
		FAIL("cgroup: runtime %s without a container", c.runtime);
	if (c.id[0] && !memmem(data, size, c.id, strlen(c.id)))
		FAIL("cgroup: id %s is not in the input", c.id);
	if (c.slurm_job[0] && !memmem(data, size, c.slurm_job, strlen(c.slurm_job)))
		FAIL("cgroup: job %s is not in the input", c.slurm_job);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	struct walk w = { 0 };
	struct dl_mapping extra;
	FILE *f;

	if (!text)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	check_line(text);
	check_stat(text);
	check_cgroup(data, size);

	/* The walk reads lines with getline, NULs included; the reference stops at the first NUL. */
	w.text = text;
	if (text[0]) {   /* fmemopen refuses an empty buffer */
		f = fmemopen(text, strlen(text), "r");
		if (!f)
			abort();
		dl_maps_foreach_file(f, on_mapping, &w);
		fclose(f);
	}
	if (next_file_line(&w, &extra))
		FAIL("maps walk: skipped the file mapping %s after %zu", extra.path, w.seen);
	free(text);
	return 0;
}
