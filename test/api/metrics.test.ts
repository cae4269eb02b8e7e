import t from 'tap'
import { createTenant, issueToken, startApp, verify } from '../support/helpers.js'

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
