import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { RawServerDefault } from 'fastify';
import { DomainError } from './domain-error';

/**
 * Deepest nesting of objects and arrays in a JSON body. Far above any real body (a `where` tree at
 * its own 8-level limit is under 20; a json field value may nest 64 levels inside a record), far
 * below what the recursive steps after parsing (class-transformer, validation) can take.
 */
export const MAX_BODY_DEPTH = 100;
/** Most values (objects, arrays and primitives, each key with its value) in one JSON body. */
export const MAX_BODY_NODES = 100_000;
/**
 * Most keys of one JSON object. class-transformer's cost grows with the square of an object's key
 * count (99,000 keys in one `where` held the event loop for 9 s; 99 objects of 1,000 keys take
 * 0.3 s), and no real body comes near: an object has at most 500 fields.
 */
export const MAX_OBJECT_KEYS = 1_000;

/** Where the walk found the first NUL of a body, for the DTO validation pipe (records check their own). */
const nulPaths = new WeakMap<object, string>();

/** Path ("fields.0.name", or "body") of the first key or string holding a NUL character, if any. */
export function nulPathOf(body: unknown): string | undefined {
  return typeof body === 'object' && body !== null ? nulPaths.get(body) : undefined;
}

/**
 * Replaces the application/json parser: Fastify's own parse (malformed or empty JSON stays 400
 * invalid_json, prototype poisoning is refused, the body limit applies), then one iterative walk
 * that refuses bodies too deep or too large before anything recursive sees them.
 */
export function registerJsonBodyParser(app: NestFastifyApplication): void {
  const fastify = app.getHttpAdapter().getInstance();
  const { bodyLimit, onProtoPoisoning, onConstructorPoisoning } = fastify.initialConfig;
  const parse = fastify.getDefaultJsonParser(onProtoPoisoning ?? 'error', onConstructorPoisoning ?? 'error');
  app.useBodyParser<RawServerDefault>('application/json', { bodyLimit }, (request, raw, done) => {
    void parse(request, raw.toString(), (error, body) => {
      if (error) return done(error);
      try {
        inspectBody(body);
      } catch (refused) {
        return done(refused as Error);
      }
      done(null, body);
    });
  });
}

interface Frame {
  value: unknown;
  key: string;
  depth: number;
  parent?: Frame;
}

/** Depth-first and iterative, so no body can exhaust the stack here. */
function inspectBody(body: unknown): void {
  let nodes = 1;
  let nul: Frame | undefined;
  const stack: Frame[] = [{ value: body, key: '', depth: 0 }];
  while (stack.length) {
    const frame = stack.pop()!;
    const { value } = frame;
    if (!nul && (frame.key.includes('\u0000') || (typeof value === 'string' && value.includes('\u0000')))) nul = frame;
    if (typeof value !== 'object' || value === null) continue;
    const depth = frame.depth + 1;
    if (depth > MAX_BODY_DEPTH) throw refuse(`body is nested deeper than ${MAX_BODY_DEPTH} levels`, { maxDepth: MAX_BODY_DEPTH });
    const keys = Object.keys(value);
    if (!Array.isArray(value) && keys.length > MAX_OBJECT_KEYS) {
      throw refuse(`${pathOf(frame)} has more than ${MAX_OBJECT_KEYS} keys`, { maxKeys: MAX_OBJECT_KEYS });
    }
    nodes += keys.length;
    if (nodes > MAX_BODY_NODES) throw refuse(`body has more than ${MAX_BODY_NODES} values`, { maxValues: MAX_BODY_NODES });
    // Pushed in reverse, so keys are visited in order and the first NUL reported is the first in the body.
    for (let i = keys.length - 1; i >= 0; i--) {
      stack.push({ value: (value as Record<string, unknown>)[keys[i]], key: keys[i], depth, parent: frame });
    }
  }
  if (nul && typeof body === 'object' && body !== null) nulPaths.set(body, pathOf(nul));
}

function pathOf(frame: Frame): string {
  const keys: string[] = [];
  for (let at: Frame | undefined = frame; at?.parent; at = at.parent) keys.push(at.key);
  return keys.reverse().join('.') || 'body';
}

function refuse(message: string, limit: Record<string, number>): DomainError {
  return new DomainError('validation_failed', message, { errors: [message], ...limit });
}
