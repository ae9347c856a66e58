// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "capture/hooks.h"
#include "log.h"

#define FORCE_TWINS "DLBPF_FORCE_TWINS"
#define MAP_ENTRIES "DLBPF_TEST_MAP_ENTRIES"
#define LINK_PAUSE "DLBPF_TEST_LINK_PAUSE_MS"
#define ENTRY_FIRST "DLBPF_TEST_ENTRY_LINK_FIRST"
#define NO_CLOSER "DLBPF_TEST_NO_CLOSER"
#define URET_HAZARD "DLBPF_TEST_URETPROBE_HAZARD"
#define NO_OPENAT2 "DLBPF_TEST_NO_OPENAT2"
#define NO_MAP_FILES "DLBPF_TEST_NO_MAP_FILES"
#define PROCESS_PROBES "DLBPF_TEST_PROCESS_PROBES"
#define NO_PY_LINES "DLBPF_TEST_NO_PY_LINES"

/*
 * A hook of one value: *on when name is set to it, announced with what it
 * does; -EINVAL when set to anything else.
 */
static int one_value_hook(const char *name, const char *value, const char *what, bool *on)
{
	const char *v = getenv(name);

	*on = false;
	if (!v)
		return 0;
	if (strcmp(v, value)) {
		dl_err("%s=%s: the only value is '%s'", name, v, value);
		return -EINVAL;
	}
	*on = true;
	dl_warn("test hook %s=%s: %s", name, value, what);
	return 0;
}

/* The BPF features DLBPF_FORCE_TWINS can take away, by their names in dl_features_list. */
static bool *feature_by_name(struct dl_features *f, const char *name, size_t len)
{
	static const struct { const char *name; size_t off; } known[] = {
		{ "uprobe_multi", offsetof(struct dl_features, uprobe_multi) },
		{ "attach_cookie", offsetof(struct dl_features, attach_cookie) },
		{ "task_storage", offsetof(struct dl_features, task_storage) },
		{ "task_btf", offsetof(struct dl_features, task_btf) },
		{ "global_ptr_args", offsetof(struct dl_features, global_ptr_args) },
		{ "fentry", offsetof(struct dl_features, fentry) },
		{ "kprobes", offsetof(struct dl_features, kprobes) },
		{ "signal_task", offsetof(struct dl_features, signal_task) },
	};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strlen(known[i].name) == len && !memcmp(known[i].name, name, len))
			return (bool *)((char *)f + known[i].off);
	return NULL;
}

int dl_hooks_features(struct dl_features *f)
{
	const char *v = getenv(FORCE_TWINS), *p;

	if (!v)
		return 0;
	for (p = v; *p;) {
		size_t len = strcspn(p, ",");
		bool *feat;

		if (len == 3 && !memcmp(p, "old", 3)) {
			f->block_io_start = false;
			f->switch_prev_state = false;
			f->exit_group_dead = false;
		} else if (len > 8 && !memcmp(p, "without-", 8) && (feat = feature_by_name(f, p + 8, len - 8))) {
			*feat = false;
		} else {
			dl_err("%s=%s: '%.*s' is neither 'old' nor 'without-FEATURE' (uprobe_multi, attach_cookie, "
			       "task_storage, task_btf, global_ptr_args, fentry, kprobes, signal_task)", FORCE_TWINS, v, (int)len, p);
			return -EINVAL;
		}
		p += len;
		p += *p == ',';
	}
	dl_warn("test hook %s=%s: the programs for kernels without these features", FORCE_TWINS, v);
	return 0;
}

/* One "name=N" of the list; the name is the BPF map's as the object defines it. */
static int resize_one(struct bpf_object *obj, const char *item, size_t len)
{
	char name[64], *end;
	const char *eq = memchr(item, '=', len);
	struct bpf_map *map;
	unsigned long n;

	if (!eq || eq == item || (size_t)(eq - item) >= sizeof(name))
		goto bad;
	memcpy(name, item, (size_t)(eq - item));
	name[eq - item] = '\0';
	errno = 0;
	n = strtoul(eq + 1, &end, 10);
	if (errno || end == eq + 1 || end != item + len || n == 0 || n > 1ul << 24)
		goto bad;
	map = bpf_object__find_map_by_name(obj, name);
	if (!map) {
		dl_err("%s: the BPF object has no map named '%s'", MAP_ENTRIES, name);
		return -EINVAL;
	}
	if (bpf_map__set_max_entries(map, (unsigned)n)) {
		dl_err("%s: cannot resize map '%s' to %lu entries", MAP_ENTRIES, name, n);
		return -EINVAL;
	}
	dl_warn("test hook %s: map %s holds %lu entries", MAP_ENTRIES, name, n);
	return 0;
bad:
	dl_err("%s: '%.*s' is not NAME=ENTRIES (1 to %lu)", MAP_ENTRIES, (int)len, item, 1ul << 24);
	return -EINVAL;
}

int dl_hooks_map_entries(struct bpf_object *obj)
{
	const char *v = getenv(MAP_ENTRIES);

	while (v && *v) {
		size_t len = strcspn(v, ",");
		int err = resize_one(obj, v, len);

		if (err)
			return err;
		v += len + (v[len] == ',');
	}
	return 0;
}

int dl_hooks_link_pause(unsigned *ms)
{
	const char *v = getenv(LINK_PAUSE);
	unsigned long n;
	char *end;

	*ms = 0;
	if (!v)
		return 0;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || end == v || *end || n == 0 || n > 1000) {
		dl_err("%s=%s: not a number of milliseconds from 1 to 1000", LINK_PAUSE, v);
		return -EINVAL;
	}
	*ms = (unsigned)n;
	dl_warn("test hook %s: %lu ms of pause after each CUDA link attached", LINK_PAUSE, n);
	return 0;
}

int dl_hooks_entry_link_first(bool *on)
{
	return one_value_hook(ENTRY_FIRST, "1", "entry links attached before their return links", on);
}

int dl_hooks_uretprobe_hazard(bool *on)
{
	return one_value_hook(URET_HAZARD, "1",
			      "return probes taken to kill processes under a seccomp filter, as on a kernel "
			      "without the uretprobe pass-through", on);
}

int dl_hooks_no_closer(bool *on)
{
	return one_value_hook(NO_CLOSER, "1", "the syscall events closed by dlbpf itself, as when it cannot fork", on);
}

int dl_hooks_no_openat2(bool *on)
{
	return one_value_hook(NO_OPENAT2, "1", "paths in traced processes' roots resolved by the walk, as without openat2",
			      on);
}

int dl_hooks_no_map_files(bool *on)
{
	return one_value_hook(NO_MAP_FILES, "1", "mapped files opened by their paths, as without CAP_SYS_ADMIN", on);
}

int dl_hooks_process_probes(bool *on)
{
	return one_value_hook(PROCESS_PROBES, "1",
			      "CUDA probes attached per process, as where return probes could harm a process under "
			      "seccomp: a child is held at its fork until attached to", on);
}

int dl_hooks_no_py_lines(bool *on)
{
	return one_value_hook(NO_PY_LINES, "1",
			      "no Python lines of waits or CPU samples (their programs not loaded): what they cost, "
			      "measured", on);
}
