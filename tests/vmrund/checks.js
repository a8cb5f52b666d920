// What the test clients written in JavaScript share (e2b_client.js,
// e2b_envd.js): "ok - NAME" / "not ok - NAME" lines with what was seen,
// the count of those that failed, and waiting on promises that throw.
'use strict'
const state = { failed: 0 }

function check(name, cond, detail) {
  console.log((cond ? 'ok - ' : 'not ok - ') + name)
  if (!cond) {
    state.failed++
    if (detail !== undefined) console.log('    ' + String(detail).slice(0, 1500))
  }
}

// the error fn throws, or null
async function thrown(fn) {
  try {
    await fn()
    return null
  } catch (e) {
    return e
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

module.exports = { check, thrown, sleep, failed: () => state.failed, fail: () => state.failed++ }
