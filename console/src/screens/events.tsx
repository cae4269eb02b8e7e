import { useEffect, useRef, useState } from 'preact/hooks'
import type { AuditEvent } from '../../../src/client/index.js'
import { describeError, isSessionEnd, useConsole } from '../api.js'
import { Empty, Loading, Problem, Time } from '../ui.js'

/** How often the live list asks for what committed since its cursor. */
const POLL_MS = 2000
/** The most events the page keeps (newest first). */
const KEEP = 500

type Actor = { kind: string; id?: string; name?: string; keyId?: string }

export function actorLabel(actor: Actor): string {
  if (actor.kind === 'operator') return `operator ${actor.name ?? actor.id ?? ''}`.trim()
  if (actor.kind === 'apiKey') return `API key ${actor.keyId ?? ''}`.trim()
  return actor.kind
}

function subjectLabel(subject: AuditEvent['subject']): string {
  const id = subject.externalId ?? subject.id ?? subject.keyId ?? subject.jti ?? ''
  return `${subject.kind} ${id}`.trim()
}

export function EventTable({ events }: { events: AuditEvent[] }) {
  return (
    <div class="table-wrap">
      <table class="events">
        <thead>
          <tr>
            <th scope="col">At</th>
            <th scope="col">Type</th>
            <th scope="col">Actor</th>
            <th scope="col">Subject</th>
            <th scope="col">Detail</th>
          </tr>
        </thead>
        <tbody>
          {events.map((event) => (
            <tr key={event.id} data-event={event.type}>
              <td>
                <Time iso={event.at} />
              </td>
              <td>
                <code>{event.type}</code>
              </td>
              <td>{actorLabel(event.actor as Actor)}</td>
              <td>
                <code title={JSON.stringify(event.subject)}>{subjectLabel(event.subject)}</code>
              </td>
              <td class="detail">{Object.keys(event.detail).length === 0 ? '' : JSON.stringify(event.detail)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

/**
 * The company's events live, newest first (SPEC §10.3). The §8.2 stream authenticates with
 * the company's API key, which the console does not have (and should not: a session is an
 * operator's, not a company's), so the page polls the admin listing instead: its first page,
 * then every 2 s what committed since the page's `cursor` (commit order, nothing skipped).
 * The filters (type, actor) apply to what is loaded.
 */
export function LiveEvents({ companyId, type, actor, onFilter }: { companyId: string; type: string; actor: string; onFilter: (filter: { type?: string; actor?: string }) => void }) {
  const { admin, sessionLost } = useConsole()
  const [events, setEvents] = useState<AuditEvent[] | undefined>()
  const [older, setOlder] = useState<string | null>(null)
  const [error, setError] = useState<unknown>()
  const cursor = useRef<string | undefined>(undefined)

  useEffect(() => {
    let stopped = false
    let timer: ReturnType<typeof setTimeout> | undefined
    setEvents(undefined)
    const fail = (failure: unknown) => {
      if (isSessionEnd(failure)) return sessionLost()
      setError(failure)
    }
    async function poll() {
      try {
        if (cursor.current === undefined) {
          const page = await admin.listEvents(companyId, { limit: 100 })
          if (stopped) return
          cursor.current = page.cursor
          setOlder(page.next)
          setEvents(page.events)
        } else {
          const since = await admin.listEvents(companyId, { after: cursor.current, limit: 500 })
          if (stopped) return
          cursor.current = since.cursor
          if (since.events.length > 0) setEvents((before) => [...since.events.reverse(), ...(before ?? [])].slice(0, KEEP))
        }
        setError(undefined)
      } catch (failure) {
        if (!stopped) fail(failure)
      }
      if (!stopped) timer = setTimeout(poll, POLL_MS)
    }
    cursor.current = undefined
    void poll()
    return () => {
      stopped = true
      clearTimeout(timer)
    }
  }, [companyId, admin, sessionLost])

  async function loadOlder() {
    if (older === null) return
    try {
      const page = await admin.listEvents(companyId, { limit: 100, before: older })
      setOlder(page.next)
      setEvents((before) => [...(before ?? []), ...page.events])
    } catch (failure) {
      if (isSessionEnd(failure)) return sessionLost()
      setError(failure)
    }
  }

  const types = [...new Set((events ?? []).map((event) => event.type))].sort()
  const actors = [...new Set((events ?? []).map((event) => actorLabel(event.actor as Actor)))].sort()
  const shown = (events ?? []).filter((event) => (type === '' || event.type === type) && (actor === '' || actorLabel(event.actor as Actor) === actor))
  return (
    <section aria-labelledby="company-events">
      <h2 id="company-events">
        Events <span class="badge live">live</span>
      </h2>
      <div class="filters">
        <label>
          Type
          <select value={type} onChange={(event) => onFilter({ type: event.currentTarget.value, actor })}>
            <option value="">every type</option>
            {[...new Set([...types, ...(type === '' ? [] : [type])])].map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Actor
          <select value={actor} onChange={(event) => onFilter({ type, actor: event.currentTarget.value })}>
            <option value="">every actor</option>
            {[...new Set([...actors, ...(actor === '' ? [] : [actor])])].map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        </label>
      </div>
      {error !== undefined && <Problem error={new Error(describeError(error))} what="The events could not be read (retrying)" />}
      {events === undefined && error === undefined && <Loading />}
      {events !== undefined && shown.length === 0 && <Empty>{events.length === 0 ? 'The company has no events yet.' : 'No loaded event matches the filters.'}</Empty>}
      {shown.length > 0 && <EventTable events={shown} />}
      {older !== null && (
        <button type="button" onClick={() => void loadOlder()}>
          Load older events
        </button>
      )}
    </section>
  )
}
