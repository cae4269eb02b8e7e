import type { ComponentChildren } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { describeError } from './api.js'
import { followLink } from './router.js'

/** An in-console link: a real href (open in a new tab works), moved by the History API on a plain click. */
export function Link({ to, children, class: className }: { to: string; children: ComponentChildren; class?: string }) {
  return (
    <a href={`/console${to}`} class={className} onClick={(event) => followLink(event, to)}>
      {children}
    </a>
  )
}

/** A time in the browser's zone, its ISO value on hover. */
export function Time({ iso }: { iso: string | null | undefined }) {
  if (iso === null || iso === undefined) return <span class="muted">—</span>
  const date = new Date(iso)
  return (
    <time dateTime={iso} title={iso}>
      {date.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' })}
    </time>
  )
}

async function copy(text: string): Promise<void> {
  if (navigator.clipboard !== undefined) {
    try {
      return await navigator.clipboard.writeText(text)
    } catch {
      // no permission (an unfocused or headless page): the selection below still works
    }
  }
  const area = document.createElement('textarea')
  area.value = text
  area.setAttribute('readonly', '')
  area.className = 'offscreen'
  document.body.append(area)
  area.select()
  document.execCommand('copy')
  area.remove()
}

export function CopyButton({ text, label }: { text: string; label: string }) {
  const [copied, setCopied] = useState(false)
  useEffect(() => {
    if (!copied) return
    const timer = setTimeout(() => setCopied(false), 1500)
    return () => clearTimeout(timer)
  }, [copied])
  return (
    <button type="button" class="copy" aria-label={`Copy ${label}`} title={`Copy ${label}`} onClick={() => void copy(text).then(() => setCopied(true))}>
      {copied ? 'Copied' : 'Copy'}
    </button>
  )
}

/** An id, shortened where space is short, whole on hover, with a copy button. */
export function Id({ value, label = 'id', short = false }: { value: string; label?: string; short?: boolean }) {
  return (
    <span class="id">
      <code title={value}>{short ? `${value.slice(0, 8)}…` : value}</code>
      <CopyButton text={value} label={label} />
    </span>
  )
}

/** A secret the API shows once: the page shows it until dismissed, with a copy button. */
export function SecretOnce({ label, value, onDone }: { label: string; value: string; onDone: () => void }) {
  return (
    <div class="secret" role="status">
      <p>
        <strong>{label}</strong> — shown this once; store it now.
      </p>
      <div class="secret-value">
        <code data-secret>{value}</code>
        <CopyButton text={value} label={label} />
      </div>
      <button type="button" onClick={onDone}>
        I have stored it
      </button>
    </div>
  )
}

export function Problem({ error, what }: { error: unknown; what?: string }) {
  if (error === undefined || error === null) return null
  return (
    <p class="problem" role="alert">
      {what === undefined ? '' : `${what}: `}
      {describeError(error)}
    </p>
  )
}

export const Empty = ({ children }: { children: ComponentChildren }) => <p class="empty">{children}</p>

export const Loading = () => (
  <p class="muted" aria-live="polite">
    Loading…
  </p>
)

export function Yes({ value, yes = 'yes', no = 'no' }: { value: boolean; yes?: string; no?: string }) {
  return <span class={value ? 'badge good' : 'badge bad'}>{value ? yes : no}</span>
}

/**
 * A modal confirmation (the native <dialog>: focus moves into it, Escape cancels, Tab stays
 * inside). Shown while `open`; Confirm has the focus, so Enter confirms.
 */
export function Confirm({ open, title, children, confirmLabel, onConfirm, onCancel }: { open: boolean; title: string; children: ComponentChildren; confirmLabel: string; onConfirm: () => void; onCancel: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null)
  const confirm = useRef<HTMLButtonElement>(null)
  useEffect(() => {
    const element = dialog.current
    if (element === null) return
    if (open && !element.open) {
      element.showModal()
      confirm.current?.focus()
    }
    if (!open && element.open) element.close()
  }, [open])
  return (
    <dialog ref={dialog} class="confirm" aria-labelledby="confirm-title" onCancel={(event) => (event.preventDefault(), onCancel())}>
      <h2 id="confirm-title">{title}</h2>
      <div>{children}</div>
      <div class="actions">
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
        <button type="button" class="danger" ref={confirm} onClick={onConfirm}>
          {confirmLabel}
        </button>
      </div>
    </dialog>
  )
}

export function Pager({ hasPrevious, next, onPrevious, onNext }: { hasPrevious: boolean; next: string | null | undefined; onPrevious: () => void; onNext: () => void }) {
  if (!hasPrevious && (next === null || next === undefined)) return null
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" disabled={!hasPrevious} onClick={onPrevious}>
        ← Previous
      </button>
      <button type="button" disabled={next === null || next === undefined} onClick={onNext}>
        Next →
      </button>
    </nav>
  )
}
