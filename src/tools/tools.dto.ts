import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsObject, IsOptional } from 'class-validator';
import { JSON_VALUE } from '../common/openapi.schemas';
import type { ToolDefinition } from './tool.types';

/** Body of POST /api/v1/ai/tools/:name/execute. */
export class ExecuteToolDto {
  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    description: 'The tool arguments, checked against its JSON Schema; default {}',
    example: { objectName: 'deal', where: { stage: 'won' }, limit: 5 },
  })
  @IsOptional()
  @IsObject({ message: 'arguments must be a JSON object' })
  arguments?: Record<string, unknown>;
}

export class ToolInfo {
  @ApiProperty({ example: 'query_records' }) name: string;
  @ApiProperty() description: string;
  @ApiProperty({ type: 'object', additionalProperties: true, description: 'JSON Schema of the arguments' })
  parameters: Record<string, unknown>;
}

export class ToolListResponse {
  @ApiProperty({ type: [ToolInfo] }) tools: ToolInfo[];
}

export class ExecuteToolResponse {
  @ApiProperty({
    ...JSON_VALUE,
    description: 'What the tool returned (any JSON), or { error: { code, message, details? } } when isError',
  })
  result: unknown;
  @ApiProperty() isError: boolean;
  @ApiProperty({ minimum: 0, description: 'Milliseconds, two decimals' }) durationMs: number;
}

export function toToolInfo(tool: Pick<ToolDefinition<never>, 'name' | 'description' | 'parameters'>): ToolInfo {
  return { name: tool.name, description: tool.description, parameters: tool.parameters };
}
