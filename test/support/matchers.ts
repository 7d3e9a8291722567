/**
 * Jest's asymmetric matchers, typed as what they are to the type checker: expected values of no
 * particular type. @types/jest declares `expect.any()` and friends as returning `any`, which the
 * type-checked lint rules refuse as a property of an expected object; these return the very same
 * matchers as `unknown`. (Inside arrays or as a whole expected value, plain `expect.any()` is fine.)
 */
export const match = {
  any: (classType: unknown): unknown => expect.any(classType),
  stringMatching: (pattern: string | RegExp): unknown => expect.stringMatching(pattern),
  stringContaining: (text: string): unknown => expect.stringContaining(text),
  arrayContaining: <T>(items: readonly T[]): unknown => expect.arrayContaining(items),
  objectContaining: (object: Record<string, unknown>): unknown => expect.objectContaining(object),
};
