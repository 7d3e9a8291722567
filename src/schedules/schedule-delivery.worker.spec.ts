import { emailOf } from './schedule-delivery.worker';

describe('schedule emails', () => {
  const schedule = { id: 's-1', name: 'Revenue watch' };

  it('lists the rows an alert fired, one per line', () => {
    const email = emailOf('ops@example.com', {
      type: 'alert.fired',
      timestamp: '2026-01-01T09:00:00.000Z',
      data: {
        schedule,
        metric: 'revenue',
        condition: { op: '>', value: 100 },
        rows: [
          { region: 'north', revenue: 150 },
          { region: null, revenue: 120 },
        ],
      },
    });
    expect(email.to).toBe('ops@example.com');
    expect(email.subject).toBe('Revenue watch: alert fired (2 rows)');
    expect(email.text).toContain('Alert "Revenue watch": revenue > 100');
    expect(email.text).toContain('region: north, revenue: 150\nregion: (none), revenue: 120');
  });

  it('says what a change condition compares', () => {
    const email = emailOf('ops@example.com', {
      type: 'alert.fired',
      timestamp: '2026-01-01T09:00:00.000Z',
      data: {
        schedule,
        metric: 'revenue',
        condition: { op: 'change_pct_gt', value: 20, period: 'week' },
        rows: [{ revenue: 10 }],
      },
    });
    expect(email.subject).toBe('Revenue watch: alert fired (1 row)');
    expect(email.text).toContain('revenue changed by more than 20% over the previous week');
  });

  it('carries the answer of a question and its chat', () => {
    const email = emailOf('team@example.com', {
      type: 'question.answered',
      timestamp: '2026-01-01T09:00:00.000Z',
      data: { schedule, chatId: 'c-1', answer: 'We won 12 deals.', grounding: null },
    });
    expect(email.subject).toBe('Revenue watch: answer');
    expect(email.text.startsWith('We won 12 deals.\n')).toBe(true);
    expect(email.text).toContain('chat c-1');
  });
});
