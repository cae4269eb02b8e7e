/**
 * What bench/scenarios/revocation-restart.ts watches: a node spawned and sampled every second
 * until /readyz says 200 (RSS, /readyz, its revocation metrics, one verification at a time),
 * its memory after a full GC, and a check that revoked tokens are refused and valid ones not.
 */
import { performance } from 'node:perf_hooks'
import type { Db } from '../../src/store/db.js'
import { fmtMs } from './load.js'
import type { NodeMemory, Proc } from './procs.js'
import { int } from './report.js'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** One line of the start-up timeline, sampled every second until ready (and at the end). */
export interface Sample {
  s: number
  readyz: number | string
  rssMb: number | undefined
  /** the revocation metrics then (undefined: not exported by this build) */
  entries: number | undefined
  storeReads: number | undefined
  /** verifications answered since the last sample by the one-at-a-time probe, and the slowest */
  probeCount: number
  probeMaxMs: number
}

export interface Metrics {
  entries?: number
  bytes?: number
  falsePositiveRatio?: number
  storeReads?: number
  loadsDone?: number
  loadsFailed?: number
  /** the build before the filter: chat_auth_revoked_tokens */
  legacyHeld?: number
}

export async function readMetrics(node: Proc): Promise<Metrics> {
  try {
    const text = await (await fetch(node.url + '/metrics', { signal: AbortSignal.timeout(5000) })).text()
    const value = (name: string) => {
      const match = new RegExp(`^${name} ([0-9.e+-]+)$`, 'm').exec(text)
      return match ? Number(match[1]) : undefined
    }
    return {
      entries: value('chat_auth_revocation_filter_entries'),
      bytes: value('chat_auth_revocation_filter_bytes'),
      falsePositiveRatio: value('chat_auth_revocation_filter_false_positive_ratio'),
      storeReads: value('chat_auth_revocation_store_reads_total'),
      loadsDone: value('chat_auth_revocation_loads_total\\{result="done"\\}'),
      loadsFailed: value('chat_auth_revocation_loads_total\\{result="failed"\\}'),
      legacyHeld: value('chat_auth_revoked_tokens'),
    }
  } catch {
    return {}
  }
}

export async function status(url: string, headers: Record<string, string> = {}, timeoutMs = 10_000): Promise<number | string> {
  try {
    const response = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs) })
    await response.arrayBuffer()
    return response.status
  } catch (error) {
    return (error as Error).name === 'TimeoutError' ? 'timeout' : 'error'
  }
}

export async function post(url: string, body: unknown): Promise<{ status: number; json: any }> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  const text = await response.text()
  return { status: response.status, json: text ? JSON.parse(text) : undefined }
}

export interface TokenCheck {
  revokedPresented: number
  revokedAccepted: number
  validPresented: number
  validRefused: number
  other: Record<string, number>
}

/** Every revoked token presented once (must be 401), and some hot tokens (must be 200). */
export async function check(node: Proc, revoked: string[], valid: string[]): Promise<TokenCheck> {
  const result: TokenCheck = { revokedPresented: 0, revokedAccepted: 0, validPresented: 0, validRefused: 0, other: {} }
  const verify = (token: string) => status(node.url + '/rest/v1/auth/verify', { authorization: 'Bearer ' + token })
  for (const token of revoked) {
    const code = await verify(token)
    result.revokedPresented++
    if (code !== 401) {
      result.revokedAccepted++
      result.other[code] = (result.other[code] ?? 0) + 1
    }
  }
  for (const token of valid) {
    const code = await verify(token)
    result.validPresented++
    if (code !== 200) {
      result.validRefused++
      result.other[code] = (result.other[code] ?? 0) + 1
    }
  }
  return result
}

export async function insertRevocations(db: Db, companyId: string, count: number, log: (line: string) => void): Promise<void> {
  const chunk = 500_000
  const started = performance.now()
  for (let from = 0; from < count; from += chunk) {
    const to = Math.min(count, from + chunk) - 1
    // tokens expiring from 1 h to 11 h from now, evenly: every one live through the run
    await db.query(
      `INSERT INTO revoked_token (jti, company_id, expires_at)
       SELECT gen_random_uuid()::text, $1, now() + interval '1 hour' + (i % 36000) * interval '1 second'
       FROM generate_series($2::int, $3::int) AS i`,
      [companyId, from, to],
    )
    log(`  ${(to + 1).toLocaleString('en-US')} revocations written (${((performance.now() - started) / 1000).toFixed(0)} s)`)
  }
  // As autovacuum would have left a table filled over hours: statistics and visibility map.
  await db.query('VACUUM ANALYZE revoked_token')
}

export interface Restart {
  /** from the spawn until /healthz answered (the process listens) */
  listeningS: number
  readyS: number | undefined
  /** the first sample at or after 60 s, if the node was not ready by then */
  at60?: Sample
  timeline: Sample[]
  probe: { count: number; maxMs: number; p50Ms: number; statuses: Record<string, number> }
}

/** Spawns the node and samples it until /readyz says 200 (or the timeout). */
export async function spawnAndWait(start: () => Promise<Proc>, onProc: (node: Proc) => void, warmToken: string, readyTimeoutS: number, log: (line: string) => void): Promise<Restart> {
  const spawnedAt = performance.now()
  const node = await start()
  onProc(node)
  const since = () => (performance.now() - spawnedAt) / 1000
  const listeningS = since()
  let ready = false
  let done = false
  // One verification in flight at a time: what a request meets while the node loads.
  const probeMs: number[] = []
  let windowCount = 0
  let windowMax = 0
  const statuses: Record<string, number> = {}
  const probe = (async () => {
    while (!done) {
      const t0 = performance.now()
      const code = await status(node.url + '/rest/v1/auth/verify', { authorization: 'Bearer ' + warmToken }, 30_000)
      const ms = performance.now() - t0
      probeMs.push(ms)
      statuses[code] = (statuses[code] ?? 0) + 1
      windowCount++
      windowMax = Math.max(windowMax, ms)
      await sleep(20)
    }
  })()
  const timeline: Sample[] = []
  let readyS: number | undefined
  let nextSample = 0
  while (since() < readyTimeoutS) {
    const code = await status(node.url + '/readyz', {}, 2000)
    if (code === 200) {
      readyS = since()
      ready = true
    }
    if (ready || since() >= nextSample) {
      const m = await readMetrics(node)
      timeline.push({ s: since(), readyz: code, rssMb: node.rssMb(), entries: m.entries ?? m.legacyHeld, storeReads: m.storeReads, probeCount: windowCount, probeMaxMs: windowMax })
      windowCount = 0
      windowMax = 0
      nextSample = Math.floor(since()) + 1
      const last = timeline[timeline.length - 1]!
      log(`  ${last.s.toFixed(1).padStart(5)} s  /readyz ${last.readyz}  RSS ${last.rssMb?.toFixed(0) ?? '-'} MB  revoked held ${int(last.entries)}  probe ${last.probeCount} answers, slowest ${fmtMs(last.probeMaxMs)} ms`)
    }
    if (ready) break
    await sleep(100)
  }
  done = true
  await probe
  const sorted = [...probeMs].sort((a, b) => a - b)
  return {
    listeningS,
    readyS,
    at60: readyS === undefined || readyS >= 60 ? timeline.find((s) => s.s >= 60) : undefined,
    timeline,
    probe: { count: probeMs.length, maxMs: sorted[sorted.length - 1] ?? 0, p50Ms: sorted[Math.floor(sorted.length / 2)] ?? 0, statuses },
  }
}

export interface NodeFigures {
  rssMb: number | undefined
  peakRssMb: number | undefined
  memory: NodeMemory | undefined
  metrics: Metrics
}

export async function figures(node: Proc): Promise<NodeFigures> {
  const rssMb = node.rssMb()
  const peakRssMb = node.peakRssMb()
  return { rssMb, peakRssMb, memory: await node.memory(), metrics: await readMetrics(node) }
}

