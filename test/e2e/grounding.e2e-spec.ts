import type { UIMessage } from 'ai';
import { typedOnly } from '../support/grounding';
import OpenAI from 'openai';
import type { ChatMessagesResponse, ChatResponse } from '../../src/chats/durable/chat.dto';
import type { StatelessChatResponse } from '../../src/chats/stateless/stateless-chat.dto';
import type { UiChatMessagesResponse } from '../../src/chats/durable/ui-chat.dto';
import type { Grounding } from '../../src/runtime/grounding';
import { parsedContent, sentMessages, sentToolNames, startAppWithMockLlm, type SentMessage } from '../support/agent-fixtures';
import { hasStatus, listen, waitForChat } from '../support/chat-helpers';
import { MockLlmServer, MockReply, type RecordedRequest } from '../support/mock-llm.server';
import { bodyOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';
import { uiChat } from '../support/ui-chat';
import { match } from '../support/matchers';

const WON = {
  objectName: 'deal',
  where: { stage: 'won' },
  aggregations: [
    { function: 'count', alias: 'n' },
    { function: 'sum', field: 'amount', alias: 'total' },
    { function: 'avg', field: 'amount', alias: 'average' },
  ],
};
const PROBABILITY = { objectName: 'deal', aggregations: [{ function: 'avg', field: 'probability', alias: 'p' }] };
const INVENTED = '12,345.67';

interface Won {
  n: number;
  total: number;
  average: number;
}

/** The result of the last tool call the model received, for a script that answers from it. */
function lastResult<T>(req: RecordedRequest): T {
  const tool = (req.body!.messages as SentMessage[]).filter((m) => m.role === 'tool').at(-1)!;
  return parsedContent<{ rows: T[] }>(tool).rows[0];
}

const money = (value: number, digits: number) =>
  value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** A figure the WON call's single row supports, in `column`, with the row checked (the clause names "won"). */
const wonCell = (text: string, toolCallId: string, column: keyof Won, entityChecked = true) => ({
  text,
  toolCallId,
  row: 0,
  column,
  entityChecked,
});

/** The model states the won deals' figures as the tool returned them, plus `extra`. */
const answerWon =
  (extra = '') =>
  (req: RecordedRequest) => {
    const won = lastResult<Won>(req);
    return MockReply.text(`We won ${won.n} deals worth $${money(won.total, 2)}.${extra}`);
  };

describe('Grounded answers', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let won: Won;
  let callIds = 0;

  /** The aggregate call with a known id, so a test can name the call that supports a figure. */
  const callWon = () => {
    const id = `call_won_${++callIds}`;
    return { id, step: MockReply.toolCalls([{ id, name: 'aggregate_data', arguments: WON }]) };
  };
  const ask = (question: string, agent = 'data_chat') =>
    t.http
      .post(`/api/v1/ai/agents/${agent}/chat`)
      .set(bearer(t.adminKey))
      .send({ messages: [{ role: 'user', content: question }] })
      .expect(200)
      .then((res) => bodyOf<StatelessChatResponse>(res));

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { SEED: 'true' } }));
    baseUrl = await listen(t);
    const [row] = await t.sql<{ n: string; total: string; average: string }>(
      `select count(*) as n, sum(amount) as total, avg(amount) as average from data.deal where stage = 'won'`,
    );
    won = { n: Number(row.n), total: Number(row.total), average: Number(row.average) };
    const dataChat = bodyOf<Record<string, unknown>>(
      await t.http.get('/api/v1/ai/agents/data_chat').set(bearer(t.adminKey)).expect(200),
    );
    const spec = { ...dataChat };
    for (const key of ['createdAt', 'updatedAt', 'version']) delete spec[key];
    for (const [name, grounding] of [
      ['strict_chat', 'retry'],
      ['loose_chat', 'off'],
    ]) {
      await t.http
        .post('/api/v1/ai/agents')
        .set(bearer(t.adminKey))
        .send({ ...spec, name, grounding })
        .expect(201);
    }
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());
  afterEach(() => expect(llm.pendingSteps).toBe(0));

  it('supports every figure taken from a cell, in each format, flags one in the wrong currency, and does not count dates, ranks or the question', async () => {
    const call = callWon();
    llm.enqueue(call.step, MockReply.toolCalls([{ id: 'call_p', name: 'aggregate_data', arguments: PROBABILITY }]), (req) => {
      const messages = req.body!.messages as SentMessage[];
      const result = parsedContent<{ rows: Won[] }>(messages.find((m) => m.tool_call_id === call.id)!).rows[0];
      const { p } = lastResult<{ p: number }>(req);
      return MockReply.text(
        [
          `Since March 2024 (as of 2025-07-01), the top 3 questions aside: over 50000, we won ${result.n} deals`,
          `, worth $${money(result.total, 2)}, that is €${money(result.total, 0)}, about $${(result.total / 1e6).toFixed(1)}M`,
          ` or ${Math.round(result.total / 1e3)}k; on average ${money(result.average, 1)} per deal.`,
          `\n1. The average probability of all deals is ${p.toFixed(1)}%.`,
        ].join(''),
      );
    });
    const answer = await ask('Of the deals over 50000, how much did we win?');

    expect(answer.grounding).toEqual(
      typedOnly({
        numbers: 7,
        supported: [
          wonCell(String(won.n), call.id, 'n'),
          wonCell(`$${money(won.total, 2)}`, call.id, 'total'),
          wonCell(`$${(won.total / 1e6).toFixed(1)}M`, call.id, 'total'),
          wonCell(`${Math.round(won.total / 1e3)}k`, call.id, 'total'),
          // After a semicolon: the sentence's "won" no longer reaches it, so only the value is checked.
          wonCell(money(won.average, 1), call.id, 'average', false),
          { text: match.stringMatching(/^\d+\.\d%$/) as string, toolCallId: 'call_p', row: 0, column: 'p', entityChecked: false },
        ],
        // The amounts are USD (the field's description says so): euros are another unit.
        unsupported: [{ text: `€${money(won.total, 0)}`, reason: 'wrong_unit' }],
      }),
    );
  });

  it('reports an invented number and a sum the model computed itself as unsupported', async () => {
    const call = callWon();
    llm.enqueue(call.step, answerWon(` Twice ${won.n} makes ${won.n * 2}; there were also ${INVENTED} other deals.`));
    const answer = await ask('How much did we win?');

    expect(answer.grounding).toEqual(
      typedOnly({
        numbers: 5,
        supported: [
          wonCell(String(won.n), call.id, 'n'),
          wonCell(`$${money(won.total, 2)}`, call.id, 'total'),
          wonCell(String(won.n), call.id, 'n', false),
        ],
        unsupported: [
          { text: String(won.n * 2), reason: 'no_such_value' },
          { text: INVENTED, reason: 'no_such_value' },
        ],
      }),
    );
  });

  it('sends the grounding as a data-grounding part of the UI message stream, read with the AI SDK', async () => {
    const call = callWon();
    llm.enqueue(call.step, answerWon(` Also ${INVENTED}.`));
    const chat = uiChat(baseUrl, '/api/v1/ai/agents/data_chat/chat', t.adminKey);
    await chat.sendMessage({ text: 'How much did we win?' });

    expect(chat.error).toBeUndefined();
    const answer = chat.messages.at(-1)!;
    const expected: Grounding = typedOnly({
      numbers: 3,
      supported: [wonCell(String(won.n), call.id, 'n'), wonCell(`$${money(won.total, 2)}`, call.id, 'total')],
      unsupported: [{ text: INVENTED, reason: 'no_such_value' }],
    });
    expect(answer.parts.filter((p) => p.type === 'data-grounding')).toEqual([{ type: 'data-grounding', data: expected }]);
    expect(answer.parts.at(-1)).toEqual({ type: 'data-grounding', data: expected });
    expect((answer.metadata as { grounding: Grounding }).grounding).toEqual(expected);
  });

  it("keeps the grounding in a durable chat's final message metadata", async () => {
    const call = callWon();
    llm.enqueue(call.step, answerWon(` Also ${INVENTED}.`));
    const created = bodyOf<ChatResponse>(
      await t.http
        .post('/api/v1/chats')
        .set(bearer(t.adminKey))
        .send({ agent: 'data_chat', message: 'How much did we win?' })
        .expect(201),
    );
    await waitForChat(t, created.id, hasStatus('waiting'));
    const { messages } = bodyOf<ChatMessagesResponse>(
      await t.http.get(`/api/v1/chats/${created.id}/messages`).set(bearer(t.adminKey)).expect(200),
    );

    const assistants = messages.filter((m) => m.role === 'assistant');
    expect(assistants[0].metadata).toEqual({ model: 'mock-model', finishReason: 'tool_calls' });
    expect(assistants.at(-1)!.metadata).toEqual({
      model: 'mock-model',
      finishReason: 'stop',
      grounding: typedOnly({
        numbers: 3,
        supported: [wonCell(String(won.n), call.id, 'n'), wonCell(`$${money(won.total, 2)}`, call.id, 'total')],
        unsupported: [{ text: INVENTED, reason: 'no_such_value' }],
      }),
    });
  });

  it('streams the grounding to a durable useChat chat and keeps it in its UI messages', async () => {
    const call = callWon();
    llm.enqueue(call.step, answerWon(` Also ${INVENTED}.`));
    const api = '/api/v1/ai/agents/data_chat/chats';
    const chat = uiChat(baseUrl, api, t.adminKey, { id: `grounded-${Date.now().toString(36)}` });
    await chat.sendMessage({ text: 'How much did we win?' });

    expect(chat.error).toBeUndefined();
    const answer = chat.messages.at(-1)!;
    const grounding = answer.parts.find((p) => p.type === 'data-grounding') as { data: Grounding } | undefined;
    expect(grounding?.data.unsupported).toEqual([{ text: INVENTED, reason: 'no_such_value' }]);
    expect(grounding?.data.supported).toHaveLength(2);
    const { messages } = bodyOf<UiChatMessagesResponse>(
      await t.http.get(`${api}/${chat.id}/messages`).set(bearer(t.adminKey)).expect(200),
    );
    expect(messages as UIMessage[]).toEqual(chat.messages);
  });

  it('adds the grounding to the /v1 completion, and to the last chunk of a streamed one', async () => {
    const openai = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: t.adminKey });
    const call = callWon();
    llm.enqueue(call.step, answerWon(` Also ${INVENTED}.`));
    const completion = await openai.chat.completions.create({
      model: 'data_chat',
      messages: [{ role: 'user', content: 'How much did we win?' }],
    });
    const grounding = (completion as unknown as { grounding: Grounding }).grounding;
    expect(grounding.unsupported).toEqual([{ text: INVENTED, reason: 'no_such_value' }]);
    expect(grounding.supported).toEqual([
      wonCell(String(won.n), call.id, 'n'),
      wonCell(`$${money(won.total, 2)}`, call.id, 'total'),
    ]);

    const streamed = callWon();
    llm.enqueue(streamed.step, answerWon(` Also ${INVENTED}.`));
    const stream = await openai.chat.completions.create({
      model: 'data_chat',
      messages: [{ role: 'user', content: 'How much did we win?' }],
      stream: true,
    });
    const chunks: Array<OpenAI.Chat.Completions.ChatCompletionChunk & { grounding?: Grounding }> = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.filter((c) => c.grounding).length).toBe(1);
    const last = chunks.at(-1)!;
    expect(last.choices[0].finish_reason).toBe('stop');
    expect(last.grounding?.unsupported).toEqual([{ text: INVENTED, reason: 'no_such_value' }]);
    expect(last.grounding?.supported.map((n) => n.toolCallId)).toEqual([streamed.id, streamed.id]);
  });

  it('with grounding "retry", sends exactly one correcting step listing the unsupported numbers', async () => {
    const call = callWon();
    llm.enqueue(call.step, answerWon(` Also ${INVENTED} and 999.`), (req) => {
      const won = lastResult<Won>(req);
      return MockReply.text(`We won ${won.n} deals worth $${money(won.total, 2)}.`);
    });
    const answer = await ask('How much did we win?', 'strict_chat');

    expect(llm.requests).toHaveLength(3);
    const correcting = sentMessages(llm, 2);
    const request = correcting.at(-1)!;
    expect(request.role).toBe('user');
    expect(request.content).toContain(`- "${INVENTED}": no such value in the results`);
    expect(request.content).toContain('- "999": no such value in the results');
    expect(correcting.at(-2)).toMatchObject({ role: 'assistant', content: match.stringContaining(INVENTED) });
    // One model call that can only rewrite the answer: no tools offered.
    expect(sentToolNames(llm, 2)).toEqual([]);
    expect(answer.content).toBe(`We won ${won.n} deals worth $${money(won.total, 2)}.`);
    expect(answer.grounding).toEqual(
      typedOnly({
        numbers: 2,
        supported: [wonCell(String(won.n), call.id, 'n'), wonCell(`$${money(won.total, 2)}`, call.id, 'total')],
        unsupported: [],
      }),
    );
  });

  it('with grounding "retry", corrects once per turn: a corrected answer still unsupported is reported, not retried', async () => {
    llm.enqueue(callWon().step, answerWon(` Also ${INVENTED}.`), MockReply.text('Still 4,242 deals.'));
    const answer = await ask('How much did we win?', 'strict_chat');

    expect(llm.requests).toHaveLength(3);
    expect(answer.grounding).toEqual(
      typedOnly({ numbers: 1, supported: [], unsupported: [{ text: '4,242', reason: 'no_such_value' }] }),
    );
  });

  it('with grounding "retry", an answer whose numbers are all supported goes out as it is', async () => {
    llm.enqueue(callWon().step, answerWon());
    const answer = await ask('How much did we win?', 'strict_chat');
    expect(llm.requests).toHaveLength(2);
    expect(answer.grounding?.unsupported).toEqual([]);
  });

  it('with grounding "off", answers carry no grounding', async () => {
    llm.enqueue(callWon().step, answerWon(` Also ${INVENTED}.`));
    const answer = await ask('How much did we win?', 'loose_chat');
    expect(answer).not.toHaveProperty('grounding');
    expect(answer.content).toContain(INVENTED);
  });

  describe('a figure is bound to the row its sentence names, and derived figures come from calculate', () => {
    const BY_STAGE = { objectName: 'deal', groupBy: ['stage'], aggregations: [{ function: 'count', alias: 'n' }] };
    const callByStage = { id: 'call_by_stage', name: 'aggregate_data', arguments: BY_STAGE };
    type StageRow = { stage: string; n: number };
    /** The won row of the by-stage result the model received, and its index. */
    const wonRow = (req: RecordedRequest) => {
      const tool = (req.body!.messages as SentMessage[]).find((m) => m.tool_call_id === callByStage.id)!;
      const rows = parsedContent<{ rows: StageRow[] }>(tool).rows;
      const index = rows.findIndex((r) => r.stage === 'won');
      return { index, n: rows[index].n };
    };
    /** "We lost 451 deals" where 451 is the won count: the script of a model that read the wrong row. */
    const lostTheWonCount = (req: RecordedRequest) => {
      const { n } = wonRow(req);
      return MockReply.text(`We won ${n} deals. We lost ${n} deals.`);
    };
    let wonIndex: number;

    beforeAll(async () => {
      const rows = await t.sql<{ stage: string }>(`select stage from data.deal group by stage order by stage`);
      wonIndex = rows.findIndex((r) => r.stage === 'won');
      expect(won.n).toBe(451);
    });

    it('calculate computes over the cells of earlier results, refuses a number none holds, and its result supports the answer', async () => {
      // Count and sum only: the average is for calculate to derive.
      const sums = { ...WON, aggregations: WON.aggregations.filter((a) => a.function !== 'avg') };
      const call = { id: 'call_won_sums' };
      llm.enqueue(
        MockReply.toolCalls([{ id: call.id, name: 'aggregate_data', arguments: sums }]),
        (req) => {
          const { n, total } = lastResult<Won>(req);
          return MockReply.toolCalls([
            { id: 'call_avg', name: 'calculate', arguments: { expression: `round(${total} / ${n}, 2)` } },
            { id: 'call_guess', name: 'calculate', arguments: { expression: `${n} - 13.37` } },
          ]);
        },
        (req) => {
          const messages = req.body!.messages as SentMessage[];
          const { value } = parsedContent<{ value: number }>(messages.find((m) => m.tool_call_id === 'call_avg')!);
          return MockReply.text(`The average won deal is $${money(value, 2)}.`);
        },
      );
      const answer = await ask('What is our average won deal?');

      const results = sentMessages(llm, 2);
      const average = Math.round((won.total / won.n) * 100) / 100;
      expect(parsedContent(results.find((m) => m.tool_call_id === 'call_avg')!)).toEqual({
        // The turn's second data result, cited whole as {{r2}}.
        resultRef: 'r2',
        ref: 'r2',
        value: average,
        operands: [
          { text: String(won.total), toolCallId: call.id },
          { text: String(won.n), toolCallId: call.id },
        ],
      });
      const refused = results.find((m) => m.tool_call_id === 'call_guess')!.content as string;
      expect(refused).toMatch(/^Tool call failed: /);
      expect(JSON.parse(refused.replace(/^Tool call failed: /, ''))).toEqual({
        error: {
          code: 'unsupported_operand',
          message: match.stringContaining('"13.37"'),
          details: { operands: ['13.37'] },
        },
      });
      // Supported by the calculation, whose operands came from the won row.
      expect(answer.grounding).toEqual(
        typedOnly({
          numbers: 1,
          supported: [{ text: `$${money(average, 2)}`, toolCallId: 'call_avg', column: 'value', entityChecked: true }],
          unsupported: [],
        }),
      );
    });

    it('a figure the model computed itself stays unsupported, even next to a calculate result', async () => {
      const call = callWon();
      llm.enqueue(call.step, (req) => {
        const { n, total } = lastResult<Won>(req);
        return MockReply.text(`We won ${n} deals, about $${money(total / n + 1000, 0)} each.`);
      });
      const answer = await ask('What is our average won deal?');
      expect(answer.grounding?.unsupported).toEqual([
        { text: `$${money(won.total / won.n + 1000, 0)}`, reason: 'no_such_value' },
      ]);
    });

    it('in a durable chat, "We lost 451 deals" when 451 is the won count is unsupported: other_row', async () => {
      llm.enqueue(MockReply.toolCalls([callByStage]), lostTheWonCount);
      const created = bodyOf<ChatResponse>(
        await t.http
          .post('/api/v1/chats')
          .set(bearer(t.adminKey))
          .send({ agent: 'data_chat', message: 'How many deals did we win and lose?' })
          .expect(201),
      );
      await waitForChat(t, created.id, hasStatus('waiting'));
      const { messages } = bodyOf<ChatMessagesResponse>(
        await t.http.get(`/api/v1/chats/${created.id}/messages`).set(bearer(t.adminKey)).expect(200),
      );
      expect(messages.at(-1)!.metadata?.grounding).toEqual(
        typedOnly({
          numbers: 2,
          supported: [{ text: '451', toolCallId: callByStage.id, row: wonIndex, column: 'n', entityChecked: true }],
          unsupported: [{ text: '451', reason: 'other_row' }],
        }),
      );
    });

    it('on /v1, the same answer carries the same grounding', async () => {
      const openai = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: t.adminKey });
      llm.enqueue(MockReply.toolCalls([callByStage]), lostTheWonCount);
      const completion = await openai.chat.completions.create({
        model: 'data_chat',
        messages: [{ role: 'user', content: 'How many deals did we win and lose?' }],
      });
      expect(completion.choices[0].message.content).toBe('We won 451 deals. We lost 451 deals.');
      expect((completion as unknown as { grounding: Grounding }).grounding).toEqual(
        typedOnly({
          numbers: 2,
          supported: [{ text: '451', toolCallId: callByStage.id, row: wonIndex, column: 'n', entityChecked: true }],
          unsupported: [{ text: '451', reason: 'other_row' }],
        }),
      );
    });

    it('with grounding "retry", the correction names each unsupported figure with its reason and suggests calculate', async () => {
      llm.enqueue(
        MockReply.toolCalls([callByStage]),
        (req) => MockReply.text(`We lost ${wonRow(req).n} deals, ${wonRow(req).n * 2} in all.`),
        (req) => MockReply.text(`We won ${wonRow(req).n} deals.`),
      );
      const answer = await ask('How many deals did we lose?', 'strict_chat');

      expect(llm.requests).toHaveLength(3);
      const request = sentMessages(llm, 2).at(-1)!;
      expect(request.role).toBe('user');
      expect(request.content).toContain('- "451": this value belongs to another row than the one your sentence names');
      expect(request.content).toContain('- "902": no such value in the results');
      expect(request.content).toContain('call the calculate tool');
      expect(answer.grounding).toEqual(
        typedOnly({
          numbers: 1,
          supported: [{ text: '451', toolCallId: callByStage.id, row: wonIndex, column: 'n', entityChecked: true }],
          unsupported: [],
        }),
      );
    });
  });

  it("reads the answer's numbers in the agent's locale", async () => {
    const dataChat = bodyOf<Record<string, unknown>>(
      await t.http.get('/api/v1/ai/agents/data_chat').set(bearer(t.adminKey)).expect(200),
    );
    const spec: Record<string, unknown> = { ...dataChat, name: 'german_chat', locale: 'de-DE' };
    for (const key of ['createdAt', 'updatedAt', 'version']) delete spec[key];
    await t.http.post('/api/v1/ai/agents').set(bearer(t.adminKey)).send(spec).expect(201);
    const german = (value: number) => value.toLocaleString('de-DE', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
    const call = callWon();
    llm.enqueue(call.step, (req) => {
      const { n, total } = lastResult<Won>(req);
      return MockReply.text(`Wir haben ${n} Deals gewonnen, im Wert von ${german(total)} $.`);
    });
    const answer = await ask('Wie viel haben wir gewonnen?', 'german_chat');
    // "gewonnen" names the won row as "won" does.
    expect(answer.grounding).toEqual(
      typedOnly({
        numbers: 2,
        supported: [wonCell(String(won.n), call.id, 'n'), wonCell(`${german(won.total)} $`, call.id, 'total')],
        unsupported: [],
      }),
    );
  });

  it('rejects an unknown grounding mode with 400 and shows the mode in the agent', async () => {
    const agent = (name: string) => t.http.get(`/api/v1/ai/agents/${name}`).set(bearer(t.adminKey)).expect(200);
    const body = bodyOf<Record<string, unknown>>(await agent('strict_chat'));
    expect(body.grounding).toBe('retry');
    expect(bodyOf<Record<string, unknown>>(await agent('data_chat')).grounding).toBe('annotate');
    const spec: Record<string, unknown> = { ...body, grounding: 'sometimes' };
    for (const key of ['createdAt', 'updatedAt', 'version']) delete spec[key];
    const res = await t.http.put('/api/v1/ai/agents/strict_chat').set(bearer(t.adminKey)).send(spec).expect(400);
    expect(JSON.stringify(res.body)).toContain('grounding');
  });
});
