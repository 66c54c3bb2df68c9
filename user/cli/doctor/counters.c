// SPDX-License-Identifier: MIT
/*
 * strixpeerctl doctor: the counters check, each RDMA port's error counters
 * (IBA PMA) sampled twice, ctx->interval_ms apart: growth means trouble.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doctor.h"

#define IB "/sys/class/infiniband"

/* Counters whose growth means trouble, and their widths (IBA PMA). */
static const struct ctr_rule {
	const char *name;
	enum dr_status on_growth;
	unsigned int bits;	/* saturation value 2^bits-1; 0: 64-bit, never */
} ctr_rules[] = {
	{ "link_downed", DR_FAIL, 8 },
	{ "symbol_error", DR_WARN, 16 },
	{ "link_error_recovery", DR_WARN, 8 },
	{ "port_rcv_errors", DR_WARN, 16 },
	{ "local_link_integrity_errors", DR_WARN, 4 },
	{ "excessive_buffer_overrun_errors", DR_WARN, 4 },
	{ "port_rcv_remote_physical_errors", DR_WARN, 16 },
	{ "port_xmit_discards", DR_INFO, 16 },
	{ "VL15_dropped", DR_INFO, 16 },
	/* hw_counters (mlx5, mlx4, rxe), 64-bit */
	{ "packet_seq_err", DR_WARN, 0 },
	{ "out_of_sequence", DR_WARN, 0 },
	{ "out_of_seq_request", DR_WARN, 0 },
	{ "rcvd_seq_err", DR_WARN, 0 },
	{ "implied_nak_seq_err", DR_WARN, 0 },
	{ "local_ack_timeout_err", DR_WARN, 0 },
	{ "retry_exceeded_err", DR_WARN, 0 },
	{ "rq_num_oos", DR_WARN, 0 },
};

#define MAX_CTRS 160

struct ctr_sample {
	char name[MAX_CTRS][64];
	const struct ctr_rule *rule[MAX_CTRS];
	uint64_t v1[MAX_CTRS], v2[MAX_CTRS];
	bool ok1[MAX_CTRS], ok2[MAX_CTRS];
	bool in_hw[MAX_CTRS];
	int n;
	int dirs;	/* counters/ and hw_counters/ found */
};

static const struct ctr_rule *rule_for(const char *name)
{
	for (size_t i = 0; i < sizeof(ctr_rules) / sizeof(ctr_rules[0]); i++)
		if (!strcmp(ctr_rules[i].name, name))
			return &ctr_rules[i];
	return NULL;
}

static void sample_list(struct dr_ctx *c, const struct dr_port *p, struct ctr_sample *s)
{
	static const char *const dirs[] = { "counters", "hw_counters" };

	for (int d = 0; d < 2; d++) {
		char **names = NULL;
		int n = dr_list(c, &names, IB "/%s/ports/%u/%s", p->dev, p->port, dirs[d]);

		if (n >= 0)
			s->dirs++;
		for (int i = 0; i < n && s->n < MAX_CTRS; i++) {
			if (!strcmp(names[i], "lifespan"))
				continue;
			snprintf(s->name[s->n], sizeof(s->name[0]), "%s", names[i]);
			s->rule[s->n] = rule_for(names[i]);
			s->in_hw[s->n] = d == 1;
			s->n++;
		}
		dr_list_free(names, n);
	}
}

static void sample_read(struct dr_ctx *c, const struct dr_port *p, struct ctr_sample *s,
			bool second)
{
	for (int i = 0; i < s->n; i++) {
		uint64_t *v = second ? &s->v2[i] : &s->v1[i];
		bool *ok = second ? &s->ok2[i] : &s->ok1[i];

		/* "N/A (no PMA)" and read errors: the counter is left out */
		*ok = dr_read_u64(c, v, IB "/%s/ports/%u/%s/%s", p->dev, p->port,
				  s->in_hw[i] ? "hw_counters" : "counters", s->name[i]) == 0;
	}
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

void dr_check_counters(struct dr_ctx *c)
{
	struct ctr_sample *s;

	if (!c->nports) {
		dr_add(c, DR_C_COUNTERS, "errors", "", DR_SKIP, "no RDMA ports");
		return;
	}
	s = dr_alloc(c->nports * sizeof(*s));
	for (size_t i = 0; i < c->nports; i++) {
		sample_list(c, &c->ports[i], &s[i]);
		sample_read(c, &c->ports[i], &s[i], false);
	}
	/* a tree under --sysroot does not count by itself: no point waiting */
	if (c->between_samples)
		c->between_samples(c->hook_arg);
	else if (c->live)
		sleep_ms(c->interval_ms);
	for (size_t i = 0; i < c->nports; i++)
		sample_read(c, &c->ports[i], &s[i], true);

	for (size_t i = 0; i < c->nports; i++) {
		struct ctr_sample *x = &s[i];
		char name[96], grew[512] = "", sat[256] = "";
		struct dr_result *r;
		enum dr_status st = DR_PASS;
		int read = 0;

		dr_port_name(&c->ports[i], name, sizeof(name));
		if (!x->dirs) {
			dr_add(c, DR_C_COUNTERS, "errors", name, DR_SKIP,
			       "no counters/ (driver without a PMA) and no hw_counters/");
			continue;
		}
		r = dr_add(c, DR_C_COUNTERS, "errors", name, DR_PASS, "%s", "");
		for (int k = 0; k < x->n; k++) {
			const struct ctr_rule *rule = x->rule[k];

			if (!x->ok1[k] || !x->ok2[k])
				continue;
			read++;
			if (!rule)
				continue;
			dr_int(r, x->name[k], (int64_t)x->v2[k]);
			if (x->v2[k] > x->v1[k] && rule->on_growth > DR_PASS) {
				size_t n = strlen(grew);

				snprintf(grew + n, sizeof(grew) - n, "%s%s +%llu", n ? ", " : "",
					 x->name[k], (unsigned long long)(x->v2[k] - x->v1[k]));
				if (rule->on_growth > st)
					st = rule->on_growth;
			}
			if (rule->bits && !x->in_hw[k] && x->v2[k] >= (1ULL << rule->bits) - 1) {
				size_t n = strlen(sat);

				snprintf(sat + n, sizeof(sat) - n, "%s%s", n ? ", " : "", x->name[k]);
				st = DR_FAIL;
			}
		}
		dr_int(r, "interval_ms", c->live ? c->interval_ms : 0);
				if (!read) {
			r->status = DR_SKIP;
			dr_set_summary(r, "no counter readable");
			continue;
		}
		r->status = st;
		dr_set_summary(r, "%d counters read twice %u ms apart%s%s%s%s%s", read,
					 c->live ? c->interval_ms : 0, grew[0] ? "; grew: " : "", grew,
					 sat[0] ? "; saturated (stuck at their maximum): " : "", sat,
					 grew[0] || sat[0] ? "" : "; no error counter grew");
		if (strstr(grew, "link_downed"))
			dr_advise(r, "the link went down while sampling: reseat or replace the cable/transceiver, check the peer and the switch port");
		else if (grew[0] && st >= DR_WARN)
			dr_advise(r, "errors are growing now: a marginal cable, transceiver or switch port (symbol/link errors), or packet loss (sequence errors: RoCE needs a lossless or lightly loaded network; check PFC/ECN and MTU)");
		if (sat[0])
			dr_advise(r, "saturated PMA counters no longer count: reset them (perfquery -R) and watch them again");
	}
	free(s);
}
