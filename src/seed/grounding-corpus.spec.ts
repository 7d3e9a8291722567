import { groundingCorpus, scoreCorpus, type CorpusCase } from './grounding.corpus';

/**
 * The adversarial corpus: answers as a model writes them over results of the sample data, half
 * with one planted error each, half fully correct. Grounding must flag the planted errors and leave
 * the correct answers alone. `npm run bench:grounding` writes the same rates to BENCHMARKS.md.
 */
describe('grounding on the adversarial corpus', () => {
  const corpus = groundingCorpus();
  const { planted, correct, missed, falseAlarms, detection, falseAlarmRate } = scoreCorpus(corpus);

  beforeAll(() => {
    const lines = [
      `grounding corpus: ${corpus.length} answers (${planted.length} with a planted error, ${correct.length} correct)`,
      `planted errors flagged: ${planted.length - missed.length}/${planted.length} = ${(detection * 100).toFixed(1)}%`,
      `correct answers flagged: ${falseAlarms.length}/${correct.length} = ${(falseAlarmRate * 100).toFixed(1)}%`,
      ...(() => {
        // The third round was written after the checker was done, without looking at it; it found two misses
        // (a "combined" read as a whole, a quarter hidden by its year), fixed since: 18/20 and 0/20 before.
        const held = (r: { c: CorpusCase }) => r.c.id.startsWith('r3-');
        const heldPlanted = planted.filter(held);
        const heldCorrect = correct.filter(held);
        return [
          `third round (written last): planted flagged ${heldPlanted.filter((r) => r.caught).length}/${heldPlanted.length}, ` +
            `correct flagged ${heldCorrect.filter((r) => r.grounding.unsupported.length > 0).length}/${heldCorrect.length}`,
        ];
      })(),
      ...missed.map((r) => `  missed ${r.c.id} (${r.c.planted!.kind} "${r.c.planted!.figure}"): ${JSON.stringify(r.grounding)}`),
      ...falseAlarms.map((r) => `  flagged correct ${r.c.id}: ${JSON.stringify(r.grounding.unsupported)}`),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  });

  it('holds at least 150 answers, half of them with a planted error of every kind', () => {
    expect(corpus.length).toBeGreaterThanOrEqual(150);
    expect(Math.abs(planted.length - correct.length)).toBeLessThanOrEqual(corpus.length * 0.1);
    const kinds = new Set(planted.map((r) => r.c.planted!.kind));
    for (const kind of [
      'wrong_row',
      'wrong_entity',
      'wrong_sign',
      'wrong_unit',
      'wrong_currency',
      'wrong_scale',
      'coarse_rounding',
      'coincidence',
      'from_question',
      'from_description',
    ] as const) {
      expect([kind, kinds.has(kind)]).toEqual([kind, true]);
    }
  });

  it('flags at least 95% of the planted errors', () => {
    expect(detection).toBeGreaterThanOrEqual(0.95);
  });

  it('flags at most 3% of the correct answers', () => {
    expect(falseAlarmRate).toBeLessThanOrEqual(0.03);
  });

  it('names the reason of a planted error of another row, sign, unit, scale, question or description', () => {
    const expected: Partial<Record<string, string[]>> = {
      wrong_row: ['other_row'],
      wrong_entity: ['other_row'],
      wrong_sign: ['wrong_sign'],
      wrong_unit: ['wrong_unit'],
      wrong_currency: ['wrong_unit'],
      wrong_scale: ['wrong_scale'],
      from_question: ['from_question'],
      from_description: ['not_data'],
    };
    const wrongReason = planted.filter((r) => {
      const reasons = expected[r.c.planted!.kind];
      if (!reasons || !r.caught) return false;
      const flagged = r.grounding.unsupported.filter(
        (u) => r.c.planted!.figure.includes(u.text) || u.text.includes(r.c.planted!.figure),
      );
      return !flagged.some((u) => reasons.includes(u.reason));
    });
    expect(wrongReason.map((r) => [r.c.id, r.grounding.unsupported])).toEqual([]);
  });
});
