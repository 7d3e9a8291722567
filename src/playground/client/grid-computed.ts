import type { Change, FieldSummary } from './grid-api';

/**
 * The kinds of field whose value the server computes when it is read: never written, shown read-only. Links (the
 * ids of linked records) are written through the records API, not typed into a cell: read-only here too.
 */
const COMPUTED_TYPES = new Set(['formula', 'rollup', 'count', 'lookup_value', 'links']);

export function isComputedField(field: Pick<FieldSummary, 'type'> | undefined): boolean {
  return !!field && COMPUTED_TYPES.has(field.type);
}

/** The fields a formula's expression names (`{name}`), text literals left out. */
export function formulaFieldNames(expression: string): string[] {
  const names = new Set<string>();
  let at = 0;
  while (at < expression.length) {
    const char = expression[at];
    if (char === '"' || char === "'") {
      at++;
      while (at < expression.length && expression[at] !== char) at += expression[at] === '\\' ? 2 : 1;
      at++;
    } else if (char === '{') {
      const end = expression.indexOf('}', at);
      if (end < 0) break;
      const name = expression.slice(at + 1, end).trim();
      if (name) names.add(name);
      at = end + 1;
    } else {
      at++;
    }
  }
  return [...names];
}

/** The related object of a rollup's or count's relation (`deal.account` → deal, account). */
function relationParts(relation: string | undefined): { object: string; via: string } | undefined {
  const [object, via, ...rest] = (relation ?? '').split('.');
  return object && via && !rest.length ? { object, via } : undefined;
}

/** A `where` as a short text: `status = open and amount > 100`. */
function whereText(where: unknown): string {
  if (typeof where !== 'object' || where === null || Array.isArray(where)) return JSON.stringify(where);
  const OPERATORS: Record<string, string> = {
    $eq: '=',
    $ne: '≠',
    $gt: '>',
    $gte: '≥',
    $lt: '<',
    $lte: '≤',
    $in: 'in',
    $nin: 'not in',
    $contains: 'contains',
    $startsWith: 'starts with',
    $endsWith: 'ends with',
  };
  const value = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));
  const parts = Object.entries(where as Record<string, unknown>).map(([key, condition]) => {
    if (key === '$and' || key === '$or') {
      const list = Array.isArray(condition) ? condition : [];
      return `(${list.map(whereText).join(key === '$and' ? ' and ' : ' or ')})`;
    }
    if (key === '$not') return `not (${whereText(condition)})`;
    if (typeof condition !== 'object' || condition === null || Array.isArray(condition)) return `${key} = ${value(condition)}`;
    return Object.entries(condition as Record<string, unknown>)
      .map(([op, operand]) =>
        op === '$null' ? `${key} is ${operand ? '' : 'not '}empty` : `${key} ${OPERATORS[op] ?? op} ${value(operand)}`,
      )
      .join(' and ');
  });
  return parts.join(' and ');
}

/**
 * How the server computes a field, in words, for the column's tooltip: the formula's expression, "sum of
 * deal.amount where status = open", "industry of the account that account points at". Undefined for a stored field.
 */
export function computedText(field: FieldSummary, fields: FieldSummary[]): string | undefined {
  if (!isComputedField(field)) return undefined;
  const where = field.filter === undefined || field.filter === null ? '' : ` where ${whereText(field.filter)}`;
  switch (field.type) {
    case 'formula':
      return `Formula: ${field.expression ?? '?'}`;
    case 'rollup': {
      const relation = relationParts(field.relation);
      const object = relation?.object ?? field.relation ?? '?';
      const of = field.field ? `${object}.${field.field}` : `${object} records`;
      return `Rollup: ${field.function ?? '?'} of ${of}${relation ? ` (by ${relation.via})` : ''}${where}`;
    }
    case 'count': {
      const relation = relationParts(field.relation);
      return `Count: number of ${relation?.object ?? field.relation ?? '?'} records${relation ? ` (by ${relation.via})` : ''}${where}`;
    }
    case 'links':
      return `Links: ids of the linked ${field.reference ?? '?'} records (read-only here)`;
    default: {
      const target = fields.find((other) => other.name === field.through)?.reference;
      return `Lookup: ${field.field ?? '?'} of the ${target ?? 'record'} that ${field.through ?? '?'} points at`;
    }
  }
}

/** One way a change of another object's record makes computed values of the grid's rows out of date. */
export type Dependency =
  /** A rollup or count: the changed record's lookup `via` names the row (a record moved or deleted: any row). */
  | { kind: 'children'; object: string; via: string; reads?: string }
  /** A lookup_value: the rows whose lookup `through` names the changed record. */
  | { kind: 'target'; object: string; through: string; reads?: string }
  /** A value computed further away (a lookup value of a rollup, a rollup of lookup values): any row may change. */
  | { kind: 'any'; object: string };

/** How many objects away from the grid's values computed from values computed elsewhere are followed. */
const MAX_DEPTH = 3;

function addDependency(dependencies: Map<string, Dependency[]>, dependency: Dependency): void {
  const list = dependencies.get(dependency.object) ?? [];
  if (!list.some((other) => JSON.stringify(other) === JSON.stringify(dependency))) list.push(dependency);
  dependencies.set(dependency.object, list);
}

/**
 * What the shown computed fields read of other objects, by object: their rollups', counts' and lookup values'
 * relations, and those of the computed fields the shown formulas read (at any depth within this object).
 */
export function computedDependencies(fields: FieldSummary[], shown: string[]): Map<string, Dependency[]> {
  const byName = new Map(fields.map((field) => [field.name, field]));
  const seen = new Set<string>();
  const dependencies = new Map<string, Dependency[]>();
  const visit = (name: string) => {
    const field = byName.get(name);
    if (seen.has(name) || !field || !isComputedField(field)) return;
    seen.add(name);
    const reads = field.field ? { reads: field.field } : {};
    if (field.type === 'formula') {
      for (const input of formulaFieldNames(field.expression ?? '')) visit(input);
    } else if (field.type === 'lookup_value') {
      const target = field.through ? byName.get(field.through)?.reference : undefined;
      if (target && field.through)
        addDependency(dependencies, { kind: 'target', object: target, through: field.through, ...reads });
    } else {
      const relation = relationParts(field.relation);
      if (relation) addDependency(dependencies, { kind: 'children', object: relation.object, via: relation.via, ...reads });
    }
  };
  for (const name of shown) visit(name);
  return dependencies;
}

/**
 * The objects whose changes may change the shown computed values, with how: those the fields read directly
 * (computedDependencies), and, when what they read there is itself computed from further records (a lookup value
 * of a rollup, a rollup of lookup values), those further objects too, up to MAX_DEPTH away, where any change may
 * touch any row. `describe` gives another object's fields as the key sees them (a refusal: not followed).
 */
export async function followedObjects(
  fields: FieldSummary[],
  shown: string[],
  describe: (object: string) => Promise<FieldSummary[]>,
): Promise<Map<string, Dependency[]>> {
  const followed = computedDependencies(fields, shown);
  const reads = (dependencies: Map<string, Dependency[]>) =>
    [...dependencies.values()]
      .flat()
      .flatMap((dependency) =>
        dependency.kind !== 'any' && dependency.reads ? [{ object: dependency.object, field: dependency.reads }] : [],
      );
  const visited = new Set<string>();
  let frontier = reads(followed);
  for (let depth = 1; depth < MAX_DEPTH && frontier.length; depth++) {
    const next: Array<{ object: string; field: string }> = [];
    for (const { object, field } of frontier) {
      if (visited.has(`${object}.${field}`)) continue;
      visited.add(`${object}.${field}`);
      let related: FieldSummary[];
      try {
        related = await describe(object);
      } catch {
        continue;
      }
      const further = computedDependencies(related, [field]);
      for (const furtherObject of further.keys()) addDependency(followed, { kind: 'any', object: furtherObject });
      next.push(...reads(further));
    }
    frontier = next;
  }
  return followed;
}

/**
 * The rows (of those shown, with the lookups they hold) whose computed values a change of a record of another
 * object may have changed: all of them when it cannot tell (a child deleted, or moved to another parent).
 */
export function affectedRows(
  change: Change,
  dependencies: Dependency[],
  rows: ReadonlyMap<string, Record<string, unknown>>,
): string[] {
  const affected = new Set<string>();
  for (const dependency of dependencies) {
    if (dependency.kind === 'any') return [...rows.keys()];
    if (dependency.kind === 'children') {
      // A delete carries no record, and a move leaves the former parent unknown: every row shown may be it.
      if (!change.record || change.op === 'delete' || (change.op === 'update' && change.changedFields.includes(dependency.via))) {
        return [...rows.keys()];
      }
      const parent = idOf(change.record[dependency.via]);
      if (parent !== undefined && rows.has(parent)) affected.add(parent);
    } else {
      for (const [id, row] of rows) if (idOf(row[dependency.through]) === change.id) affected.add(id);
    }
  }
  return [...affected];
}

/** A lookup's value as a record id (ids come as text, or as numbers), or undefined without one. */
function idOf(value: unknown): string | undefined {
  return typeof value === 'string' ? value : typeof value === 'number' ? String(value) : undefined;
}
