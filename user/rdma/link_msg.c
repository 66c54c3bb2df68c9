// SPDX-License-Identifier: MIT
/*
 * link.h's wire format: the hello and the messages, little-endian at
 * fixed offsets whatever the host, checked on the way in. No RDMA here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "link.h"

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/*
 * Hello, 24 bytes: magic 0, version 4, tool 6, role 7, token 8, reason 12,
 * flags 16, zero 20.
 */
void sp_link_hello_put(uint8_t *p, const struct sp_link_hello *h)
{
	memset(p, 0, SP_LINK_HELLO_LEN);
	put32(p, SP_LINK_MAGIC);
	put16(p + 4, h->version);
	p[6] = h->tool;
	p[7] = h->role;
	put32(p + 8, h->token);
	put32(p + 12, h->reason);
	put32(p + 16, h->flags);
}

int sp_link_hello_get(const void *v, size_t len, struct sp_link_hello *h, char *why,
		      size_t wlen)
{
	const uint8_t *p = v;

	memset(h, 0, sizeof(*h));
	if (!p || len < SP_LINK_HELLO_LEN || get32(p) != SP_LINK_MAGIC) {
		snprintf(why, wlen, "no strixpeer hello (%zu bytes of private data%s)", p ? len : 0,
			 p && len >= 4 ? ", another magic" : "");
		return -EPROTO;
	}
	h->magic = SP_LINK_MAGIC;
	h->version = get16(p + 4);
	h->tool = p[6];
	h->role = p[7];
	h->token = get32(p + 8);
	h->reason = get32(p + 12);
	h->flags = get32(p + 16);
	return 0;
}

/*
 * Message, SP_LINK_MSG_LEN bytes: magic 0, version 4, tool 6, zero 7,
 * type 8, status 12, kind 16, rkey 20, seed 24, zero 28, size 32, addr 40,
 * iters 48, value 56, text 64 (SP_LINK_TEXT_LEN, NUL-padded), zero after.
 */
void sp_link_msg_put(uint8_t *p, enum sp_link_tool tool, const struct sp_link_msg *m)
{
	memset(p, 0, SP_LINK_MSG_LEN);
	put32(p, SP_LINK_MAGIC);
	put16(p + 4, SP_LINK_VERSION);
	p[6] = (uint8_t)tool;
	put32(p + 8, m->type);
	put32(p + 12, (uint32_t)m->status);
	put32(p + 16, m->kind);
	put32(p + 20, m->rkey);
	put32(p + 24, m->seed);
	put64(p + 32, m->size);
	put64(p + 40, m->addr);
	put64(p + 48, m->iters);
	put64(p + 56, (uint64_t)m->value);
	memcpy(p + 64, m->text, strnlen(m->text, SP_LINK_TEXT_LEN - 1));
}

int sp_link_msg_get(const uint8_t *p, enum sp_link_tool tool, struct sp_link_msg *m,
		    char *why, size_t wlen)
{
	memset(m, 0, sizeof(*m));
	if (get32(p) != SP_LINK_MAGIC) {
		snprintf(why, wlen, "a message without the strixpeer magic (0x%08x)", get32(p));
		return -EPROTO;
	}
	if (get16(p + 4) != SP_LINK_VERSION) {
		snprintf(why, wlen, "a message of protocol version %u (this is %u): use the same strixpeerctl on both nodes",
			 get16(p + 4), SP_LINK_VERSION);
		return -EPROTO;
	}
	if (p[6] != tool) {
		snprintf(why, wlen, "a message of %s, expected %s", sp_link_tool_name(p[6]),
			 sp_link_tool_name(tool));
		return -EPROTO;
	}
	m->type = get32(p + 8);
	if (!m->type || m->type >= SP_MSG_MAX_) {
		snprintf(why, wlen, "a message of unknown type %u", m->type);
		return -EPROTO;
	}
	m->status = (int32_t)get32(p + 12);
	m->kind = get32(p + 16);
	m->rkey = get32(p + 20);
	m->seed = get32(p + 24);
	m->size = get64(p + 32);
	m->addr = get64(p + 40);
	m->iters = get64(p + 48);
	m->value = (int64_t)get64(p + 56);
	memcpy(m->text, p + 64, SP_LINK_TEXT_LEN - 1);
	m->text[SP_LINK_TEXT_LEN - 1] = '\0';
	return 0;
}

const char *sp_link_tool_name(unsigned int tool)
{
	switch (tool) {
	case SP_LINK_DOCTOR:
		return "strixpeerctl doctor";
	case SP_LINK_BENCH:
		return "strixpeerctl bench";
	case SP_LINK_GPU:
		return "strixpeerctl gpu proof";
	case SP_LINK_TEST:
		return "a strixpeer test";
	}
	return "an unknown tool";
}

const char *sp_link_tool_server(unsigned int tool)
{
	switch (tool) {
	case SP_LINK_DOCTOR:
		return "'strixpeerctl doctor serve'";
	case SP_LINK_BENCH:
		return "'strixpeerctl bench --serve'";
	case SP_LINK_GPU:
		return "'strixpeerctl gpu proof --serve'";
	case SP_LINK_TEST:
		return "a strixpeer test server";
	}
	return "an unknown server";
}

const char *sp_link_type_name(unsigned int type)
{
	static const char *const names[SP_MSG_MAX_] = {
		[SP_MSG_OPEN] = "OPEN", [SP_MSG_ALLOC] = "ALLOC", [SP_MSG_FREE] = "FREE",
		[SP_MSG_WRITE_LAT] = "WRITE_LAT", [SP_MSG_SEND_LAT] = "SEND_LAT",
		[SP_MSG_SEND_BW] = "SEND_BW", [SP_MSG_QUIT] = "QUIT", [SP_MSG_READY] = "READY",
		[SP_MSG_DONE] = "DONE", [SP_MSG_BUFFER] = "BUFFER", [SP_MSG_TARGET] = "TARGET",
		[SP_MSG_VERIFY] = "VERIFY", [SP_MSG_VERIFIED] = "VERIFIED",
	};

	return type && type < SP_MSG_MAX_ ? names[type] : "a message";
}

void sp_link_reject_str(const struct sp_link_hello *h, enum sp_link_tool tool, char *why,
			size_t len)
{
	switch (h->reason) {
	case SP_LINK_R_TOOL:
		snprintf(why, len, "it is %s, not %s (%s defaults to port %s, %s to %s)",
			 sp_link_tool_server(h->tool), sp_link_tool_server(tool),
			 sp_link_tool_server(SP_LINK_DOCTOR), SP_LINK_PORT_DOCTOR,
			 sp_link_tool_server(SP_LINK_BENCH), SP_LINK_PORT_BENCH);
		break;
	case SP_LINK_R_VERSION:
		snprintf(why, len, "%s speaks protocol version %u, this strixpeerctl %u: use the same strixpeerctl on both nodes",
			 sp_link_tool_server(h->tool), h->version, SP_LINK_VERSION);
		break;
	case SP_LINK_R_BUSY:
		snprintf(why, len, "%s is serving another client", sp_link_tool_server(h->tool));
		break;
	case SP_LINK_R_ROLE:
		snprintf(why, len, "%s refused a data connection without its control one",
			 sp_link_tool_server(h->tool));
		break;
	case SP_LINK_R_SETUP:
		snprintf(why, len, "%s could not set the connection up (its output says why)",
			 sp_link_tool_server(h->tool));
		break;
	default:
		snprintf(why, len, "%s refused it (reason %u)", sp_link_tool_server(h->tool),
			 h->reason);
	}
}

int sp_link_port_ok(const char *port, char *why, size_t len)
{
	char *end;
	unsigned long p;

	errno = 0;
	p = port ? strtoul(port, &end, 10) : 0;
	if (!port || errno || end == port || *end || !p || p > 65535) {
		snprintf(why, len, "bad port \"%s\": 1..65535", port ? port : "");
		return -EINVAL;
	}
	return 0;
}
