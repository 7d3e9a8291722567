import { EntityManager } from '@mikro-orm/postgresql';
import { CompiledQuery } from 'kysely';
import { runQuery } from '../database/sql';
import type { DataSession } from '../database/data-pool';
import { toolCallInsert, type ToolAuditEntry } from '../audit/audit-log.service';
import { ApprovalTokens } from './approval-tokens';

/** Where a statement runs: the ORM's transaction (chats), or a data transaction (the write and what commits with it). */
type Runner = EntityManager | DataSession;

/** What a spent token's decision came to, kept with it: the tool result the model reads. */
export interface SpentOutcome {
  content: unknown;
  isError: boolean;
}

/**
 * The statements of approvals: `approval_tokens` (spent tokens, one row each, with their outcome) and the audit
 * rows of a proposal's decision and write. Each runs on the ORM's transaction or on a data transaction, so that a
 * write, the spending of its token and its audit rows commit together.
 */
export const ApprovalStatements = {
  /** Spends a token: a row back when this spender is the first, none when it was spent already. */
  async spend(
    runner: Runner,
    spent: { token: string; scope: string; toolCallId: string; decision: 'approve' | 'reject' | 'expire'; keyId: string },
  ): Promise<boolean> {
    const rows = await run(
      runner,
      CompiledQuery.raw(
        `insert into "approval_tokens" ("token_hash", "scope", "tool_call_id", "decision", "key_id")
         values ($1, $2, $3, $4, $5::uuid) on conflict ("token_hash") do nothing returning "token_hash"`,
        [ApprovalTokens.hash(spent.token), spent.scope, spent.toolCallId, spent.decision, spent.keyId],
      ),
    );
    return rows.length > 0;
  },

  /** Records what a spent token's decision came to. */
  async recordOutcome(runner: Runner, token: string, outcome: SpentOutcome): Promise<void> {
    await run(
      runner,
      CompiledQuery.raw(`update "approval_tokens" set "outcome" = $2::jsonb where "token_hash" = $1`, [
        ApprovalTokens.hash(token),
        JSON.stringify(outcome),
      ]),
    );
  },

  /** The recorded outcomes of the spent tokens of a scope (a chat), by tool call id. */
  async outcomes(runner: Runner, scope: string): Promise<Map<string, SpentOutcome>> {
    const rows = await run<{ tool_call_id: string; outcome: SpentOutcome }>(
      runner,
      CompiledQuery.raw(`select "tool_call_id", "outcome" from "approval_tokens" where "scope" = $1 and "outcome" is not null`, [
        scope,
      ]),
    );
    return new Map(rows.map((row) => [row.tool_call_id, row.outcome]));
  },

  /** A spent token's row: who spent it, and what came of it (null while its write runs). */
  async spent(runner: Runner, token: string): Promise<{ keyId: string | null; outcome: SpentOutcome | null } | undefined> {
    const rows = await run<{ key_id: string | null; outcome: SpentOutcome | null }>(
      runner,
      CompiledQuery.raw(`select "key_id", "outcome" from "approval_tokens" where "token_hash" = $1`, [
        ApprovalTokens.hash(token),
      ]),
    );
    return rows[0] && { keyId: rows[0].key_id, outcome: rows[0].outcome };
  },

  /** Audit rows, in the runner's transaction. */
  async audit(runner: Runner, entries: readonly ToolAuditEntry[]): Promise<void> {
    if (!entries.length) return;
    await run(runner, toolCallInsert(entries));
  },
};

function run<T = Record<string, unknown>>(runner: Runner, query: CompiledQuery): Promise<T[]> {
  const typed = query as CompiledQuery<T>;
  return runner instanceof EntityManager ? runQuery(runner, typed) : runner.query(typed);
}
