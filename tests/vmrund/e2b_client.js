// E2B's own SDK (npm e2b, pinned by the Makefile), unchanged, against
// vmrund's E2B API: only E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY
// set (tests/vmrund/e2b.sh). The control API's calls, each kind of error
// the SDK raises from its answers, and two tenants that do not see each
// other's sandboxes. Prints "ok - ..." / "not ok - ..." lines.
//
// usage: node e2b_client.js SDK_DIR OTHER_TENANTS_KEY
'use strict'
const { Sandbox, SandboxError, NotFoundError, AuthenticationError } = require(process.argv[2])
const OTHER = process.argv[3]

const { check, thrown, sleep, failed } = require('./checks.js')
const all = async (paginator) => {
  const items = []
  while (paginator.hasNext) items.push(...(await paginator.nextItems()))
  return items
}

async function main() {
  const made = []
  let e

  // create: the base template (the default image), then a runtime's
  const base = await Sandbox.create()
  made.push(base)
  check('Sandbox.create(): the base template, an id and an envd version the SDK accepts',
    /^[0-9a-f]{32}$/.test(base.sandboxId), base.sandboxId)
  const py = await Sandbox.create('python', { metadata: { owner: 'e2b test/1', n: '1' }, timeoutMs: 120000,
    envs: { GREETING: 'hi' } })
  made.push(py)
  let info = await py.getInfo()
  const left = (info.endAt - Date.now()) / 1000
  check('getInfo: running, its template, metadata and an end a timeout away',
    info.state === 'running' && info.templateId === 'python' && info.metadata.owner === 'e2b test/1' &&
    left > 100 && left <= 121 && info.sandboxId === py.sandboxId, JSON.stringify(info))

  // list: by metadata and by state, a page at a time
  let listed = await all(Sandbox.list({ query: { metadata: { owner: 'e2b test/1' } } }))
  check('Sandbox.list by metadata: that sandbox alone',
    listed.length === 1 && listed[0].sandboxId === py.sandboxId, JSON.stringify(listed))
  const page = Sandbox.list({ limit: 1 })
  const first = await page.nextItems()
  check('Sandbox.list({limit: 1}): one, and a next page', first.length === 1 && page.hasNext, first.length)
  const second = await page.nextItems()
  check('...then the other, and no more', second.length === 1 && second[0].sandboxId !== first[0].sandboxId &&
    !page.hasNext, JSON.stringify(second))

  // its life: setTimeout, pause, connect (which resumes), kill
  await py.setTimeout(30000)
  info = await py.getInfo()
  check('setTimeout(30 s): its end moves', Math.abs((info.endAt - Date.now()) / 1000 - 30) < 5, info.endAt)
  check('pause(): true', (await py.pause()) === true)
  check('pause() again: false, as E2B says of a paused sandbox', (await py.pause()) === false)
  info = await py.getInfo()
  listed = await all(Sandbox.list({ query: { state: ['paused'] } }))
  check('getInfo and list({state: paused}): paused', info.state === 'paused' && listed.length === 1 &&
    listed[0].sandboxId === py.sandboxId, JSON.stringify(listed))
  const again = await Sandbox.connect(py.sandboxId)
  info = await again.getInfo()
  check('Sandbox.connect: resumes it, running', again.sandboxId === py.sandboxId && info.state === 'running',
    info.state)
  check('kill(): true', (await py.kill()) === true)
  check('Sandbox.kill of a killed one: false', (await Sandbox.kill(py.sandboxId)) === false)

  // metrics, snapshots and forks
  const src = await Sandbox.create('python', { timeoutMs: 120000 })
  made.push(src)
  const m = await src.getMetrics()
  check('getMetrics: a sample of a running sandbox, its memory and disk against its limits',
    m.length === 1 && m[0].timestamp instanceof Date && m[0].cpuCount === 1 && m[0].memTotal === 256 * 1048576 &&
    m[0].memUsed > 0 && m[0].diskTotal > 0, JSON.stringify(m))
  const snap = await src.createSnapshot({ name: 'before' })
  check('createSnapshot({name}): an id of the sandbox and the name', snap.snapshotId === src.sandboxId + ':before',
    JSON.stringify(snap))
  const snaps = await all(src.listSnapshots())
  check('listSnapshots: it is there', snaps.length === 1 && snaps[0].snapshotId === snap.snapshotId,
    JSON.stringify(snaps))
  const every = await all(Sandbox.listSnapshots())
  check("Sandbox.listSnapshots(): the tenant's, it among them", every.some((s) => s.snapshotId === snap.snapshotId),
    JSON.stringify(every))
  const fromSnap = await Sandbox.create(snap.snapshotId, { timeoutMs: 60000 })
  made.push(fromSnap)
  info = await fromSnap.getInfo()
  check('Sandbox.create(snapshotId): a new sandbox from it, running',
    info.state === 'running' && fromSnap.sandboxId !== src.sandboxId, JSON.stringify(info))
  const forks = await src.fork({ count: 2 })
  const good = forks.filter((f) => !(f instanceof Error))
  made.push(...good)
  check('fork({count: 2}): two sandboxes of its own', forks.length === 2 && good.length === 2 &&
    good[0].sandboxId !== good[1].sandboxId && good.every((f) => f.sandboxId !== src.sandboxId), forks)
  check('deleteSnapshot: true', (await Sandbox.deleteSnapshot(snap.snapshotId)) === true)
  check('deleteSnapshot of a deleted one: false', (await Sandbox.deleteSnapshot(snap.snapshotId)) === false)
  e = await thrown(() => Sandbox.create(snap.snapshotId))
  check('Sandbox.create of a deleted snapshot: SandboxError', e instanceof SandboxError, e)

  // errors, each as the SDK raises it
  e = await thrown(() => Sandbox.getInfo(py.sandboxId))
  check('getInfo of an unknown sandbox: NotFoundError', e instanceof NotFoundError, e)
  e = await thrown(() => Sandbox.connect('0123456789abcdef0123456789abcdef'))
  check('connect to an unknown sandbox: NotFoundError', e instanceof NotFoundError, e)
  e = await thrown(() => Sandbox.create({ apiKey: 'not-a-key-0123456789abcdef' }))
  check('a bad key: AuthenticationError', e instanceof AuthenticationError, e)
  e = await thrown(() => Sandbox.create('cobol'))
  check('an unknown template: SandboxError, with the reason', e instanceof SandboxError &&
    /template 'cobol' not found/.test(e.message), e)
  e = await thrown(() => Sandbox.create({ network: { denyOut: ['10.0.0.0/8'] } }))
  check('a denyOut vmrun cannot keep: SandboxError 400, not a sandbox that ignores it',
    e instanceof SandboxError && /denyOut/.test(e.message), e)
  const brief = await Sandbox.create({ timeoutMs: 2000 })
  await sleep(4000)
  e = await thrown(() => brief.getInfo())
  check('an expired sandbox: NotFoundError', e instanceof NotFoundError, e)
  const parks = await Sandbox.create({ timeoutMs: 2000, lifecycle: { onTimeout: 'pause' } })
  made.push(parks)
  await sleep(4000)
  info = await parks.getInfo()
  check('lifecycle {onTimeout: pause}: paused at its timeout, not gone',
    info.state === 'paused' && info.lifecycle.onTimeout === 'pause', JSON.stringify(info))

  // two tenants: neither sees, changes or kills the other's
  const opts = { apiKey: OTHER }
  e = await thrown(() => Sandbox.getInfo(base.sandboxId, opts))
  check("another tenant's getInfo: NotFoundError", e instanceof NotFoundError, e)
  check("another tenant's kill: false", (await Sandbox.kill(base.sandboxId, opts)) === false)
  e = await thrown(() => Sandbox.connect(base.sandboxId, opts))
  check("another tenant's connect: NotFoundError", e instanceof NotFoundError, e)
  listed = await all(Sandbox.list(opts))
  check("another tenant's list: none of these", listed.length === 0, JSON.stringify(listed))
  info = await base.getInfo()
  check('...and the sandbox runs on', info.state === 'running', info.state)

  for (const s of made) await s.kill()
  listed = await all(Sandbox.list())
  check('every sandbox killed: the list is empty', listed.length === 0, JSON.stringify(listed))
}

main().then(
  () => process.exit(failed() ? 1 : 0),
  (e) => {
    console.log('not ok - the SDK script stopped: ' + (e && e.stack ? e.stack : e))
    process.exit(1)
  })
