/** The types of the formula language (metadata/formula.ts parses and checks it; data/formula.compiler.ts compiles it). */

/** The types of values inside an expression. */
export type FormulaValueType = 'number' | 'text' | 'boolean' | 'date' | 'datetime';

/** The result types a formula field may declare (each is also the field type its value reads as). */
export const FORMULA_RESULT_TYPES = ['number', 'currency', 'percent', 'integer', 'text', 'boolean', 'date', 'datetime'] as const;
export type FormulaResultType = (typeof FORMULA_RESULT_TYPES)[number];

export const FORMULA_OPERATORS = ['+', '-', '*', '/', '%', '&', '=', '!=', '<', '<=', '>', '>='] as const;
export type FormulaOperator = (typeof FORMULA_OPERATORS)[number];

/** Units of DATE_DIFF and DATE_ADD (a text literal: `DATE_ADD({close}, 7, 'days')`). */
export const DATE_UNITS = ['seconds', 'minutes', 'hours', 'days', 'weeks', 'months', 'years'] as const;
export type DateUnit = (typeof DATE_UNITS)[number];

/** The functions of the language. */
export const FORMULA_FUNCTIONS = [
  'IF',
  'SWITCH',
  'AND',
  'OR',
  'NOT',
  'BLANK',
  'COALESCE',
  'ROUND',
  'FLOOR',
  'CEIL',
  'ABS',
  'MIN',
  'MAX',
  'SUM',
  'AVG',
  'CONCAT',
  'LEFT',
  'RIGHT',
  'LOWER',
  'UPPER',
  'LEN',
  'TRIM',
  'CONTAINS',
  'YEAR',
  'MONTH',
  'DAY',
  'WEEKDAY',
  'DATE_DIFF',
  'DATE_ADD',
  'TODAY',
  'NOW',
] as const;
export type FormulaFunction = (typeof FORMULA_FUNCTIONS)[number];

/** A checked expression: every node knows its type; field references carry what the compiler needs. */
export type FormulaNode =
  | { kind: 'literal'; type: FormulaValueType; value: number | string | boolean }
  | { kind: 'column'; type: FormulaValueType; name: string; fieldType: string }
  | { kind: 'formula'; type: FormulaValueType; name: string; resultType: FormulaResultType; body: FormulaNode }
  /** A rollup, count or lookup_value field of the record: compiled through the caller's view of it. */
  | { kind: 'related'; type: FormulaValueType; name: string; fieldType: string }
  | { kind: 'unary'; type: 'number'; operand: FormulaNode }
  | { kind: 'binary'; type: FormulaValueType; op: FormulaOperator; left: FormulaNode; right: FormulaNode }
  | { kind: 'call'; type: FormulaValueType; name: FormulaFunction; args: FormulaNode[]; unit?: DateUnit };
