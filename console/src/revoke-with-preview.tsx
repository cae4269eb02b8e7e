import { useState } from 'preact/hooks'
import type { AdminClient, RevocationPreview as Preview } from '../../src/client/index.js'
import { useAction } from './api.js'
import { ReceiptView, type Receipt } from './receipt.js'
import { Confirm, Problem, Time } from './ui.js'

/**
 * A company- or agent-wide revocation (SPEC §10.3): its preview first, then a confirmation that
 * states the preview's numbers, then the receipt.
 */
export function RevokeWithPreview({ label, subject, preview, revoke }: { label: string; subject: string; preview: (admin: AdminClient) => Promise<Preview>; revoke: (admin: AdminClient) => Promise<{ revokedAt: string; receipt: Receipt }> }) {
  const asking = useAction(preview)
  const revoking = useAction(revoke)
  const [open, setOpen] = useState(false)
  const numbers = asking.result
  return (
    <div class="revoke-all">
      <button
        type="button"
        class="danger"
        disabled={asking.running || revoking.running}
        onClick={async () => {
          revoking.clear()
          if (await asking.run()) setOpen(true)
        }}
      >
        {asking.running ? 'Counting…' : revoking.running ? 'Revoking…' : label}
      </button>
      <Problem error={asking.error} what="The preview could not be read" />
      <Problem error={revoking.error} what="The revocation failed" />
      <Confirm
        open={open && numbers !== undefined}
        title={`Revoke every token of ${subject}?`}
        confirmLabel={`Revoke the tokens of ${numbers?.users ?? 0} users`}
        onCancel={() => setOpen(false)}
        onConfirm={() => {
          setOpen(false)
          void revoking.run()
        }}
      >
        <p data-preview>
          This revokes every token of <strong>{numbers?.users ?? 0}</strong> active {numbers?.users === 1 ? 'user' : 'users'} and ends <strong>{numbers?.openSessions ?? 0}</strong> open {numbers?.openSessions === 1 ? 'session' : 'sessions'} across the live nodes. Tokens issued afterwards are valid.
        </p>
      </Confirm>
      {revoking.result && (
        <div class="done" aria-live="polite">
          <p role="status">
            <strong>Every token of {subject} revoked</strong> at <Time iso={revoking.result.revokedAt} />.
          </p>
          <ReceiptView receipt={revoking.result.receipt} />
        </div>
      )}
    </div>
  )
}
