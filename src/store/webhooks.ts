import type { Db } from './db.js'
import { all, count, one, type BigintColumn } from './query.js'

/**
 * A company's webhook endpoints and their delivery queue (SPEC §9.3,
 * migrations/010_webhooks.sql and 011_webhook_fairness.sql). Deliveries are enqueued by the
 * event's own transaction (a trigger); here they are taken, recorded and pruned. The secret is read only by
 * `claimEndpoints`, for the sender to sign with: no listing returns it.
 */
export interface WebhookRecord {
  id: string
  companyId: string
  url: string
  /** null: every event type */
  types: string[] | null
  createdAt: Date
}

export interface DeliveryRecord {
  id: string
  eventId: string
  eventType: string
  /** attempts made */
  attempts: number
  lastAttemptAt: Date | null
  lastStatus: number | null
  lastError: string | null
  deliveredAt: Date | null
  nextAttemptAt: Date | null
}

/** An endpoint this node holds the lease of, with what it signs with. */
export interface LeasedEndpoint {
  id: string
  url: string
  secret: string
  /** its attempts in a row that got no answer (migrations/011_webhook_fairness.sql) */
  unanswered: number
}

/** One queued delivery, as the sender sends it. */
export interface DueDelivery {
  id: string
  eventId: string
  /** the body, exactly as it is sent and signed */
  payload: string
  attempts: number
}

/** What one attempt came to. */
export interface AttemptOutcome {
  delivered: boolean
  status: number | null
  error: string | null
  /** ms until the next attempt, should this one have failed */
  retryInMs: number
  /** a failed delivery is retried while it is younger than this */
  retryForMs: number
  /** no answer came: the endpoint as a whole is not claimed for this long; null: an answer came */
  pauseEndpointMs: number | null
}

const WEBHOOK_COLUMNS = `id, company_id, url, types, created_at`
interface WebhookRow {
  id: string
  company_id: string
  url: string
  types: string[] | null
  created_at: Date
}
const toWebhook = (row: WebhookRow): WebhookRecord => ({ id: row.id, companyId: row.company_id, url: row.url, types: row.types, createdAt: row.created_at })

interface DeliveryRow {
  id: BigintColumn
  event_id: BigintColumn
  event_type: string
  attempts: number
  last_attempt_at: Date | null
  last_status: number | null
  last_error: string | null
  delivered_at: Date | null
  next_attempt_at: Date | null
}
const toDelivery = (row: DeliveryRow): DeliveryRecord => ({
  id: String(row.id),
  eventId: String(row.event_id),
  eventType: row.event_type,
  attempts: row.attempts,
  lastAttemptAt: row.last_attempt_at,
  lastStatus: row.last_status,
  lastError: row.last_error,
  deliveredAt: row.delivered_at,
  nextAttemptAt: row.next_attempt_at,
})

export function webhookStore(db: Db) {
  return {
    /** undefined: no such company. */
    createWebhook: (webhook: { id: string; companyId: string; url: string; types: string[] | null; secret: string }): Promise<WebhookRecord | undefined> =>
      one(
        db,
        `INSERT INTO webhook (id, company_id, url, types, secret) SELECT $1, id, $3, $4, $5 FROM company WHERE id = $2 RETURNING ${WEBHOOK_COLUMNS}`,
        [webhook.id, webhook.companyId, webhook.url, webhook.types, webhook.secret],
        toWebhook,
      ),

    /** Oldest first. */
    listWebhooks: (companyId: string): Promise<WebhookRecord[]> =>
      all(db, `SELECT ${WEBHOOK_COLUMNS} FROM webhook WHERE company_id = $1 ORDER BY created_at, id`, [companyId], toWebhook),

    getWebhook: (id: string): Promise<WebhookRecord | undefined> => one(db, `SELECT ${WEBHOOK_COLUMNS} FROM webhook WHERE id = $1`, [id], toWebhook),

    /** The endpoint and its queue go; an attempt in flight finishes, its result is dropped. undefined: no such webhook. */
    deleteWebhook: (id: string): Promise<WebhookRecord | undefined> => one(db, `DELETE FROM webhook WHERE id = $1 RETURNING ${WEBHOOK_COLUMNS}`, [id], toWebhook),

    /** The latest deliveries of an endpoint, newest event first, each as its last attempt left it. */
    listDeliveries: (webhookId: string, limit: number): Promise<DeliveryRecord[]> =>
      all(
        db,
        `SELECT id, event_id, event_type, attempts, last_attempt_at, last_status, last_error, delivered_at, next_attempt_at
         FROM webhook_delivery WHERE webhook_id = $1 ORDER BY id DESC LIMIT $2`,
        [webhookId, limit],
        toDelivery,
      ),

    /**
     * SPEC §10.2: that delivery's event queued again for its endpoint, as a new delivery due
     * now (the same payload, as first sent). undefined: no such delivery (or its endpoint is gone).
     */
    redeliver: (deliveryId: string): Promise<{ id: string; webhookId: string; eventId: string } | undefined> =>
      one(
        db,
        `INSERT INTO webhook_delivery (webhook_id, event_id, event_type, payload)
         SELECT webhook_id, event_id, event_type, payload FROM webhook_delivery WHERE id = $1::bigint
         RETURNING id, webhook_id, event_id`,
        [deliveryId],
        (row: { id: BigintColumn; webhook_id: string; event_id: BigintColumn }) => ({ id: String(row.id), webhookId: row.webhook_id, eventId: String(row.event_id) }),
      ),

    /**
     * Takes the lease of up to `limit` endpoints that have a delivery due, no live lease and no
     * pause, at most `perCompany` of one company's counting those `owner` holds already
     * (SPEC §7.3: one company's endpoints never fill a node's slots). Companies take turns:
     * each one's first endpoint (the one whose delivery has waited longest) before anyone's
     * second. SKIP LOCKED: nodes claiming at once never take the same endpoint, and never wait
     * on each other; a row another node leased meanwhile fails the re-check of the WHERE.
     */
    claimEndpoints: (owner: string, leaseMs: number, limit: number, perCompany: number): Promise<LeasedEndpoint[]> =>
      all<{ id: string; url: string; secret: string; unanswered: number }, LeasedEndpoint>(
        db,
        `WITH held AS (
           SELECT company_id, count(*) AS n FROM webhook
           WHERE lease_owner = $1 AND lease_until >= clock_timestamp()
           GROUP BY company_id),
         due AS (
           SELECT w.id, w.company_id, oldest.at,
                  row_number() OVER (PARTITION BY w.company_id ORDER BY oldest.at, w.id) AS turn
           FROM webhook w
           CROSS JOIN LATERAL (SELECT min(d.next_attempt_at) AS at FROM webhook_delivery d
                               WHERE d.webhook_id = w.id AND d.next_attempt_at IS NOT NULL) oldest
           WHERE oldest.at <= clock_timestamp()
             AND (w.lease_until IS NULL OR w.lease_until < clock_timestamp())
             AND (w.paused_until IS NULL OR w.paused_until <= clock_timestamp())),
         picked AS (
           SELECT w.id FROM due
           JOIN webhook w ON w.id = due.id
           LEFT JOIN held ON held.company_id = due.company_id
           WHERE due.turn + coalesce(held.n, 0) <= $4
             AND (w.lease_until IS NULL OR w.lease_until < clock_timestamp())
           ORDER BY due.turn, due.at, due.id
           LIMIT $3
           FOR UPDATE OF w SKIP LOCKED)
         UPDATE webhook w SET lease_owner = $1, lease_until = clock_timestamp() + $2::double precision * interval '1 millisecond'
         FROM picked WHERE w.id = picked.id
         RETURNING w.id, w.url, w.secret, w.unanswered`,
        [owner, leaseMs, limit, perCompany],
        (row) => ({ id: row.id, url: row.url, secret: row.secret, unanswered: row.unanswered }),
      ),

    /** An endpoint's due deliveries, in event order. */
    dueDeliveries: (webhookId: string, limit: number): Promise<DueDelivery[]> =>
      all<{ id: BigintColumn; event_id: BigintColumn; payload: string; attempts: number }, DueDelivery>(
        db,
        `SELECT id, event_id, payload::text AS payload, attempts FROM webhook_delivery
         WHERE webhook_id = $1 AND next_attempt_at <= clock_timestamp()
         ORDER BY event_id LIMIT $2`,
        [webhookId, limit],
        (row) => ({ id: String(row.id), eventId: String(row.event_id), payload: row.payload, attempts: row.attempts }),
      ),

    /**
     * Records an attempt and renews the lease, in one statement; false when this node no
     * longer holds the lease (it lapsed and another node took it): the sender stops. An
     * attempt without an answer pauses the endpoint and counts; an answer clears both.
     */
    recordAttempt: async (owner: string, webhookId: string, deliveryId: string, outcome: AttemptOutcome, leaseMs: number): Promise<boolean> => {
      const rows = await db.query<{ owned: boolean }>(
        `WITH recorded AS (
           UPDATE webhook_delivery SET
             attempts = attempts + 1,
             last_attempt_at = clock_timestamp(),
             last_status = $4::integer,
             last_error = $5::text,
             delivered_at = CASE WHEN $3::boolean THEN clock_timestamp() END,
             next_attempt_at = CASE WHEN $3::boolean OR created_at + $7::double precision * interval '1 millisecond' <= clock_timestamp() THEN NULL
                                    ELSE clock_timestamp() + $6::double precision * interval '1 millisecond' END
           WHERE id = $2::bigint),
         renewed AS (
           UPDATE webhook SET
             lease_until = clock_timestamp() + $8::double precision * interval '1 millisecond',
             unanswered = CASE WHEN $10::double precision IS NULL THEN 0 ELSE unanswered + 1 END,
             paused_until = clock_timestamp() + $10::double precision * interval '1 millisecond'
           WHERE id = $9::uuid AND lease_owner = $1::text AND lease_until >= clock_timestamp()
           RETURNING 1)
         SELECT EXISTS (SELECT 1 FROM renewed) AS owned`,
        [owner, deliveryId, outcome.delivered, outcome.status, outcome.error, outcome.retryInMs, outcome.retryForMs, leaseMs, webhookId, outcome.pauseEndpointMs],
      )
      return rows[0]!.owned
    },

    /** Gives the lease back at once, so another node (or this one) can take the endpoint. */
    releaseEndpoint: async (owner: string, webhookId: string): Promise<void> => {
      await db.query(`UPDATE webhook SET lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2`, [webhookId, owner])
    },

    /** Forgets deliveries done (delivered or given up) more than `days` ago; how many. */
    pruneDeliveries: (days: number): Promise<number> =>
      count(
        db,
        `WITH gone AS (DELETE FROM webhook_delivery WHERE next_attempt_at IS NULL AND created_at < now() - $1::double precision * interval '1 day' RETURNING 1)
         SELECT count(*) AS n FROM gone`,
        [days],
      ),
  }
}
