import { applyDecorators, type Type } from '@nestjs/common';
import {
  ApiExtraModels,
  ApiOperation,
  ApiResponse,
  ApiSecurity,
  getSchemaPath,
  type HeadersObject,
  type ReferenceObject,
  type SchemaObject,
} from '@nestjs/swagger';
import { STATUS_CODES } from 'node:http';
import { ERRORS, type ErrorCode } from './error-codes';
import { ErrorResponse } from './error-response.dto';

/** The security scheme of API keys in the OpenAPI document (createOpenApiDocument declares it). */
export const API_KEY_SECURITY = 'apiKey';

/** Errors any authenticated route can answer with, before the route itself runs. */
const AUTH_ERRORS: ErrorCode[] = ['unauthorized', 'invalid_token', 'identity_provider_unavailable', 'forbidden'];

/** Errors any route can answer with. */
const SERVER_ERRORS: ErrorCode[] = ['internal_error', 'shutting_down'];

/** Errors of a JSON request body: malformed, the wrong type, too large, or failing its DTO's checks. */
export const BODY_ERRORS: ErrorCode[] = ['validation_failed', 'invalid_json', 'payload_too_large', 'unsupported_media_type'];

/** Errors of a where filter (the where language of the records API, saved views, exports and row filters). */
export const WHERE_ERRORS: ErrorCode[] = [
  'invalid_where',
  'unknown_field',
  'invalid_operator',
  'too_many_values',
  'invalid_value',
];

/** Errors of a route that queries object tables through the data engine. */
export const DATA_ERRORS: ErrorCode[] = ['query_timeout', 'query_cancelled', 'database_busy', 'database_unavailable'];

export interface ApiRouteOptions {
  /** One line: what the route does. */
  summary: string;
  description?: string;
  /** The status of a success, as the route answers it (its @HttpCode, or Nest's 201 for POST and 200 otherwise). */
  status?: 200 | 201 | 202 | 204;
  /** The success body's response class, `[Item]` for an array; none for 202 and 204. */
  type?: Type<unknown> | [Type<unknown>];
  /** The success body's schema, when no class describes it (a record). */
  schema?: SchemaObject | ReferenceObject;
  /** What the success response is. */
  responseDescription?: string;
  /** Headers of the success response (ETag). */
  headers?: HeadersObject;
  /**
   * The route answers with Server-Sent Events (`text/event-stream`), besides or instead of JSON:
   * its event names and their payloads, for the response's description.
   */
  events?: string;
  /** The route answers with a CSV file (`text/csv`): what its rows are, for the response's description. */
  csv?: string;
  /** The route answers with an SVG image (`image/svg+xml`): what it shows, for the response's description. */
  svg?: string;
  /**
   * The error codes the route itself may answer with, from the catalog (error-codes.ts), which
   * gives each its status. Authentication, server and shutdown errors are added by this decorator.
   */
  errors?: ErrorCode[];
  /** No API key needed (health). Every other route is documented with the API key scheme. */
  public?: boolean;
  /**
   * The operation's id, when it must not follow the controller's class and method names (the default): a
   * route that moved to another controller keeps the id that clients were generated with.
   */
  operationId?: string;
}

/**
 * The OpenAPI description of one route, in one decorator: summary, the success response (from
 * the route's response class), every error status with the shared ErrorResponse body and the
 * codes it carries, and the API key requirement. Every route has one:
 *
 * ```ts
 * @Get(':name')
 * @Roles('admin', 'member')
 * @ApiRoute({ summary: 'Describe an object', type: ObjectResponse, errors: ['object_not_found'] })
 * get(@Param('name') name: string): Promise<ObjectResponse> { ... }
 * ```
 *
 * test/e2e/openapi.e2e-spec.ts fails for a route without it.
 */
export function ApiRoute(options: ApiRouteOptions): MethodDecorator {
  const status = options.status ?? 200;
  const models = [ErrorResponse, ...[options.type ?? []].flat()];
  const decorators: Array<MethodDecorator | ClassDecorator> = [
    ApiExtraModels(...models),
    ApiOperation({
      summary: options.summary,
      description: options.description,
      // An empty requirement list: this operation needs no key.
      ...(options.public && { security: [] }),
      ...(options.operationId && { operationId: options.operationId }),
    }),
    ApiResponse({
      status,
      description: options.responseDescription ?? defaultDescription(status, options.events),
      headers: options.headers,
      ...(successContent(options) && { content: successContent(options) }),
    }),
    ...errorResponses([...(options.public ? [] : AUTH_ERRORS), ...(options.errors ?? []), ...SERVER_ERRORS]),
  ];
  if (!options.public) decorators.push(ApiSecurity(API_KEY_SECURITY));
  return applyDecorators(...decorators);
}

function defaultDescription(status: number, events: string | undefined): string {
  if (events) return 'An event stream';
  return { 200: 'OK', 201: 'Created', 202: 'Accepted: the work goes on in the background', 204: 'Done; no body' }[status] ?? 'OK';
}

function successContent(options: ApiRouteOptions): Record<string, { schema: SchemaObject | ReferenceObject }> | undefined {
  const content: Record<string, { schema: SchemaObject | ReferenceObject }> = {};
  const { type, schema } = options;
  if (Array.isArray(type)) content['application/json'] = { schema: { type: 'array', items: { $ref: getSchemaPath(type[0]) } } };
  else if (type) content['application/json'] = { schema: { $ref: getSchemaPath(type) } };
  else if (schema) content['application/json'] = { schema };
  if (options.events) content['text/event-stream'] = { schema: { type: 'string', description: options.events } };
  if (options.csv) content['text/csv'] = { schema: { type: 'string', description: options.csv } };
  if (options.svg) content['image/svg+xml'] = { schema: { type: 'string', description: options.svg } };
  return Object.keys(content).length ? content : undefined;
}

/** One response per error status, its description listing the codes it carries. */
function errorResponses(codes: ErrorCode[]): MethodDecorator[] {
  const byStatus = new Map<number, Set<ErrorCode>>();
  for (const code of codes) {
    const status = ERRORS[code] as number;
    byStatus.set(status, (byStatus.get(status) ?? new Set()).add(code));
  }
  return [...byStatus].map(([status, statusCodes]) =>
    ApiResponse({
      status,
      description: `${STATUS_CODES[status] ?? 'Error'}: code ${[...statusCodes].map((code) => `\`${code}\``).join(', ')}`,
      content: { 'application/json': { schema: { $ref: getSchemaPath(ErrorResponse) } } },
    }),
  );
}
