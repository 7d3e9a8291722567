import { EntityManager } from '@mikro-orm/postgresql';
import { CompiledQuery } from 'kysely';

/**
 * Runs SQL with real bind parameters ($1, $2, ...) on the EntityManager's connection, inside its
 * transaction when there is one. (MikroORM's `em.execute` interpolates values into the text on the
 * client; everything built from user input goes through here instead.)
 */
export async function runSql<T = Record<string, unknown>>(
  em: EntityManager,
  sql: string,
  params: readonly unknown[] = [],
): Promise<T[]> {
  return runQuery<T>(em, CompiledQuery.raw(sql, [...params]));
}

/** Runs a compiled query (text plus bound parameters) like runSql; returns its rows. */
export async function runQuery<T>(em: EntityManager, query: CompiledQuery<T>): Promise<T[]> {
  const result = await em.getKysely().executeQuery<T>(query);
  return result.rows;
}
