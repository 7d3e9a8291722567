import { setTimeout as sleep } from 'node:timers/promises';
import { startAppWithMockLlm } from '../support/agent-fixtures';
import { eventually, hasStatus, waitForChat } from '../support/chat-helpers';
import { match } from '../support/matchers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, idOf, rawText, type RecordPage } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';

type Line = Record<string, unknown>;

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'];
/** A record value that only the `where` of one request carries. */
const SECRET_VALUE = 'Zanzibar-Quokka-7781';

describe('logs', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  const raw: string[] = [];
  const destination = { write: (chunk: string) => void raw.push(chunk) };

  const text = () => raw.join('');
  const lines = (): Line[] =>
    text()
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as Line);
  const linesOf = (key: string, value: unknown) => lines().filter((l) => l[key] === value);

  /** The completion line is written when the response finishes, which may be just after the client has it. */
  async function completionLine(requestId: string): Promise<Line> {
    for (let i = 0; i < 100; i++) {
      const line = linesOf('requestId', requestId).find((l) => l.msg === 'request completed');
      if (line) return line;
      await sleep(20);
    }
    throw new Error(`no completion line for request ${requestId}`);
  }

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({
      env: { LOG_LEVEL: 'info', CHAT_POLL_INTERVAL_MS: '200', CHAT_HEARTBEAT_INTERVAL_MS: '100' },
      logDestination: destination,
    }));
    await t.http
      .post('/api/v1/objects')
      .set(bearer(t.adminKey))
      .send({ name: 'gizmo', label: 'Gizmo', fields: [{ name: 'name', label: 'Name', type: 'text' }] })
      .expect(201);
    await t.http.post('/api/v1/objects/gizmo/records').set(bearer(t.adminKey)).send({ name: SECRET_VALUE }).expect(201);
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  it('writes a line per request with the route pattern, status and duration, under the request id of x-request-id', async () => {
    const res = await t.http.get('/api/v1/objects').set(bearer(t.adminKey)).expect(200);
    const requestId = res.headers['x-request-id'];
    expect(requestId).toEqual(expect.any(String));
    expect(await completionLine(requestId)).toMatchObject({
      level: 'info',
      context: 'http',
      method: 'GET',
      route: '/api/v1/objects',
      query: [],
      status: 200,
      durationMs: match.any(Number),
    });
  });

  it('logs the names of query parameters, never their values', async () => {
    const res = await t.http
      .get('/api/v1/objects/gizmo/records')
      .query({ where: JSON.stringify({ name: SECRET_VALUE }), limit: '5' })
      .set(bearer(t.adminKey))
      .expect(200);
    expect(bodyOf<RecordPage>(res).records).toHaveLength(1);
    const line = await completionLine(res.headers['x-request-id']);
    expect(line).toMatchObject({ route: '/api/v1/objects/:name/records', query: ['where', 'limit'], status: 200 });
    expect(text()).not.toContain(SECRET_VALUE);
    expect(text()).not.toContain(encodeURIComponent(SECRET_VALUE));
  });

  it('carries the request id into the tool-audit lines of a streamed chat, without a "Reply was already sent" warning', async () => {
    llm.enqueue(MockReply.toolCall('list_objects', {}), MockReply.text('You have gizmos.'));
    const res = await t.http
      .post('/api/v1/ai/agents/data_chat/chat')
      .set(bearer(t.adminKey))
      .send({ messages: [{ role: 'user', content: 'What objects exist?' }], stream: true })
      .buffer(true)
      .parse(rawText)
      .expect(200);
    expect(res.headers['content-type']).toContain('text/event-stream');
    expect(res.body as string).toContain('"delta":" gizmos."');
    const requestId = res.headers['x-request-id'];
    expect(requestId).toEqual(expect.any(String));
    expect(await completionLine(requestId)).toMatchObject({
      route: '/api/v1/ai/agents/:agentName/chat',
      method: 'POST',
      status: 200,
    });
    const audit = linesOf('requestId', requestId).filter((l) => l.context === 'ToolAudit');
    expect(audit).toEqual([
      expect.objectContaining({ msg: 'tool call', tool: 'list_objects', agent: 'data_chat', isError: false }),
    ]);
    expect(text()).not.toContain('Reply was already sent');
  });

  it('carries the chat id into the lines of a durable chat run, tool-audit lines included', async () => {
    llm.enqueue(MockReply.toolCall('list_objects', {}), MockReply.text('Gizmos, mostly.'));
    const created = await t.http
      .post('/api/v1/chats')
      .set(bearer(t.adminKey))
      .send({ agent: 'data_chat', message: 'What objects exist?' })
      .expect(201);
    const chatId = idOf(created);
    await waitForChat(t, chatId, hasStatus('waiting'));

    // The run's last line is written once its final status has committed (which a client may see first).
    const finished = (l: Record<string, unknown>) => l.context === 'ChatRunner' && l.msg === 'chat run finished';
    await eventually(() => linesOf('chatId', chatId).some(finished));
    const chatLines = linesOf('chatId', chatId);
    expect(chatLines).toContainEqual(expect.objectContaining({ context: 'ToolAudit', msg: 'tool call', tool: 'list_objects' }));
    expect(chatLines).toContainEqual(
      expect.objectContaining({ context: 'ChatRunner', msg: 'chat run finished', status: 'waiting' }),
    );
    const workerLines = lines().filter((l) => l.context === 'ChatRunner' || l.context === 'ChatWorker');
    expect(workerLines.length).toBeGreaterThan(0);
    expect(workerLines.every((l) => l.chatId === chatId)).toBe(true);
  });

  it('writes every line as one JSON object of one shape, without colour codes or credentials', () => {
    const all = text()
      .split('\n')
      .filter((l) => l.trim());
    // Start-up lines (Nest, migrations) and the lines of the tests above.
    expect(all.length).toBeGreaterThan(10);
    for (const line of all) {
      const parsed = JSON.parse(line) as Line;
      expect(LEVELS).toContain(parsed.level);
      expect(typeof parsed.time).toBe('string');
      expect(new Date(parsed.time as string).toISOString()).toBe(parsed.time);
      expect(parsed.msg).toEqual(expect.any(String));
      expect(parsed.context).toEqual(expect.any(String));
      expect(Object.keys(parsed).slice(0, 2)).toEqual(['level', 'time']);
    }
    expect(text()).not.toContain('\u001b');
    expect(text()).not.toContain('\\u001b');
    expect(text()).not.toContain(t.adminKey);
    expect(text()).not.toMatch(/authorization/i);
  });
});
