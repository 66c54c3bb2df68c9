/* SPDX-License-Identifier: MIT */
/*
 * What the examples share: dying with a message, a TCP connection as the
 * out-of-band channel (what a launcher, MPI or a key-value store is in a
 * real application), and a byte pattern to fill and verify.
 */
#ifndef SP_EXAMPLE_H
#define SP_EXAMPLE_H

#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

/* Sends (@out) or receives exactly @n bytes. */
static inline void io(int fd, void *p, size_t n, int out)
{
	for (ssize_t r; n; n -= (size_t)r, p = (char *)p + r)
		if ((r = out ? write(fd, p, n) : read(fd, p, n)) <= 0)
			DIE("out-of-band channel closed");
}

/* Connects to @host:@port, or with @host NULL accepts one connection on
 * @port (IPv4). */
static inline int tcp(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_family = host ? AF_UNSPEC : AF_INET,
				  .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai;
	int one = 1, fd, c = -1;

	if (getaddrinfo(host, port, &hints, &ai) || (fd = socket(ai->ai_family, SOCK_STREAM, 0)) < 0)
		DIE("cannot resolve %s:%s", host ? host : "*", port);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (host ? connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 : bind(fd, ai->ai_addr,
	    ai->ai_addrlen) || listen(fd, 1) || (c = accept(fd, NULL, NULL)) < 0)
		DIE("connect/listen %s:%s failed", host ? host : "*", port);
	freeaddrinfo(ai);
	return host ? fd : (close(fd), c);
}

/* Fills @len bytes (a multiple of 8) with a pattern, or (@verify) returns
 * the offset of the first byte that differs from it, -1 when none does. */
static inline int64_t pattern(void *p, uint64_t len, uint64_t seed, int verify)
{
	uint64_t *w = p;

	for (uint64_t i = 0; i < len / 8; i++) {
		uint64_t v = (i + 1) * 0x9e3779b97f4a7c15ULL ^ seed;

		if (!verify)
			w[i] = v;
		else if (w[i] != v)
			return (int64_t)i * 8;
	}
	return -1;
}

#endif /* SP_EXAMPLE_H */
