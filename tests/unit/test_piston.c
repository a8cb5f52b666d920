/* Piston v2 compatibility (host/vmrund/piston.c): the runtime an execute
 * body chooses (its semver selectors are test_semver.c's), its translation into a native request,
 * Piston's refusals, and the execute response from vmrun's result JSON. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "piston.h"
#include "result.h"

static char err[512];

static const struct runtime rts[] = {
	{ .name = "python",
	  .version = "3.9.2",
	  .aliases = "py py3 python3",
	  .extension = "py",
	  .run = "python3 {file} {args}" },
	{ .name = "python",
	  .version = "3.11.2",
	  .aliases = "py py3 python3",
	  .extension = "py",
	  .run = "python3 {file} {args}" },
	{ .name = "c",
	  .version = "12.2.0",
	  .aliases = "gcc",
	  .extension = "c",
	  .compile = "gcc -o prog {files}",
	  .run = "./prog {args}" },
	{ .name = "java",
	  .version = "17.0.21.1",
	  .aliases = "jdk",
	  .extension = "java",
	  .compile = "javac {files}",
	  .run = "java {stem} {args}" },
	{ .name = "node",
	  .version = "18.20.4",
	  .aliases = "js  javascript",
	  .extension = "js",
	  .run = "node {file} {args}" },
};
#define NRTS (sizeof(rts) / sizeof(rts[0]))

static int execute(const char *text, struct run_spec *rq, const struct runtime **rt)
{
	json_error_t je;
	json_t *body = json_loads(text, 0, &je);
	if (!body)
		fail_msg("bad test JSON %s: %s", text, je.text);
	err[0] = '\0';
	int rc = piston_parse(body, rts, NRTS, rq, rt, err, sizeof(err));
	json_decref(body);
	return rc;
}

static void refused(const char *text, const char *want)
{
	struct run_spec rq;
	const struct runtime *rt = rts;
	int rc = execute(text, &rq, &rt);
	if (rc != -1 || strcmp(err, want))
		fail_msg("%s\n  gave rc %d, \"%s\"; wanted \"%s\"", text, rc, err, want);
	assert_null(rt);
	assert_null(rq.files);
	run_spec_free(&rq);
}

static void chooses_runtime(void **state)
{
	(void)state;
	struct run_spec rq;
	const struct runtime *rt;
	assert_int_equal(
		execute("{\"language\": \"py\", \"version\": \"3.x\", \"files\": [{\"content\": \"print(1)\"}]}", &rq,
			&rt),
		0);
	assert_ptr_equal(rt, &rts[1]); /* the newest 3.x */
	assert_string_equal(rq.runtime, "python");
	assert_true(rq.source);
	assert_string_equal(rq.files[0].name, "file0.py");
	run_spec_free(&rq);
	assert_int_equal(execute("{\"language\": \"python3\", \"version\": \"3.9\", \"files\": [{\"content\": \"\"}]}",
				 &rq, &rt),
			 0);
	assert_ptr_equal(rt, &rts[0]);
	run_spec_free(&rq);
	assert_int_equal(execute("{\"language\": \"python\", \"version\": \"<3.11\", \"files\": [{\"content\": \"\"}]}",
				 &rq, &rt),
			 0);
	assert_ptr_equal(rt, &rts[0]);
	run_spec_free(&rq);
	assert_int_equal(execute("{\"language\": \"javascript\", \"version\": \"*\", \"files\": [{\"content\": \"\"}]}",
				 &rq, &rt),
			 0);
	assert_ptr_equal(rt, &rts[4]);
	run_spec_free(&rq);
	assert_int_equal(execute("{\"language\": \"jdk\", \"version\": \"17.0.21\", \"files\": [{\"content\": \"\"}]}",
				 &rq, &rt),
			 0);
	assert_ptr_equal(rt, &rts[3]);
	assert_string_equal(rq.files[0].name, "file0.java");
	run_spec_free(&rq);
	refused("{\"language\": \"py\", \"version\": \"9.x\", \"files\": [{\"content\": \"\"}]}",
		"py-9.x runtime is unknown");
	refused("{\"language\": \"pyt\", \"version\": \"*\", \"files\": [{\"content\": \"\"}]}",
		"pyt-* runtime is unknown");
	refused("{\"language\": \"py\\n\", \"version\": \"*\", \"files\": [{\"content\": \"\"}]}",
		"py?-* runtime is unknown");
}

static void translates(void **state)
{
	(void)state;
	struct run_spec rq;
	const struct runtime *rt;
	assert_int_equal(execute("{\"language\": \"c\", \"version\": \"12\", \"files\": ["
				 "{\"name\": \"data\", \"content\": \"AAE=\", \"encoding\": \"base64\"},"
				 "{\"name\": \"main.c\", \"content\": \"int main(){}\"}, {\"content\": \"x\", "
				 "\"encoding\": \"utf16\"}],"
				 " \"stdin\": \"in\", \"args\": [\"1\", \"2\"], \"compile_timeout\": 10000, "
				 "\"run_timeout\": 3000,"
				 " \"compile_cpu_time\": 2500.5, \"run_cpu_time\": -1, \"compile_memory_limit\": -1,"
				 " \"run_memory_limit\": 1048577, \"unknown_extra\": {\"ignored\": true}}",
				 &rq, &rt),
			 0);
	assert_ptr_equal(rt, &rts[2]);
	assert_int_equal(rq.nfiles, 3);
	/* utf8 files first: Piston runs the first of them */
	assert_string_equal(rq.files[0].name, "main.c");
	assert_string_equal(rq.files[1].name, "file2.c"); /* an unknown encoding is utf8 */
	assert_memory_equal(rq.files[1].data, "x", 1);
	assert_string_equal(rq.files[2].name, "data");
	assert_memory_equal(rq.files[2].data, "\0\1", 2);
	assert_int_equal(rq.argc, 2);
	assert_string_equal(rq.argv[1], "2");
	assert_true(rq.has_stdin);
	assert_int_equal(rq.stdin_len, 3);
	assert_memory_equal(rq.stdin_data, "in\n", 3); /* Piston adds the newline */
	assert_true(rq.compile.timeout_s == 10.0);
	assert_true(rq.run.timeout_s == 3.0);
	assert_int_equal(rq.compile.cpu_time_ms, 2501);
	assert_int_equal(rq.run.cpu_time_ms, 0);
	assert_int_equal(rq.compile.memory_mib, 0);
	assert_int_equal(rq.run.memory_mib, 2); /* rounded up */
	assert_true(rq.timeout_s == 0);
	run_spec_free(&rq);

	/* an interpreter ignores the compile limits, whatever they hold */
	assert_int_equal(
		execute("{\"language\": \"python\", \"version\": \"3.11.2\", \"files\": [{\"content\": \"\"}],"
			" \"compile_timeout\": \"soon\", \"compile_memory_limit\": -7, \"compile_cpu_time\": 5,"
			" \"run_timeout\": 0, \"stdin\": \"\", \"args\": null}",
			&rq, &rt),
		0);
	assert_true(rq.compile.timeout_s == 0);
	assert_int_equal(rq.compile.memory_mib, 0);
	assert_int_equal(rq.compile.cpu_time_ms, 0);
	assert_true(rq.run.timeout_s == 0); /* 0 is Piston's "not given" */
	assert_false(rq.has_stdin);
	assert_int_equal(rq.argc, 0);
	run_spec_free(&rq);

	assert_int_equal(
		execute("{\"language\": \"py\", \"version\": \"3\", \"files\": [{\"name\": \"\", \"content\": \"\"}],"
			" \"stdin\": \"x\\n\"}",
			&rq, &rt),
		0);
	assert_string_equal(rq.files[0].name, "file0.py");
	assert_int_equal(rq.stdin_len, 2);
	run_spec_free(&rq);

	/* numbers in args, as Piston's CLI sends `piston run python main.py 1 2.5 x` */
	assert_int_equal(execute("{\"language\": \"py\", \"version\": \"3\", \"files\": [{\"content\": \"\"}],"
				 " \"args\": [1, 2.5, \"x\", -7, 1e21]}",
				 &rq, &rt),
			 0);
	assert_int_equal(rq.argc, 5);
	const char *want[] = { "1", "2.5", "x", "-7", "1e+21" };
	for (unsigned i = 0; i < 5; i++)
		assert_string_equal(rq.argv[i], want[i]);
	run_spec_free(&rq);
}

/* JavaScript's String(n), which Node hands a program for a numeric arg. */
static void number_text(void **state)
{
	(void)state;
	static const struct {
		double d;
		const char *js;
	} cases[] = {
		{ 0, "0" },	      { -0.0, "0" },	      { 1, "1" },	      { -3, "-3" },
		{ 1.5, "1.5" },	      { 0.1, "0.1" },	      { 100, "100" },	      { 1e21, "1e+21" },
		{ 1e20, "100000000000000000000" }, { 123456789012345680000.0, "123456789012345680000" },
		{ 1e-6, "0.000001" }, { 1e-7, "1e-7" },	      { 1.5e-7, "1.5e-7" },   { -2.5e-10, "-2.5e-10" },
		{ 0.000123, "0.000123" }, { 12345.678, "12345.678" }, { 1.7976931348623157e308, "1.7976931348623157e+308" },
		{ 5e-324, "5e-324" }, { 9007199254740993.0, "9007199254740992" },
	};
	char out[PISTON_NUMBER_MAX];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		piston_number_text(cases[i].d, out);
		assert_string_equal(out, cases[i].js);
	}
}

static void refuses(void **state)
{
	(void)state;
	refused("[]", "language is required as a string");
	refused("{\"version\": \"3\", \"files\": []}", "language is required as a string");
	refused("{\"language\": \"\", \"version\": \"3\", \"files\": []}", "language is required as a string");
	refused("{\"language\": 1, \"version\": \"3\", \"files\": []}", "language is required as a string");
	refused("{\"language\": \"py\", \"files\": []}", "version is required as a string");
	refused("{\"language\": \"py\", \"version\": 3, \"files\": []}", "version is required as a string");
	refused("{\"language\": \"py\", \"version\": \"3\"}", "files is required as an array");
	refused("{\"language\": \"py\", \"version\": \"3\", \"files\": {}}", "files is required as an array");
	refused("{\"language\": \"py\", \"version\": \"3\", \"files\": [{\"content\": \"\"}, {\"name\": \"a\"}]}",
		"files[1].content is required as a string");
	refused("{\"language\": \"py\", \"version\": \"3\", \"files\": [7]}",
		"files[0].content is required as a string");
	refused("{\"language\": \"py\", \"version\": \"3\", \"files\": []}",
		"files must include at least one utf8 encoded file");
	refused("{\"language\": \"py\", \"version\": \"3\", \"files\": [{\"content\": \"\", \"encoding\": \"hex\"}]}",
		"files must include at least one utf8 encoded file");
	const char *ok = "{\"language\": \"c\", \"version\": \"*\", \"files\": [{\"content\": \"\"}], ";
	static const struct {
		const char *extra, *want;
	} cases[] = {
		{ "\"args\": \"a b\"", "args must be an array of strings" },
		{ "\"args\": [true]", "args must be an array of strings" },
		{ "\"args\": [\"a\", null]", "args must be an array of strings" },
		{ "\"stdin\": 5", "stdin must be a string" },
		{ "\"run_timeout\": \"3s\"", "If specified, run_timeout must be a number" },
		{ "\"compile_memory_limit\": true", "If specified, compile_memory_limit must be a number" },
		{ "\"run_cpu_time\": -2", "run_cpu_time must be non-negative" },
		{ "\"compile_timeout\": -0.5", "compile_timeout must be non-negative" },
		{ "\"run_timeout\": 1e12", "run_timeout cannot exceed the configured limit of 86400000" },
		{ "\"run_memory_limit\": 1e20",
		  "run_memory_limit cannot exceed the configured limit of 1099511627776" },
	};
	char text[256];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(text, sizeof(text), "%s%s}", ok, cases[i].extra);
		refused(text, cases[i].want);
	}
	/* Piston's own checks passed; the native request's refuse the rest */
	refused("{\"language\": \"c\", \"version\": \"*\", \"files\": [{\"name\": \"../x.c\", \"content\": \"\"}]}",
		"files[0].name: must not contain '/'");
	refused("{\"language\": \"c\", \"version\": \"*\", \"files\": [{\"name\": 5, \"content\": \"\"}]}",
		"files[0].name must be a string");
	refused("{\"language\": \"c\", \"version\": \"*\", \"files\": [{\"name\": \"a\", \"content\": \"\"},"
		" {\"name\": \"a\", \"content\": \"\"}]}",
		"files[1].name: \"a\" is given twice");
	refused("{\"language\": \"c\", \"version\": \"*\", \"files\": [{\"content\": \"\"}, {\"content\": \"!!!!\", "
		"\"encoding\": "
		"\"base64\"}]}",
		"files[1].content: not valid base64 (a character outside A-Z a-z 0-9 + / at 0)");
}

/* ---- responses ------------------------------------------------------------- */

static json_t *response(const char *result_text, const struct runtime *rt, const char *const output[2])
{
	json_error_t je;
	json_t *result = json_loads(result_text, 0, &je);
	if (!result)
		fail_msg("bad test JSON %s: %s", result_text, je.text);
	json_t *resp = piston_response(rt, result, output);
	assert_non_null(resp);
	json_decref(result);
	return resp;
}

static const char *str(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	assert_true(json_is_string(v));
	return json_string_value(v);
}

static bool is_null(const json_t *o, const char *key)
{
	return json_is_null(json_object_get(o, key));
}

static long long num(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	assert_true(json_is_integer(v));
	return (long long)json_integer_value(v);
}

/* A source-mode stage object as result_print_json writes it. */
#define STAGE(term, code, sig, out, err, otr, etr, oom, cpu, ms)                                                       \
	"{\"termination\":\"" term "\",\"exit_code\":" code ",\"signal\":" sig                                         \
	",\"timed_out\":false,\"stdout\":\"" out "\",\"stderr\":\"" err "\",\"stdout_truncated\":" otr                 \
	",\"stderr_truncated\":" etr ",\"oom_killed\":" oom ",\"cpu_time_exceeded\":" cpu ",\"duration_ms\":" ms       \
	",\"usage\":{\"cpu_ms\":12,\"max_rss_kib\":2048},"                                                             \
	"\"limits\":{\"timeout_s\":3,\"memory_mib\":0,\"cpu_time_ms\":0}}"

static void exit_0_without_compile(void **state)
{
	(void)state;
	json_t *r = response(
		"{\"run_id\":\"x\",\"termination\":\"exited\",\"exit_code\":0,\"signal\":null,\"timed_out\":false,"
		"\"stdout\":\"hi\\n\",\"stderr\":\"warn\\n\",\"stdout_truncated\":false,\"stderr_truncated\":false,"
		"\"durations_ms\":{\"run\":40,\"total\":90},\"usage\":{\"cpu_ms\":5,\"max_rss_kib\":1000},"
		"\"runtime\":{\"name\":\"python\",\"version\":\"3.11.2\"},\"compile\":null,"
		"\"run\":" STAGE("exited", "0", "null", "hi\\n", "warn\\n", "false", "false", "false", "false",
				 "33") ",\"message\":\"\"}",
		&rts[1], NULL);
	assert_string_equal(str(r, "language"), "python");
	assert_string_equal(str(r, "version"), "3.11.2");
	assert_null(json_object_get(r, "compile"));
	const json_t *run = json_object_get(r, "run");
	assert_string_equal(str(run, "stdout"), "hi\n");
	assert_string_equal(str(run, "stderr"), "warn\n");
	assert_string_equal(str(run, "output"), "hi\nwarn\n");
	assert_int_equal(num(run, "code"), 0);
	assert_true(is_null(run, "signal"));
	assert_true(is_null(run, "status"));
	assert_true(is_null(run, "message"));
	assert_int_equal(num(run, "cpu_time"), 12);
	assert_int_equal(num(run, "wall_time"), 33);
	assert_int_equal(num(run, "memory"), 2048 * 1024);
	json_decref(r);
}

/* The run stage of a non-source result (its top level) with these fields. */
static json_t *top_level(const char *fields, const char *message, const char *const output[2])
{
	char text[1024];
	snprintf(text, sizeof(text),
		 "{\"run_id\":\"x\",%s,\"durations_ms\":{\"run\":70},\"usage\":{\"cpu_ms\":1,\"max_rss_kib\":2},"
		 "\"message\":\"%s\"}",
		 fields, message);
	return response(text, &rts[1], output);
}

static void statuses(void **state)
{
	(void)state;
	const char *const out[2] = { NULL, "interleaved" };
	json_t *r = top_level(
		"\"termination\":\"exited\",\"exit_code\":1,\"signal\":null,\"stdout\":\"a\",\"stderr\":\"b\"", "",
		out);
	const json_t *run = json_object_get(r, "run");
	assert_string_equal(str(run, "status"), "RE");
	assert_int_equal(num(run, "code"), 1);
	assert_string_equal(str(run, "message"), "Exited with error status 1");
	assert_string_equal(str(run, "output"), "interleaved");
	assert_int_equal(num(run, "wall_time"), 70); /* the top level's run duration */
	assert_int_equal(num(run, "memory"), 2048);
	json_decref(r);

	r = top_level("\"termination\":\"signaled\",\"exit_code\":null,\"signal\":\"SIGSEGV\"", "", NULL);
	run = json_object_get(r, "run");
	assert_string_equal(str(run, "status"), "SG");
	assert_string_equal(str(run, "signal"), "SIGSEGV");
	assert_true(is_null(run, "code"));
	assert_string_equal(str(run, "message"), "Signal SIGSEGV");
	assert_string_equal(str(run, "output"), "");
	json_decref(r);

	r = top_level(
		"\"termination\":\"timeout\",\"exit_code\":null,\"signal\":null,\"timed_out\":true,\"stdout\":\"so\"",
		"the run exceeded its 3 s limit; the VM was killed", NULL);
	run = json_object_get(r, "run");
	assert_string_equal(str(run, "status"), "TO");
	assert_string_equal(str(run, "signal"), "SIGKILL");
	assert_string_equal(str(run, "message"), "the run exceeded its 3 s limit; the VM was killed");
	assert_string_equal(str(run, "stdout"), "so");
	json_decref(r);

	r = top_level("\"termination\":\"exited\",\"exit_code\":0,\"signal\":null,\"stdout_truncated\":true", "", NULL);
	run = json_object_get(r, "run");
	assert_string_equal(str(run, "status"), "OL");
	assert_string_equal(str(run, "message"), "stdout length exceeded");
	json_decref(r);

	r = top_level("\"termination\":\"exited\",\"exit_code\":0,\"signal\":null,\"stderr_truncated\":true", "", NULL);
	assert_string_equal(str(json_object_get(r, "run"), "status"), "EL");
	json_decref(r);

	r = top_level("\"termination\":\"vm_failed\",\"exit_code\":null,\"signal\":null", "vmm died of SIGABRT", NULL);
	run = json_object_get(r, "run");
	assert_string_equal(str(run, "status"), "XX");
	assert_string_equal(str(run, "message"), "vmm died of SIGABRT");
	json_decref(r);

	static const char *const xx[] = { "error", "denied", "not_found" };
	for (size_t i = 0; i < 3; i++) {
		char fields[128];
		snprintf(fields, sizeof(fields), "\"termination\":\"%s\",\"exit_code\":null", xx[i]);
		r = top_level(fields, "", NULL);
		run = json_object_get(r, "run");
		assert_string_equal(str(run, "status"), "XX");
		assert_string_equal(str(run, "message"), xx[i]);
		json_decref(r);
	}
}

static void memory_and_cpu_kills(void **state)
{
	(void)state;
	json_t *r = response("{\"termination\":\"signaled\",\"compile\":null,\"run\":" STAGE(
				     "signaled", "null", "\"SIGKILL\"", "", "", "false", "false", "true", "false",
				     "9") ","
					  "\"message\":\"\"}",
			     &rts[1], NULL);
	const json_t *run = json_object_get(r, "run");
	assert_string_equal(str(run, "status"), "SG");
	assert_string_equal(str(run, "signal"), "SIGKILL");
	assert_non_null(strstr(str(run, "message"), "memory"));
	json_decref(r);
	r = response("{\"termination\":\"signaled\",\"compile\":null,\"run\":" STAGE("signaled", "null", "\"SIGXCPU\"",
										     "", "", "false", "false", "false",
										     "true", "9") ","
												  "\"message\":\"\"}",
		     &rts[1], NULL);
	run = json_object_get(r, "run");
	assert_string_equal(str(run, "status"), "TO");
	assert_string_equal(str(run, "signal"), "SIGKILL");
	assert_string_equal(str(run, "message"), "Time limit exceeded");
	json_decref(r);
}

static void compile_stages(void **state)
{
	(void)state;
	/* compiled and ran */
	const char *const out[2] = { "c-out", NULL };
	json_t *r = response("{\"termination\":\"exited\",\"compile\":" STAGE(
				     "exited", "0", "null", "", "", "false", "false", "false", "false",
				     "800") ","
					    "\"run\":" STAGE("exited", "3", "null", "r", "", "false", "false", "false",
							     "false", "5") ","
									   "\"message\":\"\"}",
			     &rts[2], out);
	assert_string_equal(str(r, "language"), "c");
	const json_t *c = json_object_get(r, "compile"), *run = json_object_get(r, "run");
	assert_true(is_null(c, "status"));
	assert_string_equal(str(c, "output"), "c-out");
	assert_int_equal(num(c, "wall_time"), 800);
	assert_string_equal(str(run, "status"), "RE");
	assert_int_equal(num(run, "code"), 3);
	assert_string_equal(str(run, "output"), "r");
	json_decref(r);

	/* the compiler failed: no run stage, and Piston answers with the
	 * compile stage as "run" too */
	r = response("{\"termination\":\"compile_error\",\"exit_code\":1,\"compile\":" STAGE(
			     "exited", "1", "null", "", "main.c:1: error", "false", "false", "false", "false",
			     "700") ","
				    "\"run\":null,\"message\":\"the compile stage failed with status 1\"}",
		     &rts[2], NULL);
	c = json_object_get(r, "compile");
	run = json_object_get(r, "run");
	assert_string_equal(str(c, "status"), "RE");
	assert_int_equal(num(c, "code"), 1);
	assert_string_equal(str(c, "stderr"), "main.c:1: error");
	assert_true(json_equal(c, run));
	assert_ptr_not_equal(c, run);
	json_decref(r);

	/* refused before any stage started */
	r = response("{\"termination\":\"error\",\"exit_code\":null,\"signal\":null,\"compile\":null,\"run\":null,"
		     "\"message\":\"policy: memory_mib over 4096\"}",
		     &rts[2], NULL);
	assert_null(json_object_get(r, "compile"));
	run = json_object_get(r, "run");
	assert_string_equal(str(run, "status"), "XX");
	assert_string_equal(str(run, "message"), "policy: memory_mib over 4096");
	assert_true(is_null(run, "wall_time"));
	json_decref(r);
}

/* What result_print_json really writes, read back as the daemon will. */
static json_t *printed(const struct run_result *r, const struct runtime *rt)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	result_print_json(f, r);
	fclose(f);
	json_error_t je;
	json_t *result = json_loadb(text, len, JSON_ALLOW_NUL, &je);
	if (!result)
		fail_msg("result JSON %s: %s", text, je.text);
	free(text);
	json_t *resp = piston_response(rt, result, NULL);
	assert_non_null(resp);
	json_decref(result);
	return resp;
}

static void from_result_print_json(void **state)
{
	(void)state;
	static uint8_t diag[] = "m.c:1: error";
	struct run_result r = { .term = TERM_COMPILE_ERROR, .source = true, .nstages = 2 };
	r.stage[0] = (struct run_stage){
		.started = true, .term = TERM_EXITED, .exit_code = 1, .wall_ms = 300, .cpu_ms = 250, .max_rss_kib = 10
	};
	r.stage[0].err = (struct outbuf){ .data = diag, .len = sizeof(diag) - 1 };
	json_t *resp = printed(&r, &rts[2]);
	const json_t *c = json_object_get(resp, "compile"), *run = json_object_get(resp, "run");
	assert_string_equal(str(c, "status"), "RE");
	assert_string_equal(str(c, "stderr"), "m.c:1: error");
	assert_int_equal(num(c, "wall_time"), 300);
	assert_int_equal(num(c, "cpu_time"), 250);
	assert_int_equal(num(c, "memory"), 10240);
	assert_true(json_equal(c, run));
	json_decref(resp);

	struct run_result s = { .term = TERM_SIGNALED, .nstages = 1, .run = 44 };
	s.stage[0] = (struct run_stage){ .started = true, .term = TERM_SIGNALED, .signal = 11 };
	resp = printed(&s, &rts[1]);
	assert_null(json_object_get(resp, "compile"));
	run = json_object_get(resp, "run");
	assert_string_equal(str(run, "status"), "SG");
	assert_string_equal(str(run, "signal"), "SIGSEGV");
	assert_int_equal(num(run, "wall_time"), 44);
	json_decref(resp);

	struct run_result t = { .term = TERM_TIMEOUT, .source = true, .nstages = 1 };
	t.stage[0] = (struct run_stage){ .started = true, .term = TERM_TIMEOUT, .wall_ms = 3000 };
	result_message(&t, "the run stage exceeded its 3 s limit; the VM was killed");
	resp = printed(&t, &rts[1]);
	run = json_object_get(resp, "run");
	assert_string_equal(str(run, "status"), "TO");
	assert_string_equal(str(run, "signal"), "SIGKILL");
	assert_true(is_null(run, "code"));
	json_decref(resp);
}

static void runtimes_list(void **state)
{
	(void)state;
	json_t *a = piston_runtimes(rts, NRTS);
	char *text = json_dumps(a, JSON_COMPACT);
	assert_non_null(strstr(
		text, "{\"language\":\"python\",\"version\":\"3.11.2\",\"aliases\":[\"py\",\"py3\",\"python3\"]}"));
	assert_non_null(
		strstr(text, "{\"language\":\"node\",\"version\":\"18.20.4\",\"aliases\":[\"js\",\"javascript\"]}"));
	assert_int_equal(json_array_size(a), NRTS);
	free(text);
	json_decref(a);
	const struct runtime bare = { .name = "bash", .version = "5.2.15" };
	a = piston_runtimes(&bare, 1);
	text = json_dumps(a, JSON_COMPACT);
	assert_string_equal(text, "[{\"language\":\"bash\",\"version\":\"5.2.15\",\"aliases\":[]}]");
	free(text);
	json_decref(a);
}

/* Piston's WebSocket: what each message asks (api/src/api/v2.js's
 * connect handler, case by case). */
static void ws_messages(void **state)
{
	(void)state;
	const struct {
		const char *text;
		bool initialized;
		enum piston_ws_ask ask;
		unsigned code;
	} cases[] = {
		{ "{\"type\":\"init\",\"language\":\"python\"}", false, PISTON_ASK_INIT, 0 },
		{ "{\"type\":\"init\"}", true, PISTON_ASK_CLOSE, PISTON_WS_ALREADY },
		{ "{\"type\":\"data\",\"stream\":\"stdin\",\"data\":\"x\"}", false, PISTON_ASK_CLOSE,
		  PISTON_WS_NOT_YET },
		{ "{\"type\":\"signal\",\"signal\":\"SIGINT\"}", false, PISTON_ASK_CLOSE, PISTON_WS_NOT_YET },
		{ "{\"type\":\"data\",\"stream\":\"stdin\",\"data\":\"ab\\n\"}", true, PISTON_ASK_STDIN, 0 },
		{ "{\"type\":\"data\",\"stream\":\"stdout\",\"data\":\"x\"}", true, PISTON_ASK_CLOSE,
		  PISTON_WS_STDIN_ONLY },
		{ "{\"type\":\"data\",\"data\":\"x\"}", true, PISTON_ASK_CLOSE, PISTON_WS_STDIN_ONLY },
		{ "{\"type\":\"data\",\"stream\":\"stdin\",\"data\":5}", true, PISTON_ASK_ERROR, 0 },
		{ "{\"type\":\"signal\",\"signal\":\"SIGINT\"}", true, PISTON_ASK_SIGNAL, 0 },
		{ "{\"type\":\"signal\",\"signal\":\"SIGRTMIN+3\"}", true, PISTON_ASK_SIGNAL, 0 },
		{ "{\"type\":\"signal\",\"signal\":\"INT\"}", true, PISTON_ASK_CLOSE, PISTON_WS_BAD_SIGNAL },
		{ "{\"type\":\"signal\",\"signal\":2}", true, PISTON_ASK_CLOSE, PISTON_WS_BAD_SIGNAL },
		{ "{\"type\":\"ping\"}", true, PISTON_ASK_NOTHING, 0 },
		{ "{\"no\":\"type\"}", false, PISTON_ASK_NOTHING, 0 },
		{ "[1]", false, PISTON_ASK_NOTHING, 0 },
		{ "{not json", false, PISTON_ASK_ERROR, 0 },
		{ "", true, PISTON_ASK_ERROR, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct piston_ws_msg m;
		piston_ws_decide(cases[i].text, strlen(cases[i].text), cases[i].initialized, &m);
		if (m.ask != cases[i].ask || m.code != cases[i].code)
			fail_msg("%s: ask %d code %u, wanted %d %u", cases[i].text, m.ask, m.code, cases[i].ask,
				 cases[i].code);
		if (m.ask == PISTON_ASK_STDIN)
			assert_string_equal(m.data, "ab\n");
		if (m.ask == PISTON_ASK_SIGNAL)
			assert_true(m.signo == 2 || m.signo == 37);
		if (m.ask == PISTON_ASK_ERROR)
			assert_true(m.err[0]);
		json_decref(m.msg);
	}
	assert_string_equal(piston_ws_reason(PISTON_WS_DONE), "Job Completed");
	assert_string_equal(piston_ws_reason(PISTON_WS_INIT_TIMEOUT), "Initialization Timeout");
	assert_string_equal(piston_ws_reason(1000), "");
	char name[16];
	const struct {
		int n;
		const char *name;
	} sigs[] = { { 2, "SIGINT" },	   { 9, "SIGKILL" },	{ 31, "SIGSYS" },	  { 32, "" },
		     { 34, "SIGRTMIN" },   { 35, "SIGRTMIN+1" }, { 49, "SIGRTMIN+15" }, { 50, "SIGRTMAX-14" },
		     { 64, "SIGRTMAX" },   { 0, "" },		{ 65, "" } };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		piston_signal_name(sigs[i].n, name);
		assert_string_equal(name, sigs[i].name);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chooses_runtime),
		cmocka_unit_test(translates),
		cmocka_unit_test(number_text),
		cmocka_unit_test(refuses),
		cmocka_unit_test(exit_0_without_compile),
		cmocka_unit_test(statuses),
		cmocka_unit_test(memory_and_cpu_kills),
		cmocka_unit_test(compile_stages),
		cmocka_unit_test(from_result_print_json),
		cmocka_unit_test(runtimes_list),
		cmocka_unit_test(ws_messages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
