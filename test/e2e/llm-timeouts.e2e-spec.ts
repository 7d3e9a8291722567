import { parseJsonEventStream, uiMessageChunkSchema, type UIMessageChunk } from 'ai';
import type { ChatMessagesResponse, ChatResponse } from '../../src/chats/durable/chat.dto';
import type { ChatPart } from '../../src/chats/durable/chat.types';
import type { StatelessChatResponse } from '../../src/chats/stateless/stateless-chat.dto';
import { startAppWithMockLlm } from '../support/agent-fixtures';
import { hasStatus, listen, SseClient, waitForChat, eventually } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, rawText } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';

/** Short limits, so that a hung or stalled model is given up on within a test's time. */
const LIMITS = {
  LLM_MAX_RETRIES: '2',
  LLM_FIRST_CHUNK_TIMEOUT_MS: '400',
  LLM_STALL_TIMEOUT_MS: '400',
  LLM_TIMEOUT_MS: '1000',
  CHAT_POLL_INTERVAL_MS: '200',
};

/** The text parts of a persisted message, joined. */
function textOf(message: { parts: unknown[] }): string {
  return (message.parts as ChatPart[]).map((part) => (part.type === 'text' ? part.text : '')).join('');
}

describe('model calls that hang, stall or are rate limited', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: LIMITS }));
    baseUrl = await listen(t);
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());
  afterEach(() => expect(llm.pendingSteps).toBe(0));

  describe('durable chats', () => {
    /** Creates a chat and follows its event stream from the start. */
    async function startChat(message: string): Promise<{ id: string; stream: SseClient }> {
      const created = await t.http
        .post('/api/v1/chats')
        .set(bearer(t.adminKey))
        .send({ agent: 'data_chat', message })
        .expect(201);
      const id = bodyOf<ChatResponse>(created).id;
      const stream = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream`, t.adminKey);
      return { id, stream };
    }

    async function assistantTexts(id: string): Promise<string[]> {
      const res = await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).expect(200);
      return bodyOf<ChatMessagesResponse>(res)
        .messages.filter((m) => m.role === 'assistant')
        .map(textOf);
    }

    it('aborts a model that sends its headers and then nothing, and answers with the retried call', async () => {
      llm.enqueue(MockReply.headersThenHang(), MockReply.text('Answered on the second try.'));
      const { id, stream } = await startChat('hello?');
      try {
        await waitForChat(t, id, hasStatus('waiting'));
        expect(llm.requests).toHaveLength(2);
        // The hung request's connection was closed by the app, not left open.
        await eventually(() => llm.requests[0].aborted);
        expect(await assistantTexts(id)).toEqual(['Answered on the second try.']);
        await stream.waitFor((events) => events.some((e) => e.event === 'retry'));
        expect(stream.of('retry')[0].data).toMatchObject({
          attempt: 1,
          error: 'The model endpoint sent nothing within 400 ms of the request',
        });
        const { data: retry } = stream.of('retry')[0];
        expect(retry.delayMs).toBeGreaterThan(0);
        expect(retry.delayMs).toBeLessThanOrEqual(500);
      } finally {
        stream.close();
      }
    });

    it('aborts a stream that stalls midway, tells its streams, and keeps only the retried answer', async () => {
      // The model answers once the stream is open, so that the stream sees the first text go out.
      let streamOpened!: () => void;
      const opened = new Promise<void>((resolve) => (streamOpened = resolve));
      llm.enqueue(async () => {
        await opened;
        return MockReply.stall(3, 'This first answer stops');
      }, MockReply.text('The complete answer.'));
      const { id, stream } = await startChat('tell me');
      streamOpened();
      try {
        await waitForChat(t, id, hasStatus('waiting'));
        expect(llm.requests).toHaveLength(2);
        await eventually(() => llm.requests[0].aborted);
        expect(await assistantTexts(id)).toEqual(['The complete answer.']);
        await stream.waitFor((events) => events.some((e) => e.event === 'message' && e.data.role === 'assistant'));
        // Live text of the stalled call, then the retry, then the text that replaces it.
        const order = stream.events
          .filter((e) => e.event === 'message_part' || e.event === 'retry')
          .map((e) => (e.event === 'retry' ? '|retry|' : e.data.delta))
          .join('');
        expect(order).toBe('This first|retry|The complete answer.');
        expect(stream.of('retry')[0].data).toMatchObject({
          attempt: 1,
          error: 'The model endpoint stopped sending for 400 ms in the middle of its answer',
        });
      } finally {
        stream.close();
      }
    });

    it('takes back the text of a stalled call in a useChat turn stream as soon as the retried text comes', async () => {
      llm.enqueue(MockReply.stall(3, 'This first answer stops'), MockReply.text('The complete answer.'));
      const res = await t.http
        .post('/api/v1/ai/agents/data_chat/chats')
        .set(bearer(t.adminKey))
        .send({
          id: `stalled-${Date.now()}`,
          trigger: 'submit-message',
          messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'tell me' }] }],
        })
        .buffer(true)
        .parse(rawText)
        .expect(200);
      const chunks = (res.body as string)
        .split('\n')
        .filter((line) => line.startsWith('data: {'))
        .map((line) => JSON.parse(line.slice(6)) as { type: string; delta?: string });
      const shown = chunks.map((c) => (c.type === 'text-delta' ? c.delta : c.type === 'reset-step' ? '|reset|' : '')).join('');
      // The stalled call's text, taken back when the retried call's first piece arrives, then the answer.
      expect(shown).toBe('This first|reset|The complete answer.');
      expect(llm.requests).toHaveLength(2);
    });

    it("waits for a 429's Retry-After and shows that wait in the retry event", async () => {
      // The 429 goes out once the stream is open, so that the stream sees the retry event it causes.
      let streamOpened!: () => void;
      const opened = new Promise<void>((resolve) => (streamOpened = resolve));
      llm.enqueue(async () => {
        await opened;
        return MockReply.httpError(429, { message: 'slow down', headers: { 'retry-after': '2' } });
      }, MockReply.text('Answered after the wait.'));
      const { id, stream } = await startChat('are you busy?');
      streamOpened();
      try {
        await waitForChat(t, id, hasStatus('waiting'), t.adminKey, 20_000);
        expect(llm.requests).toHaveLength(2);
        // The app waited as long as the provider asked before it called again.
        expect(llm.requests[1].receivedAt - llm.requests[0].receivedAt).toBeGreaterThanOrEqual(1_900);
        expect(await assistantTexts(id)).toEqual(['Answered after the wait.']);
        await stream.waitFor((events) => events.some((e) => e.event === 'retry'));
        expect(stream.of('retry')[0].data).toEqual({
          attempt: 1,
          delayMs: 2_000,
          error: 'The model endpoint is rate limiting requests',
        });
      } finally {
        stream.close();
      }
    });
  });

  describe('stateless chats', () => {
    const ask = (content: string, extra: Record<string, unknown> = {}) =>
      t.http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(bearer(t.adminKey))
        .send({ messages: [{ role: 'user', content }], ...extra });

    /** The UI message stream of a streamed answer, parsed. */
    async function streamed(content: string): Promise<UIMessageChunk[]> {
      const res = await ask(content, { stream: true }).buffer(true).parse(rawText).expect(200);
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(res.body as string));
          controller.close();
        },
      });
      const chunks: UIMessageChunk[] = [];
      const reader = parseJsonEventStream({ stream: body, schema: uiMessageChunkSchema }).getReader();
      for (let next = await reader.read(); !next.done; next = await reader.read()) {
        if (!next.value.success) throw next.value.error;
        chunks.push(next.value.value);
      }
      return chunks;
    }

    const textOfChunks = (chunks: UIMessageChunk[]) =>
      chunks
        .filter((c): c is Extract<UIMessageChunk, { type: 'text-delta' }> => c.type === 'text-delta')
        .map((c) => c.delta)
        .join('');

    it('waits for Retry-After and answers', async () => {
      llm.enqueue(MockReply.httpError(429, { headers: { 'retry-after': '2' } }), MockReply.text('Fine now.'));
      const res = await ask('hi').expect(200);
      expect(bodyOf<StatelessChatResponse>(res).content).toBe('Fine now.');
      expect(llm.requests).toHaveLength(2);
      expect(llm.requests[1].receivedAt - llm.requests[0].receivedAt).toBeGreaterThanOrEqual(1_900);
    });

    it('gives a non-streamed call LLM_TIMEOUT_MS for its whole answer, then retries it', async () => {
      llm.enqueue(MockReply.stall(0), MockReply.text('Second time lucky.'));
      const res = await ask('hi').expect(200);
      expect(bodyOf<StatelessChatResponse>(res).content).toBe('Second time lucky.');
      expect(llm.requests).toHaveLength(2);
      await eventually(() => llm.requests[0].aborted);
    });

    it('retries a streamed call that hangs before its first chunk, and streams the answer once', async () => {
      llm.enqueue(MockReply.headersThenHang(), MockReply.text('Streamed after a retry.'));
      const chunks = await streamed('hi');
      expect(textOfChunks(chunks)).toBe('Streamed after a retry.');
      expect(chunks.at(-1)?.type).toBe('finish');
      expect(llm.requests).toHaveLength(2);
      await eventually(() => llm.requests[0].aborted);
    });

    it('ends a streamed answer with an error when it stalls after some text went out (no second copy)', async () => {
      llm.enqueue(MockReply.stall(3, 'Half an answer'));
      const chunks = await streamed('hi');
      expect(textOfChunks(chunks)).toBe('Half an');
      expect(chunks.at(-1)).toMatchObject({ type: 'error' });
      expect(llm.requests).toHaveLength(1);
      await eventually(() => llm.requests[0].aborted);
    });
  });
});
