/* Source mode's stages (host/run/run_stages.c): the templates of a runtime
 * with and without a compile stage, the limits each stage gets and the
 * run's own limits derived from them, and the refusals. Pure: no files. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "run_stages.h"

static struct proto_request proto;
static char store[RUNTIME_STORE_MAX];
static struct run_result r;
static struct run_effective eff;   /* the run's limits, as run_plan_build derives them */
static char err[512];

static int build(const struct run_spec *req, const struct runtime *rt, struct run_stages *out)
{
	static const char *files[] = { "main.py", "lib.py" };
	memset(&proto, 0, sizeof(proto));
	memset(&r, 0, sizeof(r));
	*out = (struct run_stages){ .proto = &proto, .store = store, .storelen = sizeof(store) };
	err[0] = '\0';
	struct run_spec source = *req;   /* a shallow copy, in source mode */
	source.source = true;
	run_spec_effective(&source, rt, &eff);
	return run_stages_build(out, &source, &eff, rt, files, 2, &r, err, sizeof(err));
}

/* An interpreter: one run stage, the runtime's limits, VM memory at least
 * the default, the run's timeout the boot allowance plus the stage's. */
static void interpreted(void **state)
{
	(void)state;
	struct runtime rt = { .name = "python", .run = "python3 {file} {args}", .run_timeout_s = 7, .run_memory_mib = 100 };
	char *args[] = { "-v" };
	struct run_spec req = { .argv = args, .argc = 1 };
	struct run_stages st;
	assert_int_equal(build(&req, &rt, &st), 0);
	assert_int_equal(proto.nstages, 1);
	assert_int_equal(proto.stage[0].kind, PROTO_STAGE_RUN);
	assert_int_equal(proto.stage[0].argc, 3);
	assert_string_equal(proto.stage[0].argv[1], "main.py");
	assert_string_equal(proto.stage[0].argv[2], "-v");
	assert_int_equal(proto.stage[0].memory_kib, 100 * 1024);
	assert_int_equal(proto.stage[0].cpu_ms, 0);
	assert_int_equal(st.stage_timeout_ms[0], 7000);
	assert_true(eff.timeout_s == RUN_SPEC_BOOT_ALLOWANCE_S + 7);
	assert_int_equal(eff.memory_mib, RUN_SPEC_DEFAULT_MEMORY_MIB);   /* 100 + slack is less */
	assert_null(st.compiled);
	assert_true(r.source);
	assert_int_equal(r.nstages, 1);
	/* asked-for limits win; no limits at all in the runtime: the defaults */
	struct runtime bare = { .name = "bash", .run = "bash {file}" };
	req.run = (struct run_stage_limits){ .memory_mib = 1024, .cpu_time_ms = 250 };
	req.timeout_s = 3;
	assert_int_equal(build(&req, &bare, &st), 0);
	assert_int_equal(st.stage_timeout_ms[0], RUN_SPEC_DEFAULT_RUN_TIMEOUT_S * 1000);
	assert_true(eff.timeout_s == 3);
	assert_int_equal(eff.memory_mib, 1024 + RUN_SPEC_STAGE_MEMORY_SLACK_MIB);
	assert_int_equal(proto.stage[0].cpu_ms, 250);
	/* compile limits where there is nothing to compile */
	req.compile.timeout_s = 5;
	assert_int_equal(build(&req, &bare, &st), -1);
	assert_string_equal(err, "bash has no compile stage: its limits and args cannot be set");
}

/* The spec's own commands instead of the templates: words as given, the
 * run's args after run.command, no compile stage without compile.command
 * (even where the runtime compiles). */
static void own_commands(void **state)
{
	(void)state;
	struct runtime cxx = { .name = "c++", .compile = "g++ -o /tmp/prog {files}", .run = "/tmp/prog {args}" };
	char *run[] = { "bash", "run" }, *comp[] = { "bash", "compile.sh" }, *args[] = { "x y" };
	struct run_spec req = { .run_cmd = run, .nrun_cmd = 2, .compile_cmd = comp, .ncompile_cmd = 2, .argv = args,
				.argc = 1 };
	struct run_stages st;
	assert_int_equal(build(&req, &cxx, &st), 0);
	assert_int_equal(proto.nstages, 2);
	assert_int_equal(proto.stage[0].kind, PROTO_STAGE_COMPILE);
	assert_int_equal(proto.stage[0].argc, 2);
	assert_string_equal(proto.stage[0].argv[1], "compile.sh");
	assert_null(proto.stage[0].argv[2]);
	assert_int_equal(proto.stage[1].argc, 3);
	assert_string_equal(proto.stage[1].argv[0], "bash");
	assert_string_equal(proto.stage[1].argv[2], "x y");
	assert_null(st.compiled);
	/* a compile command that names the run's program does not make it
	 * "compiled": only a runtime's templates vouch for that */
	char *sneak[] = { "sh", "-c", "true", "/usr/bin/nc" }, *nc[] = { "/usr/bin/nc", "-l" };
	struct run_spec own = { .run_cmd = nc, .nrun_cmd = 2, .compile_cmd = sneak, .ncompile_cmd = 4 };
	assert_int_equal(build(&own, &cxx, &st), 0);
	assert_int_equal(proto.nstages, 2);
	assert_null(st.compiled);
	req.ncompile_cmd = 0;
	assert_int_equal(build(&req, &cxx, &st), 0);
	assert_int_equal(proto.nstages, 1);
	assert_int_equal(proto.stage[0].kind, PROTO_STAGE_RUN);
	req.compile.timeout_s = 5;
	assert_int_equal(build(&req, &cxx, &st), -1);
	assert_string_equal(err, "a run.command without compile.command has no compile stage: its limits and args "
				 "cannot be set");
}

/* A compiler: its output is the run program only when the compile stage
 * names it; a template that does not expand is the runtime's fault. */
static void compiled(void **state)
{
	(void)state;
	struct runtime rt = { .name = "c", .compile = "gcc -o /tmp/prog {files}", .run = "/tmp/prog {args}" };
	struct run_spec req = { 0 };
	struct run_stages st;
	assert_int_equal(build(&req, &rt, &st), 0);
	assert_int_equal(proto.nstages, 2);
	assert_int_equal(proto.stage[0].kind, PROTO_STAGE_COMPILE);
	assert_int_equal(proto.stage[0].argc, 5);
	assert_int_equal(proto.stage[1].argc, 1);
	assert_string_equal(st.compiled, "/tmp/prog");
	assert_int_equal(st.stage_timeout_ms[0], RUN_SPEC_DEFAULT_COMPILE_TIMEOUT_S * 1000);
	assert_true(eff.timeout_s == RUN_SPEC_BOOT_ALLOWANCE_S + RUN_SPEC_DEFAULT_COMPILE_TIMEOUT_S + RUN_SPEC_DEFAULT_RUN_TIMEOUT_S);
	/* a run program the compile stage does not name is not its output */
	snprintf(rt.run, sizeof(rt.run), "/tmp/other");
	assert_int_equal(build(&req, &rt, &st), 0);
	assert_null(st.compiled);
	snprintf(rt.compile, sizeof(rt.compile), "gcc {bogus}");
	assert_int_equal(build(&req, &rt, &st), -1);
	assert_non_null(strstr(err, "c's compile template: template word '{bogus}'"));
	/* a stage memory above the VM's */
	snprintf(rt.compile, sizeof(rt.compile), "gcc -o /tmp/prog {files}");
	req.memory_mib = 128;
	req.compile.memory_mib = 512;
	assert_int_equal(build(&req, &rt, &st), -1);
	assert_string_equal(err, "the compile stage's memory limit of 512 MiB exceeds the VM's 128 MiB (--memory)");
}

/* Compile args (Judge0's compiler_options) go before the sources, after
 * the template's own flags; at the end where no word is a source. */
static void compile_args(void **state)
{
	(void)state;
	struct runtime rt = { .name = "c", .compile = "gcc -O2 -o /tmp/prog {files} -lm", .run = "/tmp/prog {args}" };
	char *args[] = { "-O3", "-DX=1" };
	struct run_spec req = { .compile_args = args, .ncompile_args = 2 };
	struct run_stages st;
	assert_int_equal(build(&req, &rt, &st), 0);
	const char *want[] = { "gcc", "-O2", "-o", "/tmp/prog", "-O3", "-DX=1", "main.py", "lib.py", "-lm" };
	assert_int_equal(proto.stage[0].argc, 9);
	for (int i = 0; i < 9; i++)
		assert_string_equal(proto.stage[0].argv[i], want[i]);
	assert_null(proto.stage[0].argv[9]);
	assert_string_equal(st.compiled, "/tmp/prog");
	snprintf(rt.compile, sizeof(rt.compile), "make prog");
	assert_int_equal(build(&req, &rt, &st), 0);
	assert_int_equal(proto.stage[0].argc, 4);
	assert_string_equal(proto.stage[0].argv[3], "-DX=1");
	struct runtime bare = { .name = "bash", .run = "bash {file}" };
	assert_int_equal(build(&req, &bare, &st), -1);
	assert_string_equal(err, "bash has no compile stage: its limits and args cannot be set");
}

/* What a sandbox of a compiling runtime may run: its compiler's output. */
static void compiled_program(void **state)
{
	(void)state;
	char out[64];
	struct runtime c = { .name = "c", .compile = "gcc -o /tmp/prog {files}", .run = "/tmp/prog {args}" };
	assert_true(run_stages_compiled(&c, out, sizeof(out)));
	assert_string_equal(out, "/tmp/prog");
	assert_false(run_stages_compiled(&c, out, 5));
	struct runtime java = { .name = "java", .compile = "vmrun-javac {files}", .run = "vmrun-java {args}" };
	assert_false(run_stages_compiled(&java, out, sizeof(out)));
	struct runtime py = { .name = "python", .run = "python3 {file}" };
	assert_false(run_stages_compiled(&py, out, sizeof(out)));
	/* a run program the compiler does not name is not its output */
	struct runtime other = { .name = "x", .compile = "gcc -o /tmp/a {files}", .run = "/tmp/b" };
	assert_false(run_stages_compiled(&other, out, sizeof(out)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(interpreted),
		cmocka_unit_test(compiled),
		cmocka_unit_test(compile_args),
		cmocka_unit_test(compiled_program),
		cmocka_unit_test(own_commands),
	};
	return cmocka_run_group_tests_name("run_stages", tests, NULL, NULL);
}
