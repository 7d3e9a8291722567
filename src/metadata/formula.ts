import { DomainError } from '../common/domain-error';
import {
  DATE_UNITS,
  type DateUnit,
  FORMULA_FUNCTIONS,
  type FormulaFunction,
  type FormulaNode,
  type FormulaOperator,
  type FormulaResultType,
  type FormulaValueType,
} from './formula.types';
import { fieldTypeOf } from './field-types';
import type { FieldMeta } from './object-metadata.types';

export * from './formula.types';

/**
 * The formula language: an expression over a record's fields (`{amount} * {probability} / 100`), parsed
 * once by a small recursive-descent parser (never eval) and type-checked against the fields' types. The
 * data engine compiles the checked tree (FormulaNode) to one SQL expression (data/formula.compiler.ts).
 */

/** Longest expression accepted, and deepest nesting (the parser and compiler recurse). */
export const MAX_EXPRESSION_LENGTH = 2_000;
const MAX_DEPTH = 60;

/** Signatures: argument types (`any` for one type shared with the result) and arity. */
const FUNCTIONS: Record<FormulaFunction, { min: number; max: number }> = {
  IF: { min: 2, max: 3 },
  SWITCH: { min: 3, max: 99 },
  AND: { min: 1, max: 99 },
  OR: { min: 1, max: 99 },
  NOT: { min: 1, max: 1 },
  BLANK: { min: 1, max: 1 },
  COALESCE: { min: 1, max: 99 },
  ROUND: { min: 1, max: 2 },
  FLOOR: { min: 1, max: 1 },
  CEIL: { min: 1, max: 1 },
  ABS: { min: 1, max: 1 },
  MIN: { min: 1, max: 99 },
  MAX: { min: 1, max: 99 },
  SUM: { min: 1, max: 99 },
  AVG: { min: 1, max: 99 },
  CONCAT: { min: 1, max: 99 },
  LEFT: { min: 2, max: 2 },
  RIGHT: { min: 2, max: 2 },
  LOWER: { min: 1, max: 1 },
  UPPER: { min: 1, max: 1 },
  LEN: { min: 1, max: 1 },
  TRIM: { min: 1, max: 1 },
  CONTAINS: { min: 2, max: 2 },
  YEAR: { min: 1, max: 1 },
  MONTH: { min: 1, max: 1 },
  DAY: { min: 1, max: 1 },
  WEEKDAY: { min: 1, max: 1 },
  DATE_DIFF: { min: 3, max: 3 },
  DATE_ADD: { min: 3, max: 3 },
  TODAY: { min: 0, max: 0 },
  NOW: { min: 0, max: 0 },
};

/** The value type a field reads as inside an expression; undefined for types an expression cannot use. */
export function valueTypeOf(type: FieldMeta['type']): FormulaValueType | undefined {
  return fieldTypeOf(type).formula;
}

/** The value type of a result type. */
export function resultValueType(resultType: FormulaResultType): FormulaValueType {
  return valueTypeOf(resultType)!;
}

// ---------------------------------------------------------------- parsing

/** The syntax tree, before names are resolved and types checked. `pos` is a character offset. */
type Syntax =
  | { kind: 'number'; value: number; pos: number }
  | { kind: 'string'; value: string; pos: number }
  | { kind: 'boolean'; value: boolean; pos: number }
  | { kind: 'field'; name: string; pos: number }
  | { kind: 'unary'; op: '-' | '+'; operand: Syntax; pos: number }
  | { kind: 'binary'; op: FormulaOperator; left: Syntax; right: Syntax; pos: number }
  | { kind: 'call'; name: string; args: Syntax[]; pos: number };

export function invalidExpression(message: string, position: number, extra: Record<string, unknown> = {}): DomainError {
  return new DomainError('invalid_expression', `${message} (at character ${position})`, { position, ...extra });
}

type Token =
  | { t: 'num'; value: number; pos: number }
  | { t: 'str'; value: string; pos: number }
  | { t: 'field'; name: string; pos: number }
  | { t: 'ident'; name: string; pos: number }
  | { t: 'op'; op: string; pos: number }
  | { t: 'end'; pos: number };

const OPERATOR_TOKENS = ['!=', '<=', '>=', '<>', '+', '-', '*', '/', '%', '&', '=', '<', '>', '(', ')', ','];

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const start = i;
    if (/[0-9.]/.test(c)) {
      const match = /^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/.exec(text.slice(i));
      if (!match) throw invalidExpression(`Unexpected "${c}"`, i);
      const value = Number(match[0]);
      if (!Number.isFinite(value)) throw invalidExpression(`Number ${match[0]} is out of range`, i);
      tokens.push({ t: 'num', value, pos: start });
      i += match[0].length;
    } else if (c === '"' || c === "'") {
      let value = '';
      i++;
      while (i < text.length && text[i] !== c) {
        if (text[i] === '\\' && i + 1 < text.length) i++;
        value += text[i++];
      }
      if (i >= text.length) throw invalidExpression('Unterminated text literal', start);
      i++;
      tokens.push({ t: 'str', value, pos: start });
    } else if (c === '{') {
      const end = text.indexOf('}', i);
      if (end < 0) throw invalidExpression('Unterminated field reference: "{" without "}"', start);
      const name = text.slice(i + 1, end).trim();
      if (!name) throw invalidExpression('Empty field reference "{}"', start);
      tokens.push({ t: 'field', name, pos: start });
      i = end + 1;
    } else if (/[A-Za-z_]/.test(c)) {
      const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i))![0];
      tokens.push({ t: 'ident', name, pos: start });
      i += name.length;
    } else {
      const op = OPERATOR_TOKENS.find((candidate) => text.startsWith(candidate, i));
      if (!op) throw invalidExpression(`Unexpected character "${c}"`, i);
      tokens.push({ t: 'op', op: op === '<>' ? '!=' : op, pos: start });
      i += op.length;
    }
  }
  tokens.push({ t: 'end', pos: text.length });
  return tokens;
}

/** Binary operators by precedence, lowest first. */
const PRECEDENCE: readonly (readonly FormulaOperator[])[] = [
  ['=', '!=', '<', '<=', '>', '>='],
  ['&'],
  ['+', '-'],
  ['*', '/', '%'],
];

class Parser {
  private at = 0;
  constructor(private readonly tokens: Token[]) {}

  parse(): Syntax {
    const tree = this.binary(0, 0);
    const next = this.peek();
    if (next.t !== 'end') throw invalidExpression(`Unexpected ${describe(next)}`, next.pos);
    return tree;
  }

  private peek(): Token {
    return this.tokens[this.at];
  }

  private isOp(op: string): boolean {
    const token = this.peek();
    return token.t === 'op' && token.op === op;
  }

  private binary(level: number, depth: number): Syntax {
    if (level >= PRECEDENCE.length) return this.unary(depth);
    let left = this.binary(level + 1, depth);
    for (;;) {
      const token = this.peek();
      if (token.t !== 'op' || !(PRECEDENCE[level] as readonly string[]).includes(token.op)) return left;
      this.at++;
      const right = this.binary(level + 1, depth);
      left = { kind: 'binary', op: token.op as FormulaOperator, left, right, pos: token.pos };
    }
  }

  private unary(depth: number): Syntax {
    if (depth > MAX_DEPTH) throw invalidExpression(`The expression nests deeper than ${MAX_DEPTH} levels`, this.peek().pos);
    const token = this.peek();
    if (token.t === 'op' && (token.op === '-' || token.op === '+')) {
      this.at++;
      return { kind: 'unary', op: token.op, operand: this.unary(depth + 1), pos: token.pos };
    }
    return this.primary(depth);
  }

  private primary(depth: number): Syntax {
    const token = this.peek();
    this.at++;
    switch (token.t) {
      case 'num':
        return { kind: 'number', value: token.value, pos: token.pos };
      case 'str':
        return { kind: 'string', value: token.value, pos: token.pos };
      case 'field':
        return { kind: 'field', name: token.name, pos: token.pos };
      case 'ident': {
        const upper = token.name.toUpperCase();
        if (!this.isOp('(')) {
          if (upper === 'TRUE' || upper === 'FALSE') return { kind: 'boolean', value: upper === 'TRUE', pos: token.pos };
          throw invalidExpression(`Unknown name "${token.name}": write a field as {${token.name}}`, token.pos);
        }
        this.at++;
        const args: Syntax[] = [];
        if (!this.isOp(')')) {
          for (;;) {
            args.push(this.binary(0, depth + 1));
            if (this.isOp(',')) {
              this.at++;
              continue;
            }
            break;
          }
        }
        if (!this.isOp(')'))
          throw invalidExpression(`Expected "," or ")" in ${upper}(...), got ${describe(this.peek())}`, this.peek().pos);
        this.at++;
        return { kind: 'call', name: upper, args, pos: token.pos };
      }
      case 'op':
        if (token.op === '(') {
          const inner = this.binary(0, depth + 1);
          if (!this.isOp(')')) throw invalidExpression(`Expected ")", got ${describe(this.peek())}`, this.peek().pos);
          this.at++;
          return inner;
        }
        throw invalidExpression(`Unexpected ${describe(token)}`, token.pos);
      case 'end':
        throw invalidExpression('The expression ends too early', token.pos);
    }
  }
}

function describe(token: Token): string {
  switch (token.t) {
    case 'end':
      return 'end of expression';
    case 'op':
      return `"${token.op}"`;
    case 'num':
      return `number ${token.value}`;
    case 'str':
      return 'text literal';
    case 'field':
      return `field {${token.name}}`;
    case 'ident':
      return `"${token.name}"`;
  }
}

/** Parses an expression; invalid_expression with `details.position` when it is not one. */
export function parseFormula(expression: string): Syntax {
  if (typeof expression !== 'string' || !expression.trim()) throw invalidExpression('The expression is empty', 0);
  if (expression.length > MAX_EXPRESSION_LENGTH) {
    throw invalidExpression(`The expression is longer than ${MAX_EXPRESSION_LENGTH} characters`, MAX_EXPRESSION_LENGTH);
  }
  return new Parser(tokenize(expression)).parse();
}

/** The field names an expression references, in order of appearance (duplicates dropped). */
export function referencedFields(expression: string): string[] {
  const names: string[] = [];
  const walk = (node: Syntax): void => {
    if (node.kind === 'field' && !names.includes(node.name)) names.push(node.name);
    if (node.kind === 'unary') walk(node.operand);
    if (node.kind === 'binary') {
      walk(node.left);
      walk(node.right);
    }
    if (node.kind === 'call') node.args.forEach(walk);
  };
  walk(parseFormula(expression));
  return names;
}

// ---------------------------------------------------------------- checking

/** A field as a formula sees it: a stored field, or another formula (with its own expression). */
export type FormulaScope = (name: string) => FieldMeta | undefined;

/**
 * Resolves and type-checks `expression` (of field `self`) against `scope`, inlining the formulas it reads:
 * invalid_expression naming the position of the first error, computed_cycle when a formula reaches itself.
 */
export function checkFormula(
  self: string,
  expression: string,
  resultType: FormulaResultType,
  scope: FormulaScope,
  path: string[] = [],
): FormulaNode {
  const body = check(parseFormula(expression), scope, [...path, self]);
  const expected = resultValueType(resultType);
  const compatible =
    body.type === expected ||
    expected === 'text' ||
    (expected === 'datetime' && body.type === 'date') ||
    (expected === 'date' && body.type === 'datetime');
  if (!compatible) {
    throw invalidExpression(`The expression gives a ${body.type}, which cannot be a ${resultType} result`, 0, {
      expressionType: body.type,
      resultType,
    });
  }
  return body;
}

function check(node: Syntax, scope: FormulaScope, path: string[]): FormulaNode {
  switch (node.kind) {
    case 'number':
      return { kind: 'literal', type: 'number', value: node.value };
    case 'string':
      return { kind: 'literal', type: 'text', value: node.value };
    case 'boolean':
      return { kind: 'literal', type: 'boolean', value: node.value };
    case 'field':
      return checkField(node, scope, path);
    case 'unary': {
      const operand = check(node.operand, scope, path);
      expectType(operand, ['number'], node.operand, `"${node.op}"`);
      return node.op === '+' ? operand : { kind: 'unary', type: 'number', operand };
    }
    case 'binary':
      return checkBinary(node, scope, path);
    case 'call':
      return checkCall(node, scope, path);
  }
}

function checkField(node: Extract<Syntax, { kind: 'field' }>, scope: FormulaScope, path: string[]): FormulaNode {
  const field = scope(node.name);
  if (!field) throw invalidExpression(`Unknown field {${node.name}}`, node.pos, { field: node.name });
  if (field.formula) {
    if (path.includes(field.name)) {
      const cycle = [...path.slice(path.indexOf(field.name)), field.name];
      throw new DomainError('computed_cycle', `The formula reads itself: ${cycle.join(' → ')}`, { path: cycle });
    }
    const body = checkFormula(field.name, field.formula.expression, field.formula.resultType, scope, path);
    return {
      kind: 'formula',
      type: resultValueType(field.formula.resultType),
      name: field.name,
      resultType: field.formula.resultType,
      body,
    };
  }
  const type = valueTypeOf(field.type);
  if (!type)
    throw invalidExpression(`Field {${node.name}} (${field.type}) cannot be used in a formula`, node.pos, { field: node.name });
  if (field.related) return { kind: 'related', type, name: field.name, fieldType: field.type };
  return { kind: 'column', type, name: field.name, fieldType: field.type };
}

const ORDERED: FormulaValueType[] = ['number', 'text', 'date', 'datetime'];

function checkBinary(node: Extract<Syntax, { kind: 'binary' }>, scope: FormulaScope, path: string[]): FormulaNode {
  const left = check(node.left, scope, path);
  const right = check(node.right, scope, path);
  const { op } = node;
  if (op === '&') return { kind: 'binary', type: 'text', op, left, right };
  if (['+', '-', '*', '/', '%'].includes(op)) {
    expectType(left, ['number'], node.left, `"${op}"`);
    expectType(right, ['number'], node.right, `"${op}"`);
    return { kind: 'binary', type: 'number', op, left, right };
  }
  const temporal = (t: FormulaValueType) => t === 'date' || t === 'datetime';
  const same = left.type === right.type || (temporal(left.type) && temporal(right.type));
  if (!same) {
    throw invalidExpression(`"${op}" compares a ${left.type} with a ${right.type}`, node.pos);
  }
  if (left.type === 'boolean' && op !== '=' && op !== '!=') {
    throw invalidExpression(`"${op}" does not order booleans; use = or !=`, node.pos);
  }
  if (!ORDERED.includes(left.type) && left.type !== 'boolean')
    throw invalidExpression(`"${op}" cannot compare ${left.type}`, node.pos);
  return { kind: 'binary', type: 'boolean', op, left, right };
}

function expectType(node: FormulaNode, types: FormulaValueType[], syntax: Syntax, where: string): void {
  if (!types.includes(node.type)) {
    throw invalidExpression(`${where} expects ${types.join(' or ')}, got ${node.type}`, syntax.pos, {
      expected: types,
      got: node.type,
    });
  }
}

function checkCall(node: Extract<Syntax, { kind: 'call' }>, scope: FormulaScope, path: string[]): FormulaNode {
  if (!(node.name in FUNCTIONS)) {
    throw invalidExpression(`Unknown function ${node.name}`, node.pos, { availableFunctions: FORMULA_FUNCTIONS });
  }
  const name = node.name as FormulaFunction;
  const arity = FUNCTIONS[name];
  if (node.args.length < arity.min || node.args.length > arity.max) {
    const expected =
      arity.min === arity.max ? `${arity.min}` : arity.max >= 99 ? `at least ${arity.min}` : `${arity.min} to ${arity.max}`;
    throw invalidExpression(`${name} takes ${expected} argument${arity.max === 1 ? '' : 's'}, got ${node.args.length}`, node.pos);
  }
  let unit: DateUnit | undefined;
  if (name === 'DATE_DIFF' || name === 'DATE_ADD') {
    const last = node.args[2];
    if (last.kind !== 'string' || !(DATE_UNITS as readonly string[]).includes(last.value.toLowerCase())) {
      throw invalidExpression(`The unit of ${name} is one of ${DATE_UNITS.map((u) => `'${u}'`).join(', ')}`, last.pos, {
        units: DATE_UNITS,
      });
    }
    unit = last.value.toLowerCase() as DateUnit;
  }
  const syntaxArgs = unit ? node.args.slice(0, 2) : node.args;
  const args = syntaxArgs.map((arg) => check(arg, scope, path));
  const argOf = (i: number, types: FormulaValueType[]) => {
    expectType(args[i], types, syntaxArgs[i], `${name} argument ${i + 1}`);
    return args[i];
  };
  const all = (types: FormulaValueType[]) => args.forEach((_, i) => argOf(i, types));
  /** Arguments that must share one type (the first's): that type. */
  const shared = (indexes: number[], allowed: FormulaValueType[] = ['number', 'text', 'boolean', 'date', 'datetime']) => {
    const first = args[indexes[0]];
    expectType(first, allowed, syntaxArgs[indexes[0]], `${name} argument ${indexes[0] + 1}`);
    for (const i of indexes.slice(1)) {
      const t = args[i].type;
      const ok = t === first.type || (['date', 'datetime'].includes(t) && ['date', 'datetime'].includes(first.type));
      if (!ok) {
        throw invalidExpression(
          `${name} argument ${i + 1} is a ${t}, not a ${first.type} like argument ${indexes[0] + 1}`,
          syntaxArgs[i].pos,
        );
      }
    }
    return indexes.some((i) => args[i].type === 'datetime') ? 'datetime' : first.type;
  };
  const call = (type: FormulaValueType): FormulaNode => ({ kind: 'call', type, name, args, ...(unit ? { unit } : {}) });
  switch (name) {
    case 'IF':
      argOf(0, ['boolean']);
      return call(args.length === 3 ? shared([1, 2]) : args[1].type);
    case 'SWITCH': {
      const cases = args.length - 1;
      const keys = Array.from({ length: Math.floor(cases / 2) }, (_, k) => 1 + 2 * k);
      shared([0, ...keys], ['number', 'text', 'boolean', 'date', 'datetime']);
      const results = [...keys.map((k) => k + 1), ...(cases % 2 ? [args.length - 1] : [])];
      return call(shared(results));
    }
    case 'AND':
    case 'OR':
    case 'NOT':
      all(['boolean']);
      return call('boolean');
    case 'BLANK':
      return call('boolean');
    case 'COALESCE':
    case 'MIN':
    case 'MAX':
      return call(
        shared(
          args.map((_, i) => i),
          name === 'COALESCE' ? undefined : ORDERED,
        ),
      );
    case 'ROUND':
    case 'FLOOR':
    case 'CEIL':
    case 'ABS':
    case 'SUM':
    case 'AVG':
      all(['number']);
      return call('number');
    case 'CONCAT':
      return call('text');
    case 'LEFT':
    case 'RIGHT':
      argOf(0, ['text']);
      argOf(1, ['number']);
      return call('text');
    case 'LOWER':
    case 'UPPER':
    case 'TRIM':
      argOf(0, ['text']);
      return call('text');
    case 'LEN':
      argOf(0, ['text']);
      return call('number');
    case 'CONTAINS':
      all(['text']);
      return call('boolean');
    case 'YEAR':
    case 'MONTH':
    case 'DAY':
    case 'WEEKDAY':
      argOf(0, ['date', 'datetime']);
      return call('number');
    case 'DATE_DIFF':
      argOf(0, ['date', 'datetime']);
      argOf(1, ['date', 'datetime']);
      return call('number');
    case 'DATE_ADD': {
      const base = argOf(0, ['date', 'datetime']);
      argOf(1, ['number']);
      const timeUnit = unit === 'seconds' || unit === 'minutes' || unit === 'hours';
      return call(base.type === 'date' && !timeUnit ? 'date' : 'datetime');
    }
    case 'TODAY':
      return call('date');
    case 'NOW':
      return call('datetime');
  }
}

/** Every stored field a checked expression reads, at any depth (formulas it reads included, by their inputs). */
/** Whether a checked expression reads the clock (TODAY, NOW) at any depth: its value changes with no write. */
export function formulaReadsClock(node: FormulaNode): boolean {
  switch (node.kind) {
    case 'formula':
      return formulaReadsClock(node.body);
    case 'unary':
      return formulaReadsClock(node.operand);
    case 'binary':
      return formulaReadsClock(node.left) || formulaReadsClock(node.right);
    case 'call':
      return node.name === 'TODAY' || node.name === 'NOW' || node.args.some(formulaReadsClock);
    default:
      return false;
  }
}

export function formulaInputs(node: FormulaNode, into = new Set<string>()): Set<string> {
  switch (node.kind) {
    case 'column':
    case 'related':
      into.add(node.name);
      break;
    case 'formula':
      into.add(node.name);
      formulaInputs(node.body, into);
      break;
    case 'unary':
      formulaInputs(node.operand, into);
      break;
    case 'binary':
      formulaInputs(node.left, into);
      formulaInputs(node.right, into);
      break;
    case 'call':
      node.args.forEach((arg) => formulaInputs(arg, into));
      break;
    default:
      break;
  }
  return into;
}
