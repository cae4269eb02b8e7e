import t from 'tap'
import { createTenant, issueToken, startApp, verify } from '../../support/helpers.js'

t.test('/metrics: the service series on prom-client, and the process metrics', async (t) => {
  const node = await startApp(t)
  const tenant = await createTenant(node)
  const issued = await issueToken(node, tenant, 'metered')
  t.equal((await verify(node, issued.token)).statusCode, 200)
  t.equal((await verify(node, `${issued.token}x`)).statusCode, 401)

  const scraped = await node.inject({ method: 'GET', url: '/metrics' })
  t.equal(scraped.statusCode, 200)
  t.equal(scraped.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8')
  const text = scraped.body
  t.match(text, /^# TYPE chat_auth_verifications_total counter$/m)
  t.match(text, /^chat_auth_verifications_total\{code="OK"\} 1$/m, 'verifications by outcome')
  t.match(text, /^chat_auth_verifications_total\{code="INVALID_TOKEN"\} 1$/m)
  t.match(text, /^chat_auth_http_requests_total\{route="\/rest\/v1\/auth\/verify",method="GET",status="200"\} 1$/m, 'requests by route, method, status')
  t.match(text, /^# TYPE chat_auth_cache_hits_total counter$/m, 'a count kept by the cache is still a counter')
  t.match(text, /^chat_auth_cache_entries\{cache="users"\} 1$/m)
  t.match(text, /^chat_auth_cache_trusted 1$/m)
  t.match(text, /^chat_auth_store_pool_errors_total 0$/m, 'an unlabelled counter shows from the start')
  for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes']) {
    t.match(text, new RegExp(`^${name} `, 'm'), `process metric ${name}`)
  }
  t.match(text, /^# TYPE nodejs_gc_duration_seconds histogram$/m, 'GC durations')
  t.equal(text.match(/^# TYPE process_cpu_user_seconds_total /gm)?.length, 1, 'process metrics once')
})

// Issue 19: with 255-character external ids a cached user costs 3× a short-id one; the caches are bounded in bytes.
t.test('a node filled with users of 255-character CJK external ids stays within CACHE_MAX_BYTES and says so on /metrics', async (t) => {
  const budget = 65_536
  const node = await startApp(t, { CACHE_MAX_BYTES: String(budget) })
  const tenant = await createTenant(node)
  const users = 200 // about 88 of them fit: 744 B each (src/cache/sizes.ts)
  for (let i = 0; i < users; i++) {
    const externalId = '漢'.repeat(250) + String(i).padStart(5, '0')
    const issued = await issueToken(node, tenant, externalId)
    t.equal((await verify(node, issued.token)).statusCode, 200)
  }
  const text = (await node.inject({ method: 'GET', url: '/metrics' })).body
  t.match(text, /^# TYPE chat_auth_cache_bytes gauge$/m)
  const series = (name: string, cache: string) => Number(new RegExp(`^${name}\\{cache="${cache}"\\} (\\d+)$`, 'm').exec(text)?.[1])
  for (const cache of ['users', 'userIds']) {
    const bytes = series('chat_auth_cache_bytes', cache)
    t.ok(bytes > budget / 2 && bytes <= budget, `${cache}: ${bytes} bytes held, budget ${budget}`)
  }
  const entries = series('chat_auth_cache_entries', 'users')
  t.ok(entries > 0 && entries < users, `the oldest users were evicted: ${entries} of ${users} held`)
  t.ok(series('chat_auth_cache_bytes', 'agents') > 0, 'every cache reports its bytes')
})
