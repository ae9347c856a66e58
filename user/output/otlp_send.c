// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "log.h"
#include "output/otlp_send.h"
#include "strsafe.h"
#include "util.h"
#include "version.h"

#define QUEUE_BYTES_DEFAULT (64u << 20)    /* a few minutes of a busy job's spans; beyond it, drops */
#define TRIES 6                            /* 1 + 5 retries: 0.5 + 1 + 2 + 4 + 8 s of backoff */
#define BACKOFF_FIRST_NS 500000000ull
#define BACKOFF_MAX_NS 8000000000ull
#define RETRY_AFTER_MAX_NS 60000000000ull  /* a Retry-After beyond a minute is taken as a minute */
#define IO_TIMEOUT_NS 10000000000ull       /* connect, send, or answer: 10 s each at most */
#define RESPONSE_MAX 16384                 /* the head and what follows: enough for a status and a reason */
#define NS 1000000000ull

struct item {
	struct item *next;
	enum dl_otlp_signal sig;
	void *body;
	size_t len;
	uint64_t items;
	int tries;
	uint64_t not_before;     /* a retry waits until then */
};

struct dl_otlp_sender {
	struct dl_otlp_url url;
	char *headers;           /* "K: V\r\n" each */
	struct addrinfo *addrs;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct item *head, *tail;
	size_t queued;           /* bytes */
	size_t cap;
	bool closing;
	uint64_t deadline;       /* closing: nothing is tried after it */
	uint64_t stop_at;        /* the same, read by a request in flight without the lock (0: none) */
	struct dl_otlp_stats st[DL_OTLP_SIGNALS];
};

static const char *const paths[DL_OTLP_SIGNALS] = { "/v1/traces", "/v1/metrics" };

/* Headers dlbpf writes itself (otlp_post): a second one would contradict it or break the request's framing. */
static const char *const own_headers[] = { "Host", "User-Agent", "Content-Type", "Content-Length", "Connection",
					   "Transfer-Encoding" };

const char *dl_otlp_header_why(const char *kv)
{
	static char why[96];
	const char *eq = strchr(kv, '=');

	if (!eq || eq == kv)
		return "not KEY=VALUE";
	for (const char *p = kv; p < eq; p++)   /* RFC 9110 token */
		if (!(*p > 0x20 && *p < 0x7f && !strchr("\"(),/:;<=>?@[\\]{}", *p)))
			return "the key is not a token (letters, digits and !#$%&'*+-.^_`|~)";
	for (size_t i = 0; i < sizeof(own_headers) / sizeof(own_headers[0]); i++)
		if (strlen(own_headers[i]) == (size_t)(eq - kv) && !strncasecmp(kv, own_headers[i], (size_t)(eq - kv))) {
			snprintf(why, sizeof(why), "dlbpf sets %s itself", own_headers[i]);
			return why;
		}
	/* RFC 9110 field-value: visible characters, spaces and tabs; no control a terminal or a server acts on. */
	for (const unsigned char *p = (const unsigned char *)eq + 1; *p; p++)
		if ((*p < 0x20 && *p != '\t') || *p == 0x7f) {
			snprintf(why, sizeof(why), "the value holds a control character (0x%02x)", *p);
			return why;
		}
	return NULL;
}

int dl_otlp_url_parse(const char *url, struct dl_otlp_url *u, char *why, size_t whylen)
{
	const char *p, *slash, *colon;
	size_t hl;
	char *end;
	long port;

	memset(u, 0, sizeof(*u));
	if (!strncasecmp(url, "https://", 8)) {
		snprintf(why, whylen, "https is not supported (dlbpf links no TLS library); send to a collector on "
			 "this node over http (http://127.0.0.1:4318) and let it export over TLS");
		return -EINVAL;
	}
	if (strncasecmp(url, "http://", 7)) {
		snprintf(why, whylen, "not an http:// URL (like http://127.0.0.1:4318)");
		return -EINVAL;
	}
	for (p = url; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
			snprintf(why, whylen, "a space or a control character in the URL");
			return -EINVAL;
		}
	p = url + 7;
	slash = strchr(p, '/');
	hl = slash ? (size_t)(slash - p) : strlen(p);
	if (!hl || hl >= sizeof(u->hostport)) {
		snprintf(why, whylen, "no host");
		return -EINVAL;
	}
	memcpy(u->hostport, p, hl);
	u->hostport[hl] = '\0';
	if (slash && strlen(slash) >= sizeof(u->prefix)) {
		snprintf(why, whylen, "the path is too long");
		return -EINVAL;
	}
	snprintf(u->prefix, sizeof(u->prefix), "%s", slash ? slash : "");
	/* A trailing slash is the same endpoint: http://h:4318/ -> /v1/traces. */
	for (size_t n = strlen(u->prefix); n && u->prefix[n - 1] == '/';)
		u->prefix[--n] = '\0';
	if (strpbrk(u->prefix, "?#")) {
		snprintf(why, whylen, "the path holds a query or a fragment");
		return -EINVAL;
	}
	if (u->hostport[0] == '[') {   /* [v6]:port */
		const char *close = strchr(u->hostport, ']');

		if (!close) {
			snprintf(why, whylen, "unclosed [");
			return -EINVAL;
		}
		snprintf(u->host, sizeof(u->host), "%.*s", (int)(close - u->hostport - 1), u->hostport + 1);
		colon = close[1] == ':' ? close + 1 : NULL;
	} else {
		colon = strrchr(u->hostport, ':');
		snprintf(u->host, sizeof(u->host), "%.*s", (int)(colon ? (size_t)(colon - u->hostport) : hl), u->hostport);
	}
	snprintf(u->port, sizeof(u->port), "%.7s", colon && colon[1] ? colon + 1 : "80");
	errno = 0;
	port = strtol(u->port, &end, 10);
	if (errno || *end || port < 1 || port > 65535 || !u->host[0] || (colon && strlen(colon + 1) >= sizeof(u->port))) {
		snprintf(why, whylen, "bad host or port");
		return -EINVAL;
	}
	return 0;
}

static int parse_url(struct dl_otlp_sender *s, const char *url)
{
	struct dl_sbuf b = { 0 };
	char why[256];
	int err = dl_otlp_url_parse(url, &s->url, why, sizeof(why));

	if (err)
		dl_err("--otlp %s: %s", dl_text(&b, url), why);
	dl_sbuf_free(&b);
	return err;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

#define POLL_SLICE_NS 100000000ull   /* a wait looks at the exit deadline this often */

/*
 * Waits for fd to be ready (events) until deadline, or the exit deadline set
 * meanwhile (a request begun before the exit must not outlast it); 0, or
 * -ETIMEDOUT / -errno.
 */
static int wait_fd(struct dl_otlp_sender *s, int fd, short events, uint64_t deadline)
{
	for (;;) {
		uint64_t now = now_ns(), stop = __atomic_load_n(&s->stop_at, __ATOMIC_RELAXED), until;
		struct pollfd pfd = { .fd = fd, .events = events };
		int r;

		if (stop && stop < deadline)
			deadline = stop;
		if (now >= deadline)
			return -ETIMEDOUT;
		until = deadline - now < POLL_SLICE_NS ? deadline - now : POLL_SLICE_NS;
		r = poll(&pfd, 1, (int)((until + 999999) / 1000000));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

static int connect_to(struct dl_otlp_sender *s, uint64_t deadline)
{
	int err = -EHOSTUNREACH;

	for (struct addrinfo *a = s->addrs; a; a = a->ai_next) {
		int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		socklen_t l = sizeof(err);
		int soerr = 0;

		if (fd < 0)
			return -errno;
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			return fd;
		if (errno != EINPROGRESS) {
			err = -errno;
			close(fd);
			continue;
		}
		if ((err = wait_fd(s, fd, POLLOUT, deadline)) == 0 &&
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &l) == 0 && soerr == 0)
			return fd;
		err = err ? err : -(soerr ? soerr : EIO);
		close(fd);
	}
	return err;
}

static int send_all(struct dl_otlp_sender *s, int fd, const void *p, size_t n, uint64_t deadline)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		int err;

		if (w > 0) {
			p = (const char *)p + w;
			n -= (size_t)w;
		} else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			if ((err = wait_fd(s, fd, POLLOUT, deadline)))
				return err;
		} else {
			return -(w < 0 ? errno : EPIPE);
		}
	}
	return 0;
}

uint64_t dl_otlp_retry_after_ns(const char *head)
{
	for (const char *p = strstr(head, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
		char *end;
		unsigned long long v;

		if (strncasecmp(p + 2, "Retry-After:", 12))
			continue;
		p += 14;
		while (*p == ' ' || *p == '\t')
			p++;
		/* The HTTP-date form is not read: the backoff applies then. */
		if (*p < '0' || *p > '9')
			return 0;
		v = strtoull(p, &end, 10);
		return v >= RETRY_AFTER_MAX_NS / NS ? RETRY_AFTER_MAX_NS : v * NS;
	}
	return 0;
}

/*
 * One POST; the status (or -errno for a connection that failed, timed out or
 * was closed before a status line) and the Retry-After it asked for.
 */
static int post(struct dl_otlp_sender *s, const struct item *it, uint64_t deadline, uint64_t *retry_after,
		char *why, size_t whylen)
{
	char head[2048], resp[RESPONSE_MAX + 1];
	size_t got = 0;
	int fd, n, err, status = 0;

	*retry_after = 0;
	fd = connect_to(s, deadline);
	if (fd < 0) {
		snprintf(why, whylen, "connect: %s", strerror(-fd));
		return fd;
	}
	n = snprintf(head, sizeof(head),
		     "POST %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: dlbpf/%s\r\nContent-Type: application/x-protobuf\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n%s\r\n",
		     s->url.prefix, paths[it->sig], s->url.hostport, DLBPF_VERSION, it->len, s->headers ? s->headers : "");
	if (n < 0 || (size_t)n >= sizeof(head)) {
		close(fd);
		snprintf(why, whylen, "request head too long");
		return -E2BIG;
	}
	if ((err = send_all(s, fd, head, (size_t)n, deadline)) || (err = send_all(s, fd, it->body, it->len, deadline))) {
		close(fd);
		snprintf(why, whylen, "send: %s", strerror(-err));
		return err;
	}
	/* The status line and headers; what follows (an ExportServiceResponse) is not needed. */
	while (got < RESPONSE_MAX) {
		ssize_t r = recv(fd, resp + got, RESPONSE_MAX - got, 0);

		if (r > 0) {
			got += (size_t)r;
			resp[got] = '\0';
			if (strstr(resp, "\r\n\r\n"))
				break;
		} else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			if ((err = wait_fd(s, fd, POLLIN, deadline))) {
				close(fd);
				snprintf(why, whylen, "no answer: %s", strerror(-err));
				return err;
			}
		} else {
			break;   /* closed (or reset): a status line read so far still counts */
		}
	}
	close(fd);
	resp[got] = '\0';
	if (sscanf(resp, "HTTP/1.%*1d %3d", &status) != 1 || status < 100) {
		snprintf(why, whylen, "the connection closed without an HTTP status");
		return -ECONNRESET;
	}
	*retry_after = dl_otlp_retry_after_ns(resp);
	snprintf(why, whylen, "HTTP %d", status);
	return status;
}

static bool retryable(int status)
{
	return status < 0 || status == 429 || status == 502 || status == 503 || status == 504;
}

static void *run(void *arg)
{
	struct dl_otlp_sender *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct item *it = s->head;
		uint64_t now = now_ns(), limit, retry_after;
		char why[128];
		int status;

		if (!it) {
			if (s->closing)
				break;
			pthread_cond_wait(&s->cond, &s->lock);
			continue;
		}
		if (s->closing && now >= s->deadline)
			break;   /* what is left is counted by destroy */
		if (it->not_before > now) {
			uint64_t until = s->closing && s->deadline < it->not_before ? s->deadline : it->not_before;
			struct timespec ts;

			/* CLOCK_REALTIME for the condition variable: a wait, its length from the monotonic clock. */
			clock_gettime(CLOCK_REALTIME, &ts);
			uint64_t abs = (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec + (until - now);

			ts.tv_sec = (time_t)(abs / NS);
			ts.tv_nsec = (long)(abs % NS);
			pthread_cond_timedwait(&s->cond, &s->lock, &ts);
			continue;
		}
		limit = now + IO_TIMEOUT_NS;
		if (s->closing && s->deadline < limit)
			limit = s->deadline;
		pthread_mutex_unlock(&s->lock);
		status = post(s, it, limit, &retry_after, why, sizeof(why));
		pthread_mutex_lock(&s->lock);

		struct dl_otlp_stats *st = &s->st[it->sig];

		st->requests++;
		if (status >= 200 && status < 300) {
			st->items_sent += it->items;
		} else {
			snprintf(st->last_error, sizeof(st->last_error), "%s", why);
			if (retryable(status) && ++it->tries < TRIES) {
				uint64_t backoff = BACKOFF_FIRST_NS << (it->tries - 1);

				if (!s->closing || now_ns() < s->deadline)   /* else it is not tried again */
					st->retries++;
				it->not_before = now_ns() + (retry_after ? retry_after : backoff < BACKOFF_MAX_NS ? backoff
														 : BACKOFF_MAX_NS);
				continue;
			}
			st->items_undelivered += it->items;
		}
		s->head = it->next;
		if (!s->head)
			s->tail = NULL;
		s->queued -= it->len;
		free(it->body);
		free(it);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

struct dl_otlp_sender *dl_otlp_sender__new(const struct dl_otlp_target *t)
{
	struct dl_otlp_sender *s = dl_xcalloc(1, sizeof(*s));
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct dl_sbuf h = { 0 };
	int err;

	if (parse_url(s, t->url))
		goto fail;
	for (int i = 0; i < t->nheaders; i++) {
		const char *kv = t->headers[i], *eq = strchr(kv, '=');

		const char *why = dl_otlp_header_why(kv);

		if (why) {
			struct dl_sbuf b = { 0 };

			dl_err("--otlp-header %s: %s", dl_text(&b, kv), why);
			dl_sbuf_free(&b);
			goto fail;
		}
		dl_sbuf_printf(&h, "%.*s: %s\r\n", (int)(eq - kv), kv, eq + 1);
	}
	if (h.n) {
		dl_sbuf_put(&h, "", 1);
		s->headers = h.v;
		h.v = NULL;
	}
	if ((err = getaddrinfo(s->url.host, s->url.port, &hints, &s->addrs))) {
		dl_err("--otlp %s: cannot resolve %s: %s", t->url, s->url.host, gai_strerror(err));
		goto fail;
	}
	s->cap = t->queue_bytes ? t->queue_bytes : QUEUE_BYTES_DEFAULT;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	return s;
fail:
	dl_sbuf_free(&h);
	dl_otlp_sender__destroy(s, 0, NULL);
	return NULL;
}

int dl_otlp_sender__start(struct dl_otlp_sender *s)
{
	int err = pthread_create(&s->thread, NULL, run, s);

	if (err) {
		dl_err("--otlp: cannot start its thread: %s", strerror(err));
		return -err;
	}
	s->started = true;
	return 0;
}

bool dl_otlp_sender__put(struct dl_otlp_sender *s, enum dl_otlp_signal sig, void *body, size_t len, uint64_t items)
{
	struct item *it;

	pthread_mutex_lock(&s->lock);
	if (s->queued + len > s->cap) {
		s->st[sig].items_dropped_full += items;
		pthread_mutex_unlock(&s->lock);
		free(body);
		return false;
	}
	it = dl_xcalloc(1, sizeof(*it));
	*it = (struct item){ .sig = sig, .body = body, .len = len, .items = items };
	if (s->tail)
		s->tail->next = it;
	else
		s->head = it;
	s->tail = it;
	s->queued += len;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return true;
}

void dl_otlp_sender__destroy(struct dl_otlp_sender *s, uint64_t deadline_ns, struct dl_otlp_stats *st)
{
	if (!s)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->lock);
		s->closing = true;
		s->deadline = deadline_ns;
		__atomic_store_n(&s->stop_at, deadline_ns ? deadline_ns : 1, __ATOMIC_RELAXED);
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->lock);
		/* The thread's own waits end by the deadline: a post's poll is bounded by it. */
		pthread_join(s->thread, NULL);
	}
	if (s->cap) {   /* initialised */
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->cond);
	}
	while (s->head) {
		struct item *it = s->head;

		s->head = it->next;
		s->st[it->sig].items_undelivered += it->items;
		free(it->body);
		free(it);
	}
	if (st)
		memcpy(st, s->st, sizeof(s->st));
	if (s->addrs)
		freeaddrinfo(s->addrs);
	free(s->headers);
	free(s);
}
