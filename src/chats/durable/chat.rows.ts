import { EntityManager } from '@mikro-orm/postgresql';
import { Kysely, type RawBuilder, Selectable, sql } from 'kysely';
import { ChatDatabase, ChatMessagesTable, ChatsTable } from './chat.tables';
import { ChatMessageRow, ChatRow, ChatStatus, PendingToolCall } from './chat.types';

// What the chat repositories share: the columns of a ChatRow, the SET list of a status change, SQL fragments.

/** The columns of `chats` a new chat's insert sets; the others take their defaults. */
export const CHAT_CREATED_COLUMNS = [
  'id',
  'client_id',
  'owner',
  'owner_role',
  'owner_key_id',
  'turn_key_id',
  'agent',
  'title',
  'status',
  'context',
  'dynamic_tools',
] as const satisfies ReadonlyArray<keyof ChatsTable>;

/** Every column of `chats`: what a statement returns for a ChatRow. */
export const CHAT_COLUMNS = [
  ...CHAT_CREATED_COLUMNS,
  'pending_tool_calls',
  'action_expires_at',
  'worker_id',
  'claim_token',
  'heartbeat_at',
  'available_at',
  'attempts',
  'turn_iterations',
  'turn_tokens',
  'last_error',
  'created_at',
  'updated_at',
] as const satisfies ReadonlyArray<keyof ChatsTable>;

/** Every column of `chat_messages`: what a statement returns for a ChatMessageRow. */
export const MESSAGE_COLUMNS = [
  'id',
  'chat_id',
  'role',
  'parts',
  'usage',
  'client_id',
  'key_id',
  'access_fingerprint',
  'metadata',
  'created_at',
] as const satisfies ReadonlyArray<keyof ChatMessagesTable>;

/**
 * The messages of a subquery (`from` is aliased `m`), in id order, as one jsonb array of objects with
 * every MESSAGE_COLUMNS column: what toMessageRow reads back, for a statement that returns messages with a
 * chat's row.
 */
export function messagesJson(from: RawBuilder<unknown>) {
  const fields = sql.join(MESSAGE_COLUMNS.map((column) => sql`${sql.lit(column)}, m.${sql.ref(column)}`));
  return sql<
    Array<Selectable<ChatMessagesTable>>
  >`(select coalesce(jsonb_agg(jsonb_build_object(${fields}) order by m.id), '[]') from ${from})`;
}

/** A chat that leaves `running` loses its claim: no worker, no token, no heartbeat. */
export const NO_CLAIM = { worker_id: null, claim_token: null, heartbeat_at: null } as const;

/**
 * A status change of one chat (`running` is reached only by claim). The claim always ends; pending
 * tool calls and their deadline exist only in `requires_action`; nothing else changes unless asked.
 */
export type StatusChange = {
  /** Sets last_error, or clears it with null; kept when absent. */
  lastError?: ChatRow['lastError'];
  /** A new turn: its iteration and token counters, and attempts unless given, back to 0. */
  resetTurn?: boolean;
  /** Attempts so far; kept when absent (0 with resetTurn). */
  attempts?: number;
  /** Workers may claim the chat only after this delay (retry backoff); none when absent. */
  availableInMs?: number;
} & (
  | { status: 'requires_action' | 'requires_approval'; pendingToolCalls: PendingToolCall[]; actionExpiresInMs: number }
  | { status: Exclude<ChatStatus, 'running' | 'requires_action' | 'requires_approval'> }
);

/** The SET list of a status change; an undefined value leaves its column out: only what changes is written. */
export function statusSet(change: StatusChange) {
  const actionRequired = change.status === 'requires_action' || change.status === 'requires_approval';
  return {
    status: change.status,
    updated_at: now(),
    ...NO_CLAIM,
    pending_tool_calls: actionRequired ? json(change.pendingToolCalls) : null,
    action_expires_at: actionRequired ? msFromNow(change.actionExpiresInMs) : null,
    last_error: change.lastError === undefined ? undefined : json(change.lastError),
    turn_iterations: change.resetTurn ? 0 : undefined,
    turn_tokens: change.resetTurn ? 0 : undefined,
    attempts: change.attempts ?? (change.resetTurn ? 0 : undefined),
    available_at: msFromNow(change.availableInMs ?? 0),
  };
}

/** Typed Kysely on `em`'s connection, inside its transaction when there is one. */
export function db(em: EntityManager): Kysely<ChatDatabase> {
  return em.getKysely<ChatDatabase>();
}

export function now() {
  return sql<Date>`now()`;
}

/** `now()` moved by `ms` milliseconds (into the past when negative). */
export function msFromNow(ms: number) {
  return sql<Date>`now() + (${ms}::integer * interval '1 millisecond')`;
}

/** One uuid[] parameter, for `= any(...)`. */
export function uuids(ids: string[]) {
  return sql<string[]>`${ids}::uuid[]`;
}

/** JSON text for a jsonb column; null stays SQL NULL. */
export function json(value: object): string;
export function json(value: object | null): string | null;
export function json(value: object | null): string | null {
  return value === null ? null : JSON.stringify(value);
}

export function asDate(value: Date | string | null): Date | null {
  if (value === null) return null;
  return value instanceof Date ? value : new Date(value);
}

export function toChat(row: Selectable<ChatsTable>): ChatRow {
  return {
    id: row.id,
    clientId: row.client_id ?? null,
    owner: row.owner,
    ownerRole: row.owner_role,
    ownerKeyId: row.owner_key_id ?? null,
    turnKeyId: row.turn_key_id ?? null,
    agent: row.agent,
    title: row.title ?? null,
    status: row.status,
    context: row.context ?? null,
    dynamicTools: row.dynamic_tools ?? [],
    pendingToolCalls: row.pending_tool_calls ?? null,
    actionExpiresAt: asDate(row.action_expires_at),
    workerId: row.worker_id ?? null,
    claimToken: row.claim_token ?? null,
    heartbeatAt: asDate(row.heartbeat_at),
    availableAt: asDate(row.available_at)!,
    attempts: Number(row.attempts),
    turnIterations: Number(row.turn_iterations),
    turnTokens: Number(row.turn_tokens),
    lastError: row.last_error ?? null,
    createdAt: asDate(row.created_at)!,
    updatedAt: asDate(row.updated_at)!,
  };
}

/** A message row as a statement returns it (its timestamp a Date or, from JSON, its text). */
export function toMessageRow(row: Selectable<ChatMessagesTable>): ChatMessageRow {
  return {
    id: Number(row.id),
    chatId: row.chat_id,
    role: row.role,
    parts: row.parts,
    usage: row.usage ?? null,
    clientId: row.client_id ?? null,
    keyId: row.key_id ?? null,
    access: row.access_fingerprint ?? null,
    metadata: row.metadata ?? null,
    createdAt: asDate(row.created_at)!,
  };
}
