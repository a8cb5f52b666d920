/* The run spec (host/run/run_spec.c, run_spec_json.c) as vmrund reads it: argv and source mode,
 * every refusal as one line naming its field, the encodings, the caps,
 * network rules checked and normalized, and the canonical form read back
 * into the same request. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "run_spec.h"
#include "runtime.h"

static char err[512];

static int parse(const char *text, struct run_spec *rq)
{
	err[0] = '\0';
	return run_spec_from_text(text, strlen(text), rq, err, sizeof(err));
}

/* text is refused with a message containing want, and rq is left empty. */
static void refused(const char *text, const char *want)
{
	struct run_spec rq;
	int rc = parse(text, &rq);
	if (rc != -1 || !strstr(err, want))
		fail_msg("%.200s\n  gave rc %d, \"%s\"; wanted \"%s\"", text, rc, err, want);
	assert_null(strchr(err, '\n'));
	assert_null(rq.argv);
	assert_null(rq.files);
	assert_int_equal(rq.nfiles, 0);
	run_spec_free(&rq);
}

static void argv_mode(void **state)
{
	(void)state;
	struct run_spec rq;
	assert_int_equal(
		parse("{\"argv\": [\"python3\", \"-c\", \"print(1)\"], \"runtime\": \"python\","
		      " \"env\": {\"A\": \"1\", \"_B2\": \"x=y\"}, \"stdin\": \"hi\\n\","
		      " \"files\": [{\"name\": \"data.bin\", \"content\": \"AAEC\", \"encoding\": \"base64\"}],"
		      " \"limits\": {\"timeout_s\": 2.5, \"memory_mib\": 512, \"cpus\": 2, \"disk_mib\": 128,"
		      " \"max_output\": 1e3}, \"keep_artifacts\": true}",
		      &rq),
		0);
	assert_false(rq.source);
	assert_string_equal(rq.runtime, "python");
	assert_int_equal(rq.argc, 3);
	assert_string_equal(rq.argv[0], "python3");
	assert_string_equal(rq.argv[2], "print(1)");
	assert_null(rq.argv[3]);
	assert_int_equal(rq.nenv, 2);
	assert_string_equal(rq.env[0], "A=1");
	assert_string_equal(rq.env[1], "_B2=x=y");
	assert_true(rq.has_stdin);
	assert_int_equal(rq.stdin_len, 3);
	assert_memory_equal(rq.stdin_data, "hi\n", 3);
	assert_int_equal(rq.nfiles, 1);
	assert_string_equal(rq.files[0].name, "data.bin");
	assert_int_equal(rq.files[0].len, 3);
	assert_memory_equal(rq.files[0].data, "\0\1\2", 3);
	assert_true(rq.timeout_s == 2.5);
	assert_int_equal(rq.memory_mib, 512);
	assert_int_equal(rq.cpus, 2);
	assert_int_equal(rq.disk_mib, 128);
	assert_int_equal(rq.max_output, 1000);
	assert_true(rq.keep_artifacts);
	run_spec_free(&rq);
	run_spec_free(&rq); /* twice is safe */

	assert_int_equal(parse("{\"argv\": [\"true\"]}", &rq), 0);
	assert_int_equal(rq.argc, 1);
	assert_string_equal(rq.runtime, "");
	assert_false(rq.has_stdin);
	run_spec_free(&rq);
}

static void source_mode(void **state)
{
	(void)state;
	struct run_spec rq;
	assert_int_equal(parse("{\"runtime\": \"c\", \"files\": [{\"name\": \"main.c\", \"content\": \"int main(){}\"},"
			       " {\"name\": \"util.h\", \"content\": \"2f2f\", \"encoding\": \"hex\"}],"
			       " \"args\": [\"a\", \"\"], \"compile\": {\"timeout_s\": 30, \"memory_mib\": 512},"
			       " \"run\": {\"cpu_time_ms\": 1500}}",
			       &rq),
			 0);
	assert_true(rq.source);
	assert_string_equal(rq.runtime, "c");
	assert_int_equal(rq.nfiles, 2);
	assert_int_equal(rq.files[0].len, 12);
	assert_memory_equal(rq.files[1].data, "//", 2);
	assert_int_equal(rq.argc, 2);
	assert_string_equal(rq.argv[1], "");
	assert_true(rq.compile.timeout_s == 30);
	assert_int_equal(rq.compile.memory_mib, 512);
	assert_int_equal(rq.run.cpu_time_ms, 1500);
	run_spec_free(&rq);

	/* an empty file has no data */
	assert_int_equal(parse("{\"runtime\": \"bash\", \"files\": [{\"name\": \"x.sh\", \"content\": \"\"}]}", &rq),
			 0);
	assert_null(rq.files[0].data);
	assert_int_equal(rq.files[0].len, 0);
	run_spec_free(&rq);
}

static void refuses_shape(void **state)
{
	(void)state;
	refused("[1]", "must be a JSON object");
	refused("{\"argv\": [\"x\"]", "malformed JSON at line 1 column");
	refused("{\"argv\": [\"x\"], \"argv\": [\"y\"]}", "malformed JSON");
	refused("{}", "argv, files or run.command is required");
	refused("{\"argv\": [\"x\"], \"foo\": 1}", "unknown field \"foo\"");
	refused("{\"argv\": [\"x\"], \"fo\\no\": 1}", "unknown field \"fo?o\"");
	refused("{\"argv\": [\"x\"], \"args\": [\"y\"]}", "args: only without argv");
	refused("{\"argv\": [\"x\"], \"compile\": {}}", "compile: only without argv");
	refused("{\"argv\": [\"x\"], \"run\": {}}", "run: only without argv");
	refused("{\"files\": [{\"name\": \"a\", \"content\": \"\"}]}", "runtime: is required");
	refused("{\"runtime\": \"c\", \"files\": []}", "files: must not be empty");
	refused("{\"argv\": [\"x\"], \"limits\": {\"a\": {\"b\": {\"c\": {\"d\": {\"e\": {\"f\": {\"g\": {\"h\": "
		"1}}}}}}}}}",
		"JSON nested deeper than 8");
	refused("{\"argv\": [\"x\"], \"keep_artifacts\": 1}", "keep_artifacts: must be true or false");
}

static void refuses_types(void **state)
{
	(void)state;
	refused("{\"argv\": \"ls\"}", "argv: must be an array of strings");
	refused("{\"argv\": []}", "argv: must not be empty");
	refused("{\"argv\": [\"\"]}", "argv[0]: must not be empty");
	refused("{\"argv\": [\"ls\", 3]}", "argv[1]: must be a string");
	refused("{\"runtime\": \"c\", \"files\": [{\"name\": \"a\", \"content\": \"\"}], \"args\": [null]}",
		"args[0]: must be a string");
	refused("{\"argv\": [\"x\"], \"runtime\": 3}", "runtime: must be a string");
	refused("{\"argv\": [\"x\"], \"runtime\": \"Python\"}", "runtime: not a runtime name");
	refused("{\"argv\": [\"x\"], \"runtime\": \"\"}", "runtime: not a runtime name");
	refused("{\"argv\": [\"x\"], \"stdin\": 1}", "stdin: must be a string");
	refused("{\"argv\": [\"x\"], \"stdin_encoding\": \"hex\"}", "stdin_encoding: given without stdin");
	refused("{\"argv\": [\"x\"], \"env\": []}", "env: must be an object");
	refused("{\"argv\": [\"x\"], \"env\": {\"1A\": \"x\"}}", "env: \"1A\" is not a variable name");
	refused("{\"argv\": [\"x\"], \"env\": {\"A-B\": \"x\"}}", "is not a variable name");
	refused("{\"argv\": [\"x\"], \"env\": {\"A\": 1}}", "env.A: must be a string");
	refused("{\"argv\": [\"x\"], \"limits\": []}", "limits: must be an object");
	refused("{\"argv\": [\"x\"], \"limits\": {\"timeout\": 1}}", "limits: unknown field \"timeout\"");
	refused("{\"argv\": [\"x\"], \"limits\": {\"timeout_s\": \"1\"}}", "limits.timeout_s: must be a number");
	refused("{\"argv\": [\"x\"], \"limits\": {\"timeout_s\": 0}}", "limits.timeout_s: must be above 0");
	refused("{\"argv\": [\"x\"], \"limits\": {\"timeout_s\": 86401}}", "limits.timeout_s: must be above 0");
	refused("{\"argv\": [\"x\"], \"limits\": {\"memory_mib\": -1}}", "limits.memory_mib: must not be negative");
	refused("{\"argv\": [\"x\"], \"limits\": {\"memory_mib\": 1.5}}", "limits.memory_mib: must be a whole number");
	refused("{\"argv\": [\"x\"], \"limits\": {\"memory_mib\": 1048577}}", "limits.memory_mib: must be at most");
	refused("{\"argv\": [\"x\"], \"limits\": {\"cpus\": true}}", "limits.cpus: must be a whole number");
	refused("{\"argv\": [\"x\"], \"limits\": {\"max_output\": 1e300}}", "limits.max_output: must be at most");
	refused("{\"argv\": [\"x\"], \"client\": \"judge0\"}", "client: must be an object");
	refused("{\"argv\": [\"x\"], \"compile\": {\"args\": [\"-O3\"]}}", "compile: only without argv (source mode)");
	refused("{\"runtime\": \"c\", \"files\": [{\"name\": \"a\", \"content\": \"\"}], \"compile\": {\"args\": \"-O3\"}}",
		"compile.args: must be an array of strings");
	refused("{\"runtime\": \"c\", \"files\": [{\"name\": \"a\", \"content\": \"\"}], \"run\": {\"args\": []}}",
		"run: unknown field \"args\"");
	const char *src = "{\"runtime\": \"c\", \"files\": [{\"name\": \"a\", \"content\": \"\"}], ";
	char text[256];
	snprintf(text, sizeof(text), "%s\"run\": {\"memory\": 1}}", src);
	refused(text, "run: unknown field \"memory\"");
	snprintf(text, sizeof(text), "%s\"compile\": {\"cpu_time_ms\": -5}}", src);
	refused(text, "compile.cpu_time_ms: must not be negative");
	snprintf(text, sizeof(text), "%s\"compile\": {\"timeout_s\": null}}", src);
	refused(text, "compile.timeout_s: must be a number");
	snprintf(text, sizeof(text), "%s\"run\": 5}", src);
	refused(text, "run: must be an object");
}

static void refuses_files(void **state)
{
	(void)state;
	static const struct {
		const char *file, *want;
	} cases[] = {
		{ "3", "files[0]: must be an object" },
		{ "{\"content\": \"\"}", "files[0].name: is required" },
		{ "{\"name\": \"a\"}", "files[0].content: is required" },
		{ "{\"name\": \"a\", \"content\": 1}", "files[0].content: must be a string" },
		{ "{\"name\": \"a\", \"content\": \"\", \"mode\": 1}", "files[0]: unknown field \"mode\"" },
		{ "{\"name\": \"a/b\", \"content\": \"\"}", "files[0].name: must not contain '/'" },
		{ "{\"name\": \"\", \"content\": \"\"}", "files[0].name: must not be empty" },
		{ "{\"name\": \".\", \"content\": \"\"}", "files[0].name: must not be \".\" or \"..\"" },
		{ "{\"name\": \"..\", \"content\": \"\"}", "files[0].name: must not be \".\" or \"..\"" },
		{ "{\"name\": \"artifacts\", \"content\": \"\"}", "files[0].name: \"artifacts\" is the artifacts" },
		{ "{\"name\": \"-rf\", \"content\": \"\"}", "files[0].name: must not start with '-'" },
		{ "{\"name\": \"a\\tb\", \"content\": \"\"}", "files[0].name: must not contain control characters" },
		{ "{\"name\": 7, \"content\": \"\"}", "files[0].name: must be a string" },
		{ "{\"name\": \"a\", \"content\": \"\", \"encoding\": \"latin1\"}",
		  "files[0].encoding: must be utf8, base64 or hex" },
		{ "{\"name\": \"a\", \"content\": \"\", \"encoding\": 2}", "files[0].encoding: must be a string" },
		{ "{\"name\": \"a\", \"content\": \"abc\", \"encoding\": \"hex\"}", "files[0].content: not valid hex" },
		{ "{\"name\": \"a\", \"content\": \"zz\", \"encoding\": \"hex\"}", "files[0].content: not valid hex" },
		{ "{\"name\": \"a\", \"content\": \"QQ=!\", \"encoding\": \"base64\"}",
		  "files[0].content: not valid base64" },
		{ "{\"name\": \"a\", \"content\": \"QUJDR\", \"encoding\": \"base64\"}",
		  "files[0].content: not valid base64" },
	};
	char text[512];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(text, sizeof(text), "{\"runtime\": \"c\", \"files\": [%s]}", cases[i].file);
		refused(text, cases[i].want);
	}
	refused("{\"argv\": [\"x\"], \"files\": {}}", "files: must be an array of objects");
	refused("{\"argv\": [\"x\"], \"files\": [{\"name\": \"a\", \"content\": \"\"}, {\"name\": \"a\", \"content\": "
		"\"\"}]}",
		"files[1].name: \"a\" is given twice");
	char name[300];
	memset(name, 'n', 256);
	name[256] = '\0';
	snprintf(text, sizeof(text), "{\"argv\": [\"x\"], \"files\": [{\"name\": \"%s\", \"content\": \"\"}]}", name);
	refused(text, "files[0].name: longer than 255 bytes");
}

/* A body with n files of size bytes each and a stdin of in bytes. */
static char *big_body(unsigned n, size_t size, size_t in)
{
	size_t cap = n * (size + 64) + in + 128;
	char *t = malloc(cap), *p = t;
	p += sprintf(p, "{\"argv\": [\"x\"], \"files\": [");
	for (unsigned i = 0; i < n; i++) {
		p += sprintf(p, "%s{\"name\": \"f%u\", \"content\": \"", i ? "," : "", i);
		memset(p, 'a', size);
		p += size;
		p += sprintf(p, "\"}");
	}
	p += sprintf(p, "], \"stdin\": \"");
	memset(p, 'b', in);
	p += in;
	sprintf(p, "\"}");
	return t;
}

static void caps(void **state)
{
	(void)state;
	char *t = big_body(1, RUN_SPEC_MAX_FILE_BYTES + 1, 0);
	refused(t, "files[0].content: over 8388608 bytes");
	free(t);
	t = big_body(2, 7u << 20, 0);
	refused(t, "files[1]: files and stdin over 12582912 bytes in all");
	free(t);
	t = big_body(1, 6u << 20, (6u << 20) + 1);
	refused(t, "stdin: files and stdin over");
	free(t);
	struct run_spec rq;
	t = big_body(1, RUN_SPEC_MAX_FILE_BYTES, 4u << 20);
	assert_int_equal(parse(t, &rq), 0);
	run_spec_free(&rq);
	free(t);
	t = big_body(RUN_SPEC_MAX_FILES + 1, 1, 0);
	refused(t, "files: at most 64 files");
	free(t);

	char text[16384], *p = text;
	p += sprintf(p, "{\"argv\": [");
	for (int i = 0; i <= RUN_SPEC_MAX_ARGS; i++)
		p += sprintf(p, "%s\"a\"", i ? "," : "");
	sprintf(p, "]}");
	refused(text, "argv: at most 256 arguments");
	p = text + sprintf(text, "{\"argv\": [\"x\"], \"env\": {");
	for (int i = 0; i <= RUN_SPEC_MAX_ENV; i++)
		p += sprintf(p, "%s\"V%d\": \"\"", i ? "," : "", i);
	sprintf(p, "}}");
	refused(text, "env: at most 64 variables");
	p = text + sprintf(text, "{\"argv\": [\"x\", \"");
	memset(p, 'a', RUN_SPEC_MAX_ARG_LEN + 1);
	sprintf(p + RUN_SPEC_MAX_ARG_LEN + 1, "\"]}");
	refused(text, "argv[1]: longer than 4096 bytes");
	p = text + sprintf(text, "{\"argv\": [\"x\"], \"env\": {\"AB\": \"");
	memset(p, 'a', RUN_SPEC_MAX_ENV_LEN - 2);
	sprintf(p + RUN_SPEC_MAX_ENV_LEN - 2, "\"}}");
	refused(text, "env.AB: NAME=VALUE longer than 4096 bytes");
}

/* A NUL inside a string can come only from a json_t built by hand. */
static void refuses_nul(void **state)
{
	(void)state;
	json_t *body = json_pack("{s:[s,s%]}", "argv", "ls", "a\0b", (size_t)3);
	struct run_spec rq;
	assert_int_equal(run_spec_from_json(body, &rq, err, sizeof(err)), -1);
	assert_string_equal(err, "argv[1]: must not contain a NUL byte");
	json_decref(body);
	body = json_pack("{s:[s],s:[{s:s%,s:s}]}", "argv", "ls", "files", "name", "a\0b", (size_t)3, "content", "");
	assert_int_equal(run_spec_from_json(body, &rq, err, sizeof(err)), -1);
	assert_string_equal(err, "files[0].name: must not contain a NUL byte");
	json_decref(body);
}

static void decodes(void **state)
{
	(void)state;
	unsigned char *out;
	size_t len;
	static const struct {
		const char *in, *enc, *want;
		size_t n;
	} ok[] = {
		{ "", "base64", "", 0 },
		{ "QQ==", "base64", "A", 1 },
		{ "QQ", "base64", "A", 1 },
		{ "QUI=", "base64", "AB", 2 },
		{ "QUI", "base64", "AB", 2 },
		{ "QUJD", "base64", "ABC", 3 },
		{ "+/8=", "base64", "\xfb\xff", 2 },
		{ "00fFaB", "hex", "\x00\xff\xab", 3 },
		{ "", "hex", "", 0 },
		{ "h\xc3\xa9", "utf8", "h\xc3\xa9", 3 },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(run_spec_decode(ok[i].in, strlen(ok[i].in), ok[i].enc, 100, &out, &len, err, sizeof(err)),
				 0);
		assert_int_equal(len, ok[i].n);
		if (!len)
			assert_null(out);
		else
			assert_memory_equal(out, ok[i].want, len);
		free(out);
	}
	static const struct {
		const char *in, *enc;
	} bad[] = {
		{ "Q", "base64" },    { "Q===", "base64" },     { "QQ=", "base64" },
		{ "Q Q=", "base64" }, { "QQ==QQ==", "base64" }, { "QQ\n", "base64" },
		{ "0", "hex" },       { "0g", "hex" },          { "ab", "utf-8" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		out = (unsigned char *)"x";
		assert_int_equal(
			run_spec_decode(bad[i].in, strlen(bad[i].in), bad[i].enc, 100, &out, &len, err, sizeof(err)), -1);
		assert_null(out);
	}
	assert_int_equal(run_spec_decode("QUJD", 4, "base64", 2, &out, &len, err, sizeof(err)), -1);
	assert_string_equal(err, "over 2 bytes");
	assert_int_equal(run_spec_decode("abc", 3, "utf8", 2, &out, &len, err, sizeof(err)), -1);
	assert_int_equal(run_spec_decode("abcdef", 6, "hex", 2, &out, &len, err, sizeof(err)), -1);
}

static void same_req(const struct run_spec *a, const struct run_spec *b)
{
	assert_string_equal(a->runtime, b->runtime);
	assert_int_equal(a->source, b->source);
	assert_int_equal(a->argc, b->argc);
	for (unsigned i = 0; i < a->argc; i++)
		assert_string_equal(a->argv[i], b->argv[i]);
	assert_int_equal(a->nfiles, b->nfiles);
	for (unsigned i = 0; i < a->nfiles; i++) {
		assert_string_equal(a->files[i].name, b->files[i].name);
		assert_int_equal(a->files[i].len, b->files[i].len);
		assert_int_equal(a->files[i].executable, b->files[i].executable);
		if (a->files[i].len)
			assert_memory_equal(a->files[i].data, b->files[i].data, a->files[i].len);
	}
	assert_int_equal(a->has_stdin, b->has_stdin);
	assert_int_equal(a->stdin_len, b->stdin_len);
	if (a->stdin_len)
		assert_memory_equal(a->stdin_data, b->stdin_data, a->stdin_len);
	assert_int_equal(a->nenv, b->nenv);
	for (unsigned i = 0; i < a->nenv; i++)
		assert_string_equal(a->env[i], b->env[i]);
	assert_true(a->timeout_s == b->timeout_s);
	assert_int_equal(a->memory_mib, b->memory_mib);
	assert_int_equal(a->cpus, b->cpus);
	assert_int_equal(a->disk_mib, b->disk_mib);
	assert_int_equal(a->max_output, b->max_output);
	const struct run_stage_limits *sa[] = { &a->compile, &a->run }, *sb[] = { &b->compile, &b->run };
	for (int i = 0; i < 2; i++) {
		assert_true(sa[i]->timeout_s == sb[i]->timeout_s);
		assert_int_equal(sa[i]->memory_mib, sb[i]->memory_mib);
		assert_int_equal(sa[i]->cpu_time_ms, sb[i]->cpu_time_ms);
	}
	assert_int_equal(a->keep_artifacts, b->keep_artifacts);
	assert_int_equal(a->repeat > 1 ? a->repeat : 1, b->repeat > 1 ? b->repeat : 1);
	assert_int_equal(a->nnet, b->nnet);
	for (unsigned i = 0; i < a->nnet; i++)
		assert_memory_equal(&a->net[i], &b->net[i], sizeof(a->net[i]));
	assert_string_equal(a->from_checkpoint, b->from_checkpoint);
	assert_string_equal(a->expect_digest, b->expect_digest);
	assert_string_equal(a->checkpoint_node, b->checkpoint_node);
	assert_int_equal(a->ncompile_args, b->ncompile_args);
	for (unsigned i = 0; i < a->ncompile_args; i++)
		assert_string_equal(a->compile_args[i], b->compile_args[i]);
	assert_true((!a->client && !b->client) || json_equal(a->client, b->client));
	assert_int_equal(a->nwfiles, b->nwfiles);
	for (unsigned i = 0; i < a->nwfiles; i++) {
		assert_string_equal(a->wfiles[i].name, b->wfiles[i].name);
		assert_int_equal(a->wfiles[i].len, b->wfiles[i].len);
		assert_int_equal(a->wfiles[i].executable, b->wfiles[i].executable);
		if (a->wfiles[i].len)
			assert_memory_equal(a->wfiles[i].data, b->wfiles[i].data, a->wfiles[i].len);
	}
	assert_int_equal(a->nrun_cmd, b->nrun_cmd);
	for (unsigned i = 0; i < a->nrun_cmd; i++)
		assert_string_equal(a->run_cmd[i], b->run_cmd[i]);
	assert_int_equal(a->ncompile_cmd, b->ncompile_cmd);
	for (unsigned i = 0; i < a->ncompile_cmd; i++)
		assert_string_equal(a->compile_cmd[i], b->compile_cmd[i]);
}

/* workspace_files: paths, each checked part by part, and no place taken
 * twice (as a file, or as a file and a directory). */
static void workspace_files(void **state)
{
	(void)state;
	struct run_spec rq;
	assert_int_equal(parse("{\"runtime\": \"c\", \"files\": [{\"name\": \"main.c\", \"content\": \"x\"}],"
			       " \"workspace_files\": [{\"name\": \"data/in/1.txt\", \"content\": \"aGk=\", "
			       "\"encoding\": \"base64\"}, {\"name\": \"lib.h\", \"content\": \"\"},"
			       " {\"name\": \"data/in/2.txt\", \"content\": \"\"}, {\"name\": \"-x\", \"content\": \"\"}]}",
			       &rq),
			 0);
	assert_true(rq.source);
	assert_int_equal(rq.nfiles, 1);
	assert_int_equal(rq.nwfiles, 4);
	assert_string_equal(rq.wfiles[0].name, "data/in/1.txt");
	assert_int_equal(rq.wfiles[0].len, 2);
	assert_memory_equal(rq.wfiles[0].data, "hi", 2);
	run_spec_free(&rq);
	assert_int_equal(parse("{\"argv\": [\"ls\"], \"workspace_files\": [{\"name\": \"a/b\", \"content\": \"\"}]}", &rq),
			 0);
	assert_false(rq.source);
	run_spec_free(&rq);
#define WF(name) "{\"argv\": [\"ls\"], \"workspace_files\": [{\"name\": \"" name "\", \"content\": \"\"}]}"
	refused(WF("../x"), "workspace_files[0].name: \"../x\" has a \"..\" component");
	refused(WF("a/./b"), "has a \".\" component");
	refused(WF("a//b"), "has an empty component");
	refused(WF("a/"), "has an empty component");
	refused(WF("/etc/passwd"), "must be a relative path");
	refused(WF(""), "must not be empty");
	refused(WF("artifacts/x"), "\"artifacts\" is the artifacts directory");
	refused(WF("lost+found/x"), "\"lost+found\" is the workspace's own directory");
	refused(WF("lost+found"), "is the workspace's own directory");
	refused(WF("a\\nb"), "control characters");
	refused(WF("1/2/3/4/5/6/7/8/9"), "deeper than 8 components");
#undef WF
	refused("{\"argv\": [\"ls\"], \"workspace_files\": [{\"name\": \"a/b\", \"content\": \"\"},"
		" {\"name\": \"a\", \"content\": \"\"}]}",
		"workspace_files[1].name: \"a\" and workspace_files[0] make one a file and a directory");
	refused("{\"argv\": [\"ls\"], \"workspace_files\": [{\"name\": \"a\", \"content\": \"\"},"
		" {\"name\": \"a/b\", \"content\": \"\"}]}",
		"make one a file and a directory");
	refused("{\"argv\": [\"ls\"], \"workspace_files\": [{\"name\": \"a\", \"content\": \"\"},"
		" {\"name\": \"a\", \"content\": \"\"}]}",
		"workspace_files[1].name: \"a\" is given twice");
	refused("{\"runtime\": \"c\", \"files\": [{\"name\": \"m.c\", \"content\": \"\"}],"
		" \"workspace_files\": [{\"name\": \"m.c\", \"content\": \"\"}]}",
		"workspace_files[0].name: \"m.c\" is taken by files[0]");
	refused("{\"runtime\": \"c\", \"files\": [{\"name\": \"m\", \"content\": \"\"}],"
		" \"workspace_files\": [{\"name\": \"m/x\", \"content\": \"\"}]}",
		"is taken by files[0]");
	refused("{\"argv\": [\"x\"], \"from_checkpoint\": \"a/b\", \"workspace_files\": [{\"name\": \"f\", \"content\": \"\"}]}",
		"workspace_files: a run from a checkpoint has the checkpoint's workspace");
	refused("{\"argv\": [\"x\"], \"workspace_files\": {}}", "workspace_files: must be an array of objects");
	refused("{\"argv\": [\"x\"], \"workspace_files\": [{\"name\": \"a\", \"content\": \"\", \"executable\": 1}]}",
		"workspace_files[0].executable: must be true or false");
}

/* run.command and compile.command: the stages' own, in source mode. */
static void own_commands(void **state)
{
	(void)state;
	struct run_spec rq;
	assert_int_equal(parse("{\"runtime\": \"c\", \"run\": {\"command\": [\"bash\", \"run\"], \"timeout_s\": 2},"
			       " \"compile\": {\"command\": [\"bash\", \"compile\"]},"
			       " \"workspace_files\": [{\"name\": \"run\", \"content\": \"\"}]}",
			       &rq),
			 0);
	assert_true(rq.source);
	assert_int_equal(rq.nfiles, 0);
	assert_int_equal(rq.nrun_cmd, 2);
	assert_string_equal(rq.run_cmd[1], "run");
	assert_int_equal(rq.ncompile_cmd, 2);
	/* the runtime's compile template goes with its run template */
	struct runtime c = { .name = "c", .compile = "gcc -o /tmp/p {files}", .run = "/tmp/p" };
	struct run_effective e;
	run_spec_effective(&rq, &c, &e);
	assert_int_equal(e.nstages, 2);
	assert_true(e.stage[1].timeout_s == 2);
	run_spec_free(&rq);
	assert_int_equal(parse("{\"runtime\": \"c\", \"run\": {\"command\": [\"bash\", \"run\"]}}", &rq), 0);
	run_spec_effective(&rq, &c, &e);
	assert_int_equal(e.nstages, 1);
	run_spec_free(&rq);
	refused("{\"runtime\": \"c\", \"compile\": {\"command\": [\"make\"]}, \"files\": [{\"name\": \"m.c\", "
		"\"content\": \"\"}]}",
		"compile.command: only with run.command");
	refused("{\"runtime\": \"c\", \"compile\": {\"command\": [\"make\"], \"args\": [\"-O2\"]},"
		" \"run\": {\"command\": [\"./a\"]}}",
		"compile.args: not with compile.command");
	refused("{\"runtime\": \"c\", \"run\": {\"command\": []}}", "run.command: must not be empty");
	refused("{\"runtime\": \"c\"}", "argv, files or run.command is required");
	refused("{\"argv\": [\"x\"], \"run\": {\"command\": [\"y\"]}}", "run: only without argv");
}

/* A verification run's fields: their shapes, and no files beside them. */
static void checkpoint_fields(void **state)
{
	(void)state;
	struct run_spec rq;
	assert_int_equal(parse("{\"argv\": [\"x\"], \"from_checkpoint\": \"abc/cp.1\"}", &rq), 0);
	assert_string_equal(rq.from_checkpoint, "abc/cp.1");
	assert_string_equal(rq.expect_digest, "");
	run_spec_free(&rq);
	refused("{\"argv\": [\"x\"], \"from_checkpoint\": \"abc\"}", "from_checkpoint: \"SANDBOX_ID/NAME\"");
	refused("{\"argv\": [\"x\"], \"from_checkpoint\": \"/cp\"}", "from_checkpoint");
	refused("{\"argv\": [\"x\"], \"from_checkpoint\": \"abc/../x\"}", "from_checkpoint");
	refused("{\"argv\": [\"x\"], \"from_checkpoint\": \"0123456789abcdef0123456789abcdef0/c\"}", "from_checkpoint");
	refused("{\"argv\": [\"x\"], \"from_checkpoint\": 7}", "from_checkpoint");
	refused("{\"argv\": [\"x\"], \"from_checkpoint\": \"a/b\", \"expect_digest\": \"ABC\"}", "expect_digest: the 64 hex");
	refused("{\"argv\": [\"x\"], \"expect_digest\": \"aa\"}", "expect_digest: only with from_checkpoint");
	refused("{\"argv\": [\"x\"], \"checkpoint_node\": \"n\"}", "checkpoint_node: only with from_checkpoint");
	refused("{\"argv\": [\"x\"], \"from_checkpoint\": \"a/b\", \"files\": [{\"name\": \"f\", \"content\": \"\"}]}",
		"files: a run from a checkpoint has the checkpoint's workspace");
}

static void round_trip(void **state)
{
	(void)state;
	static const char *const bodies[] = {
		"{\"argv\": [\"true\"]}",
		"{\"argv\": [\"true\"], \"repeat\": 20}",
		"{\"argv\": [\"sh\", \"-c\", \"cat\"], \"stdin\": \"\", \"env\": {\"Z\": \"\", \"A\": \"1\"},"
		" \"files\": [{\"name\": \"e\", \"content\": \"\"}, {\"name\": \"b\", \"content\": \"/w==\", "
		"\"encoding\": \"base64\"}],"
		" \"limits\": {\"timeout_s\": 0.1, \"max_output\": 7}, \"keep_artifacts\": false}",
		"{\"runtime\": \"c\", \"files\": [{\"name\": \"m.c\", \"content\": \"x\\u00e9\\n\"}], \"args\": [],"
		" \"compile\": {\"timeout_s\": 1e-3}, \"run\": {\"memory_mib\": 0, \"cpu_time_ms\": 3}, "
		"\"keep_artifacts\": true}",
		"{\"runtime\": \"python\", \"files\": [{\"name\": \"a b\", \"content\": \"01\", \"encoding\": "
		"\"hex\"}],"
		" \"args\": [\"1\"], \"stdin\": \"ff00\", \"stdin_encoding\": \"hex\", \"limits\": {\"cpus\": 3, "
		"\"disk_mib\": 9,"
		" \"memory_mib\": 100}}",
		"{\"argv\": [\"pip\", \"download\", \"x\"], \"network\": {\"allow\": [\"PyPI.org.\","
		" \"*.pythonhosted.org:443\", \"b\\u00fccher.example\"], \"allow_addr\": [\"10.1.2.0/24:3128\","
		" \"[fd00::/8]:8080\", \"192.0.2.7\"]}}",
		"{\"argv\": [\"x\"], \"network\": {\"allow_addr\": [\"fd00::/8\"]}}",
		"{\"runtime\": \"c\", \"files\": [{\"name\": \"m.c\", \"content\": \"\"}], \"compile\": {\"args\": [\"-O3\", \"\"]},"
		" \"client\": {\"judge0\": {\"language_id\": 50}}}",
		"{\"argv\": [\"x\"], \"network\": {\"allow\": [\"example.test\"], \"allow_addr\": []}}",
		"{\"runtime\": \"c++\", \"run\": {\"command\": [\"bash\", \"run\"]}, \"compile\": {\"command\": [\"bash\","
		" \"compile.sh\"], \"timeout_s\": 3}, \"args\": [\"1\"], \"workspace_files\": [{\"name\": \"src/a b.c\","
		" \"content\": \"x\"}, {\"name\": \"run\", \"content\": \"\"}]}",
		"{\"argv\": [\"ls\"], \"files\": [{\"name\": \"a\", \"content\": \"1\", \"executable\": true}],"
		" \"workspace_files\": [{\"name\": \"d/e\", \"content\": \"2\", \"executable\": true}, {\"name\": \"d/f\","
		" \"content\": \"3\", \"executable\": false}]}",
		"{\"argv\": [\"pytest\"], \"from_checkpoint\": \"0123456789abcdef0123456789abcdef/fixed-1\","
		" \"expect_digest\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\", \"checkpoint_node\": \"n1\"}",
	};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		struct run_spec a, b;
		if (parse(bodies[i], &a))
			fail_msg("%s: %s", bodies[i], err);
		json_t *j = run_spec_to_json(&a);
		assert_non_null(j);
		char *text = json_dumps(j, JSON_COMPACT);
		assert_non_null(text);
		if (parse(text, &b))
			fail_msg("%s: %s", text, err);
		same_req(&a, &b);
		free(text);
		json_decref(j);
		run_spec_free(&a);
		run_spec_free(&b);
	}
	/* the canonical form leaves out what is not set */
	struct run_spec a;
	assert_int_equal(parse("{\"argv\": [\"x\"]}", &a), 0);
	json_t *j = run_spec_to_json(&a);
	char *text = json_dumps(j, JSON_COMPACT);
	assert_string_equal(text, "{\"argv\":[\"x\"]}");
	free(text);
	json_decref(j);
	run_spec_free(&a);
}

/* rq's rules of one list (addr: allow_addr) as written again, joined by
 * spaces into out. How many there are. */
static unsigned rules(const struct run_spec *rq, bool addr, char *out, size_t cap)
{
	unsigned n = 0;
	out[0] = '\0';
	for (unsigned i = 0; i < rq->nnet; i++) {
		if ((rq->net[i].kind == NET_RULE_ADDR) != addr)
			continue;
		char text[300];
		net_rule_format(&rq->net[i], text, sizeof(text));
		snprintf(out + strlen(out), cap - strlen(out), "%s%s", n++ ? " " : "", text);
	}
	return n;
}

static void network(void **state)
{
	(void)state;
	struct run_spec rq;
	assert_int_equal(parse("{\"argv\": [\"x\"], \"network\": {\"allow\": [\"PyPI.org.\", \"*.Example.com:8443\","
			       " \"b\\u00fccher.example\"], \"allow_addr\": [\"10.1.2.0/24:3128\","
			       " \"[FD00::/8]:8080\"]}}",
			       &rq),
			 0);
	/* kept parsed and normalized, as the run library will read them */
	char text[1024];
	assert_int_equal(rules(&rq, false, text, sizeof(text)), 3);
	assert_string_equal(text, "pypi.org *.example.com:8443 xn--bcher-kva.example");
	assert_int_equal(rules(&rq, true, text, sizeof(text)), 2);
	assert_string_equal(text, "10.1.2.0/24:3128 [fd00::/8]:8080");
	/* and written so in the canonical form */
	json_t *j = run_spec_to_json(&rq);
	char *dumped = json_dumps(json_object_get(j, "network"), JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(dumped, "{\"allow\":[\"pypi.org\",\"*.example.com:8443\",\"xn--bcher-kva.example\"],"
				    "\"allow_addr\":[\"10.1.2.0/24:3128\",\"[fd00::/8]:8080\"]}");
	free(dumped);
	json_decref(j);
	run_spec_free(&rq);
	run_spec_free(&rq);

	/* no network object, or an empty one: no rules */
	assert_int_equal(parse("{\"argv\": [\"x\"], \"network\": {}}", &rq), 0);
	assert_int_equal(rq.nnet, 0);
	assert_null(rq.net);
	run_spec_free(&rq);

	refused("{\"argv\": [\"x\"], \"network\": [\"a.com\"]}", "network: must be an object");
	refused("{\"argv\": [\"x\"], \"network\": {\"allow\": [\"a.com\"], \"deny\": []}}",
		"network: unknown field \"deny\"");
	refused("{\"argv\": [\"x\"], \"network\": {\"allow\": \"a.com\"}}",
		"network.allow: must be an array of strings");
	refused("{\"argv\": [\"x\"], \"network\": {\"allow\": [\"a.com\", 7]}}", "network.allow[1]: must be a string");
	refused("{\"argv\": [\"x\"], \"network\": {\"allow\": [\"a.com\", \"127.0.0.1\"]}}",
		"network.allow[1]: 127.0.0.1 is an IP address: allow it with network.allow_addr");
	refused("{\"argv\": [\"x\"], \"network\": {\"allow\": [\"0x7f.1\"]}}", "network.allow[0]: ");
	refused("{\"argv\": [\"x\"], \"network\": {\"allow\": [\"\"]}}", "network.allow[0]: an empty network rule");
	refused("{\"argv\": [\"x\"], \"network\": {\"allow\": [\"a b.com\\n\"]}}", "network.allow[0]: ");
	refused("{\"argv\": [\"x\"], \"network\": {\"allow_addr\": [\"10.0.0.0/8\", \"example.com\"]}}",
		"network.allow_addr[1]: ");
	refused("{\"argv\": [\"x\"], \"network\": {\"allow_addr\": [\"10.0.0.1/8\"]}}", "network.allow_addr[0]: ");

	/* at most 64 rules, allow and allow_addr together */
	char body[4096];
	int n = snprintf(body, sizeof(body), "{\"argv\": [\"x\"], \"network\": {\"allow\": [");
	for (int i = 0; i < 40; i++)
		n += snprintf(body + n, sizeof(body) - (size_t)n, "%s\"h%d.example\"", i ? "," : "", i);
	n += snprintf(body + n, sizeof(body) - (size_t)n, "], \"allow_addr\": [");
	char *addr_list = body + n;
	for (int i = 0; i < 24; i++)
		n += snprintf(body + n, sizeof(body) - (size_t)n, "%s\"10.0.%d.0/24\"", i ? "," : "", i);
	snprintf(body + n, sizeof(body) - (size_t)n, "]}}");
	assert_int_equal(parse(body, &rq), 0);
	assert_int_equal(rq.nnet, 64);
	run_spec_free(&rq);
	/* one more */
	memmove(addr_list + 15, addr_list, strlen(addr_list) + 1);
	memcpy(addr_list, "\"10.9.9.0/24\", ", 15);
	refused(body, "network.allow_addr: at most 64 rules in allow and allow_addr together");

	/* a bad rule leaves nothing behind for run_spec_free to miss (ASan) */
	refused("{\"argv\": [\"x\"], \"network\": {\"allow\": [\"a.com\", \"b.com\"], \"allow_addr\": [\"x\"]}}",
		"network.allow_addr[0]: ");
}

/* What admission counts: run_spec_effective's memory and workspace. */
static void size(const struct run_spec *rq, const struct runtime *rt, uint64_t *mem, uint64_t *disk)
{
	struct run_effective e;
	run_spec_effective(rq, rt, &e);
	*mem = e.memory_mib;
	*disk = e.disk_mib;
}

/* What a run takes of a node (admission, issue 38): the limits asked, the
 * run library's defaults, and in source mode its derivation from the
 * runtime's stages; and those sizes read back from the stored JSON. */
static void sizes(void **state)
{
	(void)state;
	struct run_spec rq;
	uint64_t mem, disk;
	struct runtime rts[2] = { { .name = "c", .aliases = "gcc  cc", .compile = "gcc {files}", .run = "./a.out",
				    .run_memory_mib = 128, .compile_memory_mib = 900 },
				  { .name = "python", .aliases = "py", .run = "python3 {file}", .run_memory_mib = 300 } };
	assert_ptr_equal(runtime_pick(rts, 2, "c"), &rts[0]);
	assert_ptr_equal(runtime_pick(rts, 2, "cc"), &rts[0]);
	assert_ptr_equal(runtime_pick(rts, 2, "py"), &rts[1]);
	assert_null(runtime_pick(rts, 2, "p"));
	assert_null(runtime_pick(rts, 2, "gcc cc"));
	assert_null(runtime_pick(rts, 0, "c"));
	/* argv mode: the limits, else the defaults */
	assert_int_equal(parse("{\"argv\": [\"x\"]}", &rq), 0);
	size(&rq, NULL, &mem, &disk);
	assert_int_equal(mem, RUN_SPEC_DEFAULT_MEMORY_MIB);
	assert_int_equal(disk, RUN_SPEC_DEFAULT_DISK_MIB);
	run_spec_free(&rq);
	assert_int_equal(parse("{\"argv\": [\"x\"], \"limits\": {\"memory_mib\": 1536, \"disk_mib\": 3072}}", &rq), 0);
	size(&rq, &rts[0], &mem, &disk);
	assert_int_equal(mem, 1536);
	assert_int_equal(disk, 3072);
	/* a size written back into the canonical JSON reads back */
	rq.memory_mib = 1537;
	json_t *j = run_spec_to_json(&rq);
	char *text = json_dumps(j, JSON_COMPACT);
	assert_int_equal(run_spec_size_json(text, &mem, &disk), 0);
	assert_int_equal(mem, 1537);
	assert_int_equal(disk, 3072);
	free(text);
	json_decref(j);
	run_spec_free(&rq);
	/* source mode: the largest stage (compile's 900) plus the slack */
	const char *src = "{\"runtime\": \"c\", \"files\": [{\"name\": \"a.c\", \"content\": \"\"}]}";
	assert_int_equal(parse(src, &rq), 0);
	size(&rq, &rts[0], &mem, &disk);
	assert_int_equal(mem, 900 + 64);
	assert_int_equal(disk, RUN_SPEC_DEFAULT_DISK_MIB);
	/* a runtime without a compile stage: its compile memory does not count */
	rts[0].compile[0] = '\0';
	size(&rq, &rts[0], &mem, &disk);
	assert_int_equal(mem, RUN_SPEC_DEFAULT_MEMORY_MIB);   /* 128 + 64 is under the default */
	rq.run.memory_mib = 1000;
	size(&rq, &rts[0], &mem, &disk);
	assert_int_equal(mem, 1064);
	run_spec_free(&rq);
	/* stored JSON without limits (queued by an older vmrund): the
	 * defaults; not an object: -1 */
	assert_int_equal(run_spec_size_json("{\"argv\":[\"x\"]}", &mem, &disk), 0);
	assert_int_equal(mem, RUN_SPEC_DEFAULT_MEMORY_MIB);
	assert_int_equal(disk, RUN_SPEC_DEFAULT_DISK_MIB);
	assert_int_equal(run_spec_size_json("[1]", &mem, &disk), -1);
	assert_int_equal(run_spec_size_json("{", &mem, &disk), -1);
}

/* The one set of defaults: every limit a spec leaves at 0, in argv mode
 * and in source mode, where the timeout is the boot allowance plus the
 * stages' and asked-for values win. */
static void effective(void **state)
{
	(void)state;
	struct run_spec rq = { 0 };
	struct run_effective e;
	run_spec_effective(&rq, NULL, &e);
	assert_true(e.timeout_s == RUN_SPEC_DEFAULT_TIMEOUT_S);
	assert_int_equal(e.memory_mib, RUN_SPEC_DEFAULT_MEMORY_MIB);
	assert_int_equal(e.cpus, RUN_SPEC_DEFAULT_CPUS);
	assert_int_equal(e.disk_mib, RUN_SPEC_DEFAULT_DISK_MIB);
	assert_int_equal(e.max_output, RUN_SPEC_DEFAULT_MAX_OUTPUT);
	assert_int_equal(e.nstages, 0);
	rq = (struct run_spec){ .timeout_s = 2.5, .cpus = 3, .disk_mib = 9, .max_output = 7 };
	run_spec_effective(&rq, NULL, &e);
	assert_true(e.timeout_s == 2.5);
	assert_int_equal(e.cpus, 3);
	assert_int_equal(e.disk_mib, 9);
	assert_int_equal(e.max_output, 7);
	/* source mode: the runtime's stage limits, else the defaults */
	struct runtime c = { .name = "c", .compile = "cc {files}", .run = "./a.out", .compile_timeout_s = 20 };
	rq = (struct run_spec){ .source = true, .run = { .cpu_time_ms = 500 } };
	run_spec_effective(&rq, &c, &e);
	assert_int_equal(e.nstages, 2);
	assert_true(e.stage[0].timeout_s == 20);
	assert_true(e.stage[1].timeout_s == RUN_SPEC_DEFAULT_RUN_TIMEOUT_S);
	assert_int_equal(e.stage[1].cpu_time_ms, 500);
	assert_true(e.timeout_s == RUN_SPEC_BOOT_ALLOWANCE_S + 20 + RUN_SPEC_DEFAULT_RUN_TIMEOUT_S);
	c.compile[0] = '\0';
	rq.timeout_s = 4;
	run_spec_effective(&rq, &c, &e);
	assert_int_equal(e.nstages, 1);
	assert_true(e.stage[0].timeout_s == RUN_SPEC_DEFAULT_RUN_TIMEOUT_S);
	assert_true(e.timeout_s == 4);
	/* without the runtime (not known here): no stages, argv's defaults */
	run_spec_effective(&rq, NULL, &e);
	assert_int_equal(e.nstages, 0);
}

/* A spec against the policy's ceilings, in each front end's words. */
static void check(void **state)
{
	(void)state;
	struct policy pol;
	char err[300];
	assert_int_equal(policy_load(&pol, NULL, NULL, err, sizeof(err)), 0);
	pol.max_timeout_s = 60;
	pol.max_memory_mib = 1024;
	struct run_spec rq = { 0 };
	struct run_effective e;
	run_spec_effective(&rq, NULL, &e);
	assert_int_equal(run_spec_check(&rq, &e, &pol, RUN_SPEC_WORDS_API, err, sizeof(err)), 0);
	e.timeout_s = 61;
	assert_int_equal(run_spec_check(&rq, &e, &pol, RUN_SPEC_WORDS_API, err, sizeof(err)), -1);
	assert_string_equal(err, "limits.timeout_s: 61 exceeds the policy's ceiling of 60 s");
	assert_int_equal(run_spec_check(&rq, &e, &pol, RUN_SPEC_WORDS_CLI, err, sizeof(err)), -1);
	assert_string_equal(err, "--timeout 61 exceeds the policy's ceiling of 60 s");
	e.timeout_s = 60;
	e.memory_mib = 2048;
	assert_int_equal(run_spec_check(&rq, &e, &pol, RUN_SPEC_WORDS_API, err, sizeof(err)), -1);
	assert_string_equal(err, "limits.memory_mib: 2048 exceeds the policy's ceiling of 1024");
	assert_int_equal(run_spec_check(&rq, &e, &pol, RUN_SPEC_WORDS_CLI, err, sizeof(err)), -1);
	assert_string_equal(err, "--memory 2048 exceeds the policy's ceiling of 1024");
	e.memory_mib = 1024;
	/* the built-in ceiling admits any host name, no address range */
	struct net_rule host, addr;
	assert_int_equal(net_rule_parse("Example.com", false, &host, err, sizeof(err)), 0);
	assert_int_equal(net_rule_parse("10.0.0.0/8", true, &addr, err, sizeof(err)), 0);
	assert_int_equal(run_spec_add_rule(&rq, &host), 0);
	assert_int_equal(run_spec_add_rule(&rq, &host), 0);
	assert_int_equal(run_spec_check(&rq, &e, &pol, RUN_SPEC_WORDS_API, err, sizeof(err)), 0);
	assert_int_equal(run_spec_add_rule(&rq, &addr), 0);
	assert_int_equal(run_spec_check(&rq, &e, &pol, RUN_SPEC_WORDS_API, err, sizeof(err)), -1);
	assert_string_equal(err, "network.allow_addr[0]: 10.0.0.0/8 is beyond the policy's network ceiling");
	assert_int_equal(run_spec_check(&rq, &e, &pol, RUN_SPEC_WORDS_CLI, err, sizeof(err)), -1);
	assert_string_equal(err, "--allow-net-addr 10.0.0.0/8: beyond the policy's network ceiling");
	run_spec_free(&rq);
	policy_free(&pol);
}

/* A spec built field by field, as the CLI builds one: copies, arrays
 * NULL-terminated, at most RUN_SPEC_MAX_NET_RULES rules. */
static void builders(void **state)
{
	(void)state;
	struct run_spec rq = { 0 };
	char word[] = "echo";
	assert_int_equal(run_spec_add_arg(&rq, word), 0);
	assert_int_equal(run_spec_add_arg(&rq, "hi"), 0);
	assert_int_equal(run_spec_add_env(&rq, "A=1"), 0);
	word[0] = 'X';
	assert_int_equal(rq.argc, 2);
	assert_string_equal(rq.argv[0], "echo");
	assert_null(rq.argv[2]);
	assert_int_equal(rq.nenv, 1);
	assert_null(rq.env[1]);
	struct net_rule r;
	char err[200];
	assert_int_equal(net_rule_parse("a.test", false, &r, err, sizeof(err)), 0);
	for (unsigned i = 0; i < RUN_SPEC_MAX_NET_RULES; i++)
		assert_int_equal(run_spec_add_rule(&rq, &r), 0);
	errno = 0;
	assert_int_equal(run_spec_add_rule(&rq, &r), -1);
	assert_int_equal(errno, ENOSPC);
	run_spec_free(&rq);
	run_spec_free(&rq);
}

/* A sandbox's body: what a run's command takes is refused, the rest is
 * read as a run's. */
/* repeat: 1 to 20, never with artifacts kept, never a sandbox's */
static void repeat(void **state)
{
	(void)state;
	struct run_spec rq;
	const char *ok = "{\"runtime\": \"c\", \"files\": [{\"name\": \"m.c\", \"content\": \"\"}], \"repeat\": 5}";
	assert_int_equal(run_spec_from_text(ok, strlen(ok), &rq, err, sizeof(err)), 0);
	assert_int_equal(rq.repeat, 5);
	run_spec_free(&rq);
	refused("{\"argv\": [\"x\"], \"repeat\": 0}", "repeat: must be at least 1");
	refused("{\"argv\": [\"x\"], \"repeat\": 21}", "repeat: must be at most 20");
	refused("{\"argv\": [\"x\"], \"repeat\": \"2\"}", "repeat: must be a whole number");
	refused("{\"argv\": [\"x\"], \"repeat\": 2, \"keep_artifacts\": true}",
		"repeat: a repeated run keeps no artifacts (keep_artifacts)");
	/* one run is what none says: the canonical form leaves it out */
	const char *one = "{\"argv\": [\"x\"], \"repeat\": 1}";
	assert_int_equal(run_spec_from_text(one, strlen(one), &rq, err, sizeof(err)), 0);
	json_t *canon = run_spec_to_json(&rq);
	assert_null(json_object_get(canon, "repeat"));
	json_decref(canon);
	run_spec_free(&rq);
	assert_int_equal(run_spec_sandbox_from_text("{\"repeat\": 2}", 13, &rq, err, sizeof(err)), -1);
	run_spec_free(&rq);
	/* repeat_expect: the output each run must give, kept as bytes */
	const char *exp = "{\"argv\": [\"x\"], \"repeat\": 3, \"repeat_expect\": \"AAE=\", \"repeat_expect_encoding\": \"base64\"}";
	assert_int_equal(run_spec_from_text(exp, strlen(exp), &rq, err, sizeof(err)), 0);
	assert_true(rq.has_repeat_expect);
	assert_int_equal(rq.repeat_expect_len, 2);
	assert_memory_equal(rq.repeat_expect, "\0\1", 2);
	canon = run_spec_to_json(&rq);
	assert_string_equal(json_string_value(json_object_get(canon, "repeat_expect")), "AAE=");
	json_decref(canon);
	run_spec_free(&rq);
	refused("{\"argv\": [\"x\"], \"repeat_expect\": \"1\"}", "repeat_expect: only with a repeat above 1");
	refused("{\"argv\": [\"x\"], \"repeat\": 2, \"repeat_expect_encoding\": \"utf8\"}",
		"repeat_expect_encoding: given without repeat_expect");
	refused("{\"argv\": [\"x\"], \"repeat\": 2, \"repeat_expect\": 7}", "repeat_expect");
}

static void sandbox_body(void **state)
{
	(void)state;
	struct run_spec rq;
	const char *ok = "{\"runtime\":\"python\",\"env\":{\"A\":\"1\"},\"limits\":{\"memory_mib\":512,\"cpus\":2},"
			 "\"network\":{\"allow\":[\"pypi.org\"]}}";
	assert_int_equal(run_spec_sandbox_from_text(ok, strlen(ok), &rq, err, sizeof(err)), 0);
	assert_string_equal(rq.runtime, "python");
	assert_int_equal(rq.argc, 0);
	assert_false(rq.source);
	assert_int_equal(rq.memory_mib, 512);
	assert_int_equal(rq.nenv, 1);
	assert_int_equal(rq.nnet, 1);
	run_spec_free(&rq);
	assert_int_equal(run_spec_sandbox_from_text("{}", 2, &rq, err, sizeof(err)), 0);   /* the default image */
	run_spec_free(&rq);
	const struct { const char *body, *why; } bad[] = {
		{ "{\"argv\":[\"true\"]}", "argv" },
		{ "{\"files\":[]}", "files" },
		{ "{\"stdin\":\"x\"}", "stdin" },
		{ "{\"compile\":{}}", "compile" },
		{ "{\"limits\":{\"timeout_s\":5}}", "limits.timeout_s: a sandbox's life is its own" },
		{ "{\"limits\":{\"memory_mib\":\"x\"}}", "memory_mib" },
		{ "[]", "JSON object" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (run_spec_sandbox_from_text(bad[i].body, strlen(bad[i].body), &rq, err, sizeof(err)) != -1 ||
		    !strstr(err, bad[i].why))
			fail_msg("%s: \"%s\", wanted \"%s\"", bad[i].body, err, bad[i].why);
		run_spec_free(&rq);
	}
	/* and a run's body still needs its command */
	refused("{\"runtime\":\"python\"}", "argv, files or run.command is required");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sandbox_body), cmocka_unit_test(repeat), cmocka_unit_test(workspace_files), cmocka_unit_test(own_commands),
		cmocka_unit_test(argv_mode),     cmocka_unit_test(source_mode),   cmocka_unit_test(refuses_shape),
		cmocka_unit_test(refuses_types), cmocka_unit_test(refuses_files), cmocka_unit_test(caps),
		cmocka_unit_test(refuses_nul),   cmocka_unit_test(decodes),       cmocka_unit_test(round_trip),
		cmocka_unit_test(network),      cmocka_unit_test(sizes),         cmocka_unit_test(effective),
		cmocka_unit_test(check),        cmocka_unit_test(builders),      cmocka_unit_test(checkpoint_fields),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
