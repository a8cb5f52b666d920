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
	free(r->out.data);
	free(r->err.data);
	r->out = r->err = (struct outbuf){ 0 };
	artifacts_result_free(&r->artifacts);
}

int result_exit_status(const struct run_result *r)
{
	switch (r->term) {
	case TERM_EXITED: return r->exit_code;
	case TERM_SIGNALED: return 128 + r->signal;
	case TERM_TIMEOUT: return 124;
	case TERM_DENIED: return 126;
	case TERM_NOT_FOUND: return 127;
	default: return 125;
	}
}

const char *result_termination_name(enum termination t)
{
	static const char *const names[] = { "exited", "signaled", "timeout", "denied", "not_found", "vm_failed", "error" };
	return names[t];
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

static void json_string(FILE *f, const uint8_t *p, size_t n)
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

static void json_cstr(FILE *f, const char *s)
{
	json_string(f, (const uint8_t *)s, strlen(s));
}

void result_print_json(FILE *f, const struct run_result *r)
{
	fputs("{\"run_id\":", f);
	json_cstr(f, r->run_id);
	fputs(",\"termination\":", f);
	json_cstr(f, result_termination_name(r->term));
	if (r->term == TERM_EXITED)
		fprintf(f, ",\"exit_code\":%d", r->exit_code);
	else
		fputs(",\"exit_code\":null", f);
	if (r->term == TERM_SIGNALED && sigabbrev_np(r->signal))
		fprintf(f, ",\"signal\":\"SIG%s\"", sigabbrev_np(r->signal));
	else if (r->term == TERM_SIGNALED)
		fprintf(f, ",\"signal\":\"%d\"", r->signal);
	else
		fputs(",\"signal\":null", f);
	fprintf(f, ",\"timed_out\":%s,\"stdout\":", r->term == TERM_TIMEOUT ? "true" : "false");
	json_string(f, r->out.data ? r->out.data : (const uint8_t *)"", r->out.len);
	fputs(",\"stderr\":", f);
	json_string(f, r->err.data ? r->err.data : (const uint8_t *)"", r->err.len);
	/* dropped by the agent (its EXIT flags) or by the host's own cap */
	fprintf(f, ",\"stdout_truncated\":%s,\"stderr_truncated\":%s",
		r->out_truncated || r->out.truncated ? "true" : "false",
		r->err_truncated || r->err.truncated ? "true" : "false");
	fprintf(f,
		",\"durations_ms\":{\"prepare\":%lld,\"boot\":%lld,\"run\":%lld,\"teardown\":%lld,\"extract\":%lld,"
		"\"total\":%lld}",
		(long long)r->prepare, (long long)r->boot, (long long)r->run, (long long)r->teardown,
		(long long)r->extract, (long long)r->total);
	fprintf(f, ",\"usage\":{\"cpu_ms\":%llu,\"max_rss_kib\":%llu}", (unsigned long long)r->cpu_ms,
		(unsigned long long)r->max_rss_kib);
	fputs(",\"artifacts\":[", f);
	for (size_t i = 0; i < r->artifacts.nfiles; i++) {
		fputs(i ? ",{\"path\":" : "{\"path\":", f);
		json_cstr(f, r->artifacts.files[i].path);
		fprintf(f, ",\"size\":%llu}", (unsigned long long)r->artifacts.files[i].size);
	}
	fputs("],\"artifacts_skipped\":[", f);
	for (size_t i = 0; i < r->artifacts.nskipped; i++) {
		fputs(i ? ",{\"path\":" : "{\"path\":", f);
		json_cstr(f, r->artifacts.skipped[i].path);
		fputs(",\"reason\":", f);
		json_cstr(f, r->artifacts.skipped[i].reason);
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
	fputs(",\"message\":", f);
	json_cstr(f, r->message);
	fputs("}\n", f);
}
