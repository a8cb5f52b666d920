// Piston's interactive WebSocket (/api/v2/connect) as Piston's own CLI
// speaks it with `piston run -t` (cli/commands/execute.js: ws, the same
// library and major version; the init it sends, stdin as typed, its
// signals as {type: "signal"}). Piston's CLI is not on npm, so this
// client does what it does, and checks what comes back. node
// piston_ws_client.js URL [vm|closes]: "ok - ..." / "not ok - ..."
// lines, and the interactive session's transcript; exits 1 on any
// failure. closes: only Piston's close codes that need no program run
// (no VM; tests/vmrund/api.sh), vm: the sessions too.
const WebSocket = require(process.env.PISTON_CLIENT_DIR + '/node_modules/ws');

const url = process.argv[2].replace('http', 'ws') + '/api/v2/connect';
let failed = 0;
const check = (name, cond, detail) => {
	console.log(`${cond ? 'ok' : 'not ok'} - piston connect: ${name}`);
	if (!cond) {
		failed++;
		console.log('    ' + JSON.stringify(detail).slice(0, 1500));
	}
};

// One session: open, then onOpen(ws) sends what it sends; onMessage(msg,
// ws, log) may answer. Resolves with {log: messages, code, reason} when
// the server closes, or after limitMs.
const session = (onOpen, onMessage, limitMs = 180000) => new Promise((resolve) => {
	const ws = new WebSocket(url);
	const log = [];
	const timer = setTimeout(() => { ws.terminate(); resolve({ log, code: 'timeout', reason: '' }); }, limitMs);
	ws.on('open', () => onOpen(ws));
	ws.on('message', (data) => {
		const msg = JSON.parse(data);
		log.push(msg);
		if (onMessage)
			onMessage(msg, ws, log);
	});
	ws.on('close', (code, reason) => { clearTimeout(timer); resolve({ log, code, reason: String(reason) }); });
	ws.on('error', (e) => { clearTimeout(timer); resolve({ log, code: 'error', reason: String(e) }); });
});

// The init the CLI sends for `piston run LANG FILE ARGS -t` (its
// defaults: version '*', compile 10 s, run 3 s; here longer runs).
const init = (language, name, content, args = [], extra = {}) => JSON.stringify(Object.assign({
	type: 'init', language, version: '*', files: [{ name, content, encoding: 'utf8' }], args,
	compile_timeout: 10000, run_timeout: 60000,
}, extra));
const stdin = (data) => JSON.stringify({ type: 'data', stream: 'stdin', data });
const out = (log) => log.filter((m) => m.type === 'data' && m.stream === 'stdout').map((m) => m.data).join('');

const GREETER = 'import sys\nprint("name?", flush=True)\nfor line in sys.stdin:\n    line = line.strip()\n' +
	'    if line == "quit":\n        print("bye", flush=True)\n        break\n    print("hello " + line, flush=True)\n';
const TRAP = 'import signal, sys, time\n' +
	'def on_int(n, f):\n    print("got SIGINT", flush=True)\n    sys.exit(7)\n' +
	'signal.signal(signal.SIGINT, on_int)\nprint("ready", flush=True)\ntime.sleep(50)\nprint("no signal")\n';
const ARGS_C = '#include <stdio.h>\nint main(int c, char **v) { for (int i = 1; i < c; i++) printf("%s%c", v[i], ' +
	'i + 1 < c ? \' \' : \'\\n\'); fprintf(stderr, "to stderr\\n"); return c - 1; }\n';

const sessions = async () => {
	// Typed a line at a time, each after the program's answer to the last.
	let t0 = Date.now();
	const lines = ['alice\n', 'bob\n', 'quit\n'];
	let typed = 0;
	let r = await session((ws) => ws.send(init('python', 'main.py', GREETER)), (msg, ws) => {
		if (msg.type === 'data' && msg.stream === 'stdout' && typed < lines.length)
			ws.send(stdin(lines[typed++]));
	});
	const types = r.log.map((m) => m.type);
	check('an interactive python session: runtime, stage, each line answered as typed, exit 0, 4999 Job Completed',
	      r.code === 4999 && r.reason === 'Job Completed' && r.log[0].type === 'runtime' &&
	      r.log[0].language === 'python' && r.log[1].type === 'stage' && r.log[1].stage === 'run' &&
	      out(r.log) === 'name?\nhello alice\nhello bob\nbye\n' && types[types.length - 1] === 'exit' &&
	      r.log[r.log.length - 1].code === 0 && r.log[r.log.length - 1].signal === null && !types.includes('error'), r);
	console.log(`    the session (${Date.now() - t0} ms), as the messages came:`);
	for (const m of r.log)
		console.log('      <- ' + JSON.stringify(m));

	// A signal reaches the program (Piston's own server drops it).
	r = await session((ws) => ws.send(init('python', 'trap.py', TRAP)), (msg, ws) => {
		if (msg.type === 'data' && msg.data === 'ready\n')
			ws.send(JSON.stringify({ type: 'signal', signal: 'SIGINT' }));
	});
	const last = r.log[r.log.length - 1] || {};
	check('SIGINT reaches the program: its handler runs and its exit code comes back',
	      r.code === 4999 && out(r.log) === 'ready\ngot SIGINT\n' && last.type === 'exit' && last.code === 7, r);

	// A compiled program: the compile stage, then the run; args as the CLI
	// sends them from its command line (numbers), -1 memory limits.
	r = await session((ws) => ws.send(init('c', 'main.c', ARGS_C, [1, 2.5, 'x'],
					      { compile_memory_limit: -1, run_memory_limit: -1 })));
	const stages = r.log.filter((m) => m.type === 'stage' || m.type === 'exit').map((m) =>
		m.type === 'stage' ? m.stage : `${m.stage}:${m.code}`);
	check('c: stage compile, its exit, stage run, numeric args as text, stderr as its stream, exit code',
	      r.code === 4999 && JSON.stringify(stages) === '["compile","compile:0","run","run:3"]' &&
	      out(r.log) === '1 2.5 x\n' &&
	      r.log.some((m) => m.type === 'data' && m.stream === 'stderr' && m.data === 'to stderr\n'), r);


	// What may not come once the program runs: each its own close.
	const after = (bad) => session((ws) => ws.send(init('python', 'main.py', GREETER)), (msg, ws) => {
		if (msg.type === 'stage')
			ws.send(JSON.stringify(bad));
	});
	r = await after(JSON.parse(init('python', 'main.py', 'x')));
	check('4000 Already Initialized: a second init', r.code === 4000 && r.reason === 'Already Initialized', r);
	r = await after({ type: 'data', stream: 'stdout', data: 'x' });
	check('4004 Can only write to stdin', r.code === 4004 && r.reason === 'Can only write to stdin', r);
	r = await after({ type: 'signal', signal: 'SIGFOO' });
	check('4005 Invalid signal', r.code === 4005 && r.reason === 'Invalid signal', r);
};

const closes = async () => {
	let t0 = Date.now();
	let r = await session(() => {});
	check(`4001 Initialization Timeout: nothing sent for a second (${Date.now() - t0} ms)`,
	      r.code === 4001 && r.reason === 'Initialization Timeout' && r.log.length === 0, r);
	r = await session((ws) => ws.send(stdin('early\n')));
	check('4003 Not yet initialized: stdin before init', r.code === 4003 && r.reason === 'Not yet initialized', r);
	r = await session((ws) => ws.send(JSON.stringify({ type: 'signal', signal: 'SIGINT' })));
	check('4003 Not yet initialized: a signal before init', r.code === 4003, r);
	r = await session((ws) => ws.send('{not json'));
	check('4002 Notified Error: an error message first, for JSON that does not parse',
	      r.code === 4002 && r.reason === 'Notified Error' && r.log.length === 1 && r.log[0].type === 'error', r);
	r = await session((ws) => ws.send(init('cobol', 'a.cob', 'x')));
	check('4002 Notified Error: an unknown language, in Piston\'s words',
	      r.code === 4002 && r.log.length === 1 && r.log[0].message === 'cobol-* runtime is unknown', r);
};

(async () => {
	if (process.argv[3] !== 'closes')
		await sessions();
	await closes();
	process.exit(failed ? 1 : 0);
})().catch((e) => {
	console.log('not ok - piston connect: ' + e);
	process.exit(1);
});
