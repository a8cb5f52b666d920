// E2B's own SDK (npm e2b, pinned by the Makefile), unchanged, against
// vmrund's envd: the SDK's `commands` and `files` on a sandbox, with only
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY set. Run by
// tests/vmrund/e2b.sh against the stand-in supervisor (no VM), and by
// tests/vmrund/vm.sh on a real sandbox (VM=1: the commands also read the
// files the SDK wrote). Prints "ok - ..." / "not ok - ..." lines, and
// the transcript of what the sandbox said ("# ...").
//
// usage: node e2b_envd.js SDK_DIR OTHER_TENANTS_KEY
'use strict'
const sdk = require(process.argv[2])
const { Sandbox, CommandExitError, FileNotFoundError, NotFoundError, AuthenticationError, TimeoutError,
  SandboxNotFoundError } = sdk
const OTHER = process.argv[3]
const VM = process.env.VM === '1'
const BASE = process.env.E2B_SANDBOX_URL

const { check, thrown, sleep, failed, fail } = require('./checks.js')
async function until(what, cond, ms = 20000) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(50))
    if (await cond()) return true
  console.log('    waited ' + ms + ' ms for ' + what)
  return false
}
// an envd call made by hand: Connect's unary List with these headers
async function rawList(id, token) {
  const headers = { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': id }
  if (token) headers['X-Access-Token'] = token
  const r = await fetch(BASE + '/process.Process/List', { method: 'POST', headers, body: '{}' })
  return { status: r.status, body: await r.json().catch(() => null) }
}

async function main(made) {
  const sbx = await Sandbox.create({ timeoutMs: 600000 })
  made.push(sbx)
  console.log('# sandbox ' + sbx.sandboxId)

  // commands.run: foreground, with the output callbacks
  const outs = [], errs = []
  let r = await sbx.commands.run('echo hello from the sandbox', {
    onStdout: (d) => outs.push(d), onStderr: (d) => errs.push(d) })
  console.log('# commands.run("echo hello from the sandbox") -> ' + JSON.stringify(r))
  check('commands.run: exit 0, its stdout, and onStdout called with it',
    r.exitCode === 0 && r.stdout === 'hello from the sandbox\n' && outs.join('') === r.stdout && !errs.length,
    JSON.stringify([r, outs, errs]))
  r = await sbx.commands.run('echo to stderr >&2', { onStderr: (d) => errs.push(d) })
  check('commands.run: stderr, and onStderr', r.stderr === 'to stderr\n' && errs.join('') === 'to stderr\n',
    JSON.stringify([r, errs]))
  let e = await thrown(() => sbx.commands.run('exit 3'))
  check('commands.run of a command that exits 3: CommandExitError, exitCode 3',
    e instanceof CommandExitError && e.exitCode === 3, e)

  // background, with its stdin open: what it is sent, it echoes
  const got = []
  const cat = await sbx.commands.run('cat', { background: true, stdin: true, onStdout: (d) => got.push(d) })
  check('commands.run({background: true}): a handle with a pid', cat.pid > 0, cat.pid)
  await sbx.commands.sendStdin(cat.pid, 'line one\n')
  check('sendStdin: the command reads it (onStdout)', await until('line one', () => got.join('') === 'line one\n'),
    JSON.stringify(got))
  let procs = await sbx.commands.list()
  check('commands.list: the running command, its cmd and args',
    procs.some((p) => p.pid === cat.pid && p.cmd === '/bin/bash' && p.args[2] === 'cat'), JSON.stringify(procs))
  await sbx.commands.sendStdin(cat.pid, 'line two\n')
  await sbx.commands.closeStdin(cat.pid)
  r = await cat.wait()
  check('closeStdin: it ends, exit 0, with all it read', r.exitCode === 0 && r.stdout === 'line one\nline two\n',
    JSON.stringify(r))
  procs = await sbx.commands.list()
  check('commands.list: an ended command is not listed', !procs.some((p) => p.pid === cat.pid), JSON.stringify(procs))

  // kill
  const sl = await sbx.commands.run('sleep 600', { background: true })
  check('kill(): true', (await sl.kill()) === true)
  e = await thrown(() => sl.wait())
  check('...its wait(): CommandExitError, killed (exitCode -1, as Go says of a signal)',
    e instanceof CommandExitError && e.exitCode === -1, e)
  check('commands.kill of an ended one: false', (await sbx.commands.kill(sl.pid)) === false)
  e = await thrown(() => sbx.commands.run('sleep 600', { timeoutMs: 1500 }))
  check('commands.run past its timeoutMs: TimeoutError', e instanceof TimeoutError, e)

  // files
  let w = await sbx.files.write('hello.txt', 'hi there\n')
  check('files.write: its WriteInfo (name, path under the home /workspace)',
    w.name === 'hello.txt' && w.path === '/workspace/hello.txt' && w.type === 'file', JSON.stringify(w))
  check('files.read: the bytes written', (await sbx.files.read('hello.txt')) === 'hi there\n')
  const ws = await sbx.files.write([{ path: 'dir/a.txt', data: 'a' }, { path: '/workspace/dir/b.txt', data: 'bb' }])
  check('files.write of two files (one multipart upload)', ws.length === 2 && ws[1].path === '/workspace/dir/b.txt',
    JSON.stringify(ws))
  let ls = await sbx.files.list('dir')
  check('files.list: both, as files, with their sizes and paths',
    ls.length === 2 && ls[0].name === 'a.txt' && ls[0].type === 'file' && ls[0].size === 1 &&
    ls[1].size === 2 && ls[1].path === '/workspace/dir/b.txt' && ls[0].modifiedTime instanceof Date,
    JSON.stringify(ls))
  check('files.makeDir: true, then false (it is there)',
    (await sbx.files.makeDir('dir/sub')) === true && (await sbx.files.makeDir('dir/sub')) === false)
  ls = await sbx.files.list('dir', { depth: 2 })
  check('files.list({depth: 2}): the directory too', ls.some((x) => x.name === 'sub' && x.type === 'dir'),
    JSON.stringify(ls))
  const mv = await sbx.files.rename('dir/a.txt', 'dir/c.txt')
  check('files.rename: the entry where it went', mv.name === 'c.txt' && mv.path === '/workspace/dir/c.txt',
    JSON.stringify(mv))
  const info = await sbx.files.getInfo('dir/c.txt')
  check('files.getInfo: a file of 1 byte, rw-r--r-- at least readable',
    info.type === 'file' && info.size === 1 && info.permissions[1] === 'r', JSON.stringify(info))
  await sbx.files.remove('dir/c.txt')
  check('files.remove, then exists: false', (await sbx.files.exists('dir/c.txt')) === false)
  e = await thrown(() => sbx.files.read('no-such-file.txt'))
  check('files.read of no file: FileNotFoundError', e instanceof FileNotFoundError, e)

  // watchDir: what files.write, files.remove (and, on a VM, a command) do to it
  await sbx.files.makeDir('watched')
  const seen = []
  // (includeEntry needs envd 0.6.3, past the version vmrund reports: the SDK refuses it itself)
  const wh = await sbx.files.watchDir('watched', (ev) => seen.push(ev), { timeoutMs: 120000 })
  const saw = (name, type) => () => seen.some((x) => x.name === name && x.type === type)
  await sbx.files.write('watched/one.txt', '1')
  check('watchDir: a file written is created', await until('create', saw('one.txt', 'create')), JSON.stringify(seen))
  await sbx.files.write('watched/one.txt', 'twenty-two')
  check('...written again: write', await until('write', saw('one.txt', 'write')), JSON.stringify(seen))
  if (VM) {
    await sbx.commands.run('echo by a command > watched/two.txt')
    check('...a command\'s file: created', await until('two', saw('two.txt', 'create')), JSON.stringify(seen))
  }
  await sbx.files.remove('watched/one.txt')
  check('...removed: remove', await until('remove', saw('one.txt', 'remove')), JSON.stringify(seen))
  await wh.stop()
  e = await thrown(() => sbx.files.watchDir('not-there', () => {}))
  check('watchDir of no directory: FileNotFoundError', e instanceof FileNotFoundError, e)
  if (VM) {
    r = await sbx.commands.run('cat hello.txt dir/b.txt && echo made >made.txt')
    check('a command reads what files.write wrote', r.stdout === 'hi there\nbb', JSON.stringify(r))
    check('...and files.read reads what a command wrote', (await sbx.files.read('made.txt')) === 'made\n')
    r = await sbx.commands.run('echo "$GREETING $PWD"', { envs: { GREETING: 'hello' }, cwd: '/workspace/dir' })
    check('commands.run with envs and cwd', r.stdout === 'hello /workspace/dir\n', JSON.stringify(r))
  }

  // a terminal: the SDK's pty runs an interactive bash on it, typed to line by line
  const screen = []
  const term = await sbx.pty.create({ cols: 80, rows: 24, timeoutMs: 120000,
    onData: (d) => screen.push(Buffer.from(d).toString()) })
  check('pty.create: a shell on a terminal, with its pid', term.pid > 0, term.pid)
  const type = (text) => sbx.pty.sendInput(term.pid, new TextEncoder().encode(text))
  const size = 'python3 -c "import os; s = os.get_terminal_size(); print(s.lines, s.columns)"\n'
  await type(size)
  check('pty.sendInput: the shell reads it from its terminal, whose size is 24x80',
    await until('24 80', () => screen.join('').includes('24 80')), JSON.stringify(screen.join('').slice(-400)))
  await sbx.pty.resize(term.pid, { cols: 100, rows: 30 })
  await type(size)
  check('pty.resize: the terminal is 30x100 now', await until('30 100', () => screen.join('').includes('30 100')),
    JSON.stringify(screen.join('').slice(-400)))
  await type('exit 0\n')
  r = await term.wait()
  check('exit in the shell: the pty ends, exit 0', r.exitCode === 0, JSON.stringify(r))
  console.log('# the terminal said: ' + JSON.stringify(screen.join('').slice(-300)))

  // two tenants: neither reaches the other's envd, with or without a token
  const theirs = await Sandbox.create({ apiKey: OTHER })
  made.push(theirs)
  let raw = await rawList(sbx.sandboxId, sbx.envdAccessToken)
  check('envd by hand with the sandbox\'s own token: 200', raw.status === 200, JSON.stringify(raw))
  raw = await rawList(sbx.sandboxId, theirs.envdAccessToken)
  check('another tenant\'s token on this sandbox: 401 unauthenticated',
    raw.status === 401 && raw.body && raw.body.code === 'unauthenticated', JSON.stringify(raw))
  raw = await rawList(sbx.sandboxId, null)
  check('no token: 401', raw.status === 401, JSON.stringify(raw))
  raw = await rawList(theirs.sandboxId, sbx.envdAccessToken)
  check('this sandbox\'s token on theirs: 401', raw.status === 401, JSON.stringify(raw))
  e = await thrown(() => Sandbox.connect(sbx.sandboxId, { apiKey: OTHER }))
  check('Sandbox.connect to another tenant\'s sandbox: NotFoundError', e instanceof NotFoundError, e)

  // pause and connect (resume) with a background process still running
  const bg = await sbx.commands.run('sleep 600', { background: true })
  check('pause(): true', (await sbx.pause()) === true)
  e = await thrown(() => sbx.commands.run('echo paused'))
  // E2B's proxy answers 502 for a sandbox that does not run, which the
  // SDK's commands.run reads as SandboxNotFoundError, its files as TimeoutError
  check('a command on a paused sandbox: SandboxNotFoundError ("probably not running anymore")',
    e instanceof SandboxNotFoundError, e)
  const again = await Sandbox.connect(sbx.sandboxId)
  procs = await again.commands.list()
  check('Sandbox.connect resumes it: the background process still runs', procs.some((p) => p.pid === bg.pid),
    JSON.stringify(procs))
  const h = await again.commands.connect(bg.pid)
  check('commands.connect to it, then kill: true', (await h.kill()) === true)
  r = await again.commands.run('echo after resume')
  check('commands run after the resume', r.stdout === 'after resume\n', JSON.stringify(r))
  await again.setTimeout(60000)
  const life = await again.getInfo()
  check('setTimeout on the resumed one: its end a minute away', Math.abs((life.endAt - Date.now()) / 1000 - 60) < 10,
    life.endAt)

  // errors of each kind
  e = await thrown(() => Sandbox.connect('0123456789abcdef0123456789abcdef'))
  check('an unknown sandbox: NotFoundError', e instanceof NotFoundError, e)
  e = await thrown(() => Sandbox.create({ apiKey: 'not-a-key-0123456789abc' }))
  check('a bad key: AuthenticationError', e instanceof AuthenticationError, e)
  const short = await Sandbox.create({ timeoutMs: 3000 })
  made.push(short)
  await sleep(5000)
  e = await thrown(() => short.commands.run('echo late'))
  check('an expired sandbox: SandboxNotFoundError from its commands', e instanceof SandboxNotFoundError, e)
  e = await thrown(() => short.files.read('hello.txt'))
  check('...and from its files', e instanceof TimeoutError, e)

  check('kill(): true', (await sbx.kill()) === true)
  e = await thrown(() => sbx.commands.run('echo gone'))
  check('a command on a killed sandbox: SandboxNotFoundError', e instanceof SandboxNotFoundError, e)
}

const made = []
main(made).catch((e) => {
  console.log('not ok - the script threw: ' + (e && e.stack ? e.stack : e))
  fail()
}).finally(async () => {
  // whatever happened, no sandbox is left running
  for (const s of made) await s.kill().catch(() => {})
  process.exit(failed() ? 1 : 0)
})
