import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { ColumnType, Kysely, sql } from 'kysely';
import type { ApiKeyRole } from './api-key.entity';
import type { Caller } from './caller';

/** The tables these statements touch, as Kysely sees them (timestamps read as the driver returns them). */
interface StreamTokenDatabase {
  stream_tokens: {
    token_hash: string;
    key_id: string;
    chat_id: string | null;
    expires_at: ColumnType<Date | string, Date, never>;
    created_at: ColumnType<Date | string, never, never>;
  };
  api_keys: { id: string; role: ApiKeyRole; subject: string; owner: string; revoked: boolean };
}

/** A token as its route check needs it: who it runs as, and the chat it is bound to, if any. */
export interface StreamTokenGrant {
  caller: Caller;
  chatId: string | null;
}

/** Every SQL statement about stream tokens. Times are the database's (`now()`), the same on every replica. */
@Injectable()
export class StreamTokenRepository {
  /** The active key `keyId` as a Caller, its row locked for `em`'s transaction; undefined when revoked. */
  async lockActiveKey(em: EntityManager, keyId: string): Promise<Caller | undefined> {
    const row = await db(em)
      .selectFrom('api_keys')
      .select(['id', 'role', 'subject', 'owner'])
      .where('id', '=', keyId)
      .where('revoked', '=', false)
      .forUpdate()
      .executeTakeFirst();
    return row ? { keyId: row.id, role: row.role, subject: row.subject, owner: row.owner } : undefined;
  }

  /** The key's unexpired tokens: how many, and in how many milliseconds the first of them expires. */
  async live(em: EntityManager, keyId: string): Promise<{ count: number; firstExpiresInMs: number }> {
    const row = await db(em)
      .selectFrom('stream_tokens')
      .select((eb) => [
        eb.fn.countAll<string>().as('n'),
        sql<string | null>`ceil(extract(epoch from (min("expires_at") - now())) * 1000)`.as('first_ms'),
      ])
      .where('key_id', '=', keyId)
      .where('expires_at', '>', sql<Date>`now()`)
      .executeTakeFirstOrThrow();
    return { count: Number(row.n), firstExpiresInMs: Math.max(0, Number(row.first_ms ?? 0)) };
  }

  /** Stores a token's hash; returns when it expires. */
  async insert(em: EntityManager, token: { hash: string; keyId: string; chatId: string | null; ttlMs: number }): Promise<Date> {
    const row = await db(em)
      .insertInto('stream_tokens')
      .values({
        token_hash: token.hash,
        key_id: token.keyId,
        chat_id: token.chatId,
        expires_at: sql<Date>`now() + (${token.ttlMs}::integer * interval '1 millisecond')`,
      })
      .returning('expires_at')
      .executeTakeFirstOrThrow();
    return asDate(row.expires_at);
  }

  /** The grant of an unexpired token whose key is still active; undefined otherwise. */
  async findValid(em: EntityManager, hash: string): Promise<StreamTokenGrant | undefined> {
    const row = await db(em)
      .selectFrom('stream_tokens as t')
      .innerJoin('api_keys as k', 'k.id', 't.key_id')
      .select(['k.id', 'k.role', 'k.subject', 'k.owner', 't.chat_id'])
      .where('t.token_hash', '=', hash)
      .where('t.expires_at', '>', sql<Date>`now()`)
      .where('k.revoked', '=', false)
      .executeTakeFirst();
    return row
      ? { caller: { keyId: row.id, role: row.role, subject: row.subject, owner: row.owner }, chatId: row.chat_id }
      : undefined;
  }

  /** Removes every expired token; returns how many. */
  async deleteExpired(em: EntityManager): Promise<number> {
    const result = await db(em)
      .deleteFrom('stream_tokens')
      .where('expires_at', '<=', sql<Date>`now()`)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}

function db(em: EntityManager): Kysely<StreamTokenDatabase> {
  return em.getKysely<StreamTokenDatabase>();
}

function asDate(value: Date | string): Date {
  return value instanceof Date ? value : new Date(value);
}
