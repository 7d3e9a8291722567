import { applyDecorators } from '@nestjs/common';
import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';

/**
 * An optional whole-number query parameter from `min` to `max`. Query values are text: only plain
 * decimal digits become a number, so "1e3", " 5" or "" stay text and fail the integer check.
 */
export function QueryInt(min: number, max: number, message = '$property must be a whole number'): PropertyDecorator {
  return applyDecorators(
    IsOptional(),
    Transform(({ value }: { value: unknown }) => (typeof value === 'string' && /^-?\d+$/.test(value) ? Number(value) : value)),
    IsInt({ message }),
    Min(min),
    Max(max),
  );
}

/** `?limit=&offset=` of list routes. Each route clamps the limit to its own maximum (clampLimit). */
export class PaginationQueryDto {
  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    description: "Page size; larger values are clamped to the route's maximum; default 50",
  })
  @QueryInt(1, Number.MAX_SAFE_INTEGER)
  limit?: number;

  @ApiPropertyOptional({ type: 'integer', minimum: 0, default: 0, description: 'Items to skip' })
  @QueryInt(0, Number.MAX_SAFE_INTEGER)
  offset?: number;
}
