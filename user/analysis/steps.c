// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "analysis/steps.h"

const char *dl_cat_name(enum dl_cat c)
{
	static const char *const names[DL_CAT_COUNT] = {
		"gpu_wait", "comm_wait", "h2d", "d2h", "launch", "cuda_other", "io_wait", "input_wait", "runq", "cpu",
	};

	return c < DL_CAT_COUNT ? names[c] : "?";
}

const char *dl_verdict_name(enum dl_verdict v)
{
	static const char *const names[DL_V_COUNT] = {
		"gpu-bound", "comm-bound", "input-bound", "copy-bound", "launch-bound", "host-compute-bound", "cpu-contention",
	};

	return v < DL_V_COUNT ? names[v] : "?";
}

const char *dl_severity_name(enum dl_severity s)
{
	static const char *const names[] = { "none", "low", "moderate", "high" };

	return s <= DL_SEV_HIGH ? names[s] : "?";
}

const char *dl_idle_name(enum dl_idle i)
{
	static const char *const names[DL_IDLE_COUNT] = { "host_wait", "input", "sync_overhead" };

	return i < DL_IDLE_COUNT ? names[i] : "?";
}

uint64_t dl_verdict_ns(const uint64_t cat_ns[DL_CAT_COUNT], enum dl_verdict v)
{
	switch (v) {
	case DL_V_GPU:
		return cat_ns[DL_CAT_GPU_WAIT];
	case DL_V_COMM:
		return cat_ns[DL_CAT_COMM_WAIT];
	case DL_V_INPUT:
		return cat_ns[DL_CAT_IO_WAIT] + cat_ns[DL_CAT_INPUT_WAIT];
	case DL_V_COPY:
		return cat_ns[DL_CAT_H2D] + cat_ns[DL_CAT_D2H];
	case DL_V_LAUNCH:
		return cat_ns[DL_CAT_LAUNCH];
	case DL_V_HOST:
		return cat_ns[DL_CAT_CPU] + cat_ns[DL_CAT_CUDA_OTHER];
	case DL_V_CONTENTION:
		return cat_ns[DL_CAT_RUNQ];
	default:
		return 0;
	}
}

enum dl_verdict dl_verdict_of(const uint64_t cat_ns[DL_CAT_COUNT], double *share)
{
	uint64_t total = 0, best = 0;
	enum dl_verdict v = DL_V_GPU;

	for (int k = 0; k < DL_CAT_COUNT; k++)
		total += cat_ns[k];
	for (int i = 0; i < DL_V_COUNT; i++) {
		uint64_t ns = dl_verdict_ns(cat_ns, (enum dl_verdict)i);

		if (ns > best) {
			best = ns;
			v = (enum dl_verdict)i;
		}
	}
	if (share)
		*share = total ? (double)best / (double)total : 0;
	return v;
}

double dl_pct(uint64_t part, uint64_t total)
{
	return total ? 100.0 * (double)part / (double)total : 0;
}

enum dl_severity dl_severity_of(enum dl_verdict v, double share)
{
	/* TensorFlow's input-pipeline analyzer: >= 20% highly, >= 5% moderately bound. */
	if (v == DL_V_GPU)
		return DL_SEV_NONE;
	return share >= 0.20 ? DL_SEV_HIGH : share >= 0.05 ? DL_SEV_MODERATE : DL_SEV_LOW;
}
