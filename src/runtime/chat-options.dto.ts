import { ApiPropertyOptional } from '@nestjs/swagger';
import { plainToInstance } from 'class-transformer';
import { IsInt, IsNumber, IsOptional, Max, Min, ValidateBy, validateSync } from 'class-validator';
import { DomainError } from '../common/domain-error';

/** Caller-chosen model options, already type- and range-checked. */
export interface ChatOptions {
  temperature?: number;
  maxTokens?: number;
  stop?: string | string[];
}

const MAX_STOP_SEQUENCES = 4;
const MAX_STOP_LENGTH = 200;

function isStopSequence(value: unknown): boolean {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_STOP_LENGTH;
}

/** A stop sequence, or an array of 1..4 of them. */
function IsStop(): PropertyDecorator {
  return ValidateBy({
    name: 'isStop',
    validator: {
      validate: (value: unknown) =>
        isStopSequence(value) ||
        (Array.isArray(value) && value.length >= 1 && value.length <= MAX_STOP_SEQUENCES && value.every(isStopSequence)),
      defaultMessage: () => `options.stop must be a string or an array of up to ${MAX_STOP_SEQUENCES} strings`,
    },
  });
}

/**
 * The model options a caller may set, on every front door; their ranges are declared here only.
 * The agent's own limits apply on top (a maxTokens above the agent's is refused by the runtime).
 */
export class ChatOptionsDto implements ChatOptions {
  @ApiPropertyOptional({ minimum: 0, maximum: 2 })
  @IsOptional()
  @IsNumber({ allowNaN: false, allowInfinity: false }, { message: 'options.temperature must be a number from 0 to 2' })
  @Min(0, { message: 'options.temperature must be a number from 0 to 2' })
  @Max(2, { message: 'options.temperature must be a number from 0 to 2' })
  temperature?: number;

  @ApiPropertyOptional({ minimum: 1, type: 'integer' })
  @IsOptional()
  @IsInt({ message: 'options.maxTokens must be a positive integer' })
  @Min(1, { message: 'options.maxTokens must be a positive integer' })
  maxTokens?: number;

  @ApiPropertyOptional({
    oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' }, maxItems: MAX_STOP_SEQUENCES }],
  })
  @IsOptional()
  @IsStop()
  stop?: string | string[];
}

const OPTION_KEYS = ['temperature', 'maxTokens', 'stop'] as const;

/**
 * Picks the three options a caller may set and checks them against ChatOptionsDto (400
 * `invalid_option`). Every other key is dropped, never forwarded: no tools, model or iterations.
 */
export function parseChatOptions(input: unknown): ChatOptions {
  if (input === undefined || input === null) return {};
  if (typeof input !== 'object' || Array.isArray(input)) throw new DomainError('invalid_option', 'options must be an object');
  const picked: Record<string, unknown> = {};
  for (const key of OPTION_KEYS) {
    const value = (input as Record<string, unknown>)[key];
    if (value !== undefined) picked[key] = value;
  }
  const dto = plainToInstance(ChatOptionsDto, picked, { enableImplicitConversion: false });
  const [error] = validateSync(dto, { stopAtFirstError: true });
  if (error) {
    const message = Object.values(error.constraints ?? {})[0] ?? `options.${error.property} is invalid`;
    throw new DomainError('invalid_option', message);
  }
  const options: ChatOptions = {};
  if (dto.temperature !== undefined) options.temperature = dto.temperature;
  if (dto.maxTokens !== undefined) options.maxTokens = dto.maxTokens;
  if (dto.stop !== undefined) options.stop = dto.stop;
  return options;
}
