import { DomainError } from '../common/domain-error';

/**
 * A list position (a timestamp and an id: the last row of a page ordered by both, newest first) as an
 * opaque cursor: base64url of a JSON pair, checked on the way back so a forged one is a 400, not a 500.
 */
export function encodePosition(position: [string, string]): string {
  return Buffer.from(JSON.stringify(position)).toString('base64url');
}

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function decodePosition(cursor: string): [string, string] {
  let parsed: unknown;
  try {
    parsed = cursor.length <= 200 ? JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) : undefined;
  } catch {
    parsed = undefined;
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 2 ||
    typeof parsed[0] !== 'string' ||
    typeof parsed[1] !== 'string' ||
    !TIMESTAMP.test(parsed[0]) ||
    !UUID.test(parsed[1]) ||
    Number.isNaN(Date.parse(parsed[0]))
  ) {
    throw new DomainError('invalid_cursor', 'cursor must be a nextCursor of this list');
  }
  return [parsed[0], parsed[1]];
}
