#include "result.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t outbuf_take(struct outbuf *b, size_t n)
{
	uint64_t room = b->limit > b->passed ? b->limit - b->passed : 0;
	if (n > room) {
		n = (size_t)room;
		b->truncated = true;
	}
	b->passed += n;
	return n;
}

bool outbuf_append(struct outbuf *b, const uint8_t *p, size_t n)
{
	size_t keep = outbuf_take(b, n);
	if (b->len + keep > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + keep)
			cap *= 2;
		uint8_t *d = realloc(b->data, cap);
		if (!d) {
			b->truncated = true;
			return false;
		}
		b->data = d;
		b->cap = cap;
	}
	if (keep)
		memcpy(b->data + b->len, p, keep);
	b->len += keep;
	return keep == n;
}

void result_message(struct run_result *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->message, sizeof(r->message), fmt, ap);
	va_end(ap);
}

void result_add_message(struct run_result *r, const char *fmt, ...)
{
	size_t used = strlen(r->message);
	if (used && used + 2 < sizeof(r->message)) {
		memcpy(r->message + used, "; ", 3);
		used += 2;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->message + used, sizeof(r->message) - used, fmt, ap);
	va_end(ap);
}

void result_free(struct run_result *r)
{
	for (unsigned i = 0; i < PROTO_MAX_STAGES; i++) {
		free(r->stage[i].out.data);
		free(r->stage[i].err.data);
		r->stage[i].out = r->stage[i].err = (struct outbuf){ 0 };
	}
	artifacts_result_free(&r->artifacts);
	free(r->network.entry);
	r->network.entry = NULL;
	r->network.n = 0;
}

int result_exit_status(const struct run_result *r)
{
	const struct run_stage *s = result_final(r);
	enum termination t = r->term == TERM_COMPILE_ERROR ? s->term : r->term;
	switch (t) {
	case TERM_EXITED: return s->exit_code;
	case TERM_SIGNALED: return 128 + s->signal;
	case TERM_TIMEOUT: return 124;
	case TERM_DENIED: return 126;
	case TERM_NOT_FOUND: return 127;
	default: return 125;
	}
}

/* "outcome": the run's, decided here, for every reader to present. */
static void print_run_outcome(FILE *f, const struct run_result *r)
{
	struct run_outcome o;
	result_outcome(r, &o);
	fprintf(f, ",\"outcome\":{\"state\":\"%s\",\"limits_hit\":[", result_outcome_name(o.state));
	for (unsigned b = 0, n = 0; b < OUTCOME_LIMITS; b++)
		if (o.limits & (1u << b))
			fprintf(f, "%s\"%s\"", n++ ? "," : "", result_limit_name(1u << b));
	fputs("]}", f);
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if invalid. */
static size_t utf8_len(const uint8_t *p, size_t n)
{
	if (p[0] < 0x80)
		return 1;
	size_t len = (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3 : (p[0] & 0xf8) == 0xf0 ? 4 : 0;
	if (!len || len > n)
		return 0;
	uint32_t cp = p[0] & (0x7f >> len);
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	/* No overlong forms, surrogates or values past U+10FFFF. */
	static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };
	if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static void print_bytes(FILE *f, const uint8_t *p, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n;) {
		uint8_t c = p[i];
		size_t k = utf8_len(p + i, n - i);
		if (!k) {
			fputs("\\ufffd", f);
			i++;
			continue;
		}
		if (k > 1) {
			fwrite(p + i, 1, k, f);
		} else if (c == '"' || c == '\\') {
			fputc('\\', f);
			fputc(c, f);
		} else if (c == '\n') {
			fputs("\\n", f);
		} else if (c == '\t') {
			fputs("\\t", f);
		} else if (c == '\r') {
			fputs("\\r", f);
		} else if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
		} else {
			fputc(c, f);
		}
		i += k;
	}
	fputc('"', f);
}

void result_json_cstr(FILE *f, const char *s)
{
	print_bytes(f, (const uint8_t *)s, strlen(s));
}

/* A stage's outcome fields, shared by the top level and the stage
 * objects: termination (given), exit_code, signal, timed_out, stdout,
 * stderr and their truncation flags. */
static void print_outcome(FILE *f, enum termination term, const struct run_stage *s)
{
	result_json_cstr(f, result_termination_name(term));
	if (s->term == TERM_EXITED)
		fprintf(f, ",\"exit_code\":%d", s->exit_code);
	else
		fputs(",\"exit_code\":null", f);
	if (s->term == TERM_SIGNALED && sigabbrev_np(s->signal))
		fprintf(f, ",\"signal\":\"SIG%s\"", sigabbrev_np(s->signal));
	else if (s->term == TERM_SIGNALED)
		fprintf(f, ",\"signal\":\"%d\"", s->signal);
	else
		fputs(",\"signal\":null", f);
	fprintf(f, ",\"timed_out\":%s,\"stdout\":", s->term == TERM_TIMEOUT ? "true" : "false");
	print_bytes(f, s->out.data ? s->out.data : (const uint8_t *)"", s->out.len);
	fputs(",\"stderr\":", f);
	print_bytes(f, s->err.data ? s->err.data : (const uint8_t *)"", s->err.len);
	/* dropped by the agent (its EXIT flags) or by the host's own cap */
	fprintf(f, ",\"stdout_truncated\":%s,\"stderr_truncated\":%s",
		s->out_truncated || s->out.truncated ? "true" : "false",
		s->err_truncated || s->err.truncated ? "true" : "false");
}

static void print_usage(FILE *f, const struct run_stage *s)
{
	fprintf(f, ",\"usage\":{\"cpu_ms\":%llu,\"max_rss_kib\":%llu}", (unsigned long long)s->cpu_ms,
		(unsigned long long)s->max_rss_kib);
}

/* "compile" or "run": one stage's object, or null. */
static void print_stage(FILE *f, const char *key, const struct run_stage *s)
{
	fprintf(f, ",\"%s\":", key);
	if (!s || !s->started) {
		fputs("null", f);
		return;
	}
	fputs("{\"termination\":", f);
	print_outcome(f, s->term, s);
	fprintf(f, ",\"oom_killed\":%s,\"cpu_time_exceeded\":%s,\"duration_ms\":%lld",
		s->oom_killed ? "true" : "false", s->cpu_exceeded ? "true" : "false", (long long)s->wall_ms);
	print_usage(f, s);
	fprintf(f, ",\"limits\":{\"timeout_s\":%g,\"memory_mib\":%llu,\"cpu_time_ms\":%llu}}",
		s->limits.timeout_s, (unsigned long long)s->limits.memory_mib,
		(unsigned long long)s->limits.cpu_time_ms);
}

/* A text field, or null when empty. */
static void json_cstr_or_null(FILE *f, const char *s)
{
	if (*s)
		result_json_cstr(f, s);
	else
		fputs("null", f);
}

/* "network": the proxy's decisions, only for a run that allowed any. */
static void print_network(FILE *f, const struct run_result *r)
{
	if (!r->network.on)
		return;
	fputs(",\"network\":[", f);
	for (unsigned i = 0; i < r->network.n; i++) {
		const struct proxy_audit *a = &r->network.entry[i];
		char addr[64] = "";
		if (a->has_addr)
			net_addr_format(a->addr, addr, sizeof(addr));
		fputs(i ? ",{\"host\":" : "{\"host\":", f);
		result_json_cstr(f, a->host);
		fprintf(f, ",\"port\":%u,\"method\":", (unsigned)a->port);
		json_cstr_or_null(f, a->method);
		fputs(",\"address\":", f);
		json_cstr_or_null(f, addr);
		fprintf(f, ",\"allowed\":%s,\"why\":", a->allowed ? "true" : "false");
		json_cstr_or_null(f, a->why);
		fprintf(f, ",\"bytes_up\":%llu,\"bytes_down\":%llu,\"end\":", (unsigned long long)a->up,
			(unsigned long long)a->down);
		json_cstr_or_null(f, a->end);
		fprintf(f, ",\"ms\":%lld}", (long long)a->ms);
	}
	fprintf(f, "],\"network_unrecorded\":%u", r->network.unrecorded);
}

void result_print_json(FILE *f, const struct run_result *r)
{
	const struct run_stage *fin = result_final(r);
	fputs("{\"run_id\":", f);
	result_json_cstr(f, r->run_id);
	fputs(",\"termination\":", f);
	print_outcome(f, r->term, fin);
	print_run_outcome(f, r);
	fprintf(f,
		",\"durations_ms\":{\"prepare\":%lld,\"boot\":%lld,\"run\":%lld,\"teardown\":%lld,\"extract\":%lld,"
		"\"total\":%lld}",
		(long long)r->prepare, (long long)r->boot, (long long)r->run, (long long)r->teardown,
		(long long)r->extract, (long long)r->total);
	fprintf(f, ",\"boot\":\"%s\"", r->restored ? "restored" : "cold");
	if (r->repeat.asked > 1)
		fprintf(f, ",\"repeat\":{\"made\":%u,\"asked\":%u,\"max_cpu_ms\":%llu}", r->repeat.made,
			r->repeat.asked, (unsigned long long)r->repeat.max_cpu_ms);
	print_usage(f, fin);
	if (r->runtime[0]) {
		fputs(",\"runtime\":{\"name\":", f);
		result_json_cstr(f, r->runtime);
		fputs(",\"version\":", f);
		result_json_cstr(f, r->runtime_version);
		fputc('}', f);
	}
	if (r->source) {
		print_stage(f, "compile", r->nstages > 1 ? &r->stage[0] : NULL);
		print_stage(f, "run", &r->stage[r->nstages - 1]);
	}
	fputs(",\"artifacts\":[", f);
	for (size_t i = 0; i < r->artifacts.nfiles; i++) {
		fputs(i ? ",{\"path\":" : "{\"path\":", f);
		result_json_cstr(f, r->artifacts.files[i].path);
		fprintf(f, ",\"size\":%llu}", (unsigned long long)r->artifacts.files[i].size);
	}
	fputs("],\"artifacts_skipped\":[", f);
	for (size_t i = 0; i < r->artifacts.nskipped; i++) {
		fputs(i ? ",{\"path\":" : "{\"path\":", f);
		result_json_cstr(f, r->artifacts.skipped[i].path);
		fputs(",\"reason\":", f);
		result_json_cstr(f, r->artifacts.skipped[i].reason);
		fputc('}', f);
	}
	fprintf(f,
		"],\"limits\":{\"timeout_s\":%g,\"memory_mib\":%llu,\"cpus\":%llu,\"disk_mib\":%llu,\"max_output\":%llu,"
		"\"nproc\":%llu,\"nofile\":%llu,\"fsize\":%llu}",
		r->limits.timeout_s, (unsigned long long)r->limits.memory_mib, (unsigned long long)r->limits.cpus,
		(unsigned long long)r->limits.disk_mib, (unsigned long long)r->limits.max_output,
		(unsigned long long)r->limits.nproc, (unsigned long long)r->limits.nofile,
		(unsigned long long)r->limits.fsize);
	if (r->jail.built)
		fprintf(f,
			",\"jail\":{\"mode\":\"%s\",\"uid\":\"%s\",\"namespaces\":[%s\"mount\",\"pid\",\"network\","
			"\"ipc\",\"uts\"],\"cgroup\":\"%s\",\"seccomp\":true,\"no_new_privs\":true}",
			r->jail.rootless ? "rootless" : "root", r->jail.own_uid ? "own" : "caller",
			r->jail.rootless ? "\"user\"," : "",
			r->jail.cgroup_version == 2 ? (r->jail.cgroup_delegated ? "v2-delegated" : "v2") :
			r->jail.cgroup_version == 1 ? "v1" : "none");
	else
		fputs(",\"jail\":null", f);
	print_network(f, r);
	fputs(",\"message\":", f);
	result_json_cstr(f, r->message);
	fputs("}\n", f);
}

void result_repeat_add(struct run_repeat *rep, const struct run_result *r)
{
	const struct run_stage *s = result_final(r);
	rep->made++;
	rep->cpu_ms += s->cpu_ms;
	if (s->cpu_ms > rep->max_cpu_ms)
		rep->max_cpu_ms = s->cpu_ms;
	rep->max_rss_kib += s->max_rss_kib;
}

bool result_repeat_more(const struct run_repeat *rep, const struct run_result *r)
{
	struct run_outcome o;
	result_outcome(r, &o);
	return rep->made < rep->asked && !r->cancelled && o.state == OUTCOME_SUCCEEDED;
}

void result_repeat_apply(struct run_result *r, const struct run_repeat *rep)
{
	struct run_stage *s = result_final_mut(r);
	if (rep->made) {
		s->cpu_ms = rep->cpu_ms / rep->made;
		s->max_rss_kib = rep->max_rss_kib / rep->made;
	}
	r->repeat.made = rep->made;
	r->repeat.asked = rep->asked;
	r->repeat.max_cpu_ms = rep->max_cpu_ms;
}
