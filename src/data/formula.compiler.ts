import { DomainError } from '../common/domain-error';
import { objectTable, quoteIdent } from '../database/sql-identifier';
import { SqlParams } from '../database/sql-params';
import {
  computedSql,
  isComputed,
  registerStoredFormulaSql,
  registerStoredValueSql,
  type RelatedSqlParts,
} from '../metadata/computed-fields';
import type { FormulaNode, FormulaResultType, FormulaValueType } from '../metadata/formula';
import type { FieldMeta, ObjectMeta } from '../metadata/object-metadata.types';

/**
 * Formula fields in SQL: a checked expression (metadata/formula.ts) compiled to one SQL expression over
 * the row's columns, so Postgres evaluates it wherever the field is used (select list, where, order by,
 * keyset conditions, group by, aggregates). Every literal is a bind parameter; identifiers come from
 * metadata through quoteIdent. Division (and %) by zero gives null, never an error; integer arguments
 * (ROUND digits, LEFT/RIGHT lengths, DATE_ADD amounts) are clamped so no cast can overflow.
 */

/**
 * How the engine reads a field: its column (`"name"` or `"alias"."name"`), or for a computed field the SQL of
 * its kind (metadata/computed-fields.ts), built from the primitives here. A computed field needs the
 * statement's `params`.
 */
export function fieldSql(field: FieldMeta, params?: SqlParams, tableAlias?: string): string {
  if (!isComputed(field)) return qualified(tableAlias, field.name);
  if (!params) throw new Error(`computed field "${field.name}" read without bind parameters`);
  return computedSql(field, {
    expression: (formula) => formulaSql(formula, params, tableAlias),
    related: (related) => relatedParts(related, params, tableAlias),
    column: (stored) => qualified(tableAlias, stored.name),
  });
}

/**
 * A stored rollup's or count's value over every related record (the whole `target`, no caller's row filter),
 * for the record aliased `outerAlias`, with its bound values written as literals: what the triggers and the
 * fill job store (metadata/stored-fields.ts). Only metadata-checked filter values become literals.
 */
export function storedValue(field: FieldMeta, target: ObjectMeta, outerAlias: string): string {
  const params = new SqlParams();
  const computed: FieldMeta = {
    ...field,
    related: { ...field.related!, stored: false, filled: false, scope: { ...target, rowFilter: undefined } },
  };
  return inlineParams(fieldSql(computed, params, outerAlias), params.values);
}

/** A bound value as a SQL literal (text quoted with '' doubled; arrays as ARRAY[...]). */
function sqlLiteral(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error('a non-finite number cannot be written inline');
    return `(${String(value)})`;
  }
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (Array.isArray(value)) return value.length ? `array[${value.map(sqlLiteral).join(', ')}]` : `'{}'`;
  const text = value instanceof Date ? value.toISOString() : typeof value === 'string' ? value : JSON.stringify(value);
  if (text.includes('\u0000')) throw new Error('text with NUL cannot be written inline');
  return `'${text.replace(/'/g, "''")}'`;
}

/** `$n` placeholders replaced by their values as literals, in one pass (a literal is never read again). */
export function inlineParams(sql: string, values: readonly unknown[]): string {
  return sql.replace(/\$(\d+)/g, (_match, n: string) => {
    const index = Number(n) - 1;
    if (index < 0 || index >= values.length) throw new Error(`no value for $${n}`);
    return sqlLiteral(values[index]);
  });
}

registerStoredValueSql(storedValue);

/** A stored formula's expression over `alias`, its literals inline (a trigger body, the fill job's statement). */
export function storedFormula(field: FieldMeta, alias: string): string {
  const params = new SqlParams();
  return inlineParams(formulaSql(field, params, alias), params.values);
}

registerStoredFormulaSql(storedFormula);

/** A formula's expression with its result type. */
function formulaSql(field: FieldMeta, params: SqlParams, tableAlias?: string): string {
  const { node, resultType, related } = field.formula!;
  if (!node) return `null::${RESULT_CASTS[resultType]}`;
  return resultSql(compileNode(node, { params, tableAlias, related }), node.type, resultType);
}

/**
 * A table alias as SQL: a metadata-shaped name (quoted by quoteIdent), or one of the engine's own aliases,
 * written already quoted as `"__name"` (a write's `"__row"`), which no metadata name can be.
 */
function aliasSql(alias: string): string {
  return /^"__[a-z_]+"$/.test(alias) ? alias : quoteIdent(alias);
}

/** `"column"` or `alias."column"`. */
function qualified(alias: string | undefined, column: string): string {
  return alias === undefined ? quoteIdent(column) : `${aliasSql(alias)}.${quoteIdent(column)}`;
}

/** `fieldSql(...) as "name"`, or the bare column when it is one. */
export function selectSql(field: FieldMeta, params?: SqlParams, tableAlias?: string): string {
  const sql = fieldSql(field, params, tableAlias);
  return isComputed(field) ? `${sql} as ${quoteIdent(field.name)}` : sql;
}

const ALIASES = new WeakMap<SqlParams, number>();

/** The where compiler's two entry points a related field's subquery uses (the one filter compiler). */
export interface FilterCompiler {
  where(object: ObjectMeta, where: unknown, params: SqlParams, options: { tableAlias?: string }): string;
  rowFilter(object: ObjectMeta, params: SqlParams, options: { tableAlias?: string }): string | undefined;
}
let filters: FilterCompiler | undefined;

/** Set by where.compiler.ts when it loads (it compiles fields through this file, so this file cannot import it). */
export function useFilterCompiler(compiler: FilterCompiler): void {
  filters = compiler;
}

/**
 * The parts of the subquery of a rollup, count or lookup_value field (metadata/computed-fields.ts) over the
 * related table, read through the caller's view of it (`related.scope`, set by CallerAccess): its row filter
 * ANDed in, so only the related records the caller may read are counted. Without that view it is never
 * compiled. The outer record is `tableAlias`, or the object's table itself.
 */
function relatedParts(field: FieldMeta, params: SqlParams, tableAlias?: string): RelatedSqlParts {
  const meta = field.related!;
  const scope = meta.scope;
  // Only a caller's view carries one (a policy's row filter reads the whole object, where none is): never compiled.
  if (!scope) {
    throw new DomainError('unknown_field', `"${field.name}" is computed from other records and cannot be read here`, {
      field: field.name,
    });
  }
  // Unique within the statement (nested subqueries and self relations included).
  const n = (ALIASES.get(params) ?? 0) + 1;
  ALIASES.set(params, n);
  const alias = `rel${n}_`;
  const outer = tableAlias === undefined ? objectTable(meta.self) : aliasSql(tableAlias);
  const conditions: string[] = [];
  if (!filters) throw new Error('the where compiler is not loaded');
  const rowFilter = filters.rowFilter(scope, params, { tableAlias: alias });
  if (rowFilter !== undefined) conditions.push(`(${rowFilter})`);
  if (meta.filter) conditions.push(`(${filters.where(scope, meta.filter, params, { tableAlias: alias })})`);
  return {
    from: `${objectTable(meta.target)} as ${quoteIdent(alias)}`,
    alias,
    outer: (column) => `${outer}.${quoteIdent(column)}`,
    inner: (column) => `${quoteIdent(alias)}.${quoteIdent(column)}`,
    value: (name) => {
      const target = scope.fields.find((f) => f.name === name);
      if (!target) throw new Error(`computed field "${field.name}" reads "${meta.target}.${name}" outside its view`);
      return fieldSql(target, params, alias);
    },
    conditions,
  };
}

/** The SQL type each result type comes back as: what its stored twin's column holds (field-value.codec decodes it). */
const RESULT_CASTS: Record<FormulaResultType, string> = {
  number: 'double precision',
  currency: 'numeric',
  percent: 'numeric',
  integer: 'bigint',
  text: 'text',
  boolean: 'boolean',
  date: 'date',
  datetime: 'timestamptz',
};

/** Largest integer a ROUND, LEFT or DATE_ADD argument is clamped to. */
const INT_LIMIT = 100_000;
/** Below bigint's range: a larger integer result reads as null. */
const BIGINT_LIMIT = '9000000000000000000';

interface Context {
  params: SqlParams;
  tableAlias?: string;
  /** The caller's view of the rollup, count and lookup_value fields the expression reads. */
  related?: Record<string, FieldMeta>;
}

function resultSql(sql: string, type: FormulaValueType, resultType: FormulaResultType): string {
  switch (resultType) {
    case 'number':
      return `(${sql})::double precision`;
    case 'currency':
      return `round((${sql}), 2)`;
    case 'percent':
      return `round((${sql}), 4)`;
    case 'integer':
      return `(case when abs(${sql}) < ${BIGINT_LIMIT} then round(${sql})::bigint end)`;
    case 'text':
      return type === 'text' ? sql : `(${sql})::text`;
    case 'boolean':
      return sql;
    case 'date':
      return type === 'datetime' ? `((${sql}) at time zone 'UTC')::date` : sql;
    case 'datetime':
      return type === 'date' ? asTimestamptz(sql, 'date') : sql;
  }
}

/** A date as the start of its day in UTC; a datetime as it is. */
function asTimestamptz(sql: string, type: FormulaValueType): string {
  return type === 'date' ? `((${sql})::timestamp at time zone 'UTC')` : sql;
}

/** A date or datetime as a UTC wall-clock timestamp (what calendar arithmetic and extract read). */
function asUtcTimestamp(sql: string, type: FormulaValueType): string {
  return type === 'date' ? `(${sql})::timestamp` : `((${sql}) at time zone 'UTC')`;
}

function clampInt(sql: string, low = -INT_LIMIT): string {
  return `greatest(least(round(${sql}), ${INT_LIMIT}), ${low})::int`;
}

/** Values of one node list brought to one type: a date among datetimes becomes a datetime. */
function unified(nodes: FormulaNode[], ctx: Context): string[] {
  const datetime = nodes.some((n) => n.type === 'datetime');
  return nodes.map((n) => (datetime ? asTimestamptz(compileNode(n, ctx), n.type) : compileNode(n, ctx)));
}

function compileNode(node: FormulaNode, ctx: Context): string {
  switch (node.kind) {
    case 'literal':
      return `${ctx.params.add(node.value)}::${node.type === 'number' ? 'numeric' : node.type}`;
    case 'column': {
      const column = qualified(ctx.tableAlias, node.name);
      // Through text: a direct float8 → numeric cast keeps only 15 significant digits.
      if (node.type === 'number') return node.fieldType === 'number' ? `${column}::text::numeric` : `${column}::numeric`;
      if (node.type === 'text' && (node.fieldType === 'lookup' || node.fieldType === 'uuid')) return `${column}::text`;
      return column;
    }
    case 'related': {
      const field = ctx.related?.[node.name];
      if (!field) throw new Error(`formula reads "${node.name}" without the caller's view of it`);
      const value = fieldSql(field, ctx.params, ctx.tableAlias);
      if (node.type === 'number') return `(${value})::numeric`;
      if (node.type === 'text' && node.fieldType === 'uuid') return `(${value})::text`;
      return value;
    }
    case 'formula': {
      const value = resultSql(compileNode(node.body, ctx), node.body.type, node.resultType);
      return node.type === 'number' ? `(${value})::numeric` : `(${value})`;
    }
    case 'unary':
      return `(- ${compileNode(node.operand, ctx)})`;
    case 'binary':
      return compileBinary(node, ctx);
    case 'call':
      return compileCall(node, ctx);
  }
}

function compileBinary(node: Extract<FormulaNode, { kind: 'binary' }>, ctx: Context): string {
  const { op } = node;
  if (op === '&') {
    const text = (n: FormulaNode) => `coalesce((${compileNode(n, ctx)})::text, '')`;
    return `(${text(node.left)} || ${text(node.right)})`;
  }
  const [left, right] = unified([node.left, node.right], ctx);
  switch (op) {
    case '+':
    case '-':
    case '*':
      return `(${left} ${op} ${right})`;
    case '/':
      return `(${left} / nullif(${right}, 0))`;
    case '%':
      return `mod(${left}, nullif(${right}, 0))`;
    case '!=':
      return `(${left} <> ${right})`;
    default:
      return `(${left} ${op} ${right})`;
  }
}

const DIFF_SECONDS: Record<string, number> = { seconds: 1, minutes: 60, hours: 3600, days: 86400, weeks: 604800 };
const UNIT_INTERVALS: Record<string, string> = {
  seconds: `interval '1 second'`,
  minutes: `interval '1 minute'`,
  hours: `interval '1 hour'`,
  days: `interval '1 day'`,
  weeks: `interval '7 days'`,
  months: `interval '1 month'`,
  years: `interval '1 year'`,
};

function compileCall(node: Extract<FormulaNode, { kind: 'call' }>, ctx: Context): string {
  const args = node.args;
  const arg = (i: number) => compileNode(args[i], ctx);
  const all = () => args.map((a) => compileNode(a, ctx));
  switch (node.name) {
    case 'IF': {
      const [then, otherwise] = unified(args.slice(1), ctx);
      return `(case when ${arg(0)} then ${then}${otherwise === undefined ? '' : ` else ${otherwise}`} end)`;
    }
    case 'SWITCH': {
      const cases = args.length - 1;
      const keyIndexes = Array.from({ length: Math.floor(cases / 2) }, (_, k) => 1 + 2 * k);
      const keys = unified([args[0], ...keyIndexes.map((k) => args[k])], ctx);
      const resultNodes = [...keyIndexes.map((k) => args[k + 1]), ...(cases % 2 ? [args[args.length - 1]] : [])];
      const results = unified(resultNodes, ctx);
      const whens = keyIndexes.map((_, i) => `when ${keys[i + 1]} then ${results[i]}`);
      const otherwise = cases % 2 ? ` else ${results[results.length - 1]}` : '';
      return `(case ${keys[0]} ${whens.join(' ')}${otherwise} end)`;
    }
    case 'AND':
      return `(${all().join(' and ')})`;
    case 'OR':
      return `(${all().join(' or ')})`;
    case 'NOT':
      return `(not ${arg(0)})`;
    case 'BLANK':
      return args[0].type === 'text' ? `(coalesce(${arg(0)}, '') = '')` : `(${arg(0)} is null)`;
    case 'COALESCE':
      return `coalesce(${unified(args, ctx).join(', ')})`;
    case 'MIN':
      return `least(${unified(args, ctx).join(', ')})`;
    case 'MAX':
      return `greatest(${unified(args, ctx).join(', ')})`;
    case 'SUM':
    case 'AVG':
      return `(select ${node.name.toLowerCase()}("__v") from (values ${all()
        .map((v) => `(${v})`)
        .join(', ')}) as "__s"("__v"))`;
    case 'ROUND':
      return args.length > 1 ? `round(${arg(0)}, ${clampInt(arg(1), -INT_LIMIT)})` : `round(${arg(0)})`;
    case 'FLOOR':
      return `floor(${arg(0)})`;
    case 'CEIL':
      return `ceil(${arg(0)})`;
    case 'ABS':
      return `abs(${arg(0)})`;
    case 'CONCAT':
      return `concat(${all()
        .map((v) => `(${v})::text`)
        .join(', ')})`;
    case 'LEFT':
      return `left(${arg(0)}, ${clampInt(arg(1), 0)})`;
    case 'RIGHT':
      return `right(${arg(0)}, ${clampInt(arg(1), 0)})`;
    case 'LOWER':
      return `lower(${arg(0)})`;
    case 'UPPER':
      return `upper(${arg(0)})`;
    case 'LEN':
      return `char_length(${arg(0)})::numeric`;
    case 'TRIM':
      return `btrim(${arg(0)})`;
    case 'CONTAINS':
      return `(strpos(${arg(0)}, ${arg(1)}) > 0)`;
    case 'YEAR':
    case 'MONTH':
    case 'DAY':
      return `extract(${node.name.toLowerCase()} from ${asUtcTimestamp(arg(0), args[0].type)})::numeric`;
    case 'WEEKDAY':
      return `extract(dow from ${asUtcTimestamp(arg(0), args[0].type)})::numeric`;
    case 'DATE_DIFF': {
      const a = asUtcTimestamp(arg(0), args[0].type);
      const b = asUtcTimestamp(arg(1), args[1].type);
      const unit = node.unit!;
      if (unit === 'months') return `(extract(year from age(${a}, ${b})) * 12 + extract(month from age(${a}, ${b})))::numeric`;
      if (unit === 'years') return `extract(year from age(${a}, ${b}))::numeric`;
      return `trunc(extract(epoch from (${a} - ${b})) / ${DIFF_SECONDS[unit]})::numeric`;
    }
    case 'DATE_ADD': {
      const amount = `(${clampInt(arg(1))} * ${UNIT_INTERVALS[node.unit!]})`;
      if (node.type === 'date') return `(${arg(0)} + ${amount})::date`;
      return `(${asTimestamptz(arg(0), args[0].type)} + ${amount})`;
    }
    case 'TODAY':
      return 'current_date';
    case 'NOW':
      return 'now()';
  }
}
