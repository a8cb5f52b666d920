/* Judge0 compatibility (host/vmrund/judge0.c, judge0_submission.c,
 * judge0_view.c): the configuration, languages, statuses, tokens, Ruby's
 * base64, a submission's checks and translation, fields, the verdict as
 * Judge0 chooses it and the submission's view. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "judge0.h"
#include "lines.h"

static const struct runtime rts[] = {
	{ .name = "c", .version = "12.2.0", .extension = "c", .compile = "gcc -O2 -o /tmp/prog {files} -lm",
	  .run = "/tmp/prog {args}" },
	{ .name = "python", .version = "3.11.2", .extension = "py", .run = "python3 {file} {args}" },
};
#define NRTS 2

static struct judge0_config cfg;

static int setup(void **state)
{
	(void)state;
	judge0_config_defaults(&cfg);
	return 0;
}

/* ---- configuration ---- */

static void config_keys(void **state)
{
	(void)state;
	char err[200];
	struct judge0_config c;
	judge0_config_defaults(&c);
	assert_int_equal(judge0_config_set(&c, "judge0_cpu_time_limit", "2.5", err, sizeof(err)), 1);
	assert_true(c.cpu_time_limit == 2.5);
	assert_int_equal(judge0_config_set(&c, "judge0_max_memory_limit", "256000", err, sizeof(err)), 1);
	assert_int_equal(c.max_memory_limit, 256000);
	assert_int_equal(judge0_config_set(&c, "judge0_disable_implicit_base64_encoding", "true", err, sizeof(err)), 1);
	assert_true(c.disable_implicit_base64_encoding);
	assert_int_equal(judge0_config_set(&c, "judge0_memory_limit", "12.5", err, sizeof(err)), -1);
	assert_string_equal(err, "judge0_memory_limit: a whole number from 2048 to 67108864, not \"12.5\"");
	assert_int_equal(judge0_config_set(&c, "judge0_enable_wait_result", "yes", err, sizeof(err)), -1);
	assert_int_equal(judge0_config_set(&c, "judge0_nope", "1", err, sizeof(err)), -1 + 1);
	assert_int_equal(judge0_config_set(&c, "slots", "1", err, sizeof(err)), 0);
}

static void config_info_has_every_key(void **state)
{
	(void)state;
	static const char *const keys[] = {
		"maintenance_mode", "enable_wait_result", "enable_compiler_options",
		"allowed_languages_for_compile_options", "enable_command_line_arguments", "enable_submission_delete",
		"enable_callbacks", "callbacks_max_tries", "callbacks_timeout", "enable_additional_files",
		"max_queue_size", "cpu_time_limit", "max_cpu_time_limit", "cpu_extra_time", "max_cpu_extra_time",
		"wall_time_limit", "max_wall_time_limit", "memory_limit", "max_memory_limit", "stack_limit",
		"max_stack_limit", "max_processes_and_or_threads", "max_max_processes_and_or_threads",
		"enable_per_process_and_thread_time_limit", "allow_enable_per_process_and_thread_time_limit",
		"enable_per_process_and_thread_memory_limit", "allow_enable_per_process_and_thread_memory_limit",
		"max_file_size", "max_max_file_size", "number_of_runs", "max_number_of_runs",
		"redirect_stderr_to_stdout", "max_extract_size", "enable_batched_submissions",
		"max_submission_batch_size", "submission_cache_duration", "use_docs_as_homepage",
		"allow_enable_network", "enable_network", "disable_implicit_base64_encoding",
	};
	json_t *o = judge0_config_info(&cfg, 100, false);
	assert_non_null(o);
	assert_int_equal(json_object_size(o), sizeof(keys) / sizeof(keys[0]));
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_non_null(json_object_get(o, keys[i]));
	/* Floats where config.rb has to_f, integers where to_i */
	assert_true(json_is_real(json_object_get(o, "cpu_time_limit")));
	assert_true(json_is_integer(json_object_get(o, "memory_limit")));
	assert_true(json_is_array(json_object_get(o, "allowed_languages_for_compile_options")));
	assert_int_equal(json_integer_value(json_object_get(o, "max_queue_size")), 100);
	json_decref(o);
}

/* ---- languages, statuses ---- */

static void languages_of_installed_runtimes(void **state)
{
	(void)state;
	json_t *a = judge0_languages(rts, NRTS, false);
	assert_int_equal(json_array_size(a), 2);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(a, 0), "id")), 50);
	assert_string_equal(json_string_value(json_object_get(json_array_get(a, 0), "name")), "C (GCC 12.2.0)");
	assert_null(json_object_get(json_array_get(a, 0), "is_archived"));
	json_decref(a);
	a = judge0_languages(rts, NRTS, true);
	assert_true(json_is_false(json_object_get(json_array_get(a, 1), "is_archived")));
	json_decref(a);
	json_t *l = judge0_language(rts, NRTS, 50);
	assert_string_equal(json_string_value(json_object_get(l, "source_file")), "main.c");
	assert_string_equal(json_string_value(json_object_get(l, "compile_cmd")), "gcc -O2 -o /tmp/prog main.c -lm");
	assert_string_equal(json_string_value(json_object_get(l, "run_cmd")), "/tmp/prog");
	json_decref(l);
	l = judge0_language(rts, NRTS, 71);
	assert_true(json_is_null(json_object_get(l, "compile_cmd")));
	json_decref(l);
	assert_null(judge0_language(rts, NRTS, 62));   /* java: not installed here */
	assert_null(judge0_language(rts, NRTS, 1));
}

static void statuses(void **state)
{
	(void)state;
	json_t *a = judge0_statuses();
	assert_int_equal(json_array_size(a), 14);
	assert_string_equal(json_string_value(json_object_get(json_array_get(a, 6), "description")),
			    "Runtime Error (SIGSEGV)");
	json_decref(a);
	assert_null(judge0_status_name(0));
	assert_string_equal(judge0_status_name(14), "Exec Format Error");
}

/* ---- tokens, base64 ---- */

static void tokens(void **state)
{
	(void)state;
	char token[JUDGE0_TOKEN_LEN + 1], id[33];
	judge0_token("0123456789abcdef0123456789abcdef", token);
	assert_string_equal(token, "01234567-89ab-cdef-0123-456789abcdef");
	assert_true(judge0_token_id("01234567-89AB-cdef-0123-456789abcdef", id));
	assert_string_equal(id, "0123456789abcdef0123456789abcdef");
	assert_false(judge0_token_id("0123456789abcdef0123456789abcdef", id));
	assert_false(judge0_token_id("01234567-89ab-cdef-0123-456789abcdeg", id));
	assert_false(judge0_token_id("01234567-89ab-cdef-0123-456789abcde", id));
	assert_false(judge0_token_id("../../../../../../../../../../etc", id));
}

static void ruby_base64(void **state)
{
	(void)state;
	size_t n;
	char *e = judge0_encode64("", 0, &n);
	assert_string_equal(e, "");
	free(e);
	e = judge0_encode64("hello", 5, &n);
	assert_string_equal(e, "aGVsbG8=\n");
	free(e);
	char in[46];
	memset(in, 'a', sizeof(in));
	e = judge0_encode64(in, 45, &n);
	assert_int_equal(n, 61);
	assert_int_equal(e[60], '\n');
	free(e);
	e = judge0_encode64(in, 46, &n);
	assert_int_equal(n, 66);
	assert_string_equal(e + 61, "YQ==\n");
	free(e);
	unsigned char *d;
	assert_int_equal(judge0_decode64("aGVs\nbG8=\n", 10, &d, &n), 0);
	assert_int_equal(n, 5);
	assert_memory_equal(d, "hello", 5);
	free(d);
	/* lenient as Ruby: no padding, stray characters skipped */
	assert_int_equal(judge0_decode64("aG!Vs bG8", 9, &d, &n), 0);
	assert_int_equal(n, 5);
	assert_memory_equal(d, "hello", 5);
	free(d);
	assert_int_equal(judge0_decode64("YQ", 2, &d, &n), 0);
	assert_int_equal(n, 1);
	free(d);
	assert_int_equal(judge0_decode64("Y", 1, &d, &n), 0);
	assert_int_equal(n, 0);
	free(d);
}

/* ---- a submission ---- */

/* body submitted with the runtimes r[n] installed: Judge0's 422 body, or
 * NULL with rq made. */
static json_t *submit_with(const struct runtime *r, size_t n, const char *body, bool b64, struct run_spec *rq)
{
	json_t *in = json_loads(body, 0, NULL), *errors = NULL;
	assert_non_null(in);
	int rc = judge0_submission(in, b64, &cfg, r, n, NULL, rq, &errors);
	json_decref(in);
	assert_true(rc ? errors != NULL : errors == NULL);
	return errors;
}

static json_t *submit(const char *body, bool b64, struct run_spec *rq)
{
	return submit_with(rts, NRTS, body, b64, rq);
}

static void submission_defaults(void **state)
{
	(void)state;
	struct run_spec rq;
	assert_null(submit("{\"source_code\":\"cHJpbnQoMSk=\",\"language_id\":\"71\",\"stdin\":\"YQ==\"}", true, &rq));
	assert_string_equal(rq.runtime, "python");
	assert_true(rq.source);
	assert_int_equal(rq.nfiles, 1);
	assert_string_equal(rq.files[0].name, "script.py");
	assert_memory_equal(rq.files[0].data, "print(1)", 8);
	assert_true(rq.has_stdin);
	assert_int_equal(rq.stdin_len, 1);
	/* cpu 5 s and 1 s extra; wall 10 s; 128000 KB; 1024 KB of output */
	assert_int_equal(rq.run.cpu_time_ms, 6000);
	assert_true(rq.run.timeout_s == 10);
	assert_int_equal(rq.run.memory_mib, 125);
	assert_int_equal(rq.max_output, 1024 * 1024);
	assert_int_equal(rq.repeat, 1);
	const json_t *j0 = json_object_get(rq.client, "judge0");
	assert_int_equal(json_integer_value(json_object_get(j0, "language_id")), 71);
	assert_true(json_is_null(json_object_get(j0, "expected_output")));
	/* the client object survives the canonical form */
	json_t *canon = run_spec_to_json(&rq);
	struct run_spec back;
	char err[200];
	assert_int_equal(run_spec_from_json(canon, &back, err, sizeof(err)), 0);
	assert_true(json_equal(back.client, rq.client));
	run_spec_free(&back);
	json_decref(canon);
	run_spec_free(&rq);
}

static void submission_arguments_split_as_bash(void **state)
{
	(void)state;
	struct run_spec rq;
	assert_null(submit("{\"source_code\":\"x\",\"language_id\":50,\"cpu_time_limit\":\"1.5\",\"cpu_extra_time\":0,"
			   "\"command_line_arguments\":\" a 'b c' \\\"d\\\\\\\"e\\\" f\\\\ g $(rm)|x; \"}",
			   false, &rq));
	assert_int_equal(rq.argc, 5);
	assert_string_equal(rq.argv[0], "a");
	assert_string_equal(rq.argv[1], "b c");
	assert_string_equal(rq.argv[2], "d\"e");
	assert_string_equal(rq.argv[3], "f g");
	assert_string_equal(rq.argv[4], "(rm)x");
	assert_string_equal(rq.files[0].name, "main.c");
	assert_int_equal(rq.run.cpu_time_ms, 1500);
	run_spec_free(&rq);
	/* compiler options: the compile stage's args, split the same way */
	assert_null(submit("{\"source_code\":\"x\",\"language_id\":50,\"compiler_options\":\"-O3 -DX='a b' ;-lm\"}",
			   false, &rq));
	assert_int_equal(rq.ncompile_args, 3);
	assert_string_equal(rq.compile_args[0], "-O3");
	assert_string_equal(rq.compile_args[1], "-DX=a b");
	assert_string_equal(rq.compile_args[2], "-lm");
	assert_string_equal(json_string_value(json_object_get(json_object_get(rq.client, "judge0"), "compiler_options")),
			    "-O3 -DX='a b' ;-lm");
	run_spec_free(&rq);
	json_t *e = submit("{\"source_code\":\"x\",\"language_id\":71,\"compiler_options\":\"-O\"}", false, &rq);
	assert_string_equal(json_string_value(json_array_get(json_object_get(e, "compiler_options"), 0)),
			    "setting compiler options is only allowed for compiled languages");
	json_decref(e);
}

static void submission_errors_as_rails_says_them(void **state)
{
	(void)state;
	struct run_spec rq;
	json_t *e = submit("{\"source_code\":\"  \",\"cpu_time_limit\":16,\"wall_time_limit\":0.5,"
			   "\"memory_limit\":\"lots\",\"number_of_runs\":0,\"max_file_size\":-1,"
			   "\"callback_url\":\"http://x\",\"enable_network\":\"true\",\"compiler_options\":\"-O3\","
			   "\"additional_files\":\"UEsDBA==\",\"enable_per_process_and_thread_time_limit\":true}",
			   false, &rq);
	char *text = json_dumps(e, JSON_SORT_KEYS | JSON_COMPACT);
	assert_string_equal(text,
			    "{\"callback_url\":[\"setting callback is not allowed\"],"
			    "\"cpu_time_limit\":[\"must be less than or equal to 15.0\"],"
			    "\"enable_network\":[\"enabling network is not allowed\"],"
			    "\"enable_per_process_and_thread_time_limit\":[\"this option cannot be enabled\"],"
			    "\"language_id\":[\"can't be blank\"],"
			    "\"max_file_size\":[\"must be greater than or equal to 0\"],"
			    "\"memory_limit\":[\"is not a number\"],"
			    "\"number_of_runs\":[\"must be greater than 0\"],"
			    "\"source_code\":[\"can't be blank\"],"
			    "\"wall_time_limit\":[\"must be greater than or equal to 1\"]}");
	free(text);
	json_decref(e);
	assert_null(rq.files);
	e = submit("{\"source_code\":\"x\",\"language_id\":62}", false, &rq);
	assert_string_equal(json_string_value(json_array_get(json_object_get(e, "language_id"), 0)),
			    "language with id 62 doesn't exist");
	json_decref(e);
	e = submit("{\"source_code\":\"x\",\"language_id\":-1}", false, &rq);
	assert_string_equal(json_string_value(json_array_get(json_object_get(e, "language_id"), 0)),
			    "language with id -1 doesn't exist");
	json_decref(e);
	e = submit("{\"source_code\":\"x\",\"language_id\":71,\"number_of_runs\":21}", false, &rq);
	assert_string_equal(json_string_value(json_array_get(json_object_get(e, "number_of_runs"), 0)),
			    "must be less than or equal to 20");
	json_decref(e);
	/* number_of_runs is the spec's repeat, kept in its canonical form */
	assert_null(submit("{\"source_code\":\"x\",\"language_id\":71,\"number_of_runs\":\"3\"}", false, &rq));
	assert_int_equal(rq.repeat, 3);
	json_t *canon = run_spec_to_json(&rq);
	assert_int_equal(json_integer_value(json_object_get(canon, "repeat")), 3);
	json_decref(canon);
	assert_false(rq.has_repeat_expect);
	run_spec_free(&rq);
	/* with an expected output, each run must give it for another to be
	 * made (Judge0 stops at a wrong answer); not when stderr joins stdout,
	 * which only the view merges */
	assert_null(submit("{\"source_code\":\"x\",\"language_id\":71,\"number_of_runs\":3,\"expected_output\":\"42\"}",
			   false, &rq));
	assert_true(rq.has_repeat_expect);
	assert_int_equal(rq.repeat_expect_len, 2);
	assert_memory_equal(rq.repeat_expect, "42", 2);
	run_spec_free(&rq);
	assert_null(submit("{\"source_code\":\"x\",\"language_id\":71,\"number_of_runs\":3,\"expected_output\":\"42\","
			   "\"redirect_stderr_to_stdout\":true}", false, &rq));
	assert_false(rq.has_repeat_expect);
	run_spec_free(&rq);
	assert_null(submit("{\"source_code\":\"x\",\"language_id\":71,\"expected_output\":\"42\"}", false, &rq));
	assert_false(rq.has_repeat_expect);
	run_spec_free(&rq);
	e = submit("[1]", false, &rq);
	assert_non_null(json_object_get(e, "submission"));
	json_decref(e);
}

/* additional_files beside a source, and the Multi-file program (89),
 * which has none; the archives are python's zipfile's. */
#define ZIP_DATA "UEsDBBQAAAAIAKCahl0gMDo2CAAAAAYAAAALAAAAZGF0YS9pbi50eHTLSM3JyecCAFBLAwQUAAAACACgmoZdUjH7jQYAAAAEAAAABgAAA" \
		 "G1haW4uY0sty8wBAFBLAQIUAxQAAAAIAKCahl0gMDo2CAAAAAYAAAALAAAAAAAAAAAAAACAAQAAAABkYXRhL2luLnR4dFBLAQIUAxQAAAAIA" \
		 "KCahl1SMfuNBgAAAAQAAAAGAAAAAAAAAAAAAACAATEAAABtYWluLmNQSwUGAAAAAAIAAgBtAAAAWwAAAAAA"
#define ZIP_PROJECT "UEsDBBQAAAAIAKCahl0j4xNFFQAAABMAAAAKAAAAY29tcGlsZS5zaEtPTlbQzVcoKMpPV8hNzMzTS+YCAFBLAwQUAAAACACgmoZd5" \
		    "zoSRQkAAAAHAAAAAwAAAHJ1btPTLyjKT+cCAFBLAwQUAAAACACgmoZdLEcB1Q8AAAANAAAABgAAAG1haW4uY8vMK1HITczM09CsruUCAF" \
		    "BLAQIUAxQAAAAIAKCahl0j4xNFFQAAABMAAAAKAAAAAAAAAAAAAACAAQAAAABjb21waWxlLnNoUEsBAhQDFAAAAAgAoJqGXec6EkUJAAAA" \
		    "BwAAAAMAAAAAAAAAAAAAAIABPQAAAHJ1blBLAQIUAxQAAAAIAKCahl0sRwHVDwAAAA0AAAAGAAAAAAAAAAAAAACAAWcAAABtYWluLmNQSw" \
		    "UGAAAAAAMAAwCdAAAAmgAAAAAA"
#define ZIP_NO_RUN "UEsDBBQAAAAIAKCahl0sRwHVDwAAAA0AAAAGAAAAbWFpbi5jy8wrUchNzMzT0Kyu5QIAUEsBAhQDFAAAAAgAoJqGXSxHAdUPAAAADQAA" \
		   "AAYAAAAAAAAAAAAAAIABAAAAAG1haW4uY1BLBQYAAAAAAQABADQAAAAzAAAAAAA="

static const struct runtime rts_cxx[] = {
	{ .name = "c++", .version = "12.2.0", .extension = "cpp", .compile = "g++ -o /tmp/prog {files}",
	  .run = "/tmp/prog {args}" },
};


static const char *first_error(const json_t *e, const char *field)
{
	return json_string_value(json_array_get(json_object_get(e, field), 0));
}

static void additional_files(void **state)
{
	(void)state;
	struct run_spec rq;
	/* beside main.c: the archive's main.c is skipped (the source wins) */
	assert_null(submit("{\"source_code\":\"int main(){}\",\"language_id\":50,\"additional_files\":\"" ZIP_DATA "\"}",
			   false, &rq));
	assert_int_equal(rq.nfiles, 1);
	assert_int_equal(rq.nwfiles, 1);
	assert_string_equal(rq.wfiles[0].name, "data/in.txt");
	assert_memory_equal(rq.wfiles[0].data, "hello\n", 6);
	assert_int_equal(rq.nrun_cmd, 0);
	/* kept as Ruby writes base64, for GET's additional_files */
	const char *kept = json_string_value(json_object_get(json_object_get(rq.client, "judge0"), "additional_files"));
	assert_non_null(kept);
	assert_non_null(strchr(kept, '\n'));
	bool bad;
	json_t *canon = run_spec_to_json(&rq);
	struct judge0_run run = { .id = "0123456789abcdef0123456789abcdef", .state = 0, .request = canon, .rts = rts,
				  .nrts = NRTS };
	run_spec_free(&rq);
	uint64_t mask;
	char inv[40];
	assert_int_equal(judge0_fields("additional_files,source_code", &mask, inv, sizeof(inv)), 0);
	json_t *v = judge0_view(&run, mask, false, &bad);
	assert_string_equal(json_string_value(json_object_get(v, "additional_files")), kept);
	assert_string_equal(json_string_value(json_object_get(v, "source_code")), "int main(){}");
	json_decref(v);
	json_decref(canon);
	/* refusals, in Judge0's shape */
	json_t *e = submit("{\"source_code\":\"x\",\"language_id\":50,\"additional_files\":\"bm90IGEgemlw\"}", false, &rq);
	assert_non_null(strstr(first_error(e, "additional_files"), "is not a zip archive"));
	json_decref(e);
	e = submit("{\"source_code\":\"x\",\"language_id\":89,\"additional_files\":\"" ZIP_PROJECT "\"}", false, &rq);
	assert_string_equal(first_error(e, "language_id"), "language with id 89 doesn't exist");   /* no c++ here */
	json_decref(e);
}

static void multi_file_program(void **state)
{
	(void)state;
	struct run_spec rq;
	assert_null(submit_with(rts_cxx, 1,
			      "{\"language_id\":89,\"additional_files\":\"" ZIP_PROJECT "\",\"command_line_arguments\":\"a b\"}",
			      false, &rq));
	assert_string_equal(rq.runtime, "c++");
	assert_true(rq.source);
	assert_int_equal(rq.nfiles, 0);
	assert_int_equal(rq.nwfiles, 3);
	assert_int_equal(rq.nrun_cmd, 2);
	assert_string_equal(rq.run_cmd[0], "bash");
	assert_string_equal(rq.run_cmd[1], "run");
	assert_int_equal(rq.ncompile_cmd, 2);
	assert_string_equal(rq.compile_cmd[0], "bash");
	assert_string_equal(rq.compile_cmd[1], "compile.sh");
	assert_int_equal(rq.argc, 0);   /* the scripts run as they are */
	/* what the worker reads back is the same */
	json_t *canon = run_spec_to_json(&rq);
	struct run_spec back;
	char err[200];
	assert_int_equal(run_spec_from_json(canon, &back, err, sizeof(err)), 0);
	assert_int_equal(back.nrun_cmd, 2);
	assert_int_equal(back.nwfiles, 3);
	run_spec_free(&back);
	json_decref(canon);
	run_spec_free(&rq);
	json_t *l = judge0_language(rts_cxx, 1, 89);
	assert_string_equal(json_string_value(json_object_get(l, "name")), "Multi-file program");
	assert_true(json_is_null(json_object_get(l, "source_file")));
	assert_true(json_is_null(json_object_get(l, "run_cmd")));
	json_decref(l);
	json_t *e = submit_with(rts_cxx, 1, "{\"language_id\":89,\"source_code\":\"x\"}", false, &rq);
	assert_string_equal(first_error(e, "source_code"), "must be blank");
	assert_string_equal(first_error(e, "additional_files"), "can't be blank");
	json_decref(e);
	e = submit_with(rts_cxx, 1, "{\"language_id\":89,\"additional_files\":\"" ZIP_NO_RUN "\"}", false, &rq);
	assert_string_equal(first_error(e, "additional_files"),
			    "a Multi-file program needs a run or run.sh script at the top");
	json_decref(e);
	e = submit_with(rts_cxx, 1,
		      "{\"language_id\":89,\"additional_files\":\"" ZIP_PROJECT "\",\"compiler_options\":\"-O2\"}", false, &rq);
	assert_string_equal(first_error(e, "compiler_options"),
			    "setting compiler options is only allowed for compiled languages");
	json_decref(e);
}

/* enable_network: what the tenant's ceiling holds, or Judge0's 422. */
static void enable_network(void **state)
{
	(void)state;
	struct run_spec rq;
	char err[200];
	struct net_rule rules[2];
	assert_int_equal(net_rule_parse("pypi.org", false, &rules[0], err, sizeof(err)), 0);
	assert_int_equal(net_rule_parse("10.9.0.0/16:3128", true, &rules[1], err, sizeof(err)), 0);
	struct tenant any = { .net = { .any = true } }, some = { .net = { .rules = rules, .n = 2 } }, none = { 0 };
	const char *body = "{\"source_code\":\"x\",\"language_id\":71,\"enable_network\":true}";
	json_t *in = json_loads(body, 0, NULL), *errors = NULL;
	assert_int_equal(judge0_submission(in, false, &cfg, rts, NRTS, &any, &rq, &errors), 0);
	assert_int_equal(rq.nnet, 1);
	assert_int_equal(rq.net[0].kind, NET_RULE_ANY);
	assert_true(json_is_true(json_object_get(json_object_get(rq.client, "judge0"), "enable_network")));
	run_spec_free(&rq);
	/* host rules only: a tenant's address rules (ranges the deny set
	 * refuses) are not given by a switch */
	assert_int_equal(judge0_submission(in, false, &cfg, rts, NRTS, &some, &rq, &errors), 0);
	assert_int_equal(rq.nnet, 1);
	assert_string_equal(rq.net[0].host, "pypi.org");
	run_spec_free(&rq);
	struct tenant addr_only = { .net = { .rules = &rules[1], .n = 1 } };
	assert_int_equal(judge0_submission(in, false, &cfg, rts, NRTS, &addr_only, &rq, &errors), -1);
	json_decref(errors);
	assert_int_equal(judge0_submission(in, false, &cfg, rts, NRTS, &none, &rq, &errors), -1);
	assert_string_equal(first_error(errors, "enable_network"), "enabling network is not allowed");
	json_decref(errors);
	assert_int_equal(judge0_submission(in, false, &cfg, rts, NRTS, NULL, &rq, &errors), -1);
	json_decref(errors);
	json_decref(in);
	/* false, or absent: no rule at all */
	in = json_loads("{\"source_code\":\"x\",\"language_id\":71,\"enable_network\":false}", 0, NULL);
	assert_int_equal(judge0_submission(in, false, &cfg, rts, NRTS, &any, &rq, &errors), 0);
	assert_int_equal(rq.nnet, 0);
	run_spec_free(&rq);
	json_decref(in);
	json_t *o = judge0_config_info(&cfg, 100, true);
	assert_true(json_is_true(json_object_get(o, "allow_enable_network")));
	assert_true(json_is_false(json_object_get(o, "enable_network")));
	json_decref(o);
}

/* ---- callbacks ---- */

static void callback_urls(void **state)
{
	(void)state;
	struct judge0_url u;
	char err[200];
	assert_int_equal(judge0_url_parse("http://ok.test/cb?x=1", &u, err, sizeof(err)), 0);
	assert_false(u.https);
	assert_string_equal(u.host, "ok.test");
	assert_int_equal(u.port, 80);
	assert_int_equal(judge0_url_parse("https://[fd00::1]:8443/", &u, err, sizeof(err)), 0);
	assert_true(u.https);
	assert_string_equal(u.host, "fd00::1");
	assert_int_equal(u.port, 8443);
	assert_int_equal(judge0_url_parse("https://h:1", &u, err, sizeof(err)), 0);
	assert_int_equal(u.port, 1);
	assert_int_equal(judge0_url_parse("ftp://h/", &u, err, sizeof(err)), -1);
	assert_string_equal(err, "not an http:// or https:// URL");
	assert_int_equal(judge0_url_parse("http://user@h/", &u, err, sizeof(err)), -1);
	assert_int_equal(judge0_url_parse("http://h:0/", &u, err, sizeof(err)), -1);
	assert_int_equal(judge0_url_parse("http://h:65536/", &u, err, sizeof(err)), -1);
	assert_int_equal(judge0_url_parse("http://h:8x/", &u, err, sizeof(err)), -1);
	assert_int_equal(judge0_url_parse("http:///x", &u, err, sizeof(err)), -1);
	assert_int_equal(judge0_url_parse("http://h /", &u, err, sizeof(err)), -1);
	assert_int_equal(judge0_url_parse("http://[::1/", &u, err, sizeof(err)), -1);
}

static void callback_rules(void **state)
{
	(void)state;
	struct judge0_url u;
	struct net_rule rules[2];
	char err[200], why[300];
	assert_int_equal(net_rule_parse("hooks.example.com:8443", false, &rules[0], err, sizeof(err)), 0);
	assert_int_equal(net_rule_parse("10.9.0.0/16:8080", true, &rules[1], err, sizeof(err)), 0);
	struct tenant_reach none = { 0 }, any = { .any = true }, some = { .rules = rules, .n = 2 };
	assert_int_equal(judge0_url_parse("http://ok.test/", &u, err, sizeof(err)), 0);
	assert_string_equal(judge0_callback_refusal(NULL, &u, why, sizeof(why)), "setting callback is not allowed");
	assert_string_equal(judge0_callback_refusal(&none, &u, why, sizeof(why)), "setting callback is not allowed");
	assert_null(judge0_callback_refusal(&any, &u, why, sizeof(why)));
	assert_non_null(judge0_callback_refusal(&some, &u, why, sizeof(why)));
	assert_int_equal(judge0_url_parse("https://HOOKS.example.com:8443/x", &u, err, sizeof(err)), 0);
	assert_null(judge0_callback_refusal(&some, &u, why, sizeof(why)));
	/* addresses: the deny set, unless an address rule names it */
	assert_int_equal(judge0_url_parse("http://127.0.0.1:8080/", &u, err, sizeof(err)), 0);
	assert_non_null(strstr(judge0_callback_refusal(&any, &u, why, sizeof(why)), "loopback"));
	assert_int_equal(judge0_url_parse("http://[::ffff:169.254.169.254]/", &u, err, sizeof(err)), 0);
	assert_non_null(strstr(judge0_callback_refusal(&any, &u, why, sizeof(why)), "metadata"));
	assert_int_equal(judge0_url_parse("http://10.9.3.4:8080/", &u, err, sizeof(err)), 0);
	assert_null(judge0_callback_refusal(&some, &u, why, sizeof(why)));
	assert_non_null(judge0_callback_refusal(&any, &u, why, sizeof(why)));
	/* a public address needs an address rule too, as a run's ceiling does */
	assert_int_equal(judge0_url_parse("http://11.0.0.2/", &u, err, sizeof(err)), 0);
	assert_non_null(judge0_callback_refusal(&any, &u, why, sizeof(why)));
	/* and through a submission: stored for the view and the call */
	struct run_spec rq;
	json_t *in = json_loads("{\"source_code\":\"x\",\"language_id\":71,\"callback_url\":\"http://ok.test/a\"}", 0,
				NULL), *errors = NULL;
	struct tenant ta = { .callback = any }, ts = { .callback = some };
	assert_int_equal(judge0_submission(in, false, &cfg, rts, NRTS, &ta, &rq, &errors), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(rq.client, "judge0"), "callback_url")),
			    "http://ok.test/a");
	run_spec_free(&rq);
	assert_int_equal(judge0_submission(in, false, &cfg, rts, NRTS, &ts, &rq, &errors), -1);
	assert_non_null(strstr(json_string_value(json_array_get(json_object_get(errors, "callback_url"), 0)),
			       "not a destination this tenant's callbacks may reach"));
	json_decref(errors);
	json_decref(in);
}

/* ---- fields ---- */

static void fields(void **state)
{
	(void)state;
	uint64_t m;
	char invalid[100];
	assert_int_equal(judge0_fields(NULL, &m, invalid, sizeof(invalid)), 0);
	assert_int_equal(m, judge0_fields_default());
	assert_int_equal(judge0_fields("token,stdout,", &m, invalid, sizeof(invalid)), 0);
	assert_int_equal(m, judge0_field_bit("token") | judge0_field_bit("stdout"));
	assert_int_equal(judge0_fields("*", &m, invalid, sizeof(invalid)), 0);
	assert_int_equal(__builtin_popcountll(m), 40);
	assert_int_equal(judge0_fields("token, stdout,foo", &m, invalid, sizeof(invalid)), -1);
	assert_string_equal(invalid, " stdout, foo");
	assert_int_equal(judge0_fields("a,,b", &m, invalid, sizeof(invalid)), -1);
	assert_string_equal(invalid, "a, , b");
}

/* ---- the verdict ---- */

static int status_of(const char *result, const char *j0text, struct judge0_verdict *v)
{
	json_t *r = json_loads(result, 0, NULL), *j0 = json_loads(j0text ? j0text : "{\"cpu_time_limit\":2}", 0, NULL);
	assert_non_null(r);
	judge0_verdict(r, j0, v);
	json_decref(r);
	json_decref(j0);
	return v->status;
}

#define RUN(extra) "{\"termination\":\"exited\",\"run\":{\"termination\":\"exited\",\"exit_code\":0," \
		   "\"stdout\":\"hello \\n\\n\",\"usage\":{\"cpu_ms\":10}" extra "}}"

static void verdicts(void **state)
{
	(void)state;
	struct judge0_verdict v;
	assert_int_equal(status_of(RUN(""), NULL, &v), J0_ACCEPTED);
	assert_int_equal(status_of(RUN(""), "{\"expected_output\":\"aGVsbG8=\"}", &v), J0_ACCEPTED);
	assert_int_equal(status_of(RUN(""), "{\"expected_output\":\"aGVsbA==\"}", &v), J0_WRONG_ANSWER);
	assert_int_equal(status_of(RUN(",\"timed_out\":true"), NULL, &v), J0_TIME_LIMIT);
	assert_string_equal(v.message, "Time limit exceeded (wall clock)");
	assert_int_equal(status_of(RUN(",\"cpu_time_exceeded\":true"), NULL, &v), J0_TIME_LIMIT);
	assert_string_equal(v.message, "Time limit exceeded");
	/* within the extra time but over the limit: isolate says TO */
	assert_int_equal(status_of(RUN(",\"usage\":{\"cpu_ms\":2500}"), NULL, &v), J0_TIME_LIMIT);
	/* number_of_runs: a mean under the limit, one run over it is a time
	 * limit, as Judge0 stops at that run */
	assert_int_equal(status_of("{\"termination\":\"exited\",\"repeat\":{\"made\":3,\"asked\":3,\"max_cpu_ms\":2100},"
				   "\"run\":{\"termination\":\"exited\",\"exit_code\":0,\"usage\":{\"cpu_ms\":1500}}}",
				   NULL, &v),
			 J0_TIME_LIMIT);
	assert_int_equal(status_of("{\"termination\":\"exited\",\"repeat\":{\"made\":3,\"asked\":3,\"max_cpu_ms\":1900},"
				   "\"run\":{\"termination\":\"exited\",\"exit_code\":0,\"usage\":{\"cpu_ms\":1500}}}",
				   NULL, &v),
			 J0_ACCEPTED);
	assert_int_equal(status_of(RUN(",\"stdout_truncated\":true"), NULL, &v), J0_SIGXFSZ);
	assert_int_equal(v.signal, 25);
	assert_int_equal(status_of(RUN(",\"oom_killed\":true"), NULL, &v), J0_OTHER);
	assert_string_equal(v.message, "Caught fatal signal 9 (memory limit exceeded)");
	assert_int_equal(status_of(RUN(",\"exit_code\":null,\"signal\":\"SIGSEGV\""), NULL, &v), J0_SIGSEGV);
	assert_string_equal(v.message, "Caught fatal signal 11");
	assert_int_equal(v.exit_code, 0);
	assert_int_equal(status_of(RUN(",\"exit_code\":null,\"signal\":\"SIGFPE\""), NULL, &v), J0_SIGFPE);
	assert_int_equal(status_of(RUN(",\"exit_code\":null,\"signal\":\"SIGABRT\""), NULL, &v), J0_SIGABRT);
	assert_int_equal(status_of(RUN(",\"exit_code\":null,\"signal\":\"SIGXFSZ\""), NULL, &v), J0_SIGXFSZ);
	assert_int_equal(status_of(RUN(",\"exit_code\":null,\"signal\":\"SIGKILL\""), NULL, &v), J0_OTHER);
	assert_int_equal(status_of(RUN(",\"exit_code\":3"), NULL, &v), J0_NZEC);
	assert_string_equal(v.message, "Exited with error status 3");
	assert_int_equal(status_of("{\"termination\":\"compile_error\"}", NULL, &v), J0_COMPILATION_ERROR);
	assert_int_equal(status_of("{\"termination\":\"vm_failed\",\"message\":\"vmm: boom\"}", NULL, &v),
			 J0_INTERNAL_ERROR);
	assert_string_equal(v.message, "vmm: boom");
	assert_int_equal(status_of("{\"termination\":\"not_found\"}", NULL, &v), J0_EXEC_FORMAT_ERROR);
	/* stderr counts when it is redirected to stdout */
	assert_int_equal(status_of("{\"termination\":\"exited\",\"run\":{\"exit_code\":0,\"stdout\":\"a\\n\","
				   "\"stderr\":\"b\\n\"}}",
				   "{\"expected_output\":\"YQpiCg==\",\"redirect_stderr_to_stdout\":true}", &v),
			 J0_ACCEPTED);
}

static void comparison(void **state)
{
	(void)state;
	assert_true(lines_match("a\nb", 3, "a  \nb\n\n\n", 8));
	assert_true(lines_match("a \t\r\nb\n", 7, "a\nb", 3));
	assert_false(lines_match("a\n\nb", 4, "a\nb", 3));
	assert_false(lines_match(" a", 2, "a", 1));
	/* Judge0's nil: an empty stdout never matches, not even "" */
	assert_false(lines_match("", 0, NULL, 0));
	assert_true(lines_match("\n", 1, "\n\n", 2));
}

/* ---- the view ---- */

static json_t *view(const char *request, const char *result, int state, uint64_t mask, bool b64, bool *bad)
{
	json_t *rq = json_loads(request, 0, NULL), *rs = result ? json_loads(result, 0, NULL) : NULL;
	struct judge0_run run = { .id = "0123456789abcdef0123456789abcdef", .state = state, .request = rq,
				  .result = rs, .created_ms = 1000, .rts = rts, .nrts = NRTS, .node = "n1" };
	json_t *v = judge0_view(&run, mask, b64, bad);
	json_decref(rq);
	json_decref(rs);
	return v;
}

#define REQ "{\"files\":[{\"name\":\"script.py\",\"content\":\"cHJpbnQoMSk=\",\"encoding\":\"base64\"}]," \
	    "\"client\":{\"judge0\":{\"language_id\":71,\"cpu_time_limit\":2.5,\"memory_limit\":128000," \
	    "\"redirect_stderr_to_stdout\":false}}}"

static void views(void **state)
{
	(void)state;
	bool bad;
	uint64_t all;
	char inv[10];
	assert_int_equal(judge0_fields("*", &all, inv, sizeof(inv)), 0);
	json_t *v = view(REQ, NULL, 0, all, false, &bad);
	assert_false(bad);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(v, "status"), "id")), J0_IN_QUEUE);
	assert_string_equal(json_string_value(json_object_get(v, "source_code")), "print(1)");
	assert_string_equal(json_string_value(json_object_get(v, "token")), "01234567-89ab-cdef-0123-456789abcdef");
	assert_string_equal(json_string_value(json_object_get(v, "cpu_time_limit")), "2.5");
	assert_string_equal(json_string_value(json_object_get(json_object_get(v, "language"), "name")),
			    "Python (3.11.2)");
	assert_true(json_is_null(json_object_get(v, "finished_at")));
	assert_true(json_is_null(json_object_get(v, "time")));
	json_decref(v);
	v = view(REQ, RUN(",\"stderr\":\"\",\"duration_ms\":31,\"usage\":{\"cpu_ms\":1200,\"max_rss_kib\":3000}"), 2,
		 judge0_fields_default(), true, &bad);
	assert_string_equal(json_string_value(json_object_get(v, "stdout")), "aGVsbG8gCgo=\n");
	assert_true(json_is_null(json_object_get(v, "stderr")));
	assert_string_equal(json_string_value(json_object_get(v, "time")), "1.2");
	assert_int_equal(json_integer_value(json_object_get(v, "memory")), 3000);
	assert_null(json_object_get(v, "wall_time"));
	json_decref(v);
	/* a compile error: the compiler's output, nothing of a run */
	v = view(REQ, "{\"termination\":\"compile_error\",\"compile\":{\"stdout\":\"\",\"stderr\":\"bad\\n\"}}", 2,
		 all, false, &bad);
	assert_string_equal(json_string_value(json_object_get(v, "compile_output")), "bad\n");
	assert_true(json_is_null(json_object_get(v, "stdout")));
	assert_true(json_is_null(json_object_get(v, "exit_code")));
	json_decref(v);
	/* bytes that are not UTF-8 cannot be shown without base64 */
	v = view("{\"files\":[{\"content\":\"/w==\",\"encoding\":\"base64\"}]}", NULL, 1, all, false, &bad);
	assert_true(bad);
	json_decref(v);
	v = view("{\"files\":[{\"content\":\"/w==\",\"encoding\":\"base64\"}]}", NULL, 1, all, true, &bad);
	assert_false(bad);
	assert_string_equal(json_string_value(json_object_get(v, "source_code")), "/w==\n");
	json_decref(v);
	/* a run that ended without a result */
	struct judge0_run run = { .id = "0123456789abcdef0123456789abcdef", .state = 2, .message = "lost" };
	v = judge0_view(&run, all, false, &bad);
	assert_int_equal(json_integer_value(json_object_get(v, "status_id")), J0_INTERNAL_ERROR);
	assert_string_equal(json_string_value(json_object_get(v, "message")), "lost");
	json_decref(v);
}

/* GET /statistics: info_controller.rb's shape and quirks. */
static void statistics(void **state)
{
	(void)state;
	struct judge0_tally t = { 0 };
	/* 2026-12-06 16:20 UTC */
	const int64_t now = INT64_C(1796574000000), day = 86400 * INT64_C(1000);
	judge0_tally_add(&t, 71, J0_ACCEPTED, now - 1000, now);
	judge0_tally_add(&t, 71, J0_ACCEPTED, now - 2000, now);
	judge0_tally_add(&t, 50, J0_WRONG_ANSWER, now - day, now);
	judge0_tally_add(&t, 50, J0_COMPILATION_ERROR, now - 30 * day, now);
	judge0_tally_add(&t, 71, J0_ACCEPTED, now - 31 * day, now);   /* past the 30 days */
	judge0_tally_add(&t, 999, 99, now + day, now);                  /* nothing known of it but the total */
	json_t *v = judge0_statistics(&t, now, now + JUDGE0_STATS_CACHE_MS, rts, sizeof(rts) / sizeof(rts[0]), 16384);
	assert_non_null(v);
	const json_t *sub = json_object_get(v, "submissions");
	assert_int_equal(json_integer_value(json_object_get(sub, "total")), 6);
	assert_int_equal(json_integer_value(json_object_get(sub, "today")), 2);
	const json_t *days = json_object_get(sub, "last_30_days");
	/* the 30 days before today, newest first; today not among them */
	assert_int_equal(json_object_size(days), 30);
	assert_null(json_object_get(days, "2026-12-06"));
	assert_int_equal(json_integer_value(json_object_get(days, "2026-12-05")), 1);
	assert_int_equal(json_integer_value(json_object_get(days, "2026-11-06")), 1);
	assert_string_equal(json_object_iter_key(json_object_iter((json_t *)days)), "2026-12-05");
	assert_string_equal(json_string_value(json_object_get(v, "created_at")), "2026-12-06T16:20:00.000+00:00");
	assert_string_equal(json_string_value(json_object_get(v, "cached_until")), "2026-12-06T16:30:00.000+00:00");
	/* most first */
	const json_t *langs = json_object_get(v, "languages");
	assert_int_equal(json_array_size(langs), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(json_array_get(langs, 0), "language"), "id")), 71);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(langs, 0), "count")), 3);
	const json_t *st = json_object_get(v, "statuses");
	assert_int_equal(json_array_size(st), 3);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_array_get(st, 0), "status"), "name")),
			    "Accepted");
	const json_t *db = json_object_get(v, "database");
	assert_string_equal(json_string_value(json_object_get(db, "size_pretty")), "16 kB");
	assert_int_equal(json_integer_value(json_object_get(db, "size_in_bytes")), 16384);
	json_decref(v);
	/* pg_size_pretty's steps, and an unknown size */
	const struct {
		int64_t bytes;
		const char *text;
	} sizes[] = { { 0, "0 bytes" },	   { 10239, "10239 bytes" }, { 10240, "10 kB" },
		      { 10751, "10 kB" },  { 10752, "11 kB" },	      { 10485247, "10239 kB" },
		      { 10485248, "10 MB" }, { INT64_C(5) << 40, "5120 GB" } };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		v = judge0_statistics(&t, now, now, rts, 0, sizes[i].bytes);
		assert_string_equal(json_string_value(json_object_get(json_object_get(v, "database"), "size_pretty")),
				    sizes[i].text);
		json_decref(v);
	}
	v = judge0_statistics(&t, now, now, rts, 0, -1);
	assert_true(json_is_null(json_object_get(json_object_get(v, "database"), "size_pretty")));
	json_decref(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(config_keys),
		cmocka_unit_test(config_info_has_every_key),
		cmocka_unit_test(languages_of_installed_runtimes),
		cmocka_unit_test(statuses),
		cmocka_unit_test(tokens),
		cmocka_unit_test(ruby_base64),
		cmocka_unit_test(submission_defaults),
		cmocka_unit_test(submission_arguments_split_as_bash),
		cmocka_unit_test(submission_errors_as_rails_says_them),
		cmocka_unit_test(additional_files),
		cmocka_unit_test(multi_file_program),
		cmocka_unit_test(enable_network),
		cmocka_unit_test(callback_urls),
		cmocka_unit_test(callback_rules),
		cmocka_unit_test(fields),
		cmocka_unit_test(verdicts),
		cmocka_unit_test(comparison),
		cmocka_unit_test(views),
		cmocka_unit_test(statistics),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
