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
  @ApiPropertyOptional({
    description: 'Of a figure the server filled in from a reference: the reference, e.g. `r3.2.won_revenue`',
  })
  ref?: string;
  @ApiPropertyOptional({
    type: [String],
    description:
      'Of a figure worked out from two others of its sentence (a difference, change or ratio, e.g. "down 8.2 points" ' +
      'after 54.9% and 46.7%): those two figures as the answer shows them',
  })
  derivedFrom?: string[];
}

export class UnsupportedNumberResponse {
  @ApiProperty({ description: 'The figure as the answer writes it' }) text: string;
  @ApiProperty({
    enum: UNSUPPORTED_REASONS,
    description:
      'no_such_value: no cell holds it; other_row: a cell holds it, but in a row other than the one the sentence names; ' +
      'wrong_sign, wrong_unit (count, amount, percentage or currency), wrong_scale (k/M/bn or ×100): a cell holds it ' +
      'otherwise; from_question: only the question has it; not_data: only a description or definition has it; ' +
      'bad_reference: a reference to no cell of a result the caller may see (shown as [figure unavailable])',
  })
  reason: UnsupportedReason;
  @ApiPropertyOptional({ description: 'Of a reference: as the model wrote it, e.g. `{{r9.1.amount}}`' }) ref?: string;
}

export class FigureReceiptResponse {
  @ApiProperty({ description: 'The reference: result, row and column, e.g. `r3.2.won_revenue` (`r4` for a calculate result)' })
  ref: string;
  @ApiProperty({ description: 'The figure as shown in the answer, e.g. `$27.5M`' }) text: string;
  @ApiProperty({ description: 'The tool call whose result holds the cell' }) toolCallId: string;
  @ApiProperty({ description: 'The tool of that call' }) tool: string;
  @ApiPropertyOptional({ type: 'integer', minimum: 1, description: 'The row of the result, from 1 (absent for a value result)' })
  row?: number;
  @ApiProperty({ description: 'The column of the cell' }) column: string;
  @ApiProperty({ description: 'The value of the cell as the result holds it', nullable: true }) value: unknown;
}

export class GroundingSummaryResponse {
  @ApiProperty({ type: 'integer', minimum: 0, description: 'Figures written as references and filled in by the server' })
  referenced: number;
  @ApiProperty({ type: 'integer', minimum: 0, description: 'Figures typed by hand, checked against the results' }) typed: number;
  @ApiProperty({ type: 'integer', minimum: 0 }) supported: number;
  @ApiProperty({ type: 'integer', minimum: 0 }) unsupported: number;
}

export class GroundingCaveatResponse {
  @ApiProperty({ description: 'The object of a result the answer used' }) object: string;
  @ApiProperty({
    enum: ['row_filter', 'hidden_fields'],
    description: "The result was produced under the caller's row filter, or with fields hidden from the caller",
  })
  kind: 'row_filter' | 'hidden_fields';
  @ApiPropertyOptional({ type: [String], description: 'Hidden fields the caller itself named (never the others)' })
  fields?: string[];
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
  @ApiPropertyOptional({
    type: [FigureReceiptResponse],
    description: 'Where each figure the server filled in from a reference came from: the call, the row, the column and the value',
  })
  receipts?: FigureReceiptResponse[];
  @ApiPropertyOptional({ type: GroundingSummaryResponse }) summary?: GroundingSummaryResponse;
  @ApiPropertyOptional({
    type: [GroundingCaveatResponse],
    description:
      'What access shaped the results the answer used (a row filter, hidden fields); never a count of what was left out',
  })
  caveats?: GroundingCaveatResponse[];
  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    description: 'An answer longer than 20,000 characters is checked up to this character only; what follows is not checked',
  })
  uncheckedFrom?: number;
}
