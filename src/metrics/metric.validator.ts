import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { SqlParams } from '../database/sql-params';
import { AGGREGATE_FUNCTIONS, type AggregateFunction } from '../data/data.types';
import { clip, compileWhere } from '../data/where.compiler';
import { definitionView } from '../metadata/computed-fields';
import { fieldTypeOf } from '../metadata/field-types';
import { type FieldMeta, type ObjectMeta } from '../metadata/object-metadata.types';
import type { MetricDefinition, MetricMeasure } from './metric.types';

/** What a metric write checks a definition against (read in the write's transaction). */
export interface MetricCatalog {
  object(name: string): Promise<ObjectMeta | undefined>;
  metric(name: string): Promise<MetricDefinition | undefined>;
}

/** A checked definition and every "object.field" it reads. */
export interface CheckedMetric {
  definition: MetricDefinition;
  uses: string[];
}

/**
 * Checks a metric definition against its object's fields (and, for a ratio, the metrics it divides).
 * Every refusal is `invalid_metric` naming the bad part (`details.part`): an unknown object or field, a sum
 * over a text field, a filter the where compiler refuses, a ratio of unknown, non-simple or other objects'
 * metrics or of the extreme of a field that is no number, a time field that is not a date, a dimension whose
 * lookup or target field does not exist.
 */
export async function checkMetric(input: MetricDefinition, catalog: MetricCatalog): Promise<CheckedMetric> {
  const object = await catalog.object(input.object);
  if (!object) throw invalid('object', `Unknown object "${clip(input.object)}"`);
  const uses = new Set<string>();
  const use = (o: ObjectMeta, f: FieldMeta) => uses.add(`${o.name}.${f.name}`);
  const definition: MetricDefinition = {
    name: input.name,
    label: input.label,
    object: object.name,
    type: input.type,
    dimensions: [],
    synonyms: [...new Set((input.synonyms ?? []).map((s) => s.trim()).filter(Boolean))],
  };
  if (input.description) definition.description = input.description;

  if (input.type === 'simple') {
    if (input.numerator !== undefined || input.denominator !== undefined) {
      throw invalid('numerator', 'Only ratio metrics have a numerator and a denominator');
    }
    definition.measure = checkMeasure(object, input.measure, use);
    if (input.filter !== undefined) {
      if (!isPlainObject(input.filter)) throw invalid('filter', 'filter must be a where object like {"stage": "won"}');
      try {
        compileWhere(definitionView(object), input.filter, new SqlParams());
      } catch (error) {
        if (!(error instanceof DomainError)) throw error;
        throw invalid('filter', `filter: ${error.message}`, { cause: { code: error.code, details: error.details } });
      }
      for (const name of whereFields(input.filter))
        use(
          object,
          object.fields.find((f) => f.name === name)!,
        );
      definition.filter = input.filter;
    }
  } else {
    if (input.measure !== undefined)
      throw invalid('measure', 'A ratio metric has no measure: it divides numerator by denominator');
    if (input.filter !== undefined) {
      throw invalid('filter', 'A ratio metric has no filter of its own: filter its numerator and denominator metrics');
    }
    for (const part of ['numerator', 'denominator'] as const) {
      const name = input[part];
      if (typeof name !== 'string' || !name) throw invalid(part, `A ratio metric needs a ${part} (a metric name)`);
      if (name === input.name) throw invalid(part, `A ratio cannot divide itself`);
      const metric = await catalog.metric(name);
      if (!metric) throw invalid(part, `${part}: unknown metric "${clip(name)}"`);
      if (metric.type !== 'simple') throw invalid(part, `${part}: "${name}" is a ratio; a ratio divides simple metrics`);
      if (metric.object !== object.name) {
        throw invalid(part, `${part}: "${name}" counts "${metric.object}" records; this ratio is over "${object.name}"`);
      }
      // min/max keep their field's type: the extreme of a date or a text is no number to divide.
      const field = metric.measure?.field === undefined ? undefined : object.fields.find((f) => f.name === metric.measure!.field);
      if (
        (metric.measure?.function === 'min' || metric.measure?.function === 'max') &&
        field &&
        fieldTypeOf(field.type).family !== 'numeric'
      ) {
        throw invalid(
          part,
          `${part}: "${name}" is the ${metric.measure.function} of ${field.type} field "${field.name}", not a number`,
        );
      }
      definition[part] = name;
    }
  }

  if (input.timeField !== undefined) {
    const field = findField(object, input.timeField, 'timeField');
    if (fieldTypeOf(field.type).family !== 'temporal') {
      throw invalid('timeField', `timeField "${field.name}" is ${field.type}; it must be a date or datetime field`);
    }
    use(object, field);
    definition.timeField = field.name;
  }

  for (const dimension of [...new Set(input.dimensions ?? [])]) {
    const [first, second, ...rest] = dimension.split('.');
    if (rest.length)
      throw invalid('dimensions', `Dimension "${clip(dimension)}" has more than one dot; use "field" or "lookup.field"`);
    const field = findField(object, first, 'dimensions');
    if (second === undefined) {
      if (!fieldTypeOf(field.type).groups) {
        throw invalid('dimensions', `Dimension "${field.name}" is a ${field.type} field, which cannot be grouped by`);
      }
      use(object, field);
    } else {
      if (field.type !== 'lookup' || !field.reference) {
        throw invalid('dimensions', `Dimension "${clip(dimension)}": "${field.name}" is ${field.type}, not a lookup field`);
      }
      const target = await catalog.object(field.reference);
      const targetField = target?.fields.find((f) => f.name === second);
      if (!target || !targetField) {
        throw invalid('dimensions', `Dimension "${clip(dimension)}": "${field.reference}" has no field "${clip(second)}"`, {
          availableFields: target?.fields.map((f) => f.name),
        });
      }
      if (!fieldTypeOf(targetField.type).groups) {
        throw invalid('dimensions', `Dimension "${dimension}" is a ${targetField.type} field, which cannot be grouped by`);
      }
      use(object, field);
      use(target, targetField);
    }
    definition.dimensions.push(dimension);
  }
  return { definition, uses: [...uses].sort() };
}

function checkMeasure(object: ObjectMeta, input: unknown, use: (o: ObjectMeta, f: FieldMeta) => void): MetricMeasure {
  if (!isPlainObject(input)) throw invalid('measure', 'A simple metric needs a measure { function, field? }');
  for (const key of Object.keys(input)) {
    if (key !== 'function' && key !== 'field') throw invalid('measure', `measure has an unknown key "${clip(key)}"`);
  }
  const fn = input.function;
  if (typeof fn !== 'string' || !(AGGREGATE_FUNCTIONS as readonly string[]).includes(fn)) {
    throw invalid('measure.function', `Unknown measure function "${clip(String(fn))}"`, {
      availableFunctions: AGGREGATE_FUNCTIONS,
    });
  }
  const measure: MetricMeasure = { function: fn as AggregateFunction };
  if (input.field === undefined || input.field === null) {
    if (fn !== 'count') throw invalid('measure.field', `${fn} needs a field`);
    return measure;
  }
  if (typeof input.field !== 'string') throw invalid('measure.field', 'measure.field must be a field name');
  const field = findField(object, input.field, 'measure.field');
  const measures: readonly string[] = fieldTypeOf(field.type).measures;
  if ((fn === 'sum' || fn === 'avg') && !measures.includes(fn)) {
    throw invalid('measure.field', `${fn} needs a numeric field; "${field.name}" is ${field.type}`);
  }
  if ((fn === 'min' || fn === 'max') && !measures.includes(fn)) {
    throw invalid('measure.field', `${fn} is not defined for ${field.type} field "${field.name}"`);
  }
  use(object, field);
  measure.field = field.name;
  return measure;
}

function findField(object: ObjectMeta, name: string, part: string): FieldMeta {
  const field = object.fields.find((f) => f.name === name);
  if (!field) {
    throw invalid(part, `${part}: unknown field "${clip(name)}" on "${object.name}"`, {
      availableFields: object.fields.map((f) => f.name),
    });
  }
  return field;
}

/** Field names a (valid) where object names, through $and / $or / $not. */
export function whereFields(where: unknown): string[] {
  if (Array.isArray(where)) return where.flatMap(whereFields);
  if (!isPlainObject(where)) return [];
  return Object.entries(where).flatMap(([key, value]) => (key.startsWith('$') ? whereFields(value) : [key]));
}

function invalid(part: string, message: string, details: Record<string, unknown> = {}): DomainError {
  return new DomainError('invalid_metric', message, { part, ...details });
}
