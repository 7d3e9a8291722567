import { DomainError } from '../../common/domain-error';
import { ToolRegistry } from '../tool.registry';
import type { ToolContext } from '../tool.types';
import { evaluateExpression, ExpressionError } from './arithmetic.expression';
import { createCalculateTool } from './calculate.tool';

describe('evaluateExpression', () => {
  it.each([
    ['1 + 2 * 3', 7],
    ['(1 + 2) * 3', 9],
    ['10 - 4 - 3', 3],
    ['2 * -3', -6],
    ['-(4 - 10)', 6],
    ['17 % 5', 2],
    ['0.1 + 0.2', 0.3],
    ['round(2.345, 2)', 2.35],
    ['round(1.005, 2)', 1.01],
    ['round(-2.5)', -3],
    ['round(1234.5, -2)', 1200],
    ['abs(3 - 10)', 7],
    ['min(4, 2, 8)', 2],
    ['MAX(4, 2, 8)', 8],
    ['pct_change(200, 250)', 25],
    ['pct_change(-200, -100)', 50],
    ['pct_change(80, 60)', -25],
    ['451 / (451 + 419)', 0.518390804597701],
  ])('%s = %d', (expression, value) => {
    expect(evaluateExpression(expression).value).toBe(value);
  });

  it('lists the numbers written, marking round digits and a factor of 100 as constants', () => {
    expect(evaluateExpression('round((1204500.5 - 980200) / 980200 * 100, 1)').operands).toEqual([
      { text: '1204500.5', value: 1204500.5, constant: false },
      { text: '980200', value: 980200, constant: false },
      { text: '980200', value: 980200, constant: false },
      { text: '100', value: 100, constant: true },
      { text: '1', value: 1, constant: true },
    ]);
    expect(evaluateExpression('100 + 5').operands[0].constant).toBe(false);
  });

  it.each([
    ['', 'ends too early'],
    ['1 +', 'ends too early'],
    ['(1 + 2', 'Missing ")"'],
    ['1 2', 'Unexpected "2"'],
    ['1,234 + 5', 'plain numbers without thousands separators'],
    ['$5 + 1', 'plain numbers'],
    ['12% + 1', 'is a percentage'],
    ['eval(1)', 'Unknown name "eval"'],
    ['process.exit(1)', 'Unexpected "."'],
    ['constructor(1)', 'Unknown name "constructor"'],
    ['__proto__(1)', 'Unknown name "__proto__"'],
    ['constructor', 'Unknown name'],
    ['1 / 0', 'Division by zero'],
    ['5 % 0', 'Division by zero'],
    ['pct_change(0, 5)', 'from 0'],
    ['round(1, 0.5)', 'whole number of digits'],
    ['abs(1, 2)', 'abs takes 1 arguments'],
    ['1e400', 'Malformed number'],
  ])('refuses %j (%s)', (expression, message) => {
    expect(() => evaluateExpression(expression)).toThrow(ExpressionError);
    expect(() => evaluateExpression(expression)).toThrow(message);
  });

  it('bounds nesting and length', () => {
    expect(() => evaluateExpression(`${'('.repeat(100)}1${')'.repeat(100)}`)).toThrow('nested');
    expect(() => evaluateExpression('-'.repeat(100) + '1')).toThrow('nested');
    expect(() => evaluateExpression('1+'.repeat(1500) + '1')).toThrow('longer than');
  });
});

describe('calculate', () => {
  const held = new Map([
    ['451', 'call_a'],
    ['419', 'call_a'],
    ['344260723.5', 'call_b'],
  ]);
  const ctx = (evidence = true): ToolContext => ({
    signal: new AbortController().signal,
    ...(evidence
      ? { evidence: { supportOf: (text: string) => held.get(text), dataResult: () => Promise.resolve(undefined) } }
      : {}),
  });
  const tool = createCalculateTool();

  it('evaluates over supported operands and names the call that holds each', async () => {
    await expect(tool.execute({ expression: '(451 - 419) * 100 / 419' }, ctx())).resolves.toEqual({
      value: 7.63723150357995,
      operands: [
        { text: '451', toolCallId: 'call_a' },
        { text: '419', toolCallId: 'call_a' },
        { text: '419', toolCallId: 'call_a' },
      ],
    });
  });

  it('refuses with unsupported_operand naming each number no earlier result holds', async () => {
    const refused = tool.execute({ expression: '451 - 17 + 2.5 + 17' }, ctx());
    await expect(refused).rejects.toBeInstanceOf(DomainError);
    await expect(refused).rejects.toMatchObject({ code: 'unsupported_operand', details: { operands: ['17', '2.5'] } });
    await expect(refused).rejects.toThrow('"17", "2.5"');
  });

  it('supports nothing outside a chat turn', async () => {
    await expect(tool.execute({ expression: '451 + 419' }, ctx(false))).rejects.toMatchObject({ code: 'unsupported_operand' });
  });

  it('answers a malformed expression with invalid_expression', async () => {
    await expect(tool.execute({ expression: 'eval("1")' }, ctx())).rejects.toMatchObject({ code: 'invalid_expression' });
  });

  it('is a platform tool (named by agents, not listed) whose schema ajv compiles', () => {
    const registry = new ToolRegistry();
    registry.register(tool);
    expect(registry.list({ scope: 'agent' })).toEqual([]);
    expect(tool.scope).toBe('platform');
  });

  it('name, description and parameters', () => {
    expect({ name: tool.name, description: tool.description, parameters: tool.parameters }).toMatchSnapshot();
  });
});
