import { choice, common, flag, list, number, string } from '../args.js'

/** The options of the shared deployment, taken by every part of it (bench/lib/kit/kit.ts). */
export const KIT_OPTIONS = {
  url: list('a running deployment instead of nodes of our own (repeat for several nodes); needs --admin-token, or --key-id and --key-secret (users are then made by issuing tokens)'),
  adminToken: string('admin token of --url'),
  keyId: string('an API key of --url: its id'),
  keySecret: string('an API key of --url: its secret'),
  store: choice("the node's store: a scratch database on --pg-url, or the embedded PGlite store in a temporary DATA_DIR", ['pg', 'embedded'], 'pg'),
  pgUrl: common.pgUrl(),
  redisUrl: common.redisUrl(),
  redis: flag('run the single node on Redis too (default: the in-process bus)'),
  users: common.users(200_000, 300),
  hot: common.hot(10_000, 200),
  prepare: choice('api: the admin API and one token call per user; sql: INSERT … SELECT generate_series and tokens signed here; auto: api up to 20,000 users or with --url', ['auto', 'api', 'sql'], 'auto'),
  cacheSize: number("users cached per node (the node's CACHE_SIZE)", { default: 1_000_000 }),
  connections: common.connections(50, 10),
  duration: common.duration(5, 0.5),
  warmup: common.warmup(1, 0.05),
  rounds: common.rounds(3, 1),
  nodeOptions: string('extra node flags for the nodes under test, e.g. "--max-old-space-size=384"'),
  cpuProf: flag('start the nodes with --cpu-prof (profiles in ./bench-profiles; `npm run bench -- profile FILE…` reads them)'),
  keep: common.keep(),
}
