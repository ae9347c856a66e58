// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The responder's thread: one poll loop over the listening socket, a wake-up
 * pipe and up to DL_HTTP_SLOTS connections, each a small state machine:
 * reading its request, waiting for a fresh body, writing its response. It is
 * an output of the collector like a file (nothing here reads the kernel or
 * /proc), hence output/.
 */
#define _GNU_SOURCE   /* accept4, pipe2, memmem */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "output/http.h"
#include "records/clock.h"
#include "util.h"

#define MS 1000000ull
#define BACKLOG 64
#define ACCEPT_PAUSE_MS 100   /* out of file descriptors: the listener is left alone this long */

enum slot_state { SLOT_FREE, SLOT_READ, SLOT_WAIT, SLOT_WRITE };

struct slot {
	int fd;
	enum slot_state st;
	uint64_t accepted_ns, deadline_ns;
	uint64_t need_gen;     /* SLOT_WAIT: a body of this generation or later is fresh */
	size_t n;              /* request bytes read; req[n] is a NUL */
	char req[DL_HTTP_REQ_MAX + 1];
	char *resp;
	size_t resp_len, off;
};

struct dl_http {
	int lfd, wake[2];
	char path[64], ctype[96], addr[128];
	pthread_t thread;
	bool started;
	atomic_bool stopping, wanted;
	pthread_mutex_t lock;  /* guards body, body_len, gen and last */
	char *body;
	size_t body_len;
	uint64_t gen;
	bool last;
	uint64_t accept_pause_until;
	struct slot slots[DL_HTTP_SLOTS];
	struct dl_http_stats stats;   /* the thread's until it is joined */
};

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

int dl_http_parse_addr(const char *spec, char *host, size_t hostlen, char *port, size_t portlen, char *err,
		       size_t errlen)
{
	const char *colon = strrchr(spec, ':'), *p;
	size_t hl;

	if (!colon) {
		snprintf(host, hostlen, "127.0.0.1");   /* only this host's scraper, unless asked */
		p = spec;
	} else if (spec[0] == '[') {
		const char *close = strchr(spec, ']');

		if (!close || close + 1 != colon) {
			snprintf(err, errlen, "'%s': expected [IPV6]:PORT", spec);
			return -EINVAL;
		}
		hl = (size_t)(close - spec - 1);
		if (!hl || hl >= hostlen) {
			snprintf(err, errlen, "'%s': no address in the brackets", spec);
			return -EINVAL;
		}
		memcpy(host, spec + 1, hl);
		host[hl] = '\0';
		p = colon + 1;
	} else {
		hl = (size_t)(colon - spec);
		if (memchr(spec, ':', hl)) {
			snprintf(err, errlen, "'%s': write an IPv6 address in brackets, [::1]:9464", spec);
			return -EINVAL;
		}
		if (!hl || hl >= hostlen) {
			snprintf(err, errlen, "'%s': no address before the port (0.0.0.0:PORT listens on every "
				 "interface)", spec);
			return -EINVAL;
		}
		memcpy(host, spec, hl);
		host[hl] = '\0';
		p = colon + 1;
	}
	if (!all_digits(p) || strlen(p) > 5 || atoi(p) < 1 || atoi(p) > 65535 || strlen(p) >= portlen) {
		snprintf(err, errlen, "'%s': the port must be a number from 1 to 65535", spec);
		return -EINVAL;
	}
	snprintf(port, portlen, "%d", atoi(p));
	return 0;
}

static int bind_one(const struct addrinfo *ai)
{
	int one = 1, fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -errno;
	/* A restarted dlbpf binds while its old connections sit in TIME_WAIT; a listener still fails. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) || bind(fd, ai->ai_addr, ai->ai_addrlen) ||
	    listen(fd, BACKLOG)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

struct dl_http *dl_http_listen(const char *spec, const char *path, const char *content_type, char *err,
			       size_t errlen)
{
	struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM }, *res, *ai;
	char host[256], port[8], nhost[NI_MAXHOST];
	struct dl_http *h;
	int fd = -EADDRNOTAVAIL, rc;

	if (dl_http_parse_addr(spec, host, sizeof(host), port, sizeof(port), err, errlen))
		return NULL;
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "%s: cannot resolve '%s': %s", spec, host, gai_strerror(rc));
		return NULL;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = bind_one(ai);
		if (fd >= 0)
			break;
	}
	if (fd < 0) {
		if (fd == -EADDRINUSE)
			snprintf(err, errlen, "%s: the port is in use (another exporter, or another dlbpf?)", spec);
		else if (fd == -EADDRNOTAVAIL)
			snprintf(err, errlen, "%s: %s is not an address of this host", spec, host);
		else
			snprintf(err, errlen, "%s: cannot listen: %s", spec, strerror(-fd));
		freeaddrinfo(res);
		return NULL;
	}
	h = dl_xcalloc(1, sizeof(*h));
	h->lfd = fd;
	if (getnameinfo(ai->ai_addr, ai->ai_addrlen, nhost, sizeof(nhost), NULL, 0, NI_NUMERICHOST))
		snprintf(nhost, sizeof(nhost), "%s", host);
	snprintf(h->addr, sizeof(h->addr), ai->ai_family == AF_INET6 ? "[%s]:%s" : "%s:%s", nhost, port);
	freeaddrinfo(res);
	if (pipe2(h->wake, O_CLOEXEC | O_NONBLOCK)) {
		snprintf(err, errlen, "cannot make a pipe: %s", strerror(errno));
		close(fd);
		free(h);
		return NULL;
	}
	snprintf(h->path, sizeof(h->path), "%s", path);
	snprintf(h->ctype, sizeof(h->ctype), "%s", content_type);
	pthread_mutex_init(&h->lock, NULL);
	for (int i = 0; i < DL_HTTP_SLOTS; i++)
		h->slots[i].fd = -1;
	return h;
}

const char *dl_http_address(const struct dl_http *h)
{
	return h->addr;
}

static void close_slot(struct slot *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->resp);
	s->resp = NULL;
	s->fd = -1;
	s->st = SLOT_FREE;
	s->n = s->resp_len = s->off = 0;
}

static const char *reason(int code)
{
	switch (code) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	default: return "Service Unavailable";
	}
}

static void flush_slot(struct slot *s)
{
	while (s->off < s->resp_len) {
		ssize_t k = send(s->fd, s->resp + s->off, s->resp_len - s->off, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (k <= 0) {
			close_slot(s);
			return;
		}
		s->off += (size_t)k;
	}
	/* One request per connection (Connection: close): the client reads to the end. */
	shutdown(s->fd, SHUT_WR);
	close_slot(s);
}

static void respond(struct dl_http *h, struct slot *s, int code, const char *body, size_t len)
{
	char head[256];
	int hl;

	if (code != 200) {
		body = reason(code);
		len = strlen(body);
	}
	hl = snprintf(head, sizeof(head),
		      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
		      code, reason(code), code == 200 ? h->ctype : "text/plain; charset=utf-8",
		      len + (code != 200), code == 405 ? "Allow: GET\r\n" : "");
	s->resp = dl_xrealloc(NULL, (size_t)hl + len + 1);
	memcpy(s->resp, head, (size_t)hl);
	memcpy(s->resp + hl, body, len);
	s->resp_len = (size_t)hl + len;
	if (code != 200)
		s->resp[s->resp_len++] = '\n';
	s->off = 0;
	s->st = SLOT_WRITE;
	s->deadline_ns = dl_now_ns() + DL_HTTP_WRITE_MS * MS;
	switch (code) {
	case 200: h->stats.served++; break;
	case 404: h->stats.not_found++; break;
	case 405: h->stats.bad_method++; break;
	case 408: h->stats.timed_out++; break;
	case 414: case 431: h->stats.too_large++; break;
	default: h->stats.bad_request++; break;
	}
	flush_slot(s);
}

/*
 * The request line as far as it came: METHOD SP TARGET SP HTTP/1.x CRLF.
 * Returns 400 as soon as what is there cannot start a request, 0 while it
 * can (or is complete); *line_end is set once its LF is there.
 */
static int check_request_line(const char *r, size_t n, const char **line_end)
{
	static const char ver[] = "HTTP/1.";
	size_t i = 0, m, t;

	*line_end = NULL;
	for (m = 0; i < n && r[i] >= 'A' && r[i] <= 'Z' && m < 16; i++, m++)
		;
	if (i == n)
		return 0;
	if (!m || r[i] != ' ')
		return 400;
	i++;
	for (t = i; i < n && r[i] > ' ' && r[i] < 0x7f; i++)
		;
	if (i == n)
		return t < n && r[t] != '/' ? 400 : 0;
	if (i == t || r[t] != '/' || r[i] != ' ')
		return 400;
	i++;
	for (size_t k = 0; k < sizeof(ver) - 1; k++, i++) {
		if (i == n)
			return 0;
		if (r[i] != ver[k])
			return 400;
	}
	if (i == n)
		return 0;
	if (r[i] != '0' && r[i] != '1')
		return 400;
	if (++i < n && r[i] == '\r')
		i++;
	if (i == n)
		return 0;
	if (r[i] != '\n')
		return 400;
	*line_end = r + i;
	return 0;
}

int dl_http_request_status(const char *req, size_t n, const char *path)
{
	const char *eol, *target, *end;
	size_t plen = strlen(path);
	int code = check_request_line(req, n, &eol);

	if (code)
		return code;
	if (!eol)
		return n >= DL_HTTP_REQ_MAX ? 414 : 0;
	/* The header section ends with an empty line; its fields are not needed. */
	if (!memmem(eol, (size_t)(req + n - eol), "\n\r\n", 3) && !memmem(eol, (size_t)(req + n - eol), "\n\n", 2))
		return n >= DL_HTTP_REQ_MAX ? 431 : 0;
	/* The line is checked: METHOD SP TARGET SP VERSION, one space each. */
	target = (const char *)memchr(req, ' ', (size_t)(eol - req)) + 1;
	end = memchr(target, ' ', (size_t)(eol - target));
	if ((size_t)(end - target) < plen || memcmp(target, path, plen) || (target + plen != end && target[plen] != '?'))
		return 404;
	return memcmp(req, "GET ", 4) ? 405 : 200;
}

static void want_body(struct dl_http *h, struct slot *s)
{
	pthread_mutex_lock(&h->lock);
	s->need_gen = h->gen + 1;
	pthread_mutex_unlock(&h->lock);
	s->st = SLOT_WAIT;
	s->deadline_ns = dl_now_ns() + DL_HTTP_FRESH_MS * MS;
	atomic_store(&h->wanted, true);
}

static void on_readable(struct dl_http *h, struct slot *s)
{
	while (s->st == SLOT_READ) {
		ssize_t k = recv(s->fd, s->req + s->n, DL_HTTP_REQ_MAX - s->n, 0);
		int code;

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (k <= 0) {
			h->stats.closed_early++;
			close_slot(s);
			return;
		}
		s->n += (size_t)k;
		s->req[s->n] = '\0';
		code = dl_http_request_status(s->req, s->n, h->path);
		if (code == 200)
			want_body(h, s);
		else if (code)
			respond(h, s, code, NULL, 0);
	}
}

static void serve_waiting(struct dl_http *h, struct slot *s, uint64_t now)
{
	pthread_mutex_lock(&h->lock);
	if (h->gen >= s->need_gen || h->last || now >= s->deadline_ns) {
		if (h->gen < s->need_gen && !h->last)
			h->stats.stale++;
		if (h->body)
			respond(h, s, 200, h->body, h->body_len);
		else
			respond(h, s, 503, NULL, 0);
	}
	pthread_mutex_unlock(&h->lock);
}

/* A free slot, or the one that has been sending its request longest; NULL if every one is answering. */
static struct slot *slot_for_new(struct dl_http *h)
{
	struct slot *old = NULL;

	for (int i = 0; i < DL_HTTP_SLOTS; i++) {
		struct slot *s = &h->slots[i];

		if (s->st == SLOT_FREE)
			return s;
		if (s->st == SLOT_READ && (!old || s->accepted_ns < old->accepted_ns))
			old = s;
	}
	return old;
}

static void accept_some(struct dl_http *h)
{
	for (int i = 0; i < DL_HTTP_SLOTS; i++) {
		struct slot *s = slot_for_new(h);
		int fd;

		if (!s)
			return;
		fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				h->accept_pause_until = dl_now_ns() + ACCEPT_PAUSE_MS * MS;
			return;
		}
		if (s->st != SLOT_FREE) {
			h->stats.evicted++;
			close_slot(s);
		}
		s->fd = fd;
		s->st = SLOT_READ;
		s->accepted_ns = dl_now_ns();
		s->deadline_ns = s->accepted_ns + DL_HTTP_READ_MS * MS;
		on_readable(h, s);   /* a scraper's request is usually there already: it is not evictable after */
	}
}

static void expire(struct dl_http *h, uint64_t now)
{
	for (int i = 0; i < DL_HTTP_SLOTS; i++) {
		struct slot *s = &h->slots[i];

		if (s->st == SLOT_WAIT)
			serve_waiting(h, s, now);
		else if (s->st == SLOT_READ && now >= s->deadline_ns)
			respond(h, s, 408, NULL, 0);   /* best effort: it is not reading, most likely */
		else if (s->st == SLOT_WRITE && now >= s->deadline_ns) {
			h->stats.timed_out++;
			close_slot(s);
		}
	}
}

static void *serve(void *arg)
{
	struct dl_http *h = arg;
	struct pollfd pfd[2 + DL_HTTP_SLOTS];
	struct slot *of[2 + DL_HTTP_SLOTS];
	char drain[64];

	while (!atomic_load(&h->stopping)) {
		uint64_t now = dl_now_ns(), next = now + 1000 * MS;
		int n = 0, lidx = -1;

		pfd[n++] = (struct pollfd){ .fd = h->wake[0], .events = POLLIN };
		if (now >= h->accept_pause_until && slot_for_new(h)) {
			lidx = n;
			pfd[n++] = (struct pollfd){ .fd = h->lfd, .events = POLLIN };
		} else if (now < h->accept_pause_until) {
			next = dl_min_u64(next, h->accept_pause_until);
		}
		for (int i = 0; i < DL_HTTP_SLOTS; i++) {
			struct slot *s = &h->slots[i];

			if (s->st == SLOT_FREE)
				continue;
			next = dl_min_u64(next, s->deadline_ns);
			if (s->st == SLOT_WAIT)
				continue;   /* woken through the pipe when a body is published */
			of[n] = s;
			pfd[n++] = (struct pollfd){ .fd = s->fd, .events = s->st == SLOT_READ ? POLLIN : POLLOUT };
		}
		if (poll(pfd, (nfds_t)n, (int)((next > now ? next - now : 0) / MS) + 1) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents)
			while (read(h->wake[0], drain, sizeof(drain)) > 0)
				;
		for (int i = 1; i < n; i++) {
			if (i == lidx || !pfd[i].revents || of[i]->fd != pfd[i].fd)
				continue;
			if (of[i]->st == SLOT_READ)
				on_readable(h, of[i]);
			else if (of[i]->st == SLOT_WRITE)
				flush_slot(of[i]);
		}
		if (lidx >= 0 && pfd[lidx].revents)
			accept_some(h);
		expire(h, dl_now_ns());
	}
	for (int i = 0; i < DL_HTTP_SLOTS; i++)
		close_slot(&h->slots[i]);
	return NULL;
}

int dl_http_start(struct dl_http *h)
{
	sigset_t all, old;
	int err;

	/* Signals are the collector's: its poll sees the EINTR and stops at once. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&h->thread, NULL, serve, h);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	h->started = err == 0;
	return -err;
}

bool dl_http_wants(struct dl_http *h)
{
	return atomic_load_explicit(&h->wanted, memory_order_relaxed);
}

void dl_http_publish(struct dl_http *h, const char *body, size_t len, bool last)
{
	char *copy = dl_xrealloc(NULL, len + 1);
	ssize_t k;

	memcpy(copy, body, len);
	copy[len] = '\0';
	pthread_mutex_lock(&h->lock);
	free(h->body);
	h->body = copy;
	h->body_len = len;
	h->gen++;
	h->last = h->last || last;
	atomic_store(&h->wanted, false);
	pthread_mutex_unlock(&h->lock);
	k = write(h->wake[1], "", 1);   /* a full pipe already wakes it */
	(void)k;
}

void dl_http_stop(struct dl_http *h, struct dl_http_stats *stats)
{
	ssize_t k;

	if (!h)
		return;
	if (h->started) {
		atomic_store(&h->stopping, true);
		k = write(h->wake[1], "", 1);
		(void)k;
		pthread_join(h->thread, NULL);
	}
	if (stats)
		*stats = h->stats;
	close(h->lfd);
	close(h->wake[0]);
	close(h->wake[1]);
	pthread_mutex_destroy(&h->lock);
	free(h->body);
	free(h);
}
