import type { FastifyReply } from 'fastify';
import { DomainError } from '../common/domain-error';
import type { VersionedRecord } from './data.types';

/**
 * Record versions on the wire. A version is opaque to clients (records.compiler.ts says what it
 * is); the ETag header carries it as a strong entity tag, and If-Match sends it back.
 */
export function etagOf(version: string): string {
  return `"${version}"`;
}

/**
 * One element of an If-Match list: optional whitespace, an optional entity tag (`W/` marks a weak
 * one; etagc allows commas, so the list cannot simply be split on them), optional whitespace, then
 * a comma or the end. Empty elements are allowed, as in every HTTP list.
 */
const LIST_ELEMENT = /[ \t]*(?:(W\/)?"([\x21\x23-\x7e\x80-\xff]*)")?[ \t]*(?:,|$)/y;

/**
 * The versions a PATCH or DELETE may change: undefined for no If-Match or `*` (any current
 * record), otherwise those of its strong tags. If-Match compares strongly, so a weak tag never
 * matches and a list of weak tags only fails with 412. A header that is not a list of entity tags
 * is a 400 rather than a 412: a client that re-reads and retries on 412 would send the same
 * broken header forever.
 */
export function parseIfMatch(header: string | undefined): string[] | undefined {
  if (header === undefined) return undefined;
  if (header.trim() === '*') return undefined;
  const versions: string[] = [];
  let tags = 0;
  for (let at = 0; at < header.length;) {
    LIST_ELEMENT.lastIndex = at;
    const element = LIST_ELEMENT.exec(header);
    if (!element || LIST_ELEMENT.lastIndex === at) throw invalidIfMatch();
    if (element[2] !== undefined) {
      tags++;
      if (!element[1]) versions.push(element[2]);
    }
    at = LIST_ELEMENT.lastIndex;
  }
  if (!tags) throw invalidIfMatch();
  return versions;
}

function invalidIfMatch(): DomainError {
  return new DomainError(
    'invalid_if_match',
    'If-Match must be "*" or a comma-separated list of entity tags in double quotes, as sent in ETag (e.g. If-Match: "1234")',
  );
}

/** The header that names a write's change set. */
export const CHANGE_SET_HEADER = 'change-set-id';

/** Answers with the record and its version as ETag; a write's also with its change set (field and header). */
export function sendVersioned(reply: FastifyReply, { record, version, changeSetId }: VersionedRecord): Record<string, unknown> {
  void reply.header('etag', etagOf(version));
  if (changeSetId === undefined) return record;
  void reply.header(CHANGE_SET_HEADER, changeSetId);
  return { ...record, changeSetId };
}
