import type { AgentResponse } from '../../src/agents/agent.dto';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { asAdmin, createApiKey, DATA_CHAT_TOOLS } from '../support/fixtures';

describe('agents API', () => {
  let t: TestApp;
  let memberKey: string;
  const spec = (overrides: Record<string, unknown> = {}) => ({
    name: 'sales_analyst',
    label: 'Sales analyst',
    role: 'Analyst',
    instructions: 'Answer sales questions.',
    tools: ['query_records', 'aggregate_data'],
    allowedObjects: ['deal', 'account'],
    ...overrides,
  });

  beforeAll(async () => {
    t = await startTestApp();
    memberKey = (await createApiKey(t, { name: 'm', role: 'member' })).secret;
  });
  afterAll(() => t.close());

  it('creates the built-in data_chat agent with the data tools, the metric tools, calculate and visualize on first start', async () => {
    const res = await t.http.get('/api/v1/ai/agents/data_chat').set(asAdmin(t)).expect(200);
    expect(res.body).toMatchObject({ name: 'data_chat', active: true, version: 1, allowedObjects: ['*'] });
    expect(bodyOf<AgentResponse>(res).tools).toEqual(DATA_CHAT_TOOLS);
  });

  it('never overwrites data_chat on restart', async () => {
    const current = bodyOf<AgentResponse>(await t.http.get('/api/v1/ai/agents/data_chat').set(asAdmin(t)).expect(200));
    await t.http
      .put('/api/v1/ai/agents/data_chat')
      .set(asAdmin(t))
      .send({ ...current, instructions: 'Edited by an admin', version: undefined, createdAt: undefined, updatedAt: undefined })
      .expect(200);
    const second = await startTestApp({ database: t.database });
    try {
      const res = await second.http.get('/api/v1/ai/agents/data_chat').set(bearer(second.adminKey)).expect(200);
      expect(bodyOf<AgentResponse>(res).instructions).toBe('Edited by an admin');
      expect(bodyOf<AgentResponse>(res).version).toBe(2);
    } finally {
      await second.close();
    }
  });

  it('creates, reads, replaces and deletes an agent', async () => {
    const created = await t.http.post('/api/v1/ai/agents').set(asAdmin(t)).send(spec()).expect(201);
    expect(created.body).toMatchObject({
      name: 'sales_analyst',
      version: 1,
      active: true,
      planning: { maxIterations: 10 },
      guardrails: { maxExecutionTimeSec: 120, maxTokensPerInvocation: 100000 },
    });
    await t.http.post('/api/v1/ai/agents').set(asAdmin(t)).send(spec()).expect(409);
    const replaced = await t.http
      .put('/api/v1/ai/agents/sales_analyst')
      .set(asAdmin(t))
      .send(spec({ label: 'Renamed', planning: { maxIterations: 5 } }))
      .expect(200);
    expect(replaced.body).toMatchObject({ label: 'Renamed', version: 2, planning: { maxIterations: 5 } });
    const [row] = await t.sql<{ version: number }>(`select version from agents where name = 'sales_analyst'`);
    expect(row.version).toBe(2);
    await t.http.delete('/api/v1/ai/agents/sales_analyst').set(asAdmin(t)).expect(204);
    await t.http.get('/api/v1/ai/agents/sales_analyst').set(asAdmin(t)).expect(404);
    await t.http.delete('/api/v1/ai/agents/sales_analyst').set(asAdmin(t)).expect(404);
  });

  it.each([
    ['an unknown tool', { tools: ['rm_rf'] }, 'unknown_tool'],
    ['maxIterations above 50', { planning: { maxIterations: 51 } }, 'validation_failed'],
    ['maxIterations of 0', { planning: { maxIterations: 0 } }, 'validation_failed'],
    ['temperature above 2', { model: { temperature: 2.5 } }, 'validation_failed'],
    ['a bad name', { name: 'Bad Name' }, 'validation_failed'],
    ['an unknown property', { toolChoice: 'auto' }, 'validation_failed'],
    ['a bad allowed object', { allowedObjects: ['deal; drop'] }, 'validation_failed'],
    ['an unknown access role', { access: { roles: ['root'] } }, 'validation_failed'],
    ['a locale that is no BCP 47 tag', { locale: 'not a locale!' }, 'validation_failed'],
  ])('rejects %s with 400', async (_label, overrides, code) => {
    const res = await t.http
      .post('/api/v1/ai/agents')
      .set(asAdmin(t))
      .send(spec({ name: 'bad_agent', ...overrides }))
      .expect(400);
    expect(errorOf(res).code).toBe(code);
  });

  it("keeps an agent's locale (how grounding reads its numbers) in canonical form, en by default, apart from its model settings", async () => {
    const created = await t.http
      .post('/api/v1/ai/agents')
      .set(asAdmin(t))
      .send(spec({ name: 'german_analyst', locale: 'de-de', model: { temperature: 0.2 } }))
      .expect(201);
    expect(bodyOf<AgentResponse>(created)).toMatchObject({ locale: 'de-DE', model: { temperature: 0.2 } });
    expect(bodyOf<AgentResponse>(created).model).not.toHaveProperty('locale');
    const read = await t.http.get('/api/v1/ai/agents/german_analyst').set(asAdmin(t)).expect(200);
    expect(bodyOf<AgentResponse>(read).locale).toBe('de-DE');
    const replaced = await t.http
      .put('/api/v1/ai/agents/german_analyst')
      .set(asAdmin(t))
      .send(spec({ name: 'german_analyst' }))
      .expect(200);
    expect(bodyOf<AgentResponse>(replaced).locale).toBe('en');
    await t.http.delete('/api/v1/ai/agents/german_analyst').set(asAdmin(t)).expect(204);
  });

  it('rejects a PUT whose body names another agent', async () => {
    await t.http
      .put('/api/v1/ai/agents/data_chat')
      .set(asAdmin(t))
      .send(spec({ name: 'other' }))
      .expect(400);
  });

  // Found by the fuzz test: a NUL in the path went to PostgreSQL as a query parameter, which its wire
  // protocol cannot carry ("invalid message format"), and the request failed with a 500.
  it.each(['a%00b', '%00', 'x%F0%9F%98%80', 'Data_Chat', 'a'.repeat(64)])(
    'answers 404 agent_not_found for the name %s, which no agent can have, on every agent route',
    async (name) => {
      const path = `/api/v1/ai/agents/${name}`;
      const answers = [
        await t.http.get(path).set(asAdmin(t)),
        await t.http.delete(path).set(asAdmin(t)),
        await t.http
          .post(`${path}/chat`)
          .set(asAdmin(t))
          .send({ messages: [{ role: 'user', content: 'hi' }] }),
      ];
      expect(answers.map((res) => [res.status, errorOf(res).code])).toEqual([
        [404, 'agent_not_found'],
        [404, 'agent_not_found'],
        [404, 'agent_not_found'],
      ]);
    },
  );

  it('lets members list usable agents but not manage them', async () => {
    await t.http.get('/api/v1/ai/agents').set(bearer(memberKey)).expect(200);
    await t.http
      .post('/api/v1/ai/agents')
      .set(bearer(memberKey))
      .send(spec({ name: 'x' }))
      .expect(403);
    await t.http
      .put('/api/v1/ai/agents/data_chat')
      .set(bearer(memberKey))
      .send(spec({ name: 'data_chat' }))
      .expect(403);
    await t.http.delete('/api/v1/ai/agents/data_chat').set(bearer(memberKey)).expect(403);
    await t.http.get('/api/v1/ai/agents').expect(401);
  });
});
