import OpenAI from 'openai';
import { classifyLlmError, retryHints } from './llm-error';

describe('retryHints', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  const hints = (headers: Record<string, string>) => retryHints(new Headers(headers), now);

  it('reads Retry-After in seconds', () => {
    expect(hints({ 'retry-after': '2' })).toEqual({ retryAfterMs: 2_000 });
    expect(hints({ 'retry-after': '0.5' })).toEqual({ retryAfterMs: 500 });
  });

  it('reads Retry-After as an HTTP date, a past one as no wait', () => {
    expect(hints({ 'retry-after': 'Thu, 01 Jan 2026 00:00:07 GMT' })).toEqual({ retryAfterMs: 7_000 });
    expect(hints({ 'retry-after': 'Wed, 31 Dec 2025 23:59:00 GMT' })).toEqual({ retryAfterMs: 0 });
  });

  it('prefers retry-after-ms, and ignores what it cannot read', () => {
    expect(hints({ 'retry-after-ms': '1500', 'retry-after': '9' })).toEqual({ retryAfterMs: 1_500 });
    expect(hints({ 'retry-after-ms': 'soon', 'retry-after': '3' })).toEqual({ retryAfterMs: 3_000 });
    expect(hints({ 'retry-after': 'later please' })).toEqual({});
    expect(hints({ 'retry-after': '-4' })).toEqual({});
  });

  it('reads x-should-retry', () => {
    expect(hints({ 'x-should-retry': 'false' })).toEqual({ shouldRetry: false });
    expect(hints({ 'x-should-retry': 'true' })).toEqual({ shouldRetry: true });
    expect(hints({ 'x-should-retry': 'maybe' })).toEqual({});
  });
});

describe('classifyLlmError', () => {
  it('keeps the wait a 429 asks for, capped when read', () => {
    const error = classifyLlmError(
      OpenAI.APIError.generate(429, { message: 'slow down' }, undefined, new Headers({ 'retry-after': '120' })),
    );
    expect(error).toMatchObject({ kind: 'rate_limited', retryable: true, code: 'llm_rate_limited' });
    expect(error.retryAfterMs(30_000)).toBe(30_000);
    expect(error.retryAfterMs(600_000)).toBe(120_000);
  });

  it('has no wait when the provider named none', () => {
    const error = classifyLlmError(OpenAI.APIError.generate(503, { message: 'down' }, undefined, new Headers()));
    expect(error).toMatchObject({ kind: 'unavailable', retryable: true });
    expect(error.retryAfterMs(30_000)).toBeUndefined();
  });

  it('tells a conversation too long for the model from other bad requests, and never retries it', () => {
    const openAi = classifyLlmError(
      OpenAI.APIError.generate(
        400,
        { error: { message: "This model's maximum context length is 128000 tokens.", code: 'context_length_exceeded' } },
        undefined,
        new Headers({ 'x-should-retry': 'true' }),
      ),
    );
    expect(openAi).toMatchObject({ kind: 'context_length', code: 'llm_context_length', retryable: false, hints: {} });
    const vllm = classifyLlmError(
      OpenAI.APIError.generate(
        400,
        // The SDK wraps a body without `error` (vLLM's `{ object: 'error', message }`) like this.
        { error: { object: 'error', message: 'Please reduce the length of the messages: maximum context length is 8192' } },
        undefined,
        new Headers(),
      ),
    );
    expect(vllm).toMatchObject({ kind: 'context_length', status: 400 });
    const other = classifyLlmError(
      OpenAI.APIError.generate(400, { error: { message: 'Invalid tool schema' } }, undefined, new Headers()),
    );
    expect(other).toMatchObject({ kind: 'bad_request', code: 'llm_bad_request' });
  });
});
