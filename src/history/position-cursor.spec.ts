import { DomainError } from '../common/domain-error';
import { decodePosition, encodePosition } from './position-cursor';

describe('list position cursors', () => {
  it('round-trips a page position', () => {
    const position: [string, string] = ['2026-11-28T10:00:00.123456Z', '0b5f4f0e-6a8e-4c1e-9a57-3f0c1f6f1d2a'];
    expect(decodePosition(encodePosition(position))).toEqual(position);
  });

  it.each([
    ['not base64 JSON', 'nope'],
    ['a JSON object', Buffer.from('{"a":1}').toString('base64url')],
    ['a bad timestamp', Buffer.from('["yesterday","0b5f4f0e-6a8e-4c1e-9a57-3f0c1f6f1d2a"]').toString('base64url')],
    ['a bad id', Buffer.from('["2026-11-28T10:00:00Z","1; drop table x"]').toString('base64url')],
    ['a long value', 'a'.repeat(500)],
  ])('refuses %s with invalid_cursor (400), never reaching SQL', (_what, cursor) => {
    let thrown: unknown;
    try {
      decodePosition(cursor);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(DomainError);
    expect((thrown as DomainError).code).toBe('invalid_cursor');
  });
});
