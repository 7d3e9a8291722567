import type { EntityManager } from '@mikro-orm/postgresql';
import { BeforeApplicationShutdown, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { isUuid } from '../common/uuid';
import { BatchedWriter } from '../database/batched-writer';
import { AuditEntryResponse, AuditListResponse, AuditQueryDto, DEFAULT_AUDIT_LIMIT, MAX_AUDIT_LIMIT } from './audit.dto';
import type { CompiledQuery } from 'kysely';
import { AuditRepository, toolCallsInsert, type AuditRow, type ToolCallRow } from './audit.repository';
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
  /** The id of the call (links a write proposal with its decision and its write). */
  toolCallId?: string;
  /** Set on the steps of a write proposal after the call: approval.approve, approval.reject, approval.expire, record.write. */
  action?: string;
  /** Of a write: the records, e.g. deal/<id>. */
  target?: string;
  tool: string;
  /** Already without values of fields hidden from the caller. */
  arguments: unknown;
  rowCount: number | null;
  durationMs: number;
  outcome: string;
}

/** Arguments larger than this (JSON) are stored as a note of their size only. */
const MAX_ARGUMENTS_BYTES = 16 * 1024;

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

  constructor(private readonly repo: AuditRepository) {}

  /** An admin change, inside the caller's transaction `em`. */
  async admin(em: EntityManager, actor: AuditActor | undefined, action: string, target: string): Promise<void> {
    await this.repo.insertAdmin(em, { keyId: isUuid(actor?.keyId) ? actor.keyId : null, action, target: target.slice(0, 300) });
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
    const rows = await this.repo.list(
      {
        kind: query.kind,
        keyId: query.keyId,
        agent: query.agent,
        chatId: query.chatId,
        from: query.from === undefined ? undefined : parseTime(query.from, 'from'),
        to: query.to === undefined ? undefined : parseTime(query.to, 'to'),
        before: query.cursor,
      },
      limit + 1,
    );
    const page = rows.slice(0, limit);
    const response: AuditListResponse = { entries: page.map(toEntry) };
    if (rows.length > limit) response.nextCursor = page[page.length - 1].id;
    return response;
  }

  private async insertToolCalls(batch: ToolAuditEntry[]): Promise<void> {
    await this.repo.insertToolCalls(batch.map(toolCallRow));
  }
}

/**
 * The INSERT of tool-call entries (one statement for many), for callers that must write entries inside their own
 * transaction (a write and its entries commit together).
 */
export function toolCallInsert(batch: readonly ToolAuditEntry[]): CompiledQuery {
  return toolCallsInsert(batch.map(toolCallRow));
}

/** A tool-call entry as it is stored. */
function toolCallRow(entry: ToolAuditEntry): ToolCallRow {
  return {
    at: entry.at.toISOString(),
    key_id: isUuid(entry.keyId) ? entry.keyId : null,
    agent: entry.agent ?? null,
    chat_id: isUuid(entry.chatId) ? entry.chatId : null,
    tool_call_id: entry.toolCallId?.slice(0, 200) ?? null,
    tool: entry.tool.slice(0, 100),
    action: entry.action?.slice(0, 100) ?? null,
    target: entry.target?.slice(0, 300) ?? null,
    arguments: storableArguments(entry.arguments),
    row_count: entry.rowCount,
    duration_ms: Math.round(entry.durationMs),
    outcome: entry.outcome.slice(0, 100),
  };
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
  if (row.toolCallId !== null) entry.toolCallId = row.toolCallId;
  if (row.tool !== null) entry.tool = row.tool;
  if (row.action !== null) entry.action = row.action;
  if (row.target !== null) entry.target = row.target;
  if (row.arguments !== null) entry.arguments = row.arguments;
  if (row.rowCount !== null) entry.rowCount = row.rowCount;
  if (row.durationMs !== null) entry.durationMs = row.durationMs;
  return entry;
}
