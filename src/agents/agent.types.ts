import type { ApiKeyRole } from '../auth/api-key.entity';

/** What an agent does with the check: report it (default), ask the model once to fix unsupported figures, or skip it. */
export const GROUNDING_MODES = ['annotate', 'retry', 'off'] as const;
export type GroundingMode = (typeof GROUNDING_MODES)[number];

export function isGroundingMode(value: unknown): value is GroundingMode {
  return GROUNDING_MODES.includes(value as GroundingMode);
}

export interface AgentModelSettings {
  /** Model name; absent = LLM_MODEL. */
  model?: string;
  temperature?: number;
  /** Most completion tokens per model call. */
  maxTokens?: number;
  /**
   * Most prompt tokens per model call (system message, tool schemas, conversation); a longer conversation
   * is trimmed to it. Absent = LLM_CONTEXT_TOKENS.
   */
  contextTokens?: number;
}

/** The model settings as stored: the agent's locale is kept in the same JSON column (it has none of its own). */
export interface StoredModelSettings extends AgentModelSettings {
  locale?: string;
}

/** The locale an agent writes numbers in when its spec names none. */
export const DEFAULT_AGENT_LOCALE = 'en';

export interface AgentPlanning {
  /** Model calls with tools before a final answer is forced (1..AGENT_MAX_ITERATIONS, default AGENT_DEFAULTS.maxIterations). */
  maxIterations: number;
  /**
   * Tool calls run per model step (1..AGENT_MAX_TOOL_CALLS_PER_STEP, default 16); calls past the cap are
   * dropped unrun (a note tells the model how many), and the model can make them in its next step.
   */
  maxToolCallsPerStep: number;
}

export interface AgentGuardrails {
  /** Deadline of one whole turn, seconds. */
  maxExecutionTimeSec: number;
  /** Token budget of one whole turn (all model calls together). */
  maxTokensPerInvocation: number;
}

/** Who may use the agent: callers whose role or subject is listed. Admins always may. Absent lists = everyone. */
export interface AgentAccess {
  roles?: ApiKeyRole[];
  subjects?: string[];
}

/** Operations a write tool may propose on a record. */
export const WRITE_OPERATIONS = ['create', 'update', 'delete'] as const;
export type WriteOperation = (typeof WRITE_OPERATIONS)[number];

/** Per object, the operations the agent may propose (each still needs a person's approval). */
export type AgentWrites = Record<string, WriteOperation[]>;

/** An agent as the runtime and the API see it. */
export interface AgentSpec {
  name: string;
  label: string;
  role: string;
  description: string | null;
  instructions: string;
  model: AgentModelSettings;
  tools: string[];
  allowedObjects: string[];
  /** The writes the agent may propose with its write tools; none by default. */
  writes: AgentWrites;
  planning: AgentPlanning;
  guardrails: AgentGuardrails;
  access: AgentAccess;
  /**
   * What happens to the numbers of an answer that no tool result of the turn supports: `annotate`
   * reports them, `retry` also asks the model once to correct or remove them, `off` skips the check.
   */
  grounding: GroundingMode;
  /** BCP 47 locale the agent answers in: how grounding reads its numbers (1,234.5 in en, 1.234,5 in de). */
  locale: string;
  active: boolean;
  version: number;
}

/** Most tool rounds one turn may plan; an agent asking for more is refused (API) or not run (stored). */
export const AGENT_MAX_ITERATIONS = 50;

/** Most tool calls one model step may run: each is a query, and a model can ask for thousands. */
export const AGENT_MAX_TOOL_CALLS_PER_STEP = 64;

export const AGENT_DEFAULTS = {
  maxIterations: 10,
  maxToolCallsPerStep: 16,
  maxExecutionTimeSec: 120,
  maxTokensPerInvocation: 100_000,
} as const;

export const AGENT_NAME_PATTERN = /^[a-z][a-z0-9_-]{0,62}$/;
