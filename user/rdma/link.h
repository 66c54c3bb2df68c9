/* SPDX-License-Identifier: MIT */
/*
 * The two-node connection every strixpeerctl server and client uses
 * (doctor serve / doctor peer HOST, bench --serve / bench HOST): listen,
 * accept, connect, and a typed exchange of fixed messages, every wait
 * bounded and named.
 *
 * The control channel is librdmacm alone, on one port per tool:
 *   - the connect request carries a hello in its private data (magic,
 *     protocol version, tool, role, a token); the server answers with its
 *     own hello in the accept's private data, or refuses in the reject's
 *     private data with the reason (other tool, other version, busy), so
 *     that a doctor client reaching a bench server says so at once;
 *   - after that, messages are SENDs on the connection's own queue pair
 *     (struct sp_link: a few receives always posted).
 * Why not a TCP socket beside it: on iWARP rdma_cm ports are TCP ports, so
 * a control socket needs a second port per tool (bench had port and port
 * + 1, and its 18515 collided with doctor's rdma_cm port); one rdma_cm
 * port works on InfiniBand, RoCE and iWARP alike, and the route (the
 * RDMA device) is the one the connection itself takes.
 * A tool that also SENDs data (bench's SEND figures) opens a second, data
 * connection on the same port (sp_link_data_*): its receive queue then
 * holds its own receives only, never a control message.
 *
 * Wire format: little-endian, fixed sizes (SP_LINK_HELLO_LEN,
 * SP_LINK_MSG_LEN), the version in every hello and message; link_msg.c
 * encodes and checks them (no RDMA needed: host-testable).
 *
 * Internal: part of libsprdma.a, like rc.h. Functions return 0 or a
 * negative errno and write a sentence naming the peer into @why.
 * Not thread-safe for one link.
 */
#ifndef SP_RDMA_LINK_H
#define SP_RDMA_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rc.h"

#define SP_LINK_VERSION		1
#define SP_LINK_MAGIC		0x4b4c5053u	/* "SPLK" little-endian */
#define SP_LINK_HELLO_LEN	24		/* fits a connect's 56 bytes */
#define SP_LINK_MSG_LEN		256
#define SP_LINK_TEXT_LEN	180
#define SP_LINK_NRECV		4		/* control receives kept posted */
#define SP_LINK_WAIT_MS		30000		/* default bound of every wait */
#define SP_LINK_ADDR_TRY_MS	1000		/* one try of address resolution */

/* Default ports: bench keeps perftest's; doctor and gpu proof have their own. */
#define SP_LINK_PORT_BENCH	"18515"
#define SP_LINK_PORT_DOCTOR	"18516"
#define SP_LINK_PORT_GPU	"18517"

enum sp_link_tool {
	SP_LINK_DOCTOR = 1,	/* strixpeerctl doctor serve / peer */
	SP_LINK_BENCH = 2,	/* strixpeerctl bench --serve / HOST */
	SP_LINK_TEST = 3,	/* the test programs */
	SP_LINK_GPU = 4,	/* strixpeerctl gpu proof --serve / HOST */
};

enum sp_link_role {
	SP_LINK_CTRL = 1,	/* client: the control connection */
	SP_LINK_DATA = 2,	/* client: a data connection of the same session */
	SP_LINK_ACCEPT = 3,	/* server: accepted */
	SP_LINK_REJECT = 4,	/* server: refused, reason in the hello's .reason */
};

enum sp_link_reason {
	SP_LINK_R_NONE = 0,
	SP_LINK_R_TOOL = 1,	/* the client is of another tool */
	SP_LINK_R_VERSION = 2,	/* another protocol version */
	SP_LINK_R_BUSY = 3,	/* serving another client */
	SP_LINK_R_ROLE = 4,	/* a data connection without its control one */
	SP_LINK_R_SETUP = 5,	/* the server could not set the connection up */
};

/* The hello, in a connect's, accept's or reject's private data. */
struct sp_link_hello {
	uint32_t magic;
	uint16_t version;
	uint8_t tool;		/* enum sp_link_tool of the sender */
	uint8_t role;		/* enum sp_link_role */
	uint32_t token;		/* a session's control and data connections */
	uint32_t reason;	/* SP_LINK_REJECT: enum sp_link_reason */
	uint32_t flags;		/* tool-defined */
};

/* Message types: both tools' requests and answers. */
enum sp_link_type {
	SP_MSG_OPEN = 1,	/* bench: start (kind: options); DONE has the device */
	SP_MSG_ALLOC,		/* bench: memory of kind/size; addr/rkey the client's */
	SP_MSG_FREE,
	SP_MSG_WRITE_LAT,	/* bench: size, iters */
	SP_MSG_SEND_LAT,
	SP_MSG_SEND_BW,
	SP_MSG_QUIT,
	SP_MSG_READY,		/* bench: the server is ready for the test */
	SP_MSG_DONE,		/* an answer: status, addr/rkey, text */
	SP_MSG_BUFFER,		/* doctor: a strixpeer buffer of size */
	SP_MSG_TARGET,		/* doctor: its addr/rkey/size, or status */
	SP_MSG_VERIFY,		/* doctor: size bytes of pattern seed were written */
	SP_MSG_VERIFIED,	/* doctor: value = first wrong byte, or -1 */
	SP_MSG_MAX_
};

struct sp_link_msg {
	uint32_t type;		/* enum sp_link_type */
	int32_t status;		/* answers: 0 or -errno */
	uint32_t kind;
	uint32_t rkey;
	uint32_t seed;
	uint64_t size;
	uint64_t addr;
	uint64_t iters;
	int64_t value;
	char text[SP_LINK_TEXT_LEN];	/* NUL-terminated */
};

/* What a connection's queue pair needs beyond the control messages. */
struct sp_link_qp {
	struct ibv_qp_cap cap;	/* the link adds its own receives and a send */
	int cqe;		/* 0: enough for cap */
	unsigned int flags;	/* rc.h's SP_RC_POLLED (data connections only) */
	uint8_t rd_atomic;	/* outstanding RDMA READs, both directions (>= 1) */
};

/* One connection: the control one (struct sp_link) or a data one. */
struct sp_link_ep {
	struct rdma_cm_id *id;
	struct sp_rc rc;	/* rc.h's PD, channel, CQ and QP on @id */
};

struct sp_link_srv {
	enum sp_link_tool tool;
	char where[96];			/* "ADDR port PORT", for messages */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen;
};

struct sp_link {
	enum sp_link_tool tool;
	char peer[96];			/* "HOST port PORT", for messages */
	int timeout_ms;			/* every wait (SP_LINK_WAIT_MS) */
	uint32_t token;
	uint32_t peer_flags;		/* the other side's hello .flags */
	struct rdma_event_channel *ch;	/* own (client) or the server's */
	bool own_ch;
	struct sp_link_srv *srv;	/* server side */
	struct sp_link_ep ctl;
	struct rdma_cm_id *held;	/* a data request seen early */
	struct ibv_mr *mr;
	uint8_t wire[SP_LINK_NRECV + 1][SP_LINK_MSG_LEN];	/* recvs, then the send */
	unsigned int next;		/* the receive slot completing next */
	unsigned int ready;		/* completed receives not yet taken */
	bool gone;			/* the other side disconnected */
};

/* link_msg.c: the wire format */
void sp_link_hello_put(uint8_t *p, const struct sp_link_hello *h);
/* -EPROTO and @why when @p is not a hello (@len too short, no magic). */
int sp_link_hello_get(const void *p, size_t len, struct sp_link_hello *h, char *why,
		      size_t wlen);
void sp_link_msg_put(uint8_t *p, enum sp_link_tool tool, const struct sp_link_msg *m);
/* -EPROTO and @why for another magic, version, tool or an unknown type. */
int sp_link_msg_get(const uint8_t *p, enum sp_link_tool tool, struct sp_link_msg *m,
		    char *why, size_t wlen);
const char *sp_link_tool_name(unsigned int tool);	/* "strixpeerctl doctor" ... */
const char *sp_link_tool_server(unsigned int tool);	/* "doctor serve" ... */
const char *sp_link_type_name(unsigned int type);
/* Why a server refused us (@h from its reject), as a sentence. */
void sp_link_reject_str(const struct sp_link_hello *h, enum sp_link_tool tool,
			char *why, size_t len);
/* Port string check: 1..65535. */
int sp_link_port_ok(const char *port, char *why, size_t len);

/*
 * Server: listen on @addr (NULL: every address) @port for clients of
 * @tool. -EADDRINUSE etc. with the address named.
 */
int sp_link_listen(struct sp_link_srv *s, enum sp_link_tool tool, const char *addr,
		   const char *port, char *why, size_t len);
void sp_link_srv_close(struct sp_link_srv *s);
/*
 * The next client, within @wait_ms (-ETIMEDOUT, nothing written to @why:
 * the caller loops). A client of another tool or version, or without a
 * hello, is refused with the reason and -EPROTO returned with @why naming
 * it; -ECONNABORTED: it went away during setup. @qp may be NULL.
 */
int sp_link_accept(struct sp_link_srv *s, struct sp_link *l, const struct sp_link_qp *qp,
		   int wait_ms, char *why, size_t len);
/*
 * Client: connect to @host @port, a server of @tool, from @src (NULL: as
 * the route says). Unreachable: "cannot reach the <tool> server at ...";
 * another tool's server or version: says which.
 */
int sp_link_connect(struct sp_link *l, enum sp_link_tool tool, const char *host,
		    const char *port, const char *src, const struct sp_link_qp *qp,
		    uint32_t flags, char *why, size_t len);
/* Disconnects and frees everything (data connections are the caller's). */
void sp_link_close(struct sp_link *l);

/* One message each way; waits bounded by l->timeout_ms. */
int sp_link_send(struct sp_link *l, const struct sp_link_msg *m, char *why, size_t len);
/* The next message, which must be of type @want (0: any). */
int sp_link_recv(struct sp_link *l, struct sp_link_msg *m, unsigned int want, char *why,
		 size_t len);
/* Send @m, receive the answer (of @want) into @m; its status < 0 is an error. */
int sp_link_call(struct sp_link *l, struct sp_link_msg *m, unsigned int want, char *why,
		 size_t len);

/* A data connection of @l's session: the client opens it, the server takes it. */
int sp_link_data_connect(struct sp_link *l, const char *host, const char *port,
			 const char *src, const struct sp_link_qp *qp, struct sp_link_ep *d,
			 char *why, size_t len);
int sp_link_data_accept(struct sp_link *l, const struct sp_link_qp *qp, struct sp_link_ep *d,
			char *why, size_t len);
void sp_link_ep_close(struct sp_link_ep *d);

#endif
