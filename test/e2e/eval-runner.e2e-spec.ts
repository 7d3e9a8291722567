import { expectedFrom, loadCases, type EvalCase, type Expected } from '../../evals/eval-cases';
import { compareWithBaseline, renderMarkdown } from '../../evals/eval-report';
import { runEval, type EvalReport } from '../../evals/eval-runner';
import { parsedContent, startAppWithMockLlm, type SentMessage } from '../support/agent-fixtures';
import { listen } from '../support/chat-helpers';
import { MockLlmServer, MockReply, type RecordedRequest } from '../support/mock-llm.server';
import { bearer, TestApp } from '../support/test-app';

/** What a scripted model says to each question of the eval. */
type Script = (evalCase: EvalCase, request: RecordedRequest) => ReturnType<typeof MockReply.text | typeof MockReply.toolCall>;

const KINDS = [
  'lookup',
  'filter',
  'count',
  'sum',
  'group_by',
  'top_n',
  'time_grain',
  'cross_object',
  'metric_synonym',
  'clarification',
  'refusal',
];

describe('The eval runner', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let all: EvalCase[];
  /** Two cases of each kind: every kind is graded, and the runs stay short. */
  let cases: EvalCase[];
  const expected = new Map<string, Expected>();

  const messagesOf = (request: RecordedRequest) => request.body!.messages as SentMessage[];
  const caseOf = (request: RecordedRequest) => {
    const question = messagesOf(request)
      .filter((m) => m.role === 'user')
      .at(-1)!.content;
    return all.find((c) => c.question === question)!;
  };
  /** Every model call is answered by `script` (the runs make at most two calls per case and repeat). */
  const scripted = (script: Script, repeat = 1) => {
    llm.reset();
    for (let i = 0; i < cases.length * repeat * 2; i++) llm.enqueue((request) => script(caseOf(request), request));
  };
  const run = (repeat = 1) =>
    runEval({
      api: baseUrl,
      apiKey: t.adminKey,
      databaseUrl: t.database.url,
      cases,
      agent: 'data_chat',
      model: 'mock-model',
      repeat,
    });
  const passedIds = (report: EvalReport, expects?: EvalCase['expects']) =>
    report.cases.filter((c) => c.passed && (!expects || c.expects === expects)).map((c) => c.id);
  const idsOf = (expects: EvalCase['expects']) => cases.filter((c) => c.expects === expects).map((c) => c.id);

  /** Reads the answer key this test stored for the case: a tool call whose result holds the figures. */
  const readAnswerKey = (evalCase: EvalCase) =>
    MockReply.toolCall('query_records', { objectName: 'eval_answer', where: { case_id: evalCase.id }, limit: 200 });
  const keyValues = (request: RecordedRequest) => {
    const tool = messagesOf(request)
      .filter((m) => m.role === 'tool')
      .at(-1)!;
    return parsedContent<{ records: Array<{ value: number }> }>(tool).records.map((r) => r.value);
  };

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { SEED: 'true' } }));
    baseUrl = await listen(t);
    all = await loadCases();
    cases = KINDS.flatMap((kind) => all.filter((c) => c.kind === kind).slice(0, 2));
    // The "perfect model" reads its figures from a table of answers, computed here by each case's own SQL.
    await t.http
      .post('/api/v1/objects')
      .set(bearer(t.adminKey))
      .send({
        name: 'eval_answer',
        label: 'Eval answer',
        fields: [
          { name: 'case_id', label: 'Case', type: 'text' },
          { name: 'value', label: 'Value', type: 'number' },
        ],
      })
      .expect(201);
    for (const evalCase of all.filter((c) => c.sql)) {
      const wanted = expectedFrom(evalCase, await t.sql(evalCase.sql!));
      expected.set(evalCase.id, wanted);
      if (!cases.includes(evalCase)) continue;
      for (const value of wanted.figures) {
        await t.http
          .post('/api/v1/objects/eval_answer/records')
          .set(bearer(t.adminKey))
          .send({ case_id: evalCase.id, value })
          .expect(201);
      }
    }
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  it('holds at least 60 cases of every kind, each figure case with SQL that yields figures on the sample data', () => {
    expect(all.length).toBeGreaterThanOrEqual(60);
    expect(new Set(all.map((c) => c.kind))).toEqual(new Set(KINDS));
    expect(cases.length).toBe(KINDS.length * 2);
    for (const evalCase of all) {
      if (evalCase.expects !== 'figure') {
        expect(evalCase.sql).toBeUndefined();
        continue;
      }
      const wanted = expected.get(evalCase.id)!;
      expect({ id: evalCase.id, figures: wanted.figures.length > 0 }).toEqual({ id: evalCase.id, figures: true });
      expect({ id: evalCase.id, terms: wanted.terms.length > 0 }).toEqual({ id: evalCase.id, terms: Boolean(evalCase.terms) });
    }
  });

  it('scores 100% for a model that calls a tool holding the right figures and states them, over repeats', async () => {
    scripted((evalCase, request) => {
      if (evalCase.expects === 'refusal')
        return MockReply.text('I cannot answer that: the data does not contain this information.');
      if (evalCase.expects === 'clarification') return MockReply.text('Which account, metric or period do you mean?');
      if (!messagesOf(request).some((m) => m.role === 'tool')) return readAnswerKey(evalCase);
      const terms = expected.get(evalCase.id)!.terms;
      return MockReply.text(`Here is what the data says: ${keyValues(request).join('; ')}. ${terms.join(', ')}`);
    }, 2);
    const report = await run(2);

    expect(report.cases.filter((c) => !c.passed)).toEqual([]);
    expect(report.summary).toMatchObject({ accuracy: 1, passK: 1, repeat: 2, cases: cases.length, cost: null });
    expect(report.summary.toolCalls).toBeGreaterThan(0);
    expect(report.summary.tokens).toBeGreaterThan(0);
    expect(Object.values(report.summary.byKind)).toEqual(KINDS.map(() => 1));
    for (const c of report.cases.filter((c) => c.expects === 'figure')) {
      expect(c.runs.every((r) => r.grounding!.unsupported.length === 0 && r.grounding!.supported.length > 0)).toBe(true);
    }
    expect(renderMarkdown(report)).toContain(`| ${cases[0].id} | ${cases[0].expects} | yes | 2/2 |`);
  });

  it('scores 0% on every figure case for a model that answers "ok"', async () => {
    scripted(() => MockReply.text('ok'));
    const report = await run();
    expect(passedIds(report, 'figure')).toEqual([]);
    expect(report.summary.accuracy).toBe(0);
  });

  it('scores 0% on every figure case for a model that states plausible but wrong figures after calling the tool', async () => {
    scripted((evalCase, request) => {
      if (evalCase.expects === 'figure' && !messagesOf(request).some((m) => m.role === 'tool')) return readAnswerKey(evalCase);
      const wrong = evalCase.expects === 'figure' ? keyValues(request).map((v) => Math.round(v * 1.37 + 3)) : [42];
      return MockReply.text(`The figures are ${wrong.join('; ')}. ${expected.get(evalCase.id)?.terms.join(', ') ?? ''}`);
    });
    const report = await run();

    expect(passedIds(report, 'figure')).toEqual([]);
    const failed = report.cases.find((c) => c.expects === 'figure')!.runs[0];
    expect(failed.reasons.join(' ')).toContain('missing figures');
    expect(failed.reasons.join(' ')).toContain('unsupported numbers');
  });

  it('scores only the refusal cases for a model that refuses everything, and tells the difference from a baseline', async () => {
    scripted(() => MockReply.text("I can't answer that: the data does not contain this information."));
    const report = await run();

    expect(passedIds(report)).toEqual(idsOf('refusal'));
    expect(report.summary.byKind).toMatchObject({ refusal: 1, clarification: 0, count: 0 });

    const baseline: EvalReport = { ...report, cases: report.cases.map((c) => ({ ...c, passed: c.expects !== 'refusal' })) };
    const diff = compareWithBaseline(report, baseline);
    expect(diff.regressions).toEqual(cases.filter((c) => c.expects !== 'refusal').map((c) => c.id));
    expect(diff.fixes).toEqual(idsOf('refusal'));
  });
});
