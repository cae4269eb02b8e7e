/**
 * How a part of the node says what to close: right after it opened it. The parts are
 * opened in order inside one Fastify plugin (gateway.ts), and Fastify runs these in the
 * reverse order, on a shutdown and after a failed start alike — one path for both.
 */
export type OnClose = (close: () => Promise<unknown> | unknown) => void
