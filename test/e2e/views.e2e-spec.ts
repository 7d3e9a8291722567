import type { RecordListResponse } from '../../src/records/records.dto';
import type { ViewListResponse, ViewResponse } from '../../src/views/view.dto';
import { parsedContent, sentMessages, startAppWithMockLlm } from '../support/agent-fixtures';
import { hasStatus, waitForChat } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf, idOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';

/**
 * Saved views over HTTP: members keep their own, admins the shared ones; each part is checked by the
 * data engine's compilers; GET /records?view= applies one as the caller, policies still beneath.
 */
describe('saved views: /api/v1/objects/:name/views and GET /records?view=', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let alice: string;
  let bob: string;
  let scoped: string;
  const views = '/api/v1/objects/deal/views';

  const OPEN = {
    name: 'open_big',
    label: 'Open big deals',
    description: 'Deals still open above 5,000',
    where: { stage: { $in: ['lead', 'proposal'] }, amount: { $gt: 5000 } },
    orderBy: [{ field: 'amount', order: 'desc' }],
    fields: ['name', 'amount'],
  };

  const records = (key: string, query: Record<string, string>) =>
    t.http.get('/api/v1/objects/deal/records').set(bearer(key)).query(query);

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { CHAT_POLL_INTERVAL_MS: '100' } }));
    await createObject(t, 'deal', [
      fieldSpec('name', 'text', { required: true }),
      fieldSpec('stage', 'select', { options: ['lead', 'proposal', 'won', 'lost'] }),
      fieldSpec('amount', 'currency'),
      fieldSpec('region', 'text'),
      fieldSpec('notes', 'json'),
    ]);
    const stages = ['lead', 'proposal', 'won', 'lost'];
    const operations = Array.from({ length: 40 }, (_, i) => ({
      op: 'create',
      record: { name: `deal ${i}`, stage: stages[i % 4], amount: i * 500, region: i % 2 ? 'emea' : 'amer' },
    }));
    await t.http.post('/api/v1/objects/deal/records/batch').set(asAdmin(t)).send({ operations }).expect(200);
    alice = (await createApiKey(t, { name: 'alice', role: 'member', subject: 'alice' })).secret;
    bob = (await createApiKey(t, { name: 'bob', role: 'member', subject: 'bob' })).secret;
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'emea-reader', objects: { deal: { read: true, rowFilter: { region: 'emea' }, hiddenFields: ['amount'] } } })
      .expect(201);
    const emea = await createApiKey(t, { name: 'emea', role: 'member', subject: 'emea' });
    scoped = emea.secret;
    await t.http
      .patch(`/api/v1/api-keys/${emea.id}`)
      .set(asAdmin(t))
      .send({ policies: ['emea-reader'] })
      .expect(200);
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());

  /** The deals the view stands for, computed from the seed data by hand. */
  const expectedOpenBig = () =>
    Array.from({ length: 40 }, (_, i) => i)
      .filter((i) => i % 4 < 2 && i * 500 > 5000)
      .sort((a, b) => b - a)
      .map((i) => ({ name: `deal ${i}`, amount: i * 500 }));

  describe('CRUD and ownership', () => {
    it('lets a member save its own view and read it back', async () => {
      const created = await t.http.post(views).set(bearer(alice)).send(OPEN).expect(201);
      expect(bodyOf<ViewResponse>(created)).toEqual({ ...OPEN, shared: false });
      const read = await t.http.get(`${views}/open_big`).set(bearer(alice)).expect(200);
      expect(bodyOf<ViewResponse>(read)).toEqual({ ...OPEN, shared: false });
    });

    it("hides a member's private view from another member (404) and lists only own and shared views", async () => {
      expect(errorOf(await t.http.get(`${views}/open_big`).set(bearer(bob)).expect(404)).code).toBe('view_not_found');
      expect(errorOf(await t.http.put(`${views}/open_big`).set(bearer(bob)).send({ label: 'x' }).expect(404)).code).toBe(
        'view_not_found',
      );
      expect(errorOf(await t.http.delete(`${views}/open_big`).set(bearer(bob)).expect(404)).code).toBe('view_not_found');
      expect(errorOf(await records(bob, { view: 'open_big' }).expect(404)).code).toBe('view_not_found');

      await t.http
        .post(views)
        .set(asAdmin(t))
        .send({ name: 'won', label: 'Won', where: { stage: 'won' }, shared: true })
        .expect(201);
      // Bob may keep a view of the same name as Alice's.
      await t.http
        .post(views)
        .set(bearer(bob))
        .send({ name: 'open_big', label: 'Bob', where: { stage: 'lost' } })
        .expect(201);
      const listed = bodyOf<ViewListResponse>(await t.http.get(views).set(bearer(bob)).expect(200));
      expect(listed.views.map((v) => [v.name, v.label, v.shared])).toEqual([
        ['open_big', 'Bob', false],
        ['won', 'Won', true],
      ]);
      const own = bodyOf<ViewListResponse>(await t.http.get(views).set(bearer(alice)).expect(200));
      expect(own.views.map((v) => [v.name, v.label])).toEqual([
        ['open_big', 'Open big deals'],
        ['won', 'Won'],
      ]);
    });

    it('refuses shared views from members (403) and lets admins manage them', async () => {
      const res = await t.http.post(views).set(bearer(alice)).send({ name: 'team', label: 'Team', shared: true }).expect(403);
      expect(errorOf(res).code).toBe('forbidden');
      expect(errorOf(await t.http.put(`${views}/won`).set(bearer(alice)).send({ label: 'Mine now' }).expect(403)).code).toBe(
        'forbidden',
      );
      expect(errorOf(await t.http.delete(`${views}/won`).set(bearer(alice)).expect(403)).code).toBe('forbidden');
      expect(
        errorOf(await t.http.put(`${views}/open_big`).set(bearer(alice)).send({ label: 'Open', shared: true }).expect(403)).code,
      ).toBe('forbidden');
      const replaced = await t.http
        .put(`${views}/won`)
        .set(asAdmin(t))
        .send({ label: 'Won deals', where: { stage: 'won' }, fields: ['name'] })
        .expect(200);
      expect(bodyOf<ViewResponse>(replaced)).toEqual({
        name: 'won',
        label: 'Won deals',
        where: { stage: 'won' },
        fields: ['name'],
        shared: true,
      });
    });

    it('refuses a duplicate name of the same owner with 409 view_exists', async () => {
      expect(errorOf(await t.http.post(views).set(bearer(alice)).send(OPEN).expect(409)).code).toBe('view_exists');
      expect(
        errorOf(await t.http.post(views).set(asAdmin(t)).send({ name: 'won', label: 'x', shared: true }).expect(409)).code,
      ).toBe('view_exists');
    });

    it('deletes a member’s own view', async () => {
      await t.http.post(views).set(bearer(alice)).send({ name: 'scratch', label: 'Scratch' }).expect(201);
      await t.http.delete(`${views}/scratch`).set(bearer(alice)).expect(204);
      expect(errorOf(await t.http.get(`${views}/scratch`).set(bearer(alice)).expect(404)).code).toBe('view_not_found');
    });
  });

  describe('validation through the data engine compilers', () => {
    it.each([
      ['where: an unknown field', { where: { nope: 1 } }, 'unknown_field', 'where'],
      ['where: a wrong operator', { where: { amount: { $like: 'x' } } }, 'unknown_field', 'where'],
      ['where: a wrong value type', { where: { amount: 'lots' } }, 'invalid_value', 'where'],
      ['where: an option the select does not have', { where: { stage: 'maybe' } }, 'invalid_value', 'where'],
      ['orderBy: an unknown field', { orderBy: [{ field: 'nope' }] }, 'unknown_field', 'orderBy'],
      ['orderBy: a json field', { orderBy: [{ field: 'notes' }] }, 'invalid_order_by', 'orderBy'],
      ['orderBy: a wrong direction', { orderBy: [{ field: 'amount', order: 'up' }] }, 'invalid_order_by', 'orderBy'],
      ['fields: an unknown field', { fields: ['name', 'nope'] }, 'unknown_field', 'fields'],
      ['groupBy: a json field', { groupBy: ['notes'] }, 'invalid_group_by', 'groupBy'],
      ['groupBy: an unknown field', { groupBy: ['nope'] }, 'unknown_field', 'groupBy'],
    ])('refuses %s with 400 naming the part', async (_, part, code, name) => {
      const res = await t.http
        .post(views)
        .set(bearer(alice))
        .send({ name: 'bad', label: 'Bad', ...part })
        .expect(400);
      const error = errorOf<{ part: string }>(res);
      expect(error.code).toBe(code);
      expect(error.details.part).toBe(name);
      expect(error.error).toContain(`View ${name}:`);
    });

    it.each([
      [{ label: 'No name' }],
      [{ name: 'Bad Name', label: 'x' }],
      [{ name: 'ok', label: '' }],
      [{ name: 'ok', label: 'x', where: [] }],
      [{ name: 'ok', label: 'x', fields: 'name' }],
      [{ name: 'ok', label: 'x', shared: 'yes' }],
      [{ name: 'ok', label: 'x', groupBy: ['a', 'b', 'c', 'd'] }],
    ])('refuses a malformed body %j with 400', async (body) => {
      const res = await t.http.post(views).set(bearer(alice)).send(body);
      expect(res.status).toBe(400);
    });

    it('checks a member’s view against the fields it may see: a hidden field is unknown', async () => {
      const res = await t.http
        .post(views)
        .set(bearer(scoped))
        .send({ name: 'amounts', label: 'A', fields: ['amount'] })
        .expect(400);
      expect(errorOf(res).code).toBe('unknown_field');
      expect(
        errorOf(await t.http.post('/api/v1/objects/nothing/views').set(bearer(alice)).send({ name: 'a', label: 'a' }).expect(404))
          .code,
      ).toBe('object_not_found');
    });
  });

  describe('GET /records?view=', () => {
    it('applies the view’s where, orderBy and fields', async () => {
      const body = bodyOf<RecordListResponse>(await records(alice, { view: 'open_big', limit: '100' }).expect(200));
      expect(body.records.map(({ name, amount }) => ({ name, amount }))).toEqual(expectedOpenBig());
      expect(Object.keys(body.records[0]).sort()).toEqual(['amount', 'id', 'name']);
      expect(body.total).toBe(expectedOpenBig().length);
    });

    it('ANDs the request’s where and lets the request’s orderBy and fields win', async () => {
      const body = bodyOf<RecordListResponse>(
        await records(alice, {
          view: 'open_big',
          where: JSON.stringify({ stage: 'lead' }),
          orderBy: JSON.stringify([{ field: 'amount' }]),
          fields: 'name,stage',
        }).expect(200),
      );
      const expected = expectedOpenBig()
        .filter((d) => Number(d.name.split(' ')[1]) % 4 === 0)
        .reverse();
      expect(body.records.map((r) => r.name)).toEqual(expected.map((d) => d.name));
      expect(body.records.every((r) => r.stage === 'lead' && !('amount' in r))).toBe(true);
    });

    it('runs as the caller: a shared view keeps a scoped key’s row filter beneath; one naming a hidden field is not its view', async () => {
      await t.http
        .post(views)
        .set(asAdmin(t))
        .send({
          name: 'open',
          label: 'Open',
          where: { stage: { $in: ['lead', 'proposal'] } },
          orderBy: [{ field: 'amount', order: 'desc' }],
          fields: ['name', 'amount', 'region'],
          shared: true,
        })
        .expect(201);
      await t.http
        .post(views)
        .set(asAdmin(t))
        .send({
          name: 'open_names',
          label: 'Open, by name',
          where: { stage: { $in: ['lead', 'proposal'] } },
          orderBy: [{ field: 'name', order: 'asc' }],
          fields: ['name', 'region'],
          shared: true,
        })
        .expect(201);
      const body = bodyOf<RecordListResponse>(await records(scoped, { view: 'open_names', limit: '100' }).expect(200));
      expect(body.records.length).toBe(10);
      expect(body.records.every((r) => r.region === 'emea')).toBe(true);
      expect(Object.keys(body.records[0]).sort()).toEqual(['id', 'name', 'region']);
      // Amount is hidden from this key: a view sorting and showing it does not exist for it.
      expect(errorOf(await records(scoped, { view: 'open', limit: '100' }).expect(404)).code).toBe('view_not_found');
      const all = bodyOf<RecordListResponse>(await records(alice, { view: 'open', limit: '100' }).expect(200));
      expect(all.records.length).toBe(20);
      expect(all.records.map((r) => r.amount)).toEqual([...all.records.map((r) => Number(r.amount))].sort((a, b) => b - a));
    });

    it('binds a cursor to its view: a cursor of one view does not continue another', async () => {
      const first = bodyOf<RecordListResponse>(await records(alice, { view: 'open_big', limit: '2' }).expect(200));
      expect(first.nextCursor).toEqual(expect.any(String));
      const next = bodyOf<RecordListResponse>(
        await records(alice, { view: 'open_big', limit: '2', cursor: first.nextCursor! }).expect(200),
      );
      expect(next.records.map((r) => r.name)).toEqual(
        expectedOpenBig()
          .slice(2, 4)
          .map((d) => d.name),
      );
      const other = await records(alice, {
        view: 'won',
        limit: '2',
        cursor: first.nextCursor!,
        orderBy: JSON.stringify(OPEN.orderBy),
      });
      expect(other.status).toBe(400);
      expect(errorOf(other).code).toBe('invalid_cursor');
    });

    it('answers an unknown view with 404 view_not_found, and an overlong name with 400', async () => {
      expect(errorOf(await records(alice, { view: 'nope' }).expect(404)).code).toBe('view_not_found');
      expect((await records(alice, { view: 'x'.repeat(64) })).status).toBe(400);
      expect(errorOf(await records(alice, { view: 'a\u0000b' }).expect(404)).code).toBe('view_not_found');
      expect(
        errorOf(
          await t.http
            .get(`${views}/${encodeURIComponent('Bad View')}`)
            .set(bearer(alice))
            .expect(404),
        ).code,
      ).toBe('view_not_found');
    });
  });

  describe('chats: context.viewName', () => {
    it('gives the agent the view as data and lets query_records apply it: the model receives exactly its rows', async () => {
      llm.enqueue(
        MockReply.toolCall('query_records', { objectName: 'deal', view: 'open_big', limit: 100 }),
        MockReply.text('You are looking at the open deals above 5,000.'),
      );
      const created = await t.http
        .post('/api/v1/chats')
        .set(bearer(alice))
        .send({
          agent: 'data_chat',
          message: 'Summarise what I am looking at',
          context: { objectName: 'deal', viewName: 'open_big' },
        })
        .expect(201);
      await waitForChat(t, idOf(created), hasStatus('waiting'), alice);

      const first = sentMessages(llm, 0);
      expect(first[0].role).toBe('system');
      expect(first[0].content).not.toContain('open_big');
      const context = first.find((m) => m.role === 'user' && m.content?.includes('```json'));
      const block = /```json\n(.*)\n```$/s.exec(context!.content!);
      expect(JSON.parse(block![1])).toEqual({
        context: {
          objectName: 'deal',
          viewName: 'open_big',
          view: {
            name: 'open_big',
            label: OPEN.label,
            description: OPEN.description,
            where: OPEN.where,
            orderBy: OPEN.orderBy,
            fields: OPEN.fields,
          },
        },
      });

      const tool = sentMessages(llm, 1).find((m) => m.role === 'tool');
      const result = parsedContent<{ total: number; records: Array<Record<string, unknown>> }>(tool!);
      expect(result.total).toBe(expectedOpenBig().length);
      expect(result.records.map(({ name, amount }) => ({ name, amount }))).toEqual(expectedOpenBig());
      // The view's fields, and the row's figure reference.
      expect(Object.keys(result.records[0]).sort()).toEqual(['amount', 'id', 'name', 'ref']);
    });

    it('applies a view in aggregate_data, and reports an unknown view to the model as a tool error', async () => {
      llm.enqueue(
        MockReply.toolCalls([
          {
            id: 'agg',
            name: 'aggregate_data',
            arguments: { objectName: 'deal', view: 'open_big', aggregations: [{ function: 'count', alias: 'n' }] },
          },
          { id: 'bad', name: 'query_records', arguments: { objectName: 'deal', view: 'nope' } },
        ]),
        MockReply.text('done'),
      );
      const res = await t.http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(bearer(alice))
        .send({ messages: [{ role: 'user', content: 'How many?' }] })
        .expect(200);
      expect(res.body).toMatchObject({ content: 'done' });
      const tools = sentMessages(llm, 1).filter((m) => m.role === 'tool');
      const byId = Object.fromEntries(tools.map((m) => [m.tool_call_id ?? '', m.content ?? ''] as const));
      expect(JSON.parse(byId.agg)).toMatchObject({ rows: [{ n: expectedOpenBig().length }] });
      expect(byId.bad).toContain('view_not_found');
    });

    it("does not show the model a view the caller cannot see (another member's)", async () => {
      llm.enqueue(MockReply.text('ok'));
      await t.http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(bearer(scoped))
        .send({ messages: [{ role: 'user', content: 'x' }], context: { objectName: 'deal', viewName: 'open_big' } })
        .expect(200);
      const sent = JSON.stringify(sentMessages(llm, 0));
      expect(sent).not.toContain('Open big deals');
      // The view's filter ({"amount":{"$gt":5000}}) in any form the model could read it.
      expect(sent).not.toMatch(/\$gt\\*"?:\s*5000|amount\W+(?:>|over|above)\W*5000/i);
    });
  });

  describe('metadata', () => {
    it('refuses to delete a field a view names with 409 field_in_use naming the view', async () => {
      const res = await t.http.delete('/api/v1/objects/deal/fields/amount').set(asAdmin(t)).expect(409);
      const error = errorOf<{ views: string[] }>(res);
      expect(error.code).toBe('field_in_use');
      expect(error.details.views).toEqual(['open', 'open_big']);
      expect(error.error).toContain('views open, open_big');
      // Used in a where (open) and in fields (won).
      expect(
        errorOf<{ views: string[] }>(await t.http.delete('/api/v1/objects/deal/fields/stage').set(asAdmin(t)).expect(409)).details
          .views,
      ).toEqual(['open', 'open_big', 'open_names', 'won']);
      // A field no view names goes.
      await t.http.delete('/api/v1/objects/deal/fields/notes').set(asAdmin(t)).expect(204);
    });
  });
});
