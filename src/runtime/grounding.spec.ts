import { correctionRequest, extractNumbers, groundAnswer, operandEvidence, type GroundingSource } from './grounding';
import { readText } from './grounding-figures';

const texts = (text: string, locale?: string) => extractNumbers(text, locale).map((claim) => claim.text);

/** One data call whose result holds `rows`. */
const rowsOf = (rows: Array<Record<string, unknown>>, extra: Partial<GroundingSource> = {}): GroundingSource => ({
  toolCallId: 'call_1',
  name: 'aggregate_data',
  content: { count: rows.length, rows },
  ...extra,
});

const BY_STAGE = rowsOf(
  [
    { stage: 'won', n: 451, total: 23_456_789.12 },
    { stage: 'lost', n: 380, total: 19_870_000 },
    { stage: 'negotiation', n: 97, total: 5_120_400.5 },
  ],
  {
    arguments: {
      objectName: 'deal',
      groupBy: ['stage'],
      aggregations: [
        { function: 'count', alias: 'n' },
        { function: 'sum', field: 'amount', alias: 'total' },
      ],
    },
    columns: { n: { kind: 'count', counts: 'deal' }, total: { kind: 'money', currency: 'USD' } },
  },
);

describe('readText: figures with their meaning', () => {
  it.each([
    ['There are 42 deals.', '42', 42, 1, 0],
    ['Revenue was 1,234,567.89 in total.', '1,234,567.89', 1234567.89, 1, 2],
    ['Win rate: 25%.', '25%', 25, 1, 0],
    ['Win rate: 25.5 per cent.', '25.5 per cent', 25.5, 1, 1],
    ['Pipeline is $1.2M', '$1.2M', 1.2, 1e6, 1],
    ['Pipeline is 3.4 mln', '3.4 mln', 3.4, 1e6, 1],
    ['About 45k contacts', '45k', 45, 1e3, 0],
    ['Revenue 3.4bn', '3.4bn', 3.4, 1e9, 1],
    ['Revenue 2.5 million', '2.5 million', 2.5, 1e6, 1],
    ['The change was −7', '−7', -7, 1, 0],
    ['A loss of -$45', '-$45', -45, 1, 0],
    ['twelve deals', 'twelve', 12, 1, 0],
    ['three hundred and four deals', 'three hundred and four', 304, 1, 0],
    ['- 185 deals', '185', 185, 1, 0],
    ['Aiko Tanaka comes to 0.46808510638297873.', '0.46808510638297873', 0.46808510638297873, 1, 17],
  ])('reads %j as %s', (text, shown, mantissa, scale, decimals) => {
    const [claim] = extractNumbers(text);
    expect(claim).toMatchObject({ text: shown, mantissa, scale, decimals });
    expect(extractNumbers(text)).toHaveLength(1);
  });

  it('reads currencies as ISO codes, symbols or words', () => {
    const { figures } = readText('$5, €6, £7, USD 8, 9 EUR and 10 dollars');
    expect(figures.map((f) => f.currency)).toEqual(['USD', 'EUR', 'GBP', 'USD', 'EUR', 'USD']);
  });

  it('reads the direction of a change from its words', () => {
    const { figures } = readText('Revenue fell by 12%, deals were up 5%, churn decreased by 3 and we added 7.');
    expect(figures.map((f) => [f.text, f.sign, f.mantissa])).toEqual([
      ['12%', 'negative', -12],
      ['5%', 'positive', 5],
      ['3', 'negative', -3],
      ['7', 'none', 7],
    ]);
  });

  it('reads hedges and ranges', () => {
    const { figures } = readText('About 450 deals, over $1.2M, nearly 30%, between 10 and 12 owners.');
    expect(figures.map((f) => f.approximation ?? f.range?.end)).toEqual(['about', 'over', 'under', 'low', 'high']);
  });

  it('reads numbers in the style of the locale', () => {
    expect(extractNumbers('1.234,5 und 12,5 %', 'de-DE').map((c) => c.mantissa)).toEqual([1234.5, 12.5]);
    expect(extractNumbers('1 234,5 et 12,5 %', 'fr-FR').map((c) => c.mantissa)).toEqual([1234.5, 12.5]);
    expect(extractNumbers('1,234.5 and 12.5%').map((c) => c.mantissa)).toEqual([1234.5, 12.5]);
  });

  it.each([
    ['ISO dates', 'Closed on 2024-03-01 and 2023-12-31T10:00:00Z.'],
    ['periods', 'In 2024-03, in 2024-Q1, Q1 2024, H2 2023 and FY2024.'],
    ['month and year', 'Since March 2024, and in Mar. 2023.'],
    ['years after a word of time', 'In 2024, since 2019 and during 2023.'],
    ['ids', 'Record 3f2b1c4d-1111-4222-8333-944445555666.'],
    ['ranks', 'The top 5 accounts, #1 and rank 2.'],
    ['list markers', '1. Acme\n2. Globex\n  3) Initech'],
    ['ordinal words', 'The 1st, 2nd and 3rd accounts.'],
    ['numbers inside words', 'Plan B2B, v2 and H1.'],
    ['spans of time', 'In the last 30 days and over the past 12 months.'],
    ['inline code', 'I called `aggregate_data` with `limit: 5`.'],
    ['pronouns and pointers', 'One of the two stages; both of the three owners.'],
  ])('does not read %s as figures', (_kind, text) => {
    expect(texts(text)).toEqual([]);
  });
});

describe('groundAnswer: a figure is supported by a cell of a row the sentence agrees with', () => {
  it('reports the call, row and column of each cell, and whether the row was checked', () => {
    expect(groundAnswer('We won 451 deals worth $23.5M.', [BY_STAGE])).toEqual({
      numbers: 2,
      supported: [
        { text: '451', toolCallId: 'call_1', row: 0, column: 'n', entityChecked: true },
        { text: '$23.5M', toolCallId: 'call_1', row: 0, column: 'total', entityChecked: true },
      ],
      unsupported: [],
      receipts: [],
      summary: { referenced: 0, typed: 2, supported: 2, unsupported: 0 },
    });
    expect(groundAnswer('There are 451 of them.', [BY_STAGE]).supported).toEqual([
      { text: '451', toolCallId: 'call_1', row: 0, column: 'n', entityChecked: false },
    ]);
  });

  it('flags a value of another row', () => {
    expect(groundAnswer('We lost 451 deals.', [BY_STAGE]).unsupported).toEqual([{ text: '451', reason: 'other_row' }]);
    expect(groundAnswer('| Stage | Deals |\n|---|---|\n| Lost | 451 |\n| Won | 380 |', [BY_STAGE]).unsupported).toEqual([
      { text: '451', reason: 'other_row' },
      { text: '380', reason: 'other_row' },
    ]);
  });

  it('flags a wrong unit, currency, scale and sign', () => {
    const unsupported = (answer: string) => groundAnswer(answer, [BY_STAGE]).unsupported.map((u) => u.reason);
    expect(unsupported('We won $451 in deals.')).toEqual(['wrong_unit']);
    expect(unsupported('Won revenue was €23.5M.')).toEqual(['wrong_unit']);
    expect(unsupported('Won revenue was $23.5k.')).toEqual(['wrong_scale']);
    const change: GroundingSource = {
      toolCallId: 'c',
      name: 'calculate',
      arguments: { expression: 'pct_change(1, 2)' },
      content: { value: 12.5, operands: [] },
    };
    expect(groundAnswer('Revenue fell 12.5%.', [change]).unsupported).toEqual([{ text: '12.5%', reason: 'wrong_sign' }]);
    expect(groundAnswer('Revenue grew 12.5%.', [change]).unsupported).toEqual([]);
  });

  it('supports rounding to the precision shown, and hedged figures within their rounding', () => {
    const ok = ['$23,456,789.12', '$23.46M', '23.5 million dollars', 'about $23M', 'over $23.4M', 'nearly 24 million'];
    for (const figure of ok) expect([figure, groundAnswer(`Won: ${figure}.`, [BY_STAGE]).unsupported]).toEqual([figure, []]);
    for (const figure of ['$23,460,000', '$23.4M', 'over $24M']) {
      expect(groundAnswer(`Won: ${figure}.`, [BY_STAGE]).unsupported).toHaveLength(1);
    }
  });

  it('never takes evidence from definitions, and says so', () => {
    const described: GroundingSource = {
      toolCallId: 'call_d',
      name: 'describe_object',
      content: { fields: [{ name: 'probability', description: 'proposal 50, negotiation 75' }] },
    };
    expect(groundAnswer('Deals in negotiation have a 75% chance.', [BY_STAGE, described]).unsupported).toEqual([
      { text: '75%', reason: 'not_data' },
    ]);
  });

  it("does not count the question's numbers restated, but flags one echoed as a result", () => {
    const grounding = groundAnswer('We won 451 deals over $50,000.', [BY_STAGE], {
      question: 'How many deals over 50000 did we win?',
    });
    expect(grounding.numbers).toBe(1);
    expect(groundAnswer('Yes, we won 500 deals.', [BY_STAGE], { question: 'Did we win 500 deals?' }).unsupported).toEqual([
      { text: '500', reason: 'from_question' },
    ]);
  });

  it('treats dates as claims when the results hold dates', () => {
    const records: GroundingSource = {
      toolCallId: 'call_r',
      name: 'query_records',
      arguments: { objectName: 'deal' },
      content: {
        count: 1,
        total: 1,
        hasMore: false,
        records: [{ name: 'Acme – Renewal 2025', close_date: '2025-03-14', amount: 1200 }],
      },
    };
    const grounding = groundAnswer('Acme – Renewal 2025 closed on March 14, 2025 and on 2025-03-15.', [records]);
    expect(grounding.supported.map((s) => s.text)).toEqual(['March 14, 2025']);
    expect(grounding.unsupported).toEqual([{ text: '2025-03-15', reason: 'no_such_value' }]);
  });

  it("takes a period from a record's own dates, not from when it was stored", () => {
    const records: GroundingSource = {
      toolCallId: 'call_r',
      name: 'query_records',
      arguments: { objectName: 'summary' },
      content: {
        count: 2,
        records: [
          { label: 'won in 2023', deals: 185, created_at: '2026-11-26T20:00:00.000Z' },
          { label: 'won in 2024', deals: 183, created_at: '2026-11-26T20:00:00.000Z' },
        ],
      },
    };
    const grounding = groundAnswer('We won 185 deals in 2023 and 183 in 2024.', [records], {
      question: 'Deals won in 2024 vs 2023?',
    });
    expect(grounding.unsupported).toEqual([]);
    expect(grounding.supported.map((s) => s.text)).toEqual(['185', '183']);
  });

  it('has no claims in an answer without figures, and everything unsupported without results', () => {
    expect(groundAnswer('The data does not say.', [BY_STAGE])).toEqual({
      numbers: 0,
      supported: [],
      unsupported: [],
      receipts: [],
      summary: { referenced: 0, typed: 0, supported: 0, unsupported: 0 },
    });
    expect(groundAnswer('About 12 deals.', []).unsupported).toEqual([{ text: '12', reason: 'no_such_value' }]);
  });
});

describe('operandEvidence', () => {
  it('finds the call whose result holds an operand, at the precision written', () => {
    const evidence = operandEvidence([BY_STAGE]);
    expect(evidence.supportOf('451')).toBe('call_1');
    expect(evidence.supportOf('23456789.12')).toBe('call_1');
    expect(evidence.supportOf('23456789')).toBe('call_1');
    expect(evidence.supportOf('452')).toBeUndefined();
  });
});

describe('correctionRequest', () => {
  it('names every unsupported figure with its reason and points at calculate', () => {
    const text = correctionRequest({
      numbers: 2,
      supported: [],
      unsupported: [
        { text: '$1.2M', reason: 'other_row' },
        { text: '17', reason: 'no_such_value' },
      ],
    });
    expect(text).toContain('"$1.2M": this value belongs to another row');
    expect(text).toContain('"17": no such value');
    expect(text).toContain('calculate');
  });
});
