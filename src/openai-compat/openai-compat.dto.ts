import type { AgentResponse } from '../agents/agent.dto';
import type { Grounding } from '../runtime/grounding';

/** Who owns every model this server lists. */
export const OWNED_BY = 'data-copilot';

/** An agent as an OpenAI model. */
export interface ModelResponse {
  /** The agent name. */
  id: string;
  object: 'model';
  /** When the agent was created, Unix seconds. */
  created: number;
  owned_by: string;
}

export interface ModelListResponse {
  object: 'list';
  data: ModelResponse[];
}

export function toModelResponse(agent: AgentResponse): ModelResponse {
  return { id: agent.name, object: 'model', created: Math.floor(Date.parse(agent.createdAt) / 1000), owned_by: OWNED_BY };
}

export interface CompletionToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface CompletionMessage {
  role: 'assistant';
  content: string | null;
  refusal: null;
  /** Client tool calls (finish_reason tool_calls). */
  tool_calls?: CompletionToolCall[];
}

export interface CompletionChoice {
  index: number;
  message: CompletionMessage;
  logprobs: null;
  finish_reason: 'stop' | 'length' | 'tool_calls';
}

export interface CompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** OpenAI's `chat.completion`: one choice, the usage of every model call of the turn. */
export interface ChatCompletionResponse {
  id: string;
  object: 'chat.completion';
  created: number;
  /** The agent name the client asked for. */
  model: string;
  choices: CompletionChoice[];
  /** All model calls of the turn, built-in tool rounds included. */
  usage: CompletionUsage;
  /** Not OpenAI's: which numbers of the answer the turn's tool results support (absent when the agent's grounding is off). */
  grounding?: Grounding;
}
