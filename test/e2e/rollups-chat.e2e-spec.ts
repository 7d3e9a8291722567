import type { StatelessChatResponse } from '../../src/chats/stateless/stateless-chat.dto';
import type { QueryRecordsResult } from '../../src/tools/data-tools/query-records.tool';
import { startAppWithMockLlm } from '../support/agent-fixtures';
import { asAdmin } from '../support/fixtures';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';

/** Money as an answer writes it: "$1,234,567.89". */
const money = (value: number) => `$${value.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;

describe('a chat answering "top 5 accounts by open pipeline" with one query sorted by a rollup', () => {
  let t: TestApp;
  let llm: MockLlmServer;

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { SEED: 'true' } }));
    await t.http
      .post('/api/v1/objects/account/fields')
      .set(asAdmin(t))
      .send({
        name: 'open_pipeline',
        label: 'Open pipeline',
        type: 'rollup',
        relation: 'deal.account',
        function: 'sum',
        field: 'amount',
        filter: { stage: { $nin: ['won', 'lost'] } },
      })
      .expect(201);
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  it('sorts by the rollup in one query_records call, and every figure of the answer is supported by a cell', async () => {
    const call = 'call_top';
    llm.enqueue(
      MockReply.toolCalls([
        {
          id: call,
          name: 'query_records',
          arguments: {
            objectName: 'account',
            orderBy: [{ field: 'open_pipeline', order: 'desc' }],
            fields: ['name', 'open_pipeline'],
            limit: 5,
          },
        },
      ]),
      (req) => {
        const messages = req.body!.messages as Array<{ role: string; tool_call_id?: string; content: string }>;
        const result = JSON.parse(messages.find((m) => m.tool_call_id === call)!.content) as QueryRecordsResult;
        const lines = result.records.map(
          (r, i) => `${i + 1}. ${String(r.name)}: ${money(r.open_pipeline as number)} open pipeline`,
        );
        return MockReply.text(`The top accounts by open pipeline:\n${lines.join('\n')}`);
      },
    );
    const answer = bodyOf<StatelessChatResponse>(
      await t.http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(bearer(t.adminKey))
        .send({ messages: [{ role: 'user', content: 'What are our top 5 accounts by open pipeline?' }] })
        .expect(200),
    );
    expect(answer.toolCalls.map((c) => [c.name, c.isError])).toEqual([['query_records', false]]);
    const records = (answer.toolCalls[0].result as QueryRecordsResult).records;
    const expected = await t.sql<{ name: string; open_pipeline: string }>(
      `select a.name, (select coalesce(sum(d.amount), 0) from data.deal d where d.account = a.id and d.stage not in ('won', 'lost')) as open_pipeline
         from data.account a order by 2 desc, a.id limit 5`,
    );
    expect(records.map((r) => [r.name, r.open_pipeline])).toEqual(expected.map((r) => [r.name, Number(r.open_pipeline)]));
    expect(Number(expected[0].open_pipeline)).toBeGreaterThan(0);
    const grounding = answer.grounding!;
    expect(grounding.unsupported).toEqual([]);
    const supported = grounding.supported.filter((s) => s.column === 'open_pipeline');
    expect(supported.map((s) => [s.text, s.toolCallId, s.row])).toEqual(
      expected.map((r, i) => [money(Number(r.open_pipeline)), call, i]),
    );
  });
});
