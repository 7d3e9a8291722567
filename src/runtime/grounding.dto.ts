import { ApiProperty } from '@nestjs/swagger';
import type { Grounding } from './grounding';

export class SupportedNumberResponse {
  @ApiProperty({ description: 'The number as the answer writes it, e.g. `$1.2M`' }) text: string;
  @ApiProperty({ description: 'The tool call whose result holds it' }) toolCallId: string;
}

export class UnsupportedNumberResponse {
  @ApiProperty({ description: 'The number as the answer writes it' }) text: string;
}

/** Which numbers of an answer the turn's tool results support (dates, ordinals and the question's numbers are not counted). */
export class GroundingResponse implements Grounding {
  @ApiProperty({ type: 'integer', minimum: 0, description: 'How many numbers of the answer are figures' }) numbers: number;
  @ApiProperty({ type: [SupportedNumberResponse] }) supported: SupportedNumberResponse[];
  @ApiProperty({
    type: [UnsupportedNumberResponse],
    description: 'Figures found in no tool result of the turn: made up, or computed by the model',
  })
  unsupported: UnsupportedNumberResponse[];
}
