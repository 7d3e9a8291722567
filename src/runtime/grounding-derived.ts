/**
 * Figures worked out from two others of the same sentence: "from 54.9% to 46.7%, down 8.2 points", "$16.5M ahead of
 * Marcus ($38.8M)", "2.15 times as often". A reader checks such a figure against the two beside it, so it holds when
 * both hold and the arithmetic does, at the figure's own precision. Anything further from the cells (a figure worked
 * out from others elsewhere, or from none the answer shows) still needs the calculate tool.
 */
import type { Figure } from './grounding-figures';

/** A figure of the sentence that holds: what it shows and, when it came from a cell, the cell's exact value. */
export interface Operand {
  index: number;
  text: string;
  /** In the unit the answer shows: 54.9 for 54.9% (of a ratio cell 0.549 too), 38,800,000 for $38.8M. */
  shown: number;
  exact?: number;
  percent: boolean;
  change?: 'from' | 'to';
  /** The call whose result holds its cell. */
  toolCallId: string;
  /** Named as what another is compared with ("on Q3 ($54.2M)", "than 29.9%"): the old value of a change. */
  base?: boolean;
}

/** Operands a sentence offers at most: a long sentence is no arithmetic the reader can see. */
const MAX_OPERANDS = 8;
const TIMES_AFTER = /^\s*(?:times|x\b|×|mal\b|fois|veces|volte|vezes|keer|razy)/i;

/** The two operands `figure` is worked out from, or undefined when it is none of their differences, changes or ratios. */
export function derivationOf(figure: Figure, operands: readonly Operand[], after: string): [Operand, Operand] | undefined {
  const candidates = operands.filter((o) => o.index !== figure.index).slice(0, MAX_OPERANDS);
  // A bare small integer ("3 years") is a count of something else far more often than a difference.
  if ((figure.bare && !figure.comparative) || figure.words) return undefined;
  const value = figure.mantissa * figure.scale;
  const magnitude = Math.abs(value);
  const half = 0.5 * 10 ** -figure.decimals * figure.scale;
  const slack = figure.approximation === 'about' ? Math.max(half * 1.5, magnitude * 0.03) : half * 1.5;
  const near = (derived: number) => Number.isFinite(derived) && Math.abs(Math.abs(derived) - magnitude) <= slack;
  const times = TIMES_AFTER.test(after);
  for (let i = 0; i < candidates.length; i++)
    for (let j = 0; j < candidates.length; j++) {
      if (i === j) continue;
      const [a, b] = [candidates[i], candidates[j]];
      // "from A to B", "up 12% on B": which is the old value, when the words say, and then the direction the figure
      // claims must be the change's; when they do not, either way round.
      const oldFirst = a.change === 'from' && b.change === 'to';
      const baseKnown = oldFirst || a.base || b.base;
      if (baseKnown && !(oldFirst || (a.base && !b.base))) continue;
      const signOk = (difference: number) =>
        !baseKnown || figure.sign === 'none' || (figure.sign === 'negative') === difference < 0;
      for (const [x, y] of values(a, b)) {
        if (times) {
          if (!figure.percent && near(y / x)) return [a, b];
          continue;
        }
        if (figure.percent && !figure.points) {
          // A percentage of two percentages is a relative change, never their difference (points).
          if (x !== 0 && near(((y - x) / Math.abs(x)) * 100) && signOk(y - x)) return [a, b];
          if (!a.percent && !b.percent && y !== 0 && near((x / y) * 100)) return [a, b];
          continue;
        }
        if (figure.points && !(a.percent && b.percent)) continue;
        if (a.percent !== b.percent) continue;
        if (!figure.points && a.percent && figure.sign === 'none' && !figure.comparative) continue;
        if (near(y - x) && signOk(y - x)) return [a, b];
        if (!a.percent && figure.sign === 'none' && near(x + y)) return [a, b];
      }
    }
  return undefined;
}

/** The pairs of values to work with: as shown, and from the cells when both came from one. */
function values(a: Operand, b: Operand): Array<[number, number]> {
  const pairs: Array<[number, number]> = [[a.shown, b.shown]];
  if (a.exact !== undefined && b.exact !== undefined) pairs.push([a.exact, b.exact]);
  return pairs;
}
