/**
 * An adversarial corpus for grounding: answers as a model writes them over tool results computed
 * from the sample CRM (the data SEED=true loads), half fully correct in every format the checker
 * claims to read, half with exactly one planted error. Test fixture only.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../common/project-root';
import type { FieldMeta } from '../metadata/object-metadata.types';
import type { MetricDefinition } from '../metrics/metric.types';
import { generateCrmSample } from './crm-sample.data';
import { evaluateExpression } from '../tools/calculate/arithmetic.expression';
import { groundAnswer, operandEvidence, type Grounding } from '../runtime/grounding';
import { describeColumns, type ColumnCatalog, type GroundingSource } from '../runtime/grounding-evidence';

/** The kinds of planted error. */
export type PlantedKind =
  | 'wrong_row'
  | 'wrong_entity'
  | 'wrong_sign'
  | 'wrong_unit'
  | 'wrong_currency'
  | 'wrong_scale'
  | 'coarse_rounding'
  | 'coincidence'
  | 'from_question'
  | 'from_description'
  | 'invented';

export interface CorpusCase {
  id: string;
  question: string;
  answer: string;
  sources: GroundingSource[];
  locale?: string;
  /** Absent: every figure of the answer is right. */
  planted?: { kind: PlantedKind; figure: string };
}

// ---------------------------------------------------------------------------------------------
// The sample data and its definitions

type Row = Record<string, unknown>;

/** The fields of the sample records the answers quote. */
interface Deal extends Row {
  id: string;
  name: string;
  stage: string;
  amount: number;
  close_date: string;
  owner: string | null;
  metadata: { seats: number; contract_months: number };
}
interface Account extends Row {
  id: string;
  name: string;
  industry: string | null;
  employees: number;
  annual_revenue: number;
  country: string;
  tier: string;
  phone: string;
  founded_on: string;
}

const dataset = generateCrmSample();
const records = (name: string) => dataset.objects.find((o) => o.name === name)!.records;
const deals = records('deal') as Deal[];
const accounts = records('account') as Account[];

const seeds = join(projectRoot(), 'seeds');
const objects = new Map<string, { description?: string; fields: FieldMeta[] }>(
  readdirSync(join(seeds, 'objects'))
    .filter((file) => file !== 'manifest.json')
    .map((file) => {
      const object = JSON.parse(readFileSync(join(seeds, 'objects', file), 'utf8')) as {
        name: string;
        description?: string;
        fields: FieldMeta[];
      };
      return [object.name, object];
    }),
);
const metrics = (JSON.parse(readFileSync(join(seeds, 'metrics', 'metrics.json'), 'utf8')) as { metrics: MetricDefinition[] })
  .metrics;
const catalog: ColumnCatalog = {
  field: (object, field) => objects.get(object)?.fields.find((f) => f.name === field),
  metric: (name) => metrics.find((m) => m.name === name),
};

/** A data call's result with its columns described from the definitions, as the loop passes it. */
function call(toolCallId: string, name: string, args: Row, content: unknown): GroundingSource {
  const source: GroundingSource = { toolCallId, name, arguments: args, content };
  return { ...source, columns: describeColumns(source, catalog) };
}

const cents = (x: number) => Math.round(x * 100) / 100;
const sum = (rows: Row[], field: string) => cents(rows.reduce((s, r) => s + (typeof r[field] === 'number' ? r[field] : 0), 0));
const avg = (rows: Row[], field: string) => {
  const values = rows.map((r) => r[field]).filter((v): v is number => typeof v === 'number');
  return values.reduce((s, v) => s + v, 0) / values.length;
};
function groupBy(rows: Row[], key: (r: Row) => string | null): Map<string | null, Row[]> {
  const groups = new Map<string | null, Row[]>();
  for (const row of rows) {
    const k = key(row);
    groups.set(k, [...(groups.get(k) ?? []), row]);
  }
  return groups;
}

// Deals by stage: count, sum and average of amount.
const stageRows = [...groupBy(deals, (d) => d.stage as string)]
  .map(([stage, rows]) => ({ stage, deals: rows.length, total_amount: sum(rows, 'amount'), avg_amount: avg(rows, 'amount') }))
  .sort((a, b) => b.total_amount - a.total_amount);
const STAGES = call(
  'call_stages',
  'aggregate_data',
  {
    objectName: 'deal',
    groupBy: ['stage'],
    aggregations: [
      { function: 'count', alias: 'deals' },
      { function: 'sum', field: 'amount', alias: 'total_amount' },
      { function: 'avg', field: 'amount', alias: 'avg_amount' },
    ],
    orderBy: [{ field: 'total_amount', order: 'desc' }],
  },
  { count: stageRows.length, rows: stageRows },
);
const stage = (name: string) => stageRows.find((r) => r.stage === name)!;

// Owners' won revenue, top 5.
const wonDeals = deals.filter((d) => d.stage === 'won');
const ownerRows = [...groupBy(wonDeals, (d) => d.owner as string | null)]
  .filter(([owner]) => owner !== null)
  .map(([owner, rows]) => ({ owner, revenue: sum(rows, 'amount'), won_deals: rows.length }))
  .sort((a, b) => b.revenue - a.revenue)
  .slice(0, 5);
const OWNERS = call(
  'call_owners',
  'aggregate_data',
  {
    objectName: 'deal',
    where: { stage: 'won' },
    groupBy: ['owner'],
    aggregations: [
      { function: 'sum', field: 'amount', alias: 'revenue' },
      { function: 'count', alias: 'won_deals' },
    ],
    orderBy: [{ field: 'revenue', order: 'desc' }],
    limit: 5,
  },
  { count: ownerRows.length, rows: ownerRows },
);
const owner = (i: number) => ownerRows[i];

// Accounts by industry.
const industryRows = [...groupBy(accounts, (a) => a.industry as string | null)]
  .filter(([industry]) => industry !== null)
  .map(([industry, rows]) => ({
    industry,
    accounts: rows.length,
    avg_employees: avg(rows, 'employees'),
    total_revenue: sum(rows, 'annual_revenue'),
  }))
  .sort((a, b) => b.accounts - a.accounts || String(a.industry).localeCompare(String(b.industry)));
const INDUSTRIES = call(
  'call_industries',
  'aggregate_data',
  {
    objectName: 'account',
    groupBy: ['industry'],
    aggregations: [
      { function: 'count', alias: 'accounts' },
      { function: 'avg', field: 'employees', alias: 'avg_employees' },
      { function: 'sum', field: 'annual_revenue', alias: 'total_revenue' },
    ],
    orderBy: [{ field: 'accounts', order: 'desc' }],
  },
  { count: industryRows.length, rows: industryRows },
);
const industry = (name: string) => industryRows.find((r) => r.industry === name)!;

// Accounts by tier.
const tierRows = [...groupBy(accounts, (a) => a.tier as string)].map(([tier, rows]) => ({ tier, accounts: rows.length }));
const TIERS = call(
  'call_tiers',
  'aggregate_data',
  { objectName: 'account', groupBy: ['tier'], aggregations: [{ function: 'count', alias: 'accounts' }] },
  { count: tierRows.length, rows: tierRows },
);
const tier = (name: string) => tierRows.find((r) => r.tier === name)!;

// Won revenue and won deals per quarter of 2024 (query_metric).
const quarterRows = [1, 2, 3, 4].map((q) => {
  const rows = wonDeals.filter((d) => {
    const date = String(d.close_date);
    return date.startsWith('2024') && Math.ceil(Number(date.slice(5, 7)) / 3) === q;
  });
  return { period: `2024-${String(q * 3 - 2).padStart(2, '0')}-01`, won_revenue: sum(rows, 'amount'), won_deals: rows.length };
});
const QUARTERS = call(
  'call_quarters',
  'query_metric',
  { metrics: ['won_revenue', 'won_deals'], timeGrain: 'quarter', from: '2024-01-01', to: '2024-12-31' },
  { rows: quarterRows },
);
const quarter = (q: number) => quarterRows[q - 1];

// Win rate by owner (a ratio metric).
const closed = deals.filter((d) => d.stage === 'won' || d.stage === 'lost');
const winRows = [...groupBy(closed, (d) => d.owner as string | null)]
  .filter(([o]) => o !== null)
  .map(([o, rows]) => ({ owner: o, win_rate: rows.filter((d) => d.stage === 'won').length / rows.length }))
  .sort((a, b) => b.win_rate - a.win_rate);
const WIN_RATES = call(
  'call_win',
  'query_metric',
  { metrics: ['win_rate'], groupBy: ['owner'], orderBy: [{ field: 'win_rate', order: 'desc' }] },
  { rows: winRows },
);
const winRate = (name: string) => winRows.find((r) => r.owner === name)!.win_rate;

// One deal, one account.
const bigDeal = [...wonDeals].sort((a, b) => b.amount - a.amount)[0];
const DEAL = call('call_deal', 'get_record', { objectName: 'deal', recordId: bigDeal.id }, bigDeal);
const brightline = accounts.find((a) => a.name === 'Brightline Retail Inc.')!;
const ACCOUNT = call('call_account', 'get_record', { objectName: 'account', recordId: brightline.id }, brightline);

// The five largest won deals.
const topDeals = [...wonDeals]
  .sort((a, b) => b.amount - a.amount)
  .slice(0, 5)
  .map((d) => ({ id: d.id, name: d.name, amount: d.amount, close_date: d.close_date, owner: d.owner }));
const TOP_DEALS = call(
  'call_top',
  'query_records',
  {
    objectName: 'deal',
    where: { stage: 'won' },
    fields: ['name', 'amount', 'close_date', 'owner'],
    orderBy: [{ field: 'amount', order: 'desc' }],
    limit: 5,
  },
  { count: topDeals.length, total: wonDeals.length, hasMore: true, records: topDeals },
);

// Definitions: never evidence.
const DESCRIBE_DEAL: GroundingSource = {
  toolCallId: 'call_describe',
  name: 'describe_object',
  arguments: { objectName: 'deal' },
  content: { name: 'deal', ...objects.get('deal') },
};
const DESCRIBE_ACCOUNT: GroundingSource = {
  toolCallId: 'call_describe_account',
  name: 'describe_object',
  arguments: { objectName: 'account' },
  content: { name: 'account', ...objects.get('account') },
};
const LIST_METRICS: GroundingSource = { toolCallId: 'call_metrics', name: 'list_metrics', arguments: {}, content: { metrics } };

/** A calculate call over earlier results, computed as the tool computes it. */
function calc(toolCallId: string, expression: string, earlier: GroundingSource[]): GroundingSource {
  const { value, operands } = evaluateExpression(expression);
  const evidence = operandEvidence(earlier);
  const supported = operands.filter((o) => !o.constant).map((o) => ({ text: o.text, toolCallId: evidence.supportOf(o.text)! }));
  if (supported.some((o) => !o.toolCallId)) throw new Error(`corpus: ${expression} has an unsupported operand`);
  return { toolCallId, name: 'calculate', arguments: { expression }, content: { value, operands: supported } };
}

/** The value a calculate call returned. */
const value = (source: GroundingSource) => (source.content as { value: number }).value;

const WON_MINUS_LOST = calc('call_diff', `${stage('won').deals} - ${stage('lost').deals}`, [STAGES]);
const Q2_GROWTH = calc('call_growth', `pct_change(${quarter(1).won_revenue}, ${quarter(2).won_revenue})`, [QUARTERS]);
const Q4_CHANGE = calc('call_q4', `pct_change(${quarter(3).won_revenue}, ${quarter(4).won_revenue})`, [QUARTERS]);
const Q4_DROP = calc('call_q4_drop', `${quarter(4).won_revenue} - ${quarter(3).won_revenue}`, [QUARTERS]);
const TOP_SHARE = calc('call_share', `${owner(0).revenue} / ${stage('won').total_amount}`, [STAGES, OWNERS]);
const TOP5_TOTAL = calc('call_top5', ownerRows.map((r) => r.revenue).join(' + '), [OWNERS]);
const OPEN_TOTAL = calc(
  'call_open',
  ['prospecting', 'qualification', 'proposal', 'negotiation'].map((s) => stage(s).total_amount).join(' + '),
  [STAGES],
);
const LUCAS_VS_MARCUS = calc('call_gap', `${owner(0).revenue} - ${owner(1).revenue}`, [OWNERS]);

// ---------------------------------------------------------------------------------------------
// Formatting as a model writes numbers

const int = (x: number) => Math.round(x).toLocaleString('en-US');
const fixed = (x: number, d: number) => x.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
const usd = (x: number, d = 0) => `$${fixed(x, d)}`;
const mil = (x: number, d = 1) => (x / 1e6).toFixed(d);
const bil = (x: number, d = 2) => (x / 1e9).toFixed(d);
const pct = (ratio: number, d = 1) => `${(ratio * 100).toFixed(d)}%`;
const de = (x: number, d = 0) => x.toLocaleString('de-DE', { minimumFractionDigits: d, maximumFractionDigits: d });
const fr = (x: number, d = 0) => x.toLocaleString('fr-FR', { minimumFractionDigits: d, maximumFractionDigits: d });
const first = (name: string) => name.split(' ')[0];
const cap = (s: string) => s[0].toUpperCase() + s.slice(1).replaceAll('_', ' ');

const SMALL = [
  'zero',
  'one',
  'two',
  'three',
  'four',
  'five',
  'six',
  'seven',
  'eight',
  'nine',
  'ten',
  'eleven',
  'twelve',
  'thirteen',
  'fourteen',
  'fifteen',
  'sixteen',
  'seventeen',
  'eighteen',
  'nineteen',
];
const TENS = ['', '', 'twenty', 'thirty', 'forty', 'fifty', 'sixty', 'seventy', 'eighty', 'ninety'];
/** An integer below a million in words, British style ("three hundred and four"). */
function words(n: number): string {
  if (n < 20) return SMALL[n];
  if (n < 100) return TENS[Math.floor(n / 10)] + (n % 10 ? `-${SMALL[n % 10]}` : '');
  if (n < 1000) return `${SMALL[Math.floor(n / 100)]} hundred${n % 100 ? ` and ${words(n % 100)}` : ''}`;
  return `${words(Math.floor(n / 1000))} thousand${n % 1000 ? `${n % 1000 < 100 ? ' and' : ''} ${words(n % 1000)}` : ''}`;
}

// ---------------------------------------------------------------------------------------------
// The cases

const cases: CorpusCase[] = [];
const ok = (id: string, question: string, answer: string, sources: GroundingSource[], locale?: string) =>
  cases.push({ id, question, answer, sources, ...(locale ? { locale } : {}) });
const bad = (
  id: string,
  kind: PlantedKind,
  figure: string,
  question: string,
  answer: string,
  sources: GroundingSource[],
  locale?: string,
) => {
  if (!answer.includes(figure)) throw new Error(`corpus ${id}: the planted figure "${figure}" is not in the answer`);
  cases.push({ id, question, answer, sources, planted: { kind, figure }, ...(locale ? { locale } : {}) });
};

const won = stage('won');
const lost = stage('lost');
const nego = stage('negotiation');
const prop = stage('proposal');
const prosp = stage('prospecting');
const qual = stage('qualification');
const [o1, o2, o3, o4, o5] = ownerRows;
const [q1, q2, q3, q4] = quarterRows;

// --- Deals by stage: correct --------------------------------------------------------------
ok('stage-plain', 'How many deals did we win?', `We won ${won.deals} deals.`, [STAGES]);
ok('stage-won-lost', 'How many deals did we win and lose?', `You won **${won.deals}** deals and lost **${lost.deals}**.`, [
  STAGES,
]);
ok(
  'stage-table',
  'Break down deals by stage with their total value.',
  [
    'Here is the breakdown of all deals by stage:',
    '',
    '| Stage | Deals | Total amount |',
    '|---|---:|---:|',
    ...stageRows.map((r) => `| ${cap(String(r.stage))} | ${r.deals} | ${usd(r.total_amount, 2)} |`),
    '',
    'Won deals make up the largest share of value.',
  ].join('\n'),
  [STAGES],
);
ok(
  'stage-bullets-compact',
  'Give me the pipeline by stage.',
  [
    'Open pipeline by stage:',
    `- **Proposal**: ${prop.deals} deals, $${mil(prop.total_amount)}M`,
    `- **Prospecting**: ${prosp.deals} deals, $${mil(prosp.total_amount)}M`,
    `- **Negotiation**: ${nego.deals} deals, $${mil(nego.total_amount)}M`,
    `- **Qualification**: ${qual.deals} deals, $${mil(qual.total_amount)}M`,
  ].join('\n'),
  [STAGES],
);
ok(
  'stage-won-value-words',
  'What is the total value of won deals?',
  `Won deals add up to ${mil(won.total_amount, 1)} million dollars across ${won.deals} deals.`,
  [STAGES],
);
ok(
  'stage-avg',
  'What is the average size of a won deal compared to a lost one?',
  `The average won deal is ${usd(won.avg_amount)}, while the average lost deal was ${usd(lost.avg_amount)}.`,
  [STAGES],
);
ok(
  'stage-about',
  'Roughly how many deals are in negotiation?',
  `Roughly ${Math.round(nego.deals / 10) * 10} deals are currently in negotiation.`,
  [STAGES],
);
ok('stage-over', 'Did we lose more than 400 deals?', `Yes — you lost ${lost.deals} deals, so a little over 400.`, [STAGES]);
ok(
  'stage-k',
  'Average deal size in negotiation?',
  `Deals in negotiation average about $${Math.round(nego.avg_amount / 1000)}K each (${nego.deals} deals).`,
  [STAGES],
);
ok(
  'stage-diff-calc',
  'How many more deals did we win than lose?',
  `We won ${won.deals} deals and lost ${lost.deals}, so we won ${value(WON_MINUS_LOST)} more than we lost.`,
  [STAGES, WON_MINUS_LOST],
);
ok(
  'stage-open-total-calc',
  'What is the total value of the open pipeline?',
  `Open pipeline (prospecting, qualification, proposal and negotiation) totals ${usd(value(OPEN_TOTAL))}, or about $${mil(value(OPEN_TOTAL), 0)}M.`,
  [STAGES, OPEN_TOTAL],
);
ok(
  'stage-de',
  'Wie viele Deals haben wir gewonnen und mit welchem Volumen?',
  `Wir haben ${won.deals} Deals gewonnen, mit einem Gesamtvolumen von ${de(won.total_amount, 2)} USD.`,
  [STAGES],
  'de-DE',
);
ok(
  'stage-fr',
  'Combien vaut le pipeline en négociation ?',
  `Les ${nego.deals} affaires en négociation représentent ${fr(nego.total_amount, 2)} USD.`,
  [STAGES],
  'fr-FR',
);
ok(
  'stage-bn',
  'How much have we won in total?',
  `Total won value is ${usd(won.total_amount, 2)}, about $${bil(won.total_amount, 2)}B.`,
  [STAGES],
);
ok(
  'stage-question-threshold',
  'How many stages have more than 250 deals?',
  `Every stage has more than 250 deals; the smallest is negotiation with ${nego.deals}.`,
  [STAGES],
);
ok(
  'stage-range',
  'How big are the open stages?',
  `Each open stage holds between ${Math.min(nego.deals, qual.deals)} and ${prop.deals} deals.`,
  [STAGES],
);
ok('stage-mln', 'Value of deals in proposal?', `Proposal-stage deals are worth ${mil(prop.total_amount, 2)} mln USD in total.`, [
  STAGES,
]);
ok('stage-count-words', 'How many deals are in qualification?', `There are ${words(qual.deals)} deals in qualification.`, [
  STAGES,
]);

// --- Deals by stage: planted errors ---------------------------------------------------------
bad('stage-lost-is-won', 'wrong_row', String(won.deals), 'How many deals did we lose?', `We lost ${won.deals} deals.`, [STAGES]);
bad(
  'stage-table-swapped',
  'wrong_row',
  `| Lost | ${lost.deals} | ${usd(won.total_amount, 2)} |`,
  'Won vs lost value?',
  [
    '| Stage | Deals | Value |',
    '|---|---|---|',
    `| Won | ${won.deals} | $${mil(won.total_amount)}M |`,
    `| Lost | ${lost.deals} | ${usd(won.total_amount, 2)} |`,
  ].join('\n'),
  [STAGES],
);
bad(
  'stage-bullet-swapped',
  'wrong_row',
  `Prospecting: ${prop.deals}`,
  'Pipeline by stage?',
  [`- Proposal: ${prop.deals} deals`, `- Prospecting: ${prop.deals} deals`, `- Negotiation: ${nego.deals} deals`].join('\n'),
  [STAGES],
);
bad(
  'stage-nego-value-from-qual',
  'wrong_row',
  usd(qual.total_amount),
  'What is in negotiation?',
  `Negotiation holds ${nego.deals} deals worth ${usd(qual.total_amount)}.`,
  [STAGES],
);
bad(
  'stage-currency',
  'wrong_currency',
  `€${mil(won.total_amount)}M`,
  'Total won?',
  `Won deals total €${mil(won.total_amount)}M.`,
  [STAGES],
);
bad(
  'stage-unit-count-as-money',
  'wrong_unit',
  `$${won.deals}`,
  'Won deals?',
  `We won $${won.deals} worth of deals this period.`,
  [STAGES],
);
bad(
  'stage-scale',
  'wrong_scale',
  `$${mil(won.total_amount)}K`,
  'Total won?',
  `Won deals total $${mil(won.total_amount)}K across ${won.deals} deals.`,
  [STAGES],
);
bad(
  'stage-scale-bn',
  'wrong_scale',
  `$${mil(lost.total_amount, 1)}B`,
  'Lost value?',
  `We lost ${lost.deals} deals worth $${mil(lost.total_amount, 1)}B.`,
  [STAGES],
);
bad(
  'stage-coarse',
  'coarse_rounding',
  usd(Math.round(won.total_amount / 1e7) * 1e7),
  'Exact won value?',
  `The exact won value is ${usd(Math.round(won.total_amount / 1e7) * 1e7)}.`,
  [STAGES],
);
bad(
  'stage-coarse-m',
  'coarse_rounding',
  `$${mil(nego.total_amount, 0)}.0M`,
  'Negotiation value to one decimal?',
  `Negotiation is at $${mil(nego.total_amount, 0)}.0M.`,
  [STAGES],
);
bad(
  'stage-diff-mental',
  'invented',
  String(won.deals - lost.deals + 2),
  'How many more deals won than lost?',
  `We won ${won.deals} and lost ${lost.deals}, so ${won.deals - lost.deals + 2} more wins than losses.`,
  [STAGES],
);
bad(
  'stage-echo',
  'from_question',
  '500',
  'Did we win 500 deals?',
  `Yes, we won 500 deals, with a total value of ${usd(won.total_amount)}.`,
  [STAGES],
);
bad(
  'stage-description',
  'from_description',
  '75%',
  'What chance do negotiation deals have?',
  `There are ${nego.deals} deals in negotiation, and each has a 75% chance to close.`,
  [STAGES, DESCRIBE_DEAL],
);
bad(
  'stage-coincidence',
  'coincidence',
  String(ownerRows[0].won_deals),
  'How many deals are in negotiation?',
  `There are ${ownerRows[0].won_deals} deals in negotiation right now.`,
  [STAGES, OWNERS],
);
bad('stage-sign', 'wrong_sign', `-${won.deals}`, 'Net won deals?', `Net won deals: -${won.deals}.`, [STAGES]);
bad(
  'stage-de-wrong',
  'wrong_row',
  de(lost.total_amount, 2),
  'Volumen der gewonnenen Deals?',
  `Die ${won.deals} gewonnenen Deals haben ein Volumen von ${de(lost.total_amount, 2)} USD.`,
  [STAGES],
  'de-DE',
);
bad(
  'stage-words-wrong',
  'invented',
  words(qual.deals + 10),
  'How many deals in qualification?',
  `Qualification has ${words(qual.deals + 10)} deals.`,
  [STAGES],
);
bad(
  'stage-about-wrong',
  'invented',
  'about 300',
  'Roughly how many deals are in negotiation?',
  'There are about 300 deals in negotiation.',
  [STAGES],
);

// --- Owners' won revenue: correct --------------------------------------------------------------
ok(
  'owners-table',
  'Who are our top 5 reps by won revenue?',
  [
    'Top 5 sales reps by won revenue:',
    '',
    '| # | Owner | Won revenue | Won deals |',
    '|---|---|---:|---:|',
    ...ownerRows.map((r, i) => `| ${i + 1} | ${r.owner} | ${usd(r.revenue)} | ${r.won_deals} |`),
  ].join('\n'),
  [OWNERS],
);
ok(
  'owners-prose',
  'Who brought in the most revenue?',
  `${o1.owner} leads with ${usd(o1.revenue)} from ${o1.won_deals} won deals, followed by ${o2.owner} with ${usd(o2.revenue, 2)} and ${o3.owner} with ${usd(o3.revenue, 2)}.`,
  [OWNERS],
);
ok(
  'owners-numbered',
  'Rank the top reps.',
  ownerRows.map((r, i) => `${i + 1}. **${r.owner}** — $${mil(r.revenue)}M (${r.won_deals} deals)`).join('\n'),
  [OWNERS],
);
ok(
  'owners-first-name',
  'How did Lucas do?',
  `${o1.owner} closed ${o1.won_deals} deals. ${first(String(o1.owner))}'s won revenue is ${usd(o1.revenue)}, the highest on the team.`,
  [OWNERS],
);
ok(
  'owners-share-calc',
  "What share of won revenue is the top rep's?",
  `${o1.owner} accounts for ${pct(value(TOP_SHARE))} of all won revenue (${usd(o1.revenue)} of ${usd(won.total_amount)}).`,
  [STAGES, OWNERS, TOP_SHARE],
);
ok(
  'owners-top5-total-calc',
  'How much did the top five bring in together?',
  `Together the top five reps brought in $${mil(value(TOP5_TOTAL), 1)}M.`,
  [OWNERS, TOP5_TOTAL],
);
ok(
  'owners-gap-calc',
  'How far ahead is the leader?',
  `${first(String(o1.owner))} is ahead of ${o2.owner} by ${usd(value(LUCAS_VS_MARCUS), 2)}.`,
  [OWNERS, LUCAS_VS_MARCUS],
);
ok(
  'owners-nested-bullets',
  'Summarise the top three reps.',
  [
    `- ${o1.owner}`,
    `  - Won revenue: ${usd(o1.revenue)}`,
    `  - Won deals: ${o1.won_deals}`,
    `- ${o2.owner}`,
    `  - Won revenue: ${usd(o2.revenue, 2)}`,
    `  - Won deals: ${o2.won_deals}`,
    `- ${o3.owner}`,
    `  - Won revenue: ${usd(o3.revenue, 2)}`,
    `  - Won deals: ${o3.won_deals}`,
  ].join('\n'),
  [OWNERS],
);
ok(
  'owners-words',
  'How many deals did Marcus win?',
  `Marcus Silva won ${words(o2.won_deals)} deals, worth roughly $${mil(o2.revenue, 0)} million.`,
  [OWNERS],
);
ok(
  'owners-close-race',
  'Is it close between Marcus and Priya?',
  `Very close: ${o2.owner} has ${usd(o2.revenue, 2)} and ${o3.owner} has ${usd(o3.revenue, 2)} — but ${first(String(o3.owner))} needed ${o3.won_deals} deals to get there versus ${o2.won_deals} for ${first(String(o2.owner))}.`,
  [OWNERS],
);
ok(
  'owners-usd-code',
  'Revenue of Tom Fischer?',
  `Tom Fischer: USD ${fixed(o4.revenue, 0)} in won revenue (${o4.won_deals} deals).`,
  [OWNERS],
);
ok(
  'owners-nearly',
  'Did Jack Thompson reach 31 million?',
  `Jack Thompson is at nearly $31M — ${usd(o5.revenue)} exactly, from ${o5.won_deals} won deals.`,
  [OWNERS],
);
ok(
  'owners-de',
  'Umsatz der Top-Verkäufer?',
  `${o1.owner} liegt mit ${de(o1.revenue)} USD vorne, gefolgt von ${o2.owner} mit ${de(o2.revenue, 2)} USD.`,
  [OWNERS],
  'de-DE',
);

// --- Owners: planted errors -----------------------------------------------------------------------
bad(
  'owners-swapped',
  'wrong_entity',
  usd(o2.revenue, 2),
  'Who brought in the most?',
  `${o1.owner} leads with ${usd(o2.revenue, 2)}, ahead of ${o2.owner}.`,
  [OWNERS],
);
bad(
  'owners-table-wrong-count',
  'wrong_row',
  `| ${o3.won_deals} |`,
  'Top reps?',
  [
    '| Owner | Revenue | Deals |',
    '|---|---:|---:|',
    `| ${o1.owner} | ${usd(o1.revenue)} | ${o3.won_deals} |`,
    `| ${o2.owner} | ${usd(o2.revenue, 2)} | ${o2.won_deals} |`,
  ].join('\n'),
  [OWNERS],
);
bad(
  'owners-first-name-wrong',
  'wrong_entity',
  usd(o4.revenue),
  'How did Priya do?',
  `Priya closed ${o3.won_deals} deals for ${usd(o4.revenue)} in revenue.`,
  [OWNERS],
);
bad(
  'owners-total-as-rep',
  'wrong_entity',
  String(won.deals),
  'How many deals did Lucas win?',
  `Lucas Moreau won ${won.deals} deals.`,
  [STAGES, OWNERS],
);
bad(
  'owners-share-mental',
  'invented',
  pct(o1.revenue / won.total_amount + 0.02),
  'Share of the top rep?',
  `${o1.owner} contributes ${pct(o1.revenue / won.total_amount + 0.02)} of won revenue.`,
  [STAGES, OWNERS],
);
bad(
  'owners-sum-mental',
  'invented',
  `$${mil(ownerRows.reduce((s, r) => s + r.revenue, 0) + 3e6, 1)}M`,
  'Top five together?',
  `The top five reps together closed $${mil(ownerRows.reduce((s, r) => s + r.revenue, 0) + 3e6, 1)}M.`,
  [OWNERS],
);
bad(
  'owners-scale',
  'wrong_scale',
  `$${mil(o1.revenue, 1)}bn`,
  'Lucas revenue?',
  `Lucas Moreau has won $${mil(o1.revenue, 1)}bn.`,
  [OWNERS],
);
bad(
  'owners-currency',
  'wrong_currency',
  `£${mil(o3.revenue, 1)}M`,
  'Priya revenue?',
  `Priya Nair: £${mil(o3.revenue, 1)}M from ${o3.won_deals} deals.`,
  [OWNERS],
);
bad(
  'owners-coarse',
  'coarse_rounding',
  usd(Math.round(o2.revenue / 1e6) * 1e6),
  'Marcus revenue, exactly?',
  `Marcus Silva's won revenue is exactly ${usd(Math.round(o2.revenue / 1e6) * 1e6)}.`,
  [OWNERS],
);
bad(
  'owners-unit',
  'wrong_unit',
  `${o5.won_deals}%`,
  'Jack Thompson?',
  `Jack Thompson closed ${usd(o5.revenue)} with a ${o5.won_deals}% win rate.`,
  [OWNERS],
);
bad(
  'owners-echo',
  'from_question',
  '40',
  'Did Lucas win at 40 deals or so?',
  `Lucas Moreau won 40 deals, worth ${usd(o1.revenue)}.`,
  [OWNERS],
);
bad(
  'owners-words-wrong',
  'wrong_entity',
  words(o1.won_deals),
  'Marcus deals?',
  `Marcus Silva won ${words(o1.won_deals)} deals.`,
  [OWNERS],
);
bad(
  'owners-bullets-shifted',
  'wrong_row',
  `${o4.won_deals} deals`,
  'Top reps with deal counts?',
  [`- ${o1.owner}: ${o1.won_deals} deals`, `- ${o2.owner}: ${o2.won_deals} deals`, `- ${o3.owner}: ${o4.won_deals} deals`].join(
    '\n',
  ),
  [OWNERS],
);
const LUCAS_OVER_MARCUS = calc('call_lead', `pct_change(${o2.revenue}, ${o1.revenue})`, [OWNERS]);
bad(
  'owners-lead-sign',
  'wrong_sign',
  `${value(LUCAS_OVER_MARCUS).toFixed(1)}%`,
  'How does Lucas compare with Marcus?',
  `Compared with ${o2.owner}, ${o1.owner}'s won revenue is ${value(LUCAS_OVER_MARCUS).toFixed(1)}% lower.`,
  [OWNERS, LUCAS_OVER_MARCUS],
);

// --- Accounts by industry: correct -------------------------------------------------------------
const sw = industry('software');
const retail = industry('retail');
const health = industry('healthcare');
const fin = industry('financial_services');
const re = industry('real_estate');
const tele = industry('telecommunications');
ok(
  'ind-table',
  'How many accounts per industry?',
  [
    '| Industry | Accounts | Avg. employees |',
    '|---|---:|---:|',
    ...industryRows.map((r) => `| ${cap(r.industry as string)} | ${r.accounts} | ${int(r.avg_employees)} |`),
  ].join('\n'),
  [INDUSTRIES],
);
ok('ind-prose', 'How many software accounts?', `We have ${sw.accounts} accounts in software.`, [INDUSTRIES]);
ok(
  'ind-two',
  'Compare retail and healthcare.',
  `Retail has ${retail.accounts} accounts with ${int(retail.avg_employees)} employees on average; healthcare has ${health.accounts}, averaging ${int(health.avg_employees)} employees.`,
  [INDUSTRIES],
);
ok(
  'ind-revenue-bn',
  'Combined revenue of financial services accounts?',
  `The ${fin.accounts} financial services accounts have a combined annual revenue of $${bil(fin.total_revenue, 1)} billion.`,
  [INDUSTRIES],
);
ok(
  'ind-smallest',
  'Which industry has the fewest accounts?',
  `Real estate is the smallest segment with just ${words(re.accounts)} accounts (${re.accounts}).`,
  [INDUSTRIES],
);
ok(
  'ind-underscore',
  'Public sector size?',
  `public_sector: ${industry('public_sector').accounts} accounts, averaging ${fixed(industry('public_sector').avg_employees, 1)} employees.`,
  [INDUSTRIES],
);
ok(
  'ind-total-in-clause',
  'How many software accounts out of all?',
  `Software has ${sw.accounts} accounts, out of ${accounts.length} in total.`,
  [
    INDUSTRIES,
    call(
      'call_count_accounts',
      'aggregate_data',
      { objectName: 'account', aggregations: [{ function: 'count', alias: 'n' }] },
      { count: 1, rows: [{ n: accounts.length }] },
    ),
  ],
);
ok(
  'ind-tele-employees',
  'How big are telecom companies?',
  `Telecommunications accounts are large: ${tele.accounts} companies with about ${int(Math.round(tele.avg_employees / 100) * 100)} employees each on average.`,
  [INDUSTRIES],
);
ok(
  'ind-tiers',
  'How are accounts split by tier?',
  `Bronze is the biggest tier (${tier('bronze').accounts} accounts), then silver (${tier('silver').accounts}), platinum (${tier('platinum').accounts}) and gold (${tier('gold').accounts}).`,
  [TIERS],
);
ok(
  'ind-tiers-bullets',
  'Tier breakdown?',
  ['Accounts by tier:', ...tierRows.map((r) => `* ${cap(String(r.tier))} — ${r.accounts}`)].join('\n'),
  [TIERS],
);

// --- Accounts: planted errors ----------------------------------------------------------------------
bad(
  'ind-wrong-row',
  'wrong_row',
  String(retail.accounts),
  'How many software accounts?',
  `There are ${retail.accounts} accounts in software.`,
  [INDUSTRIES],
);
bad(
  'ind-table-shift',
  'wrong_row',
  `| Software | ${health.accounts} |`,
  'Accounts per industry?',
  [
    '| Industry | Accounts |',
    '|---|---:|',
    `| Software | ${health.accounts} |`,
    `| Education | ${industry('education').accounts} |`,
  ].join('\n'),
  [INDUSTRIES],
);
bad(
  'ind-employees-as-accounts',
  'wrong_unit',
  `$${int(sw.avg_employees)}`,
  'Software accounts size?',
  `Software companies average $${int(sw.avg_employees)} in size.`,
  [INDUSTRIES],
);
bad(
  'ind-revenue-scale',
  'wrong_scale',
  `$${bil(fin.total_revenue, 1)} million`,
  'Financial services revenue?',
  `Financial services accounts report $${bil(fin.total_revenue, 1)} million in combined revenue.`,
  [INDUSTRIES],
);
bad(
  'ind-coincidence-deals',
  'coincidence',
  `${o1.won_deals} accounts`,
  'How many accounts are customers in media?',
  `Media has ${o1.won_deals} accounts.`,
  [INDUSTRIES, OWNERS],
);
bad(
  'ind-avg-invented',
  'invented',
  int(retail.avg_employees * 1.1),
  'Average retail headcount?',
  `Retail companies employ ${int(retail.avg_employees * 1.1)} people on average.`,
  [INDUSTRIES],
);
bad(
  'ind-description',
  'from_description',
  '1 billion',
  'What makes an account platinum?',
  `There are ${tier('platinum').accounts} platinum accounts; on average they make 1 billion USD a year.`,
  [TIERS, DESCRIBE_ACCOUNT],
);
bad(
  'ind-tier-swap',
  'wrong_row',
  `(${tier('gold').accounts})`,
  'Tier breakdown?',
  `Bronze leads (${tier('bronze').accounts}), then silver (${tier('gold').accounts}).`,
  [TIERS],
);
bad('ind-echo', 'from_question', '25', 'Do we have 25 software accounts?', 'Yes — we have 25 accounts in software.', [
  INDUSTRIES,
]);
bad(
  'ind-words-wrong',
  'wrong_row',
  words(tele.accounts),
  'How many real estate accounts?',
  `Real estate has ${words(tele.accounts)} accounts.`,
  [INDUSTRIES],
);

// --- Metric rows with periods: correct --------------------------------------------------------------
ok(
  'q-table',
  'Won revenue by quarter in 2024?',
  [
    '| Quarter | Won revenue | Won deals |',
    '|---|---:|---:|',
    ...quarterRows.map((r, i) => `| Q${i + 1} 2024 | ${usd(r.won_revenue, 2)} | ${r.won_deals} |`),
  ].join('\n'),
  [QUARTERS],
);
ok('q-prose', 'How did Q2 2024 go?', `In Q2 2024 we won ${q2.won_deals} deals worth $${mil(q2.won_revenue, 1)}M.`, [QUARTERS]);
ok(
  'q-growth-calc',
  'How much did won revenue grow from Q1 to Q2 2024?',
  `Won revenue grew ${value(Q2_GROWTH).toFixed(1)}% from Q1 (${usd(q1.won_revenue, 2)}) to Q2 2024 (${usd(q2.won_revenue, 2)}).`,
  [QUARTERS, Q2_GROWTH],
);
ok(
  'q-decline-calc',
  'How did Q4 2024 compare to Q3?',
  `Q4 2024 revenue was down ${Math.abs(value(Q4_CHANGE)).toFixed(1)}% on Q3, falling from $${mil(q3.won_revenue, 1)}M to $${mil(q4.won_revenue, 1)}M.`,
  [QUARTERS, Q4_CHANGE],
);
ok('q-decline-minus', 'Q3 to Q4 change?', `Change Q3 → Q4 2024: −${Math.abs(value(Q4_CHANGE)).toFixed(1)}%.`, [
  QUARTERS,
  Q4_CHANGE,
]);
ok(
  'q-decline-abs',
  'By how much did revenue drop in Q4?',
  `Won revenue decreased by ${usd(Math.abs(value(Q4_DROP)))} in the fourth quarter of 2024 compared with the third.`,
  [QUARTERS, Q4_DROP],
);
ok(
  'q-month-names',
  'Best quarter of 2024?',
  `The strongest quarter was July–September 2024 (Q3), with ${usd(q3.won_revenue)} from ${q3.won_deals} won deals.`,
  [QUARTERS],
);
ok(
  'q-bullets',
  'Quarterly won deals in 2024?',
  ['Won deals per quarter (2024):', ...quarterRows.map((r, i) => `- Q${i + 1}: ${r.won_deals}`)].join('\n'),
  [QUARTERS],
);
ok(
  'q-period-date',
  'When does the best quarter start?',
  `The best quarter is the one starting ${quarterRows.reduce((a, b) => (b.won_revenue > a.won_revenue ? b : a)).period}, with ${usd(q3.won_revenue)}.`,
  [QUARTERS],
);
ok('q-year-label', 'Won deals in 2024 Q1?', `2024 started with ${q1.won_deals} won deals in Q1.`, [QUARTERS]);
ok(
  'q-win-rate',
  'Who has the best win rate?',
  `${winRows[0].owner} has the highest win rate at ${pct(winRows[0].win_rate)}, followed by ${winRows[1].owner} at ${pct(winRows[1].win_rate)}.`,
  [WIN_RATES],
);
ok(
  'q-win-rate-percent-words',
  "What is Maya Chen's win rate?",
  `Maya Chen wins about ${Math.round(winRate('Maya Chen') * 100)} percent of the deals she closes (${pct(winRate('Maya Chen'), 2)}).`,
  [WIN_RATES],
);
ok(
  'q-win-rate-ratio',
  'Win rate of Elena Petrova as a fraction?',
  `Elena Petrova's win rate is ${winRate('Elena Petrova').toFixed(2)}.`,
  [WIN_RATES],
);

// --- Metric rows: planted errors ----------------------------------------------------------------------
bad(
  'q-wrong-quarter',
  'wrong_row',
  usd(q3.won_revenue, 2),
  'Q2 2024 revenue?',
  `Won revenue in Q2 2024 was ${usd(q3.won_revenue, 2)}.`,
  [QUARTERS],
);
bad(
  'q-table-wrong-quarter',
  'wrong_row',
  `| ${q4.won_deals} |`,
  'Won deals per quarter?',
  ['| Quarter | Won deals |', '|---|---:|', `| Q1 2024 | ${q4.won_deals} |`, `| Q2 2024 | ${q2.won_deals} |`].join('\n'),
  q4.won_deals === q1.won_deals ? [] : [QUARTERS],
);
bad(
  'q-growth-sign',
  'wrong_sign',
  `${Math.abs(value(Q4_CHANGE)).toFixed(1)}%`,
  'Q3 to Q4 2024?',
  `Won revenue grew ${Math.abs(value(Q4_CHANGE)).toFixed(1)}% from Q3 to Q4 2024.`,
  [QUARTERS, Q4_CHANGE],
);
bad(
  'q-growth-sign-minus',
  'wrong_sign',
  `-${value(Q2_GROWTH).toFixed(1)}%`,
  'Q1 to Q2 growth?',
  `Q1 → Q2 2024: -${value(Q2_GROWTH).toFixed(1)}%.`,
  [QUARTERS, Q2_GROWTH],
);
bad(
  'q-growth-mental',
  'invented',
  `${(((q2.won_revenue - q1.won_revenue) / q1.won_revenue) * 100 + 4).toFixed(0)}%`,
  'Q1 to Q2 growth?',
  `Revenue rose ${(((q2.won_revenue - q1.won_revenue) / q1.won_revenue) * 100 + 4).toFixed(0)}% from Q1 to Q2 2024.`,
  [QUARTERS],
);
bad(
  'q-win-rate-scale',
  'wrong_scale',
  `${winRate('Maya Chen').toFixed(2)}%`,
  'Maya win rate?',
  `Maya Chen's win rate is ${winRate('Maya Chen').toFixed(2)}%.`,
  [WIN_RATES],
);
bad(
  'q-win-rate-wrong-owner',
  'wrong_entity',
  pct(winRate('Tom Fischer')),
  'Maya win rate?',
  `Maya Chen converts ${pct(winRate('Tom Fischer'))} of her closed deals.`,
  [WIN_RATES],
);
bad(
  'q-description',
  'from_description',
  '25%',
  'What is the overall win rate?',
  `Across owners, win rates range widely; the typical win rate is 25%, with ${winRows[0].owner} on top at ${pct(winRows[0].win_rate)}.`,
  [WIN_RATES, LIST_METRICS],
);
bad(
  'q-unit-revenue-as-percent',
  'wrong_unit',
  `${q2.won_deals}%`,
  'Q2 share?',
  `Q2 2024 had ${q2.won_deals}% of the year's wins, for ${usd(q2.won_revenue, 2)}.`,
  [QUARTERS],
);
bad(
  'q-coarse',
  'coarse_rounding',
  `$${(q2.won_revenue / 1e6).toFixed(0)},000,000`,
  'Q2 revenue?',
  `Q2 2024 won revenue: $${(q2.won_revenue / 1e6).toFixed(0)},000,000.`,
  [QUARTERS],
);
bad('q-echo', 'from_question', '$50 million', 'Did Q3 2024 beat $50 million?', `Q3 2024 came in at $50 million in won revenue.`, [
  QUARTERS,
]);

// --- Single records: correct ------------------------------------------------------------------------
ok(
  'rec-deal',
  'Tell me about our biggest won deal.',
  `The biggest won deal is **${bigDeal.name}**: ${usd(bigDeal.amount)}, closed on ${bigDeal.close_date} by ${bigDeal.owner}.`,
  [DEAL],
);
ok('rec-deal-long-date', 'When did it close?', `${bigDeal.name} closed on January 4, 2023, for $${mil(bigDeal.amount, 2)}M.`, [
  DEAL,
]);
ok(
  'rec-deal-metadata',
  'What did they buy?',
  `They bought ${bigDeal.metadata.seats} seats on a ${bigDeal.metadata.contract_months}-month contract, worth ${usd(bigDeal.amount)}.`,
  [DEAL],
);
ok(
  'rec-account',
  'Tell me about Brightline Retail.',
  `${brightline.name} (${brightline.country}, ${brightline.tier} tier) has ${brightline.employees} employees and annual revenue of $${mil(brightline.annual_revenue, 1)}M. Founded on ${brightline.founded_on}. Phone: ${brightline.phone}.`,
  [ACCOUNT],
);
ok(
  'rec-account-phone-only',
  "What's Brightline's phone number?",
  `You can reach Brightline Retail Inc. at ${brightline.phone}.`,
  [ACCOUNT],
);
ok('rec-account-founded', 'When was Brightline founded?', `Brightline Retail Inc. was founded on 9 May 1990.`, [ACCOUNT]);
ok(
  'rec-top-deals',
  'Our five largest won deals?',
  [
    'The five largest won deals:',
    ...topDeals.map((d, i) => `${i + 1}. ${d.name} — ${usd(d.amount)} (${d.owner}, ${d.close_date})`),
  ].join('\n'),
  [TOP_DEALS],
);
ok(
  'rec-top-deals-count',
  'How many won deals are there, and which is largest?',
  `There are ${wonDeals.length} won deals in total; the largest is ${topDeals[0].name} at ${usd(topDeals[0].amount)}.`,
  [TOP_DEALS],
);
ok(
  'rec-deal-id',
  'What is the id of the biggest deal?',
  `The deal ${bigDeal.name} has id \`${bigDeal.id}\` and is worth ${usd(bigDeal.amount)}.`,
  [DEAL],
);

// --- Single records: planted errors -------------------------------------------------------------------
bad(
  'rec-wrong-date',
  'invented',
  '2023-01-14',
  'When did the biggest deal close?',
  `${bigDeal.name} closed on 2023-01-14 for ${usd(bigDeal.amount)}.`,
  [DEAL],
);
bad(
  'rec-wrong-employees',
  'invented',
  '540',
  'How many people work at Brightline?',
  `Brightline Retail Inc. has 540 employees.`,
  [ACCOUNT],
);
bad(
  'rec-revenue-scale',
  'wrong_scale',
  `$${mil(brightline.annual_revenue, 1)}B`,
  'Brightline revenue?',
  `Brightline Retail Inc. reports $${mil(brightline.annual_revenue, 1)}B in annual revenue.`,
  [ACCOUNT],
);
bad(
  'rec-top-deal-owner',
  'wrong_entity',
  usd(topDeals[0].amount),
  "What was Marcus Silva's biggest deal?",
  `Marcus Silva's biggest win was worth ${usd(topDeals[0].amount)}.`,
  [TOP_DEALS],
);
bad(
  'rec-currency',
  'wrong_currency',
  `€${fixed(bigDeal.amount, 0)}`,
  'Biggest deal amount?',
  `The biggest deal was €${fixed(bigDeal.amount, 0)}.`,
  [DEAL],
);
bad(
  'rec-echo',
  'from_question',
  '10 million',
  'Was our biggest deal over 10 million?',
  `Our biggest deal, ${bigDeal.name}, was worth 10 million dollars.`,
  [DEAL],
);
bad(
  'rec-description',
  'from_description',
  '100',
  'What probability does a won deal have?',
  `${bigDeal.name} is won, so its probability is 100 as for every won deal; it is worth ${usd(bigDeal.amount)}.`,
  [{ ...DEAL, content: { ...bigDeal, probability: undefined } }, DESCRIBE_DEAL],
);

// ---------------------------------------------------------------------------------------------
// More correct answers: formats and phrasing a model uses

ok('fmt-k-lower', 'Average lost deal?', `The average lost deal was around $${Math.round(lost.avg_amount / 1000)}k.`, [STAGES]);
ok('fmt-thousand-word', 'Average lost deal?', `Roughly ${Math.round(lost.avg_amount / 1000)} thousand dollars per lost deal.`, [
  STAGES,
]);
ok('fmt-million-word-exact', 'Q1 2024 revenue?', `Q1 2024 brought in ${mil(q1.won_revenue, 2)} million USD.`, [QUARTERS]);
ok('fmt-mixed-bold', 'Q4 2024?', `**Q4 2024:** ${q4.won_deals} won deals · **${usd(q4.won_revenue)}** in won revenue`, [
  QUARTERS,
]);
ok(
  'fmt-parentheses',
  'Won vs lost?',
  `Won (${won.deals} deals, $${mil(won.total_amount)}M) outpaced lost (${lost.deals} deals, $${mil(lost.total_amount)}M).`,
  [STAGES],
);
ok(
  'fmt-semicolons',
  'Open stages?',
  `Prospecting: ${prosp.deals}; qualification: ${qual.deals}; proposal: ${prop.deals}; negotiation: ${nego.deals}.`,
  [STAGES],
);
ok(
  'fmt-headings',
  'Top two reps?',
  [
    `### ${o1.owner}`,
    `Won revenue ${usd(o1.revenue)} across ${o1.won_deals} deals.`,
    '',
    `### ${o2.owner}`,
    `Won revenue ${usd(o2.revenue, 2)} across ${o2.won_deals} deals.`,
  ].join('\n'),
  [OWNERS],
);
ok(
  'fmt-lead-in-list',
  'Won revenue of the top reps?',
  [
    'Won revenue by rep:',
    `- ${o3.owner} — ${usd(o3.revenue, 2)}`,
    `- ${o4.owner} — ${usd(o4.revenue)}`,
    `- ${o5.owner} — ${usd(o5.revenue)}`,
  ].join('\n'),
  [OWNERS],
);
ok('fmt-approx-tilde', 'Deals in proposal?', `~${Math.round(prop.deals / 10) * 10} deals are in proposal.`, [STAGES]);
ok('fmt-almost', 'Retail count?', `Almost ${Math.ceil(retail.accounts / 5) * 5} retail accounts (${retail.accounts} exactly).`, [
  INDUSTRIES,
]);
ok(
  'fmt-de-mio',
  'Gewonnener Umsatz im Q3 2024?',
  `Im Q3 2024 haben wir ${q3.won_deals} Deals mit ${de(q3.won_revenue / 1e6, 1)} Mio. USD gewonnen.`,
  [QUARTERS],
  'de-DE',
);
ok(
  'fmt-fr-percent',
  'Taux de réussite de Maya Chen ?',
  `Le taux de réussite de Maya Chen est de ${fr(winRate('Maya Chen') * 100, 1)} %.`,
  [WIN_RATES],
  'fr-FR',
);
ok('fmt-three-figures-one-line', 'Lucas?', `Lucas Moreau: ${o1.won_deals} deals | ${usd(o1.revenue)} | rank #1`, [OWNERS]);
ok(
  'fmt-question-year',
  'How many deals did we win in 2024 Q2 compared to 2024 Q1?',
  `In 2024 Q2 we won ${q2.won_deals} deals, against ${q1.won_deals} in Q1.`,
  [QUARTERS],
);
ok(
  'fmt-multiple-sources',
  'Give me a quick overview.',
  `We have ${accounts.length} accounts. ${won.deals} deals were won for ${usd(won.total_amount)}, and the top rep, ${o1.owner}, closed ${usd(o1.revenue)} of that.`,
  [
    STAGES,
    OWNERS,
    call(
      'call_count_accounts',
      'aggregate_data',
      { objectName: 'account', aggregations: [{ function: 'count', alias: 'n' }] },
      { count: 1, rows: [{ n: accounts.length }] },
    ),
  ],
);
ok('fmt-no-figures', 'Which stage has the most value?', 'Won deals hold the most value, followed by lost and then proposal.', [
  STAGES,
]);
ok(
  'fmt-filter-restated',
  'Which deals above 5 million did Lucas win?',
  `Lucas Moreau's won deals above $5,000,000 include ${topDeals[0].name} (${usd(topDeals[0].amount)}).`,
  [TOP_DEALS],
);
ok('fmt-avg-decimals', 'Average won deal to the cent?', `The average won deal is ${usd(won.avg_amount, 2)}.`, [STAGES]);
ok(
  'fmt-won-lost-ratio-calc',
  'What is our win rate by count?',
  `By count, ${pct(value(calc('call_rate', `${won.deals} / (${won.deals} + ${lost.deals})`, [STAGES])))} of closed deals were won.`,
  [STAGES, calc('call_rate', `${won.deals} / (${won.deals} + ${lost.deals})`, [STAGES])],
);
ok(
  'fmt-between-years',
  'Biggest deals between 2023 and 2025?',
  `Between 2023 and 2025, the largest won deal was ${topDeals[0].name} with ${usd(topDeals[0].amount)}.`,
  [TOP_DEALS],
);
ok('fmt-deal-names-digits', 'Name the two largest deals.', `1. ${topDeals[0].name}\n2. ${topDeals[1].name}`, [TOP_DEALS]);
ok('fmt-twelve-words', 'Deals per quarter?', `Q1 2024 had ${words(q1.won_deals)} wins and Q4 had ${words(q4.won_deals)}.`, [
  QUARTERS,
]);
ok(
  'fmt-bps',
  'Maya vs Hannah win rate?',
  `Maya Chen's win rate is ${pct(winRate('Maya Chen'), 2)}, Hannah Weiss's is ${pct(winRate('Hannah Weiss'), 2)}.`,
  [WIN_RATES],
);
ok('fmt-percent-of-ratio', 'Elena win rate?', `Elena Petrova wins ${pct(winRate('Elena Petrova'), 0)} of closed deals.`, [
  WIN_RATES,
]);
ok(
  'fmt-de-table',
  'Deals nach Phase?',
  [
    '| Phase | Deals | Volumen (USD) |',
    '|---|---:|---:|',
    `| Gewonnen (won) | ${won.deals} | ${de(won.total_amount, 2)} |`,
    `| Verloren (lost) | ${lost.deals} | ${de(lost.total_amount, 2)} |`,
  ].join('\n'),
  [STAGES],
  'de-DE',
);
ok(
  'fmt-top-n-question',
  'Top 3 industries by account count?',
  `The top 3 are retail and manufacturing (${retail.accounts} each) and healthcare/financial services (${health.accounts} each).`,
  [INDUSTRIES],
);
ok(
  'fmt-calc-per-deal',
  'Average won deal for Lucas?',
  `Lucas Moreau's average won deal is ${usd(value(calc('call_avg_lucas', `${o1.revenue} / ${o1.won_deals}`, [OWNERS])), 2)}.`,
  [OWNERS, calc('call_avg_lucas', `${o1.revenue} / ${o1.won_deals}`, [OWNERS])],
);
ok('fmt-word-million', 'Marcus revenue?', `Marcus Silva has won close to thirty-nine million dollars (${usd(o2.revenue, 2)}).`, [
  OWNERS,
]);
ok(
  'fmt-hedged-range',
  'How much do the top five reps each bring?',
  `Each of the top five reps brought in between $${mil(o5.revenue, 0)}M and $${mil(o1.revenue, 0)}M.`,
  [OWNERS],
);

// More planted errors, phrased as a model would slip.
bad('slip-won-count-plus-one', 'invented', String(won.deals + 1), 'Won deals?', `We've won ${won.deals + 1} deals so far.`, [
  STAGES,
]);
bad(
  'slip-transposed',
  'invented',
  usd(Number(String(Math.round(o5.revenue)).replace(/^(\d)(\d)/, '$2$1'))),
  'Jack Thompson revenue?',
  `Jack Thompson's won revenue is ${usd(Number(String(Math.round(o5.revenue)).replace(/^(\d)(\d)/, '$2$1')))}.`,
  [OWNERS],
);
bad(
  'slip-avg-from-sum',
  'wrong_row',
  usd(won.total_amount),
  'Average won deal?',
  `The average won deal is ${usd(won.total_amount)}.`,
  [STAGES],
);
bad(
  'slip-lost-value-as-pipeline',
  'wrong_row',
  `$${mil(lost.total_amount)}M`,
  'Value in proposal?',
  `Deals in proposal are worth $${mil(lost.total_amount)}M.`,
  [STAGES],
);
bad(
  'slip-q-mixed',
  'wrong_row',
  `${q1.won_deals} deals`,
  'Q3 2024 wins?',
  `In Q3 2024 we won ${q1.won_deals} deals for ${usd(q3.won_revenue)}.`,
  q1.won_deals === q3.won_deals ? [] : [QUARTERS],
);
bad(
  'slip-revenue-k',
  'wrong_scale',
  `$${Math.round(q2.won_revenue / 1e3) / 1000}k`,
  'Q2 revenue?',
  `Q2 2024 revenue: $${Math.round(q2.won_revenue / 1e3) / 1000}k.`,
  [QUARTERS],
);
bad('slip-percent-of-count', 'wrong_unit', `${o3.won_deals}%`, 'Priya?', `Priya Nair closed ${o3.won_deals}% of her pipeline.`, [
  OWNERS,
]);
bad(
  'slip-negative-revenue',
  'wrong_sign',
  `-${usd(q3.won_revenue)}`,
  'Q3 revenue?',
  `Q3 2024 won revenue: -${usd(q3.won_revenue)}.`,
  [QUARTERS],
);
bad(
  'slip-decrease-of-growth',
  'wrong_sign',
  `${value(Q2_GROWTH).toFixed(1)}%`,
  'Q1 to Q2?',
  `Revenue decreased by ${value(Q2_GROWTH).toFixed(1)}% between Q1 and Q2 2024.`,
  [QUARTERS, Q2_GROWTH],
);
bad(
  'slip-account-count-as-deals',
  'coincidence',
  `${industry('education').accounts} deals`,
  'How many deals did Aiko Tanaka win?',
  `Aiko Tanaka won ${industry('education').accounts} deals.`,
  [INDUSTRIES, OWNERS],
);
bad(
  'slip-yen',
  'wrong_currency',
  `¥${fixed(brightline.annual_revenue, 0)}`,
  'Brightline revenue?',
  `Brightline Retail Inc. makes ¥${fixed(brightline.annual_revenue, 0)} a year.`,
  [ACCOUNT],
);
bad(
  'slip-stage-average-as-total',
  'wrong_row',
  usd(nego.avg_amount, 2),
  'Total in negotiation?',
  `Total value in negotiation: ${usd(nego.avg_amount, 2)}.`,
  [STAGES],
);
bad(
  'slip-bn-wrong',
  'coarse_rounding',
  `$${Math.floor(won.total_amount / 1e7) * 10} million`,
  'Total won?',
  `Total won value: $${Math.floor(won.total_amount / 1e7) * 10} million.`,
  [STAGES],
);
bad(
  'slip-share-of-wrong-base',
  'invented',
  pct(o1.revenue / (won.total_amount + lost.total_amount)),
  'Lucas share?',
  `Lucas Moreau brought ${pct(o1.revenue / (won.total_amount + lost.total_amount))} of won revenue.`,
  [STAGES, OWNERS],
);
bad(
  'slip-fr-wrong',
  'wrong_row',
  `${fr(prosp.total_amount, 2)} USD`,
  'Valeur en proposition ?',
  `Les affaires en proposition valent ${fr(prosp.total_amount, 2)} USD.`,
  [STAGES],
  'fr-FR',
);
bad('slip-date-other-deal', 'invented', 'March 3, 2023', 'When did the biggest deal close?', `It closed on March 3, 2023.`, [
  DEAL,
]);
bad(
  'slip-echo-threshold',
  'from_question',
  '8 million',
  'Which rep had a deal of 8 million or more?',
  "Jack Thompson's biggest win was 8 million dollars.",
  [OWNERS],
);
bad(
  'slip-description-tier',
  'from_description',
  '100 million',
  'Gold accounts revenue?',
  `The ${tier('gold').accounts} gold accounts each earn 100 million USD.`,
  [TIERS, DESCRIBE_ACCOUNT],
);
bad(
  'slip-winrate-ratio-as-count',
  'wrong_scale',
  `${(winRate('Sofia Rossi') * 10000).toFixed(0)}%`,
  'Sofia win rate?',
  `Sofia Rossi has a ${(winRate('Sofia Rossi') * 10000).toFixed(0)}% win rate.`,
  [WIN_RATES],
);

// ---------------------------------------------------------------------------------------------
// A second round, written against the first version of the checker: phrasings it had not seen

const probabilityRows = [...groupBy(deals, (d) => d.stage as string)].map(([s, rows]) => ({
  stage: s,
  avg_probability: avg(rows, 'probability'),
}));
const PROBABILITY = call(
  'call_probability',
  'aggregate_data',
  { objectName: 'deal', groupBy: ['stage'], aggregations: [{ function: 'avg', field: 'probability', alias: 'avg_probability' }] },
  { count: probabilityRows.length, rows: probabilityRows },
);
const probability = (name: string) => probabilityRows.find((r) => r.stage === name)!.avg_probability;
const MARCUS_AVG = calc('call_marcus_avg', `${o2.revenue} / ${o2.won_deals}`, [OWNERS]);
const sofia = winRate('Sofia Rossi');
const maya = winRate('Maya Chen');
const hannah = winRate('Hannah Weiss');

ok(
  'r2-leaderboard-gap',
  'How far ahead is the top rep?',
  `${o1.owner} tops the leaderboard at $${mil(o1.revenue)}M, roughly $${mil(value(LUCAS_VS_MARCUS))}M ahead of ${o2.owner}.`,
  [OWNERS, LUCAS_VS_MARCUS],
);
ok(
  'r2-peak-and-drop',
  'How did won revenue develop over 2024?',
  `Won revenue peaked in Q3 2024 ($${mil(q3.won_revenue)}M) before dropping to $${mil(q4.won_revenue)}M in Q4.`,
  [QUARTERS],
);
ok(
  'r2-drop-percent-after',
  'What happened at the end of 2024?',
  `Revenue fell from $${mil(q3.won_revenue)}M in Q3 to $${mil(q4.won_revenue)}M in Q4 2024 — a ${Math.abs(value(Q4_CHANGE)).toFixed(1)}% drop.`,
  [QUARTERS, Q4_CHANGE],
);
ok('r2-sofia-rate', 'Who converts best?', `Sofia Rossi converts the highest share of her closed deals: ${pct(sofia)}.`, [
  WIN_RATES,
]);
ok(
  'r2-two-owners-rates',
  'Compare Hannah and Maya.',
  `Hannah Weiss and Maya Chen have similar win rates: ${pct(hannah)} and ${pct(maya)}.`,
  [WIN_RATES],
);
ok(
  'r2-share-about',
  "How much of won revenue is Lucas's?",
  `The top rep's revenue (${o1.owner}, ${usd(o1.revenue)}) is about ${Math.round(value(TOP_SHARE) * 100)}% of all won revenue.`,
  [STAGES, OWNERS, TOP_SHARE],
);
ok(
  'r2-account-profile',
  'Who is Brightline?',
  `Brightline Retail Inc. is a ${brightline.tier}-tier ${brightline.industry} company in ${brightline.country} with ${brightline.employees} staff, founded in 1990.`,
  [ACCOUNT],
);
ok(
  'r2-quarter-span',
  'How steady were wins in 2024?',
  `In 2024, quarterly wins went from ${q1.won_deals} in Q1 to ${q4.won_deals} in Q4.`,
  [QUARTERS],
);
ok(
  'r2-every-quarter-over',
  'Did we win at least 40 deals every quarter in 2024?',
  `Yes. Every quarter of 2024 brought more than 40 won deals; the weakest was Q4 with ${q4.won_deals}.`,
  [QUARTERS],
);
ok(
  'r2-more-than-double',
  'Q2 vs Q1 2024?',
  `Q2 2024 revenue (${usd(q2.won_revenue)}) was more than double Q1's (${usd(q1.won_revenue)}).`,
  [QUARTERS],
);
ok(
  'r2-de-symbol-after',
  'Bester Verkäufer?',
  `${o1.owner}: ${de(o1.revenue)} $ Umsatz aus ${o1.won_deals} Deals.`,
  [OWNERS],
  'de-DE',
);
ok(
  'r2-probability',
  'What is the average probability of deals in negotiation?',
  `Deals in negotiation carry an average probability of ${Math.round(probability('negotiation'))}%, proposals ${Math.round(probability('proposal'))}%.`,
  [PROBABILITY],
);
ok(
  'r2-marcus-avg',
  'Who has the biggest average deal among the top five?',
  `${o2.owner} has the highest average deal size among the top five at $${(value(MARCUS_AVG) / 1e6).toFixed(2)}M (${o2.won_deals} deals).`,
  [OWNERS, MARCUS_AVG],
);
ok(
  'r2-tie',
  'Which industries have the most accounts?',
  `Retail and manufacturing tie for first place with ${retail.accounts} accounts each.`,
  [INDUSTRIES],
);
ok(
  'r2-as-of',
  'How many deals have we won so far?',
  `As of 2025-07-01, ${won.deals} deals are marked as won, worth ${usd(won.total_amount)} in total.`,
  [STAGES, TOP_DEALS],
);
ok(
  'r2-more-wins',
  'Did we win more than we lost?',
  `Yes: that's ${value(WON_MINUS_LOST)} more wins than losses (${won.deals} vs ${lost.deals}).`,
  [STAGES, WON_MINUS_LOST],
);
ok(
  'r2-intro-table-outro',
  'Give me a summary of the sales team.',
  [
    `Here's how the top of the sales team looks (won deals only):`,
    '',
    '| Rep | Won revenue | Deals |',
    '|:--|--:|--:|',
    ...ownerRows.slice(0, 3).map((r) => `| ${r.owner} | $${mil(r.revenue, 2)}M | ${r.won_deals} |`),
    '',
    `**Takeaways**`,
    `- ${first(String(o1.owner))} leads by a wide margin.`,
    `- ${first(String(o2.owner))} wins fewer but much larger deals (${o2.won_deals} deals for $${mil(o2.revenue)}M).`,
    '',
    'Let me know if you want this broken down by quarter.',
  ].join('\n'),
  [OWNERS],
);

bad(
  'r2-leaderboard-gap-wrong',
  'invented',
  '$18M',
  'How far ahead is the top rep?',
  `${o1.owner} tops the leaderboard at $${mil(o1.revenue)}M, roughly $18M ahead of ${o2.owner}.`,
  [OWNERS, LUCAS_VS_MARCUS],
);
bad(
  'r2-peak-and-drop-wrong',
  'wrong_row',
  `$${mil(q2.won_revenue)}M`,
  'How did won revenue develop over 2024?',
  `Won revenue peaked in Q3 2024 ($${mil(q3.won_revenue)}M) before dropping to $${mil(q2.won_revenue)}M in Q4.`,
  [QUARTERS],
);
bad(
  'r2-sofia-wrong',
  'wrong_entity',
  pct(maya),
  'Who converts best?',
  `Sofia Rossi converts the highest share of her closed deals: ${pct(maya)}.`,
  [WIN_RATES],
);
bad(
  'r2-two-owners-wrong',
  'wrong_entity',
  pct(sofia),
  'Compare Hannah and Maya.',
  `Hannah Weiss and Maya Chen have similar win rates: ${pct(hannah)} and ${pct(sofia)}.`,
  [WIN_RATES],
);
bad(
  'r2-founded-wrong',
  'invented',
  '1991',
  'When was Brightline founded?',
  `Brightline Retail Inc. was founded in 1991 and has ${brightline.employees} staff.`,
  [ACCOUNT],
);
bad(
  'r2-average-as-other-stage',
  'wrong_row',
  `$${Math.round(nego.avg_amount / 1000)}K`,
  'Average won deal?',
  `The average won deal is $${Math.round(nego.avg_amount / 1000)}K.`,
  [STAGES],
);
bad(
  'r2-marcus-avg-wrong',
  'invented',
  '$1.49M',
  'Biggest average deal?',
  `${o2.owner} has the highest average deal size among the top five at $1.49M (${o2.won_deals} deals).`,
  [OWNERS, MARCUS_AVG],
);
bad(
  'r2-year-sum-mental',
  'invented',
  String(quarterRows.reduce((s, r) => s + r.won_deals, 0)),
  'How many deals did we win in 2024?',
  `In 2024 we won ${quarterRows.reduce((s, r) => s + r.won_deals, 0)} deals.`,
  [QUARTERS],
);
bad(
  'r2-drop-level-wrong',
  'invented',
  `$${mil(q4.won_revenue + 2e6)}M`,
  'End of 2024?',
  `Revenue fell ${Math.abs(value(Q4_CHANGE)).toFixed(1)}% from Q3 to Q4 2024, to $${mil(q4.won_revenue + 2e6)}M.`,
  [QUARTERS, Q4_CHANGE],
);
bad(
  'r2-cad',
  'wrong_currency',
  `CAD ${mil(brightline.annual_revenue)}M`,
  'Brightline revenue?',
  `Brightline Retail Inc. (Canada) reports annual revenue of CAD ${mil(brightline.annual_revenue)}M.`,
  [ACCOUNT],
);
bad(
  'r2-split-mental',
  'invented',
  `${Math.round((won.deals / (won.deals + lost.deals)) * 100)}%`,
  'What share of closed deals did we win?',
  `We won ${won.deals} and lost ${lost.deals}, a ${Math.round((won.deals / (won.deals + lost.deals)) * 100)}% win rate.`,
  [STAGES],
);
bad(
  'r2-probability-wrong-stage',
  'wrong_row',
  `${Math.round(probability('proposal'))}%`,
  'Negotiation probability?',
  `Deals in negotiation carry an average probability of ${Math.round(probability('proposal'))}%.`,
  [PROBABILITY],
);
bad(
  'r2-table-rep-swap',
  'wrong_entity',
  `$${mil(o3.revenue, 2)}M | ${o2.won_deals}`,
  'Sales team summary?',
  [
    '| Rep | Won revenue | Deals |',
    '|:--|--:|--:|',
    `| ${o1.owner} | $${mil(o1.revenue, 2)}M | ${o1.won_deals} |`,
    `| ${o2.owner} | $${mil(o3.revenue, 2)}M | ${o2.won_deals} |`,
  ].join('\n'),
  [OWNERS],
);

// ---------------------------------------------------------------------------------------------
// A third round, written after the checker was done and kept as written; its rates are printed apart. It
// found two misses, which the checker's fixes answer (18/20 planted and 0/20 correct flagged before them).

const daniel = winRate('Daniel Okafor');
const elena = winRate('Elena Petrova');
ok(
  'r3-bold-lines',
  'Won vs lost?',
  `Sure! Here's what I found:\n\n**Won deals:** ${won.deals}\n**Lost deals:** ${lost.deals}\n\nSo you won slightly more deals than you lost.`,
  [STAGES],
);
ok(
  'r3-top-performer',
  'Who is the top performer?',
  `Looking at the data, ${o1.owner} is your top performer — he closed ${o1.won_deals} deals worth a combined ${usd(o1.revenue)}.`,
  [OWNERS],
);
ok(
  'r3-retail-tie',
  'How big is retail?',
  `The retail industry accounts for ${retail.accounts} of your accounts, tied with manufacturing.`,
  [INDUSTRIES],
);
ok(
  'r3-quarter-lines',
  'First half of 2024?',
  `Q1 2024: $${mil(q1.won_revenue, 2)}M (${q1.won_deals} deals)\nQ2 2024: $${mil(q2.won_revenue, 2)}M (${q2.won_deals} deals)`,
  [QUARTERS],
);
ok('r3-went-up', 'Growth Q1 to Q2 2024?', `Won revenue went up by ${value(Q2_GROWTH).toFixed(1)}% from Q1 to Q2 2024.`, [
  QUARTERS,
  Q2_GROWTH,
]);
ok(
  'r3-biggest-ever',
  'Biggest deal ever?',
  `Your biggest deal ever is the Ironclad Bank K.K. expansion from January 2023, at $${mil(bigDeal.amount, 2)} million.`,
  [DEAL],
);
ok(
  'r3-neck-and-neck',
  'Priya vs Lucas?',
  `${o3.owner} (${o3.won_deals} won deals) and ${o1.owner} (${o1.won_deals}) are neck and neck on volume.`,
  [OWNERS],
);
ok(
  'r3-dashes',
  'Brightline?',
  `Brightline Retail Inc. — ${brightline.country} — ${brightline.employees} employees — annual revenue ${usd(brightline.annual_revenue)}.`,
  [ACCOUNT],
);
ok(
  'r3-opportunities',
  'Negotiation?',
  `Negotiation-stage deals total $${mil(nego.total_amount)}M across ${nego.deals} opportunities.`,
  [STAGES],
);
ok('r3-roughly-avg', 'Average won deal?', `The average won deal size is roughly $${Math.round(won.avg_amount / 1000)}K.`, [
  STAGES,
]);
ok('r3-hannah', 'Hannah?', `Hannah Weiss: ${pct(hannah, 2)} win rate.`, [WIN_RATES]);
ok(
  'r3-best-worst',
  'Best and worst win rate?',
  `Sofia Rossi's win rate (${pct(sofia)}) is the best on the team; Elena Petrova's (${pct(elena, 0)}) is the lowest.`,
  [WIN_RATES],
);
ok('r3-bronze', 'Largest tier?', `There are ${tier('bronze').accounts} bronze-tier accounts, making it the largest tier.`, [
  TIERS,
]);
ok('r3-fell-to', 'Q4 2024?', `In the fourth quarter of 2024, won deals fell to ${q4.won_deals}.`, [QUARTERS]);
ok(
  'r3-proposal-about',
  'Proposal?',
  `Deals in proposal: ${prop.deals} (worth about $${Math.round(prop.total_amount / 1e6)} million).`,
  [STAGES],
);
ok('r3-tom', 'Tom?', `${o4.owner} generated $${mil(o4.revenue, 2)}M from ${o4.won_deals} wins.`, [OWNERS]);
ok(
  'r3-de-marcus',
  'Marcus?',
  `Marcus Silva hat ${o2.won_deals} Deals mit insgesamt ${de(o2.revenue, 2)} USD gewonnen.`,
  [OWNERS],
  'de-DE',
);
ok('r3-two-stages', 'Early stages?', `Prospecting holds ${prosp.deals} deals, qualification ${qual.deals}.`, [STAGES]);
ok('r3-rounds-out', 'Fifth place?', `${o5.owner} rounds out the top five with ${usd(o5.revenue)} in won revenue.`, [OWNERS]);
ok('r3-media', 'How many media accounts?', `You have ${industry('media').accounts} accounts in media.`, [INDUSTRIES]);

bad(
  'r3-bold-lines-wrong',
  'wrong_row',
  `**Lost deals:** ${won.deals}`,
  'Won vs lost?',
  `Sure! Here's what I found:\n\n**Won deals:** ${won.deals}\n**Lost deals:** ${won.deals}\n\nSo it's a tie.`,
  [STAGES],
);
bad(
  'r3-top-performer-wrong',
  'wrong_entity',
  `closed ${o3.won_deals} deals`,
  'Who is the top performer?',
  `Looking at the data, ${o1.owner} is your top performer — he closed ${o3.won_deals} deals worth a combined ${usd(o1.revenue)}.`,
  [OWNERS],
);
bad(
  'r3-retail-wrong',
  'wrong_row',
  `for ${health.accounts} of`,
  'How big is retail?',
  `The retail industry accounts for ${health.accounts} of your accounts.`,
  [INDUSTRIES],
);
bad(
  'r3-quarter-lines-wrong',
  'wrong_row',
  `Q2 2024: $${mil(q1.won_revenue, 2)}M`,
  'First half of 2024?',
  `Q1 2024: $${mil(q1.won_revenue, 2)}M (${q1.won_deals} deals)\nQ2 2024: $${mil(q1.won_revenue, 2)}M (${q2.won_deals} deals)`,
  [QUARTERS],
);
bad(
  'r3-went-down',
  'wrong_sign',
  `${value(Q2_GROWTH).toFixed(1)}%`,
  'Growth Q1 to Q2 2024?',
  `Won revenue went down by ${value(Q2_GROWTH).toFixed(1)}% from Q1 to Q2 2024.`,
  [QUARTERS, Q2_GROWTH],
);
bad(
  'r3-biggest-billion',
  'wrong_scale',
  `$${mil(bigDeal.amount, 2)} billion`,
  'Biggest deal ever?',
  `Your biggest deal ever is the Ironclad Bank K.K. expansion from January 2023, at $${mil(bigDeal.amount, 2)} billion.`,
  [DEAL],
);
bad(
  'r3-priya-invented',
  'invented',
  '(38 won deals)',
  'Priya vs Lucas?',
  `${o3.owner} (38 won deals) and ${o1.owner} (${o1.won_deals}) are far apart on volume.`,
  [OWNERS],
);
bad(
  'r3-euro',
  'wrong_currency',
  `€${fixed(brightline.annual_revenue, 0)}`,
  'Brightline?',
  `Brightline Retail Inc. — ${brightline.country} — ${brightline.employees} employees — annual revenue €${fixed(brightline.annual_revenue, 0)}.`,
  [ACCOUNT],
);
bad(
  'r3-opportunities-qual',
  'wrong_row',
  `$${mil(qual.total_amount)}M`,
  'Negotiation?',
  `Negotiation-stage deals total $${mil(qual.total_amount)}M across ${nego.deals} opportunities.`,
  [STAGES],
);
bad(
  'r3-avg-nego',
  'wrong_row',
  `$${Math.round(nego.avg_amount / 1000)}K`,
  'Average won deal?',
  `The average won deal size is roughly $${Math.round(nego.avg_amount / 1000)}K.`,
  [STAGES],
);
bad('r3-hannah-maya', 'wrong_entity', pct(maya, 2), 'Hannah?', `Hannah Weiss: ${pct(maya, 2)} win rate.`, [WIN_RATES]);
bad(
  'r3-elena-daniel',
  'wrong_entity',
  pct(daniel),
  'Lowest win rate?',
  `Elena Petrova's win rate (${pct(daniel)}) is the lowest on the team.`,
  [WIN_RATES],
);
bad(
  'r3-gold-bronze',
  'wrong_row',
  String(tier('bronze').accounts),
  'Gold tier?',
  `There are ${tier('bronze').accounts} gold-tier accounts.`,
  [TIERS],
);
bad(
  'r3-fell-to-wrong',
  'wrong_row',
  `fell to ${q2.won_deals}`,
  'Q4 2024?',
  `In the fourth quarter of 2024, won deals fell to ${q2.won_deals}.`,
  [QUARTERS],
);
bad(
  'r3-proposal-prosp',
  'wrong_row',
  `about $${Math.round(prosp.total_amount / 1e6)} million`,
  'Proposal?',
  `Deals in proposal: ${prop.deals} (worth about $${Math.round(prosp.total_amount / 1e6)} million).`,
  [STAGES],
);
bad(
  'r3-tom-rate',
  'invented',
  `${pct(winRate('Tom Fischer'))}`,
  'Tom?',
  `${o4.owner} generated $${mil(o4.revenue, 2)}M from ${o4.won_deals} wins, a ${pct(winRate('Tom Fischer'))} win rate.`,
  [OWNERS],
);
bad(
  'r3-de-marcus-priya',
  'wrong_entity',
  de(o3.revenue, 2),
  'Marcus?',
  `Marcus Silva hat ${o2.won_deals} Deals mit insgesamt ${de(o3.revenue, 2)} USD gewonnen.`,
  [OWNERS],
  'de-DE',
);
bad('r3-prospecting-qual', 'wrong_row', `holds ${qual.deals}`, 'Prospecting?', `Prospecting holds ${qual.deals} deals.`, [
  STAGES,
]);
bad(
  'r3-jack-count',
  'invented',
  'across 23 deals',
  'Fifth place?',
  `${o5.owner} rounds out the top five with ${usd(o5.revenue)} in won revenue across 23 deals.`,
  [OWNERS],
);
bad(
  'r3-media-echo',
  'from_question',
  'about 60',
  'Is it true we have about 60 media accounts?',
  'Yes, there are about 60 media accounts.',
  [INDUSTRIES],
);

/** The corpus: correct and planted answers, each with the data results of its turn. */
export function groundingCorpus(): CorpusCase[] {
  return cases.filter((c) => c.sources.length > 0);
}

/** One corpus answer as grounding read it. */
export interface CorpusResult {
  c: CorpusCase;
  grounding: Grounding;
  /** For an answer with a planted error: whether grounding reported that figure unsupported. */
  caught?: boolean;
}

/** The corpus grounded, with its two rates: planted errors flagged, correct answers flagged. */
export interface CorpusScore {
  results: CorpusResult[];
  planted: CorpusResult[];
  correct: CorpusResult[];
  missed: CorpusResult[];
  falseAlarms: CorpusResult[];
  detection: number;
  falseAlarmRate: number;
}

/** Grounds every answer of the corpus as a chat turn would (its question, its locale) and scores it. */
export function scoreCorpus(corpus: readonly CorpusCase[] = groundingCorpus()): CorpusScore {
  const results: CorpusResult[] = corpus.map((c) => {
    const grounding = groundAnswer(c.answer, c.sources, { question: c.question, locale: c.locale });
    return { c, grounding, ...(c.planted ? { caught: plantedFlagged(c.planted.figure, grounding) } : {}) };
  });
  const planted = results.filter((r) => r.c.planted);
  const correct = results.filter((r) => !r.c.planted);
  const missed = planted.filter((r) => !r.caught);
  const falseAlarms = correct.filter((r) => r.grounding.unsupported.length > 0);
  return {
    results,
    planted,
    correct,
    missed,
    falseAlarms,
    detection: (planted.length - missed.length) / planted.length,
    falseAlarmRate: falseAlarms.length / correct.length,
  };
}

/** The planted figure is reported unsupported: an unsupported figure whose text is the planted one or lies inside it. */
function plantedFlagged(planted: string, grounding: Grounding): boolean {
  return grounding.unsupported.some((u) => planted.includes(u.text) || u.text.includes(planted));
}
