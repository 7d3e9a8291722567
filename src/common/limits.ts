/**
 * The page size to use for a requested `value`: a number or numeric string, floored; missing, not a
 * number or below 1 gives `defaultLimit`; above `maxLimit` gives `maxLimit`. HTTP routes refuse
 * bad limits in their DTOs first, so there it only fills in the default and caps; model tool
 * arguments arrive loosely typed and get the lenient reading.
 */
export function clampLimit(value: unknown, defaultLimit: number, maxLimit: number): number {
  const n = Math.floor(toNumber(value));
  if (Number.isNaN(n) || n < 1) return defaultLimit;
  return Math.min(n, maxLimit);
}

/** Records to skip: a number or numeric string, floored; missing, negative or not a number gives 0. */
export function clampOffset(value: unknown): number {
  const n = Math.floor(toNumber(value));
  if (Number.isNaN(n) || n < 0) return 0;
  // Far past any table; keeps the bound parameter an exact integer.
  return Math.min(n, Number.MAX_SAFE_INTEGER);
}

function toNumber(value: unknown): number {
  if (typeof value === 'number') return value;
  if (typeof value === 'string' && value.trim() !== '') return Number(value.trim());
  return Number.NaN;
}

/** `Retry-After` of a 429 for a per-key cap (chats in flight, open streams): a slot usually frees within seconds. */
export const CAP_RETRY_AFTER_SECONDS = 5;
