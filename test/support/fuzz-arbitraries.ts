/**
 * fast-check arbitraries for fuzzing the HTTP API: hostile JSON values (wrong types, huge and
 * unrepresentable numbers, NUL and lone-surrogate strings, deep nesting, many keys, keys that name
 * Object.prototype members) and values shaped like a JSON Schema, so that a body gets past the
 * first checks often enough to reach the code behind them.
 */
import fc from 'fast-check';
import type { JsonSchema } from './openapi-routes';
import { FIELD_OPERATORS } from '../../src/metadata/field-types';

/**
 * A JSON fragment that JSON.stringify cannot write (`1e999`, `-0`, a 30-digit integer), spliced into
 * the body text as is by {@link toJsonText}: the server's JSON parser turns these into Infinity, -0
 * or a rounded number, which no JS value sent through JSON.stringify would produce.
 */
export class RawJson {
  constructor(readonly text: string) {}
}

/** JSON text of a generated value: like JSON.stringify, plus {@link RawJson} fragments and own `__proto__` keys. */
export function toJsonText(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (Array.isArray(value)) return `[${value.map(toJsonText).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const members = Object.entries(value).filter(([, v]) => v !== undefined);
    return `{${members.map(([k, v]) => `${JSON.stringify(k)}:${toJsonText(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * An object with exactly these own keys, `__proto__` included (an assignment would set the prototype
 * instead, and the key would never reach the body).
 */
export function objectFrom(entries: ReadonlyArray<readonly [string, unknown]>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of entries)
    Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  return out;
}

/** Percent-encodes UTF-8 bytes, lone surrogates included (as U+FFFD, where encodeURIComponent would throw). */
export function percentEncode(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const char = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-_.~]/.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Leaves
// ---------------------------------------------------------------------------------------------

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((code) => String.fromCharCode(code));

/** One code unit or code point, now and then a NUL or a lone surrogate. */
const wildChar = fc.oneof(
  { weight: 60, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
  { weight: 2, arbitrary: loneSurrogate },
  { weight: 1, arbitrary: fc.constant('\u0000') },
);

/** Text as no client should send it: control characters, NUL, unpaired surrogates, any plane. */
export const wildString = fc.string({ unit: wildChar, maxLength: 24 });

const SPECIAL_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udfff',
  'x\ud83d',
  '\ude00y',
  '\ud83d\ude00',
  '\u202e',
  '\ufeff',
  '\n',
  '\r\n',
  "' or '1'='1",
  '"; drop table agents; --',
  '$1',
  '%',
  '_',
  '\\',
  'null',
  'undefined',
  'NaN',
  'Infinity',
  '-0',
  '1e999',
  '0x10',
  'true',
  '{}',
  '[]',
  'infinity',
  '-infinity',
  'epoch',
  'allballs',
  'today',
  '2024-02-30',
  '2024-13-01',
  '0000-01-01',
  '-000001-01-01',
  '+275760-09-13',
  '294277-01-01',
  '5874898-01-01',
  '2024-01-01T25:00:00Z',
  '9999-12-31T23:59:60Z',
  '1970-01-01T00:00:00+25:00',
  '00000000-0000-0000-0000-000000000000',
  'ffffffff-ffff-ffff-ffff-ffffffffffff',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'a'.repeat(63),
  'a'.repeat(64),
];

/** Strings of the sizes that the DTOs' limits sit between, and well past them. */
const longString = fc.constantFrom(201, 256, 2001, 4001, 50_001, 100_001).map((length) => 'x'.repeat(length));

/** Hostile text short enough to repeat many times in one body. */
const shortString: fc.Arbitrary<string> = fc.oneof(fc.constantFrom(...SPECIAL_STRINGS), wildString);

export const nastyString: fc.Arbitrary<string> = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(...SPECIAL_STRINGS) },
  { weight: 6, arbitrary: wildString },
  { weight: 5, arbitrary: fc.string({ maxLength: 16 }) },
  { weight: 1, arbitrary: longString },
);

export const nastyNumber: fc.Arbitrary<number | RawJson> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      0,
      -1,
      1,
      0.5,
      -0.5,
      2 ** 31,
      -(2 ** 31) - 1,
      2 ** 53,
      2 ** 53 + 2,
      -(2 ** 53),
      2 ** 63,
      2 ** 64,
      1e21,
      1e300,
      -1e300,
      Number.MAX_VALUE,
      Number.MIN_VALUE,
      1e-7,
    ),
  },
  { weight: 2, arbitrary: fc.integer() },
  { weight: 2, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom(
        '1e999',
        '-1e999',
        '-0',
        '123456789012345678901234567890',
        '0.000000000000000000000000000001',
        '1E+400',
        '9007199254740993',
        '-9223372036854775809',
        '1.0',
        '5e-324',
      )
      .map((text) => new RawJson(text)),
  },
);

/** Keys that name Object.prototype members, operators of the where language, reserved columns, or nothing sane. */
const SPECIAL_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'valueOf',
  'hasOwnProperty',
  'isPrototypeOf',
  '__defineGetter__',
  '__lookupGetter__',
  'toJSON',
  'then',
  'length',
  '0',
  '',
  ' ',
  'id',
  'created_at',
  'updated_at',
  '$or',
  '$and',
  '$not',
  '$eq',
  '$gt',
  '$in',
  '$between',
  '$contains',
  '$null',
  'a\u0000b',
  '\ud800',
  'a.b',
  'a"b',
  "a'b",
  'Name',
  'select',
  'user',
  'order',
];

export const nastyKey: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...SPECIAL_KEYS) },
  { weight: 2, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 1, arbitrary: wildString },
);

const leaf: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: nastyString },
  { weight: 3, arbitrary: nastyNumber },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constant(null) },
);

const shortLeaf: fc.Arbitrary<unknown> = fc.oneof(shortString, nastyNumber, fc.boolean(), fc.constant(null));

/** `arbitrary`'s value once in `n` times, otherwise undefined. */
export function oneIn<T>(n: number, arbitrary: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> {
  return fc.oneof({ weight: n - 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary });
}

/** An object of `entries` (keys may repeat: the last one wins, as in a parsed body). */
export function objectOf(
  key: fc.Arbitrary<string>,
  value: fc.Arbitrary<unknown>,
  maxKeys = 4,
): fc.Arbitrary<Record<string, unknown>> {
  return fc.array(fc.tuple(key, value), { maxLength: maxKeys }).map(objectFrom);
}

/** Containers `levels` deep around `inner`, around the body parser's limit of 100 and well past it. */
const deeplyNested: fc.Arbitrary<unknown> = fc
  .tuple(fc.integer({ min: 8, max: 130 }), fc.constantFrom('array', 'object', 'mixed'), leaf)
  .map(([levels, kind, inner]) => {
    let value: unknown = inner;
    for (let i = 1; i < levels; i++) {
      const asArray = kind === 'array' || (kind === 'mixed' && i % 2 === 0);
      value = asArray ? [value] : { a: value };
    }
    return value;
  });

/** Wide rather than deep: thousands of keys or array items (the parser allows 100,000 values in all). */
const wide: fc.Arbitrary<unknown> = fc
  .tuple(fc.integer({ min: 50, max: 1500 }), fc.boolean())
  .map(([count, asArray]) =>
    asArray ? Array.from({ length: count }, (_, i) => i) : objectFrom(Array.from({ length: count }, (_, i) => [`k${i}`, i])),
  );

/** Any JSON value, built from the hostile leaves, keys and shapes above. */
export const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 20,
    arbitrary: fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small', maxDepth: 4 },
        leaf,
        fc.array(tie('value'), { maxLength: 4 }),
        objectOf(nastyKey, tie('value')),
      ),
    })).value,
  },
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: deeplyNested },
  { weight: 1, arbitrary: wide },
);

/** Request bodies that are not a JSON value at all, sent as application/json. */
export const brokenJsonText: fc.Arbitrary<RawJson> = fc
  .constantFrom(
    '',
    ' ',
    '{',
    '[',
    '{"a":',
    '{"a":1,}',
    "{'a':1}",
    'nul',
    'undefined',
    'NaN',
    '\u0000',
    '{"a":"\\ud800"}',
    '{"a":1}{"b":2}',
    '['.repeat(1000),
    '"\\u0000"',
    '{"__proto__":{"admin":true}}',
    '{"constructor":{"prototype":{"admin":true}}}',
  )
  .map((text) => new RawJson(text));

// ---------------------------------------------------------------------------------------------
// Values shaped by a schema
// ---------------------------------------------------------------------------------------------

/** Arbitraries that replace the schema's own for properties of these names, wherever they occur. */
export type ShapeHints = Record<string, fc.Arbitrary<unknown>>;

export interface ShapeOptions {
  hints?: ShapeHints;
  /**
   * Weight of a hostile value in place of any one value, against 6 for the schema's own. 0 keeps every
   * value of the right type and within the schema's limits, and adds no unknown members: bodies that
   * pass the DTO checks and reach the code behind them.
   */
  wrongWeight?: number;
}

/** Mostly a value of the schema's type and shape, sometimes a wrong one, at every level. */
export function shaped(schema: JsonSchema | undefined, options: ShapeOptions = {}, depth = 0): fc.Arbitrary<unknown> {
  if (!schema || depth > 6) return nastyValue;
  const right = rightShape(schema, options, depth);
  const wrongWeight = options.wrongWeight ?? 1;
  return wrongWeight ? fc.oneof({ weight: 6, arbitrary: right }, { weight: wrongWeight, arbitrary: nastyValue }) : right;
}

function merged(schema: JsonSchema): JsonSchema {
  if (!schema.allOf) return schema;
  const { allOf, ...rest } = schema;
  return allOf.reduce<JsonSchema>((acc, part) => ({ ...acc, ...merged(part) }), rest);
}

function rightShape(input: JsonSchema, options: ShapeOptions, depth: number): fc.Arbitrary<unknown> {
  const schema = merged(input);
  const hostile = (options.wrongWeight ?? 1) > 0;
  if (schema.enum?.length) return fc.constantFrom(...schema.enum);
  const alternatives = schema.oneOf ?? schema.anyOf;
  if (alternatives?.length) return fc.oneof(...alternatives.map((s) => shaped(s, options, depth + 1)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      return stringFor(schema.maxLength, hostile);
    case 'integer':
      return integerFor(schema.minimum, schema.maximum, hostile);
    case 'number': {
      // Mostly whole numbers (they pass number and integer checks alike); fractions for small ranges
      // (temperature) and for hostile bodies.
      const fraction = fc.double({
        min: schema.minimum ?? -1e6,
        max: schema.maximum ?? 1e6,
        noNaN: true,
        noDefaultInfinity: true,
      });
      const small = schema.maximum !== undefined && schema.maximum <= 10;
      return hostile || small
        ? fc.oneof(
            { weight: 3, arbitrary: integerFor(schema.minimum, schema.maximum, hostile) },
            { weight: 1, arbitrary: fraction },
          )
        : integerFor(schema.minimum, schema.maximum, hostile);
    }
    case 'boolean':
      return fc.boolean();
    case 'array':
      return arrayFor(schema, options, depth);
    case 'object':
      return objectFor(schema, options, depth);
    default:
      return nastyValue;
  }
}

function stringFor(maxLength: number | undefined, hostile: boolean): fc.Arbitrary<string> {
  const options: Array<fc.WeightedArbitrary<string>> = [
    { weight: 6, arbitrary: fc.string({ minLength: 1, maxLength: Math.min(12, maxLength ?? 12) }) },
    { weight: 2, arbitrary: identifier },
  ];
  if (hostile) options.push({ weight: 2, arbitrary: nastyString });
  if (hostile && maxLength !== undefined && maxLength <= 100_000) {
    options.push({ weight: 1, arbitrary: fc.constantFrom(maxLength, maxLength + 1).map((n) => 'y'.repeat(n)) });
  }
  return fc.oneof(...options);
}

function integerFor(minimum: number | undefined, maximum: number | undefined, hostile: boolean): fc.Arbitrary<unknown> {
  const min = minimum ?? -5;
  const max = maximum ?? Math.max(min + 1000, 1000);
  if (!hostile) return fc.integer({ min, max });
  return fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min, max }) },
    { weight: 1, arbitrary: fc.constantFrom(min - 1, max + 1, min + 0.5) },
    { weight: 1, arbitrary: nastyNumber },
    { weight: 1, arbitrary: fc.integer({ min, max }).map(String) },
  );
}

function arrayFor(schema: JsonSchema, options: ShapeOptions, depth: number): fc.Arbitrary<unknown[]> {
  const item = shaped(schema.items, options, depth + 1);
  const minLength = Math.min(schema.minItems ?? 0, 4);
  const lengths: Array<fc.WeightedArbitrary<unknown[]>> = [
    { weight: 6, arbitrary: fc.array(item, { minLength, maxLength: Math.max(minLength, Math.min(schema.maxItems ?? 4, 4)) }) },
  ];
  if ((options.wrongWeight ?? 1) > 0 && schema.maxItems !== undefined && schema.maxItems <= 1000) {
    // One past the limit, with cheap items so the size and not the items is what gets refused.
    lengths.push({ weight: 1, arbitrary: fc.constant(Array.from({ length: schema.maxItems + 1 }, () => 'z')) });
  }
  return fc.oneof(...lengths);
}

function objectFor(schema: JsonSchema, options: ShapeOptions, depth: number): fc.Arbitrary<unknown> {
  const properties = Object.entries(schema.properties ?? {});
  if (!properties.length) return objectOf(nastyKey, nastyValue);
  const hints = options.hints ?? {};
  const model = Object.fromEntries(
    properties.map(([name, property]) => [
      name,
      hints[name]
        ? fc.oneof({ weight: 3, arbitrary: hints[name] }, { weight: 1, arbitrary: shaped(property, options, depth + 1) })
        : shaped(property, options, depth + 1),
    ]),
  );
  const known = fc.record(model, { requiredKeys: (schema.required ?? []).filter((key) => key in model) });
  if (!(options.wrongWeight ?? 1)) return known;
  // Now and then a member too many: an unknown key, one that names an Object.prototype member, or thousands.
  const extra = fc.oneof(
    { weight: 6, arbitrary: objectOf(nastyKey, nastyValue, 2) },
    { weight: 1, arbitrary: wide.map((w) => (Array.isArray(w) ? { many: w } : w)) },
  );
  return fc
    .tuple(known, oneIn(4, extra))
    .map(([value, more]) => (more ? objectFrom([...Object.entries(value), ...Object.entries(more)]) : value));
}

/** snake_case names, the reserved ones, and names at the 63-character limit and past it. */
export const identifier: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.stringMatching(/^[a-z][a-z0-9]{0,6}(_[a-z0-9]{1,6}){0,2}$/) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'id',
      'created_at',
      'updated_at',
      'select',
      'user',
      'order',
      'Abc',
      '1abc',
      'a-b',
      'a'.repeat(63),
      'a'.repeat(64),
    ),
  },
);

// ---------------------------------------------------------------------------------------------
// The data engine's languages
// ---------------------------------------------------------------------------------------------

export interface FuzzField {
  name: string;
  type: string;
  options?: string[];
}

/** Values for a field of this type: right ones in every format the type might take, and wrong ones. */
export function fieldValue(field: FuzzField, ids: readonly string[] = [], hostile = true): fc.Arbitrary<unknown> {
  const right = ((): fc.Arbitrary<unknown> => {
    switch (field.type) {
      case 'integer':
        return fc.oneof(fc.integer(), fc.constantFrom(2 ** 31, -(2 ** 31) - 1, 2 ** 53, 1.5, '12'));
      case 'number':
      case 'currency':
      case 'percent':
        return fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.constantFrom(1e300, '1.5'));
      case 'boolean':
        return fc.oneof(fc.boolean(), fc.constantFrom('true', 1, 0));
      case 'date':
        return fc.oneof(
          fc.date({ noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10)),
          fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
        );
      case 'datetime':
        return fc.oneof(
          fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
          fc.date({ noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10)),
          fc.integer().map(String),
        );
      case 'select':
        return fc.constantFrom(...(field.options ?? ['a']), 'not_an_option');
      case 'multiselect':
        return fc.array(fc.constantFrom(...(field.options ?? ['a']), 'not_an_option'), { maxLength: 4 });
      case 'lookup':
        return fc.oneof(fc.constantFrom(...ids, '00000000-0000-4000-8000-000000000000'), fc.uuid());
      case 'json':
        return nastyValue;
      default:
        return fc.oneof(fc.string({ maxLength: 20 }), fc.emailAddress(), fc.webUrl());
    }
  })();
  if (!hostile) return right;
  return fc.oneof({ weight: 3, arbitrary: right }, { weight: 1, arbitrary: leaf }, { weight: 1, arbitrary: nastyValue });
}

/** The compiler's operators and two it does not have, which must be refused. */
const WHERE_OPERATORS = [...FIELD_OPERATORS, '$regex', '$like'];

/** Field names as a client might send them: the object's, the system columns, unknown and hostile ones. */
export function fieldName(fields: readonly FuzzField[]): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...fields.map((f) => f.name), 'id', 'created_at', 'updated_at') },
    { weight: 1, arbitrary: nastyKey },
  );
}

const TEXT_TYPES = ['text', 'textarea', 'email', 'url', 'phone', 'select'];
const NUMERIC_TYPES = ['number', 'currency', 'percent', 'integer'];
const TEMPORAL_TYPES = ['date', 'datetime'];
const EQUALITY = ['$eq', '$ne', '$in', '$nin', '$null'];
const ORDERING = ['$gt', '$gte', '$lt', '$lte', '$between'];
const PATTERN = ['$contains', '$notContains', '$startsWith', '$endsWith'];

/** The operators the where language takes on a field of this type (the README's table). */
function operatorsFor(type: string): string[] {
  if (TEXT_TYPES.includes(type)) return [...EQUALITY, ...ORDERING, ...PATTERN];
  if (NUMERIC_TYPES.includes(type) || TEMPORAL_TYPES.includes(type)) return [...EQUALITY, ...ORDERING];
  if (type === 'multiselect') return [...EQUALITY, '$contains', '$notContains'];
  if (type === 'json') return ['$eq', '$ne', '$null'];
  return EQUALITY;
}

/**
 * `where` trees that the compiler should accept: operators the field's type takes, operands of the
 * operator's shape. The values are still the field value generator's, extreme ones included (dates in
 * year 275760, 2^53, text with unpaired surrogates), so the SQL behind a valid tree gets them.
 */
export function validWhereArb(fields: readonly FuzzField[], ids: readonly string[] = []): fc.Arbitrary<unknown> {
  const condition = (field: FuzzField): fc.Arbitrary<unknown> => {
    const value = fieldValue(field, ids, false);
    const scalar = field.type === 'multiselect' ? fc.constantFrom(...(field.options ?? ['a'])) : value;
    return fc.oneof(
      value,
      fc.constantFrom(...operatorsFor(field.type)).chain((operator) => {
        const operand =
          operator === '$null'
            ? fc.boolean()
            : operator === '$in' || operator === '$nin'
              ? fc.array(scalar, { minLength: 1, maxLength: 3 })
              : operator === '$between'
                ? fc.tuple(value, value)
                : PATTERN.includes(operator) && field.type !== 'multiselect'
                  ? fc.string({ maxLength: 8 })
                  : value;
        return operand.map((o) => objectFrom([[operator, o]]));
      }),
    );
  };
  const fieldCondition = fc.constantFrom(...fields).chain((field) => condition(field).map((c) => objectFrom([[field.name, c]])));
  return fc.letrec((tie) => ({
    where: fc.oneof(
      { depthSize: 'small', maxDepth: 4 },
      { weight: 4, arbitrary: fieldCondition },
      {
        weight: 1,
        arbitrary: fc
          .tuple(fc.constantFrom('$and', '$or'), fc.array(tie('where'), { minLength: 1, maxLength: 3 }))
          .map(([op, list]) => objectFrom([[op, list]])),
      },
      { weight: 1, arbitrary: tie('where').map((inner) => ({ $not: inner })) },
    ),
  })).where;
}

/** A coherent aggregate query: group-by fields, functions on fields of the types they take, orderBy by its aliases. */
export function validAggregateArb(
  fields: readonly FuzzField[],
  ids: readonly string[] = [],
): fc.Arbitrary<Record<string, unknown>> {
  const numeric = fields.filter((f) => NUMERIC_TYPES.includes(f.type));
  const orderable = fields.filter(
    (f) => NUMERIC_TYPES.includes(f.type) || TEMPORAL_TYPES.includes(f.type) || TEXT_TYPES.includes(f.type),
  );
  const groupable = fields.filter((f) => f.type !== 'json' && f.type !== 'textarea').map((f) => f.name);
  const options: Array<fc.Arbitrary<Record<string, unknown>>> = [
    fc.constant({ function: 'count' }),
    fc.constantFrom(...fields).map((f) => ({ function: 'count_distinct', field: f.name })),
  ];
  if (numeric.length) {
    options.push(
      fc.tuple(fc.constantFrom('sum', 'avg'), fc.constantFrom(...numeric)).map(([fn, f]) => ({ function: fn, field: f.name })),
    );
  }
  if (orderable.length) {
    options.push(
      fc.tuple(fc.constantFrom('min', 'max'), fc.constantFrom(...orderable)).map(([fn, f]) => ({ function: fn, field: f.name })),
    );
  }
  return fc
    .tuple(
      fc.subarray(groupable, { maxLength: Math.min(3, groupable.length) }),
      fc.array(fc.oneof(...options), { minLength: 1, maxLength: 3 }),
      oneIn(2, validWhereArb(fields, ids)),
      oneIn(3, fc.integer({ min: 1, max: 2000 })),
    )
    .chain(([groupBy, aggregations, where, limit]) => {
      const named = aggregations.map((a, i) => ({ ...a, alias: `a${i}` }));
      const sortable = [...named.map((a) => a.alias), ...groupBy];
      return fc
        .array(fc.record({ field: fc.constantFrom(...sortable), order: fc.constantFrom('asc', 'desc') }), { maxLength: 2 })
        .map((orderBy) => {
          const query: Record<string, unknown> = { groupBy, aggregations: named, orderBy };
          if (where !== undefined) query.where = where;
          if (limit !== undefined) query.limit = limit;
          return query;
        });
    });
}

/** A field definition the metadata API should accept: options for (multi)selects, a reference for lookups. */
export function validFieldArb(types: readonly string[], objects: readonly string[]): fc.Arbitrary<Record<string, unknown>> {
  const name = fc.stringMatching(/^[a-z][a-z0-9]{2,8}(_[a-z0-9]{1,6})?$/);
  const label = fc.string({ minLength: 1, maxLength: 20 });
  const options = fc.uniqueArray(fc.stringMatching(/^[a-z]{1,8}$/), { minLength: 1, maxLength: 4 });
  const optional = fc.record(
    { required: fc.boolean(), indexed: fc.boolean(), description: fc.string({ maxLength: 20 }) },
    { requiredKeys: [] },
  );
  // One arbitrary per type, built once (building them per value is what makes generation slow).
  const perType = types.map((type) =>
    fc
      .tuple(
        fc.record({
          name,
          label,
          type: fc.constant(type),
          ...(type === 'select' || type === 'multiselect' ? { options } : {}),
          ...(type === 'lookup' ? { reference: fc.constantFrom(...objects) } : {}),
        }),
        optional,
      )
      .map(([required, rest]) => ({ ...required, ...rest })),
  );
  return fc.oneof(...perType);
}

/** `where` trees: field conditions with every operator, right and wrong operands, and/or/not nesting. */
export function whereArb(fields: readonly FuzzField[], ids: readonly string[] = []): fc.Arbitrary<unknown> {
  const condition = (field: FuzzField): fc.Arbitrary<unknown> => {
    const value = fc.oneof(
      { weight: 3, arbitrary: fieldValue(field, ids, false) },
      { weight: 1, arbitrary: fieldValue(field, ids) },
    );
    const operand = fc.oneof(
      { weight: 4, arbitrary: value },
      { weight: 2, arbitrary: fc.array(value, { maxLength: 3 }) },
      { weight: 1, arbitrary: fc.constant(Array.from({ length: 1001 }, (_, i) => i)) },
    );
    return fc.oneof(value, objectOf(fc.constantFrom(...WHERE_OPERATORS), operand, 3));
  };
  const fieldCondition = fc
    .oneof(
      { weight: 4, arbitrary: fc.constantFrom(...fields).chain((field) => fc.tuple(fc.constant(field.name), condition(field))) },
      { weight: 1, arbitrary: fc.tuple(fieldName(fields), nastyValue) },
    )
    .map((entry) => [entry] as const)
    .map(objectFrom);
  return fc.letrec((tie) => ({
    where: fc.oneof(
      { depthSize: 'small', maxDepth: 5 },
      { weight: 8, arbitrary: fieldCondition },
      {
        weight: 2,
        arbitrary: fc
          .tuple(fc.constantFrom('$and', '$or'), fc.array(tie('where'), { maxLength: 3 }))
          .map(([op, list]) => objectFrom([[op, list]])),
      },
      { weight: 1, arbitrary: tie('where').map((inner) => ({ $not: inner })) },
      {
        weight: 1,
        arbitrary: fc.tuple(tie('where'), tie('where')).map(([a, b]) => objectFrom([...entriesOf(a), ...entriesOf(b)])),
      },
      { weight: 1, arbitrary: nastyValue },
    ),
  })).where;
}

/** The members of an object; anything else becomes one member, so two trees can be merged into one. */
function entriesOf(value: unknown): Array<[string, unknown]> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? Object.entries(value) : [['$or', value]];
}

/** `orderBy` lists over these names (fields, or aggregate aliases), with wrong directions and shapes. */
export function orderByArb(names: fc.Arbitrary<string>): fc.Arbitrary<unknown> {
  const item = fc.oneof(
    {
      weight: 4,
      arbitrary: fc.record(
        { field: names, order: fc.constantFrom('asc', 'desc', 'ASC', 'sideways', '') },
        { requiredKeys: ['field'] },
      ),
    },
    { weight: 1, arbitrary: nastyValue },
  );
  return fc.oneof({ weight: 4, arbitrary: fc.array(item, { maxLength: 6 }) }, { weight: 1, arbitrary: nastyValue });
}

/** `aggregations` of the aggregate route and tool. */
export function aggregationsArb(fields: readonly FuzzField[]): fc.Arbitrary<unknown> {
  const aggregation = fc.record(
    {
      function: fc.oneof(
        { weight: 8, arbitrary: fc.constantFrom('count', 'sum', 'avg', 'min', 'max', 'count_distinct') },
        { weight: 1, arbitrary: fc.constantFrom('median', 'COUNT', 'sum(amount)') },
        { weight: 1, arbitrary: nastyString },
      ),
      field: fieldName(fields),
      alias: fc.oneof({ weight: 8, arbitrary: identifier }, { weight: 1, arbitrary: nastyString }),
    },
    { requiredKeys: ['function', 'alias'] },
  );
  return fc.oneof(
    {
      weight: 5,
      arbitrary: fc.array(fc.oneof({ weight: 10, arbitrary: aggregation }, { weight: 1, arbitrary: nastyValue }), {
        minLength: 1,
        maxLength: 4,
      }),
    },
    { weight: 1, arbitrary: nastyValue },
  );
}

/** A JSON Schema as a client tool might declare it: valid ones, with `$id`, patternProperties and bad patterns, or broken. */
export const clientToolSchema: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  // At maxDepth, oneof always takes its first alternative: it must not recurse.
  schema: fc.oneof(
    { depthSize: 'small', maxDepth: 3 },
    { weight: 1, arbitrary: fc.boolean() },
    {
      weight: 4,
      arbitrary: fc.record(
        {
          type: fc.oneof(fc.constantFrom('object', 'string', 'number', 'integer', 'boolean', 'array', 'null'), shortLeaf),
          $id: fc.oneof(fc.webUrl(), fc.constantFrom('urn:fuzz:a', '#anchor', 'relative/id', ''), shortString),
          $schema: fc.constantFrom(
            'http://json-schema.org/draft-07/schema#',
            'https://json-schema.org/draft/2020-12/schema',
            'http://json-schema.org/draft-04/schema#',
            'not a uri',
          ),
          $ref: fc.constantFrom('#', '#/definitions/x', 'https://example.com/remote.json', '#/properties/__proto__'),
          properties: objectOf(nastyKey, tie('schema'), 2),
          patternProperties: objectOf(
            fc.constantFrom('^a', '^[0-9]+$', '(', '[', '\\', '(a+)+$', '\\p{L}', '.*'),
            tie('schema'),
            2,
          ),
          pattern: fc.constantFrom('^[a-z]+$', '(', '(?<n>a)\\k<n>', '\\', '(a+)+$'),
          items: tie('schema'),
          required: fc.array(shortString, { maxLength: 3 }),
          enum: fc.array(shortLeaf, { maxLength: 3 }),
          minimum: nastyNumber,
          additionalProperties: fc.oneof(fc.boolean(), tie('schema')),
          description: shortString,
        },
        { requiredKeys: [] },
      ),
    },
    { weight: 1, arbitrary: shortLeaf },
  ),
})).schema;
