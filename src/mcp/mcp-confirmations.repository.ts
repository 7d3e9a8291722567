import type { EntityManager } from '@mikro-orm/postgresql';
import { ADVISORY_LOCK, lockNameForTransaction } from '../database/advisory-locks';
import { runSql } from '../database/sql';

/** A waiting elicitation, as its row names it. */
export interface ConfirmationRow {
  requestId: string;
  keyId: string;
  /** The session's nonce: an answer counts only from the session that was asked. */
  session: string;
  /** The JSON-RPC id (as JSON) of the tool call that waits: the client's cancellation of that call ends the wait. */
  callId: string;
  expiresAt: Date;
}

/** What a cancelled confirmation holds in place of an answer. */
export const CANCELLED = { cancelled: true } as const;

/**
 * The statements of `mcp_confirmations`: one row per elicitation a write call waits for on some replica, where
 * the replica that receives the client's answer stores it for the waiting one.
 */
export const ConfirmationStatements = {
  /**
   * Registers a waiting elicitation unless its key already has `max` unexpired ones (false then). Rows past
   * their expiry (a replica stopped while waiting) are removed first; the key's advisory lock keeps two
   * replicas from both taking the last place.
   */
  async open(em: EntityManager, row: ConfirmationRow, max: number): Promise<boolean> {
    return em.transactional(async (tx) => {
      await lockNameForTransaction(tx, ADVISORY_LOCK.mcpConfirmations, row.keyId);
      await runSql(tx, `delete from "mcp_confirmations" where "expires_at" < now()`);
      const [{ n }] = await runSql<{ n: number }>(
        tx,
        `select count(*)::int as n from "mcp_confirmations" where "key_id" = $1::uuid`,
        [row.keyId],
      );
      if (n >= max) return false;
      await runSql(
        tx,
        `insert into "mcp_confirmations" ("request_id", "key_id", "session", "call_id", "expires_at")
         values ($1, $2::uuid, $3, $4, $5)`,
        [row.requestId, row.keyId, row.session, row.callId, row.expiresAt],
      );
      return true;
    });
  },

  /**
   * Stores the answer to a waiting elicitation of this key's session, once; false when there is none (unknown,
   * answered already, finished, expired, or another key's or session's).
   */
  async answer(
    em: EntityManager,
    row: Pick<ConfirmationRow, 'requestId' | 'keyId' | 'session'>,
    answer: unknown,
  ): Promise<boolean> {
    const rows = await runSql(
      em,
      `update "mcp_confirmations" set "answer" = $4::jsonb
        where "request_id" = $1 and "key_id" = $2::uuid and "session" = $3 and "answer" is null and "expires_at" > now()
        returning "request_id"`,
      [row.requestId, row.keyId, row.session, JSON.stringify(answer)],
    );
    return rows.length > 0;
  },

  /**
   * Marks the waiting elicitations of these tool calls of this key's session as cancelled (CANCELLED in place of
   * an answer), once; returns their request ids.
   */
  async cancel(
    em: EntityManager,
    row: Pick<ConfirmationRow, 'keyId' | 'session'>,
    callIds: readonly string[],
  ): Promise<string[]> {
    const rows = await runSql<{ request_id: string }>(
      em,
      `update "mcp_confirmations" set "answer" = $4::jsonb
        where "key_id" = $1::uuid and "session" = $2 and "call_id" = any($3::text[]) and "answer" is null and "expires_at" > now()
        returning "request_id"`,
      [row.keyId, row.session, callIds, JSON.stringify(CANCELLED)],
    );
    return rows.map((r) => r.request_id);
  },

  /** The answers stored for these elicitations, by request id. */
  async answers(em: EntityManager, requestIds: readonly string[]): Promise<Map<string, unknown>> {
    if (!requestIds.length) return new Map();
    const rows = await runSql<{ request_id: string; answer: unknown }>(
      em,
      `select "request_id", "answer" from "mcp_confirmations" where "request_id" = any($1::text[]) and "answer" is not null`,
      [requestIds],
    );
    return new Map(rows.map((row) => [row.request_id, row.answer]));
  },

  async close(em: EntityManager, requestId: string): Promise<void> {
    await runSql(em, `delete from "mcp_confirmations" where "request_id" = $1`, [requestId]);
  },
};
