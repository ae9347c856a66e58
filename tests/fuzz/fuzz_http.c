// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Arbitrary bytes, as any client of --metrics may send them, through the
 * request parser of output/http.c (dl_http_request_status).
 *
 * Checked against a reference written here another way (the request line
 * split at its spaces, each part matched whole), and for the property the
 * server relies on when it answers at the first decided prefix: the status
 * of every prefix is 0 (not complete yet) or the status of the whole.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "output/http.h"
#include "harness.h"

#define PATH "/metrics"

static CHECKER bool all_in(const char *s, size_t n, int lo, int hi)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < lo || (unsigned char)s[i] > hi)
			return false;
	return true;
}

/* The status of a request whose line is complete; -1 when the reference cannot say (not complete). */
static CHECKER int reference(const char *r, size_t n)
{
	const char *lf = memchr(r, '\n', n), *sp1, *sp2;
	size_t len, ml, tl, vl;

	if (!lf)
		return -1;
	len = (size_t)(lf - r);
	if (len && r[len - 1] == '\r')
		len--;
	sp1 = memchr(r, ' ', len);
	sp2 = sp1 ? memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - r)) : NULL;
	if (!sp1 || !sp2)
		return 400;
	ml = (size_t)(sp1 - r);
	tl = (size_t)(sp2 - sp1 - 1);
	vl = len - (size_t)(sp2 + 1 - r);
	if (ml < 1 || ml > 16 || !all_in(r, ml, 'A', 'Z'))
		return 400;
	if (tl < 1 || sp1[1] != '/' || !all_in(sp1 + 1, tl, 0x21, 0x7e))
		return 400;
	if (vl != 8 || (memcmp(sp2 + 1, "HTTP/1.0", 8) && memcmp(sp2 + 1, "HTTP/1.1", 8)))
		return 400;
	/* An empty line ends the headers: right after the request line, or after a header line. */
	if (!memmem(lf, (size_t)(r + n - lf), "\n\n", 2) && !memmem(lf, (size_t)(r + n - lf), "\n\r\n", 3))
		return n >= DL_HTTP_REQ_MAX ? 431 : 0;
	if (tl < strlen(PATH) || memcmp(sp1 + 1, PATH, strlen(PATH)) ||
	    (tl > strlen(PATH) && sp1[1 + strlen(PATH)] != '?'))
		return 404;
	return ml == 3 && !memcmp(r, "GET", 3) ? 200 : 405;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool init;
	const char *req = (const char *)data;
	size_t n = size < DL_HTTP_REQ_MAX ? size : DL_HTTP_REQ_MAX, step;
	int whole, want;

	if (!init) {
		fail_init();
		init = true;
	}
	whole = dl_http_request_status(req, n, PATH);
	want = reference(req, n);
	if (want >= 0 && whole != want)
		FAIL("status %d, the reference says %d (%zu bytes)", whole, want, n);
	if (want < 0 && whole != 0 && whole != 400 && !(n == DL_HTTP_REQ_MAX && whole == 414))
		FAIL("status %d for a request line not complete (%zu bytes)", whole, n);
	/* At most 64 prefixes, every one of the short inputs. */
	step = n / 64 + 1;
	for (size_t k = 0; k < n; k += step) {
		int part = dl_http_request_status(req, k, PATH);

		if (part != 0 && part != whole)
			FAIL("prefix of %zu bytes: %d, the whole %zu: %d", k, part, n, whole);
	}
	return 0;
}
