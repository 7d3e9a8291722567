import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { UNSUPPORTED_REASONS, type Grounding, type UnsupportedReason } from './grounding';

export class SupportedNumberResponse {
  @ApiProperty({ description: 'The figure as the answer writes it, e.g. `$1.2M`' }) text: string;
  @ApiProperty({ description: 'The tool call whose result holds the cell (a data tool, or calculate)' }) toolCallId: string;
  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    description:
      "Index of the cell's row in the result's rows; absent for a top-level value (a count, a single record, a calculation)",
  })
  row?: number;
  @ApiPropertyOptional({ description: 'The column (field, alias or metric) of the cell' }) column?: string;
  @ApiProperty({
    description:
      "true when the figure's clause names values of the results (an owner, a stage, a period) and the cell's row has them; " +
      'false when the clause names none, so only the value was checked',
  })
  entityChecked: boolean;
}

export class UnsupportedNumberResponse {
  @ApiProperty({ description: 'The figure as the answer writes it' }) text: string;
  @ApiProperty({
    enum: UNSUPPORTED_REASONS,
    description:
      'no_such_value: no cell holds it; other_row: a cell holds it, but in a row other than the one the sentence names; ' +
      'wrong_sign, wrong_unit (count, amount, percentage or currency), wrong_scale (k/M/bn or ×100): a cell holds it ' +
      'otherwise; from_question: only the question has it; not_data: only a description or definition has it',
  })
  reason: UnsupportedReason;
}

/**
 * Which figures of an answer a cell of the turn's data results supports (dates, ordinals, labels,
 * identifiers and the question's numbers are not counted).
 */
export class GroundingResponse implements Grounding {
  @ApiProperty({ type: 'integer', minimum: 0, description: 'How many figures of the answer are claims' }) numbers: number;
  @ApiProperty({ type: [SupportedNumberResponse], description: 'Figures equal to a cell of a row their sentence agrees with' })
  supported: SupportedNumberResponse[];
  @ApiProperty({
    type: [UnsupportedNumberResponse],
    description: 'Figures no cell supports, with the reason: made up, of another row, or computed by the model itself',
  })
  unsupported: UnsupportedNumberResponse[];
}
