// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "trace.h"
#include "version.h"

const char *argp_program_version = "dlbpf " DLBPF_VERSION;
const char *argp_program_bug_address = NULL;

static const char doc[] =
"Trace what a deep-learning job waits for: CUDA copies, launches and syncs,\n"
"disk reads and scheduling of a process tree, attached live with eBPF.\n"
"\n"
"EXAMPLES:\n"
"  sudo dlbpf --pid 4242            # trace a job and its workers until Ctrl-C\n"
"  sudo dlbpf -p 4242 -d 30 -j s.json  # 30 s, then write the JSON summary\n"
"  sudo dlbpf -- python train.py    # start a job traced from its first\n"
"                                   # instruction, until it exits\n"
"  sudo dlbpf -v --pid 4242         # also say what is attached where\n"
"  sudo dlbpf -p 4242 -o t.pftrace  # also write a timeline for the Perfetto UI";

enum { OPT_RINGBUF = 0x100, OPT_DRAIN_MS, OPT_FORMAT };

static const struct argp_option opts[] = {
	{ "pid", 'p', "PID", 0, "Trace this process and its descendants (repeatable)", 0 },
	{ "duration", 'd', "SEC", 0, "Stop after SEC seconds (default: when the traced processes exit, or Ctrl-C)", 0 },
	{ "json", 'j', "FILE", 0, "Write the JSON summary (schema 1) to FILE", 0 },
	{ "output", 'o', "FILE", 0, "Write a timeline trace to FILE (Perfetto protobuf; Chrome JSON if FILE ends in .json)", 0 },
	{ "format", OPT_FORMAT, "FMT", 0, "Trace format: pftrace or json (without -o: to trace.pftrace or trace.json)", 0 },
	{ "quiet", 'q', NULL, 0, "No live status line", 0 },
	{ "verbose", 'v', NULL, 0, "Say more (repeat for debug output, libbpf's included)", 0 },
	{ "ringbuf-mb", OPT_RINGBUF, "MB", 0, "Ring buffer size in MiB, a power of two (default 16)", 0 },
	{ "drain-ms", OPT_DRAIN_MS, "MS", 0, "Drain the ring buffer every MS ms (default 10)", 0 },
	{ NULL, 'h', NULL, OPTION_HIDDEN, "Show this help", 0 },
	{},
};

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
	case 'd':
		errno = 0;
		cfg->duration_s = strtod(arg, &end);
		if (errno || end == arg || *end || !(cfg->duration_s > 0) || cfg->duration_s > 1e7)
			argp_error(state, "invalid duration '%s' (expected seconds > 0)", arg);
		break;
	case 'j':
		cfg->json_path = arg;
		break;
	case 'o':
		if (!*arg)
			argp_error(state, "-o needs a file name");
		cfg->trace_path = arg;
		break;
	case OPT_FORMAT:
		cfg->trace_format = dl_trace_format_parse(arg);
		if (cfg->trace_format < 0)
			argp_error(state, "unknown trace format '%s' (expected pftrace or json)", arg);
		break;
	case 'q':
		cfg->quiet = true;
		break;
	case 'v':
		cfg->verbose++;
		break;
	case OPT_RINGBUF: {
		long mb = parse_long(state, "ring buffer size", arg, 1, 4096);

		if (mb & (mb - 1))
			argp_error(state, "ring buffer size must be a power of two (got %ld)", mb);
		cfg->ringbuf_mb = (unsigned)mb;
		break;
	}
	case OPT_DRAIN_MS:
		cfg->drain_ms = (unsigned)parse_long(state, "drain interval", arg, 1, 1000);
		break;
	case 'h':
		argp_state_help(state, stdout, ARGP_HELP_STD_HELP);
		break;
	case ARGP_KEY_ARG:
		/* The first non-option starts the command: everything after it is the command's. */
		cfg->cmd = &state->argv[state->next - 1];
		state->next = state->argc;
		break;
	case ARGP_KEY_END:
		if (!cfg->npids && !cfg->cmd)
			argp_error(state, "nothing to trace: give --pid PID or -- COMMAND");
		if (cfg->npids && cfg->cmd)
			argp_error(state, "give either --pid or a command, not both");
		if (cfg->trace_format >= 0 && !cfg->trace_path)
			cfg->trace_path = cfg->trace_format == DL_TRACE_JSON ? "trace.json" : "trace.pftrace";
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

void dl_cli_parse(int argc, char **argv, struct dl_config *cfg)
{
	static const struct argp argp = { .options = opts, .parser = parse_opt, .doc = doc,
					  .args_doc = "--pid PID...\n-- COMMAND [ARGS...]" };

	memset(cfg, 0, sizeof(*cfg));
	cfg->ringbuf_mb = 16;
	cfg->drain_ms = 10;
	cfg->trace_format = -1;
	if (argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, cfg))
		exit(2);
}
