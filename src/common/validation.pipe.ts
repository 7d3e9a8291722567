import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { DomainError } from './domain-error';
import { nulPathOf } from './json-body.parser';

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
    const own = Object.entries(error.constraints ?? {})
      .sort(byPriority)
      .map(([, message]) =>
        message.startsWith(error.property) ? `${path}${message.slice(error.property.length)}` : `${path}: ${message}`,
      );
    return [...own, ...flatten(error.children ?? [], path)];
  });
}

/**
 * Refuses NUL characters (which Postgres text and jsonb cannot store) in DTO bodies before they reach
 * the database, where they would be a driver error, not a 400. The JSON body parser finds them at any
 * depth; bodies without a DTO (records) are checked field by field by the data engine.
 */
class AppValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type === 'body' && this.toValidate(metadata)) {
      const path = nulPathOf(value);
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
