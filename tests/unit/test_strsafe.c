// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Traced-side text through every output, against hand-written bytes: the
 * UTF-8 decoder on each class of sequence (Unicode Table 3-7 and the
 * Standard's own maximal-subpart example), the terminal escaper, the JSON
 * string writer, protobuf strings, and a process name that fills its 16-byte
 * field and is cut mid-sequence, through the summary, the text report, the
 * JSON summary and both timelines.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "analysis/summary.h"
#include "output/json.h"
#include "output/pbwriter.h"
#include "output/report.h"
#include "output/timeline.h"
#include "records/stream.h"
#include "log.h"
#include "strsafe.h"

#define FFFD "\xef\xbf\xbd"
/* A string literal and its length without the NUL (a literal may hold NULs). */
#define L(lit) lit, sizeof(lit) - 1

/* The input in a heap block of exactly n bytes, so that reading past it is an ASan error. */
static char *exact(const char *s, size_t n)
{
	char *p = malloc(n ? n : 1);

	memcpy(p, s, n);
	return p;
}

static void next_case(const char *s, size_t n, size_t want_len, uint32_t want_cp, const char *what)
{
	char *in = exact(s, n);
	uint32_t cp = 0;
	size_t len = dl_utf8_next(in, n, &cp);

	CHECK(len == want_len && cp == want_cp, "%s: %zu bytes, U+%04X; want %zu, U+%04X", what, len, cp, want_len,
	      want_cp);
	free(in);
}

#define BAD DL_UTF8_BAD

static void test_decoder(void)
{
	next_case("A", 1, 1, 'A', "ASCII");
	next_case("\0", 1, 1, 0, "NUL inside a bounded field");
	next_case("\x7f", 1, 1, 0x7f, "DEL");
	next_case("\xc2\x80", 2, 2, 0x80, "first C1 (well-formed, a control)");
	next_case("\xc2\x9f", 2, 2, 0x9f, "last C1");
	next_case("\xc3\xa9", 2, 2, 0xe9, "e acute");
	next_case("\xdf\xbf", 2, 2, 0x7ff, "last 2-byte");
	next_case("\xe0\xa0\x80", 3, 3, 0x800, "first 3-byte");
	next_case("\xe2\x82\xac", 3, 3, 0x20ac, "euro sign");
	next_case("\xed\x9f\xbf", 3, 3, 0xd7ff, "just below the surrogates");
	next_case("\xee\x80\x80", 3, 3, 0xe000, "just above the surrogates");
	next_case("\xef\xbf\xbf", 3, 3, 0xffff, "last 3-byte");
	next_case("\xf0\x90\x80\x80", 4, 4, 0x10000, "first 4-byte");
	next_case("\xf0\x9f\x98\x80", 4, 4, 0x1f600, "emoji");
	next_case("\xf4\x8f\xbf\xbf", 4, 4, 0x10ffff, "last code point");
	/* Overlong forms: each is one maximal subpart of one byte, as the lead or the second byte fails. */
	next_case("\xc0\xaf", 2, 1, BAD, "overlong '/' in 2 bytes");
	next_case("\xc1\xbf", 2, 1, BAD, "overlong DEL");
	next_case("\xe0\x80\xaf", 3, 1, BAD, "overlong '/' in 3 bytes");
	next_case("\xe0\x9f\xbf", 3, 1, BAD, "overlong U+07FF");
	next_case("\xf0\x80\x80\xaf", 4, 1, BAD, "overlong '/' in 4 bytes");
	next_case("\xf0\x8f\xbf\xbf", 4, 1, BAD, "overlong U+FFFF");
	/* Surrogates encoded in UTF-8 (CESU-8 style) are ill-formed. */
	next_case("\xed\xa0\x80", 3, 1, BAD, "U+D800");
	next_case("\xed\xbf\xbf", 3, 1, BAD, "U+DFFF");
	next_case("\xed\xa0\x80\xed\xb0\x80", 6, 1, BAD, "a surrogate pair");
	next_case("\xf4\x90\x80\x80", 4, 1, BAD, "U+110000");
	next_case("\xf5\x80\x80\x80", 4, 1, BAD, "lead F5");
	next_case("\xfe", 1, 1, BAD, "FE");
	next_case("\xff", 1, 1, BAD, "FF");
	next_case("\x80", 1, 1, BAD, "a lone continuation");
	next_case("\xbf\xbf", 2, 1, BAD, "continuations");
	/* Truncated: the prefix that is right so far is one subpart. */
	next_case("\xc3", 1, 1, BAD, "2-byte cut after 1");
	next_case("\xe2\x82", 2, 2, BAD, "3-byte cut after 2");
	next_case("\xf0\x9f\x98", 3, 3, BAD, "4-byte cut after 3");
	next_case("\xe2\x82" "A", 3, 2, BAD, "3-byte broken by ASCII");
	next_case("\xc3\xa9", 1, 1, BAD, "a field bounded mid-sequence");
	next_case("\xf0\x9f\x98\x80", 2, 2, BAD, "a field bounded after 2 of 4");
}

static char *fixed(const char *s, size_t n)
{
	char *in = exact(s, n);
	struct dl_sbuf b = { 0 };

	dl_utf8_fix(&b, in, n);
	free(in);
	return b.v;
}

static void fix_case(const char *s, size_t n, const char *want)
{
	char *got = fixed(s, n);

	CHECK(!strcmp(got, want), "fix of %zu bytes: got \"%s\", want \"%s\"", n, got, want);
	CHECK(dl_utf8_valid(got, strlen(got)), "fixed string not valid");
	free(got);
}

static void test_fix(void)
{
	/* The Unicode Standard's example (section 3.9, "U+FFFD Substitution of Maximal Subparts"). */
	static const char ex[] = "\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64";

	fix_case(ex, sizeof(ex) - 1, "a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d");
	fix_case(L(""), "");
	fix_case(L("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");
	fix_case(L("\xed\xa0\x80"), FFFD FFFD FFFD);
	fix_case(L("\xc0\xaf"), FFFD FFFD);
	fix_case(L("\xf0\x80\x80\xaf"), FFFD FFFD FFFD FFFD);
	fix_case(L("x\xe2\x82"), "x" FFFD);
	fix_case(L("\xff\xfe"), FFFD FFFD);
	/* C1 and controls are well-formed: the fix keeps them (the writers decide what to do). */
	fix_case(L("\x1b\xc2\x9b"), "\x1b\xc2\x9b");
	CHECK(dl_utf8_valid("caf\xc3\xa9", 5), "valid");
	CHECK(!dl_utf8_valid("caf\xc3", 4), "cut");
	CHECK(!dl_utf8_valid("\xed\xa0\x80", 3), "surrogate");
	CHECK(dl_utf8_valid("", 0), "empty");
}

static char *escaped(const char *s, size_t n, unsigned flags)
{
	char *in = exact(s, n);
	struct dl_sbuf b = { 0 };

	dl_text_escape(&b, in, n, flags);
	free(in);
	return b.v;
}

static void esc_case(const char *s, size_t n, unsigned flags, const char *want)
{
	char *got = escaped(s, n, flags), *again;

	CHECK(!strcmp(got, want), "escape of %zu bytes: got \"%s\", want \"%s\"", n, got, want);
	again = escaped(got, strlen(got), flags);
	CHECK(!strcmp(again, got), "escaping twice changed \"%s\" to \"%s\"", got, again);
	free(again);
	free(got);
}

static void test_text(void)
{
	char all[256], *out;

	esc_case(L("plain text"), 0, "plain text");
	esc_case(L(""), 0, "");
	esc_case(L("\x1b]0;pwn\x07\r\nX\xff"), 0, "\\x1b]0;pwn\\x07\\x0d\\x0aX\\xff");
	esc_case(L("\x1b[2J"), 0, "\\x1b[2J");
	esc_case(L("a\0b"), 0, "a\\x00b");
	esc_case(L("\x7f"), 0, "\\x7f");
	esc_case(L("\t"), 0, "\\x09");
	esc_case(L("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), 0, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	esc_case(L("\xc2\x9b" "2J"), 0, "\\xc2\\x9b2J");          /* C1 CSI as a code point */
	esc_case(L("\xc2\x85"), 0, "\\xc2\\x85");                  /* NEL */
	esc_case(L("\xc2\xa0"), 0, "\xc2\xa0");                    /* NBSP: printable, kept */
	esc_case(L("\x9b"), 0, "\\x9b");                           /* C1 as a raw byte: ill-formed */
	esc_case(L("ab\xe2\x80\xae" "cd"), 0, "ab\\xe2\\x80\\xaecd");   /* right-to-left override */
	esc_case(L("\xe2\x81\xa6"), 0, "\\xe2\\x81\\xa6");         /* left-to-right isolate */
	esc_case(L("\xe2\x80\xa8"), 0, "\\xe2\\x80\\xa8");         /* line separator */
	esc_case(L("\xc0\xaf"), 0, "\\xc0\\xaf");
	esc_case(L("\xed\xa0\x80"), 0, "\\xed\\xa0\\x80");
	esc_case(L("\xf4\x90\x80\x80"), 0, "\\xf4\\x90\\x80\\x80");
	esc_case(L("x\xe2\x82"), 0, "x\\xe2\\x82");
	esc_case(L("a\\x1b"), 0, "a\\x1b");                        /* a backslash stays: escaping is idempotent */
	esc_case(L("line 1\n\tline 2\r\x1b"), DL_TEXT_KEEP_LINES, "line 1\n\tline 2\\x0d\\x1b");

	/* A process name fills its 16 bytes, no NUL, cut in the middle of a euro sign. */
	{
		char comm[16];

		memcpy(comm, "abcdefghijklmn\xe2\x82", 16);
		out = escaped(comm, strnlen(comm, sizeof(comm)), 0);
		CHECK(!strcmp(out, "abcdefghijklmn\\xe2\\x82"), "16-byte comm: \"%s\"", out);
		free(out);
	}

	/* Every byte value alone: only printable ASCII survives as itself (one check for the 256,
	 * naming the first that does not). */
	{
		int wrong = 0, first = -1;
		const unsigned char *left = NULL;

		for (int c = 0; c < 256; c++) {
			char want[8];

			all[c] = (char)c;
			if (c >= 0x20 && c < 0x7f)
				snprintf(want, sizeof(want), "%c", c);
			else
				snprintf(want, sizeof(want), "\\x%02x", c);
			out = escaped(&all[c], 1, 0);
			if (strcmp(out, want) && wrong++ == 0)
				first = c;
			free(out);
		}
		CHECK(wrong == 0, "%d bytes escaped wrongly, first 0x%02x", wrong, first);
		out = escaped(all, sizeof(all), 0);
		for (const unsigned char *p = (const unsigned char *)out; *p && !left; p++)
			if (*p < 0x20 || *p >= 0x7f)
				left = p;
		CHECK(!left, "byte 0x%02x left in the escape of all bytes", left ? *left : 0);
		free(out);
	}

	{
		struct dl_sbuf b = { 0 };

		CHECK(!strcmp(dl_text(&b, NULL), ""), "NULL");
		CHECK(!strcmp(dl_text(&b, "a\x1b"), "a\\x1b"), "first use");
		CHECK(!strcmp(dl_text(&b, "b"), "b"), "dl_text empties the buffer first");
		dl_sbuf_free(&b);
	}
}

static char *json_of(const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct dl_json j;

	dl_json_init(&j, f);
	dl_json_str(&j, s);
	fclose(f);
	return buf;
}

static void json_case(const char *s, const char *want)
{
	char *got = json_of(s);

	CHECK(!strcmp(got, want), "JSON of \"%s\": got %s, want %s", s, got, want);
	free(got);
}

static void test_json(void)
{
	json_case("plain", "\"plain\"");
	json_case("\x1b]0;pwn\x07\r\nX\xff", "\"\\u001b]0;pwn\\u0007\\r\\nX" FFFD "\"");
	json_case("q\"b\\s/", "\"q\\\"b\\\\s/\"");
	json_case("\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\"");
	json_case("\xc2\x9b\xc2\x9f\xc2\xa0", "\"\\u009b\\u009f\xc2\xa0\"");
	json_case("\xe2\x80\xae\xe2\x80\xa8", "\"\\u202e\\u2028\"");
	json_case("caf\xc3\xa9 \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"");
	json_case("\xed\xa0\x80", "\"" FFFD FFFD FFFD "\"");
	json_case("\xc0\xaf", "\"" FFFD FFFD "\"");
	json_case("abc\xe2\x82", "\"abc" FFFD "\"");
	json_case("\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64",
		  "\"a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d\"");
	{
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		struct dl_json j;

		dl_json_init(&j, f);
		dl_json_obj_begin(&j);
		dl_json_kstr(&j, "k\xff", "v");
		dl_json_obj_end(&j);
		fclose(f);
		CHECK(!strcmp(buf, "{\"k" FFFD "\":\"v\"}"), "a key is escaped too: %s", buf);
		free(buf);
	}
}

static void pb_case(const char *s, const char *want)
{
	struct dl_pb pb;
	size_t n = strlen(want);

	dl_pb_init(&pb);
	dl_pb_str(&pb, 2, s);
	/* tag (field 2, length-delimited), a one-byte length, the bytes */
	CHECK(pb.len == 2 + n && pb.buf[0] == 0x12 && pb.buf[1] == n && !memcmp(pb.buf + 2, want, n),
	      "pb string of \"%s\": %zu bytes", s, pb.len);
	dl_pb_free(&pb);
}

static void test_pb(void)
{
	pb_case("name", "name");
	pb_case("caf\xc3\xa9", "caf\xc3\xa9");
	pb_case("\x1b]0;pwn\x07\r\nX\xff", "\x1b]0;pwn\x07\r\nX" FFFD);
	pb_case("\xed\xa0\x80", FFFD FFFD FFFD);
	pb_case("abc\xe2\x82", "abc" FFFD);
	pb_case("", "");
}

/* --- a cut 16-byte name through the stream, the summary, the report and the timelines --- */

static const char cut_comm[16] = "abcdefghijklmn\xe2\x82";   /* no NUL: the field is full */

static void emit_procinfo(struct dl_stream *st)
{
	struct dl_procinfo_ev e;

	memset(&e, 0, sizeof(e));
	e.h = (struct dl_hdr){ .size = sizeof(e), .kind = DL_EV_PROCINFO, .ts = 1000, .tgid = 100, .tid = 100 };
	memcpy(e.comm, cut_comm, sizeof(e.comm));
	st->err = 0;
	dl_stream_emit(st, &e, sizeof(e));
	CHECK(st->err == 0, "sink failed");
}

static char *timeline_of(enum dl_timeline_format fmt, size_t *len)
{
	struct dl_stream st;
	struct dl_timeline *t;
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	int err;

	memset(&st, 0, sizeof(st));
	t = dl_timeline_new(f, fmt);
	dl_stream_add(&st, dl_timeline_sink, t);
	emit_procinfo(&st);
	err = dl_timeline_finish(t, NULL);
	CHECK(err == 0, "finish: %d", err);
	fclose(f);
	dl_stream_free(&st);
	return buf;
}

static void test_cut_name_everywhere(void)
{
	struct dl_report_model m;
	struct dl_summary sum;
	struct dl_stream st;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	dl_summary_init(&sum);
	memset(&st, 0, sizeof(st));
	dl_stream_add(&st, dl_summary_sink, &sum);
	emit_procinfo(&st);

	/* The summary keeps 15 bytes and a NUL: "abcdefghijklmn\xe2". */
	f = open_memstream(&buf, &len);
	dl_report_model_build(&m, &sum, NULL, NULL);
	dl_report_text(f, &m);
	fclose(f);
	CHECK(strstr(buf, "PID 100 (abcdefghijklmn\\xe2)") != NULL, "text report: %s", buf);
	{
		size_t i = 0;

		while (i < len && (buf[i] == '\n' || ((unsigned char)buf[i] >= 0x20 && (unsigned char)buf[i] < 0x7f)))
			i++;
		CHECK(i == len, "byte 0x%02x at %zu of the text report", i < len ? (unsigned char)buf[i] : 0, i);
	}
	free(buf);

	f = open_memstream(&buf, &len);
	CHECK(dl_report_json(f, &m) == 0, "json");
	dl_report_model_free(&m);
	fclose(f);
	CHECK(strstr(buf, "\"comm\":\"abcdefghijklmn" FFFD "\"") != NULL, "JSON summary: %s", buf);
	CHECK(dl_utf8_valid(buf, len), "JSON summary not UTF-8");
	free(buf);
	dl_summary_free(&sum);
	dl_stream_free(&st);

	/* The timeline names the process with all 16 bytes: the cut euro sign is one U+FFFD. */
	buf = timeline_of(DL_TIMELINE_JSON, &len);
	CHECK(strstr(buf, "\"name\":\"abcdefghijklmn" FFFD " 100\"") != NULL, "Chrome JSON: %s", buf);
	CHECK(dl_utf8_valid(buf, len), "Chrome JSON not UTF-8");
	free(buf);
	buf = timeline_of(DL_TIMELINE_PFTRACE, &len);
	CHECK(memmem(buf, len, L("abcdefghijklmn" FFFD " 100")) != NULL, "Perfetto track name not fixed");
	CHECK(memmem(buf, len, L("\xe2\x82 ")) == NULL, "Perfetto trace holds the cut sequence");
	free(buf);
}

/* What dl_log and dl_vlog_lines wrote to stderr, read back from a file standing in for it. */
static char *stderr_of(void (*fn)(void))
{
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO);
	char *buf;
	long len;

	fflush(stderr);
	dup2(fileno(tmp), STDERR_FILENO);
	fn();
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	len = ftell(tmp);
	buf = calloc(1, (size_t)len + 1);
	rewind(tmp);
	CHECK(fread(buf, 1, (size_t)len, tmp) == (size_t)len, "read back");
	fclose(tmp);
	return buf;
}

static void log_short(void)
{
	dl_info("pid %d (%s): attached in %s", 42, "\x1b]0;pwn\x07\r\nX\xff", "/tmp/\xe2\x80\xaelib.so");
}

static char long_path[2000];

static void log_long(void)
{
	dl_warn("cannot open %s", long_path);
}

static int lib_print(const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = dl_vlog_lines(fmt, ap);
	va_end(ap);
	return r;
}

static void log_lines(void)
{
	lib_print("libbpf: elf: failed to open %s\n-- log --\n\tline\n", "/x\x1b[2J\r");
}

static void test_log(void)
{
	int level = dl_log_level;
	char *out;

	dl_log_level = DL_LOG_INFO;
	out = stderr_of(log_short);
	CHECK(!strcmp(out, "dlbpf: pid 42 (\\x1b]0;pwn\\x07\\x0d\\x0aX\\xff): attached in /tmp/\\xe2\\x80\\xaelib.so\n"),
	      "log: %s", out);
	free(out);

	/* Longer than the message buffer on the stack: escaped all the same, to its end. */
	memset(long_path, 'a', sizeof(long_path) - 2);
	long_path[sizeof(long_path) - 2] = '\x1b';
	out = stderr_of(log_long);
	CHECK(strlen(out) == strlen("dlbpf: warning: cannot open ") + sizeof(long_path) - 2 + 4 + 1 &&
	      !strcmp(out + strlen(out) - 5, "\\x1b\n"), "long log line: %zu bytes", strlen(out));
	free(out);

	out = stderr_of(log_lines);
	CHECK(!strcmp(out, "libbpf: elf: failed to open /x\\x1b[2J\\x0d\n-- log --\n\tline\n"), "library log: %s", out);
	free(out);
	dl_log_level = level;
}

int main(void)
{
	test_decoder();
	test_fix();
	test_text();
	test_json();
	test_pb();
	test_cut_name_everywhere();
	test_log();
	return check_report("test_strsafe");
}
