import { MockLlmServer } from './mock-llm.server';
import { startTestApp, TestApp, TestAppOptions } from './test-app';

/** An app wired to a fresh mock model server (no retries, so each scripted step is one call). */
export async function startAppWithMockLlm(options: TestAppOptions = {}): Promise<{ t: TestApp; llm: MockLlmServer }> {
  const llm = await MockLlmServer.start();
  const t = await startTestApp({
    ...options,
    env: {
      OPENAI_BASE_URL: llm.url,
      OPENAI_API_KEY: 'sk-test-key',
      LLM_MAX_RETRIES: '0',
      LLM_MODEL: 'mock-model',
      ...options.env,
    },
  });
  return { t, llm };
}

/** A tool call in an assistant message the app sent: a function call, or a freeform (custom) one. */
export interface SentToolCall {
  id: string;
  type: 'function' | 'custom';
  function?: { name: string; arguments: string };
  custom?: { name: string; input: string };
}

/** A message as the app sends it to the model (Chat Completions wire format; this app sends content as plain text). */
export interface SentMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  /** null only for an assistant message that carries nothing but tool calls. */
  content: string | null;
  tool_call_id?: string;
  tool_calls?: SentToolCall[];
}

/** Messages the model received in request `index`, as sent over the wire. */
export function sentMessages(llm: MockLlmServer, index: number): SentMessage[] {
  return (llm.requests[index].body?.messages ?? []) as SentMessage[];
}

/** A message's content parsed as JSON: what a tool message carries is its tool's result as JSON text. */
export function parsedContent<T = unknown>(message: SentMessage): T {
  return JSON.parse(message.content as string) as T;
}

/** Names of the tools offered in request `index` (empty when none were sent). */
export function sentToolNames(llm: MockLlmServer, index: number): string[] {
  return ((llm.requests[index].body?.tools ?? []) as Array<{ function?: { name: string } }>).map((t) => t.function?.name ?? '?');
}
