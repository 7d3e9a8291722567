import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_TOLERANCE, expectedOf, loadSuite, type EvalCase, type EvalSuite, type Expected } from '../../evals/eval-cases';
import { compareWithBaseline, renderMarkdown } from '../../evals/eval-report';
import { evalDate, openingMessage, runEval, type EvalReport } from '../../evals/eval-runner';
import { CRM_SAMPLE_REFERENCE_DATE } from '../../src/seed/crm-sample.data';
import { parsedContent, startAppWithMockLlm, type SentMessage } from '../support/agent-fixtures';
import { listen } from '../support/chat-helpers';
import { MockLlmServer, MockReply, type MockStep, type RecordedRequest } from '../support/mock-llm.server';
import { bearer, TestApp } from '../support/test-app';

/** One figure of the answer key: a row of a case's SQL result, by the SQL itself. */
interface KeyEntry {
  case_id: string;
  /** Position in the whole key: cases in file order, rows in result order, figures in column order. */
  seq: number;
  row: number;
  label: string;
  value: number;
}

/** What the scripted model says to a request, knowing only what a model would see (and, for "perfect", the case it is in). */
type Script = (request: RecordedRequest) => MockStep;

const KINDS = [
  'lookup',
  'filter',
  'count',
  'sum',
  'group_by',
  'top_n',
  'time_grain',
  'relative_date',
  'follow_up',
  'period_over_period',
  'cross_object',
  'metric_synonym',
  'ratio',
  'derived',
  'row_filter',
  'clarification',
  'refusal',
];

describe('The eval runner', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let suite: EvalSuite;
  let cases: EvalCase[];
  const today = evalDate();
  const expected = new Map<string, Expected>();
  const key: KeyEntry[] = [];

  const messagesOf = (request: RecordedRequest) => request.body!.messages as SentMessage[];
  const userTexts = (request: RecordedRequest) =>
    messagesOf(request)
      .filter((m) => m.role === 'user')
      .map((m) => m.content!);
  /** The case whose last message this request answers (whatever date opens it), or undefined for an earlier message of a longer chat. */
  const caseOf = (request: RecordedRequest) => {
    const [opening, ...later] = userTexts(request);
    return cases.find(
      (c) =>
        opening.endsWith(`\n\n${c.question}`) &&
        (c.followUps ?? []).length === later.length &&
        later.every((m, i) => m === c.followUps![i]),
    );
  };
  /** Tool results since the last user message: what this turn fetched. */
  const toolResults = (request: RecordedRequest) => {
    const messages = messagesOf(request);
    const lastUser = messages.map((m) => m.role).lastIndexOf('user');
    return messages.slice(lastUser + 1).filter((m) => m.role === 'tool');
  };
  const keyOf = (request: RecordedRequest) =>
    toolResults(request).flatMap((m) =>
      parsedContent<{ records: KeyEntry[] }>(m).records.map((r) => ({ ...r, value: Number(r.value) })),
    );
  const readKey = (where: Record<string, unknown>) =>
    MockReply.toolCall('query_records', {
      objectName: 'eval_answer',
      where,
      orderBy: [{ field: 'seq', order: 'asc' }],
      limit: 200,
    });

  /** Each row's label and figures, laid out as bullets, a table or sentences (the grader reads all three). */
  const statement = (entries: readonly KeyEntry[], layout: number): string => {
    const rows = [...new Set(entries.map((e) => e.row))].map((row) => {
      const of = entries.filter((e) => e.row === row);
      return { label: of[0].label, values: of.map((e) => String(e.value)) };
    });
    if (rows.length === 1 && !rows[0].label) return `The figure is ${rows[0].values.join(' and ')}.`;
    if (layout === 0) return rows.map((r) => `- ${r.label}: ${r.values.join(', ')}`).join('\n');
    if (layout === 1)
      return ['| item | value |', '|---|---|', ...rows.map((r) => `| ${r.label} | ${r.values.join(' | ')} |`)].join('\n');
    return rows.map((r) => `${r.label} comes to ${r.values.join(' and ')}.`).join(' ');
  };
  const REFUSE = "I can't answer that: the data does not contain this information.";

  /** Reads the answer key of the case (a tool call), then states each figure next to its label; refuses or asks back when the case expects it. */
  const perfect: Script = (request) => {
    const evalCase = caseOf(request);
    if (!evalCase) return MockReply.text('Noted.');
    if (evalCase.expects === 'refusal') return MockReply.text(REFUSE);
    if (evalCase.expects === 'clarification') {
      return MockReply.text(`Do you mean ${evalCase.options![0]}, or something else?`);
    }
    if (!toolResults(request).length) return readKey({ case_id: evalCase.id });
    return MockReply.text(statement(keyOf(request), cases.indexOf(evalCase) % 3));
  };

  /** Reads the key too, but gives each label the figure of a neighbouring row (same column), as a misread table would. */
  const oneRowOff: Script = (request) => {
    const evalCase = caseOf(request);
    if (!evalCase) return MockReply.text('Noted.');
    if (evalCase.expects !== 'figure') return perfect(request);
    const own = key.filter((e) => e.case_id === evalCase.id);
    if (!toolResults(request).length) return readKey({ seq: { $gte: own[0].seq - 30, $lte: own.at(-1)!.seq + 30 } });
    const read = keyOf(request);
    const tolerance = 5 * (evalCase.tolerance ?? DEFAULT_TOLERANCE);
    const misread = own.map((entry) => {
      const differs = (e: KeyEntry) => Math.abs(e.value - entry.value) > tolerance * Math.abs(entry.value);
      const neighbour =
        read.find((e) => e.seq > entry.seq && differs(e)) ?? read.findLast((e) => e.seq < entry.seq && differs(e))!;
      return { ...entry, value: neighbour.value };
    });
    return MockReply.text(statement(misread, cases.indexOf(evalCase) % 3));
  };

  /** Never reads the question: the same six broad calls every turn, then every number they returned, a hedge and a question. */
  const questionBlind: Script = (request) => {
    const results = toolResults(request);
    if (!results.length) {
      return MockReply.toolCalls([
        {
          name: 'aggregate_data',
          arguments: {
            objectName: 'deal',
            groupBy: ['stage'],
            aggregations: [
              { function: 'count', alias: 'deals' },
              { function: 'sum', field: 'amount', alias: 'amount' },
            ],
          },
        },
        {
          name: 'aggregate_data',
          arguments: { objectName: 'account', groupBy: ['tier'], aggregations: [{ function: 'count', alias: 'accounts' }] },
        },
        {
          name: 'aggregate_data',
          arguments: { objectName: 'activity', groupBy: ['type'], aggregations: [{ function: 'count', alias: 'activities' }] },
        },
        {
          name: 'aggregate_data',
          arguments: {
            objectName: 'contact',
            groupBy: ['lifecycle_stage'],
            aggregations: [{ function: 'count', alias: 'contacts' }],
          },
        },
        { name: 'query_metric', arguments: { metrics: ['won_revenue', 'win_rate'], groupBy: ['owner'] } },
        {
          name: 'query_records',
          arguments: { objectName: 'deal', fields: ['name', 'amount'], orderBy: [{ field: 'amount', order: 'desc' }], limit: 10 },
        },
      ]);
    }
    const lines = results.flatMap((m) => {
      const content = parsedContent<{ rows?: Array<Record<string, unknown>>; records?: Array<Record<string, unknown>> }>(m);
      return (content.rows ?? content.records ?? []).map(
        (row) =>
          '- ' +
          Object.entries(row)
            .filter(([field]) => field !== 'id')
            .map(([field, value]) => `${field} ${String(value)}`)
            .join(', '),
      );
    });
    return MockReply.text(
      [
        'Here is what the data shows:',
        ...lines,
        '',
        'These may not be exactly what you asked for. Did you mean one of these figures?',
      ].join('\n'),
    );
  };

  const refuser: Script = () => MockReply.text(REFUSE);

  const run = (script: Script, options: { cases?: EvalCase[]; repeat?: number; now?: string } = {}) => {
    llm.reset();
    llm.always(script);
    return runEval({
      api: baseUrl,
      apiKey: t.adminKey,
      databaseUrl: t.database.url,
      cases: options.cases ?? cases,
      member: suite.member,
      agent: 'data_chat',
      model: 'mock-model',
      repeat: options.repeat ?? 1,
      now: options.now,
    });
  };
  const passedIds = (report: EvalReport, expects?: EvalCase['expects']) =>
    report.cases.filter((c) => c.passed && (!expects || c.expects === expects)).map((c) => c.id);
  const idsOf = (expects: EvalCase['expects']) => cases.filter((c) => c.expects === expects).map((c) => c.id);
  const sqlQuery = (text: string, values: unknown[]) => t.sql(text, values);

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { SEED: 'true' } }));
    baseUrl = await listen(t);
    suite = await loadSuite();
    cases = suite.cases;
    // The answer key the scripted models read, computed by each case's own SQL as the runner does.
    await t.http
      .post('/api/v1/objects')
      .set(bearer(t.adminKey))
      .send({
        name: 'eval_answer',
        label: 'Eval answer',
        fields: [
          { name: 'case_id', label: 'Case', type: 'text' },
          { name: 'seq', label: 'Position', type: 'integer' },
          { name: 'row', label: 'Row', type: 'integer' },
          { name: 'label', label: 'Label', type: 'text' },
          { name: 'value', label: 'Value', type: 'number' },
        ],
      })
      .expect(201);
    for (const evalCase of cases) {
      const wanted = await expectedOf(evalCase, sqlQuery, { today, subject: suite.member?.subject });
      if (!wanted) continue;
      expected.set(evalCase.id, wanted);
      wanted.rows.forEach((row, r) =>
        row.figures.forEach((value) =>
          key.push({
            case_id: evalCase.id,
            seq: key.length + 1,
            row: r,
            label: row.labels.map((forms) => forms[0]).join(' – '),
            value,
          }),
        ),
      );
    }
    const operations = key.map((record) => ({ op: 'create', record }));
    await t.http
      .post('/api/v1/objects/eval_answer/records/batch')
      .set(bearer(t.adminKey))
      .send({ operations, atomic: true })
      .expect(200);
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  it('holds cases of every kind, each figure case with SQL that yields labelled figures on the sample data', () => {
    expect(cases.length).toBeGreaterThanOrEqual(85);
    expect(new Set(cases.map((c) => c.kind))).toEqual(new Set(KINDS));
    for (const evalCase of cases) {
      const wanted = expected.get(evalCase.id);
      if (evalCase.expects !== 'figure') {
        expect({ id: evalCase.id, sql: evalCase.sql }).toEqual({ id: evalCase.id, sql: undefined });
        continue;
      }
      const rows = wanted!.rows;
      // Every figure has a row; several rows are told apart by their labels, each named differently.
      expect({ id: evalCase.id, figures: rows.every((r) => r.figures.length > 0) && rows.length > 0 }).toEqual({
        id: evalCase.id,
        figures: true,
      });
      expect({ id: evalCase.id, labelled: rows.length === 1 || Boolean(evalCase.terms) }).toEqual({
        id: evalCase.id,
        labelled: true,
      });
      const names = rows.map((r) => r.labels.map((forms) => forms[0]).join(' – '));
      expect({ id: evalCase.id, distinct: new Set(names).size }).toEqual({ id: evalCase.id, distinct: rows.length });
    }
    // Each chat's messages name one case, so a reply can be scripted per case.
    const chats = cases.map((c) => [c.question, ...(c.followUps ?? [])].join('\n'));
    expect(new Set(chats).size).toBe(cases.length);
  });

  it('asks about deals by a name only one deal has', async () => {
    for (const evalCase of cases.filter((c) => c.kind === 'lookup')) {
      const name = /"(.+)"/.exec(evalCase.question)?.[1];
      if (!name) continue;
      expect({ name, deals: (await t.sql('select count(*)::int as n from data.deal where name = $1', [name]))[0].n }).toEqual({
        name,
        deals: 1,
      });
    }
  });

  it('scores 100% for a model that reads the SQL truths and states each figure next to its label, member and follow-up cases included', async () => {
    const report = await run(perfect);

    expect(
      report.cases.filter((c) => !c.passed).map((c) => ({ id: c.id, reasons: c.runs[0].reasons, answer: c.runs[0].answer })),
    ).toEqual([]);
    expect(report.summary).toMatchObject({
      accuracy: 1,
      passK: 1,
      repeat: 1,
      cases: cases.length,
      cost: null,
      today: CRM_SAMPLE_REFERENCE_DATE,
    });
    expect(report.summary.accuracyInterval[0]).toBeGreaterThan(0.95);
    expect(report.summary.accuracyInterval[1]).toBe(1);
    expect(Object.values(report.summary.byKind)).toEqual(KINDS.map(() => 1));
    for (const c of report.cases.filter((c) => c.expects === 'figure')) {
      expect(c.runs.every((r) => r.grounding!.unsupported.length === 0 && r.grounding!.supported.length > 0)).toBe(true);
      // This model types every figure: none is a reference, each one typed figure the grounding counted.
      expect(c.runs.map((r) => r.figures)).toEqual(c.runs.map((r) => ({ referenced: 0, typed: r.grounding!.numbers })));
      expect(c.runs.every((r) => r.figures.typed > 0)).toBe(true);
    }
    // A follow-up is a second message in the same chat, after the first answer.
    const followUp = cases.find((c) => c.followUps)!;
    const asked = llm.requests.filter((r) => userTexts(r)[0] === openingMessage(followUp.question, today));
    expect(userTexts(asked.at(-1)!)).toEqual([openingMessage(followUp.question, today), ...followUp.followUps!]);
    // The member cases ran with a key of their own, removed afterwards with its policy.
    const policies = (await t.http.get('/api/v1/policies').set(bearer(t.adminKey)).expect(200)).body as {
      policies: Array<{ name: string }>;
    };
    expect(policies.policies.filter((p) => p.name.startsWith('eval-member-'))).toEqual([]);
    const memberRun = report.cases.find((c) => c.member)!.runs[0];
    await t.http.get(`/api/v1/chats/${memberRun.chatId}`).set(bearer(t.adminKey)).expect(404);

    const markdown = renderMarkdown(report);
    const first = report.cases[0].runs[0];
    expect(markdown).toContain(
      `| ${cases[0].id} | ${cases[0].expects} | yes | 1/1 | ${first.toolCalls} | 0 / ${first.figures.typed} |`,
    );
    expect(markdown).toContain(`<summary>✅ ${cases[0].id} (figure)</summary>`);
    expect(markdown).toContain(`> ${report.cases[0].runs[0].answer.split('\n')[0]}`);
  });

  it('scores at most 5% for a model that never reads the question and lists every number it fetched with a hedge and a question', async () => {
    const report = await run(questionBlind);

    expect(report.summary.accuracy).toBeLessThanOrEqual(0.05);
    // It does state deals by stage next to each stage; what fails it is every other number it dumps.
    const byStage = report.cases.find((c) => c.id === 'group-deals-by-stage')!.runs[0];
    for (const row of expected.get('group-deals-by-stage')!.rows)
      expect(byStage.answer).toContain(`${row.labels[0][0]}, deals ${row.figures[0]}`);
    expect(byStage.reasons).toEqual([expect.stringMatching(/^\d+ numbers beyond the expected figures \(at most 3\)$/)]);
    for (const c of report.cases.filter((c) => c.expects !== 'figure')) {
      expect(c.runs[0].reasons).toContainEqual(expect.stringMatching(/^states figures: /));
    }
    // Under the member key its first call counts only the member's deals: the row filter applies.
    const memberCase = cases.find((c) => c.id === 'member-count-deals')!;
    const request = llm.requests.find((r) => caseOf(r) === memberCase && toolResults(r).length)!;
    const stages = parsedContent<{ rows: Array<{ deals: number }> }>(toolResults(request)[0]).rows;
    expect(stages.reduce((n, r) => n + Number(r.deals), 0)).toBe(expected.get('member-count-deals')!.figures[0]);
  });

  it('scores only the refusal cases for a model that refuses everything, over repeats, and tells the difference from a baseline', async () => {
    const report = await run(refuser, { repeat: 2 });

    expect(passedIds(report)).toEqual(idsOf('refusal'));
    expect(report.summary).toMatchObject({ repeat: 2, passK: report.summary.accuracy });
    expect(report.summary.byKind).toMatchObject({ refusal: 1, clarification: 0, count: 0 });
    expect(report.cases.every((c) => c.runs.length === 2)).toBe(true);

    const baseline: EvalReport = { ...report, cases: report.cases.map((c) => ({ ...c, passed: c.expects !== 'refusal' })) };
    const diff = compareWithBaseline(report, baseline);
    expect(diff.regressions).toEqual(cases.filter((c) => c.expects !== 'refusal').map((c) => c.id));
    expect(diff.fixes).toEqual(idsOf('refusal'));
  });

  it('scores 0% on figure cases for a model one row off: the right column, a neighbouring row', async () => {
    const report = await run(oneRowOff);

    expect(passedIds(report, 'figure')).toEqual([]);
    const byStage = report.cases.find((c) => c.id === 'group-deals-by-stage')!.runs[0];
    // Both checks catch it: the grader finds each figure beside another label, and grounding finds each
    // figure in a row other than the one its label names.
    expect(byStage.reasons.join('; ')).toContain('not next to their label');
    expect(byStage.reasons.join('; ')).toMatch(/unsupported numbers: (?:\d+, )*254/);
  });

  it('gives the model the eval clock and computes relative dates with it', async () => {
    const relative = cases.filter((c) => c.kind === 'relative_date');
    const report = await run(perfect, { cases: relative, now: '2025-04-15T09:30:00Z' });

    expect(report.summary.today).toBe('2025-04-15');
    expect(userTexts(llm.requests[0])[0]).toBe(openingMessage(relative[0].question, '2025-04-15'));
    // "Last quarter" is now Q1 2025: the key the perfect model reads (as of the sample's date) is wrong for it.
    const lastQuarter = report.cases.find((c) => c.id === 'rel-won-revenue-last-quarter')!;
    const [q1] = await t.sql<{ sum: string }>(
      "select sum(amount) from data.deal where stage = 'won' and close_date >= '2025-01-01' and close_date < '2025-04-01'",
    );
    expect(lastQuarter.expected!.figures).toEqual([Number(q1.sum)]);
    expect(lastQuarter.runs[0].reasons).toEqual([`missing figures: ${Number(q1.sum)}`]);
    expect(lastQuarter.passed).toBe(false);
  });

  it('runs from the command line: writes the JSON and Markdown reports and exits 1 under --fail-under', async () => {
    const cli = join(__dirname, '../../dist/evals/run.js');
    expect(existsSync(cli)).toBe(true);
    const out = await mkdtemp(join(tmpdir(), 'eval-cli-'));
    try {
      llm.reset();
      llm.always(refuser);
      const args = ['--api', baseUrl, '--api-key', t.adminKey, '--database-url', t.database.url, '--model', 'mock-model'];
      args.push('--cases', 'refuse-nps,clarify-best', '--fail-under', '0.8', '--out', out, '--baseline', join(out, 'none.json'));
      const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const code = await new Promise<number | null>((done) => child.on('exit', done));

      expect({ code, below: output.includes('below --fail-under 0.8') }).toEqual({ code: 1, below: true });
      const report = JSON.parse(await readFile(join(out, 'eval-report.json'), 'utf8')) as EvalReport;
      expect(report.summary).toMatchObject({ accuracy: 0.5, accuracyInterval: [expect.any(Number), expect.any(Number)] });
      expect(report.summary.accuracyInterval[0]).toBeLessThan(0.5);
      expect(report.summary.accuracyInterval[1]).toBeGreaterThan(0.5);
      expect(report.cases.map((c) => ({ id: c.id, expects: c.expects, passed: c.passed }))).toEqual([
        { id: 'clarify-best', expects: 'clarification', passed: false },
        { id: 'refuse-nps', expects: 'refusal', passed: true },
      ]);
      expect(await readFile(join(out, 'eval-report.md'), 'utf8')).toContain('<details>');
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });
});
