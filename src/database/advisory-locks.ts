import { EntityManager } from '@mikro-orm/postgresql';
import { Client } from 'pg';
import { runSql } from './sql';

/** Every Postgres advisory lock key of the app, in one list so two features never share a number by accident. */
export const ADVISORY_LOCK = {
  /** Shared by every replica: one of them migrates and seeds at a time. */
  startup: 727_001,
  /** Serialises revocations of admin keys, so two of them cannot both pass the last-admin check. */
  adminRevoke: 727_002,
  /** Taken by every metadata write, so concurrent DDL cannot interleave. */
  metadata: 727_010,
  /** Per chat owner: admissions of new turns count the owner's chats in flight one at a time (passed to chat_owner_admits). */
  chatOwner: 727_020,
  /** Per object (the two-integer form): one reader at a time numbers the object's committed changes (record_changes_sequence). */
  changeFeed: 727_030,
  /** Per API key (the two-integer form): MCP write confirmations waiting are counted against the key's bound one at a time. */
  mcpConfirmations: 727_040,
} as const;

export type AdvisoryLockKey = (typeof ADVISORY_LOCK)[keyof typeof ADVISORY_LOCK];

/** Waits for a transaction-level lock in `em`'s transaction; Postgres releases it at commit or rollback. */
export async function lockForTransaction(em: EntityManager, key: AdvisoryLockKey): Promise<void> {
  await runSql(em, 'select pg_advisory_xact_lock($1)', [key]);
}

/**
 * Like lockForTransaction, for one `name` under `key` (say, one owner): the two-integer form of the
 * lock, a key space apart from the single-key locks. Names that hash alike merely wait for each other.
 */
export async function lockNameForTransaction(em: EntityManager, key: AdvisoryLockKey, name: string): Promise<void> {
  await runSql(em, 'select pg_advisory_xact_lock($1, hashtext($2))', [key, name]);
}

/** Runs `work` while holding a session-level lock, taken on a connection of its own that ends with it. */
export async function withSessionLock<T>(databaseUrl: string, key: AdvisoryLockKey, work: () => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('select pg_advisory_lock($1)', [key]);
    return await work();
  } finally {
    await client.query('select pg_advisory_unlock($1)', [key]).catch(() => undefined);
    await client.end().catch(() => undefined);
  }
}
