/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef DLBPF_CLI_H
#define DLBPF_CLI_H

#include <stdbool.h>
#include <sys/types.h>

#define DL_MAX_PIDS 64
#define DL_MAX_COMMS 16
#define DL_MAX_RANKS 255   /* report's recordings at most: output/timeline.h's rank id ranges */
#define DL_RINGBUF_MAX_MB 2048   /* the largest ring buffer the kernel takes (cli.c says why) */

enum dl_mode {
	DL_MODE_LIVE,     /* dlbpf [--pid N | -- CMD]: trace and diagnose */
	DL_MODE_RECORD,   /* dlbpf record -o FILE ...: write the raw stream */
	DL_MODE_REPORT,   /* dlbpf report FILE: replay a recording */
	DL_MODE_FEATURES, /* dlbpf features: what this kernel offers, and what its absence costs */
};

/* Steps kept in full per process: up to twice this many of about 200 B each, 4 MB, before a fold. */
#define DL_KEEP_STEPS_DEFAULT 10000

struct dl_config {
	enum dl_mode mode;
	const char *record_path;   /* record: -o FILE */
	int record_encoding;       /* record --encoding: enum dl_rec_encoding (records/record.h) */
	bool encoding_given;
	const char *input_path;    /* report: FILE (the first, with several) */
	const char *inputs[DL_MAX_RANKS];   /* report r0.dlbpf r1.dlbpf ...: a job's ranks, in rank order */
	int ninputs;
	const char *step_on;       /* --step-on: a CUDA API or a symbol of the target */
	double pcie_gbps, disk_mbps;
	pid_t pids[DL_MAX_PIDS];
	int npids;
	char **cmd;            /* -- CMD ARGS... (NULL-terminated), or NULL */
	double duration_s;     /* 0: until the traced processes exit or a signal */
	const char *json_path;
	const char *html_path;     /* --html FILE: the HTML report, or NULL */
	const char *timeline_path;  /* -o FILE: timeline trace, or NULL */
	int timeline_format;        /* enum dl_timeline_format; -1: by timeline_path's extension */
	int verbose;
	unsigned ringbuf_mb;
	unsigned drain_ms;
	bool quiet;            /* no live status line */
	char comms[DL_MAX_COMMS][16]; /* --comm: every process of these names, now and later */
	int ncomms;
	bool system_wide;      /* every process that maps a CUDA runtime, now and later */
	bool kernel_agg;       /* --summary: CUDA calls aggregated in the kernel (capture/aggregate.c) */
	bool no_files;         /* --no-files: the files source (bpf/files.bpf.c) is not loaded */
	bool no_net;           /* --no-net: the network source (bpf/net.bpf.c) is not loaded */
	bool python_watchpoint; /* --python-watchpoint: --step-on may watch a Python function's code object */
	bool stacks;           /* --stacks: syncs and synchronous copies carry their callers' stack */
	unsigned duty_on_s, duty_period_s;   /* --duty M/N (capture/duty.c); 0: always on */
	double overhead_budget;   /* --overhead-budget P, a fraction of the job's CPU (capture/budget.c); 0: none */
	size_t keep_steps;     /* --keep-steps: the latest steps kept in full per process; 0: all */
	int ready_fd;          /* --ready-fd: told "ready" once tracing has begun; -1: none */
	/* record --ring SEC -o DIR: the flight recorder (flightrec.h); ring_s 0: a whole recording */
	double ring_s, trigger_step;
	size_t ring_mb;
	const char *ring_dir;
	const char *metrics_addr;  /* --metrics [ADDR:]PORT: serve Prometheus metrics; NULL: none */
	bool metrics_kernels;      /* --metrics-kernels: kernel names as a label too */
	const char *otlp_url;      /* --otlp URL: OpenTelemetry traces and metrics over OTLP/HTTP; NULL: none */
	const char *otlp_headers[8];   /* --otlp-header K=V */
	int notlp_headers;
	/* --run-as USER: the command runs as this user (its passwd entry, read at parse); run_as NULL: as dlbpf */
	const char *run_as, *run_as_home;
	uid_t run_as_uid;
	gid_t run_as_gid;
};

/* Parses argv; on bad usage prints why and exits with status 2. */
void dl_cli_parse(int argc, char **argv, struct dl_config *cfg);

#endif
