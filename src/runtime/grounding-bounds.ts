import { groundAnswer, receiptOf, type Grounding, type GroundingOptions, type GroundingSource } from './grounding';

/**
 * Most characters of an answer the check reads: reading figures costs CPU on the event loop, and a long answer (a
 * model told to write tens of thousands of characters) must not hold up every other request of the replica. Some
 * 5,000 tokens: far more than an answer that states figures needs.
 */
export const GROUNDING_MAX_CHARS = 20_000;

/**
 * `groundAnswer` within GROUNDING_MAX_CHARS: a longer answer is checked up to the last space before the limit, and says
 * where the check stopped (`uncheckedFrom`). References after it are still filled in from their cells, with receipts,
 * but their rows are not checked against their clauses.
 */
export function groundBounded(answer: string, sources: readonly GroundingSource[], options: GroundingOptions = {}): Grounding {
  if (answer.length <= GROUNDING_MAX_CHARS) return groundAnswer(answer, sources, options);
  const space = answer.lastIndexOf(' ', GROUNDING_MAX_CHARS);
  const cut = space > GROUNDING_MAX_CHARS / 2 ? space : GROUNDING_MAX_CHARS;
  const references = options.references ?? [];
  const head = groundAnswer(answer.slice(0, cut), sources, { ...options, references: references.filter((r) => r.end <= cut) });
  const rest = references.filter((r) => r.end > cut);
  return {
    ...head,
    receipts: [...(head.receipts ?? []), ...rest.flatMap((r) => (r.cell ? [receiptOf(r, r.cell)] : []))],
    ...(head.summary ? { summary: { ...head.summary, referenced: head.summary.referenced + rest.length } } : {}),
    uncheckedFrom: cut,
  };
}
