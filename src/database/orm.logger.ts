import { DefaultLogger, type LogContext, type LoggerNamespace } from '@mikro-orm/core';
import { Logger } from '@nestjs/common';

/**
 * MikroORM's lines as lines of the application's logger (context `mikro-orm`), with the namespace
 * as a field and no colour codes. MikroORM still decides what is enabled (`debug`, deprecations,
 * slow queries).
 */
export class OrmLogger extends DefaultLogger {
  private readonly logger = new Logger('mikro-orm');

  override log(namespace: LoggerNamespace | (string & {}), message: string, context?: LogContext): void {
    if (!this.isEnabled(namespace as LoggerNamespace, context)) return;
    const fields = { msg: oneLine(message), namespace, ...(context?.label ? { label: context.label } : {}) };
    if (context?.level === 'error') this.logger.error(fields);
    else if (context?.level === 'warning') this.logger.warn(fields);
    else this.logger.log(fields);
  }

  /** Queries as fields; the SQL has placeholders, not values, unless `query-params` is enabled. */
  override logQuery(context: LogContext & { query: string }): void {
    const namespace = context.namespace ?? 'query';
    if (!this.isEnabled(namespace, context)) return;
    const fields = {
      msg: 'query',
      namespace,
      sql: oneLine(context.query),
      durationMs: context.took,
      results: context.results,
      affected: context.affected,
    };
    if (context.level === 'error') this.logger.error(fields);
    else if (context.level === 'warning') this.logger.warn(fields);
    else this.logger.debug(fields);
  }
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}
