// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* --otlp: what the sender takes from the command line and from a server's answer. */
#include <string.h>
#include "check.h"
#include "output/otlp_send.h"

static void test_headers(void)
{
	CHECK(dl_otlp_header_ok("Authorization=Bearer abc=def"), "a value may hold '='");
	CHECK(dl_otlp_header_ok("x-api-key="), "an empty value");
	CHECK(!dl_otlp_header_ok("=v"), "no key");
	CHECK(!dl_otlp_header_ok("novalue"), "no '='");
	CHECK(!dl_otlp_header_ok("Bad Key=v"), "a space in the key");
	CHECK(!dl_otlp_header_ok("K:x=v"), "a ':' in the key");
	CHECK(!dl_otlp_header_ok("K=v\r\nInjected: 1"), "a CR LF in the value");
	CHECK(!dl_otlp_header_ok("K=v\nX: 1"), "a LF in the value");
}

static void test_retry_after(void)
{
	CHECK_EQ_U64(dl_otlp_retry_after_ns("HTTP/1.1 503 x\r\nRetry-After: 3\r\n\r\n"), 3000000000ull);
	CHECK_EQ_U64(dl_otlp_retry_after_ns("HTTP/1.1 429 x\r\nContent-Length: 0\r\nretry-after:\t7\r\n\r\n"),
		     7000000000ull);
	/* A minute at most: a server asking an hour must not hold the run's exports that long. */
	CHECK_EQ_U64(dl_otlp_retry_after_ns("HTTP/1.1 503 x\r\nRetry-After: 3600\r\n\r\n"), 60000000000ull);
	CHECK_EQ_U64(dl_otlp_retry_after_ns("HTTP/1.1 503 x\r\nRetry-After: 99999999999999999999999\r\n\r\n"),
		     60000000000ull);
	/* The HTTP-date form, none, one in the body: the backoff applies. */
	CHECK_EQ_U64(dl_otlp_retry_after_ns("HTTP/1.1 503 x\r\nRetry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n\r\n"), 0);
	CHECK_EQ_U64(dl_otlp_retry_after_ns("HTTP/1.1 503 x\r\n\r\n"), 0);
	CHECK_EQ_U64(dl_otlp_retry_after_ns("HTTP/1.1 503 x\r\nX-Retry-After: 5\r\n\r\n"), 0);
}

static void test_targets(void)
{
	static const char *const bad[] = { "https://127.0.0.1:4318", "127.0.0.1:4318", "http://", "http://h:0",
					   "http://h:70000", "http://h:43a", "http://[::1", "http://h:4318/a b",
					   "http://h:4318/v1?x=1" };
	struct dl_otlp_target t = { 0 };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t.url = bad[i];
		CHECK(!dl_otlp_sender__new(&t), "%s accepted", bad[i]);
	}
	static const char *const good[] = { "http://127.0.0.1:4318", "http://127.0.0.1:4318/", "http://[::1]:4318/otlp",
					    "http://localhost" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct dl_otlp_stats st[DL_OTLP_SIGNALS];
		struct dl_otlp_sender *s;

		t.url = good[i];
		s = dl_otlp_sender__new(&t);
		CHECK(s, "%s refused", good[i]);
		if (!s)
			continue;
		/* Never started: a body queued is counted as not delivered when it is destroyed. */
		dl_otlp_sender__put(s, DL_OTLP_TRACES, strdup("x"), 1, 3);
		dl_otlp_sender__destroy(s, 0, st);
		CHECK_EQ_U64(st[DL_OTLP_TRACES].items_undelivered, 3);
	}
}

int main(void)
{
	test_headers();
	test_retry_after();
	test_targets();
	return check_report("test_otlp");
}
