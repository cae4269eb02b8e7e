/**
 * A revocation's receipt (SPEC §10.2): every node registered when the change went out, how
 * long after the commit each acknowledged (or that it did not, and refuses the change's
 * tokens once its lease lapses), and the open sessions each ended.
 */
import type { Receipt } from '../../src/client/index.js'

export type { Receipt }

const OUTCOMES: Record<Receipt['outcome'], string> = {
  acknowledged: 'every node acknowledged',
  lease_expired: 'some node did not acknowledge: it refuses these tokens once its lease lapses',
  embedded: 'the embedded single node applied it',
}

export function ReceiptView({ receipt, title = 'Receipt' }: { receipt: Receipt | null | undefined; title?: string }) {
  if (receipt === undefined) return null
  if (receipt === null) {
    return (
      <section class="receipt" aria-label={title}>
        <h3>{title}</h3>
        <p class="muted">Nothing changed: the token was already expired or revoked, so no node had anything to apply.</p>
      </section>
    )
  }
  return (
    <section class="receipt" aria-label={title}>
      <h3>
        {title} <span class={receipt.outcome === 'lease_expired' ? 'badge warn' : 'badge good'}>{OUTCOMES[receipt.outcome]}</span>
      </h3>
      <table>
        <thead>
          <tr>
            <th scope="col">Node</th>
            <th scope="col">Acknowledged after the commit</th>
            <th scope="col">Sessions ended</th>
          </tr>
        </thead>
        <tbody>
          {receipt.nodes.map((node) => (
            <tr key={node.nodeId} data-node={node.nodeId}>
              <td>
                <code>{node.nodeId}</code>
              </td>
              <td>{node.ackedAfterMs === null ? <span class="badge warn">not acknowledged</span> : `${formatMs(node.ackedAfterMs)}`}</td>
              <td class="number">{node.sessionsEnded ?? '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <p class="muted small">
        Change <code>{receipt.changeId}</code>
      </p>
    </section>
  )
}

export function formatMs(ms: number): string {
  const size = Math.abs(ms)
  const sign = ms < 0 ? '−' : ''
  return sign + (size < 10 ? `${size.toFixed(1)} ms` : size < 10_000 ? `${Math.round(size)} ms` : `${(size / 1000).toFixed(1)} s`)
}
