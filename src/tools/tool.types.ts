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
  /** Per object, the writes the agent may propose (create, update, delete); absent: none. */
  writes?: Readonly<Record<string, readonly string[]>>;
}

export interface ToolContext {
  caller?: Caller;
  /** Absent for direct calls through POST /api/v1/ai/tools/:name/execute by a user. */
  agent?: ToolAgentScope;
  /** The durable chat the call is made in, for the audit trail. */
  chatId?: string;
  /**
   * Where a person can approve a write proposal made by this call (a durable chat's id, or a front door's own
   * conversation scope); what its token binds. Absent: write tools refuse to propose.
   */
  approvalScope?: string;
  /** The id of the call being run (set by the registry for each call). */
  toolCallId?: string;
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

/** What a tool's successful result holds (see ToolDefinition.holds). */
export type ToolResultKind = 'rows' | 'value' | 'chart' | 'proposal';

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
  /**
   * A write tool: its result is a proposal that a person must approve before anything is written, so it
   * is offered only where a turn can pause for one (durable chats), never listed or run directly.
   */
  needsApproval?: true;
  /**
   * What a successful result holds, for everything that reads results after the call (grounding, figure
   * references, charts, the audit): `rows` of data (each row gets a `ref` the answer may cite, and its cells are
   * evidence), one computed `value` (evidence, cited as a whole), a `chart` of an earlier result, or a write
   * `proposal`. Absent: it only describes (definitions, lists), and its numbers are never evidence.
   */
  holds?: ToolResultKind;
  /**
   * How an answer cites this tool's results ({{r1.2.amount}}): told the model with the description only where the
   * server fills references in (agent turns), never over MCP or in the tool listing, where nothing would.
   */
  citation?: string;
  /**
   * It works on the turn's earlier data results (ToolContext.evidence): `calculate` computes only with their values,
   * `visualize` charts their rows. The loop reads them for a step that calls such a tool.
   */
  readsTurnResults?: true;
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

/** One record a write proposal changes: its version when proposed, and only the fields that change. */
export interface ProposedChange {
  /** The record's id; null for a record to be created. */
  id: string | null;
  /** The record's version as the records API shows it (ETag); null for a record to be created. */
  etag: string | null;
  /** The changed fields as they are (the whole record for a delete); null for a create. */
  before: Record<string, unknown> | null;
  /** The changed fields as they would be; null for a delete. */
  after: Record<string, unknown> | null;
}

/** What a write tool returns: a proposal, nothing written, signed for a person to approve. */
export interface WriteProposal {
  objectName: string;
  operation: 'create' | 'update' | 'delete';
  changes: ProposedChange[];
  /** A revert of this change set (revert_change_set): approving it reverts the set as one, whatever `changes` previews. */
  revertOf?: string;
  /** The approval token (see ApprovalTokens): binds the chat, the call, its arguments, every version and the expiry. */
  token: string;
  expiresAt: string;
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
