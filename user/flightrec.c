// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "analysis/trigger.h"
#include "flightrec.h"
#include "log.h"
#include "outfile.h"
#include "records/flight.h"
#include "util.h"

struct dl_flightrec {
	struct dl_flight flight;
	struct dl_trigger trigger;
	const char *dir;
	int encoding;
	char pending[192];        /* the first reason since the last dump; empty: none */
	uint64_t triggers;        /* reasons merged into the pending dump */
	uint64_t last_dump_ns, spacing_ns;
	uint64_t last_drops;
	unsigned dumps, failed;
};

struct dl_flightrec *dl_flightrec_open(const struct dl_flightrec_opts *o, struct dl_stream *s)
{
	struct dl_flightrec *f;
	uint64_t window_ns = (uint64_t)(o->window_s * 1e9);
	struct stat st;

	if (mkdir(o->dir, 0700) == 0) {
		int fd = open(o->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		/* Under sudo, the user's, as its dumps are. */
		if (fd >= 0) {
			dl_give_to_sudo_user(fd);
			close(fd);
		}
	} else if (errno != EEXIST) {
		dl_err("cannot create the flight recorder's directory %s: %s", o->dir, strerror(errno));
		return NULL;
	}
	if (stat(o->dir, &st) || !S_ISDIR(st.st_mode)) {
		dl_err("record --ring writes its dumps into a directory: %s is not one", o->dir);
		return NULL;
	}
	/* Dumps a killed run was writing: their names are its own, so no later dump would replace them. */
	dl_outfile_remove_leftovers(o->dir, "flight-", ".dlbpf");
	f = dl_xcalloc(1, sizeof(*f));
	f->dir = o->dir;
	f->encoding = o->encoding;
	f->spacing_ns = window_ns / 2;
	dl_flight_init(&f->flight, window_ns, o->budget_mb << 20);
	dl_trigger_init(&f->trigger, o->step_factor, true, window_ns);
	dl_stream_add(s, dl_flight_sink, &f->flight);
	return f;
}

void dl_flightrec_request(struct dl_flightrec *f, const char *why)
{
	if (!f->pending[0])
		snprintf(f->pending, sizeof(f->pending), "%s", why);
	f->triggers++;
}

void dl_flightrec_step(struct dl_flightrec *f, const struct dl_step *st)
{
	char why[160];

	if (dl_trigger_step(&f->trigger, st, why, sizeof(why)))
		dl_flightrec_request(f, why);
}

/* The reason's first word names the file: flight-20261203-081502-3-slow-step.dlbpf */
static void dump(struct dl_flightrec *f, uint64_t now_ns, const uint64_t drops[DL_DROP_MAX])
{
	char path[4096], stamp[32], word[24];
	time_t t = time(NULL);
	struct tm tm;
	uint64_t oldest, newest;
	long n;

	localtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	snprintf(word, sizeof(word), "%.*s", (int)strcspn(f->pending, " :"), f->pending);
	snprintf(path, sizeof(path), "%s/flight-%s-%u-%s.dlbpf", f->dir, stamp, f->dumps + f->failed + 1, word);
	dl_flight_span(&f->flight, &oldest, &newest);
	n = dl_flight_dump(&f->flight, path, f->encoding, now_ns, drops);
	if (n < 0) {
		f->failed++;
	} else {
		f->dumps++;
		/* Said without -v: a dump is what the user ran the flight recorder for. */
		fprintf(stderr, "dlbpf: flight recorder: %s: wrote %ld records (%.1f s) to %s\n", f->pending, n,
			newest > oldest ? (double)(newest - oldest) / 1e9 : 0.0, path);
		if (f->triggers > 1)
			dl_info("flight recorder: %" PRIu64 " more triggers came while it waited", f->triggers - 1);
	}
	f->pending[0] = '\0';
	f->triggers = 0;
	f->last_dump_ns = now_ns;
}

void dl_flightrec_tick(struct dl_flightrec *f, uint64_t now_ns, const uint64_t drops[DL_DROP_MAX])
{
	uint64_t total = 0;

	for (int i = 0; i < DL_DROP_MAX; i++)
		total += drops[i];
	if (total > f->last_drops) {
		char why[96];

		snprintf(why, sizeof(why), "drops: %" PRIu64 " events lost", total - f->last_drops);
		dl_flightrec_request(f, why);
		f->last_drops = total;
	}
	dl_flight_drops(&f->flight, now_ns, drops);
	if (f->pending[0] && (!f->last_dump_ns || now_ns - f->last_dump_ns >= f->spacing_ns))
		dump(f, now_ns, drops);
}

unsigned dl_flightrec_close(struct dl_flightrec *f, uint64_t now_ns, const uint64_t drops[DL_DROP_MAX])
{
	unsigned failed;

	if (!f)
		return 0;
	if (f->pending[0])
		dump(f, now_ns, drops);
	if (f->flight.evicted_early)
		dl_warn("flight recorder: %" PRIu64 " records left the window before their time (over the --ring-mb "
			"budget): dumps hold less than the window", f->flight.evicted_early);
	if (f->flight.kept_refused)
		dl_warn("flight recorder: %" PRIu64 " naming records over budget: dumps may show unnamed processes or "
			"kernels", f->flight.kept_refused);
	if (!f->dumps && !f->failed)
		printf("\ndlbpf: flight recorder: nothing triggered a dump (kill -USR1 %d writes one on demand)\n",
		       (int)getpid());
	else
		printf("\ndlbpf: flight recorder: %u dump%s in %s%s; `dlbpf report FILE` reads each\n", f->dumps,
		       f->dumps == 1 ? "" : "s", f->dir, f->failed ? " (some failed: see above)" : "");
	if (f->failed)
		dl_err("flight recorder: %u of %u dumps failed (each said above with its path and cause)", f->failed,
		       f->dumps + f->failed);
	failed = f->failed;
	dl_trigger_free(&f->trigger);
	dl_flight_free(&f->flight);
	free(f);
	return failed;
}
