import { ValidationError, ValidationPipe } from '@nestjs/common';
import { DomainError } from './domain-error';

/** Flattens nested class-validator errors into "path: message" strings. */
function flatten(errors: ValidationError[], parent = ''): string[] {
  return errors.flatMap((error) => {
    const path = parent ? `${parent}.${error.property}` : error.property;
    const own = Object.values(error.constraints ?? {}).map((message) =>
      message.startsWith(error.property) ? `${path}${message.slice(error.property.length)}` : `${path}: ${message}`,
    );
    return [...own, ...flatten(error.children ?? [], path)];
  });
}

/** The global DTO pipe: strips nothing silently (unknown properties are a 400), converts types, one error shape. */
export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    exceptionFactory: (errors) => {
      const messages = flatten(errors);
      return new DomainError('validation_failed', messages[0] ?? 'Invalid request', { errors: messages });
    },
  });
}
