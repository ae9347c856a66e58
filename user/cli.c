// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <argp.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "cli.h"
#include "dlbpf/events.h"
#include "outfile.h"
#include "output/http.h"
#include "output/metrics.h"
#include "output/otlp_send.h"
#include "output/timeline.h"
#include "records/record.h"
#include "strsafe.h"
#include "capture/budget_plan.h"
#include "capture/duty.h"
#include "version.h"

#define STR_(x) #x
#define STR(x) STR_(x)

/* The libbpf dlbpf runs with, which a shared libbpf decides, not the headers it was built against. */
static void print_version(FILE *f, struct argp_state *state)
{
	(void)state;
	fprintf(f, "dlbpf %s (event ABI %d, libbpf %u.%u)\n", DLBPF_VERSION, DL_ABI_VERSION,
		libbpf_major_version(), libbpf_minor_version());
}

void (*argp_program_version_hook)(FILE *, struct argp_state *) = print_version;
const char *argp_program_bug_address = NULL;

static const char doc[] =
"Trace what a deep-learning job waits for: CUDA copies, launches and syncs,\n"
"NCCL collectives, disk reads and scheduling of a process tree, attached\n"
"live with eBPF; say what each training step waits for and what to do\n"
"about it.\n"
"\n"
"  dlbpf [OPTIONS] --pid PID...      trace processes and their children\n"
"  dlbpf [OPTIONS] -- COMMAND ARGS   run a command, traced from its start\n"
"  dlbpf record -o FILE [OPTIONS] (--pid PID... | -- COMMAND)\n"
"                                    also write the raw events to FILE\n"
"  dlbpf report FILE [OPTIONS]       diagnose a recording, as if live\n"
"  dlbpf report R0 R1... [OPTIONS]   a distributed job's ranks' recordings as\n"
"                                    one report and timeline, straggler named\n"
"  dlbpf features                    what this kernel offers dlbpf, and what\n"
"                                    each missing feature costs\n"
"\n"
"EXAMPLES:\n"
"  sudo dlbpf --pid 4242            # trace a job and its workers until Ctrl-C\n"
"  sudo dlbpf -p 4242 -d 30 -j s.json  # 30 s, then write the JSON summary\n"
"  sudo dlbpf -- python train.py    # start a job traced from its first\n"
"                                   # instruction, until it exits\n"
"  sudo dlbpf --step-on train_step -- ./train   # steps marked by a function\n"
"  sudo dlbpf record -o run.dlbpf -p 4242 -d 60  # record now, diagnose later:\n"
"  dlbpf report run.dlbpf -j s.json             # (no root needed)\n"
"  sudo dlbpf record --encoding verbatim -o raw.dlbpf -- ./train  # records as\n"
"                                   # the kernel wrote them (byte offsets)\n"
"  sudo dlbpf --comm python3        # every python3 process, now and later\n"
"  sudo dlbpf --system-wide -d 60   # every process using CUDA, for a minute\n"
"  sudo dlbpf -p 4242 -o t.pftrace  # also write a timeline for the Perfetto UI\n"
"  sudo dlbpf record --ring 60 --trigger-step 2x -o /var/tmp/fr -p 4242\n"
"                                   # flight recorder: the last minute, written\n"
"                                   # out when a step is twice the median\n"
"  dlbpf report run.dlbpf -o t.json # a recording's timeline, Chrome JSON\n"
"  dlbpf report run.dlbpf --html r.html  # the report as a page for a browser\n"
"  dlbpf report r0.dlbpf r1.dlbpf -j s.json -o t.json  # the ranks of a job,\n"
"                                   # aligned on their CLOCK_REALTIME snapshots\n"
"  sudo dlbpf -v --pid 4242         # also say what is attached where\n"
"  sudo dlbpf --stacks -- ./train   # syncs and copies with their callers\n"
"  sudo dlbpf -p 4242 --metrics 9464   # Prometheus: 127.0.0.1:9464/metrics\n"
"  sudo dlbpf -p 4242 --metrics 0.0.0.0:9464    # scraped from other hosts\n"
"  sudo dlbpf -p 4242 --otlp http://127.0.0.1:4318   # spans and metrics to an OpenTelemetry collector\n"
"  sudo dlbpf --overhead-budget 1% -p 4242   # production: launches probed in\n"
"                                   # windows, all probes within 1% of the job's CPU"
"\v"
"OUTPUT FILES:\n"
"  -j, --html, -o and record -o are written to a hidden temporary beside\n"
"  FILE, mode 0600 (a trace names every process, file and kernel of the job),\n"
"  renamed over FILE once complete and on disk: a failed run leaves an\n"
"  existing FILE as it was. A symlink at FILE owned by another user is\n"
"  replaced, never followed; a pipe or a device (/dev/stdout, /dev/null) is\n"
"  written in place. A recording is at its path once tracing begins and\n"
"  flushed every 250 ms: a killed record leaves all but its last moment, and\n"
"  report reads a recording cut short or damaged past its header up to its\n"
"  last complete record, saying where it stopped (a zero-filled tail is cut).\n"
"  The next run to FILE removes the temporaries a killed run left. Under\n"
"  sudo, the files are the invoking user's (SUDO_UID, SUDO_GID). An output\n"
"  naming the recording being reported, or two outputs naming one file, is a\n"
"  usage error.\n"
"\n"
"EXIT STATUS:\n"
"  with -- COMMAND, the command's (128+N when a signal N killed it; 127 when\n"
"  it was not found, 126 when it could not be run) once it has ended; 2 a\n"
"  usage error; 1 when dlbpf failed; 128+N a report that signal N stopped (it\n"
"  reports what it read); 0 otherwise (a command still running when dlbpf\n"
"  stops, on --duration or a signal, goes on untraced).";

enum { OPT_RINGBUF = 0x100, OPT_DRAIN_MS, OPT_STEP_ON, OPT_PCIE, OPT_DISK, OPT_COMM, OPT_SYSTEM, OPT_FORMAT,
       OPT_SUMMARY, OPT_DUTY, OPT_READY_FD, OPT_KEEP_STEPS, OPT_HTML, OPT_RING, OPT_RING_MB,
       OPT_TRIGGER_STEP, OPT_METRICS, OPT_METRICS_KERNELS, OPT_OTLP, OPT_OTLP_HEADER, OPT_ENCODING, OPT_NO_FILES, OPT_NO_NET,
       OPT_STACKS, OPT_OVERHEAD_BUDGET, OPT_RUN_AS, OPT_PY_WATCHPOINT };

static const struct argp_option opts[] = {
	{ "pid", 'p', "PID", 0, "Trace this process and its descendants (repeatable)", 0 },
	{ "comm", OPT_COMM, "NAME", 0, "Trace every process named NAME (its comm), running now or started later (repeatable)", 0 },
	{ "system-wide", OPT_SYSTEM, NULL, 0, "Trace every process that maps a CUDA runtime, now and later", 0 },
	{ "duration", 'd', "SEC", 0, "Stop after SEC seconds (default: when the traced processes exit, or Ctrl-C)", 0 },
	{ "json", 'j', "FILE", 0, "Write the JSON summary (schema 1) to FILE", 0 },
	{ "html", OPT_HTML, "FILE", 0, "Write the report as one self-contained HTML page to FILE (charts inline, "
	  "no script, nothing fetched)", 0 },
	{ "output", 'o', "FILE", 0, "record: the recording to write; otherwise a timeline trace (Perfetto "
	  "protobuf, Chrome JSON if FILE ends in .json)", 0 },
	{ "encoding", OPT_ENCODING, "ENC", 0, "record: compact (default: each record coded against the previous one "
	  "of its thread, about a tenth of the size) or verbatim (records as they came)", 0 },
	{ "format", OPT_FORMAT, "FMT", 0, "Timeline format: pftrace or json (without -o, or with record: to "
	  "trace.pftrace or trace.json)", 0 },
	{ "step-on", OPT_STEP_ON, "SYMBOL", 0, "A step starts at each call of SYMBOL: a CUDA API (cudaMemcpy), "
	  "any function of the target, or a Python function (train_step, train.py:train_step, Trainer.step; "
	  "with --python-watchpoint) (default: found automatically)", 0 },
	{ "python-watchpoint", OPT_PY_WATCHPOINT, NULL, 0, "Let --step-on mark a Python function by a hardware "
	  "watchpoint on its code object (two debug exceptions a call). On some virtual machines a watched write "
	  "can end the process with SIGTRAP, about once in millions: see the manual", 0 },
	{ "pcie-gbps", OPT_PCIE, "GB/S", 0, "Peak host-device bandwidth for the paper sketch (default: the "
	  "GPU's PCIe link in sysfs, else 24)", 0 },
	{ "disk-mbps", OPT_DISK, "MB/S", 0, "Peak disk read bandwidth for the paper sketch (default: measured)", 0 },
	{ "keep-steps", OPT_KEEP_STEPS, "N", 0, "Keep the latest N steps of each process in full (listed in the JSON); "
	  "older ones are folded into totals, so memory stays flat on long runs (default 10000, 0: keep all)", 0 },
	{ "quiet", 'q', NULL, 0, "No live status line", 0 },
	{ "verbose", 'v', NULL, 0, "Say more: what is attached where, and every process in the report (without it, processes that made no "
	  "CUDA call, did no disk I/O and ran under 1% of a CPU are one line); repeat for debug output, libbpf's included", 0 },
	{ "ringbuf-mb", OPT_RINGBUF, "MB", 0, "Ring buffer size in MiB, a power of two up to 2048 (default 16)", 0 },
	{ "drain-ms", OPT_DRAIN_MS, "MS", 0, "Drain the ring buffer every MS ms (default 10); while drains find it nearly empty, up to every 80 ms", 0 },
	{ "stacks", OPT_STACKS, NULL, 0, "Call sites of syncs and synchronous copies as short user stacks (up to 16 "
	  "frames); needs frame pointers in the program and its libraries (-fno-omit-frame-pointer). In CPython "
	  "3.10-3.13, launches also get their Python lines (syncs and copies always do)", 0 },
	{ "summary", OPT_SUMMARY, NULL, 0, "Low overhead: count CUDA calls, bytes and durations in the kernel (no per-call "
	  "records; kernels without grid/block, copies without pageable/pinned)", 0 },
	{ "duty", OPT_DUTY, "M/N", 0, "Low overhead: probe launches and copies only M of every N seconds; the report "
	  "scales their counts", 0 },
	{ "overhead-budget", OPT_OVERHEAD_BUDGET, "P", 0, "Low overhead: keep every probe's measured cost within P "
	  "percent of the traced job's CPU (1%, 0.5%, 5): kernel launches are probed in windows, as often as the "
	  "budget allows after syncs, copies, the scheduler and I/O, which stay on; the report scales launch counts "
	  "and says the cost achieved", 0 },
	{ "no-files", OPT_NO_FILES, NULL, 0, "Do not attribute reads to files: no program on read, openat and close. "
	  "Where the kernel allows neither fentry nor kprobes on them (dlbpf features), these are syscall "
	  "tracepoints, which every process's syscalls pass while they are on", 0 },
	{ "no-net", OPT_NO_NET, NULL, 0, "Do not account socket receives: no program where a receive or a send "
	  "ends (sock:sock_recv_length and sock_send_length, or fexit on sock_recvmsg and the protocols' sends)", 0 },
	{ "ring", OPT_RING, "SEC", 0, "record: a flight recorder: keep the last SEC seconds in memory and write them "
	  "to a new recording in the -o directory when a step is slow (--trigger-step), the verdict changes, events "
	  "are dropped, or on SIGUSR1", 0 },
	{ "ring-mb", OPT_RING_MB, "MB", 0, "Memory for --ring, in MiB (default 256): a busier job keeps fewer "
	  "seconds, and the report says so", 0 },
	{ "trigger-step", OPT_TRIGGER_STEP, "K", 0, "With --ring: dump when a step takes more than K times its "
	  "process's median step (K > 1, as 2 or 2x)", 0 },
	{ "ready-fd", OPT_READY_FD, "FD", 0, "Write 'ready\\n' to FD once every probe is attached and tracing has "
	  "begun, then close it", 0 },
	{ "metrics", OPT_METRICS, "[ADDR:]PORT", 0, "Serve Prometheus metrics at http://ADDR:PORT/metrics while "
	  "tracing (ADDR default 127.0.0.1: give 0.0.0.0 or [::] to be scraped from elsewhere)", 0 },
	{ "metrics-kernels", OPT_METRICS_KERNELS, NULL, 0, "--metrics also counts launches by kernel name: the first "
	  STR(DL_METRICS_KERNELS) " names of each process, the rest as one", 0 },
	{ "run-as", OPT_RUN_AS, "USER", 0, "Run the command as USER (a name or a uid): its uid, group and groups, "
	  "with HOME, USER and LOGNAME its own (under sudo: --run-as \"$SUDO_USER\")", 0 },
	{ "otlp", OPT_OTLP, "URL", 0, "Export steps as OpenTelemetry spans and the metrics over OTLP/HTTP (protobuf) "
	  "to URL/v1/traces and URL/v1/metrics, e.g. http://127.0.0.1:4318 (a collector's default); http only: "
	  "for https, send to a collector on the node", 0 },
	{ "otlp-header", OPT_OTLP_HEADER, "K=V", 0, "Send header K: V with each OTLP request (an auth token; up to 8)",
	  0 },
	{ NULL, 'h', NULL, OPTION_HIDDEN, "Show this help", 0 },
	{},
};

static double parse_positive(struct argp_state *state, const char *what, const char *arg)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v > 0) || v > 1e9)
		argp_error(state, "invalid %s '%s' (expected a number > 0)", what, arg);
	return v;
}

static long parse_long(struct argp_state *state, const char *what, const char *arg, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < min || v > max)
		argp_error(state, "invalid %s '%s' (expected an integer from %ld to %ld)", what, arg, min, max);
	return v;
}

/*
 * Two names of one file would lose data: an output renamed over the recording
 * being reported, or two outputs over each other (the last one wins, the
 * other is gone). A usage error, said before anything is written.
 */
static void check_files(struct argp_state *state, const struct dl_config *cfg)
{
	struct { const char *opt, *path; struct dl_fileref id; bool known; } out[] = {
		{ .opt = "-j", .path = cfg->json_path },
		{ .opt = "--html", .path = cfg->html_path },
		{ .opt = "-o", .path = cfg->mode == DL_MODE_RECORD ? cfg->record_path : NULL },
		{ .opt = cfg->mode == DL_MODE_RECORD ? "--format's timeline" : "-o", .path = cfg->timeline_path },
	};
	size_t n = sizeof(out) / sizeof(out[0]);

	/* One that cannot be resolved (no such directory, no access) fails when it is opened, with its reason. */
	for (size_t i = 0; i < n; i++)
		out[i].known = out[i].path && dl_output_id(out[i].path, &out[i].id) == 0;
	for (size_t i = 0; i < n; i++) {
		if (!out[i].known)
			continue;
		for (int r = 0; r < cfg->ninputs; r++) {
			struct dl_fileref in;

			if (dl_input_id(cfg->inputs[r], &in) == 0 && dl_fileref_clash(&out[i].id, &in))
				argp_failure(state, 2, 0, "%s %s is the recording being reported (%s): it would be "
					     "overwritten; write to another file", out[i].opt, out[i].path, cfg->inputs[r]);
		}
		for (size_t k = i + 1; k < n; k++)
			if (out[k].known && dl_fileref_clash(&out[i].id, &out[k].id))
				argp_failure(state, 2, 0, "%s %s and %s %s are the same file: one output would "
					     "overwrite the other", out[i].opt, out[i].path, out[k].opt, out[k].path);
	}
}

/* A usage error about an argument, shown as a terminal only displays it (no CR, LF or escape reaches it). */
static void usage_error_about(struct argp_state *state, const char *opt, const char *arg, const char *why)
{
	struct dl_sbuf b = { 0 };

	argp_error(state, "%s %s: %s", opt, dl_text(&b, arg), why);
	dl_sbuf_free(&b);
}

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	struct dl_config *cfg = state->input;
	char *end;

	switch (key) {
	case 'p':
		if (cfg->npids == DL_MAX_PIDS)
			argp_error(state, "at most %d --pid options", DL_MAX_PIDS);
		cfg->pids[cfg->npids++] = (pid_t)parse_long(state, "pid", arg, 1, INT_MAX);
		break;
	case OPT_COMM:
		if (cfg->ncomms == DL_MAX_COMMS)
			argp_error(state, "at most %d --comm options", DL_MAX_COMMS);
		if (!*arg || strlen(arg) > 15)
			argp_error(state, "invalid --comm '%s' (a process name of 1 to 15 characters)", arg);
		snprintf(cfg->comms[cfg->ncomms++], sizeof(cfg->comms[0]), "%s", arg);
		break;
	case OPT_SYSTEM:
		cfg->system_wide = true;
		break;
	case 'd':
		errno = 0;
		cfg->duration_s = strtod(arg, &end);
		if (errno || end == arg || *end || !(cfg->duration_s > 0) || cfg->duration_s > 1e7)
			argp_error(state, "invalid duration '%s' (expected seconds > 0)", arg);
		break;
	case 'j':
		if (!*arg)
			argp_error(state, "-j needs a file name");
		cfg->json_path = arg;
		break;
	case OPT_HTML:
		if (!*arg)
			argp_error(state, "--html needs a file name");
		cfg->html_path = arg;
		break;
	case 'o':
		if (!*arg)
			argp_error(state, "-o needs a file name");
		cfg->record_path = arg;   /* the trace's, unless recording: sorted out at the end */
		break;
	case OPT_FORMAT:
		cfg->timeline_format = dl_timeline_format_parse(arg);
		if (cfg->timeline_format < 0)
			argp_error(state, "unknown trace format '%s' (expected pftrace or json)", arg);
		break;
	case OPT_ENCODING:
		cfg->record_encoding = dl_rec_encoding_of(arg);
		cfg->encoding_given = true;
		if (cfg->record_encoding < 0)
			argp_error(state, "unknown recording encoding '%s' (expected compact or verbatim)", arg);
		break;
	case OPT_STEP_ON:
		if (!*arg)
			argp_error(state, "--step-on needs a symbol name");
		cfg->step_on = arg;
		break;
	case OPT_PCIE:
		cfg->pcie_gbps = parse_positive(state, "PCIe bandwidth", arg);
		break;
	case OPT_DISK:
		cfg->disk_mbps = parse_positive(state, "disk bandwidth", arg);
		break;
	case 'q':
		cfg->quiet = true;
		break;
	case 'v':
		cfg->verbose++;
		break;
	case OPT_RINGBUF: {
		/*
		 * The kernel takes a ring buffer whose size is a power of two and a
		 * multiple of the page size (kernel/bpf/ringbuf.c), given as the
		 * map's max_entries, a u32: 2^31 bytes, 2048 MiB, is the largest.
		 */
		long mb = parse_long(state, "ring buffer size", arg, 1, DL_RINGBUF_MAX_MB);

		if (mb & (mb - 1))
			argp_error(state, "ring buffer size must be a power of two (got %ld)", mb);
		cfg->ringbuf_mb = (unsigned)mb;
		break;
	}
	case OPT_DRAIN_MS:
		cfg->drain_ms = (unsigned)parse_long(state, "drain interval", arg, 1, 1000);
		break;
	case OPT_KEEP_STEPS:
		cfg->keep_steps = (size_t)parse_long(state, "steps to keep", arg, 0, 1L << 30);
		break;
	case OPT_SUMMARY:
		cfg->kernel_agg = true;
		break;
	case OPT_NO_FILES:
		cfg->no_files = true;
		break;
	case OPT_NO_NET:
		cfg->no_net = true;
		break;
	case OPT_PY_WATCHPOINT:
		cfg->python_watchpoint = true;
		break;
	case OPT_STACKS:
		cfg->stacks = true;
		break;
	case OPT_DUTY:
		if (dl_duty_parse(arg, &cfg->duty_on_s, &cfg->duty_period_s))
			argp_error(state, "invalid duty cycle '%s' (expected M/N seconds, 0 < M < N)", arg);
		break;
	case OPT_OVERHEAD_BUDGET:
		if (dl_budget_parse(arg, &cfg->overhead_budget))
			argp_error(state, "invalid --overhead-budget '%s' (expected a percentage over 0 and at most 100, "
				   "as 1%%, 0.5%% or 5)", arg);
		break;
	case OPT_RING: {
		char *end;

		errno = 0;
		cfg->ring_s = strtod(arg, &end);
		if (*end == 's')
			end++;
		if (errno || end == arg || *end || !(cfg->ring_s >= 1) || cfg->ring_s > 86400)
			argp_error(state, "invalid --ring '%s' (expected seconds from 1 to 86400, as 60 or 60s)", arg);
		break;
	}
	case OPT_RING_MB:
		cfg->ring_mb = (size_t)parse_long(state, "--ring-mb", arg, 4, 1 << 20);
		break;
	case OPT_TRIGGER_STEP: {
		char *end;

		errno = 0;
		cfg->trigger_step = strtod(arg, &end);
		if (*end == 'x')
			end++;
		if (errno || end == arg || *end || !(cfg->trigger_step > 1) || cfg->trigger_step > 1e6)
			argp_error(state, "invalid --trigger-step '%s' (expected a factor > 1, as 2 or 2x)", arg);
		break;
	}
	case OPT_READY_FD:
		/* Not stdin, stdout or stderr: it is closed once written. */
		cfg->ready_fd = (int)parse_long(state, "file descriptor", arg, 3, INT_MAX);
		/* Close-on-exec: the command dlbpf starts must not hold it open. */
		if (fcntl(cfg->ready_fd, F_SETFD, FD_CLOEXEC))
			argp_error(state, "--ready-fd %d: %s", cfg->ready_fd, strerror(errno));
		break;
	case OPT_METRICS: {
		char host[256], port[8], why[256];

		if (dl_http_parse_addr(arg, host, sizeof(host), port, sizeof(port), why, sizeof(why)))
			argp_error(state, "invalid --metrics %s", why);
		cfg->metrics_addr = arg;
		break;
	}
	case OPT_METRICS_KERNELS:
		cfg->metrics_kernels = true;
		break;
	case OPT_RUN_AS: {
		struct passwd *pw;
		char *end;
		unsigned long uid;

		errno = 0;
		pw = getpwnam(arg);
		if (!pw && *arg >= '0' && *arg <= '9') {
			uid = strtoul(arg, &end, 10);
			if (!*end && uid < UINT32_MAX)
				pw = getpwuid((uid_t)uid);
		}
		if (!pw)
			argp_error(state, "--run-as %s: no such user", arg);
		cfg->run_as = strdup(pw->pw_name);
		cfg->run_as_home = strdup(pw->pw_dir);
		if (!cfg->run_as || !cfg->run_as_home)
			argp_failure(state, 1, ENOMEM, "--run-as");
		cfg->run_as_uid = pw->pw_uid;
		cfg->run_as_gid = pw->pw_gid;
		break;
	}
	case OPT_OTLP: {
		struct dl_otlp_url u;
		char why[256];

		if (dl_otlp_url_parse(arg, &u, why, sizeof(why)))
			usage_error_about(state, "--otlp", arg, why);
		cfg->otlp_url = arg;
		break;
	}
	case OPT_OTLP_HEADER: {
		const char *why = dl_otlp_header_why(arg);

		if (cfg->notlp_headers == (int)(sizeof(cfg->otlp_headers) / sizeof(cfg->otlp_headers[0])))
			argp_error(state, "--otlp-header: at most %zu", sizeof(cfg->otlp_headers) / sizeof(cfg->otlp_headers[0]));
		if (why)
			usage_error_about(state, "--otlp-header", arg, why);
		cfg->otlp_headers[cfg->notlp_headers++] = arg;
		break;
	}
	case 'h':
		argp_state_help(state, stdout, ARGP_HELP_STD_HELP);
		break;
	case ARGP_KEY_ARG:
		/*
		 * The sub-command may follow global options (dlbpf -q record ...):
		 * argp hands over non-options in order, so this is the first one,
		 * and one after a "--" is always a command's name.
		 */
		if (cfg->mode == DL_MODE_LIVE && !state->quoted && (!strcmp(arg, "record") || !strcmp(arg, "report"))) {
			cfg->mode = !strcmp(arg, "record") ? DL_MODE_RECORD : DL_MODE_REPORT;
			break;
		}
		if (cfg->mode == DL_MODE_LIVE && !state->quoted && !cfg->cmd && !strcmp(arg, "features")) {
			cfg->mode = DL_MODE_FEATURES;
			break;
		}
		if (cfg->mode == DL_MODE_FEATURES)
			argp_error(state, "features takes no arguments, got '%s'", arg);
		if (cfg->mode == DL_MODE_REPORT) {
			if (cfg->ninputs == DL_MAX_RANKS)
				argp_error(state, "report takes at most %d recordings (ranks), got '%s' too", DL_MAX_RANKS, arg);
			if (!cfg->input_path)
				cfg->input_path = arg;
			cfg->inputs[cfg->ninputs++] = arg;
			break;
		}
		/* The first non-option starts the command: everything after it is the command's. */
		cfg->cmd = &state->argv[state->next - 1];
		state->next = state->argc;
		break;
	case ARGP_KEY_END:
		/* -o is the recording for record, the timeline otherwise */
		if (cfg->mode != DL_MODE_RECORD && cfg->record_path) {
			cfg->timeline_path = cfg->record_path;
			cfg->record_path = NULL;
		}
		if (cfg->timeline_format >= 0 && !cfg->timeline_path)
			cfg->timeline_path = cfg->timeline_format == DL_TIMELINE_JSON ? "trace.json" : "trace.pftrace";
		if (cfg->mode == DL_MODE_FEATURES) {
			if (cfg->npids || cfg->ncomms || cfg->system_wide || cfg->cmd)
				argp_error(state, "features describes this kernel: it traces nothing");
			break;
		}
		if (cfg->mode == DL_MODE_REPORT) {
			if (!cfg->input_path)
				argp_error(state, "report needs a recording: dlbpf report FILE");
			if (cfg->npids || cfg->ncomms || cfg->system_wide || cfg->duration_s > 0)
				argp_error(state, "report replays a recording: --pid, --comm, --system-wide and "
					   "--duration do not apply");
			if (cfg->ready_fd >= 0)
				argp_error(state, "report replays a recording: --ready-fd does not apply");
			if (cfg->ring_s || cfg->ring_mb || cfg->trigger_step)
				argp_error(state, "report replays a recording: --ring, --ring-mb and --trigger-step are record's");
			if (cfg->metrics_addr || cfg->metrics_kernels)
				argp_error(state, "report replays a recording: --metrics serves a live trace");
			/* Both read BPF maps of a live trace; a recording holds per-call records only. */
			if (cfg->kernel_agg || cfg->duty_on_s || cfg->overhead_budget > 0)
				argp_error(state, "report replays a recording: --summary, --duty and --overhead-budget do not apply");
			/* The recording's header says how it is encoded. */
			if (cfg->encoding_given)
				argp_error(state, "report reads the encoding from the recording: --encoding applies to record");
			if (cfg->stacks)
				argp_error(state, "report replays a recording: --stacks applies when recording");
			if (cfg->run_as)
				argp_error(state, "report replays a recording: --run-as applies to -- COMMAND");
			if (cfg->ninputs > 1 && cfg->html_path)
				argp_error(state, "--html reports one recording; with several ranks use -j and -o");
			check_files(state, cfg);
			break;
		}
		if (!cfg->npids && !cfg->cmd && !cfg->ncomms && !cfg->system_wide)
			argp_error(state, "nothing to trace: give --pid PID, --comm NAME, --system-wide or -- COMMAND");
		if ((cfg->npids || cfg->ncomms || cfg->system_wide) && cfg->cmd)
			argp_error(state, "give either --pid or a command, not both (--comm and --system-wide count as --pid)");
		if (cfg->run_as && !cfg->cmd)
			argp_error(state, "--run-as is who runs -- COMMAND: it needs one");
		if (cfg->mode == DL_MODE_RECORD && !cfg->record_path)
			argp_error(state, cfg->ring_s ? "record --ring needs -o DIR" : "record needs -o FILE");
		if ((cfg->ring_s || cfg->ring_mb || cfg->trigger_step) && cfg->mode != DL_MODE_RECORD)
			argp_error(state, "--ring, --ring-mb and --trigger-step are record's: dlbpf record --ring SEC -o DIR");
		if ((cfg->ring_mb || cfg->trigger_step) && !cfg->ring_s)
			argp_error(state, "--ring-mb and --trigger-step go with --ring SEC");
		if (cfg->ring_s) {
			/* -o names the dumps' directory: no recording of the whole run. */
			cfg->ring_dir = cfg->record_path;
			cfg->record_path = NULL;
			if (!cfg->ring_mb)
				cfg->ring_mb = 256;
		}
		if (cfg->mode != DL_MODE_RECORD && cfg->encoding_given)
			argp_error(state, "--encoding is how record writes its recording: it applies to record only");
		/* A recording replays its records; these modes' counts live in BPF maps and the live report. */
		if (cfg->stacks && cfg->kernel_agg)
			argp_error(state, "--stacks needs per-call records; --summary keeps counts only");
		if (cfg->mode == DL_MODE_RECORD && (cfg->kernel_agg || cfg->duty_on_s))
			argp_error(state, "record keeps every record for report; --summary and --duty keep counts "
				   "only the live run sees");
		/* A recording of launches seen part of the time would replay as a job that launched less. */
		if (cfg->mode == DL_MODE_RECORD && cfg->overhead_budget > 0)
			argp_error(state, "record keeps every record for report; --overhead-budget probes launches part of "
				   "the time and scales their counts in the live report only");
		if (cfg->overhead_budget > 0 && cfg->duty_on_s)
			argp_error(state, "--overhead-budget and --duty both turn the launch probes on and off: give one");
		if (cfg->metrics_kernels && !cfg->metrics_addr)
			argp_error(state, "--metrics-kernels needs --metrics");
		if (cfg->notlp_headers && !cfg->otlp_url)
			argp_error(state, "--otlp-header needs --otlp");
		if (cfg->otlp_url && cfg->ninputs > 1)
			argp_error(state, "--otlp exports one recording's run: give the ranks' recordings one at a time");
		/* Steps are what it exports, and those modes scale counts at the end only. */
		if (cfg->otlp_url && (cfg->duty_on_s || cfg->overhead_budget > 0))
			argp_error(state, "--otlp exports what the probes see; --duty and --overhead-budget see launches "
				   "part of the time and scale them at the end only");
		/* Its counts are scaled once, at the end: a counter would jump down then up. */
		if (cfg->metrics_addr && cfg->duty_on_s)
			argp_error(state, "--metrics counts what the probes see; --duty sees launches and copies part "
				   "of the time and scales them at the end only");
		if (cfg->metrics_addr && cfg->overhead_budget > 0)
			argp_error(state, "--metrics counts what the probes see; --overhead-budget sees launches part "
				   "of the time and scales them at the end only");
		check_files(state, cfg);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

void dl_cli_parse(int argc, char **argv, struct dl_config *cfg)
{
	static const struct argp argp = { .options = opts, .parser = parse_opt, .doc = doc,
					  .args_doc = "--pid PID...\n-- COMMAND [ARGS...]\nrecord -o FILE --pid PID...\nreport FILE..." };

	memset(cfg, 0, sizeof(*cfg));
	argp_err_exit_status = 2;   /* usage errors exit 2, as cli.h says (argp's own default is 64) */
	cfg->ringbuf_mb = 16;
	cfg->drain_ms = 10;
	cfg->keep_steps = DL_KEEP_STEPS_DEFAULT;
	cfg->timeline_format = -1;
	cfg->ready_fd = -1;
	cfg->record_encoding = DL_REC_COMPACT;
	if (argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, cfg))
		exit(2);
}
