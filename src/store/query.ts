import type { Db } from './db.js'

/** A bigint column: a string from pg, a number or a bigint from PGlite. */
export type BigintColumn = string | number | bigint

/** The first row of `sql`, mapped; undefined when there is none. */
export async function one<Row, T>(db: Db, sql: string, params: readonly unknown[], map: (row: Row) => T): Promise<T | undefined> {
  const rows = await db.query<Row>(sql, params)
  return rows[0] === undefined ? undefined : map(rows[0])
}

/** Every row of `sql`, mapped. */
export async function all<Row, T>(db: Db, sql: string, params: readonly unknown[], map: (row: Row) => T): Promise<T[]> {
  return (await db.query<Row>(sql, params)).map(map)
}

/** The `n` column of the one row of `sql` (a count). */
export async function count(db: Db, sql: string, params: readonly unknown[] = []): Promise<number> {
  return Number((await db.query<{ n: BigintColumn }>(sql, params))[0]!.n)
}
