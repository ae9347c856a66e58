// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Table 14's receive loop: two connected UDP sockets on loopback in one
 * thread, a datagram sent each way and received each round, so every round is
 * two sends and two receives through the kernel's socket path and nothing
 * blocks. Prints "ready", waits for a line, runs ROUNDS rounds, prints the
 * thread's CPU ns per round, waits for a line and exits.
 *
 *   netloop ROUNDS [BYTES]
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int bound_udp(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)addr, sizeof(*addr)) || getsockname(fd, (struct sockaddr *)addr, &len)) {
		perror("netloop: socket");
		exit(1);
	}
	return fd;
}

static long long cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a_addr, b_addr;
	long rounds = argc > 1 ? atol(argv[1]) : 0;
	size_t bytes = argc > 2 ? (size_t)atol(argv[2]) : 64;
	char buf[65536], line[64];
	int a, b;
	long long t0;

	if (rounds <= 0 || bytes == 0 || bytes > sizeof(buf)) {
		fprintf(stderr, "usage: netloop ROUNDS [BYTES (1-65536)]\n");
		return 2;
	}
	a = bound_udp(&a_addr);
	b = bound_udp(&b_addr);
	if (connect(a, (struct sockaddr *)&b_addr, sizeof(b_addr)) || connect(b, (struct sockaddr *)&a_addr, sizeof(a_addr))) {
		perror("netloop: connect");
		return 1;
	}
	memset(buf, 'x', bytes);
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	t0 = cpu_ns();
	for (long i = 0; i < rounds; i++) {
		if (send(a, buf, bytes, 0) != (ssize_t)bytes || recv(b, buf, sizeof(buf), 0) != (ssize_t)bytes ||
		    send(b, buf, bytes, 0) != (ssize_t)bytes || recv(a, buf, sizeof(buf), 0) != (ssize_t)bytes) {
			perror("netloop: round");
			return 1;
		}
	}
	printf("%.1f\n", (double)(cpu_ns() - t0) / (double)rounds);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	return 0;
}
