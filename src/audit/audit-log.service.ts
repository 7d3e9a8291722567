import { EntityManager } from '@mikro-orm/postgresql';
import { BeforeApplicationShutdown, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { isUuid } from '../common/uuid';
import { BatchedWriter } from '../database/batched-writer';
import { runSql } from '../database/sql';
import {
  AuditEntryResponse,
  AuditListResponse,
  AuditQueryDto,
  DEFAULT_AUDIT_LIMIT,
  MAX_AUDIT_LIMIT,
  type AuditKind,
} from './audit.dto';
import { parseTime } from '../common/query-params';

/** Who made a change: an API key (anything else, such as the server seeding its sample data, has none). */
export interface AuditActor {
  keyId: string;
}

/** One tool call, as the tool registry's audit middleware saw it end. */
export interface ToolAuditEntry {
  at: Date;
  keyId?: string;
  agent?: string;
  chatId?: string;
  tool: string;
  /** Already without values of fields hidden from the caller. */
  arguments: unknown;
  rowCount: number | null;
  durationMs: number;
  outcome: string;
}

/** Arguments larger than this (JSON) are stored as a note of their size only. */
const MAX_ARGUMENTS_BYTES = 16 * 1024;

interface AuditRow {
  id: string;
  at: Date;
  kind: AuditKind;
  keyId: string | null;
  agent: string | null;
  chatId: string | null;
  tool: string | null;
  action: string | null;
  target: string | null;
  arguments: unknown;
  rowCount: number | null;
  durationMs: number | null;
  outcome: string;
}

/**
 * The audit trail (`audit_log`, append-only: see its migration).
 *
 * Admin changes are written by the service that makes them, in the same transaction, so a change
 * and its entry commit together or not at all. Tool calls are written after the call, in batches
 * (one INSERT for up to 200 calls, at most 100 ms later), so an audited call costs no round trip of
 * its own; whatever is buffered is written on a normal shutdown, after the chat worker has stopped.
 */
@Injectable()
export class AuditLog implements BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly toolCalls = new BatchedWriter<ToolAuditEntry>((batch) => this.insertToolCalls(batch), {
    maxBatch: 200,
    delayMs: 100,
    maxBuffered: 20_000,
    what: 'audit entries of tool calls',
  });

  constructor(private readonly em: EntityManager) {}

  /** An admin change, inside the caller's transaction `em`. */
  async admin(em: EntityManager, actor: AuditActor | undefined, action: string, target: string): Promise<void> {
    await runSql(
      em,
      `insert into "audit_log" ("kind", "key_id", "action", "target", "outcome") values ('admin', $1, $2, $3, 'ok')`,
      [isUuid(actor?.keyId) ? actor.keyId : null, action, target.slice(0, 300)],
    );
  }

  /** Queues a tool call; it is written with the next batch. */
  toolCall(entry: ToolAuditEntry): void {
    this.toolCalls.push(entry);
  }

  /** Writes every queued tool call; resolves once they are in the table (or their write failed and was logged). */
  flush(): Promise<void> {
    return this.toolCalls.flush();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.toolCalls.flush();
  }

  /** Again after every worker stopped, before the database connection closes. */
  async onApplicationShutdown(): Promise<void> {
    await this.toolCalls.close();
  }

  /** Newest first; keyset paging on the id. */
  async query(query: AuditQueryDto): Promise<AuditListResponse> {
    const limit = Math.min(query.limit ?? DEFAULT_AUDIT_LIMIT, MAX_AUDIT_LIMIT);
    const conditions: string[] = [];
    const params: unknown[] = [];
    const add = (condition: (param: string) => string, value: unknown) => {
      params.push(value);
      conditions.push(condition(`$${params.length}`));
    };
    if (query.kind !== undefined) add((p) => `"kind" = ${p}`, query.kind);
    if (query.keyId !== undefined) add((p) => `"key_id" = ${p}::uuid`, query.keyId);
    if (query.agent !== undefined) add((p) => `"agent" = ${p}`, query.agent);
    if (query.chatId !== undefined) add((p) => `"chat_id" = ${p}::uuid`, query.chatId);
    if (query.from !== undefined) add((p) => `"at" >= ${p}::timestamptz`, parseTime(query.from, 'from'));
    if (query.to !== undefined) add((p) => `"at" < ${p}::timestamptz`, parseTime(query.to, 'to'));
    if (query.cursor !== undefined) add((p) => `"id" < ${p}::bigint`, query.cursor);
    params.push(limit + 1);
    const rows = await runSql<AuditRow>(
      this.em.fork(),
      `select "id"::text as "id", "at", "kind", "key_id" as "keyId", "agent", "chat_id" as "chatId", "tool", "action",
         "target", "arguments", "row_count" as "rowCount", "duration_ms" as "durationMs", "outcome"
       from "audit_log" ${conditions.length ? `where ${conditions.join(' and ')}` : ''}
       order by "audit_log"."id" desc limit $${params.length}`,
      params,
    );
    const page = rows.slice(0, limit);
    const response: AuditListResponse = { entries: page.map(toEntry) };
    if (rows.length > limit) response.nextCursor = page[page.length - 1].id;
    return response;
  }

  private async insertToolCalls(batch: ToolAuditEntry[]): Promise<void> {
    const records = batch.map((entry) => ({
      at: entry.at.toISOString(),
      key_id: isUuid(entry.keyId) ? entry.keyId : null,
      agent: entry.agent ?? null,
      chat_id: isUuid(entry.chatId) ? entry.chatId : null,
      tool: entry.tool.slice(0, 100),
      arguments: storableArguments(entry.arguments),
      row_count: entry.rowCount,
      duration_ms: Math.round(entry.durationMs),
      outcome: entry.outcome.slice(0, 100),
    }));
    await runSql(
      this.em.fork(),
      `insert into "audit_log" ("at", "kind", "key_id", "agent", "chat_id", "tool", "arguments", "row_count", "duration_ms", "outcome")
       select "at", 'tool', "key_id", "agent", "chat_id", "tool", "arguments", "row_count", "duration_ms", "outcome"
       from jsonb_to_recordset($1::jsonb) as x("at" timestamptz, "key_id" uuid, "agent" text, "chat_id" uuid, "tool" text,
         "arguments" jsonb, "row_count" integer, "duration_ms" integer, "outcome" text)`,
      // NUL cannot be stored in jsonb: a model may well send one.
      [JSON.stringify(records).replaceAll('\\u0000', '')],
    );
  }
}

/** Arguments as stored: JSON values only, and a note of the size instead of very large ones. */
function storableArguments(args: unknown): unknown {
  const json = JSON.stringify(args ?? null);
  const bytes = Buffer.byteLength(json ?? 'null');
  if (bytes > MAX_ARGUMENTS_BYTES) return { omitted: true, bytes };
  return args ?? null;
}

function toEntry(row: AuditRow): AuditEntryResponse {
  const entry: AuditEntryResponse = {
    id: row.id,
    at: new Date(row.at).toISOString(),
    kind: row.kind,
    keyId: row.keyId,
    outcome: row.outcome,
  };
  if (row.agent !== null) entry.agent = row.agent;
  if (row.chatId !== null) entry.chatId = row.chatId;
  if (row.tool !== null) entry.tool = row.tool;
  if (row.action !== null) entry.action = row.action;
  if (row.target !== null) entry.target = row.target;
  if (row.arguments !== null) entry.arguments = row.arguments;
  if (row.rowCount !== null) entry.rowCount = row.rowCount;
  if (row.durationMs !== null) entry.durationMs = row.durationMs;
  return entry;
}
