import { correctionRequest, extractNumbers, groundAnswer, numericValues, type GroundingSource } from './grounding';

const texts = (text: string) => extractNumbers(text).map((claim) => claim.text);

/** One tool call whose result holds `values`. */
const source = (...values: unknown[]): GroundingSource[] => [{ toolCallId: 'call_1', content: { rows: values } }];

describe('extractNumbers', () => {
  it.each([
    ['There are 42 deals.', '42', 42, 1, 0],
    ['Revenue was 1,234,567.89 in total.', '1,234,567.89', 1234567.89, 1, 2],
    ['Average 3.75 per deal', '3.75', 3.75, 1, 2],
    ['Win rate: 25%.', '25%', 25, 1, 0],
    ['Win rate: 25.5 %.', '25.5 %', 25.5, 1, 1],
    ['Pipeline is $1,234.57', '$1,234.57', 1234.57, 1, 2],
    ['Pipeline is €1,234', '€1,234', 1234, 1, 0],
    ['Pipeline is £99.5', '£99.5', 99.5, 1, 1],
    ['Pipeline is $1.2M', '$1.2M', 1.2, 1e6, 1],
    ['About 45k contacts', '45k', 45, 1e3, 0],
    ['Revenue 3.4bn', '3.4bn', 3.4, 1e9, 1],
    ['Revenue 2.5 million', '2.5 million', 2.5, 1e6, 1],
    ['The change was -12.5', '-12.5', -12.5, 1, 1],
    ['The change was −7', '−7', -7, 1, 0],
    ['A loss of -$45', '-$45', -45, 1, 0],
    ['A loss of $-45', '$-45', -45, 1, 0],
  ])('reads %j as %s', (text, shown, mantissa, scale, decimals) => {
    const [claim] = extractNumbers(text);
    expect(claim).toMatchObject({ text: shown, mantissa, scale, decimals });
    expect(extractNumbers(text)).toHaveLength(1);
  });

  it('reads every number of a sentence in order', () => {
    expect(texts('Acme has 12 deals worth $1,200.50, 30% of the total (4,002.00).')).toEqual([
      '12',
      '$1,200.50',
      '30%',
      '4,002.00',
    ]);
  });

  it('marks a percentage', () => {
    expect(extractNumbers('25% and 25 percent and 25')).toEqual([
      expect.objectContaining({ percent: true }),
      expect.objectContaining({ percent: true }),
      expect.objectContaining({ percent: false }),
    ]);
  });

  it('takes a range dash for a separator, not a minus sign', () => {
    expect(extractNumbers('between 10-20 deals and 30 - 40 more').map((c) => c.mantissa)).toEqual([10, 20, 30, 40]);
  });

  it.each([
    ['ISO dates', 'Closed on 2024-03-01 and 2023-12-31T10:00:00Z.'],
    ['year-months and quarters', 'In 2024-03 and 2024-Q1.'],
    ['slashed dates', 'Due 03/01/2024 or 1.3.2024.'],
    ['month and year', 'Since March 2024, and in Mar. 2023.'],
    ['month and day', 'On March 5, 2024 and on Jan 15th.'],
    ['day and month', 'On 5 March 2024 and the 1st of June.'],
    ['years in date context', 'In 2024, since 2019 and during 2023.'],
    ['quarters and fiscal years', 'Q1 2024, H2 2023 and FY2024.'],
    ['times of day', 'At 10:30 and 23:59:59.'],
    ['ids', 'Record 3f2b1c4d-1111-4222-8333-944445555666.'],
    ['ranks', 'The top 5 accounts, the first 3 deals, #1 and rank 2.'],
    ['list markers', '1. Acme\n2. Globex\n  3) Initech'],
    ['ordinal words', 'The 1st, 2nd and 3rd accounts.'],
    ['numbers inside words', 'Plan B2B, Q3, v2 and H1.'],
  ])('does not read %s as figures', (_kind, text) => {
    expect(texts(text)).toEqual([]);
  });

  it('still reads the figures beside a date or a rank', () => {
    expect(texts('The top 3 deals closed on 2024-03-01 for $5,000, $4,000 and $3,000.')).toEqual(['$5,000', '$4,000', '$3,000']);
    expect(texts('1. Acme: 12 deals')).toEqual(['12']);
  });
});

describe('groundAnswer', () => {
  it('supports a figure equal to a result value', () => {
    expect(groundAnswer('There are 42 deals.', source(42))).toEqual({
      numbers: 1,
      supported: [{ text: '42', toolCallId: 'call_1' }],
      unsupported: [],
    });
  });

  it.each(['1,234.57', '1,234.6', '1,235', '1234.5678', '1.2k', '1.23k', '$1,234.57', '€1,235', '$0.001M'])(
    'supports %s for 1234.5678 (rounded to the digits shown)',
    (shown) => {
      expect(groundAnswer(`The total is ${shown}.`, source(1234.5678)).unsupported).toEqual([]);
    },
  );

  it.each(['1,234.56', '1,236', '1.3k', '1,200'])('does not support %s for 1234.5678', (shown) => {
    expect(groundAnswer(`The total is ${shown}.`, source(1234.5678)).unsupported).toEqual([{ text: shown }]);
  });

  it('supports suffixed scales', () => {
    const grounding = groundAnswer('Pipeline $1.2M, contacts 45k, revenue 3.4bn.', source(1_234_567.89, 45_210, 3_412_000_000));
    expect(grounding.supported.map((n) => n.text)).toEqual(['$1.2M', '45k', '3.4bn']);
  });

  it('supports a percentage of a ratio and of a percentage value', () => {
    const grounding = groundAnswer('Win rate 25%, margin 12.5%, share 33.3%.', source(0.25, 12.5, 0.33333));
    expect(grounding.unsupported).toEqual([]);
    expect(grounding.numbers).toBe(3);
  });

  it('supports negative figures and the size of a negative value', () => {
    expect(groundAnswer('Change: -150.25, a loss of 150.', source(-150.25)).unsupported).toEqual([]);
    expect(groundAnswer('Change: -150.', source(150)).unsupported).toEqual([{ text: '-150' }]);
  });

  it('reads big sums from decimal strings', () => {
    const grounding = groundAnswer('Total 9,007,199,254,740,993.', source({ total: '9007199254740993' }));
    expect(grounding.unsupported).toEqual([]);
  });

  it('reads figures inside text values', () => {
    expect(groundAnswer('Call 555-0100.', source({ phone: '+1 555-0100' })).unsupported).toEqual([]);
  });

  it('finds values anywhere in nested results and names the call that supports each figure', () => {
    const sources: GroundingSource[] = [
      { toolCallId: 'call_a', content: { rows: [{ stage: 'won', sum_amount: 1500 }] } },
      { toolCallId: 'call_b', content: { records: [{ name: 'Acme', nested: { employees: [250] } }], total: 7 } },
    ];
    expect(groundAnswer('Won 1,500; Acme has 250 staff; 7 records.', sources).supported).toEqual([
      { text: '1,500', toolCallId: 'call_a' },
      { text: '250', toolCallId: 'call_b' },
      { text: '7', toolCallId: 'call_b' },
    ]);
  });

  it('reports a sum or a difference the model computed itself as unsupported', () => {
    const grounding = groundAnswer('Q1 had 1,000 and Q2 had 2,500, so 3,500 in all, 1,500 more.', source(1000, 2500));
    expect(grounding.supported.map((n) => n.text)).toEqual(['1,000', '2,500']);
    expect(grounding.unsupported).toEqual([{ text: '3,500' }, { text: '1,500' }]);
    expect(grounding.numbers).toBe(4);
  });

  it("does not count the numbers of the user's question", () => {
    const grounding = groundAnswer('There are 3 deals over $50,000.', source(3), 'How many deals are over 50000?');
    expect(grounding).toEqual({ numbers: 1, supported: [{ text: '3', toolCallId: 'call_1' }], unsupported: [] });
  });

  it('does not count dates and ordinals', () => {
    const grounding = groundAnswer('The top 5 deals since March 2024 (first on 2024-03-01):\n1. Acme $9,000', source(9000));
    expect(grounding).toEqual({ numbers: 1, supported: [{ text: '$9,000', toolCallId: 'call_1' }], unsupported: [] });
  });

  it('has no claims in an answer without numbers, and everything unsupported without tool results', () => {
    expect(groundAnswer('The data does not say.', source(1))).toEqual({ numbers: 0, supported: [], unsupported: [] });
    expect(groundAnswer('About 12 deals.', []).unsupported).toEqual([{ text: '12' }]);
  });
});

describe('numericValues', () => {
  it('collects numbers, numeric strings and figures in text', () => {
    expect(numericValues({ a: 1, b: '2.5', c: ['-3', { d: 4e3 }], e: 'about 5k', f: null, g: true })).toEqual([
      1, 2.5, -3, 4000, 5000,
    ]);
  });
});

describe('correctionRequest', () => {
  it('lists every unsupported number', () => {
    const text = correctionRequest({ numbers: 2, supported: [], unsupported: [{ text: '$1.2M' }, { text: '17' }] });
    expect(text).toContain('"$1.2M", "17"');
  });
});
