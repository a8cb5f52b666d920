/* A stored run shown as Judge0's submission (judge0.h): its fields, its
 * status as isolate_job.rb decides it, its texts as its serializer writes
 * them. */
#include "judge0.h"
#include "lines.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "utf8.h"

/* ---- fields ---------------------------------------------------------------- */

/* The serializer's attributes, in its order: the table's columns (less
 * id), then status and language. */
static const char *const field_names[] = {
	"source_code", "language_id", "stdin", "expected_output", "stdout", "status_id", "created_at",
	"finished_at", "time", "memory", "stderr", "token", "number_of_runs", "cpu_time_limit", "cpu_extra_time",
	"wall_time_limit", "memory_limit", "stack_limit", "max_processes_and_or_threads",
	"enable_per_process_and_thread_time_limit", "enable_per_process_and_thread_memory_limit", "max_file_size",
	"compile_output", "exit_code", "exit_signal", "message", "wall_time", "compiler_options",
	"command_line_arguments", "redirect_stderr_to_stdout", "callback_url", "additional_files", "enable_network",
	"started_at", "queued_at", "updated_at", "queue_host", "execution_host", "status", "language",
};
#define NFIELDS (sizeof(field_names) / sizeof(field_names[0]))
_Static_assert(NFIELDS < 64, "a mask of uint64_t holds every field");

uint64_t judge0_field_bit(const char *name)
{
	for (size_t i = 0; i < NFIELDS; i++)
		if (!strcmp(name, field_names[i]))
			return 1ull << i;
	return 0;
}

uint64_t judge0_fields_default(void)
{
	static const char *const dflt[] = { "token", "time", "memory", "stdout", "stderr", "compile_output",
					    "message", "status" };
	uint64_t m = 0;
	for (size_t i = 0; i < sizeof(dflt) / sizeof(dflt[0]); i++)
		m |= judge0_field_bit(dflt[i]);
	return m;
}

/* Ruby's split(","): no trimming; empty fields at the end dropped. */
int judge0_fields(const char *list, uint64_t *mask, char *invalid, size_t len)
{
	uint64_t m = 0;
	bool all = false, bad = false;
	size_t o = 0;
	*mask = 0;
	if (len)
		invalid[0] = '\0';
	size_t n = list ? strlen(list) : 0;
	while (n && list[n - 1] == ',')
		n--;
	for (size_t i = 0; i < n; i++) {
		size_t k = strcspn(list + i, ",");
		char f[64] = "";
		if (k < sizeof(f))
			memcpy(f, list + i, k);
		uint64_t bit = k < sizeof(f) ? judge0_field_bit(f) : 0;
		if (!strcmp(f, "*"))
			all = true;
		else if (!bit && (bad = true) && o + 1 < len)
			o += (size_t)snprintf(invalid + o, len - o, "%s%.*s", o ? ", " : "", (int)(k > 64 ? 64 : k),
					      list + i);
		if (o >= len)
			o = len - 1;
		m |= bit;
		i += k;
	}
	if (bad)
		return -1;
	*mask = all ? (1ull << NFIELDS) - 1 : m ? m : judge0_fields_default();
	return 0;
}

/* ---- the verdict ---------------------------------------------------------------- */

static bool flag(const json_t *o, const char *key)
{
	return json_is_true(json_object_get(o, key));
}

static const char *text(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* "SIGSEGV" -> 11; 0 for none. */
static int signal_number(const char *name)
{
	if (strncmp(name, "SIG", 3)) {
		long n = strtol(name, NULL, 10);
		return n > 0 && n < NSIG ? (int)n : 0;
	}
	for (int i = 1; i < NSIG; i++) {
		const char *a = sigabbrev_np(i);
		if (a && !strcmp(a, name + 3))
			return i;
	}
	return 0;
}

/* isolate's line (Judge0 passes it on), and ours after it. */
static void say(struct judge0_verdict *v, const char *fmt, const char *more, long n)
{
	int k = snprintf(v->message, sizeof(v->message), fmt, n);
	if (more && k >= 0 && (size_t)k < sizeof(v->message))
		snprintf(v->message + k, sizeof(v->message) - (size_t)k, " (%s)", more);
}

/* Status.find_runtime_error_by_status_code */
static int signal_status(int sig)
{
	return sig == SIGSEGV ? J0_SIGSEGV : sig == SIGXFSZ ? J0_SIGXFSZ : sig == SIGFPE ? J0_SIGFPE :
	       sig == SIGABRT ? J0_SIGABRT : J0_OTHER;
}

/* The run stage's ending, the result's top level outside source mode;
 * a repeated run's (number_of_runs) CPU time judged by its slowest run,
 * as Judge0 would have stopped at it, not by the mean shown. */
static void judge_run(const json_t *s, const json_t *repeat, const json_t *j0, struct judge0_verdict *v)
{
	const json_t *usage = json_object_get(s, "usage"), *code = json_object_get(s, "exit_code");
	double limit = json_number_value(json_object_get(j0, "cpu_time_limit"));
	json_int_t cpu_ms = json_integer_value(json_object_get(usage, "cpu_ms"));
	json_int_t slowest = json_integer_value(json_object_get(repeat, "max_cpu_ms"));
	cpu_ms = slowest > cpu_ms ? slowest : cpu_ms;
	/* Judge0: exit_code is isolate's exitcode, or 0 */
	v->has_exit_code = true;
	v->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : 0;
	if (flag(s, "timed_out") || !strcmp(text(s, "termination"), "timeout")) {
		v->status = J0_TIME_LIMIT;
		say(v, "Time limit exceeded (wall clock)", NULL, 0);
	} else if (flag(s, "cpu_time_exceeded") || (limit > 0 && (double)cpu_ms > limit * 1000)) {
		v->status = J0_TIME_LIMIT;
		say(v, "Time limit exceeded", NULL, 0);
	} else if (flag(s, "stdout_truncated") || flag(s, "stderr_truncated")) {
		/* isolate's -f kills a program whose output passes the size
		 * with SIGXFSZ; vmrun cuts the stream instead */
		v->status = J0_SIGXFSZ;
		v->has_signal = true;
		v->signal = SIGXFSZ;
		say(v, "Caught fatal signal %ld", "output over max_file_size, cut by vmrun", SIGXFSZ);
	} else if (flag(s, "oom_killed")) {
		v->status = J0_OTHER;
		v->has_signal = true;
		v->signal = SIGKILL;
		say(v, "Caught fatal signal %ld", "memory limit exceeded", SIGKILL);
	} else if (json_is_string(json_object_get(s, "signal"))) {
		v->has_signal = true;
		v->signal = signal_number(text(s, "signal"));
		v->status = signal_status(v->signal);
		say(v, "Caught fatal signal %ld", NULL, v->signal);
	} else if (v->exit_code != 0) {
		v->status = J0_NZEC;
		say(v, "Exited with error status %ld", NULL, v->exit_code);
	}
}

/* The run stage's stdout as Judge0 compares it. */
static const json_t *run_stage(const json_t *result)
{
	const json_t *run = json_object_get(result, "run");
	return json_is_object(run) ? run : result;
}

void judge0_verdict(const json_t *result, const json_t *j0, struct judge0_verdict *v)
{
	const char *term = text(result, "termination");
	memset(v, 0, sizeof(*v));
	if (!strcmp(term, "compile_error")) {
		v->status = J0_COMPILATION_ERROR;
		return;
	}
	if (!strcmp(term, "not_found")) {
		v->status = J0_EXEC_FORMAT_ERROR;
		snprintf(v->message, sizeof(v->message), "%s", text(result, "message"));
		return;
	}
	if (strcmp(term, "exited") && strcmp(term, "signaled") && strcmp(term, "timeout")) {
		/* vm_failed, error, denied: not the program's doing */
		v->status = J0_INTERNAL_ERROR;
		snprintf(v->message, sizeof(v->message), "%s", *text(result, "message") ? text(result, "message") : term);
		return;
	}
	const json_t *s = run_stage(result);
	judge_run(s, json_object_get(result, "repeat"), j0, v);
	if (v->status)
		return;
	const json_t *exp = json_object_get(j0, "expected_output");
	if (!json_is_string(exp)) {
		v->status = J0_ACCEPTED;
		return;
	}
	unsigned char *e;
	size_t elen;
	if (judge0_decode64(json_string_value(exp), json_string_length(exp), &e, &elen)) {
		v->status = J0_INTERNAL_ERROR;
		snprintf(v->message, sizeof(v->message), "out of memory");
		return;
	}
	const json_t *out = json_object_get(s, "stdout");
	bool redirect = flag(j0, "redirect_stderr_to_stdout");
	size_t n = json_string_length(out), m = redirect ? json_string_length(json_object_get(s, "stderr")) : 0;
	char *all = malloc(n + m + 1);
	if (all) {
		memcpy(all, json_string_value(out) ? json_string_value(out) : "", n);
		memcpy(all + n, m ? json_string_value(json_object_get(s, "stderr")) : "", m);
	}
	v->status = !all ? J0_INTERNAL_ERROR :
		    lines_match((const char *)e, elen, n + m ? all : NULL, n + m) ? J0_ACCEPTED :
											       J0_WRONG_ANSWER;
	free(all);
	free(e);
}

/* ---- the view ----------------------------------------------------------------------- */

struct view {
	const struct judge0_run *run;
	bool b64;
	bool *not_utf8;
};

/* A text field: base64 when asked, else the text, or null. */
static json_t *text_json(const struct view *w, const char *p, size_t n, bool present)
{
	if (!present || !p)
		return json_null();
	if (w->b64) {
		char *e = judge0_encode64(p, n, NULL);
		json_t *s = e ? json_string(e) : NULL;
		free(e);
		return s;
	}
	if (!utf8_valid(p, n)) {
		*w->not_utf8 = true;
		return json_null();
	}
	return json_stringn(p, n);
}

/* A text of the result (a JSON string), null when empty: Judge0 keeps an
 * empty output as nil. */
static json_t *output_json(const struct view *w, const char *p, size_t n)
{
	return text_json(w, p, n, p && n);
}

/* A base64 text decoded, shown as a text field. */
static json_t *decoded_json(const struct view *w, const json_t *v)
{
	unsigned char *p;
	size_t n;
	if (judge0_decode64(json_string_value(v), json_string_length(v), &p, &n))
		return NULL;
	json_t *t = text_json(w, (const char *)p, n, true);
	free(p);
	return t;
}

/* A text of the request (base64 in its canonical form). */
static json_t *request_text(const struct view *w, const json_t *v, const json_t *encoding)
{
	if (!json_is_string(v))
		return json_null();
	if (strcmp(json_string_value(encoding) ? json_string_value(encoding) : "", "base64"))
		return text_json(w, json_string_value(v), json_string_length(v), true);
	return decoded_json(w, v);
}

/* BigDecimal#to_s as Rails writes a decimal column: "0.002", "5.0". */
static json_t *decimal_json(double d, int places)
{
	char s[64];
	snprintf(s, sizeof(s), "%.*f", places, d);
	size_t n = strlen(s);
	while (n > 2 && s[n - 1] == '0' && s[n - 2] != '.')
		s[--n] = '\0';
	return json_string(s);
}

static json_t *time_json(int64_t ms)
{
	char buf[CLOCK_ISO8601_MAX];
	const char *t = ms ? clock_iso8601(ms, buf) : NULL;
	return t ? json_string(t) : json_null();
}

static json_t *copy_of(const json_t *j0, const char *key)
{
	const json_t *v = json_object_get(j0, key);
	return v ? json_deep_copy(v) : json_null();
}

/* Stage s's stdout and stderr together (the interleaved output when
 * there is one), as redirect_stderr_to_stdout and compile_output show. */
static json_t *merged_json(const struct view *w, const json_t *s, const char *interleaved)
{
	if (interleaved)
		return output_json(w, interleaved, strlen(interleaved));
	const json_t *a = json_object_get(s, "stdout"), *b = json_object_get(s, "stderr");
	size_t na = json_string_length(a), nb = json_string_length(b);
	char *t = malloc(na + nb + 1);
	if (!t)
		return NULL;
	memcpy(t, na ? json_string_value(a) : "", na);
	memcpy(t + na, nb ? json_string_value(b) : "", nb);
	json_t *o = output_json(w, t, na + nb);
	free(t);
	return o;
}

/* What the result gives, ready for the fields. */
struct facts {
	int status;
	struct judge0_verdict v;
	const json_t *stage;          /* the run stage's object; NULL: none ran */
	const json_t *compile;
	bool ended;
};

static void facts_of(const struct judge0_run *run, const json_t *j0, struct facts *f)
{
	memset(f, 0, sizeof(*f));
	f->ended = run->state == 2;
	if (!f->ended) {
		f->status = run->state == 1 ? J0_PROCESSING : J0_IN_QUEUE;
		return;
	}
	if (!run->result) {
		f->status = f->v.status = J0_INTERNAL_ERROR;
		snprintf(f->v.message, sizeof(f->v.message), "%s", run->message && *run->message ? run->message :
											       "the run left no result");
		return;
	}
	judge0_verdict(run->result, j0, &f->v);
	f->status = f->v.status;
	f->compile = json_object_get(run->result, "compile");
	if (!json_is_object(f->compile))
		f->compile = NULL;
	if (f->status != J0_COMPILATION_ERROR && f->status != J0_INTERNAL_ERROR)
		f->stage = run_stage(run->result);
}

static json_t *usage_json(const json_t *s, const char *key, double scale, bool decimal)
{
	const json_t *v = json_object_get(json_object_get(s, "usage"), key);
	if (!s || !json_is_integer(v))
		return json_null();
	return decimal ? decimal_json((double)json_integer_value(v) / scale, 3) : json_integer(json_integer_value(v));
}

static json_t *wall_json(const json_t *s, const json_t *result)
{
	const json_t *v = json_object_get(s, "duration_ms");
	if (!s)
		return json_null();
	if (!json_is_integer(v))
		v = json_object_get(json_object_get(result, "durations_ms"), "run");
	return json_is_integer(v) ? decimal_json((double)json_integer_value(v) / 1000, 3) : json_null();
}

static json_t *field_json(const struct view *w, const struct facts *f, const json_t *j0, size_t i)
{
	const struct judge0_run *run = w->run;
	const json_t *file = json_array_get(json_object_get(run->request, "files"), 0);
	const char *name = field_names[i];
	const json_t *s = f->stage;
	bool redirect = flag(j0, "redirect_stderr_to_stdout");
	char token[JUDGE0_TOKEN_LEN + 1];
	if (!strcmp(name, "source_code"))
		return request_text(w, json_object_get(file, "content"), json_object_get(file, "encoding"));
	if (!strcmp(name, "stdin"))
		return request_text(w, json_object_get(run->request, "stdin"),
				    json_object_get(run->request, "stdin_encoding"));
	if (!strcmp(name, "expected_output")) {
		/* kept as Judge0 keeps it: Ruby's base64 */
		const json_t *e = json_object_get(j0, "expected_output");
		if (!json_is_string(e) || w->b64)
			return json_is_string(e) ? json_deep_copy(e) : json_null();
		return decoded_json(w, e);
	}
	if (!strcmp(name, "stdout")) {
		if (!s)
			return json_null();
		if (redirect)
			return merged_json(w, s, run->output[1]);
		return output_json(w, text(s, "stdout"), json_string_length(json_object_get(s, "stdout")));
	}
	if (!strcmp(name, "stderr"))
		return s && !redirect ? output_json(w, text(s, "stderr"), json_string_length(json_object_get(s, "stderr")))
				      : json_null();
	if (!strcmp(name, "compile_output")) {
		if (f->status == J0_COMPILATION_ERROR && flag(f->compile, "timed_out"))
			return text_json(w, "Compilation time limit exceeded.", 32, true);
		return f->compile ? merged_json(w, f->compile, run->output[0]) : json_null();
	}
	if (!strcmp(name, "status_id"))
		return json_integer(f->status);
	if (!strcmp(name, "status")) {
		json_t *o = json_object();
		if (o && !json_object_set_new(o, "id", json_integer(f->status)) &&
		    !json_object_set_new(o, "description", json_string(judge0_status_name(f->status))))
			return o;
		json_decref(o);
		return NULL;
	}
	if (!strcmp(name, "language")) {
		json_int_t id = json_integer_value(json_object_get(j0, "language_id"));
		json_t *l = judge0_language(run->rts, run->nrts, (long)id), *o = json_object();
		if (o && !json_object_set_new(o, "id", json_integer(id)) &&
		    !json_object_set(o, "name", l ? json_object_get(l, "name") : json_null())) {
			json_decref(l);
			return o;
		}
		json_decref(l);
		json_decref(o);
		return NULL;
	}
	if (!strcmp(name, "token")) {
		judge0_token(run->id, token);
		return json_string(token);
	}
	if (!strcmp(name, "time"))
		return usage_json(s, "cpu_ms", 1000, true);
	if (!strcmp(name, "memory"))
		return usage_json(s, "max_rss_kib", 1, false);
	if (!strcmp(name, "wall_time"))
		return wall_json(s, run->result);
	if (!strcmp(name, "exit_code"))
		return s && f->v.has_exit_code ? json_integer(f->v.exit_code) : json_null();
	if (!strcmp(name, "exit_signal"))
		return s && f->v.has_signal ? json_integer(f->v.signal) : json_null();
	if (!strcmp(name, "message"))
		return f->v.message[0] ? text_json(w, f->v.message, strlen(f->v.message), true) : json_null();
	if (!strcmp(name, "created_at") || !strcmp(name, "queued_at"))
		return time_json(run->created_ms);
	if (!strcmp(name, "started_at"))
		return time_json(run->started_ms);
	if (!strcmp(name, "finished_at"))
		return time_json(f->ended ? run->finished_ms : 0);
	if (!strcmp(name, "updated_at"))
		return time_json(run->finished_ms ? run->finished_ms : run->started_ms ? run->started_ms : run->created_ms);
	if (!strcmp(name, "execution_host"))
		return run->node && *run->node ? json_string(run->node) : json_null();
	if (!strcmp(name, "cpu_time_limit") || !strcmp(name, "cpu_extra_time") || !strcmp(name, "wall_time_limit"))
		return decimal_json(json_number_value(json_object_get(j0, name)), 15);
	if (!strcmp(name, "enable_per_process_and_thread_time_limit") ||
	    !strcmp(name, "enable_per_process_and_thread_memory_limit"))
		return json_false();
	if (!strcmp(name, "enable_network"))
		return json_boolean(json_is_true(json_object_get(j0, name)));
	if (!strcmp(name, "queue_host"))
		return json_null();
	if (!strcmp(name, "additional_files")) {
		/* base64 whatever base64_encoded says (submission_serializer.rb) */
		const json_t *z = json_object_get(j0, name);
		return json_is_string(z) ? json_deep_copy(z) : json_null();
	}
	/* language_id, the integer limits, redirect, command_line_arguments,
	 * callback_url, compiler_options */
	return copy_of(j0, name);
}

json_t *judge0_view(const struct judge0_run *run, uint64_t mask, bool b64, bool *not_utf8)
{
	struct view w = { .run = run, .b64 = b64, .not_utf8 = not_utf8 };
	const json_t *j0 = json_object_get(json_object_get(run->request, "client"), "judge0");
	struct facts f;
	*not_utf8 = false;
	facts_of(run, j0, &f);
	json_t *o = json_object();
	for (size_t i = 0; o && i < NFIELDS; i++) {
		if (!(mask >> i & 1))
			continue;
		json_t *v = field_json(&w, &f, j0, i);
		if (!v || json_object_set_new(o, field_names[i], v)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}
