import { MockLlmServer } from './mock-llm.server';
import { startTestApp, TestApp, TestAppOptions } from './test-app';

/** An app wired to a fresh mock model server (no retries, so each scripted step is one call). */
export async function startAppWithMockLlm(options: TestAppOptions = {}): Promise<{ t: TestApp; llm: MockLlmServer }> {
  const llm = await MockLlmServer.start();
  const t = await startTestApp({
    ...options,
    env: { OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'sk-test-key', LLM_MAX_RETRIES: '0', LLM_MODEL: 'mock-model', ...options.env },
  });
  return { t, llm };
}

/** Messages the model received in request `index`, as sent over the wire. */
export function sentMessages(llm: MockLlmServer, index: number): Array<Record<string, any>> {
  return (llm.requests[index].body?.messages ?? []) as Array<Record<string, any>>;
}

/** Names of the tools offered in request `index` (empty when none were sent). */
export function sentToolNames(llm: MockLlmServer, index: number): string[] {
  return ((llm.requests[index].body?.tools ?? []) as Array<{ function?: { name: string } }>).map((t) => t.function?.name ?? '?');
}
