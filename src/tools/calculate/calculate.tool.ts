import { DomainError } from '../../common/domain-error';
import { defineTool } from '../tool.define';
import type { ToolDefinition } from '../tool.types';
import { evaluateExpression, ExpressionError, MAX_EXPRESSION_LENGTH } from './arithmetic.expression';

export const CALCULATE_TOOL = 'calculate';

export interface CalculateArgs {
  expression: string;
}

export interface CalculateResult {
  value: number;
  /** Each number of the expression that is a figure, with the call whose result holds it. */
  operands: Array<{ text: string; toolCallId: string }>;
}

/**
 * Arithmetic over the figures of the turn: the model derives differences, totals, shares and
 * growth rates here, exactly, instead of in its head, and every number it computes with must be a
 * value an earlier data call of the turn returned. Its result is evidence like any other.
 * Platform scope: it needs a chat turn's results, so it is not listed (nor offered over MCP); agents name it.
 */
export function createCalculateTool(): ToolDefinition<CalculateArgs> {
  return defineTool<CalculateArgs>({
    name: CALCULATE_TOOL,
    description:
      'Evaluate arithmetic over figures that earlier data tool calls of this turn returned (query_records, get_record, ' +
      'aggregate_data, query_metric, or an earlier calculate). Use it for every difference, total, share, average of ' +
      'results and growth rate you state: a figure you compute yourself is reported to the user as unsupported. ' +
      'Operators + - * / % (remainder) and parentheses; functions round(x, digits), abs(x), min(a, b, ...), max(a, b, ...), ' +
      'pct_change(old, new) = (new - old) / |old| * 100. Write each number as plain digits exactly as a tool returned it ' +
      '(you may drop decimals): no thousands separators, currency symbols or %. Every number must be a value of an earlier ' +
      "result, or the call fails with unsupported_operand naming it; only round's digits and a factor of 100 are exempt. " +
      'A share a / b is a ratio: state it as a percentage (0.25 is 25%). ' +
      'Returns { value, operands: [{ text, toolCallId }] } and a "ref" such as "r4": cite the value in your answer as {{r4}}. ' +
      'Example (growth from Q1 revenue 1204500.5 to Q2 revenue 1388200): {"expression": "pct_change(1204500.5, 1388200)"}.',
    parameters: {
      type: 'object',
      properties: {
        expression: {
          type: 'string',
          minLength: 1,
          maxLength: MAX_EXPRESSION_LENGTH,
          description: 'The arithmetic, e.g. "(4521.5 - 3980) / 3980" or "round(1204500.5 + 980200, 0)".',
        },
      },
      required: ['expression'],
      additionalProperties: false,
    },
    scope: 'platform',
    holds: 'value',
    readsTurnResults: true,
    execute(args, ctx): Promise<CalculateResult> {
      let evaluation;
      try {
        evaluation = evaluateExpression(args.expression);
      } catch (error) {
        if (error instanceof ExpressionError) {
          return Promise.reject(new DomainError('invalid_expression', `The expression is not valid: ${error.message}`));
        }
        throw error;
      }
      const operands: CalculateResult['operands'] = [];
      const unsupported: string[] = [];
      for (const operand of evaluation.operands) {
        if (operand.constant) continue;
        const toolCallId = ctx.evidence?.supportOf(operand.text);
        if (toolCallId) operands.push({ text: operand.text, toolCallId });
        else unsupported.push(operand.text);
      }
      if (unsupported.length) {
        const listed = [...new Set(unsupported)];
        return Promise.reject(
          new DomainError(
            'unsupported_operand',
            `No earlier data result of this turn holds ${listed.map((t) => `"${t}"`).join(', ')}. ` +
              'Compute only with values your data tool calls returned, written as they returned them; fetch a missing value first.',
            { operands: listed },
          ),
        );
      }
      return Promise.resolve({ value: evaluation.value, operands });
    },
  });
}
