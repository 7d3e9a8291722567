import { DomainError } from '../common/domain-error';
import { validateDynamicTools } from './client-tools';

const declare = (inputSchema: Record<string, unknown>) => validateDynamicTools([{ name: 'fill_form', inputSchema }], []);

function refusal(inputSchema: Record<string, unknown>): DomainError {
  try {
    declare(inputSchema);
  } catch (error) {
    return error as DomainError;
  }
  throw new Error('the schema was accepted');
}

describe('client tool schemas', () => {
  describe('$ref', () => {
    const address = { type: 'object', properties: { street: { type: 'string' } } };

    it.each([
      ['the root', { type: 'object', properties: { children: { type: 'array', items: { $ref: '#' } } } }],
      ['a JSON pointer into $defs', { $defs: { address }, type: 'object', properties: { home: { $ref: '#/$defs/address' } } }],
      ['a JSON pointer into definitions', { definitions: { address }, properties: { home: { $ref: '#/definitions/address' } } }],
      [
        'an escaped and percent-encoded pointer',
        { $defs: { 'a/b c': address }, properties: { x: { $ref: '#/$defs/a~1b%20c' } } },
      ],
      ['a pointer into an array', { anyOf: [address, { type: 'null' }], properties: { x: { $ref: '#/anyOf/0' } } }],
      ['an $anchor', { $defs: { address: { ...address, $anchor: 'addr' } }, properties: { x: { $ref: '#addr' } } }],
      ['a draft-07 anchor $id', { definitions: { address: { ...address, $id: '#addr' } }, properties: { x: { $ref: '#addr' } } }],
      [
        'a nested $id, resolved against the root $id',
        {
          $id: 'https://example.com/schemas/order',
          $defs: { address: { ...address, $id: 'address', $defs: { street: { type: 'string' } } } },
          properties: {
            ship: { $ref: 'address' },
            bill: { $ref: 'https://example.com/schemas/address#/$defs/street' },
          },
        },
      ],
    ])('accepts one that points at %s', (_label, schema) => {
      expect(declare(schema)).toHaveLength(1);
    });

    it.each([
      ['a missing $defs entry', { type: 'object', properties: { home: { $ref: '#/$defs/address' } } }],
      ['a pointer to a non-schema', { description: 'x', properties: { home: { $ref: '#/description' } } }],
      ['an unknown anchor', { properties: { home: { $ref: '#nowhere' } } }],
      ['another document', { properties: { home: { $ref: 'https://example.com/address.json' } } }],
      ['a relative document', { properties: { home: { $ref: 'address.json#/street' } } }],
      ['an $id no part of this schema has', { $ref: 'alice-form' }],
      [
        'a pointer inside a nested resource that is not there',
        { $defs: { a: { $id: 'a', properties: { x: { $ref: '#/$defs/b' } } }, b: address } },
      ],
    ])('refuses one that points at %s with invalid_dynamic_tools naming the tool', (_label, schema) => {
      const error = refusal(schema);
      expect(error).toBeInstanceOf(DomainError);
      expect(error.code).toBe('invalid_dynamic_tools');
      expect(error.message).toContain('client tool "fill_form"');
      expect(error.message).toMatch(/\$ref ".*" does not point inside the schema/);
      expect(error.details).toEqual({ param: 'dynamicTools[0].inputSchema', tool: 'fill_form' });
    });

    it('reads $ref and $id inside const, enum, default and examples as data', () => {
      const data = { $ref: 'https://example.com/elsewhere', $id: 'x' };
      expect(declare({ type: 'object', const: data, enum: [data], default: data, examples: [data] })).toHaveLength(1);
    });
  });
});
