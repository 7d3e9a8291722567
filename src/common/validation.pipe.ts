import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { DomainError } from './domain-error';

/** Constraints that explain the most basic problem come first ("is required" before "at most 500 items"). */
const FIRST = ['isDefined', 'isArray', 'isObject', 'isString', 'isBoolean', 'isNumber', 'isInt', 'arrayNotEmpty', 'isNotEmpty'];

function byPriority([a]: [string, string], [b]: [string, string]): number {
  const rank = (name: string) => (FIRST.includes(name) ? FIRST.indexOf(name) : FIRST.length);
  return rank(a) - rank(b);
}

/** Flattens nested class-validator errors into "path: message" strings. */
function flatten(errors: ValidationError[], parent = ''): string[] {
  return errors.flatMap((error) => {
    const path = parent ? `${parent}.${error.property}` : error.property;
    const own = Object.entries(error.constraints ?? {}).sort(byPriority).map(([, message]) =>
      message.startsWith(error.property) ? `${path}${message.slice(error.property.length)}` : `${path}: ${message}`,
    );
    return [...own, ...flatten(error.children ?? [], path)];
  });
}

/** Deepest nesting searched for NUL characters; DTOs are far shallower. */
const MAX_NUL_SEARCH_DEPTH = 64;

/** Path of the first key or string holding a NUL character, which Postgres text and jsonb cannot store. */
function findNul(value: unknown, path: string, depth = 0): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? path || 'body' : undefined;
  if (typeof value !== 'object' || value === null || depth >= MAX_NUL_SEARCH_DEPTH) return undefined;
  for (const [key, item] of Object.entries(value)) {
    const itemPath = path ? `${path}.${key}` : key;
    const found = key.includes('\u0000') ? itemPath : findNul(item, itemPath, depth + 1);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * Refuses NUL characters in DTO bodies before they reach the database (where they would be a driver error,
 * not a 400). Bodies without a DTO (records) are checked field by field by the data engine.
 */
class AppValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type === 'body' && this.toValidate(metadata)) {
      const path = findNul(value, '');
      if (path !== undefined) {
        const message = `${path} must not contain NUL (\\u0000) characters`;
        throw new DomainError('validation_failed', message, { errors: [message] });
      }
    }
    return super.transform(value, metadata);
  }
}

/** The global DTO pipe: strips nothing silently (unknown properties are a 400), converts types, one error shape. */
export function createValidationPipe(): ValidationPipe {
  return new AppValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    exceptionFactory: (errors) => {
      const messages = flatten(errors);
      return new DomainError('validation_failed', messages[0] ?? 'Invalid request', { errors: messages });
    },
  });
}
