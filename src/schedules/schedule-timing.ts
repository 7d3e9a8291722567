import { Cron } from 'croner';
import { DomainError } from '../common/domain-error';

/** `every` as the API takes it: a whole number and a unit (minutes, hours, days). */
const EVERY_PATTERN = /^(\d{1,6})(m|h|d)$/;
const UNIT_SECONDS = { m: 60, h: 3_600, d: 86_400 } as const;
/** The longest interval: a year. */
const MAX_EVERY_SECONDS = 366 * 86_400;

/** When a schedule runs: a 5-field cron read in `timezone`, or a fixed interval. */
export type Timing = { cron: string; timezone: string } | { everySeconds: number };

/** `every` ("15m", "1h", "1d") in seconds; invalid_schedule when malformed or shorter than `minSeconds`. */
export function parseEvery(every: string, minSeconds: number): number {
  const match = EVERY_PATTERN.exec(every.trim());
  if (!match) {
    throw new DomainError('invalid_schedule', `every must be a number and a unit (m, h or d), e.g. "15m"; got "${every}"`, {
      field: 'every',
    });
  }
  const seconds = Number(match[1]) * UNIT_SECONDS[match[2] as keyof typeof UNIT_SECONDS];
  if (seconds < minSeconds || seconds > MAX_EVERY_SECONDS) {
    throw new DomainError('invalid_schedule', `every must be between ${minSeconds / 60} minute(s) and 366 days; got "${every}"`, {
      field: 'every',
    });
  }
  return seconds;
}

/** "15m" / "2h" / "1d" for an interval in seconds (the largest unit that divides it). */
export function formatEvery(seconds: number): string {
  if (seconds % 86_400 === 0) return `${seconds / 86_400}d`;
  if (seconds % 3_600 === 0) return `${seconds / 3_600}h`;
  return `${Math.round(seconds / 60)}m`;
}

/** An IANA time zone name as the runtime knows it; invalid_timezone otherwise. */
export function checkTimezone(timezone: string): string {
  try {
    // Throws a RangeError for a zone the runtime's time zone database does not hold.
    return new Intl.DateTimeFormat('en-US', { timeZone: timezone }).resolvedOptions().timeZone;
  } catch {
    throw new DomainError('invalid_timezone', `"${timezone}" is not an IANA time zone (e.g. "Europe/Paris", "UTC")`, {
      field: 'timezone',
    });
  }
}

/** A 5-field cron (minute hour day-of-month month day-of-week) read in `timezone`; invalid_cron otherwise. */
export function checkCron(cron: string, timezone: string): string {
  const pattern = cron.trim().replace(/\s+/g, ' ');
  if (pattern.split(' ').length !== 5) {
    throw new DomainError('invalid_cron', `cron must have 5 fields (minute hour day month weekday); got "${cron}"`, {
      field: 'cron',
    });
  }
  let next: Date | null;
  try {
    next = cronOf(pattern, timezone).nextRun();
  } catch (error) {
    throw new DomainError('invalid_cron', `cron "${cron}" does not parse: ${(error as Error).message}`, { field: 'cron' });
  }
  if (!next) throw new DomainError('invalid_cron', `cron "${cron}" never runs`, { field: 'cron' });
  return pattern;
}

/**
 * The first tick strictly after `after`. An interval's ticks are `after + interval` (a missed tick is
 * not caught up: the next one counts from when the last one was found due); a cron's are its matches.
 */
export function nextTick(timing: Timing, after: Date): Date | null {
  if ('everySeconds' in timing) return new Date(after.getTime() + timing.everySeconds * 1000);
  return cronOf(timing.cron, timing.timezone).nextRun(after);
}

function cronOf(pattern: string, timezone: string): Cron {
  // No callback: the object only computes times, it never schedules anything.
  return new Cron(pattern, { timezone, mode: '5-part', paused: true });
}
