import type { Grounding } from '../../src/runtime/grounding';

/**
 * The grounding of an answer whose figures were all typed by hand (no figure references): no receipts, and a
 * summary that counts them as the lists do.
 */
export function typedOnly(grounding: Pick<Grounding, 'numbers' | 'supported' | 'unsupported'>): Grounding {
  return {
    ...grounding,
    receipts: [],
    summary: {
      referenced: 0,
      typed: grounding.numbers,
      supported: grounding.supported.length,
      unsupported: grounding.unsupported.length,
    },
  };
}
