import type { Caller } from '../auth/caller';
import type { ErrorCode } from '../common/error-codes';

/** A JSON Schema object (draft 2020-12 subset ajv understands), as sent to the model. */
export type JsonSchema = Record<string, unknown>;

/** Who may see a tool: `agent` tools are offered to agents and listed; `platform` tools are hidden and callable only by name. */
export type ToolScope = 'agent' | 'platform';

/** The agent on whose behalf a tool runs; its lists are enforced by the permission middleware. */
export interface ToolAgentScope {
  name: string;
  /** Tool names the agent may call. */
  tools: string[];
  /** Object names the agent may touch; `['*']` means every object. */
  allowedObjects: string[];
}

export interface ToolContext {
  caller?: Caller;
  /** Absent for direct calls through POST /api/v1/ai/tools/:name/execute by a user. */
  agent?: ToolAgentScope;
  /** The durable chat the call is made in, for the audit trail. */
  chatId?: string;
  /** Aborted on timeout, interrupt or client disconnect. */
  signal: AbortSignal;
  /** A durable chat's worker runs the call: its data work takes the pool's background share (CHAT_TOOL_CONCURRENCY). */
  background?: boolean;
  /**
   * The turn's earlier data results (absent outside a chat turn): what `calculate` computes with and
   * what `visualize` charts.
   */
  evidence?: TurnEvidence;
}

/** The values of a turn's data results so far. */
export interface TurnEvidence {
  /** The call whose result holds the number written `text` (at the precision shown, either sign), if any. */
  supportOf(text: string): string | undefined;
  /** The successful data result of this call id, with what its columns are from metadata; undefined if none. */
  dataResult(toolCallId: string): Promise<TurnDataResult | undefined>;
}

/** A data result of the turn as the server stored it, read with the metadata of its columns. */
export interface TurnDataResult {
  toolCallId: string;
  /** The data tool that returned it. */
  name: string;
  arguments?: unknown;
  content: unknown;
  /** What the numbers of each column are (money in which currency, a percentage, a count, ...). */
  columns?: Record<string, { kind: string; currency?: string; aggregate?: string }>;
  /** Each column's label from the definitions (a field's label, a metric's label), where one is known. */
  labels?: Record<string, string>;
}

/** A tool: product text for the model plus a function. `execute` may throw; the registry turns that into a result. */
export interface ToolDefinition<Args = Record<string, unknown>> {
  name: string;
  /** What the model reads to decide when and how to call the tool. */
  description: string;
  /** JSON Schema of the arguments object; validated with ajv before `execute`. */
  parameters: JsonSchema;
  scope: ToolScope;
  /** Optional per-caller limit. */
  rateLimit?: { perMinute: number };
  /** Overrides the default per-call timeout (config.toolTimeoutMs) for this tool. */
  timeoutMs?: number;
  execute(args: Args, ctx: ToolContext): Promise<unknown>;
}

/** One call as the model made it: arguments are the raw JSON text or an already parsed object. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string | Record<string, unknown>;
}

/** The outcome of a call: what the model will read. */
export interface ToolOutcome {
  content: unknown;
  isError: boolean;
}

export interface ToolResult extends ToolOutcome {
  toolCallId: string;
  name: string;
  durationMs: number;
}

/** The content of an error outcome: what the model reads to recover. */
export interface ToolErrorContent {
  error: { code: ErrorCode; message: string; details?: unknown };
}

/** What middleware sees: the resolved tool and the parsed arguments. */
export interface ToolInvocation {
  call: ToolCall;
  tool: ToolDefinition;
  args: Record<string, unknown>;
}

/**
 * Wraps the rest of the chain. Call `next()` to continue; `next(ctx)` continues with a replaced
 * context (e.g. the timeout middleware passes a signal of its own). Returning without calling
 * `next` short-circuits the call (permission denied, rate limited).
 */
export type ToolMiddleware = (
  invocation: ToolInvocation,
  ctx: ToolContext,
  next: (ctx?: ToolContext) => Promise<ToolOutcome>,
) => Promise<ToolOutcome>;
