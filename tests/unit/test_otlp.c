// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* --otlp: what the sender takes from the command line and from a server's answer. */
#include <string.h>
#include "check.h"
#include "output/otlp_send.h"

static void test_headers(void)
{
	const char *why;

	CHECK(!dl_otlp_header_why("Authorization=Bearer abc=def"), "a value may hold '='");
	CHECK(!dl_otlp_header_why("x-api-key="), "an empty value");
	CHECK(!dl_otlp_header_why("X-Tab=a\tb"), "a tab in the value");
	CHECK(!dl_otlp_header_why("X-Bytes=caf\xc3\xa9"), "bytes past ASCII (obs-text)");
	CHECK(dl_otlp_header_why("=v") && dl_otlp_header_why("novalue"), "no key, no '='");
	CHECK(dl_otlp_header_why("Bad Key=v") && dl_otlp_header_why("K:x=v"), "a space or a ':' in the key");
	why = dl_otlp_header_why("K=v\r\nInjected: 1");
	CHECK(why && strstr(why, "control character (0x0d)"), "a CR LF in the value: %s", why ? why : "accepted");
	CHECK(dl_otlp_header_why("K=v\nX: 1") && dl_otlp_header_why("K=\x1b[2J") && dl_otlp_header_why("K=a\x7f"),
	      "LF, ESC and DEL in the value");
	/* Headers dlbpf writes: a second Content-Length would put two on the wire. */
	why = dl_otlp_header_why("content-length=5");
	CHECK(why && !strcmp(why, "dlbpf sets Content-Length itself"), "Content-Length: %s", why ? why : "accepted");
	CHECK(dl_otlp_header_why("Content-Type=text/plain") && dl_otlp_header_why("HOST=x") &&
	      dl_otlp_header_why("Connection=keep-alive") && dl_otlp_header_why("Transfer-Encoding=chunked") &&
	      dl_otlp_header_why("User-Agent=x"), "the others dlbpf sets");
	CHECK(!dl_otlp_header_why("Content-Lengthy=5"), "a longer name is another header");
}

static void test_urls(void)
{
	struct dl_otlp_url u;
	char why[256];

	CHECK(dl_otlp_url_parse("http://127.0.0.1:4318/", &u, why, sizeof(why)) == 0 && !strcmp(u.host, "127.0.0.1") &&
	      !strcmp(u.port, "4318") && !strcmp(u.prefix, ""), "host, port, no prefix");
	CHECK(dl_otlp_url_parse("http://[::1]/otel//", &u, why, sizeof(why)) == 0 && !strcmp(u.host, "::1") &&
	      !strcmp(u.port, "80") && !strcmp(u.prefix, "/otel"), "v6, default port, prefix");
	CHECK(dl_otlp_url_parse("https://x", &u, why, sizeof(why)) && strstr(why, "https"), "https: %s", why);
	CHECK(dl_otlp_url_parse("ftp://x", &u, why, sizeof(why)) && strstr(why, "http://"), "ftp: %s", why);
	CHECK(dl_otlp_url_parse("http://x:99999", &u, why, sizeof(why)) && strstr(why, "port"), "port: %s", why);
	CHECK(dl_otlp_url_parse("http://x:123456789", &u, why, sizeof(why)) && strstr(why, "port"), "long port");
	CHECK(dl_otlp_url_parse("http://", &u, why, sizeof(why)) && strstr(why, "no host"), "no host: %s", why);
	CHECK(dl_otlp_url_parse("http://[::1", &u, why, sizeof(why)) && strstr(why, "unclosed"), "v6: %s", why);
	CHECK(dl_otlp_url_parse("http://x/a?b", &u, why, sizeof(why)) && strstr(why, "query"), "query: %s", why);
	CHECK(dl_otlp_url_parse("http://x/a\r\nb", &u, why, sizeof(why)) && strstr(why, "control"), "CR LF: %s", why);
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
	test_urls();
	test_retry_after();
	test_targets();
	return check_report("test_otlp");
}
