import { ApiPropertyOptional } from '@nestjs/swagger';
import { plainToInstance } from 'class-transformer';
import { IsInt, IsNumber, IsOptional, IsString, Length, Max, Min, ValidateBy, validateSync } from 'class-validator';
import { DomainError } from '../common/domain-error';

/** Caller-chosen model options, already type- and range-checked. */
export interface ChatOptions {
  temperature?: number;
  maxTokens?: number;
  stop?: string | string[];
  /** Who the end user is, passed on to the model endpoint (OpenAI's `user`). */
  user?: string;
}

/**
 * The options a front door takes, each with the name its wire format gives it (for error messages):
 * an option without a name here is not read at all.
 */
export type ChatOptionNames = Partial<Record<keyof ChatOptions | 'toolChoice', string>>;

const OPTION_KEYS = ['temperature', 'maxTokens', 'stop', 'user'] as const satisfies ReadonlyArray<keyof ChatOptions>;

/** The stateless chat's `options` object: three keys, the rest ignored. */
export const CHAT_OPTION_NAMES: ChatOptionNames = {
  temperature: 'options.temperature',
  maxTokens: 'options.maxTokens',
  stop: 'options.stop',
};

const MAX_STOP_SEQUENCES = 4;
const MAX_STOP_LENGTH = 200;
const MAX_USER_LENGTH = 256;

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
      defaultMessage: () => `must be a string or an array of up to ${MAX_STOP_SEQUENCES} strings`,
    },
  });
}

/**
 * The model options a caller may set, on every front door; their ranges are declared here only.
 * The agent's own limits apply on top (a maxTokens above the agent's is refused by the runtime).
 * Messages leave the option's name out: each front door names it its own way (ChatOptionNames).
 */
export class ChatOptionsDto implements ChatOptions {
  @ApiPropertyOptional({ minimum: 0, maximum: 2 })
  @IsOptional()
  @IsNumber({ allowNaN: false, allowInfinity: false }, { message: 'must be a number from 0 to 2' })
  @Min(0, { message: 'must be a number from 0 to 2' })
  @Max(2, { message: 'must be a number from 0 to 2' })
  temperature?: number;

  @ApiPropertyOptional({ minimum: 1, type: 'integer' })
  @IsOptional()
  @IsInt({ message: 'must be a positive integer' })
  @Min(1, { message: 'must be a positive integer' })
  maxTokens?: number;

  @ApiPropertyOptional({
    oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' }, maxItems: MAX_STOP_SEQUENCES }],
  })
  @IsOptional()
  @IsStop()
  stop?: string | string[];

  @IsOptional()
  @IsString({ message: `must be a string of 1 to ${MAX_USER_LENGTH} characters` })
  @Length(1, MAX_USER_LENGTH, { message: `must be a string of 1 to ${MAX_USER_LENGTH} characters` })
  user?: string;
}

/**
 * Picks the options named in `names` and checks them against ChatOptionsDto (400 `invalid_option`,
 * `details.option` = the option's name). Every other key is dropped, never forwarded: no tools,
 * model or iterations.
 */
export function parseChatOptions(input: unknown, names: ChatOptionNames = CHAT_OPTION_NAMES): ChatOptions {
  if (input === undefined || input === null) return {};
  if (typeof input !== 'object' || Array.isArray(input)) throw new DomainError('invalid_option', 'options must be an object');
  const picked: Record<string, unknown> = {};
  for (const key of OPTION_KEYS.filter((option) => names[option] !== undefined)) {
    const value = (input as Record<string, unknown>)[key];
    if (value !== undefined) picked[key] = value;
  }
  const dto = plainToInstance(ChatOptionsDto, picked, { enableImplicitConversion: false });
  const [error] = validateSync(dto, { stopAtFirstError: true });
  if (error) {
    const option = names[error.property as keyof ChatOptions] ?? error.property;
    const problem = Object.values(error.constraints ?? {})[0] ?? 'is invalid';
    throw new DomainError('invalid_option', `${option} ${problem}`, { option });
  }
  const options: ChatOptions = {};
  if (dto.temperature !== undefined) options.temperature = dto.temperature;
  if (dto.maxTokens !== undefined) options.maxTokens = dto.maxTokens;
  if (dto.stop !== undefined) options.stop = dto.stop;
  if (dto.user !== undefined) options.user = dto.user;
  return options;
}
