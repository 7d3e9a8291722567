import { EntityManager } from '@mikro-orm/postgresql';
import { Client } from 'pg';
import { runSql } from './sql';
import { quoteIdent } from './sql-identifier';

/** Sends `payload` on `channel` through `em`; inside a transaction Postgres delivers it on commit. */
export async function notify(em: EntityManager, channel: string, payload: string): Promise<void> {
  await runSql(em, 'select pg_notify($1, $2)', [channel, payload]);
}

/** Subscribes a dedicated connection to `channel` (LISTEN takes no bind parameters, so the name is quoted). */
export async function listen(client: Client, channel: string): Promise<void> {
  await client.query(`listen ${quoteIdent(channel)}`);
}
