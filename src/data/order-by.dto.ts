import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

/** One sort key (documentation only: the compilers check them). */
export class OrderByDto {
  @ApiProperty({ description: 'A field name (records), or a group-by field or aggregation alias (aggregate)' }) field: string;
  @ApiPropertyOptional({ enum: ['asc', 'desc'], default: 'asc' }) order?: 'asc' | 'desc';
}
