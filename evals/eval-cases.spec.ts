import { boundSql, expectedFrom, grade, labelForms, type EvalCase, type Expected, type Observed } from './eval-cases';
import { openingMessage, wilsonInterval } from './eval-runner';
import type { Grounding } from '../src/runtime/grounding';

const byStage: EvalCase = {
  id: 'by-stage',
  kind: 'group_by',
  question: 'How many deals are there in each stage?',
  expects: 'figure',
  sql: 'select stage, count(*) from data.deal group by stage',
  terms: ['stage'],
};
const stages = expectedFrom(byStage, [
  { stage: 'won', count: '451' },
  { stage: 'lost', count: '419' },
  { stage: 'proposal', count: '315' },
]);

const observed = (answer: string, more: Partial<Observed> = {}): Observed => ({
  answer,
  grounding: null,
  toolCalls: 1,
  asked: [openingMessage('How many deals are there in each stage?', '2025-07-01')],
  ...more,
});
const reasonsFor = (evalCase: EvalCase, expected: Expected | null, answer: string, more: Partial<Observed> = {}) =>
  grade(evalCase, expected, observed(answer, more)).reasons;

describe('The eval grader', () => {
  describe('on a figure case, takes a figure only next to its label', () => {
    it.each([
      ['bullets', '- **won**: 451\n- lost: 419\n- proposal: 315'],
      ['a table', '| stage | deals |\n|---|---|\n| won | 451 |\n| lost | 419 |\n| proposal | 315 |'],
      ['sentences', 'We won 451 deals. 419 were lost. The proposal stage holds 315.'],
      ['clauses of one sentence', 'Of all deals, 451 were won and 419 were lost; 315 are in proposal.'],
      ['one sentence, labels after figures', '451 deals were won, 419 lost and 315 are at proposal.'],
    ])('in %s', (_, answer) => {
      expect(reasonsFor(byStage, stages, answer)).toEqual([]);
    });

    it.each([
      ['swapped in bullets', '- won: 419\n- lost: 451\n- proposal: 315'],
      ['a row off in a table', '| stage | deals |\n|---|---|\n| won | 419 |\n| lost | 315 |\n| proposal | 451 |'],
      ['listed apart from the labels', 'Stages: won, lost, proposal. Counts: 451, 419, 315.'],
    ])('and fails figures %s', (_, answer) => {
      const graded = grade(byStage, stages, observed(answer));
      expect(graded.passed).toBe(false);
      expect(graded.reasons.join('; ')).toContain('not next to their label');
    });

    it('reads a wide table by its column headers', () => {
      const evalCase: EvalCase = { ...byStage, terms: ['period'], period: 'quarter' };
      const expected = expectedFrom(evalCase, [
        { period: '2025-01-01', sum: '31644928.50' },
        { period: '2025-04-01', sum: '37348065.00' },
      ]);
      expect(
        reasonsFor(evalCase, expected, '| | Q1 2025 | Q2 2025 |\n|---|---|---|\n| won revenue | $31.64M | $37.35M |'),
      ).toEqual([]);
      expect(reasonsFor(evalCase, expected, 'For Q1 2025, won revenue was $31.6M; for Q2 2025, $37.3M (+18%).')).toEqual([]);
      expect(
        reasonsFor(evalCase, expected, '| | Q1 2025 | Q2 2025 |\n|---|---|---|\n| won revenue | $37.35M | $31.64M |'),
      ).toEqual(['not next to their label: 31644928.5, 37348065']);
    });

    it('keeps a name with dots and commas in one piece', () => {
      const evalCase: EvalCase = { ...byStage, terms: ['name'] };
      const expected = expectedFrom(evalCase, [
        { name: 'Riverstone Capital Co., Ltd.', count: 12 },
        { name: 'Summit Analytics N.V.', count: 9 },
      ]);
      expect(reasonsFor(evalCase, expected, 'Riverstone Capital Co., Ltd. has 12 deals. Summit Analytics N.V. has 9.')).toEqual(
        [],
      );
      expect(reasonsFor(evalCase, expected, 'Riverstone Capital Co., Ltd. has 9 deals. Summit Analytics N.V. has 12.')).toEqual([
        'not next to their label: 12, 9',
      ]);
    });

    it('accepts tied rows stated together', () => {
      const evalCase: EvalCase = { ...byStage, terms: ['industry'] };
      const expected = expectedFrom(evalCase, [
        { industry: 'retail', count: 23 },
        { industry: 'manufacturing', count: 23 },
      ]);
      expect(reasonsFor(evalCase, expected, 'Retail and manufacturing tie with 23 accounts each.')).toEqual([]);
    });
  });

  it('fails an answer that states more than the allowed numbers beyond the expected ones', () => {
    const dump = '- won: 451 deals, $344.3M\n- lost: 419 deals, $258.3M\n- proposal: 315 deals, $185.2M\n- 200 accounts';
    expect(reasonsFor(byStage, stages, dump)).toEqual(['4 numbers beyond the expected figures (at most 3)']);
    expect(reasonsFor({ ...byStage, extraNumbers: 4 }, stages, dump)).toEqual([]);
    // Labels, list markers and the user's own numbers are not numbers beyond.
    const lookup: EvalCase = { ...byStage, terms: undefined, question: 'How many deals are above 100000?' };
    const expected = expectedFrom(lookup, [{ count: 806 }]);
    const asked = [openingMessage(lookup.question, '2025-07-01')];
    expect(reasonsFor(lookup, expected, '1. 806 deals have an amount above 100,000 (as of 2025-07-01).', { asked })).toEqual([]);
  });

  it('matches a ratio stated as a percentage and a fall stated by its size', () => {
    const rate: EvalCase = { ...byStage, terms: undefined };
    expect(reasonsFor(rate, expectedFrom(rate, [{ win_rate: '0.5183908045977011' }]), 'The win rate is 51.8%.')).toEqual([]);
    expect(reasonsFor(rate, expectedFrom(rate, [{ change: -0.1802 }]), 'Won revenue fell by 18.0%.')).toEqual([]);
    expect(reasonsFor(rate, expectedFrom(rate, [{ win_rate: 0.5184 }]), 'The win rate is 50%.')).toEqual([
      'missing figures: 0.5184',
    ]);
  });

  it('fails unsupported numbers, tool calls over budget, a failed chat and a case without figures', () => {
    const grounding: Grounding = { numbers: 1, supported: [], unsupported: [{ text: '451', reason: 'no_such_value' }] };
    expect(
      reasonsFor(byStage, stages, '- won: 451\n- lost: 419\n- proposal: 315', {
        grounding,
        toolCalls: 7,
        failure: 'chat ended error',
      }),
    ).toEqual(['chat ended error', '7 tool calls, budget 6', 'unsupported numbers: 451']);
    // A follow-up gets the budget of each message it sends.
    expect(
      reasonsFor({ ...byStage, followUps: ['And lost?'] }, stages, '- won: 451\n- lost: 419\n- proposal: 315', { toolCalls: 12 }),
    ).toEqual([]);
    expect(reasonsFor(byStage, expectedFrom(byStage, []), 'Nothing.')).toEqual(['the case SQL gave nothing to check']);
  });

  describe('on refusal and clarification cases', () => {
    const refusal: EvalCase = { id: 'nps', kind: 'refusal', question: 'What is our NPS?', expects: 'refusal' };
    const clarification: EvalCase = {
      id: 'value',
      kind: 'clarification',
      question: "What's the total value?",
      expects: 'clarification',
      options: ['won revenue', 'pipeline'],
    };

    it('passes a refusal without figures and fails one that adds figures from the data', () => {
      expect(reasonsFor(refusal, null, 'I cannot answer that: the CRM does not track NPS.')).toEqual([]);
      expect(reasonsFor(refusal, null, 'The data does not contain NPS, but we have 200 accounts and 451 won deals.')).toEqual([
        'states figures: 200, 451',
      ]);
      expect(reasonsFor(refusal, null, 'NPS is 42.')).toEqual(['states figures: 42', 'does not say the data cannot answer']);
    });

    it('passes a question back only when it names one of the options, and years are no figures', () => {
      expect(reasonsFor(clarification, null, 'Do you mean won revenue or pipeline value, in 2024 or 2025?')).toEqual([]);
      expect(reasonsFor(clarification, null, 'Could you be more specific?')).toEqual(['names none of: won revenue, pipeline']);
      expect(reasonsFor(clarification, null, 'Pipeline value is $617.4M. Did you mean that?')).toEqual([
        'states figures: $617.4M',
      ]);
      expect(reasonsFor(clarification, null, 'It is the won revenue.')).toEqual(['asks no clarifying question']);
    });
  });

  it('names dates of a period grain as periods', () => {
    expect(labelForms('2025-04-01', 'quarter')).toEqual(['Q2 2025', '2025-Q2', '2025 Q2', 'Q2']);
    expect(labelForms('2025-05-01', 'month')).toEqual(['May 2025', '2025-05', 'May']);
    expect(labelForms(new Date(2024, 0, 1), 'year')).toEqual(['2024']);
    expect(labelForms('won|closed won')).toEqual(['won', 'closed won']);
    expect(labelForms(null)).toEqual([]);
  });

  it('binds :today and :subject as parameters, leaving casts alone', () => {
    expect(
      boundSql("select :today::date, x from t where owner = :subject and d < :today::date and s = 'a'", {
        today: '2025-07-01',
        subject: 'Maya',
      }),
    ).toEqual({
      text: "select $1::date, x from t where owner = $2 and d < $1::date and s = 'a'",
      values: ['2025-07-01', 'Maya'],
    });
  });

  it('gives the 95% Wilson interval of an accuracy', () => {
    const rounded = (pair: [number, number]) => pair.map((x) => Math.round(x * 10000) / 10000);
    expect(rounded(wilsonInterval(0, 10))).toEqual([0, 0.2775]);
    expect(rounded(wilsonInterval(10, 10))).toEqual([0.7225, 1]);
    expect(rounded(wilsonInterval(5, 10))).toEqual([0.2366, 0.7634]);
    expect(wilsonInterval(0, 0)).toEqual([0, 1]);
  });
});
