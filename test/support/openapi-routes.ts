import type { OpenAPIObject } from '@nestjs/swagger';
import { bodyOf } from './responses';
import type { TestApp } from './test-app';

export type BodyMethod = 'post' | 'put' | 'patch';

/** The subset of JSON Schema (and of OpenAPI's dialect of it) that the app's DTOs and tools use. */
export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  allOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  anyOf?: JsonSchema[];
  minimum?: number;
  maximum?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  additionalProperties?: boolean | JsonSchema;
  $ref?: string;
  [keyword: string]: unknown;
}

/** A POST, PUT or PATCH route of the OpenAPI document, its path still a template (`/api/v1/objects/{name}`). */
export interface BodyRoute {
  method: BodyMethod;
  template: string;
  /** Names of the path parameters, in order. */
  params: string[];
  /** The request body's schema with every `$ref` resolved; undefined when the route declares none. */
  schema?: JsonSchema;
}

/** Every route that takes a body, as the app itself documents it at GET /docs-json. */
export async function documentedBodyRoutes(t: TestApp): Promise<BodyRoute[]> {
  const docs = bodyOf<OpenAPIObject>(await t.http.get('/docs-json').expect(200));
  const components = (docs.components?.schemas ?? {}) as Record<string, JsonSchema>;
  return Object.entries(docs.paths).flatMap(([template, operations]) =>
    (['post', 'put', 'patch'] as const)
      .filter((method) => method in operations)
      .map((method) => {
        const content = operations[method]?.requestBody as { content?: Record<string, { schema?: JsonSchema }> } | undefined;
        const schema = content?.content?.['application/json']?.schema;
        return {
          method,
          template,
          params: [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1]),
          schema: schema && resolveRefs(schema, components),
        };
      }),
  );
}

/** The template with each `{param}` replaced by its value (URL-encoded), or by `fallback` when none is given. */
export function fillPath(template: string, values: Record<string, string>, fallback = 'x'): string {
  return template.replace(/\{(\w+)\}/g, (_, param: string) => encodeURIComponent(values[param] ?? fallback));
}

/**
 * A copy of `schema` with `#/components/schemas/*` references replaced by their targets. A reference
 * back to a schema it is already inside (the recursive Where filter) becomes `{}`, any value.
 */
export function resolveRefs(schema: JsonSchema, components: Record<string, JsonSchema>, inside: string[] = []): JsonSchema {
  if (schema.$ref) {
    if (inside.includes(schema.$ref)) return {};
    const target = components[schema.$ref.replace('#/components/schemas/', '')];
    if (!target) throw new Error(`resolveRefs: ${schema.$ref} is not in the document`);
    return resolveRefs(target, components, [...inside, schema.$ref]);
  }
  const resolve = (s: JsonSchema) => resolveRefs(s, components, inside);
  const out: JsonSchema = { ...schema };
  if (schema.properties) out.properties = Object.fromEntries(Object.entries(schema.properties).map(([k, s]) => [k, resolve(s)]));
  if (schema.items) out.items = resolve(schema.items);
  for (const key of ['allOf', 'oneOf', 'anyOf'] as const) if (schema[key]) out[key] = schema[key].map(resolve);
  if (typeof schema.additionalProperties === 'object') out.additionalProperties = resolve(schema.additionalProperties);
  return out;
}
