import { DomainError } from '../common/domain-error';
import { defineTool } from './tool.define';
import type { ToolDefinition } from './tool.types';

export const ASK_USER_TOOL = 'ask_user';

export interface AskUserArgs {
  question: string;
}

/**
 * Lets an agent ask its human a question. In a durable chat the call is never executed here: the
 * chat pauses in requires_action until the answer is posted as the tool result. Hidden from tool
 * listings (platform scope); agents opt in by naming it.
 */
export function createAskUserTool(): ToolDefinition<AskUserArgs> {
  return defineTool<AskUserArgs>({
    name: ASK_USER_TOOL,
    description:
      'Ask the user a question and wait for the answer. Use it only when you cannot continue without information ' +
      'that is not in the data (for example which of several matching records they mean, or a missing date range). ' +
      "Ask one short, specific question. The answer comes back as this tool's result.",
    parameters: {
      type: 'object',
      properties: { question: { type: 'string', minLength: 1, maxLength: 2000, description: 'The question to show the user.' } },
      required: ['question'],
      additionalProperties: false,
    },
    scope: 'platform',
    execute(): Promise<never> {
      return Promise.reject(
        new DomainError(
          'ask_user_unavailable',
          'ask_user works only in durable chats (POST /api/v1/chats); answer with what you have instead',
        ),
      );
    },
  });
}
