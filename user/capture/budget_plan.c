// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "capture/budget_plan.h"

int dl_budget_parse(const char *s, double *frac)
{
	size_t len = strlen(s), digits = 0, dots = 0;
	char buf[32], *end;
	double v;

	/* strtod alone takes " 1", "+1", "1e2", "0x1p0", "inf" and "nan": digits and one point only. */
	if (len && s[len - 1] == '%')
		len--;
	if (!len || len >= sizeof(buf))
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (isdigit((unsigned char)s[i]))
			digits++;
		else if (s[i] == '.')
			dots++;
		else
			return -1;
	}
	if (!digits || dots > 1)
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	v = strtod(buf, &end);
	if (errno || *end || !(v > 0) || v > 100)
		return -1;
	*frac = v / 100;
	return 0;
}

void dl_budget_plan(double budget, double job_cpu, double always_on, const struct dl_budget_class *c, size_t n,
		    struct dl_budget_plan *out)
{
	double left = budget * job_cpu, planned = always_on;

	memset(out, 0, sizeof(*out));
	if (n > DL_BUDGET_MAX_CLASSES)
		n = DL_BUDGET_MAX_CLASSES;
	out->always_on_share = job_cpu > 0 ? always_on / job_cpu : 0;
	left -= always_on;
	for (size_t i = 0; i < n; i++)
		if (!c[i].cyclable) {
			double full = c[i].rate_hz * c[i].ns_per_event;

			out->on_fraction[i] = 1;
			left -= full;
			planned += full;
			out->always_on_share += job_cpu > 0 ? full / job_cpu : 0;
		}
	out->always_on_over = left < 0;
	/* The coldest cyclable class first: what is left over goes on to the hotter ones, launches last. */
	for (size_t k = n; k-- > 0;) {
		double full = c[k].rate_hz * c[k].ns_per_event, f;

		if (!c[k].cyclable)
			continue;
		if (full <= 0)
			f = 1;   /* it costs nothing seen so far: on, until a window says otherwise */
		else
			f = left > 0 ? left / full : 0;
		if (f > 1)
			f = 1;
		out->on_fraction[k] = f;
		left -= f * full;
		planned += f * full;
	}
	out->planned_share = job_cpu > 0 ? planned / job_cpu : 0;
}

void dl_budget_charge(struct dl_budget_account *a, double job_cpu_ns, double spent_ns)
{
	double untraced = job_cpu_ns - spent_ns;

	/* The probes run on the job's threads: their cost is in its CPU, not in what it would use untraced. */
	if (untraced < 0)
		untraced = 0;
	a->job_cpu_ns += untraced;
	a->spent_ns += spent_ns;
	a->balance_ns += a->budget * untraced - spent_ns;
	if (a->cap_ns > 0 && a->balance_ns > a->cap_ns)
		a->balance_ns = a->cap_ns;
}

double dl_budget_off_ns(double window_ns, double f)
{
	if (!(f > 0))
		return INFINITY;
	if (f >= 1)
		return 0;
	return window_ns * (1 - f) / f;
}

double dl_student_t975(size_t dof)
{
	static const double t[] = { 0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
				    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
				    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042 };

	if (dof < 1)
		return INFINITY;
	if (dof < sizeof(t) / sizeof(t[0]))
		return t[dof];
	if (dof <= 60)
		return 2.000 + (2.042 - 2.000) * (60.0 - (double)dof) / 30.0;   /* linear between 30 and 60 */
	if (dof <= 120)
		return 1.980 + (2.000 - 1.980) * (120.0 - (double)dof) / 60.0;
	return 1.960;
}

void dl_budget_scale(const struct dl_budget_window *w, size_t n, double total_ns, struct dl_budget_scaled *out)
{
	double W = 0, C = 0, U, rate, wbar, s2 = 0, se2, pred2, t;
	size_t used = 0;

	memset(out, 0, sizeof(*out));
	for (size_t k = 0; k < n; k++) {
		if (w[k].on_ns <= 0)
			continue;
		W += w[k].on_ns;
		C += w[k].count;
		used++;
	}
	out->windows = used;
	out->seen = C;
	if (W <= 0 || total_ns <= 0) {
		out->lo = C;
		out->hi = INFINITY;   /* nothing observed: nothing is known of the rest */
		out->scaled = C;
		return;
	}
	if (W > total_ns)
		W = total_ns;
	out->observed = W / total_ns;
	U = total_ns - W;
	rate = C / W;
	out->scaled = C + rate * U;
	wbar = W / (double)used;
	/* The rates of the windows: their spread, weighted by length (the ratio estimator's variance). */
	for (size_t k = 0; k < n; k++) {
		double d;

		if (w[k].on_ns <= 0)
			continue;
		d = w[k].count / w[k].on_ns - rate;
		s2 += (w[k].on_ns / wbar) * (w[k].on_ns / wbar) * d * d;
	}
	if (used >= 2) {
		s2 /= (double)(used - 1);
		se2 = s2 / (double)used;
		t = dl_student_t975(used - 1);
	} else if (U > 0) {
		/* One window says nothing of how the rate varies: the rest of the trace is unbounded above. */
		out->lo = C;
		out->hi = INFINITY;
		return;
	} else {
		s2 = se2 = 0;
		t = 1.96;
	}
	/* Counting noise bounds the rate's error from below: a rate from C events is known to sqrt(C). */
	if (se2 < rate / W)
		se2 = rate / W;
	/* The unseen time is U / wbar spans like a window: each varies as the windows did. */
	pred2 = U * U * se2 + (U / wbar) * wbar * wbar * s2;
	out->lo = out->scaled - t * sqrt(pred2);
	out->hi = out->scaled + t * sqrt(pred2);
	if (out->lo < C)
		out->lo = C;
}

void dl_budget_correct(struct dl_budget_scaled *e, double ratio, double rel_se)
{
	double lo = ratio * (1 - 2 * rel_se);

	if (!(ratio > 0) || !isfinite(e->hi) || !(rel_se >= 0))
		return;
	e->scaled = e->seen + (e->scaled - e->seen) * ratio;
	e->lo = e->seen + (e->lo - e->seen) * (lo > 0 ? lo : 0);
	e->hi = e->seen + (e->hi - e->seen) * ratio * (1 + 2 * rel_se);
}
