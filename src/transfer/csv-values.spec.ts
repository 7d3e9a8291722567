import { stringify } from 'csv-stringify/sync';
import fc from 'fast-check';
import type { FieldMeta } from '../metadata/object-metadata.types';
import { cellWriter, csvCell, csvLine, csvLines, valueToCell } from './csv-values';
import { field } from '../../test/support/metadata-fixtures';

/** Text rich in what CSV cares about: quotes, commas, line breaks, spaces, a BOM, non-ASCII. */
const csvText = fc.string({
  unit: fc.constantFrom('a', 'Z', ' ', '"', ',', '\n', '\r', ';', '[', '\uFEFF', 'é', '✓'),
  maxLength: 12,
});

describe('csvCell and csvLine', () => {
  it('write what csv-stringify writes with its defaults, for text without a lone CR', () => {
    fc.assert(
      fc.property(
        fc.array(
          csvText.map((text) => text.replace(/\r(?!\n)/g, '')),
          { minLength: 1, maxLength: 6 },
        ),
        (cells) => {
          expect(csvLine(cells)).toBe(stringify([cells]));
        },
      ),
      { seed: 15, numRuns: 2_000 },
    );
  });

  it('quote a cell with a comma, a quote, CR or LF, doubling its quotes, and leave others as they are', () => {
    expect(csvCell('plain text; with [brackets]')).toBe('plain text; with [brackets]');
    expect(csvCell(' spaced ')).toBe(' spaced ');
    expect(csvCell('')).toBe('');
    expect(csvCell('a,b')).toBe('"a,b"');
    expect(csvCell('He said "hi"')).toBe('"He said ""hi"""');
    expect(csvCell('line\nbreak')).toBe('"line\nbreak"');
    expect(csvCell('windows\r\nbreak')).toBe('"windows\r\nbreak"');
    // csv-stringify leaves a lone CR bare, which readers take for the end of the record.
    expect(csvCell('old mac\rbreak')).toBe('"old mac\rbreak"');
  });
});

describe('cellWriter', () => {
  const fields: FieldMeta[] = [
    field('name', 'text'),
    field('qty', 'integer'),
    field('price', 'number'),
    field('amount', 'currency'),
    field('active', 'boolean'),
    field('due', 'date'),
    field('at', 'datetime'),
    field('tags', 'multiselect', { options: ['a', 'b;c'] }),
    field('meta', 'json'),
    field('owner', 'lookup', { reference: 'user' }),
  ];
  // Values as the data engine decodes them, and some it never gives, which must still come out alike.
  const value = fc.oneof(
    fc.constant(null),
    fc.constant(undefined),
    csvText,
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.array(fc.oneof(csvText, fc.constant(null)), { maxLength: 3 }),
    fc.dictionary(csvText, fc.oneof(csvText, fc.integer()), { maxKeys: 2 }),
  );

  it.each(fields.map((f) => [f.type, f] as const))('writes %s values as csvCell(valueToCell(field, value))', (_type, column) => {
    const write = cellWriter(column);
    fc.assert(
      fc.property(value, (v) => {
        expect(write(v)).toBe(csvCell(valueToCell(column, v)));
      }),
      { seed: 15, numRuns: 500 },
    );
  });
});

describe('csvLines', () => {
  it('writes the chosen columns of each row in their order, one LF-ended line per row', () => {
    const name = field('name', 'text');
    const qty = field('qty', 'integer');
    const rows = [
      ['id-1', 'Widget, large', 3],
      ['id-2', null, 12],
    ];
    expect(csvLines(rows, [2, 1], [cellWriter(qty), cellWriter(name)])).toBe('3,"Widget, large"\n12,\n');
    expect(csvLines([], [0], [cellWriter(name)])).toBe('');
  });
});
