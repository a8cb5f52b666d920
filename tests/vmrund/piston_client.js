// vmrund's Piston endpoints through an existing Piston client, unchanged:
// piston-api-client (npm), with its default settings and the server as
// its one option. node piston_client.js URL: prints "ok - ..." or
// "not ok - ..." lines for tests/vmrund/vm.sh to count; exits 1 on any
// failure.
const { PistonClient } = require(process.env.PISTON_CLIENT_DIR + '/node_modules/piston-api-client');

const client = new PistonClient({ server: process.argv[2] });
let failed = 0;
const check = (name, cond, detail) => {
	console.log(`${cond ? 'ok' : 'not ok'} - piston-api-client: ${name}`);
	if (!cond) {
		failed++;
		console.log('    ' + JSON.stringify(detail).slice(0, 400));
	}
};

(async () => {
	const rts = await client.runtimes();
	check('runtimes() lists python and c', rts.success && rts.data.some((r) => r.language === 'python') &&
	      rts.data.some((r) => r.language === 'c'), rts);

	let t0 = Date.now();
	const py = await client.execute({
		language: 'python', version: '3.x', files: [{ content: 'import sys\nprint(input(), sys.argv[1:])' }],
		stdin: 'from stdin', args: ['a', 'b'],
	});
	console.log(`    python through the client: ${Date.now() - t0} ms`);
	check('execute() python: stdout, args, stdin, code 0', py.success && py.data.language === 'python' &&
	      py.data.run.stdout === "from stdin ['a', 'b']\n" && py.data.run.code === 0 && !py.data.compile, py);

	t0 = Date.now();
	const c = await client.execute({
		language: 'c', version: '*',
		files: [{ name: 'main.c', content: '#include <stdio.h>\nint main(void) { puts("compiled"); return 4; }\n' }],
	});
	console.log(`    c through the client: ${Date.now() - t0} ms`);
	check('execute() c: a compile stage, then the run with its exit code', c.success && c.data.compile &&
	      c.data.compile.code === 0 && c.data.run.stdout === 'compiled\n' && c.data.run.code === 4, c);

	const bad = await client.execute({ language: 'cobol', version: '*', files: [{ content: 'x' }] });
	check('execute() of an unknown language: the message Piston gives', bad.success &&
	      /cobol-\* runtime is unknown/.test(bad.data.message || ''), bad);
	process.exit(failed ? 1 : 0);
})();
