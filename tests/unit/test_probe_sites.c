// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * capture/probe_sites: the cookie table by file offset that kernels without
 * attach cookies read (bpf/common.bpf.h, dl_site_cookie), in a real BPF hash
 * map of probe_cookies' shape: the key in the kernel's own device encoding,
 * entries shared by every holder of a file and removed by its last, nothing
 * left by a failure, and two threads taking and letting go of holds on one
 * file (as the collector and the detacher thread do) never finding an entry
 * missing while they hold it. Needs the
 * right to create BPF maps (root); without it, says so and checks nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "check.h"
#include "capture/probe_sites.h"
#include "dlbpf/events.h"

static int map_new(unsigned entries)
{
	return bpf_map_create(BPF_MAP_TYPE_HASH, "test_sites", sizeof(struct dl_probe_site), sizeof(uint64_t),
			      entries, NULL);
}

static unsigned count(int fd)
{
	struct dl_probe_site k, next;
	unsigned n = 0;

	for (int r = bpf_map_get_next_key(fd, NULL, &k); !r; r = bpf_map_get_next_key(fd, &k, &next), k = next)
		n++;
	return n;
}

/* The cookie under (major, minor, ino, off) as the BPF side builds the key; 0 when absent. */
static uint64_t cookie_at(int fd, unsigned major, unsigned minor, uint64_t ino, uint64_t off)
{
	struct dl_probe_site k = { .ino = ino, .dev = major << 20 | minor, .offset = off };
	uint64_t v = 0;

	return bpf_map_lookup_elem(fd, &k, &v) ? 0 : v;
}

#define DEV(major, minor) ((uint64_t)(major) << 32 | (minor))

static void test_shared_and_released(int fd)
{
	const unsigned long off_a[] = { 0x1040, 0x2080 }, off_b[] = { 0x2080, 0x30c0 }, off_c[] = { 0x1040 };
	const uint64_t ck_a[] = { 11, 22 }, ck_b[] = { 22, 33 }, ck_c[] = { 44 };
	struct dl_probe_sites *a = NULL, *b = NULL, *c = NULL;

	CHECK(dl_probe_sites_get(fd, DEV(259, 3), 100, off_a, ck_a, 2, &a) == 0 && a, "first holder");
	/* /proc/PID/maps' 259:03 is the kernel's (259 << 20) | 3, which s_dev holds. */
	CHECK_EQ_U64(cookie_at(fd, 259, 3, 100, 0x1040), 11);
	CHECK_EQ_U64(cookie_at(fd, 259, 3, 100, 0x2080), 22);
	CHECK(dl_probe_sites_get(fd, DEV(259, 3), 100, off_b, ck_b, 2, &b) == 0 && b, "second holder, same file");
	/* Another file at the same offset: its own entry. */
	CHECK(dl_probe_sites_get(fd, DEV(8, 1), 100, off_c, ck_c, 1, &c) == 0 && c, "another device");
	CHECK_EQ_U64(count(fd), 4);
	CHECK_EQ_U64(cookie_at(fd, 8, 1, 100, 0x1040), 44);
	dl_probe_sites_put(a);
	/* The second holder still needs them, the first holder's own included. */
	CHECK_EQ_U64(count(fd), 4);
	CHECK_EQ_U64(cookie_at(fd, 259, 3, 100, 0x1040), 11);
	dl_probe_sites_put(b);
	CHECK_EQ_U64(count(fd), 1);
	CHECK_EQ_U64(cookie_at(fd, 8, 1, 100, 0x1040), 44);
	dl_probe_sites_put(c);
	CHECK_EQ_U64(count(fd), 0);
	dl_probe_sites_put(NULL);
}

static void test_full_map(void)
{
	const unsigned long off[] = { 1, 2, 3, 4, 5 };
	const uint64_t ck[] = { 1, 2, 3, 4, 5 };
	struct dl_probe_sites *a = NULL, *b = NULL;
	int fd = map_new(3), err;

	CHECK(fd >= 0, "map: %s", strerror(errno));
	CHECK(dl_probe_sites_get(fd, DEV(8, 1), 7, off, ck, 2, &a) == 0, "two fit");
	/* Five do not: the error, and the first holder's entries stay as they were. */
	err = dl_probe_sites_get(fd, DEV(8, 1), 7, off, ck, 5, &b);
	CHECK(err == -E2BIG && !b, "a full map: %d", err);
	CHECK_EQ_U64(count(fd), 3);
	dl_probe_sites_put(a);
	/* The third entry, written by the failed set, went with the file's last holder. */
	CHECK_EQ_U64(count(fd), 0);
	/* A new file that does not fit leaves nothing behind. */
	err = dl_probe_sites_get(fd, DEV(8, 2), 9, off, ck, 5, &b);
	CHECK(err == -E2BIG && count(fd) == 0, "a failed first holder left %u entries (%d)", count(fd), err);
	close(fd);
}

struct churn {
	int fd;
	int rounds;
	int failed;
};

static const unsigned long churn_off[] = { 0x10, 0x20, 0x30, 0x40 };
static const uint64_t churn_ck[] = { 1, 2, 3, 4 };

/* One process's set of probes coming and going: after each get, every entry must be in place. */
static void *churn_main(void *arg)
{
	struct churn *c = arg;

	for (int i = 0; i < c->rounds; i++) {
		struct dl_probe_sites *s = NULL;

		if (dl_probe_sites_get(c->fd, DEV(8, 1), 42, churn_off, churn_ck, 4, &s)) {
			c->failed++;
			continue;
		}
		for (int k = 0; k < 4; k++)
			if (cookie_at(c->fd, 8, 1, 42, churn_off[k]) != churn_ck[k])
				c->failed++;
		dl_probe_sites_put(s);
	}
	return NULL;
}

static void test_concurrent_holders(int fd)
{
	struct churn c[2] = { { fd, 2000, 0 }, { fd, 2000, 0 } };
	pthread_t th[2];

	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&th[i], NULL, churn_main, &c[i]) == 0, "thread");
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CHECK(c[0].failed == 0 && c[1].failed == 0, "entries missing while held: %d, %d", c[0].failed, c[1].failed);
	CHECK_EQ_U64(count(fd), 0);
}

int main(void)
{
	int fd = map_new(64);

	if (fd < 0) {
		printf("test_probe_sites: cannot create a BPF map (%s): needs root; nothing checked\n", strerror(errno));
		return 0;
	}
	test_shared_and_released(fd);
	test_full_map();
	test_concurrent_holders(fd);
	close(fd);
	return check_report("test_probe_sites");
}
