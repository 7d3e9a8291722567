import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsNotEmpty,
  IsNumber,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateNested,
} from 'class-validator';
import { API_KEY_ROLES, type ApiKeyRole } from '../auth/api-key.entity';
import { CONTEXT_TOKENS_MAX, CONTEXT_TOKENS_MIN } from '../config/app-config';
import {
  AGENT_DEFAULTS,
  AGENT_MAX_ITERATIONS,
  AGENT_MAX_TOOL_CALLS_PER_STEP,
  AGENT_NAME_PATTERN,
  DEFAULT_AGENT_LOCALE,
  GROUNDING_MODES,
  WRITE_OPERATIONS,
  type AgentWrites,
  type AgentAccess,
  type AgentGuardrails,
  type AgentModelSettings,
  type AgentPlanning,
  type GroundingMode,
} from './agent.types';

export class AgentModelDto implements AgentModelSettings {
  @ApiPropertyOptional({ example: 'gpt-4o-mini' }) @IsOptional() @IsString() @IsNotEmpty() @MaxLength(200) model?: string;
  @ApiPropertyOptional({ minimum: 0, maximum: 2 }) @IsOptional() @IsNumber() @Min(0) @Max(2) temperature?: number;
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 1_000_000 })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  maxTokens?: number;
  @ApiPropertyOptional({
    type: 'integer',
    minimum: CONTEXT_TOKENS_MIN,
    maximum: CONTEXT_TOKENS_MAX,
    description:
      'Most prompt tokens one model call may send (system message, tool schemas and conversation, estimated with ' +
      "OpenAI's o200k tokenizer); leave room for the answer below the model's context window. A longer conversation " +
      'is trimmed for the call, never in storage: older tool results become a marker, then older turns are left ' +
      'out. Default: LLM_CONTEXT_TOKENS.',
  })
  @IsOptional()
  @IsInt()
  @Min(CONTEXT_TOKENS_MIN)
  @Max(CONTEXT_TOKENS_MAX)
  contextTokens?: number;
}

export class AgentPlanningDto implements Partial<AgentPlanning> {
  @ApiProperty({ type: 'integer', minimum: 1, maximum: AGENT_MAX_ITERATIONS, default: AGENT_DEFAULTS.maxIterations })
  @IsInt()
  @Min(1)
  @Max(AGENT_MAX_ITERATIONS)
  maxIterations: number;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    maximum: AGENT_MAX_TOOL_CALLS_PER_STEP,
    default: AGENT_DEFAULTS.maxToolCallsPerStep,
  })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(AGENT_MAX_TOOL_CALLS_PER_STEP)
  maxToolCallsPerStep?: number;
}

export class AgentGuardrailsDto implements AgentGuardrails {
  @ApiProperty({ type: 'integer', minimum: 1, maximum: 3600 }) @IsInt() @Min(1) @Max(3600) maxExecutionTimeSec: number;
  @ApiProperty({ type: 'integer', minimum: 1, maximum: 10_000_000 })
  @IsInt()
  @Min(1)
  @Max(10_000_000)
  maxTokensPerInvocation: number;
}

export class AgentAccessDto implements AgentAccess {
  @ApiPropertyOptional({ enum: API_KEY_ROLES, isArray: true })
  @IsOptional()
  @IsArray()
  @IsIn(API_KEY_ROLES, { each: true })
  roles?: ApiKeyRole[];

  @ApiPropertyOptional({ type: [String], description: 'API key subjects allowed to use the agent' })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(1000)
  @IsString({ each: true })
  @MaxLength(255, { each: true })
  subjects?: string[];
}

/** Body of POST /agents and PUT /agents/:name (PUT replaces the whole spec). */
export class AgentSpecDto {
  @ApiProperty({ example: 'sales_analyst', pattern: AGENT_NAME_PATTERN.source })
  @IsString()
  @Matches(AGENT_NAME_PATTERN, {
    message: 'name must be lower-case letters, digits, _ or -, starting with a letter, at most 63 characters',
  })
  name: string;

  @ApiProperty() @IsString() @IsNotEmpty() @MaxLength(255) label: string;
  @ApiPropertyOptional({ default: 'assistant' }) @IsOptional() @IsString() @IsNotEmpty() @MaxLength(255) role?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(2000) description?: string;
  @ApiProperty() @IsString() @IsNotEmpty() @MaxLength(50_000) instructions: string;

  @ApiPropertyOptional({ type: AgentModelDto })
  @IsOptional()
  @ValidateNested()
  @Type(() => AgentModelDto)
  model?: AgentModelDto;

  @ApiPropertyOptional({ type: [String], description: 'Tool names the agent may call' })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(100)
  @IsString({ each: true })
  tools?: string[];

  @ApiPropertyOptional({ type: [String], description: 'Object names the agent may use; ["*"] = all' })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(1000)
  @IsString({ each: true })
  allowedObjects?: string[];

  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: { type: 'array', items: { type: 'string', enum: [...WRITE_OPERATIONS] } },
    example: { deal: ['update'] },
    description:
      "Per object, the writes the agent may propose with its write tools (create_record, update_record, delete_record, update_records, named in `tools`); none by default. Each proposal waits for a person's approval and runs as the approving key.",
  })
  @IsOptional()
  @IsObject()
  writes?: Record<string, unknown>;

  @ApiPropertyOptional({ type: AgentPlanningDto })
  @IsOptional()
  @ValidateNested()
  @Type(() => AgentPlanningDto)
  planning?: AgentPlanningDto;

  @ApiPropertyOptional({ type: AgentGuardrailsDto })
  @IsOptional()
  @ValidateNested()
  @Type(() => AgentGuardrailsDto)
  guardrails?: AgentGuardrailsDto;

  @ApiPropertyOptional({ type: AgentAccessDto })
  @IsOptional()
  @ValidateNested()
  @Type(() => AgentAccessDto)
  access?: AgentAccessDto;

  @ApiPropertyOptional({
    enum: GROUNDING_MODES,
    default: 'annotate',
    description:
      'Numbers of an answer that no tool result of the turn supports: annotate = report them in `grounding`; retry = also ask the model once to correct or remove them; off = no check',
  })
  @IsOptional()
  @IsIn(GROUNDING_MODES)
  grounding?: GroundingMode;

  @ApiPropertyOptional({
    default: DEFAULT_AGENT_LOCALE,
    example: 'de-DE',
    description:
      'BCP 47 locale the agent answers in: grounding reads its numbers in that style (en: 1,234.5; de: 1.234,5; fr: 1 234,5)',
  })
  @IsOptional()
  @IsString()
  @MaxLength(35)
  locale?: string;

  @ApiPropertyOptional({ default: true }) @IsOptional() @IsBoolean() active?: boolean;
}

export class AgentSummaryResponse {
  @ApiProperty() name: string;
  @ApiProperty() label: string;
  @ApiProperty() role: string;
  @ApiProperty() active: boolean;
}

export class AgentListResponse {
  @ApiProperty({ type: [AgentSummaryResponse] }) agents: AgentSummaryResponse[];
}

export class AgentResponse extends AgentSummaryResponse {
  @ApiProperty({ type: 'string', nullable: true }) description: string | null;
  @ApiProperty() instructions: string;
  @ApiProperty({ type: AgentModelDto }) model: AgentModelSettings;
  @ApiProperty({ type: [String] }) tools: string[];
  @ApiProperty({ type: [String] }) allowedObjects: string[];
  @ApiProperty({
    type: 'object',
    additionalProperties: { type: 'array', items: { type: 'string', enum: [...WRITE_OPERATIONS] } },
  })
  writes: AgentWrites;
  @ApiProperty({ type: AgentPlanningDto }) planning: AgentPlanning;
  @ApiProperty({ type: AgentGuardrailsDto }) guardrails: AgentGuardrails;
  @ApiProperty({ type: AgentAccessDto }) access: AgentAccess;
  @ApiProperty({ enum: GROUNDING_MODES }) grounding: GroundingMode;
  @ApiProperty({ example: DEFAULT_AGENT_LOCALE }) locale: string;
  @ApiProperty({ type: 'integer', minimum: 1, description: 'Incremented by every change' }) version: number;
  @ApiProperty({ format: 'date-time' }) createdAt: string;
  @ApiProperty({ format: 'date-time' }) updatedAt: string;
}
