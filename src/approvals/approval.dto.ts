import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';
import type { ApprovalDecision } from '../chats/durable/approval-gateway';

export const APPROVAL_DECISIONS = ['approve', 'reject'] as const;

/** Body of POST /api/v1/chats/:id/approvals. */
export class ApprovalDecisionDto implements ApprovalDecision {
  @ApiProperty({ description: "The toolCallId of a proposal in the chat's requiredAction" })
  @IsString()
  @IsNotEmpty()
  @MaxLength(200)
  toolCallId: string;

  @ApiProperty({ enum: APPROVAL_DECISIONS })
  @IsIn(APPROVAL_DECISIONS)
  decision: ApprovalDecision['decision'];

  @ApiProperty({ description: "The proposal's token, as requiredAction shows it; single use" })
  @IsString()
  @IsNotEmpty()
  @MaxLength(200)
  token: string;

  @ApiPropertyOptional({ description: 'Why (a rejection): the model reads it' })
  @IsOptional()
  @IsString()
  @MaxLength(2000)
  reason?: string;
}
