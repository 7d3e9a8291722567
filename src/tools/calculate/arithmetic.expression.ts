/**
 * A small arithmetic language, parsed by recursive descent and evaluated over a syntax tree: never
 * eval or new Function, no names but the functions below, no loops, bounded in size and depth.
 *
 *   expression := term (("+" | "-") term)*
 *   term       := unary (("*" | "/" | "%") unary)*
 *   unary      := ("-" | "+") unary | primary
 *   primary    := number | function "(" expression ("," expression)* ")" | "(" expression ")"
 *
 * Functions: round(x[, digits]), abs(x), min(a, ...), max(a, ...), pct_change(old, new) =
 * (new − old) / |old| × 100.
 */

export const MAX_EXPRESSION_LENGTH = 2000;
const MAX_DEPTH = 64;
const MAX_NUMBERS = 200;

/** A number written in the expression. */
export interface Operand {
  /** As written, e.g. `1234567.89`. */
  text: string;
  value: number;
  /** A constant of the arithmetic itself (round's digits, a ×100 of a percentage): not a figure of the data. */
  constant: boolean;
}

export interface Evaluation {
  value: number;
  operands: Operand[];
}

/** Why an expression cannot be evaluated; `at` is the offset in the expression. */
export class ExpressionError extends Error {
  constructor(
    message: string,
    readonly at?: number,
  ) {
    super(at === undefined ? message : `${message} (at character ${at + 1})`);
  }
}

type Node =
  | { kind: 'number'; operand: Operand }
  | { kind: 'unary'; op: '-' | '+'; arg: Node }
  | { kind: 'binary'; op: '+' | '-' | '*' | '/' | '%'; left: Node; right: Node }
  | { kind: 'call'; name: FunctionName; args: Node[]; at: number };

interface Token {
  type: 'number' | 'name' | 'op' | '(' | ')' | ',' | 'end';
  text: string;
  at: number;
}

const FUNCTIONS = {
  round: { min: 1, max: 2 },
  abs: { min: 1, max: 1 },
  min: { min: 1, max: 100 },
  max: { min: 1, max: 100 },
  pct_change: { min: 2, max: 2 },
} as const;
type FunctionName = keyof typeof FUNCTIONS;

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  const pattern = /\s*(?:(\d+(?:\.\d+)?|\.\d+)|([A-Za-z_][A-Za-z0-9_]*)|([-+*/%(),]))/y;
  let at = 0;
  while (at < source.length) {
    if (/^\s*$/.test(source.slice(at))) break;
    pattern.lastIndex = at;
    const match = pattern.exec(source);
    if (!match) {
      const bad = at + (source.slice(at).length - source.slice(at).trimStart().length);
      const char = source[bad];
      const hint = char === ',' || char === '$' || char === '€' ? ': write plain numbers without separators, currency or %' : '';
      throw new ExpressionError(`Unexpected "${char}"${hint}`, bad);
    }
    const start = match.index + match[0].length - (match[1] ?? match[2] ?? match[3]).length;
    if (match[1] !== undefined) {
      // "1,234" or "12%" right after a number: a figure written as text, not arithmetic.
      const next = source[pattern.lastIndex];
      if (next !== undefined && /[\d_A-Za-z.]/.test(next))
        throw new ExpressionError(`Malformed number "${match[1]}${next}"`, start);
      tokens.push({ type: 'number', text: match[1], at: start });
    } else if (match[2] !== undefined) tokens.push({ type: 'name', text: match[2], at: start });
    else {
      const char = match[3];
      // "12%" is a percentage, not a remainder: the model means 0.12.
      const previous = tokens.at(-1);
      if (
        char === '%' &&
        previous?.type === 'number' &&
        previous.at + previous.text.length === start &&
        !/^\s*[\d.(A-Za-z]/.test(source.slice(start + 1))
      ) {
        throw new ExpressionError(
          `"${previous.text}%" is a percentage: write it as a ratio (${previous.text} / 100)`,
          previous.at,
        );
      }
      tokens.push({ type: char === '(' || char === ')' || char === ',' ? char : 'op', text: char, at: start });
    }
    at = pattern.lastIndex;
  }
  tokens.push({ type: 'end', text: '', at: source.length });
  return tokens;
}

class Parser {
  private position = 0;
  private depth = 0;
  readonly operands: Operand[] = [];

  constructor(private readonly tokens: Token[]) {}

  parse(): Node {
    const node = this.expression();
    const token = this.peek();
    if (token.type === ',')
      throw new ExpressionError('Unexpected ",": write plain numbers without thousands separators', token.at);
    if (token.type !== 'end') throw new ExpressionError(`Unexpected "${token.text}"`, token.at);
    return node;
  }

  private peek(): Token {
    return this.tokens[this.position];
  }

  private next(): Token {
    return this.tokens[this.position++];
  }

  private nested<T>(parse: () => T): T {
    if (++this.depth > MAX_DEPTH) throw new ExpressionError(`The expression is nested more than ${MAX_DEPTH} levels deep`);
    try {
      return parse();
    } finally {
      this.depth--;
    }
  }

  private expression(): Node {
    return this.nested(() => {
      let node = this.term();
      for (let token = this.peek(); token.type === 'op' && (token.text === '+' || token.text === '-'); token = this.peek()) {
        this.next();
        node = { kind: 'binary', op: token.text, left: node, right: this.term() };
      }
      return node;
    });
  }

  private term(): Node {
    let node = this.unary();
    for (let token = this.peek(); token.type === 'op' && '*/%'.includes(token.text); token = this.peek()) {
      this.next();
      const right = this.unary();
      const op = token.text as '*' | '/' | '%';
      // ×100 or ÷100 turns a ratio into a percentage and back: arithmetic, not a figure.
      if ((op === '*' || op === '/') && isHundred(right)) markConstant(right);
      if (op === '*' && isHundred(node)) markConstant(node);
      node = { kind: 'binary', op, left: node, right };
    }
    return node;
  }

  private unary(): Node {
    const token = this.peek();
    if (token.type === 'op' && (token.text === '-' || token.text === '+')) {
      this.next();
      return this.nested(() => ({ kind: 'unary', op: token.text as '-' | '+', arg: this.unary() }));
    }
    return this.primary();
  }

  private primary(): Node {
    const token = this.next();
    if (token.type === 'number') {
      if (this.operands.length >= MAX_NUMBERS) throw new ExpressionError(`At most ${MAX_NUMBERS} numbers per expression`);
      const operand: Operand = {
        text: token.text.startsWith('.') ? `0${token.text}` : token.text,
        value: Number(token.text),
        constant: false,
      };
      this.operands.push(operand);
      return { kind: 'number', operand };
    }
    if (token.type === '(') {
      const node = this.expression();
      this.expect(')');
      return node;
    }
    if (token.type === 'name') {
      const name = token.text.toLowerCase();
      if (!Object.hasOwn(FUNCTIONS, name)) {
        throw new ExpressionError(
          `Unknown name "${token.text}": only ${Object.keys(FUNCTIONS).join(', ')} and numbers may appear`,
          token.at,
        );
      }
      this.expect('(');
      const args: Node[] = [this.expression()];
      while (this.peek().type === ',') {
        this.next();
        args.push(this.expression());
      }
      this.expect(')');
      const arity = FUNCTIONS[name as FunctionName];
      if (args.length < arity.min || args.length > arity.max) {
        throw new ExpressionError(
          `${name} takes ${arity.min === arity.max ? arity.min : `${arity.min} to ${arity.max}`} arguments`,
          token.at,
        );
      }
      // round's digits count places, not data.
      if (name === 'round' && args[1]) markConstant(args[1]);
      return { kind: 'call', name: name as FunctionName, args, at: token.at };
    }
    if (token.type === 'end') throw new ExpressionError('The expression ends too early', token.at);
    throw new ExpressionError(`Unexpected "${token.text}"`, token.at);
  }

  private expect(type: Token['type']): void {
    const token = this.next();
    if (token.type !== type) {
      throw new ExpressionError(
        token.type === 'end' ? `Missing "${type}"` : `Expected "${type}" but found "${token.text}"`,
        token.at,
      );
    }
  }
}

function isHundred(node: Node): boolean {
  return node.kind === 'number' && node.operand.value === 100;
}

function markConstant(node: Node): void {
  if (node.kind === 'number') node.operand.constant = true;
  else if (node.kind === 'unary') markConstant(node.arg);
}

function evaluate(node: Node): number {
  switch (node.kind) {
    case 'number':
      return node.operand.value;
    case 'unary':
      return node.op === '-' ? -evaluate(node.arg) : evaluate(node.arg);
    case 'binary': {
      const left = evaluate(node.left);
      const right = evaluate(node.right);
      if ((node.op === '/' || node.op === '%') && right === 0) throw new ExpressionError('Division by zero');
      switch (node.op) {
        case '+':
          return left + right;
        case '-':
          return left - right;
        case '*':
          return left * right;
        case '/':
          return left / right;
        case '%':
          return left % right;
      }
      break;
    }
    case 'call': {
      const args = node.args.map(evaluate);
      switch (node.name) {
        case 'round': {
          const digits = args[1] ?? 0;
          if (!Number.isInteger(digits) || digits < -12 || digits > 12)
            throw new ExpressionError('round takes a whole number of digits between -12 and 12', node.at);
          const factor = 10 ** digits;
          // Half away from zero, as people round; the epsilon absorbs binary fractions (1.005 → 1.01).
          return (Math.sign(args[0]) * Math.round(Math.abs(args[0]) * factor * (1 + Number.EPSILON))) / factor;
        }
        case 'abs':
          return Math.abs(args[0]);
        case 'min':
          return Math.min(...args);
        case 'max':
          return Math.max(...args);
        case 'pct_change':
          if (args[0] === 0) throw new ExpressionError('pct_change from 0 is undefined', node.at);
          return ((args[1] - args[0]) / Math.abs(args[0])) * 100;
      }
    }
  }
  throw new ExpressionError('Cannot evaluate the expression');
}

/** Parses and evaluates `source`; throws ExpressionError when it is not a valid expression or has no finite value. */
export function evaluateExpression(source: string): Evaluation {
  if (source.length > MAX_EXPRESSION_LENGTH)
    throw new ExpressionError(`The expression is longer than ${MAX_EXPRESSION_LENGTH} characters`);
  const parser = new Parser(tokenize(source));
  const tree = parser.parse();
  const value = evaluate(tree);
  if (!Number.isFinite(value)) throw new ExpressionError('The result is not a finite number');
  // Binary fractions (0.1 + 0.2) rounded away: 15 significant digits are all a double holds exactly.
  return { value: Number(value.toPrecision(15)), operands: parser.operands };
}
