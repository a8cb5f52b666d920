// The same agent loop through E2B's SDK (npm e2b, unchanged) against
// vmrund's E2B API and envd, and through vmrund's native API by fetch:
// create a sandbox, write a file, run it 20 times, read a file it wrote,
// kill. Each loop ROUNDS times, the two alternating; prints each phase's
// median and the whole loop's, and the SDK's time over the native one's
// (tests/bench/e2b.sh, make bench-e2b).
//
// usage: node e2b_loop.js SDK_DIR BASE_URL KEY [ROUNDS]
'use strict'
const { Sandbox } = require(process.argv[2])
const BASE = process.argv[3], KEY = process.argv[4], ROUNDS = Number(process.argv[5] || 3)
const RUNS = 20
const SCRIPT = 'import sys\nn = open("count.txt").read() if __import__("os").path.exists("count.txt") else ""\n' +
  'open("count.txt", "w").write(n + "x")\nprint(len(n) + 1)\n'

async function sdkLoop(t) {
  let s = Date.now()
  const sbx = await Sandbox.create({ timeoutMs: 300000 })
  t.create = Date.now() - s; s = Date.now()
  await sbx.files.write('step.py', SCRIPT)
  t.write = Date.now() - s; s = Date.now()
  for (let i = 0; i < RUNS; i++) await sbx.commands.run('python3 step.py')
  t.runs = Date.now() - s; s = Date.now()
  const got = await sbx.files.read('count.txt')
  t.read = Date.now() - s; s = Date.now()
  await sbx.kill()
  t.kill = Date.now() - s
  if (got.length !== RUNS) throw new Error('the SDK loop read ' + got.length + ' runs')
}

async function call(method, path, body, type) {
  const r = await fetch(BASE + path, { method, body, headers: { Authorization: 'Bearer ' + KEY,
    ...(type ? { 'Content-Type': type } : {}) } })
  const text = await r.text()
  if (r.status >= 300) throw new Error(method + ' ' + path + ': ' + r.status + ' ' + text)
  return text
}

async function nativeLoop(t) {
  let s = Date.now()
  const id = JSON.parse(await call('POST', '/v1/sandboxes', '{"timeout_s":300}', 'application/json')).id
  t.create = Date.now() - s; s = Date.now()
  await call('PUT', '/v1/sandboxes/' + id + '/files?path=step.py', SCRIPT, 'application/octet-stream')
  t.write = Date.now() - s; s = Date.now()
  for (let i = 0; i < RUNS; i++)
    await call('POST', '/v1/sandboxes/' + id + '/commands?wait=60', '{"argv":["python3","step.py"]}',
      'application/json')
  t.runs = Date.now() - s; s = Date.now()
  const got = await call('GET', '/v1/sandboxes/' + id + '/files?path=count.txt')
  t.read = Date.now() - s; s = Date.now()
  await call('DELETE', '/v1/sandboxes/' + id)
  t.kill = Date.now() - s
  if (got.length !== RUNS) throw new Error('the native loop read ' + got.length + ' runs')
}

const median = (a) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)]
async function main() {
  const phases = ['create', 'write', 'runs', 'read', 'kill']
  const res = { sdk: [], native: [] }
  for (let i = 0; i < ROUNDS; i++) {
    for (const [name, fn] of [['native', nativeLoop], ['sdk', sdkLoop]]) {
      const t = {}
      await fn(t)
      t.total = phases.reduce((a, p) => a + t[p], 0)
      res[name].push(t)
    }
  }
  console.log('phase (median of ' + ROUNDS + ', ms)   native      SDK   SDK/native')
  for (const p of phases.concat(['total'])) {
    const n = median(res.native.map((t) => t[p])), e = median(res.sdk.map((t) => t[p]))
    console.log(('  ' + p + (p === 'runs' ? ' (' + RUNS + ')' : '')).padEnd(28) + String(n).padStart(8) +
      String(e).padStart(9) + (n ? (e / n).toFixed(2) + 'x' : '-').padStart(12))
  }
}
main().catch((e) => { console.error('e2b_loop: ' + (e && e.stack ? e.stack : e)); process.exit(1) })
