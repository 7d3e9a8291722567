import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { runSql } from '../../database/sql';
import type { LlmUsage } from '../../llm/llm.types';
import type { DynamicTool } from '../../runtime/client-tools';
import { ChatMessageRow, ChatPart, ChatRole, ChatRow, ChatStatus } from './chat.types';

const CHAT_COLUMNS = `id, owner, owner_role, agent, title, status, context, dynamic_tools, pending_tool_calls,
  action_expires_at, worker_id, claim_token, heartbeat_at, available_at, attempts, turn_iterations, turn_tokens, last_error,
  created_at, updated_at`;

type Row = Record<string, unknown>;

/**
 * Every SQL statement about chats. State changes that workers race on (claims, heartbeats,
 * ownership checks, status transitions) are single statements or run under the chat's row lock.
 */
@Injectable()
export class ChatRepository {
  async insertChat(em: EntityManager, chat: {
    id: string; owner: string; ownerRole: string; agent: string; title: string | null;
    context: Record<string, string> | null; dynamicTools: DynamicTool[];
  }): Promise<ChatRow> {
    const [row] = await runSql<Row>(
      em,
      `insert into chats (id, owner, owner_role, agent, title, status, context, dynamic_tools)
       values ($1, $2, $3, $4, $5, 'pending', $6::jsonb, $7::jsonb) returning ${CHAT_COLUMNS}`,
      [chat.id, chat.owner, chat.ownerRole, chat.agent, chat.title, json(chat.context), json(chat.dynamicTools)],
    );
    return toChat(row);
  }

  async find(em: EntityManager, id: string, owner?: string, options: { lock?: boolean } = {}): Promise<ChatRow | undefined> {
    const rows = await runSql<Row>(
      em,
      `select ${CHAT_COLUMNS} from chats where id = $1::uuid ${owner === undefined ? '' : 'and owner = $2'} ${options.lock ? 'for update' : ''}`,
      owner === undefined ? [id] : [id, owner],
    );
    return rows[0] ? toChat(rows[0]) : undefined;
  }

  async listOwned(em: EntityManager, owner: string, limit: number, offset: number): Promise<ChatRow[]> {
    const rows = await runSql<Row>(
      em,
      `select ${CHAT_COLUMNS} from chats where owner = $1 order by updated_at desc, id limit $2 offset $3`,
      [owner, limit, offset],
    );
    return rows.map(toChat);
  }

  async deleteChat(em: EntityManager, id: string): Promise<void> {
    await runSql(em, `delete from chats where id = $1::uuid`, [id]);
  }

  async insertMessage(em: EntityManager, chatId: string, role: ChatRole, parts: ChatPart[], usage?: LlmUsage): Promise<number> {
    const [row] = await runSql<{ id: string }>(
      em,
      `insert into chat_messages (chat_id, role, parts, usage) values ($1::uuid, $2, $3::jsonb, $4::jsonb) returning id`,
      [chatId, role, json(parts), usage ? json(usage) : null],
    );
    return Number(row.id);
  }

  /** Messages after `afterId` in order; `limit` null = all of them (the model needs the whole history). */
  async messages(em: EntityManager, chatId: string, afterId: number, limit: number | null): Promise<ChatMessageRow[]> {
    const rows = await runSql<Row>(
      em,
      `select id, chat_id, role, parts, usage, created_at from chat_messages
        where chat_id = $1::uuid and id > $2 order by id limit $3::integer`,
      [chatId, afterId, limit],
    );
    return rows.map((row) => ({
      id: Number(row.id),
      chatId: String(row.chat_id),
      role: row.role as ChatRole,
      parts: row.parts as ChatPart[],
      usage: (row.usage as LlmUsage | null) ?? null,
      createdAt: asDate(row.created_at)!,
    }));
  }

  /** Moves a chat to another status and sets or clears the fields that go with it. */
  async setStatus(em: EntityManager, id: string, status: ChatStatus, fields: {
    pendingToolCalls?: unknown; actionExpiresInMs?: number; lastError?: { code: string; message: string } | null;
    resetTurn?: boolean; availableInMs?: number; attempts?: number;
  } = {}): Promise<void> {
    await runSql(
      em,
      `update chats set status = $2::text, updated_at = now(),
          worker_id = case when $2::text = 'running' then worker_id else null end,
          claim_token = case when $2::text = 'running' then claim_token else null end,
          heartbeat_at = case when $2::text = 'running' then heartbeat_at else null end,
          pending_tool_calls = case when $2::text = 'requires_action' then $3::jsonb else null end,
          action_expires_at = case when $2::text = 'requires_action' then now() + ($4::integer * interval '1 millisecond') else null end,
          last_error = case when $5::boolean then $6::jsonb else last_error end,
          turn_iterations = case when $7::boolean then 0 else turn_iterations end,
          turn_tokens = case when $7::boolean then 0 else turn_tokens end,
          attempts = coalesce($9::integer, case when $7::boolean then 0 else attempts end),
          available_at = now() + ($8::integer * interval '1 millisecond')
        where id = $1::uuid`,
      [
        id, status, json(fields.pendingToolCalls ?? null), fields.actionExpiresInMs ?? 0,
        fields.lastError !== undefined, json(fields.lastError ?? null), fields.resetTurn ?? false,
        fields.availableInMs ?? 0, fields.attempts ?? null,
      ],
    );
  }

  /** Progress of the turn, written with each persisted step. */
  async recordProgress(em: EntityManager, id: string, iterations: number, tokens: number): Promise<void> {
    await runSql(em, `update chats set turn_iterations = $2, turn_tokens = $3, heartbeat_at = now(), updated_at = now() where id = $1::uuid`, [id, iterations, tokens]);
  }

  /**
   * Claims up to `limit` pending chats for a worker (each with a fresh claim token); concurrent
   * workers skip each other's rows, and a worker skips chats it is still unwinding (`busy`).
   */
  async claim(em: EntityManager, workerId: string, limit: number, busy: string[] = []): Promise<ChatRow[]> {
    const rows = await runSql<Row>(
      em,
      `update chats set status = 'running', worker_id = $1, claim_token = gen_random_uuid(), heartbeat_at = now(), updated_at = now()
        where id = any(array(
          select id from chats where status = 'pending' and available_at <= now() and not (id = any($3::uuid[]))
           order by available_at, id limit $2 for update skip locked))
        returning ${CHAT_COLUMNS}`,
      [workerId, limit, busy],
    );
    return rows.map(toChat);
  }

  /** One statement per replica per interval for all of its running chats. */
  async heartbeat(em: EntityManager, workerId: string, ids: string[]): Promise<void> {
    if (!ids.length) return;
    await runSql(em, `update chats set heartbeat_at = now() where worker_id = $1 and status = 'running' and id = any($2::uuid[])`, [workerId, ids]);
  }

  /** Running chats whose replica stopped heart-beating go back to pending; after `maxAttempts` such losses, to error. */
  async recoverStale(em: EntityManager, staleAfterMs: number, maxAttempts: number): Promise<Array<{ id: string; owner: string; status: ChatStatus }>> {
    return runSql(
      em,
      `update chats set worker_id = null, claim_token = null, heartbeat_at = null, updated_at = now(), available_at = now(),
          attempts = attempts + 1,
          status = case when attempts + 1 >= $2 then 'error' else 'pending' end,
          last_error = case when attempts + 1 >= $2
            then '{"code":"worker_lost","message":"The replica running this chat stopped responding too many times"}'::jsonb
            else last_error end
        where status = 'running' and heartbeat_at < now() - ($1::integer * interval '1 millisecond')
        returning id, owner, status`,
      [staleAfterMs, maxAttempts],
    );
  }

  /** Chats whose client did not answer in time, locked for the caller's transaction. */
  async lockExpiredActions(em: EntityManager, limit: number): Promise<ChatRow[]> {
    const rows = await runSql<Row>(
      em,
      `select ${CHAT_COLUMNS} from chats where status = 'requires_action' and action_expires_at < now()
        order by action_expires_at limit $1 for update skip locked`,
      [limit],
    );
    return rows.map(toChat);
  }

  /** On shutdown: this worker's chats go back to pending for another replica. */
  async release(em: EntityManager, workerId: string): Promise<Array<{ id: string; owner: string }>> {
    return runSql(
      em,
      `update chats set status = 'pending', worker_id = null, claim_token = null, heartbeat_at = null, updated_at = now(), available_at = now()
        where worker_id = $1 and status = 'running' returning id, owner`,
      [workerId],
    );
  }
}

function json(value: unknown): string | null {
  return value === null || value === undefined ? null : JSON.stringify(value);
}

function asDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value : new Date(String(value));
}

function toChat(row: Row): ChatRow {
  return {
    id: String(row.id),
    owner: String(row.owner),
    ownerRole: row.owner_role as ChatRow['ownerRole'],
    agent: String(row.agent),
    title: (row.title as string | null) ?? null,
    status: row.status as ChatStatus,
    context: (row.context as Record<string, string> | null) ?? null,
    dynamicTools: (row.dynamic_tools as DynamicTool[]) ?? [],
    pendingToolCalls: (row.pending_tool_calls as ChatRow['pendingToolCalls']) ?? null,
    actionExpiresAt: asDate(row.action_expires_at),
    workerId: (row.worker_id as string | null) ?? null,
    claimToken: (row.claim_token as string | null) ?? null,
    heartbeatAt: asDate(row.heartbeat_at),
    availableAt: asDate(row.available_at)!,
    attempts: Number(row.attempts),
    turnIterations: Number(row.turn_iterations),
    turnTokens: Number(row.turn_tokens),
    lastError: (row.last_error as ChatRow['lastError']) ?? null,
    createdAt: asDate(row.created_at)!,
    updatedAt: asDate(row.updated_at)!,
  };
}
