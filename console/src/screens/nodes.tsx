import { useEffect } from 'preact/hooks'
import { useLoad } from '../api.js'
import type { NodeStatus as NodeView } from '../../../src/client/index.js'
import { formatMs } from '../receipt.js'
import { Empty, Loading, Problem, Time, Yes } from '../ui.js'

/** SPEC §10.3: at least every 2 s. */
const REFRESH_MS = 1000

/**
 * The node's /readyz turns 503 past its own MAX_CLOCK_SKEW (default 1 s), which the listing
 * shows as `ready`; the page marks an offset past the default as well, so that a node drifting
 * towards it is seen before it stops serving.
 */
const SKEW_MS = 1000

const bytes = (n: number) => (n < 1024 ? `${n} B` : n < 1024 ** 2 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 ** 2).toFixed(1)} MiB`)

export function Nodes() {
  useEffect(() => void (document.title = 'Nodes · chat-auth console'), [])
  const { data, error, loading } = useLoad((admin) => admin.listNodes(), 'nodes', REFRESH_MS)
  const nodes = data?.nodes
  return (
    <>
      <h1 tabIndex={-1}>Nodes</h1>
      <p class="muted">Every live node, refreshed every second. A node whose bus trust lapsed, or whose clock is off PostgreSQL's, is marked.</p>
      {error !== undefined && <Problem error={error} what="The node list could not be read (showing the last one)" />}
      {nodes === undefined && loading && <Loading />}
      {nodes !== undefined && nodes.length === 0 && <Empty>No live node is registered.</Empty>}
      {nodes !== undefined && nodes.length > 0 && (
        <div class="table-wrap">
          <table class="nodes">
            <thead>
              <tr>
                <th scope="col">Node</th>
                <th scope="col">Version</th>
                <th scope="col">Started</th>
                <th scope="col">Ready</th>
                <th scope="col">Bus trust</th>
                <th scope="col">Last change applied</th>
                <th scope="col">Behind</th>
                <th scope="col">Cached users</th>
                <th scope="col">Sessions</th>
                <th scope="col">Event streams</th>
                <th scope="col">Clock offset</th>
                <th scope="col">Redis</th>
              </tr>
            </thead>
            <tbody>
              {nodes.map((node) => (
                <NodeRow key={node.nodeId} node={node} />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  )
}

function NodeRow({ node }: { node: NodeView }) {
  const skewed = node.clockOffsetMs !== null && Math.abs(node.clockOffsetMs) > SKEW_MS
  const marked = !node.trusted || skewed || !node.ready
  return (
    <tr class={marked ? 'marked' : undefined} data-node={node.nodeId}>
      <th scope="row">
        <code>{node.nodeId}</code>
      </th>
      <td>{node.version ?? '—'}</td>
      <td>
        <Time iso={node.startedAt} />
      </td>
      <td>
        <Yes value={node.ready} yes="ready" no="not ready" />
      </td>
      <td>
        {node.trusted ? (
          <span class="badge good">trusted</span>
        ) : (
          <span class="badge bad">
            lapsed{node.untrustedSince !== null && ' since '}
            {node.untrustedSince !== null && <Time iso={node.untrustedSince} />}
          </span>
        )}
      </td>
      <td>
        <Time iso={node.lastChangeAt} />
      </td>
      <td class="number" title={node.changeLogReadAt === null ? 'no read of the change log yet' : `last read of the change log: ${node.changeLogReadAt}`}>
        {node.behind.changes} {node.behind.changes === 1 ? 'change' : 'changes'}, {formatMs(node.behind.ms)}
      </td>
      <td class="number">
        {node.cache.users} ({bytes(node.cache.bytes)})
      </td>
      <td class="number">{node.sessions}</td>
      <td class="number">{node.eventStreams}</td>
      <td class="number">
        {node.clockOffsetMs === null ? <span class="muted">not measured</span> : <span class={skewed ? 'badge bad' : undefined}>{`${node.clockOffsetMs > 0 ? '+' : ''}${formatMs(node.clockOffsetMs)}${skewed ? ' skewed' : ''}`}</span>}
      </td>
      <td>{node.redis === null ? <span class="muted">embedded</span> : <span class={node.redis.subscribed ? undefined : 'badge bad'}>{`${node.redis.subscribed ? 'subscribed' : 'not subscribed'}${node.redis.follows ? ` · ${node.redis.follows}` : ''}`}</span>}</td>
    </tr>
  )
}
