/** The comparisons a metric alert takes. */
export const ALERT_OPS = ['>', '>=', '<', '<=', 'change_pct_gt'] as const;
export type AlertOp = (typeof ALERT_OPS)[number];
export const ALERT_PERIODS = ['day', 'week', 'month'] as const;
export type AlertPeriod = (typeof ALERT_PERIODS)[number];

export interface AlertCondition {
  op: AlertOp;
  value: number;
  /** change_pct_gt only: the period compared with the one before it (default day). */
  period?: AlertPeriod;
}

/** One group's value as an alert evaluates it; `previous` and `changePct` for change_pct_gt. */
export interface EvaluatedRow {
  /** The group's dimension values (empty without groupBy). */
  dimensions: Record<string, unknown>;
  value: number | null;
  previous?: number | null;
  changePct?: number | null;
  /** The dimension values as one key: which group's state this is. */
  key: string;
  holds: boolean;
}

/** The key of a group's alert state: its dimension values in groupBy order ("*" without groupBy). */
export function dimensionKey(groupBy: readonly string[], row: Record<string, unknown>): string {
  if (!groupBy.length) return '*';
  return JSON.stringify(groupBy.map((field) => row[field] ?? null));
}

function numberOf(value: unknown): number | null {
  if (value === null || value === undefined || value === '') return null;
  const n = Number(value);
  return Number.isFinite(n) ? n : null;
}

/** Whether a threshold condition holds for a value (a null value never holds). */
export function thresholdHolds(op: Exclude<AlertOp, 'change_pct_gt'>, value: number | null, threshold: number): boolean {
  if (value === null) return false;
  switch (op) {
    case '>':
      return value > threshold;
    case '>=':
      return value >= threshold;
    case '<':
      return value < threshold;
    case '<=':
      return value <= threshold;
  }
}

/** The change from `previous` to `current` in percent; null when there is nothing to compare with (no or a zero previous value). */
export function changePct(current: number | null, previous: number | null): number | null {
  if (current === null || previous === null || previous === 0) return null;
  return ((current - previous) / Math.abs(previous)) * 100;
}

/**
 * Each group of the metric's answer with whether the condition holds: a threshold compares the
 * metric's value; change_pct_gt compares the current period's value with the previous period's
 * (`previousRows`, matched by dimension values; a group absent there has no previous value and
 * does not hold).
 */
export function evaluate(
  metric: string,
  groupBy: readonly string[],
  condition: AlertCondition,
  rows: readonly Record<string, unknown>[],
  previousRows: readonly Record<string, unknown>[] = [],
): EvaluatedRow[] {
  const previous = new Map(previousRows.map((row) => [dimensionKey(groupBy, row), numberOf(row[metric])]));
  return rows.map((row) => {
    const key = dimensionKey(groupBy, row);
    const dimensions = Object.fromEntries(groupBy.map((field) => [field, row[field] ?? null]));
    const value = numberOf(row[metric]);
    if (condition.op === 'change_pct_gt') {
      const before = previous.get(key) ?? null;
      const change = changePct(value, before);
      return { dimensions, value, previous: before, changePct: change, key, holds: change !== null && change > condition.value };
    }
    return { dimensions, value, key, holds: thresholdHolds(condition.op, value, condition.value) };
  });
}

/**
 * The groups that fire now: the condition holds and did not at the last run (a group never seen
 * before counts as not holding). `before` maps a group's key to whether it held at the last run.
 */
export function newlyFired(rows: readonly EvaluatedRow[], before: ReadonlyMap<string, boolean>): EvaluatedRow[] {
  return rows.filter((row) => row.holds && before.get(row.key) !== true);
}

/**
 * Days "YYYY-MM-DD" (inclusive) of the last complete period before `now` and of the one before it, in the
 * schedule's time zone: a daily alert at 09:00 in Tokyo compares Tokyo's yesterday with the day before.
 */
export function comparedPeriods(
  period: AlertPeriod,
  now: Date,
  timeZone = 'UTC',
): { current: { from: string; to: string }; previous: { from: string; to: string } } {
  const day = (d: Date) => d.toISOString().slice(0, 10);
  // Calendar arithmetic on the zone's date, carried in UTC dates (no clock, so no DST step in between).
  const utc = (y: number, m: number, d: number) => new Date(Date.UTC(y, m, d));
  const { y, m, d } = zonedDate(now, timeZone);
  if (period === 'month') {
    const current = { from: day(utc(y, m - 1, 1)), to: day(utc(y, m, 0)) };
    const previous = { from: day(utc(y, m - 2, 1)), to: day(utc(y, m - 1, 0)) };
    return { current, previous };
  }
  // A week starts on Monday (ISO 8601).
  const length = period === 'week' ? 7 : 1;
  const today = utc(y, m, d);
  const start = period === 'week' ? utc(y, m, d - ((today.getUTCDay() + 6) % 7)) : today;
  const shift = (date: Date, days: number) => new Date(date.getTime() + days * 86_400_000);
  return {
    current: { from: day(shift(start, -length)), to: day(shift(start, -1)) },
    previous: { from: day(shift(start, -2 * length)), to: day(shift(start, -length - 1)) },
  };
}

/** The calendar date (month 0-based) `now` falls on in `timeZone` (an IANA name, checked when the schedule was made). */
function zonedDate(now: Date, timeZone: string): { y: number; m: number; d: number } {
  const parts = new Intl.DateTimeFormat('en-US', { timeZone, year: 'numeric', month: 'numeric', day: 'numeric' }).formatToParts(
    now,
  );
  const part = (type: Intl.DateTimeFormatPartTypes) => Number(parts.find((p) => p.type === type)!.value);
  return { y: part('year'), m: part('month') - 1, d: part('day') };
}
