import { changePct, comparedPeriods, dimensionKey, evaluate, newlyFired } from './alert-condition';

describe('metric alert conditions', () => {
  it('keys a group by its dimension values in groupBy order', () => {
    expect(dimensionKey([], { total: 3 })).toBe('*');
    expect(dimensionKey(['region', 'owner'], { owner: 'a', region: 'north', total: 1 })).toBe('["north","a"]');
    expect(dimensionKey(['region'], { total: 1 })).toBe('[null]');
  });

  it('compares each group with a threshold; a null value never holds', () => {
    const rows = [
      { region: 'north', total: 10 },
      { region: 'south', total: '5' },
      { region: 'east', total: null },
    ];
    const held = (op: '>' | '>=' | '<' | '<=', value: number) =>
      evaluate('total', ['region'], { op, value }, rows).map((r) => r.holds);
    expect(held('>', 5)).toEqual([true, false, false]);
    expect(held('>=', 5)).toEqual([true, true, false]);
    expect(held('<', 10)).toEqual([false, true, false]);
    expect(held('<=', 10)).toEqual([true, true, false]);
  });

  it('compares with the previous period in percent', () => {
    expect(changePct(150, 100)).toBe(50);
    expect(changePct(50, -100)).toBe(150);
    expect(changePct(5, 0)).toBeNull();
    const rows = evaluate(
      'total',
      ['region'],
      { op: 'change_pct_gt', value: 20 },
      [
        { region: 'north', total: 130 },
        { region: 'south', total: 110 },
        { region: 'west', total: 10 },
      ],
      [
        { region: 'north', total: 100 },
        { region: 'south', total: 100 },
      ],
    );
    expect(rows.map((r) => [r.key, r.holds, r.changePct])).toEqual([
      ['["north"]', true, 30],
      ['["south"]', false, 10],
      ['["west"]', false, null],
    ]);
  });

  it('fires a group when its condition becomes true, not while it stays true', () => {
    const rows = evaluate('total', ['region'], { op: '>', value: 5 }, [
      { region: 'north', total: 10 },
      { region: 'south', total: 10 },
      { region: 'east', total: 1 },
    ]);
    const before = new Map([
      ['["north"]', true],
      ['["south"]', false],
    ]);
    expect(newlyFired(rows, before).map((r) => r.dimensions)).toEqual([{ region: 'south' }]);
    expect(newlyFired(rows, new Map()).map((r) => r.key)).toEqual(['["north"]', '["south"]']);
  });

  it('compares the last complete day, week or month with the one before it (UTC)', () => {
    const now = new Date('2026-03-04T10:00:00Z'); // a Wednesday
    expect(comparedPeriods('day', now)).toEqual({
      current: { from: '2026-03-03', to: '2026-03-03' },
      previous: { from: '2026-03-02', to: '2026-03-02' },
    });
    expect(comparedPeriods('week', now)).toEqual({
      current: { from: '2026-02-23', to: '2026-03-01' },
      previous: { from: '2026-02-16', to: '2026-02-22' },
    });
    expect(comparedPeriods('month', now)).toEqual({
      current: { from: '2026-02-01', to: '2026-02-28' },
      previous: { from: '2026-01-01', to: '2026-01-31' },
    });
  });

  it("takes the periods in the schedule's time zone: its yesterday, week and month", () => {
    // 23:30 UTC on Sunday 2026-03-01 is already Monday 2026-03-02 in Tokyo, still Sunday in New York.
    const now = new Date('2026-03-01T23:30:00Z');
    expect(comparedPeriods('day', now, 'Asia/Tokyo')).toEqual({
      current: { from: '2026-03-01', to: '2026-03-01' },
      previous: { from: '2026-02-28', to: '2026-02-28' },
    });
    expect(comparedPeriods('day', now, 'America/New_York')).toEqual({
      current: { from: '2026-02-28', to: '2026-02-28' },
      previous: { from: '2026-02-27', to: '2026-02-27' },
    });
    // Monday in Tokyo: last week (Mon 23 Feb .. Sun 1 Mar) is complete there; not yet in New York.
    expect(comparedPeriods('week', now, 'Asia/Tokyo').current).toEqual({ from: '2026-02-23', to: '2026-03-01' });
    expect(comparedPeriods('week', now, 'America/New_York').current).toEqual({ from: '2026-02-16', to: '2026-02-22' });
    // The first of the month in Tokyo: February is complete there; in UTC it is still the 1st of March.
    expect(comparedPeriods('month', new Date('2026-02-28T16:00:00Z'), 'Asia/Tokyo').current).toEqual({
      from: '2026-02-01',
      to: '2026-02-28',
    });
    expect(comparedPeriods('month', new Date('2026-02-28T16:00:00Z')).current).toEqual({
      from: '2026-01-01',
      to: '2026-01-31',
    });
  });
});
