import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CompiledQuery } from 'kysely';
import type { ApiKeyResponse, CreateApiKeyDto, CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { ChatResponse } from '../../src/chats/durable/chat.dto';
import type { StatelessChatResponse } from '../../src/chats/stateless/stateless-chat.dto';
import type { AggregateResponse } from '../../src/records/records.dto';
import type { ObjectListResponse, ObjectResponse } from '../../src/metadata/metadata.dto';
import { DataService } from '../../src/data/data.service';
import { DataPool } from '../../src/database/data-pool';
import { INSUFFICIENT_PRIVILEGE } from '../../src/common/pg-errors';
import { SYSTEM_CALLER } from '../../src/governance/access.service';
import type { PolicyListResponse, PolicyResponse } from '../../src/governance/access-policy.dto';
import type { AggregateDataResult } from '../../src/tools/data-tools/aggregate-data.tool';
import type { DescribeObjectResult } from '../../src/tools/data-tools/describe-object.tool';
import type { ListObjectsResult } from '../../src/tools/data-tools/list-objects.tool';
import type { QueryRecordsResult } from '../../src/tools/data-tools/query-records.tool';
import { withReadOnlyData } from '../../src/tools/read-only-data';
import type { ToolErrorContent } from '../../src/tools/tool.types';
import type { ExecuteToolResponse, ToolListResponse } from '../../src/tools/tools.dto';
import { bodyOf, errorOf, idOf, type RecordBody, type RecordPage } from '../support/responses';
import { parsedContent, sentMessages, startAppWithMockLlm, type SentMessage } from '../support/agent-fixtures';
import { hasStatus, listen, waitForChat } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bearer, TestApp } from '../support/test-app';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';

type Executed<R> = ExecuteToolResponse & { result: R };

const OWNERS = ['alice', 'bob', 'carol'];
const REGIONS = ['emea', 'amer'];
const STAGES = ['new', 'won', 'lost'];

/**
 * Two member keys under different policies over the same data:
 *   alice (policy `own-deals`): deals she owns (`owner = $subject`), read and write, `amount` hidden, no `activity`;
 *   bob   (policy `regional-reader`): deals of his region (`region = $attr.region`), read only, `amount` hidden.
 * Each assertion compares what a key gets with the rows SQL in the test says it may see.
 */
describe('access policies: object grants, row filters and hidden fields on every surface', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let alice: string;
  let bob: string;
  let bobKeyId: string;
  let plainMember: string;

  async function sqlIds(where: string, params: unknown[] = []): Promise<string[]> {
    const rows = await t.sql<{ id: string }>(`select id from data.deal where ${where} order by id`, params);
    return rows.map((r) => r.id);
  }

  function list(key: string, object: string, query: Record<string, unknown> = {}) {
    const params: Record<string, string> = {};
    for (const [name, value] of Object.entries(query)) params[name] = typeof value === 'string' ? value : JSON.stringify(value);
    return t.http.get(`/api/v1/objects/${object}/records`).query(params).set(bearer(key));
  }

  async function exec<R = unknown>(key: string, name: string, args: unknown): Promise<Executed<R>> {
    const res = await t.http.post(`/api/v1/ai/tools/${name}/execute`).set(bearer(key)).send({ arguments: args });
    expect(res.status).toBe(200);
    return bodyOf<Executed<R>>(res);
  }

  function member(name: string, subject: string, extra: Partial<CreateApiKeyDto> = {}): Promise<CreatedApiKeyResponse> {
    return createApiKey(t, { name, role: 'member', subject, ...extra });
  }

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { CHAT_POLL_INTERVAL_MS: '200' } }));
    await createObject(t, 'deal', [
      fieldSpec('title', 'text', { required: true }),
      fieldSpec('owner', 'text'),
      fieldSpec('region', 'text'),
      fieldSpec('stage', 'select', { options: STAGES }),
      fieldSpec('amount', 'currency'),
    ]);
    await createObject(t, 'activity', [fieldSpec('note', 'text')]);
    for (let i = 0; i < 30; i++) {
      await t.http
        .post('/api/v1/objects/deal/records')
        .set(asAdmin(t))
        .send({
          title: `deal ${i}`,
          owner: OWNERS[i % 3],
          region: REGIONS[i % 2],
          stage: STAGES[i % 3 === 0 ? 1 : i % 5 === 0 ? 2 : 0],
          amount: 1000 + i * 10,
        })
        .expect(201);
    }
    await t.http.post('/api/v1/objects/activity/records').set(asAdmin(t)).send({ note: 'call' }).expect(201);

    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({
        name: 'own-deals',
        description: 'Sales reps: their own deals, without amounts',
        objects: {
          deal: {
            read: true,
            create: true,
            update: true,
            delete: true,
            rowFilter: { owner: '$subject' },
            hiddenFields: ['amount'],
          },
        },
      })
      .expect(201);
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({
        name: 'regional-reader',
        objects: { deal: { read: true, rowFilter: { region: '$attr.region' }, hiddenFields: ['amount'] } },
      })
      .expect(201);

    alice = (await member('alice', 'alice', { policies: ['own-deals'] })).secret;
    const bobKey = await member('bob', 'bob');
    bob = bobKey.secret;
    bobKeyId = bobKey.id;
    // Policies and attributes can also come later, through PATCH.
    const patched = await t.http
      .patch(`/api/v1/api-keys/${bobKeyId}`)
      .set(asAdmin(t))
      .send({ policies: ['regional-reader'], attributes: { region: 'emea' } })
      .expect(200);
    expect(bodyOf<ApiKeyResponse>(patched)).toMatchObject({ policies: ['regional-reader'], attributes: { region: 'emea' } });
    plainMember = (await member('plain', 'plain')).secret;
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  describe('records API', () => {
    it('lists exactly the rows of each key’s filter, with total counting only those', async () => {
      for (const [key, where, params] of [
        [alice, 'owner = $1', ['alice']],
        [bob, 'region = $1', ['emea']],
      ] as const) {
        const res = await list(key, 'deal', { limit: 1000 });
        expect(res.status).toBe(200);
        const page = bodyOf<RecordPage>(res);
        const expected = await sqlIds(where, [...params]);
        expect(page.records.map((r) => r.id).sort()).toEqual(expected);
        expect(page.total).toBe(expected.length);
        // A page past the first still counts only the key's rows.
        expect(bodyOf<RecordPage>(await list(key, 'deal', { limit: 2, offset: 2 }).expect(200)).total).toBe(expected.length);
      }
    });

    it('never returns a hidden field, and treats it as unknown in where, orderBy and fields', async () => {
      const page = bodyOf<RecordPage>(await list(alice, 'deal').expect(200));
      expect(page.records.length).toBeGreaterThan(0);
      for (const record of page.records) {
        expect(record).not.toHaveProperty('amount');
        expect(record).toHaveProperty('title');
      }
      for (const query of [{ where: { amount: { $gt: 0 } } }, { orderBy: [{ field: 'amount' }] }, { fields: 'title,amount' }]) {
        const res = await list(alice, 'deal', query);
        expect(res.status).toBe(400);
        expect(errorOf(res).code).toBe('unknown_field');
        // The error echoes the name the caller sent, and lists only the fields it may use.
        expect(errorOf<{ availableFields: string[] }>(res).details.availableFields).not.toContain('amount');
      }
    });

    it('a filter on the key’s own where only narrows its rows further', async () => {
      const res = await list(alice, 'deal', { where: { stage: 'won' }, limit: 1000 }).expect(200);
      expect(
        bodyOf<RecordPage>(res)
          .records.map((r) => r.id)
          .sort(),
      ).toEqual(await sqlIds(`owner = 'alice' and stage = 'won'`));
    });

    it('reads, updates and deletes by id only inside the filter: other rows are 404, and unchanged', async () => {
      const [bobsDeal] = await sqlIds(`owner = 'bob'`);
      const [alicesDeal] = await sqlIds(`owner = 'alice'`);
      const get = await t.http.get(`/api/v1/objects/deal/records/${bobsDeal}`).set(bearer(alice));
      expect(get.status).toBe(404);
      expect(errorOf(get).code).toBe('record_not_found');

      const before = await t.sql('select * from data.deal where id = $1', [bobsDeal]);
      const patch = await t.http.patch(`/api/v1/objects/deal/records/${bobsDeal}`).set(bearer(alice)).send({ title: 'mine now' });
      expect(patch.status).toBe(404);
      expect(errorOf(patch).code).toBe('record_not_found');
      const del = await t.http.delete(`/api/v1/objects/deal/records/${bobsDeal}`).set(bearer(alice));
      expect(del.status).toBe(404);
      expect(await t.sql('select * from data.deal where id = $1', [bobsDeal])).toEqual(before);

      const own = await t.http.get(`/api/v1/objects/deal/records/${alicesDeal}`).set(bearer(alice)).expect(200);
      expect(bodyOf<RecordBody>(own)).not.toHaveProperty('amount');
      const updated = await t.http
        .patch(`/api/v1/objects/deal/records/${alicesDeal}`)
        .set(bearer(alice))
        .send({ title: 'renamed by alice' })
        .expect(200);
      expect(bodyOf<RecordBody>(updated)).toMatchObject({ id: alicesDeal, title: 'renamed by alice' });
      expect(bodyOf<RecordBody>(updated)).not.toHaveProperty('amount');
      const writeHidden = await t.http.patch(`/api/v1/objects/deal/records/${alicesDeal}`).set(bearer(alice)).send({ amount: 1 });
      expect(writeHidden.status).toBe(400);
      expect(errorOf(writeHidden).code).toBe('unknown_field');
    });

    it('creates a record and answers without the hidden field', async () => {
      const res = await t.http
        .post('/api/v1/objects/deal/records')
        .set(bearer(alice))
        .send({ title: 'new by alice', owner: 'alice' })
        .expect(201);
      expect(bodyOf<RecordBody>(res)).not.toHaveProperty('amount');
      await t.http
        .delete(`/api/v1/objects/deal/records/${idOf(res)}`)
        .set(bearer(alice))
        .expect(204);
    });

    it('refuses to create or move a record outside the key’s filter (403), writing nothing', async () => {
      const count = async () => (await t.sql<{ n: number }>('select count(*)::int as n from data.deal'))[0].n;
      const before = await count();
      const create = await t.http
        .post('/api/v1/objects/deal/records')
        .set(bearer(alice))
        .send({ title: 'for bob', owner: 'bob' });
      expect([create.status, errorOf(create).code]).toEqual([403, 'forbidden']);
      expect(await count()).toBe(before);

      const [alicesDeal] = await sqlIds(`owner = 'alice'`);
      const move = await t.http.patch(`/api/v1/objects/deal/records/${alicesDeal}`).set(bearer(alice)).send({ owner: 'bob' });
      expect([move.status, errorOf(move).code]).toEqual([403, 'forbidden']);
      expect(await t.sql('select owner from data.deal where id = $1', [alicesDeal])).toEqual([{ owner: 'alice' }]);
    });

    it('refuses a write the key is not granted with 403 forbidden', async () => {
      const [emeaDeal] = await sqlIds(`region = 'emea'`);
      const res = await t.http.patch(`/api/v1/objects/deal/records/${emeaDeal}`).set(bearer(bob)).send({ title: 'x' });
      expect(res.status).toBe(403);
      expect(errorOf(res).code).toBe('forbidden');
      const create = await t.http.post('/api/v1/objects/deal/records').set(bearer(bob)).send({ title: 'x' });
      expect(create.status).toBe(403);
    });

    it('answers an object the key may not read as not found, like one that does not exist', async () => {
      const res = await list(alice, 'activity');
      expect(res.status).toBe(404);
      expect(errorOf(res).code).toBe('object_not_found');
      const missing = await list(alice, 'no_such_object');
      expect(errorOf(missing).code).toBe('object_not_found');
      expect(errorOf<{ availableObjects: string[] }>(res).details.availableObjects).toEqual(['deal']);
      expect(errorOf(res).error).toBe(errorOf(missing).error.replace('no_such_object', 'activity'));
      const [activityId] = (await t.sql<{ id: string }>('select id from data.activity')).map((r) => r.id);
      await t.http.get(`/api/v1/objects/activity/records/${activityId}`).set(bearer(alice)).expect(404);
      await t.http.delete(`/api/v1/objects/activity/records/${activityId}`).set(bearer(alice)).expect(404);
      expect(await t.sql('select id from data.activity')).toHaveLength(1);
    });

    it('describes only the objects the key may read, without hidden fields (GET /api/v1/objects)', async () => {
      const listed = bodyOf<ObjectListResponse>(await t.http.get('/api/v1/objects').set(bearer(alice)).expect(200));
      expect(listed.objects.map((o) => o.name)).toEqual(['deal']);
      const deal = bodyOf<ObjectResponse>(await t.http.get('/api/v1/objects/deal').set(bearer(alice)).expect(200));
      expect(deal.fields.map((f) => f.name)).not.toContain('amount');
      expect(listed.objects[0].fieldCount).toBe(deal.fields.length);
      const hidden = await t.http.get('/api/v1/objects/activity').set(bearer(alice));
      expect([hidden.status, errorOf(hidden).code]).toEqual([404, 'object_not_found']);
      const all = bodyOf<ObjectListResponse>(await t.http.get('/api/v1/objects').set(bearer(plainMember)).expect(200));
      expect(all.objects.map((o) => o.name).sort()).toEqual(['activity', 'deal']);
    });

    it('aggregates only the key’s rows; grouping or aggregating a hidden field is unknown_field', async () => {
      const res = await t.http
        .post('/api/v1/objects/deal/aggregate')
        .set(bearer(alice))
        .send({ groupBy: ['stage'], aggregations: [{ function: 'count', alias: 'n' }] })
        .expect(200);
      const expected = await t.sql<{ stage: string; n: number }>(
        `select stage, count(*)::int as n from data.deal where owner = 'alice' group by stage order by stage`,
      );
      expect(bodyOf<AggregateResponse>(res).rows).toEqual(expected);
      for (const body of [
        { aggregations: [{ function: 'sum', field: 'amount', alias: 's' }] },
        { groupBy: ['amount'], aggregations: [{ function: 'count', alias: 'n' }] },
        { where: { amount: { $gt: 1 } }, aggregations: [{ function: 'count', alias: 'n' }] },
      ]) {
        const refused = await t.http.post('/api/v1/objects/deal/aggregate').set(bearer(alice)).send(body);
        expect(refused.status).toBe(400);
        expect(errorOf(refused).code).toBe('unknown_field');
      }
    });

    it('keeps every right of a member key without policies, and of the admin', async () => {
      const all = await sqlIds('true');
      for (const key of [plainMember, t.adminKey]) {
        const page = bodyOf<RecordPage>(await list(key, 'deal', { limit: 1000 }).expect(200));
        expect(page.records.map((r) => r.id).sort()).toEqual(all);
        expect(page.records[0]).toHaveProperty('amount');
      }
      await list(plainMember, 'activity').expect(200);
    });
  });

  describe('data tools through POST /api/v1/ai/tools/:name/execute', () => {
    it('list_objects and describe_object show only what the key may read, without hidden fields', async () => {
      for (const key of [alice, bob]) {
        const listed = await exec<ListObjectsResult>(key, 'list_objects', {});
        expect(listed.result.objects.map((o) => o.name)).toEqual(['deal']);
        const described = await exec<DescribeObjectResult>(key, 'describe_object', { objectName: 'deal' });
        expect(described.isError).toBe(false);
        expect(described.result.fields.map((f) => f.name)).not.toContain('amount');
        expect(described.result.fields.map((f) => f.name)).toEqual(expect.arrayContaining(['title', 'owner', 'region']));
        expect(listed.result.objects[0].fieldCount).toBe(described.result.fields.filter((f) => !f.system).length);
        const forbidden = await exec<ToolErrorContent>(key, 'describe_object', { objectName: 'activity' });
        expect(forbidden.isError).toBe(true);
        expect(forbidden.result.error.code).toBe('object_not_found');
        expect(JSON.stringify(forbidden.result)).not.toContain('"activity"]');
      }
      const plain = await exec<ListObjectsResult>(plainMember, 'list_objects', {});
      expect(plain.result.objects.map((o) => o.name).sort()).toEqual(['activity', 'deal']);
    });

    it('query_records returns exactly the key’s rows, never a hidden field', async () => {
      for (const [key, where] of [
        [alice, `owner = 'alice'`],
        [bob, `region = 'emea'`],
      ] as const) {
        const res = await exec<QueryRecordsResult>(key, 'query_records', { objectName: 'deal', limit: 200 });
        expect(res.isError).toBe(false);
        const expected = await sqlIds(where);
        expect(res.result.records.map((r) => r.id as string).sort()).toEqual(expected);
        expect(res.result.total).toBe(expected.length);
        for (const record of res.result.records) expect(record).not.toHaveProperty('amount');
        const hidden = await exec<ToolErrorContent>(key, 'query_records', { objectName: 'deal', where: { amount: 1 } });
        expect(hidden.result.error.code).toBe('unknown_field');
        expect(hidden.result.error.message).not.toContain('amount,');
        const forbidden = await exec<ToolErrorContent>(key, 'query_records', { objectName: 'activity' });
        expect(forbidden.result.error.code).toBe('object_not_found');
      }
    });

    it('get_record finds a record by id only inside the key’s filter', async () => {
      const [bobsNonEmea] = await sqlIds(`owner = 'bob' and region <> 'emea'`);
      const [alicesDeal] = await sqlIds(`owner = 'alice'`);
      const outside = await exec<ToolErrorContent>(alice, 'get_record', { objectName: 'deal', recordId: bobsNonEmea });
      expect(outside.result.error.code).toBe('record_not_found');
      const outsideBob = await exec<ToolErrorContent>(bob, 'get_record', { objectName: 'deal', recordId: bobsNonEmea });
      expect(outsideBob.result.error.code).toBe('record_not_found');
      const own = await exec<RecordBody>(alice, 'get_record', { objectName: 'deal', recordId: alicesDeal });
      expect(own.isError).toBe(false);
      expect(own.result.id).toBe(alicesDeal);
      expect(own.result).not.toHaveProperty('amount');
    });

    it('aggregate_data counts only the key’s rows; a hidden field is unknown', async () => {
      for (const [key, where] of [
        [alice, `owner = 'alice'`],
        [bob, `region = 'emea'`],
      ] as const) {
        const res = await exec<AggregateDataResult>(key, 'aggregate_data', {
          objectName: 'deal',
          aggregations: [{ function: 'count', alias: 'n' }],
        });
        expect(res.isError).toBe(false);
        expect(res.result.rows).toEqual([{ n: (await sqlIds(where)).length }]);
        const hidden = await exec<ToolErrorContent>(key, 'aggregate_data', {
          objectName: 'deal',
          aggregations: [{ function: 'max', field: 'amount', alias: 'm' }],
        });
        expect(hidden.result.error.code).toBe('unknown_field');
      }
    });

    it('offers the same tool schemas to every key: they name no object’s fields', async () => {
      const schemas = async (key: string) =>
        JSON.stringify(bodyOf<ToolListResponse>(await t.http.get('/api/v1/ai/tools').set(bearer(key))));
      expect(await schemas(alice)).toBe(await schemas(t.adminKey));
      expect(await schemas(alice)).not.toContain('"activity"');
    });
  });

  describe('a stateless chat (scripted model calling the data tools)', () => {
    beforeEach(() => llm.reset());
    afterEach(() => expect(llm.pendingSteps).toBe(0));

    it('runs the tools as the chatting key: its rows only, no hidden field, no forbidden object, not even in the system message', async () => {
      const toolMessages = (request: { body?: Record<string, unknown> }) =>
        (request.body!.messages as SentMessage[]).filter((m) => m.role === 'tool');
      llm.enqueue(
        MockReply.toolCalls([
          { name: 'query_records', arguments: { objectName: 'deal', limit: 200 } },
          { name: 'aggregate_data', arguments: { objectName: 'deal', aggregations: [{ function: 'count', alias: 'n' }] } },
          { name: 'query_records', arguments: { objectName: 'activity' } },
        ]),
        MockReply.text('done'),
      );
      const res = await t.http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(bearer(alice))
        .send({ messages: [{ role: 'user', content: 'my deals?' }], context: { objectName: 'deal' } })
        .expect(200);
      expect(bodyOf<StatelessChatResponse>(res).content).toBe('done');

      const [records, count, activity] = toolMessages(llm.requests[1]);
      const expected = await sqlIds(`owner = 'alice'`);
      const page = parsedContent<QueryRecordsResult>(records);
      expect(page.records.map((r) => r.id as string).sort()).toEqual(expected);
      expect(page.records.every((r) => !('amount' in r))).toBe(true);
      expect(parsedContent<AggregateDataResult>(count).rows).toEqual([{ ref: 'r2.1', n: expected.length }]);
      // A failed call reaches the model as "Tool call failed: <error JSON>".
      const failure = JSON.parse((activity.content as string).replace(/^Tool call failed: /, '')) as ToolErrorContent;
      expect(failure.error.code).toBe('object_not_found');
      expect(failure.error.message).not.toContain('activity,');
      // The context object's schema in the system message is the key's view of it.
      const [system] = sentMessages(llm, 0);
      expect(system.content).toContain('- owner (text)');
      expect(system.content).not.toContain('amount');
    });
  });

  describe('a durable chat (scripted model calling the data tools)', () => {
    beforeEach(() => llm.reset());
    afterEach(() => expect(llm.pendingSteps).toBe(0));

    it('runs its turns as the key that posts them, under that key’s policies', async () => {
      llm.enqueue(
        MockReply.toolCalls([
          { name: 'query_records', arguments: { objectName: 'deal', limit: 200 } },
          { name: 'aggregate_data', arguments: { objectName: 'deal', aggregations: [{ function: 'count', alias: 'n' }] } },
          { name: 'describe_object', arguments: { objectName: 'activity' } },
        ]),
        MockReply.text('done'),
      );
      const created = await t.http
        .post('/api/v1/chats')
        .set(bearer(bob))
        .send({ agent: 'data_chat', message: 'deals in my region?' })
        .expect(201);
      const id = bodyOf<ChatResponse>(created).id;
      await waitForChat(t, id, hasStatus('waiting', 'error'), bob);
      expect(bodyOf<ChatResponse>(await t.http.get(`/api/v1/chats/${id}`).set(bearer(bob))).status).toBe('waiting');

      const [records, count, activity] = sentMessages(llm, 1).filter((m) => m.role === 'tool');
      const expected = await sqlIds(`region = 'emea'`);
      const page = parsedContent<QueryRecordsResult>(records);
      expect(page.records.map((r) => r.id as string).sort()).toEqual(expected);
      expect(page.records.every((r) => !('amount' in r))).toBe(true);
      expect(parsedContent<AggregateDataResult>(count).rows).toEqual([{ ref: 'r2.1', n: expected.length }]);
      expect(activity.content as string).toMatch(/^Tool call failed: .*object_not_found/);
    });
  });

  describe('the MCP server', () => {
    it('lists and reads only the key’s objects as resources, without hidden fields, and runs its tools as the key', async () => {
      const baseUrl = await listen(t);
      const client = new Client({ name: 'policies-e2e', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL('/mcp', baseUrl), { requestInit: { headers: bearer(alice) } }),
      );
      try {
        const { resources } = await client.listResources();
        expect(resources.map((r) => r.uri)).toEqual(['object://deal']);
        const { contents } = await client.readResource({ uri: 'object://deal' });
        const described = JSON.parse((contents[0] as { text: string }).text) as DescribeObjectResult;
        expect(described.fields.map((f) => f.name)).not.toContain('amount');
        await expect(client.readResource({ uri: 'object://activity' })).rejects.toThrow(/not found/);
        const answer = await client.callTool({
          name: 'aggregate_data',
          arguments: { objectName: 'deal', aggregations: [{ function: 'count', alias: 'n' }] },
        });
        expect(answer.isError).toBeFalsy();
        expect(answer.structuredContent).toMatchObject({ rows: [{ n: (await sqlIds(`owner = 'alice'`)).length }] });
      } finally {
        await client.close();
      }
    });
  });

  describe('policies and keys (admin)', () => {
    it('refuses unknown objects and fields, and bad row filters, with 400', async () => {
      const cases: [Record<string, unknown>, string][] = [
        [{ nope: { read: true } }, 'invalid_policy'],
        [{ deal: { read: true, hiddenFields: ['nope'] } }, 'unknown_field'],
        [{ deal: { read: true, rowFilter: { nope: '$subject' } } }, 'unknown_field'],
        [{ deal: { read: 'yes' } }, 'invalid_policy'],
        [{ deal: { read: true, write: true } }, 'invalid_policy'],
        [{ deal: { read: true, rowFilter: { stage: { $gt: [1] } } } }, 'invalid_value'],
      ];
      for (const [objects, code] of cases) {
        const res = await t.http.post('/api/v1/policies').set(asAdmin(t)).send({ name: 'bad', objects });
        expect([res.status, errorOf(res).code]).toEqual([400, code]);
      }
      const badKey = await t.http
        .patch(`/api/v1/api-keys/${bobKeyId}`)
        .set(asAdmin(t))
        .send({ policies: ['no-such-policy'] });
      expect([badKey.status, errorOf(badKey).code]).toEqual([400, 'invalid_policy']);
    });

    it('lists and reads policies for admins only; a policy in use cannot be deleted', async () => {
      const listed = bodyOf<PolicyListResponse>(await t.http.get('/api/v1/policies').set(asAdmin(t)).expect(200));
      expect(listed.policies.map((p) => p.name)).toEqual(['own-deals', 'regional-reader']);
      const one = bodyOf<PolicyResponse>(await t.http.get('/api/v1/policies/own-deals').set(asAdmin(t)).expect(200));
      expect(one.objects.deal).toMatchObject({ read: true, rowFilter: { owner: '$subject' }, hiddenFields: ['amount'] });
      await t.http.get('/api/v1/policies').set(bearer(alice)).expect(403);
      await t.http.get('/api/v1/policies/nope').set(asAdmin(t)).expect(404);
      const inUse = await t.http.delete('/api/v1/policies/own-deals').set(asAdmin(t));
      expect([inUse.status, errorOf(inUse).code]).toEqual([409, 'policy_in_use']);
      await t.http.post('/api/v1/policies').set(asAdmin(t)).send({ name: 'spare', objects: {} }).expect(201);
      await t.http.delete('/api/v1/policies/spare').set(asAdmin(t)).expect(204);
    });

    it('a key whose filter names an attribute it lacks sees no rows (fails closed)', async () => {
      const noRegion = (await member('no-region', 'dave', { policies: ['regional-reader'] })).secret;
      const page = bodyOf<RecordPage>(await list(noRegion, 'deal').expect(200));
      expect([page.records, page.total]).toEqual([[], 0]);
      const res = await exec<AggregateDataResult>(noRegion, 'aggregate_data', {
        objectName: 'deal',
        aggregations: [{ function: 'count', alias: 'n' }],
      });
      expect(res.result.rows).toEqual([{ n: 0 }]);
    });

    it('applies a changed policy or key at once (the compiled access is dropped)', async () => {
      await t.http
        .patch(`/api/v1/api-keys/${bobKeyId}`)
        .set(asAdmin(t))
        .send({ attributes: { region: 'amer' } })
        .expect(200);
      const amer = bodyOf<RecordPage>(await list(bob, 'deal', { limit: 1000 }).expect(200));
      expect(amer.records.map((r) => r.id).sort()).toEqual(await sqlIds(`region = 'amer'`));

      await t.http
        .put('/api/v1/policies/regional-reader')
        .set(asAdmin(t))
        .send({ objects: { deal: { read: true, rowFilter: { region: '$attr.region' } }, activity: { read: true } } })
        .expect(200);
      const page = bodyOf<RecordPage>(await list(bob, 'deal').expect(200));
      expect(page.records[0]).toHaveProperty('amount');
      await list(bob, 'activity').expect(200);
    });
  });

  describe('the SELECT-only role of the data tools', () => {
    it('runs every data tool statement as the reader role, read-only, and nothing else on those connections', async () => {
      const pool = t.app.get(DataPool);
      const who = CompiledQuery.raw(
        "select current_user as role, current_setting('transaction_read_only') as read_only",
      ) as CompiledQuery<{ role: string; read_only: string }>;
      // More statements than the pool has connections: every reader connection is set up, not only the first.
      const rows = await withReadOnlyData(pool, {}, (session) =>
        Promise.all(Array.from({ length: 25 }, () => session.query(who).then(([row]) => row))),
      );
      expect(rows.every((row) => row.role === 'data_copilot_reader' && row.read_only === 'on')).toBe(true);
      // The records API's connections keep the app's own role.
      const [rest] = await pool.session().query(who);
      expect(rest.role).not.toBe('data_copilot_reader');
      expect(rest.read_only).toBe('off');
    });

    it('is refused by Postgres when it tries to write, even outside a READ ONLY transaction', async () => {
      const pool = t.app.get(DataPool);
      const data = t.app.get(DataService);
      const count = async () => (await t.sql<{ n: number }>('select count(*)::int as n from data.deal'))[0].n;
      const before = await count();
      // A read-write transaction switched to the role: only the role stands between the statement and the table.
      const attempt = pool.transaction(async (session) => {
        await session.query(CompiledQuery.raw('set local role data_copilot_reader'));
        return data.insert(SYSTEM_CALLER, 'deal', { title: 'injected' }, { session });
      });
      await expect(attempt).rejects.toMatchObject({ code: INSUFFICIENT_PRIVILEGE });
      const update = pool.transaction(async (session) => {
        await session.query(CompiledQuery.raw('set local role data_copilot_reader'));
        return session.query(CompiledQuery.raw('update data.deal set title = $1', ['x']));
      });
      await expect(update).rejects.toMatchObject({ code: INSUFFICIENT_PRIVILEGE });
      expect(await count()).toBe(before);
      expect(await t.sql(`select id from data.deal where title = 'injected' or title = 'x'`)).toEqual([]);
    });
  });
});
