import type { ColumnType, Generated, JSONColumnType } from 'kysely';
import type { ApiKeyRole } from '../../auth/api-key.entity';
import type { LlmUsage } from '../../llm/llm.types';
import type { DynamicTool } from '../../runtime/client-tools';
import type { ChatPart, ChatRole, ChatRow, ChatStatus, PendingToolCall, StepMetadata } from './chat.types';

/**
 * The chat tables as Kysely sees them (columns as created by the chats migrations). Timestamps are
 * read as the driver returns them (a Date or its text) and written only as SQL expressions (`now()`);
 * jsonb columns are read parsed and written as JSON text.
 */
export interface ChatDatabase {
  chats: ChatsTable;
  chat_messages: ChatMessagesTable;
}

type Timestamp = ColumnType<Date | string, Date | undefined, Date>;
type NullableTimestamp = ColumnType<Date | string | null, Date | null | undefined, Date | null>;
type NullableJson<T extends object> = JSONColumnType<T | null, string | null, string | null>;

export interface ChatsTable {
  id: string;
  client_id: ColumnType<string | null, string | null | undefined, string | null>;
  owner: string;
  owner_role: ApiKeyRole;
  owner_key_id: ColumnType<string | null, string | null | undefined, string | null>;
  turn_key_id: ColumnType<string | null, string | null | undefined, string | null>;
  agent: string;
  title: string | null;
  status: ChatStatus;
  context: NullableJson<Record<string, string>>;
  dynamic_tools: JSONColumnType<DynamicTool[]>;
  pending_tool_calls: NullableJson<PendingToolCall[]>;
  action_expires_at: NullableTimestamp;
  worker_id: string | null;
  /** Set by each claim; a run may write only while the row still carries its token. */
  claim_token: ColumnType<string | null, string | null | undefined, string | null>;
  heartbeat_at: NullableTimestamp;
  available_at: Timestamp;
  attempts: Generated<number>;
  turn_iterations: Generated<number>;
  turn_tokens: Generated<number>;
  last_error: NullableJson<NonNullable<ChatRow['lastError']>>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ChatMessagesTable {
  /** bigserial, the stream cursor: pg returns int8 as text; callers compare it with numbers. */
  id: ColumnType<string | number, never, never>;
  chat_id: string;
  role: ChatRole;
  parts: JSONColumnType<ChatPart[]>;
  usage: NullableJson<LlmUsage>;
  client_id: ColumnType<string | null, string | null | undefined, string | null>;
  key_id: ColumnType<string | null, string | null | undefined, string | null>;
  access_fingerprint: ColumnType<string | null, string | null | undefined, string | null>;
  metadata: ColumnType<StepMetadata | null, string | null | undefined, string | null>;
  created_at: Timestamp;
}
