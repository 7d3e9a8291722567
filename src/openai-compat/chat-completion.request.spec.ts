import { MAX_CONVERSATION_MESSAGES, MAX_MESSAGE_LENGTH } from '../runtime/conversation';
import { domainError } from '../../test/support/metadata-fixtures';
import { parseCompletionRequest } from './chat-completion.request';

const user = (content: unknown) => ({ role: 'user', content });
const body = (extra: Record<string, unknown> = {}) => ({ model: 'data_chat', messages: [user('hi')], ...extra });

/** The code and the offending parameter of what parseCompletionRequest refuses. */
function refusal(input: unknown): { code: string; param: unknown; message: string } {
  const error = domainError(() => parseCompletionRequest(input));
  return { code: error.code, param: (error.details as { param?: unknown } | undefined)?.param, message: error.message };
}

describe('parseCompletionRequest', () => {
  it('reads a minimal request with defaults, ignoring fields it does not use', () => {
    expect(parseCompletionRequest(body({ seed: 1, presence_penalty: 0, metadata: { a: 'b' }, n: null }))).toEqual({
      model: 'data_chat',
      conversation: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
      instructions: [],
      options: {},
      optionNames: {
        temperature: 'temperature',
        maxTokens: 'max_tokens',
        stop: 'stop',
        user: 'user',
        toolChoice: 'tool_choice',
      },
      tools: undefined,
      toolChoice: undefined,
      stream: false,
      includeUsage: false,
    });
  });

  it('takes system and developer messages as instructions and keeps the order of the rest', () => {
    const request = parseCompletionRequest(
      body({
        messages: [
          { role: 'system', content: 'Be brief.' },
          user([
            { type: 'text', text: 'how ' },
            { type: 'text', text: 'many?' },
          ]),
          { role: 'developer', content: [{ type: 'text', text: 'Use EUR.' }] },
          { role: 'assistant', content: [{ type: 'refusal', refusal: 'No.' }] },
        ],
      }),
    );
    expect(request.instructions).toEqual(['Be brief.', 'Use EUR.']);
    expect(request.conversation).toEqual([
      { role: 'user', parts: [{ type: 'text', text: 'how many?' }] },
      { role: 'assistant', parts: [{ type: 'text', text: 'No.' }] },
    ]);
  });

  it('pairs tool messages with the tool calls of the assistant message before them', () => {
    const request = parseCompletionRequest(
      body({
        messages: [
          user('q'),
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'a', type: 'function', function: { name: 'query_records', arguments: '{"object":"deal"}' } },
              { id: 'b', type: 'function', function: { name: 'count', arguments: '{}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'b', content: '2' },
          { role: 'tool', tool_call_id: 'a', content: '[]' },
          { role: 'assistant', content: 'Done.' },
        ],
      }),
    );
    expect(request.conversation).toEqual([
      { role: 'user', parts: [{ type: 'text', text: 'q' }] },
      {
        role: 'assistant',
        parts: [
          { type: 'tool-call', toolCallId: 'a', toolName: 'query_records', input: '{"object":"deal"}' },
          { type: 'tool-call', toolCallId: 'b', toolName: 'count', input: '{}' },
        ],
      },
      { role: 'tool', parts: [{ type: 'tool-result', toolCallId: 'b', toolName: 'count', output: '2', isError: false }] },
      {
        role: 'tool',
        parts: [{ type: 'tool-result', toolCallId: 'a', toolName: 'query_records', output: '[]', isError: false }],
      },
      { role: 'assistant', parts: [{ type: 'text', text: 'Done.' }] },
    ]);
  });

  it('maps options to our names: max_completion_tokens wins the name, both must agree', () => {
    const request = parseCompletionRequest(
      body({ temperature: 0.2, stop: ['\n'], user: 'u1', max_tokens: 50, max_completion_tokens: 50 }),
    );
    expect(request.options).toEqual({ temperature: 0.2, stop: ['\n'], user: 'u1', maxTokens: 50 });
    expect(request.optionNames.maxTokens).toBe('max_completion_tokens');
    expect(parseCompletionRequest(body({ max_tokens: 7 })).optionNames.maxTokens).toBe('max_tokens');
    expect(refusal(body({ max_tokens: 50, max_completion_tokens: 60 }))).toMatchObject({
      code: 'validation_failed',
      param: 'max_tokens',
    });
  });

  it('reads stream, include_usage, function tools (a missing parameters schema takes none) and tool_choice', () => {
    const request = parseCompletionRequest(
      body({
        stream: true,
        stream_options: { include_usage: true },
        tools: [
          { type: 'function', function: { name: 'pick', description: 'Pick one', parameters: { type: 'object' } } },
          { type: 'function', function: { name: 'noop' } },
        ],
        tool_choice: { type: 'function', function: { name: 'pick' } },
      }),
    );
    expect(request).toMatchObject({ stream: true, includeUsage: true, toolChoice: { name: 'pick' } });
    expect(request.tools).toEqual([
      { name: 'pick', description: 'Pick one', inputSchema: { type: 'object' } },
      { name: 'noop', inputSchema: { type: 'object', properties: {} } },
    ]);
    expect(parseCompletionRequest(body({ tool_choice: 'none' })).toolChoice).toBe('none');
  });

  it.each([
    ['a non-object body', [], 'validation_failed', 'body'],
    ['no model', { messages: [user('x')] }, 'validation_failed', 'model'],
    ['an empty model', body({ model: '' }), 'validation_failed', 'model'],
    ['a string stream', body({ stream: 'yes' }), 'validation_failed', 'stream'],
    ['stream_options not an object', body({ stream_options: 1 }), 'validation_failed', 'stream_options'],
    [
      'a string include_usage',
      body({ stream_options: { include_usage: 'true' } }),
      'validation_failed',
      'stream_options.include_usage',
    ],
    ['n of 0', body({ n: 0 }), 'validation_failed', 'n'],
    ['n of 1.5', body({ n: 1.5 }), 'validation_failed', 'n'],
    ['n of 2', body({ n: 2 }), 'unsupported_parameter', 'n'],
    ['logprobs', body({ logprobs: true }), 'unsupported_parameter', 'logprobs'],
    ['top_logprobs', body({ top_logprobs: 2 }), 'unsupported_parameter', 'top_logprobs'],
    ['a json response_format', body({ response_format: { type: 'json_object' } }), 'unsupported_parameter', 'response_format'],
    ['audio modality', body({ modalities: ['text', 'audio'] }), 'unsupported_parameter', 'modalities'],
    ['audio output', body({ audio: { voice: 'x' } }), 'unsupported_parameter', 'audio'],
    ['tools not an array', body({ tools: {} }), 'validation_failed', 'tools'],
    ['a tool not an object', body({ tools: ['x'] }), 'validation_failed', 'tools[0]'],
    ['a custom tool', body({ tools: [{ type: 'custom', custom: {} }] }), 'unsupported_parameter', 'tools[0].type'],
    ['a function tool without function', body({ tools: [{ type: 'function' }] }), 'validation_failed', 'tools[0].function'],
    ['tool_choice required', body({ tool_choice: 'required' }), 'unsupported_parameter', 'tool_choice'],
    [
      'tool_choice without a name',
      body({ tool_choice: { type: 'function', function: { name: '' } } }),
      'validation_failed',
      'tool_choice',
    ],
    ['no messages', body({ messages: [] }), 'validation_failed', 'messages'],
    [
      'too many messages',
      body({ messages: Array.from({ length: MAX_CONVERSATION_MESSAGES + 1 }, () => user('x')) }),
      'validation_failed',
      'messages',
    ],
    ['a message not an object', body({ messages: ['hi'] }), 'invalid_message', 'messages[0]'],
    ['an unknown role', body({ messages: [{ role: 'function', content: 'x' }] }), 'invalid_message', 'messages[0].role'],
    ['numeric content', body({ messages: [user(5)] }), 'invalid_message', 'messages[0].content'],
    [
      'an image part',
      body({ messages: [user([{ type: 'image_url', image_url: { url: 'x' } }])] }),
      'unsupported_parameter',
      'messages[0].content[0]',
    ],
    [
      'an audio part',
      body({ messages: [user([{ type: 'input_audio', input_audio: {} }])] }),
      'unsupported_parameter',
      'messages[0].content[0]',
    ],
    [
      'a user refusal part',
      body({ messages: [user([{ type: 'refusal', refusal: 'no' }])] }),
      'invalid_message',
      'messages[0].content[0]',
    ],
    [
      'an assistant function_call',
      body({ messages: [{ role: 'assistant', function_call: { name: 'f', arguments: '{}' } }] }),
      'unsupported_parameter',
      'messages[0].function_call',
    ],
    [
      'a tool message answering nothing',
      body({ messages: [user('q'), { role: 'tool', tool_call_id: 'x', content: '1' }] }),
      'invalid_message',
      'messages[1].tool_call_id',
    ],
  ])('refuses %s', (_name, input, code, param) => {
    expect(refusal(input)).toMatchObject({ code, param });
  });

  describe('tool calls of the history', () => {
    const call = (id: unknown, name: unknown = 'f', args: unknown = '{}') => ({
      id,
      type: 'function',
      function: { name, arguments: args },
    });
    const assistant = (...calls: unknown[]) => ({ role: 'assistant', tool_calls: calls });

    it.each([
      ['a duplicate id', [assistant(call('a'), call('a'))], 'messages[0].tool_calls[1].id'],
      ['an empty id', [assistant(call(''))], 'messages[0].tool_calls[0].id'],
      ['a name with a space', [assistant(call('a', 'two words'))], 'messages[0].tool_calls[0].function.name'],
      ['object arguments', [assistant(call('a', 'f', {}))], 'messages[0].tool_calls[0].function.arguments'],
      ['a non-function call', [assistant({ id: 'a', type: 'custom', custom: {} })], 'messages[0].tool_calls[0]'],
      ['tool_calls not an array', [{ role: 'assistant', tool_calls: {} }], 'messages[0].tool_calls'],
    ])('refuses %s', (_name, messages, param) => {
      expect(refusal(body({ messages }))).toMatchObject({ code: 'invalid_message', param });
    });

    it('refuses a message of another role before every call has its result, naming the calls', () => {
      const before = refusal(
        body({ messages: [assistant(call('a'), call('b')), { role: 'tool', tool_call_id: 'a', content: '1' }, user('next')] }),
      );
      expect(before).toMatchObject({ code: 'invalid_message', param: 'messages[2]' });
      expect(before.message).toContain('the tool calls b of');
      const atEnd = refusal(body({ messages: [user('q'), assistant(...'abcdefg'.split('').map((id) => call(id)))] }));
      expect(atEnd).toMatchObject({ code: 'invalid_message', param: 'messages[2]' });
      expect(atEnd.message).toContain('a, b, c, d, e and 2 more');
    });

    it('refuses a result for a call that already has one', () => {
      const twice = refusal(
        body({
          messages: [
            assistant(call('a')),
            { role: 'tool', tool_call_id: 'a', content: '1' },
            { role: 'tool', tool_call_id: 'a', content: '2' },
          ],
        }),
      );
      expect(twice).toMatchObject({ code: 'invalid_message', param: 'messages[2].tool_call_id' });
    });
  });

  it('refuses a message longer than the limit, system messages included, and accepts one at the limit', () => {
    expect(parseCompletionRequest(body({ messages: [user('x'.repeat(MAX_MESSAGE_LENGTH))] })).conversation).toHaveLength(1);
    expect(refusal(body({ messages: [user('x'.repeat(MAX_MESSAGE_LENGTH + 1))] }))).toMatchObject({
      code: 'invalid_message',
      param: 'messages[0]',
    });
    expect(
      refusal(body({ messages: [{ role: 'system', content: 'x'.repeat(MAX_MESSAGE_LENGTH + 1) }, user('q')] })),
    ).toMatchObject({ code: 'invalid_message', param: 'messages[0]' });
  });
});
