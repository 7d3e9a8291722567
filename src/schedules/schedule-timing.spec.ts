import { DomainError } from '../common/domain-error';
import { checkCron, checkTimezone, formatEvery, nextTick, parseEvery } from './schedule-timing';

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    return error instanceof DomainError ? error.code : 'not a domain error';
  }
  return undefined;
}

describe('schedule timing', () => {
  it('parses intervals and refuses malformed ones and ones below the minimum', () => {
    expect(parseEvery('15m', 60)).toBe(900);
    expect(parseEvery('2h', 60)).toBe(7_200);
    expect(parseEvery('1d', 60)).toBe(86_400);
    expect(codeOf(() => parseEvery('30s', 60))).toBe('invalid_schedule');
    expect(codeOf(() => parseEvery('0m', 60))).toBe('invalid_schedule');
    expect(codeOf(() => parseEvery('5m', 600))).toBe('invalid_schedule');
    expect(codeOf(() => parseEvery('soon', 60))).toBe('invalid_schedule');
    expect(formatEvery(900)).toBe('15m');
    expect(formatEvery(7_200)).toBe('2h');
    expect(formatEvery(172_800)).toBe('2d');
  });

  it('accepts IANA zones only', () => {
    expect(checkTimezone('Europe/Paris')).toBe('Europe/Paris');
    expect(checkTimezone('UTC')).toBe('UTC');
    expect(codeOf(() => checkTimezone('Mars/Olympus'))).toBe('invalid_timezone');
  });

  it('accepts 5-field crons only', () => {
    expect(checkCron('0  9 * * 1-5', 'UTC')).toBe('0 9 * * 1-5');
    expect(codeOf(() => checkCron('0 0 9 * * 1', 'UTC'))).toBe('invalid_cron');
    expect(codeOf(() => checkCron('61 * * * *', 'UTC'))).toBe('invalid_cron');
    expect(codeOf(() => checkCron('every day', 'UTC'))).toBe('invalid_cron');
  });

  it('reads a cron in its time zone, across a daylight saving change', () => {
    const after = new Date('2026-03-27T12:00:00Z');
    // 09:00 in Paris: 08:00 UTC before the change to summer time (29 March 2026), 07:00 UTC after.
    const first = nextTick({ cron: '0 9 * * *', timezone: 'Europe/Paris' }, after)!;
    expect(first.toISOString()).toBe('2026-03-28T08:00:00.000Z');
    const second = nextTick({ cron: '0 9 * * *', timezone: 'Europe/Paris' }, first)!;
    expect(second.toISOString()).toBe('2026-03-29T07:00:00.000Z');
    expect(nextTick({ cron: '0 9 * * *', timezone: 'UTC' }, after)!.toISOString()).toBe('2026-03-28T09:00:00.000Z');
  });

  it('counts an interval from the tick it was found due at', () => {
    const at = new Date('2026-01-01T00:00:00Z');
    expect(nextTick({ everySeconds: 900 }, at)!.toISOString()).toBe('2026-01-01T00:15:00.000Z');
  });
});
