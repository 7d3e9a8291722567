import { correctionRequest, extractNumbers, groundAnswer, operandEvidence, type GroundingSource } from './grounding';
import { readText } from './grounding-figures';
import { detectLanguage, type GroundingLanguage } from './grounding-language';

const texts = (text: string, locale?: string) => extractNumbers(text, locale).map((claim) => claim.text);

/** One data call whose result holds `rows`. */
const rowsOf = (rows: Array<Record<string, unknown>>, extra: Partial<GroundingSource> = {}): GroundingSource => ({
  toolCallId: 'call_1',
  name: 'aggregate_data',
  holds: 'rows',
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
      holds: 'value',
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
      holds: 'rows',
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
      holds: 'rows',
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

describe('detectLanguage', () => {
  it.each([
    ['en', 'We won 451 deals in 2024, and the average deal was worth $763K.'],
    ['de', 'Wir haben 451 Deals gewonnen, mit einem Gesamtvolumen von 344,3 Mio. $.'],
    ['fr', 'Nous avons gagné 451 affaires, pour un total de 344,26 millions de dollars.'],
    ['es', 'Se ganaron 451 operaciones por un total de 344,26 millones de dólares.'],
    ['it', 'Abbiamo vinto 451 trattative per un totale di 344,3 milioni di dollari.'],
    ['pt', 'Ganhamos 451 negócios, somando US$ 344,26 milhões, e a média foi de US$ 763 mil.'],
    ['nl', 'We hebben 451 deals gewonnen, samen goed voor $ 344,3 miljoen.'],
  ])('tells %s from its short words', (language, text) => {
    expect(detectLanguage(text)).toBe(language);
  });

  it('says nothing of a text with too few words', () => {
    expect(detectLanguage('451 deals')).toBeUndefined();
  });
});

describe('readText: figures typed by hand in other languages', () => {
  const values = (text: string, locale?: string) => extractNumbers(text, locale).map((c) => [c.text, c.mantissa * c.scale]);

  it("reads the number style of the answer's language, whatever the locale", () => {
    expect(values('Wir haben 451 Deals gewonnen, Volumen 55,3 Mio. $.', 'en-US')).toEqual([
      ['451', 451],
      ['55,3 Mio. $', 55_300_000],
    ]);
    expect(values('We won 1,234 deals worth $1.5M.', 'de-DE')).toEqual([
      ['1,234', 1234],
      ['$1.5M', 1_500_000],
    ]);
  });

  it('reads dot, space, apostrophe and narrow no-break space grouping, and comma decimals', () => {
    expect(values('Die Deals summieren sich auf 185.227.917 USD und 1.234,50 USD.')).toEqual([
      ['185.227.917 USD', 185227917],
      ['1.234,50 USD', 1234.5],
    ]);
    expect(values('Les affaires représentent 135\u202f879\u202f460,50\u00a0$ et 1 234 €.')).toEqual([
      ['135\u202f879\u202f460,50\u00a0$', 135879460.5],
      ['1 234 €', 1234],
    ]);
    expect(values("Deals im Angebot: 185'227'917.50 USD", 'de-CH')).toEqual([["185'227'917.50 USD", 185227917.5]]);
    expect(values('Las 54 cuentas suman 35.416 millones de dólares.')).toEqual([
      ['54', 54],
      ['35.416 millones de dólares', 35_416_000_000],
    ]);
  });

  it.each([
    ['55,3 Mio. $', 55.3e6],
    ['344,3 Millionen Dollar', 344.3e6],
    ['2,1 Mrd. €', 2.1e9],
    ['450 Tsd. €', 450e3],
    ['35,4 milliards de dollars', 35.4e9],
    ['344,26 millions de dollars', 344.26e6],
    ['44,2 millones de dólares', 44.2e6],
    ['22,07 mil millones de dólares', 22.07e9],
    ['20,78 miliardi di dollari', 20.78e9],
    ['27,5 milioni di dollari', 27.5e6],
    ['US$ 35,42 bilhões', 35.42e9],
    ['US$ 19,7 milhões', 19.7e6],
    ['$ 11,28 miljard', 11.28e9],
    ['$ 27,5 miljoen', 27.5e6],
  ])('reads the scale of %s', (figure, value) => {
    const [claim] = extractNumbers(`Le total est de ${figure} pour les affaires.`);
    expect([claim.text, claim.mantissa * claim.scale]).toEqual([figure, value]);
  });

  it('reads percentage points apart from percentages, in each language', () => {
    const points = (text: string) => readText(text).figures.map((f) => [f.text, f.percent, f.points ?? false]);
    expect(points('Ihre Quote (59,7 %) liegt 11,7 Prozentpunkte über 48,0 %.')).toEqual([
      ['59,7 %', true, false],
      ['11,7 Prozentpunkte', true, true],
      ['48,0 %', true, false],
    ]);
    expect(points('Son taux (63,5 %) dépasse de 25,5 points celui d’Elena (38,0 %).')[1]).toEqual(['25,5 points', true, true]);
    expect(points('Lucas scored 25 points.')).toEqual([['25', false, false]]);
  });

  it('reads the direction of a change and hedges in other languages', () => {
    const read = (text: string) => readText(text).figures.map((f) => [f.sign, f.approximation]);
    expect(read('Der Umsatz ist um 12 % gesunken, bei etwa 40 Deals.')).toEqual([
      ['negative', undefined],
      ['none', 'about'],
    ]);
    expect(read('Le chiffre est en hausse de 5 %, sur plus de 300 affaires.')).toEqual([
      ['positive', undefined],
      ['none', 'over'],
    ]);
  });

  it('reads months, quarters and halves in the languages read, with ordinals', () => {
    const periods = (text: string) => readText(text).periods.map((p) => [p.text, p.from, p.to]);
    expect(periods('Im 3. Quartal 2024 und im März 2024')).toEqual([
      ['3. Quartal 2024', '2024-07-01', '2024-09-30'],
      ['März 2024', '2024-03-01', '2024-03-31'],
    ]);
    expect(periods('Au 1er trimestre 2024 et en juillet 2024')).toEqual([
      ['1er trimestre 2024', '2024-01-01', '2024-03-31'],
      ['juillet 2024', '2024-07-01', '2024-07-31'],
    ]);
    expect(periods('En el segundo trimestre de 2024 y en mayo de 2024')).toEqual([
      ['segundo trimestre de 2024', '2024-04-01', '2024-06-30'],
      ['mayo de 2024', '2024-05-01', '2024-05-31'],
    ]);
    expect(periods('Nel terzo trimestre 2024')).toEqual([['terzo trimestre 2024', '2024-07-01', '2024-09-30']]);
    expect(periods('No 2º trimestre de 2024 e no primeiro semestre de 2023')).toEqual([
      ['2º trimestre de 2024', '2024-04-01', '2024-06-30'],
      ['primeiro semestre de 2023', '2023-01-01', '2023-06-30'],
    ]);
    expect(periods('In het derde kwartaal van 2024, T3 2024 en 3T24')).toEqual([
      ['derde kwartaal van 2024', '2024-07-01', '2024-09-30'],
      ['T3 2024', '2024-07-01', '2024-09-30'],
      ['3T24', '2024-07-01', '2024-09-30'],
    ]);
  });

  it('reads dates in the languages read, with and without a year', () => {
    const dates = (text: string, locale?: string) => readText(text, { locale }).dates.map((d) => [d.text, d.date]);
    expect(dates('Signée le 4 janvier 2023, fechada em 4 de janeiro de 2023, am 4. Januar 2023.')).toEqual([
      ['4 janvier 2023', '2023-01-04'],
      ['4 de janeiro de 2023', '2023-01-04'],
      ['4. Januar 2023', '2023-01-04'],
    ]);
    expect(dates('Der Deal wurde am 04.01. abgeschlossen.')).toEqual([['04.01.', '--01-04']]);
    expect(dates('La operación se cerró el 4/1/23.')).toEqual([['4/1/23', '2023-01-04']]);
    expect(dates('It closed on 1/4.', 'en-US')).toEqual([['1/4', '--01-04']]);
  });

  it.each([
    ['ISO weeks', 'Stand KW 14, week 14, W14, semaine 14, semana 14, settimana 14: keine Änderung.'],
    ['footnote markers and notes', 'Won deals[1] and lost deals[^2].\n\n[1] aggregate_data\n[^2] the same call'],
    ['inline list markers', 'Next steps: (1) call Lucas, (2) email Priya.'],
    ['cohorts', 'She is in the top 10% of reps; die 5 größten Deals; los 5 mejores comerciales; i 5 migliori.'],
    ['ordinals', 'Lucas ist auf dem 1. Platz, Marcus 2º, Priya 3ª.'],
    ['short years', "Since Q3 '24 and März '24."],
    ['spans of time in other languages', 'In den letzten 30 Tagen, les 30 derniers jours, los últimos 12 meses.'],
  ])('does not read %s as figures', (_kind, text) => {
    expect(texts(text)).toEqual([]);
  });

  it('reads "1 in 2", "4 von 10", "1 affaire sur 2" as shares within what their denominator says', () => {
    const shares = (text: string) => readText(text).figures.map((f) => [f.text, f.mantissa, f.tolerance]);
    expect(shares('Roughly 1 in 2 deals, etwa 4 von 10 Deals, 1 affaire sur 2, 2 de cada 5, 4 su 10, 6 op de 10.')).toEqual([
      ['1 in 2', 50, 6],
      ['4 von 10', 40, 5],
      ['1 affaire sur 2', 50, 6],
      ['2 de cada 5', 40, 6],
      ['4 su 10', 40, 5],
      ['6 op de 10', 60, 5],
    ]);
    expect(texts('We closed 5 deals in 12 days and 49 in 2024.')).toEqual(['5', '49']);
  });
});

/** Win rate per owner (a ratio metric). */
const WIN: GroundingSource = {
  toolCallId: 'call_win',
  name: 'query_metric',
  holds: 'rows',
  arguments: { metrics: ['win_rate'], groupBy: ['owner'] },
  content: {
    rows: [
      { owner: 'Sofia Rossi', win_rate: 0.635 },
      { owner: 'Elena Petrova', win_rate: 0.38 },
    ],
  },
  columns: { win_rate: { kind: 'ratio' } },
};

describe('groundAnswer: figures typed by hand', () => {
  const ACCOUNT: GroundingSource = {
    toolCallId: 'call_account',
    name: 'get_record',
    holds: 'rows',
    arguments: { objectName: 'account' },
    content: { name: 'Brightline Retail Inc.', phone: '+1 319 555 7612', employees: 504 },
  };

  it('supports a share within its denominator and flags one that is not', () => {
    expect(groundAnswer('Elena Petrova wins about 2 in 5 of her deals.', [WIN]).unsupported).toEqual([]);
    expect(groundAnswer('Elena Petrova wins about 1 in 2 of her deals.', [WIN]).unsupported).toEqual([
      { text: '1 in 2', reason: 'no_such_value' },
    ]);
    // No share in the results: a manner of speaking.
    expect(groundAnswer('About 1 in 2 deals closed; we won 451.', [BY_STAGE]).unsupported).toEqual([]);
  });

  it('reads a phone number of the results written with other separators as no figure', () => {
    for (const phone of ['(319) 555-7612', '+1-319-555-7612', '+1 (319) 555 76 12', '+1 319 5557612'])
      expect([phone, groundAnswer(`Call Brightline Retail Inc. at ${phone}.`, [ACCOUNT]).unsupported]).toEqual([phone, []]);
    expect(groundAnswer('Call Brightline Retail Inc. at (319) 555-7621.', [ACCOUNT]).unsupported.length).toBeGreaterThan(0);
  });

  it('supports a figure worked out from two of its sentence, in the direction the words give', () => {
    const RATES = rowsOf(
      [
        { quarter: 'Q3', win_rate: 0.549, won: 73 },
        { quarter: 'Q4', win_rate: 0.467, won: 49 },
      ],
      { columns: { win_rate: { kind: 'ratio' }, won: { kind: 'count' } } },
    );
    const flagged = (answer: string) => groundAnswer(answer, [RATES]).unsupported.map((u) => u.text);
    const derived = groundAnswer('The win rate fell from 54.9% to 46.7%, down 8.2 points.', [RATES]);
    expect(derived.unsupported).toEqual([]);
    expect(derived.supported.find((s) => s.text.startsWith('8.2'))?.derivedFrom).toEqual(['54.9%', '46.7%']);
    expect(flagged('The win rate fell from 54.9% to 46.7%, down 8.2%.')).toEqual(['8.2%']);
    expect(flagged('We won 49 deals, down 32.9% on the 73 before.')).toEqual([]);
    expect(flagged('We won 49 deals, up 32.9% on the 73 before.')).toEqual(['32.9%']);
    expect(flagged('We won 49 deals, 24 fewer than the 73 before.')).toEqual([]);
    expect(flagged('We won 49 deals, 25 fewer than the 73 before.')).toEqual(['25']);
    // Not from figures of another sentence, nor a number in words.
    expect(flagged('We won 49 deals. That is 24 fewer than the 73 before.')).toEqual(['24']);
  });

  it('reads "points" as percentage points in an answer about percentages, in each language', () => {
    const read = (text: string) => readText(text, {}).figures.map((f) => [f.text, f.points ?? false]);
    expect(read('| Q3 | 54.9% |\n\nIt dropped 8.2 points.')).toEqual([
      ['54.9%', false],
      ['8.2 points', true],
    ]);
    expect(read('Il a perdu 8,2 points (54,9 %).')[0]).toEqual(['8,2 points', true]);
    expect(read('Sie fiel um 8,2 Punkte auf 46,7 %.')[0]).toEqual(['8,2 Punkte', true]);
    expect(read('We scored 12 points.')).toEqual([['12', false]]);
  });

  it('reads a spaced dash after a bold or quoted name as a separator, and an amount after a percentage as its own figure', () => {
    const signs = (text: string) => readText(text, {}).figures.map((f) => [f.text, f.sign]);
    expect(signs('1. **Atlas Pharma GmbH** – 4.82 billion, 12,400 staff')[0]).toEqual(['4.82 billion', 'none']);
    expect(signs('"Atlas" – 4.82 billion')[0]).toEqual(['4.82 billion', 'none']);
    const grew = readText('New business grew 19.1% to $72.9M.', {}).figures;
    expect(grew.map((f) => [f.text, f.scale, f.range])).toEqual([
      ['19.1%', 1, undefined],
      ['$72.9M', 1e6, undefined],
    ]);
  });

  it('reads "1 in every 3" as a share, "n. 1" as a rank and a year the calls filtered on as a period', () => {
    expect(readText('roughly 1 in every 3 dollars', {}).figures[0]).toMatchObject({ fraction: { numerator: 1, denominator: 3 } });
    expect(readText('È il n. 1 dei deal vinti.', {}).figures).toEqual([]);
    const filtered = rowsOf([{ source: 'referral', win_rate: 0.641 }], {
      arguments: { metrics: ['win_rate'], from: '2024-01-01', to: '2024-12-31' },
      columns: { win_rate: { kind: 'ratio' } },
    });
    expect(groundAnswer('2024 win rate: referral 64.1%.', [filtered]).unsupported).toEqual([]);
  });

  it("reads the names of countries and common values in the answer's language, and a bold line over a list as its heading", () => {
    const BY_COUNTRY = rowsOf(
      [
        { country: 'Germany', accounts: 24 },
        { country: 'United Kingdom', accounts: 22 },
      ],
      { columns: { accounts: { kind: 'count', counts: 'account' } } },
    );
    const flagged = (answer: string) => groundAnswer(answer, [BY_COUNTRY]).unsupported.map((u) => u.text);
    expect(flagged('| País | Cuentas |\n|---|---:|\n| Alemania | 24 |\n| Reino Unido | 22 |')).toEqual([]);
    expect(flagged('| País | Cuentas |\n|---|---:|\n| Alemania | 22 |\n| Reino Unido | 24 |')).toEqual(['22', '24']);
    expect(flagged('**Royaume-Uni**\n- Comptes : 22')).toEqual([]);
    expect(flagged('**Royaume-Uni**\n- Comptes : 24')).toEqual(['24']);
  });

  it("does not count the question's number denied in a correction", () => {
    const grounding = groundAnswer('No, we won 451 deals, not 500.', [BY_STAGE], { question: 'Did we win 500 deals?' });
    expect(grounding.unsupported).toEqual([]);
    expect(groundAnswer('Yes, we won 500 deals.', [BY_STAGE], { question: 'Did we win 500 deals?' }).unsupported).toHaveLength(1);
  });

  it('matches a date without a year against the day and month of a date of the results', () => {
    const records: GroundingSource = {
      toolCallId: 'call_r',
      name: 'query_records',
      holds: 'rows',
      arguments: { objectName: 'deal' },
      content: { records: [{ name: 'Acme – Renewal 2025', close_date: '2025-03-14', amount: 1200 }] },
    };
    expect(groundAnswer('Acme – Renewal 2025 closed on March 14.', [records]).unsupported).toEqual([]);
    expect(groundAnswer('Acme – Renewal 2025 closed on March 15.', [records]).unsupported).toHaveLength(1);
  });
});

describe('groundAnswer: claims in words', () => {
  const OWNERS: GroundingSource = {
    toolCallId: 'call_owners',
    name: 'aggregate_data',
    holds: 'rows',
    arguments: {
      objectName: 'deal',
      where: { stage: 'won' },
      groupBy: ['owner'],
      aggregations: [
        { function: 'sum', field: 'amount', alias: 'revenue' },
        { function: 'count', alias: 'won_deals' },
      ],
    },
    content: {
      rows: [
        { owner: 'Lucas Moreau', revenue: 55_331_292, won_deals: 49 },
        { owner: 'Marcus Silva', revenue: 38_790_967.5, won_deals: 20 },
        { owner: 'Priya Nair', revenue: 38_696_539.5, won_deals: 48 },
        { owner: 'Tom Fischer', revenue: 38_156_301, won_deals: 34 },
        { owner: null, revenue: 16_583_787, won_deals: 22 },
        { owner: 'Sofia Rossi', revenue: 14_812_482, won_deals: 47 },
      ],
    },
    columns: { revenue: { kind: 'money', aggregate: 'sum' }, won_deals: { kind: 'count', counts: 'deal', aggregate: 'count' } },
  };
  const QUARTERS: GroundingSource = {
    toolCallId: 'call_quarters',
    name: 'query_metric',
    holds: 'rows',
    arguments: { metrics: ['won_revenue'], timeGrain: 'quarter', from: '2024-01-01', to: '2024-12-31' },
    content: {
      rows: [
        { period: '2024-01-01', won_revenue: 20_678_896.5 },
        { period: '2024-04-01', won_revenue: 44_153_023.5 },
        { period: '2024-07-01', won_revenue: 54_231_762 },
        { period: '2024-10-01', won_revenue: 20_320_572 },
      ],
    },
    columns: { won_revenue: { kind: 'money', context: { stage: ['won'] } } },
  };
  const flagged = (answer: string, sources: GroundingSource[], question?: string) =>
    groundAnswer(answer, sources, { question }).unsupported.map((u) => u.text);

  it.each([
    ['Marcus Silva is #2 on won revenue with $38.8M.', []],
    ['Priya Nair is #2 on won revenue with $38.7M.', ['Priya Nair is #2']],
    ['Priya Nair belegt mit 38,7 Mio. $ den dritten Platz.', []],
    ['Priya Nair belegt mit 38,7 Mio. $ den zweiten Platz.', ['Priya Nair belegt mit 38,7 Mio. $ den zweiten Platz']],
    ['Tom Fischer se classe deuxième, avec 38,2 M$.', ['Tom Fischer se classe deuxième']],
    ['Priya Nair ocupa el segundo lugar en operaciones ganadas (48).', []],
    ['Sofia Rossi is in second place by won deals with 47.', ['Sofia Rossi is in second place']],
  ])('checks the rank in %j against the order of the results', (answer, unsupported) => {
    expect(flagged(answer, [OWNERS])).toEqual(unsupported);
  });

  it('checks a superlative against the rows it ranks, the period it names within its year', () => {
    expect(flagged('The best quarter of 2024 was Q3, with $54.2M.', [QUARTERS])).toEqual([]);
    expect(flagged('The best quarter of 2024 was Q2. It brought in $44.2M.', [QUARTERS])).toEqual([
      'The best quarter of 2024 was Q2',
    ]);
    expect(flagged('Sofia Rossi has the lowest won revenue, $14.8M.', [OWNERS])).toEqual([]);
  });

  it('checks the order of a numbered list against a number of its rows', () => {
    expect(flagged('1. Lucas Moreau – $55.3M\n2. Marcus Silva – $38.8M\n3. Priya Nair – $38.7M', [OWNERS])).toEqual([]);
    expect(flagged('1. Lucas Moreau – 49 deals\n2. Priya Nair – 48 deals\n3. Sofia Rossi – 47 deals', [OWNERS])).toEqual([]);
    expect(flagged('1. Lucas Moreau – $55.3M\n2. Priya Nair – $38.7M\n3. Marcus Silva – $38.8M', [OWNERS])).toEqual([
      '2. Priya Nair',
      '3. Marcus Silva',
    ]);
  });

  it('checks a multiple against the two figures it compares, or the two rows its sentence names', () => {
    expect(flagged('Won revenue more than doubled from Q1 2024 ($20.7M) to Q2 2024 ($44.2M).', [QUARTERS])).toEqual([]);
    expect(flagged('Won revenue doubled from Q2 2024 ($44.2M) to Q3 2024 ($54.2M).', [QUARTERS])).toEqual(['doubled']);
    expect(flagged('Der gewonnene Umsatz hat sich vom 2. zum 4. Quartal 2024 mehr als halbiert.', [QUARTERS])).toEqual([]);
    expect(flagged('Il fatturato si è dimezzato dal primo trimestre al quarto trimestre 2024.', [QUARTERS])).toEqual([
      'dimezzato',
    ]);
    expect(flagged("Lucas Moreau's won revenue is triple Tom Fischer's.", [OWNERS])).toEqual(['triple']);
  });

  it('flags a percentage said of a difference of percentages, and percentage points said of a change', () => {
    const win = WIN;
    const gap: GroundingSource = {
      toolCallId: 'call_gap',
      name: 'calculate',
      holds: 'value',
      arguments: { expression: '0.635 - 0.38' },
      content: {
        value: 0.255,
        operands: [
          { text: '0.635', toolCallId: 'call_win' },
          { text: '0.38', toolCallId: 'call_win' },
        ],
      },
    };
    expect(flagged("Sofia's win rate is 25.5 percentage points above Elena Petrova's.", [win, gap])).toEqual([]);
    expect(flagged("Sofia's win rate is 25.5% higher than Elena Petrova's.", [win, gap])).toEqual(['25.5%']);
    const growth: GroundingSource = {
      toolCallId: 'call_growth',
      name: 'calculate',
      holds: 'value',
      arguments: { expression: 'pct_change(20678896.5, 44153023.5)' },
      content: { value: 113.5, operands: [] },
    };
    expect(flagged('Won revenue grew 113.5% from Q1 to Q2 2024.', [QUARTERS, growth])).toEqual([]);
    expect(flagged('Won revenue grew 113.5 percentage points from Q1 to Q2 2024.', [QUARTERS, growth])).toEqual([
      '113.5 percentage points',
    ]);
  });

  it('reads parallel enumerations figure by figure', () => {
    expect(flagged('Lucas Moreau and Priya Nair closed 49 and 48 won deals respectively.', [OWNERS])).toEqual([]);
    expect(flagged('Lucas Moreau und Marcus Silva haben 20 bzw. 49 Deals gewonnen.', [OWNERS])).toEqual(['20', '49']);
    expect(flagged('Q2 and Q3 2024 brought in $54.2M and $44.2M.', [QUARTERS])).toEqual(['$54.2M', '$44.2M']);
  });

  it('binds "no owner" to the row whose owner is empty', () => {
    expect(flagged('Deals with no owner account for $16.6M of won revenue.', [OWNERS])).toEqual([]);
    expect(flagged('Unassigned deals account for $14.8M of won revenue.', [OWNERS])).toEqual(['$14.8M']);
    expect(flagged('Les affaires sans responsable représentent 16,6 M$.', [OWNERS])).toEqual([]);
  });

  it('tells won revenue from open pipeline, in the words of each language', () => {
    const metrics: GroundingSource = {
      toolCallId: 'call_metrics',
      name: 'query_metric',
      holds: 'rows',
      arguments: { metrics: ['won_revenue', 'pipeline_value'], groupBy: ['owner'] },
      content: { rows: [{ owner: 'Priya Nair', won_revenue: 38_696_539.5, pipeline_value: 90_097_735.5 }] },
      columns: { won_revenue: { kind: 'money', context: { stage: ['won'] } }, pipeline_value: { kind: 'money' } },
    };
    expect(flagged('Priya Nair has $90.1M in open pipeline and $38.7M in won revenue.', [metrics])).toEqual([]);
    expect(flagged('Priya Nair has $38.7M in open pipeline.', [metrics])).toEqual(['$38.7M']);
    expect(flagged('Priya Nair hat 90,1 Mio. $ offene Pipeline und 38,7 Mio. $ gewonnenen Umsatz.', [metrics])).toEqual([]);
    expect(flagged('Priya Nair tiene 38,7 millones de dólares en pipeline abierto.', [metrics])).toEqual([
      '38,7 millones de dólares',
    ]);
    expect(flagged('Nous avons gagné 419 affaires.', [BY_STAGE])).toEqual(['419']);
  });

  it("checks a date against the row its clause names, and a value's name in another language", () => {
    const records: GroundingSource = {
      toolCallId: 'call_r',
      name: 'query_records',
      holds: 'rows',
      arguments: { objectName: 'deal' },
      content: {
        records: [
          { name: 'Ironclad Bank – Expansion 2023', close_date: '2023-01-04' },
          { name: 'Northwind Dynamics – Expansion 2023', close_date: '2023-10-22' },
        ],
      },
    };
    expect(flagged('Ironclad Bank – Expansion 2023 closed on January 4, 2023.', [records])).toEqual([]);
    expect(flagged('Ironclad Bank – Expansion 2023 closed on October 22, 2023.', [records])).toEqual(['October 22, 2023']);
    expect(flagged('Les affaires en négociation sont 97.', [BY_STAGE])).toEqual([]);
    expect(flagged('Les affaires en négociation sont 380.', [BY_STAGE])).toEqual(['380']);
  });
});

describe('groundAnswer: sentences as they are written in other languages', () => {
  const YEARS: GroundingSource = {
    toolCallId: 'call_years',
    name: 'query_metric',
    holds: 'rows',
    arguments: { metrics: ['won_revenue'], timeGrain: 'year' },
    content: {
      rows: [
        { period: '2023-01-01', won_revenue: 135_883_476 },
        { period: '2024-01-01', won_revenue: 139_384_254 },
      ],
    },
    columns: { won_revenue: { kind: 'money', context: { stage: ['won'] } } },
  };
  const ACTIVITIES: GroundingSource = {
    toolCallId: 'call_activities',
    name: 'aggregate_data',
    holds: 'rows',
    arguments: { objectName: 'activity', groupBy: ['type'] },
    content: {
      rows: [
        { type: 'call', activities: 907, avg_minutes: 30.06 },
        { type: 'meeting', activities: 598, avg_minutes: 63.04 },
        { type: 'task', activities: 448, avg_minutes: null },
      ],
    },
  };
  const TIERS: GroundingSource = {
    toolCallId: 'call_tiers',
    name: 'aggregate_data',
    holds: 'rows',
    arguments: { objectName: 'account', groupBy: ['tier'] },
    content: {
      rows: [
        { tier: 'gold', accounts: 31 },
        { tier: 'platinum', accounts: 37 },
        { tier: 'silver', accounts: 45 },
      ],
    },
  };
  const flagged = (answer: string, sources: GroundingSource[], question?: string) =>
    groundAnswer(answer, sources, { question }).unsupported.map((u) => u.text);

  it('lets any period of a sentence that compares two scope its figures', () => {
    expect(flagged('Der gewonnene Umsatz stieg 2024 gegenüber 2023 leicht auf 139,4 Mio. $.', [YEARS], 'Umsatz 2024?')).toEqual(
      [],
    );
    expect(
      flagged('Rispetto al 2023, nel 2024 il fatturato vinto è passato da 135,9 a 139,4 milioni di dollari.', [YEARS]),
    ).toEqual([]);
  });

  it('says what is written once after "from X to Y" of both figures', () => {
    expect(texts('passando da 135,9 a 139,4 milioni di dollari')).toEqual(['135,9', '139,4 milioni di dollari']);
    expect(extractNumbers('von 20,7 auf 44,2 Mio. $').map((c) => c.scale)).toEqual([1e6, 1e6]);
  });

  it('does not carry a name of the sentence into a clause with a subject of its own, in another language', () => {
    expect(flagged('Ein Meeting dauert im Schnitt 63 Minuten, ein Anruf rund 30 Minuten.', [ACTIVITIES])).toEqual([]);
    expect(flagged('Er zijn 907 calls, 598 meetings en 448 taken gelogd.', [ACTIVITIES])).toEqual([]);
  });

  it("reads a figure beside one of several names of its clause as that name's", () => {
    expect(flagged('Há 45 contas silver, 37 platinum e 31 gold.', [TIERS])).toEqual([]);
    expect(flagged('Há 45 contas silver, 31 platinum e 37 gold.', [TIERS])).toEqual(['31', '37']);
  });

  it('counts the names an answer lists as no claim', () => {
    expect(flagged('Two tiers have fewer than 40 accounts: gold (31) and platinum (37).', [TIERS])).toEqual([]);
    expect(flagged('Three tiers have fewer than 40 accounts: gold (31) and platinum (37).', [TIERS])).toEqual(['Three']);
  });

  it('reads the ends of a range of exact figures as the smallest and the largest', () => {
    expect(flagged('Tiers hold between 31 and 45 accounts.', [TIERS])).toEqual([]);
    expect(flagged('Tiers hold between 31 and 44 accounts.', [TIERS])).toEqual(['44']);
    expect(flagged('Tiers hold between 30 and 50 accounts.', [TIERS])).toEqual([]);
  });

  it('reads the direction of a verb a few words before its figure, and the date of the answer itself', () => {
    const growth: GroundingSource = {
      toolCallId: 'call_growth',
      name: 'calculate',
      holds: 'value',
      arguments: { expression: 'pct_change(135883476, 139384254)' },
      content: { value: 2.58, operands: [] },
    };
    expect(flagged('In 2024 steeg de gewonnen omzet met 2,6%.', [YEARS, growth])).toEqual([]);
    expect(flagged('In 2024 daalde de gewonnen omzet met 2,6%.', [YEARS, growth])).toEqual(['2,6%']);
    const dated: GroundingSource = {
      ...YEARS,
      content: { rows: [{ period: '2024-01-01', won_revenue: 139_384_254, day: '2024-03-14' }] },
    };
    expect(flagged('Stand: 28.11.2026 – der gewonnene Umsatz 2024 beträgt 139,4 Mio. $.', [dated])).toEqual([]);
  });
});

describe('readText and groundAnswer: more of how figures are typed', () => {
  it('reads French and Portuguese hours, Dutch dates with dashes and Brazilian "mi"', () => {
    expect(readText('à 9 h 00, às 9h30, om 11:00').dates.map((d) => d.time)).toEqual(['09:00', '09:30', '11:00']);
    expect(readText('op 30-06-2025').dates.map((d) => d.date)).toEqual(['2025-06-30']);
    expect(extractNumbers('Lucas soma US$ 55,3 mi em receita.').map((c) => c.mantissa * c.scale)).toEqual([55_300_000]);
  });

  it('tries the other reading of "25.077" when neither the words nor a locale tell the style', () => {
    const account: GroundingSource = {
      toolCallId: 'call_a',
      name: 'get_record',
      holds: 'rows',
      arguments: { objectName: 'account' },
      content: { name: 'Granite Group LLC', employees: 25077 },
    };
    expect(groundAnswer('Granite Group LLC conta 25.077 dipendenti.', [account]).unsupported).toEqual([]);
    expect(groundAnswer('Granite Group LLC has 25.077 employees.', [account], { locale: 'en-US' }).unsupported).toHaveLength(1);
  });

  it('reads "op één na grootste" as second', () => {
    const tiers: GroundingSource = {
      toolCallId: 'call_tiers',
      name: 'aggregate_data',
      holds: 'rows',
      arguments: { objectName: 'account', groupBy: ['tier'] },
      content: {
        rows: [
          { tier: 'bronze', accounts: 87 },
          { tier: 'silver', accounts: 45 },
          { tier: 'gold', accounts: 31 },
        ],
      },
    };
    expect(groundAnswer('Met 45 accounts is silver het op één na grootste segment.', [tiers]).unsupported).toEqual([]);
    expect(groundAnswer('Met 31 accounts is gold het op één na grootste segment.', [tiers]).unsupported).toHaveLength(1);
  });
});

describe('readText and groundAnswer: ellipses', () => {
  const QUARTERS: GroundingSource = {
    toolCallId: 'call_quarters',
    name: 'query_metric',
    holds: 'rows',
    arguments: { metrics: ['won_revenue'], timeGrain: 'quarter', from: '2024-01-01', to: '2024-12-31' },
    content: {
      rows: [
        { period: '2024-01-01', won_revenue: 20_678_896.5 },
        { period: '2024-04-01', won_revenue: 44_153_023.5 },
        { period: '2024-07-01', won_revenue: 54_231_762 },
      ],
    },
    columns: { won_revenue: { kind: 'money' } },
  };

  it('reads the first of two ordinals sharing a word of quarters, and an ordinal alone after one', () => {
    const periods = (text: string) => readText(text).periods.map((p) => [p.text, p.from]);
    expect(periods('vom 3. zum 4. Quartal 2024')).toEqual([
      ['3.', '2024-07-01'],
      ['4. Quartal 2024', '2024-10-01'],
    ]);
    expect(periods('del primer trimestre de 2024 y el segundo')).toEqual([
      ['primer trimestre de 2024', '2024-01-01'],
      ['segundo', '2024-04-01'],
    ]);
  });

  it('reads a scale written once for the bare decimals after it', () => {
    expect(
      groundAnswer('En el primer semestre de 2024: 64,8 millones de dólares, 20,7 en el primer trimestre y 44,2 en el segundo.', [
        QUARTERS,
        {
          toolCallId: 'c',
          name: 'calculate',
          holds: 'value',
          arguments: { expression: '1 + 1' },
          content: { value: 64_831_920 },
        },
      ]).unsupported,
    ).toEqual([]);
  });

  it("does not count the question's threshold restated in other words and languages", () => {
    const grounding = groundAnswer('Sí: superan las 45 operaciones Lucas Moreau (49) y Priya Nair (48).', [BY_STAGE], {
      question: '¿Quién ganó más de 45 operaciones?',
    });
    expect(grounding.unsupported.map((u) => u.text)).not.toContain('45');
  });
});

describe('groundAnswer: codes, periods of the sentence before, averages in other languages', () => {
  it('reads a code of the results written with other separators as no figure', () => {
    const codes: GroundingSource = {
      toolCallId: 'call_codes',
      name: 'query_records',
      holds: 'rows',
      arguments: { objectName: 'account' },
      content: { records: [{ name: 'Brightline Retail Inc.', external_id: 'SF-0012345', vat_id: 'CA123456789' }] },
    };
    expect(groundAnswer('Brightline Retail Inc.: ID SF 0012345, VAT CA-123-456-789.', [codes]).unsupported).toEqual([]);
    expect(groundAnswer('Brightline Retail Inc.: ID SF 0012354.', [codes]).unsupported).toHaveLength(1);
  });

  it('takes the period of the sentence before when a sentence names none', () => {
    const quarters: GroundingSource = {
      toolCallId: 'call_quarters',
      name: 'query_metric',
      holds: 'rows',
      arguments: { metrics: ['won_revenue'], timeGrain: 'quarter', from: '2024-01-01', to: '2024-12-31' },
      content: {
        rows: [
          { period: '2024-04-01', won_revenue: 44_153_023.5 },
          { period: '2024-07-01', won_revenue: 54_231_762 },
        ],
      },
    };
    expect(groundAnswer("Let's look at Q3 2024. Won revenue reached $54.2M.", [quarters]).unsupported).toEqual([]);
    expect(groundAnswer("Let's look at Q3 2024. Won revenue reached $44.2M.", [quarters]).unsupported).toEqual([
      { text: '$44.2M', reason: 'other_row' },
    ]);
  });

  it('tells an average from a total in other languages', () => {
    const summed: GroundingSource = { ...BY_STAGE, columns: { ...BY_STAGE.columns, total: { kind: 'money', aggregate: 'sum' } } };
    expect(groundAnswer('En moyenne, une affaire gagnée vaut 23 456 789 $.', [summed]).unsupported).toHaveLength(1);
    expect(groundAnswer('El importe promedio de una operación ganada es de 23.456.789 $.', [summed]).unsupported).toHaveLength(1);
    expect(groundAnswer('Die gewonnenen Deals bringen insgesamt 23.456.789 $.', [summed]).unsupported).toEqual([]);
  });
});

describe('groundAnswer: what is no figure, and what a parenthesis names', () => {
  const phones: GroundingSource = {
    toolCallId: 'call_accounts',
    name: 'query_records',
    holds: 'rows',
    arguments: { objectName: 'account' },
    content: {
      records: [
        { name: 'Rheinwerk Maschinenbau AG', phone: '+49 211 555 0120' },
        { name: 'Polder Data B.V.', phone: '+31 20 555 0166' },
      ],
    },
  };

  it('reads a phone number written the national way (trunk 0, other groups) and a country code alone as no figures', () => {
    expect(groundAnswer('Rheinwerk Maschinenbau AG: 0211 5550120 (Vorwahl +49).', [phones]).unsupported).toEqual([]);
    expect(
      groundAnswer('Polder Data B.V. is bereikbaar op +31 (0)20 555 01 66 of 020 - 555 0166.', [phones]).unsupported,
    ).toEqual([]);
    expect(groundAnswer('Rheinwerk Maschinenbau AG: 0211 5550121.', [phones]).unsupported).not.toEqual([]);
  });

  it('reads ordinals of Romance languages, places, weeks and a German ordinal in a sentence as no figures', () => {
    for (const text of [
      'El 1.er trimestre y el 2.º trimestre; la 3.ª del equipo.',
      'La France est 4e avec le Japon.',
      'Places 2 to 4 are extremely close.',
      'La semana 12 fue la de más actividad; en la 13 se crearon menos.',
      'Das 3. Quartal war das stärkste, das 4. das schwächste.',
    ])
      expect(texts(text)).toEqual([]);
  });

  it('reads days and months written without a year as dates, and a list number before a month as none', () => {
    expect(readText('- ma 31/3 — Discovery call\n- sluitdatum 30-09\n- gesloten 04-01-23').dates.map((d) => d.date)).toEqual([
      '--03-31',
      '--09-30',
      '2023-01-04',
    ]);
    expect(readText('1. Juli: 23,9 Mio. $\n2. Juni: 18,1 Mio. $', { language: 'de' }).dates).toEqual([]);
  });

  it('lets the last day of a week the results start bound its span', () => {
    const week: GroundingSource = {
      toolCallId: 'call_week',
      name: 'query_records',
      holds: 'rows',
      arguments: { objectName: 'activity' },
      content: { records: [{ subject: 'Discovery call', due_at: '2025-03-31T09:00:00.000Z', duration_minutes: 30 }] },
    };
    expect(groundAnswer('Week 14 (31 March – 6 April): Discovery call, 30 minutes.', [week]).unsupported).toEqual([]);
    expect(groundAnswer('Week 14 (31 March – 26 April): Discovery call, 30 minutes.', [week]).unsupported).toHaveLength(1);
  });

  it('reads number words in English only ("ten opzichte van" is Dutch for "compared with")', () => {
    expect(texts('Het aantal halveerde ten opzichte van week 12.', 'nl-NL')).toEqual([]);
    expect(texts('We closed ten deals.')).toEqual(['ten']);
  });

  it('reads a figure as about what a parenthesis right after it, or around it, names', () => {
    const owners = rowsOf([
      { owner: 'Lucas Moreau', revenue: 55_331_292 },
      { owner: 'Jack Thompson', revenue: 30_764_271 },
    ]);
    expect(groundAnswer('Revenue ranges from $30.8M (Jack Thompson) to $55.3M (Lucas Moreau).', [owners]).unsupported).toEqual(
      [],
    );
    expect(groundAnswer('Last comes the smallest (30,8 milioni, di nuovo Jack Thompson).', [owners]).unsupported).toEqual([]);
    expect(
      groundAnswer('Revenue ranges from $30.8M (Lucas Moreau) to $55.3M (Jack Thompson).', [owners]).unsupported,
    ).toHaveLength(2);
  });
});

describe('groundAnswer: changes, counts of rows and ranks with digits', () => {
  const years = rowsOf([
    { period: '2023-01-01', owner: 'Sofia Rossi', won_revenue: 11_604_882, won_deals: 46 },
    { period: '2024-01-01', owner: 'Sofia Rossi', won_revenue: 5_930_115, won_deals: 42 },
    { period: '2024-01-01', owner: 'Maya Chen', won_revenue: 12_904_118, won_deals: 17 },
  ]);

  it('reads the first end of "from X to Y" as of the period before the one named, and both ends as levels', () => {
    expect(
      groundAnswer('In 2024 the won revenue of Sofia Rossi fell from 11.6 to 5.9 million dollars.', [years]).unsupported,
    ).toEqual([]);
    expect(groundAnswer("Sofia Rossi n'a baissé que de 46 à 42 affaires gagnées en 2024.", [years]).unsupported).toEqual([]);
    expect(
      groundAnswer('In 2024 the won revenue of Sofia Rossi fell from 12.9 to 5.9 million dollars.', [years]).unsupported,
    ).toEqual([{ text: '12.9', reason: 'other_row' }]);
  });

  it('reads the number of rows a result lists as a count of them', () => {
    const listed: GroundingSource = { ...years, content: { rows: (years.content as { rows: unknown[] }).rows } };
    expect(groundAnswer('Maya Chen won 17 deals, 2nd among the 3 listed.', [listed]).unsupported).toEqual([]);
    expect(groundAnswer('Maya Chen won 17 deals, 2nd among the 4 listed.', [listed]).unsupported).toHaveLength(1);
    expect(groundAnswer('Maya Chen won 17 deals; 3 rows hold more than 10.', [listed]).unsupported).toContainEqual({
      text: '3',
      reason: 'no_such_value',
    });
  });

  it('checks a rank written in digits after a verb', () => {
    expect(groundAnswer('Maya Chen has $12.9M in 2024, which makes it 1st.', [years]).unsupported).toEqual([]);
    expect(groundAnswer('Maya Chen has $12.9M in 2024, which makes it 2nd.', [years]).unsupported).toHaveLength(1);
  });
});

describe('groundAnswer: ranks among what the answer names, and against a contrasted figure', () => {
  const owners = rowsOf([
    { owner: 'Lucas Moreau', revenue: 55_331_292, won_deals: 49 },
    { owner: 'Marcus Silva', revenue: 38_790_967.5, won_deals: 20 },
    { owner: 'Priya Nair', revenue: 38_696_539.5, won_deals: 48 },
    { owner: 'Tom Fischer', revenue: 38_156_301, won_deals: 34 },
  ]);

  it('lets a rank hold among the rows the answer names', () => {
    expect(groundAnswer('Of Priya Nair and Tom Fischer, Priya Nair is the largest.', [owners]).unsupported).toEqual([]);
    expect(groundAnswer('Of Priya Nair and Tom Fischer, Tom Fischer is the largest.', [owners]).unsupported).toHaveLength(1);
  });

  it('lets a rank hold by another number of its row where the sentence sets its figure against it', () => {
    expect(groundAnswer('Marcus Silva erreicht Platz 2 mit nur 20 gewonnenen Deals.', [owners]).unsupported).toEqual([]);
    expect(groundAnswer('Marcus Silva erreicht Platz 3 mit nur 20 gewonnenen Deals.', [owners]).unsupported).toHaveLength(1);
  });
});

describe('groundAnswer on hostile text', () => {
  it('returns on a 100 KB answer made to be slow (one long line of digits, separators, names and claim words)', () => {
    const pieces = [
      '1 2 3 4 5 6 7 8 9 '.repeat(600),
      '1,2,3,4,5,6,7,8,9,0.'.repeat(500),
      '+1 (319) 555-7612 '.repeat(500),
      '((((((((((1'.repeat(800),
      'We won 451 deals worth $23.5M, doubled from Q1 2024, #2 place, zweiter Platz, verdoppelt, 4 von 10; '.repeat(300),
      '1. won – $23.5M\n2. lost – $19.9M\n'.repeat(300),
      '1.'.repeat(3000),
    ];
    let answer = '';
    for (let i = 0; answer.length < 100_000; i++) answer += pieces[i % pieces.length];
    const grounding = groundAnswer(answer.slice(0, 100_000), [BY_STAGE], { question: 'How many deals, 1 2 3?' });
    expect(grounding.numbers).toBeGreaterThan(0);
  });
});

describe('readText: a number and a dot', () => {
  it('is a date or an ordinal in German, and the end of a sentence in English', () => {
    expect(texts('January 2025 comes to 24. February 2025 comes to 23.')).toEqual(['24', '23']);
    expect(texts('platinum comes to 37. gold comes to 31.')).toEqual(['37', '31']);
    expect(readText('Am 24. Februar 2025 haben wir 3 Deals gewonnen.', { language: 'de' }).dates.map((d) => d.text)).toEqual([
      '24. Februar 2025',
    ]);
  });
});

describe('readText: a month named alone', () => {
  it('is a period when capitalised inside a sentence, and not the verb or the Italian "never"', () => {
    const months = (text: string, language?: GroundingLanguage) => readText(text, { language }).periods.map((p) => p.text);
    expect(months('Stärkster Monat war der Mai mit 23 Deals.', 'de')).toEqual(['Mai']);
    expect(months('The best month was May, with 23 deals.')).toEqual(['May']);
    expect(months('We may win 23 deals.')).toEqual([]);
    expect(months('Non abbiamo mai perso 23 affari.', 'it')).toEqual([]);
  });
});
