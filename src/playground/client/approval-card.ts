import { getToolName, type DynamicToolUIPart, type ToolUIPart } from 'ai';
import { conflictList, conflictsOf } from './grid-history';

type ToolPart = ToolUIPart | DynamicToolUIPart;

/** A person's answer to a write proposal, which the chat posts back with the proposal's token. */
export interface ApprovalDecision {
  /** The approval request's id (the server uses the tool call's id). */
  approvalId: string;
  approved: boolean;
  reason?: string;
}

interface ProposedChange {
  id: string | null;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
}

/** Undoes an approved write's change set as one (rejects with the API's error, a 409 revert_conflict for one). */
export type UndoChangeSet = (changeSetId: string) => Promise<void>;

/** What a write proposal would change: the approval request's descriptor as the server sends it. */
export interface Proposal {
  approvalId: string;
  objectName: string;
  operation: string;
  changes: ProposedChange[];
  expiresAt: string;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The write proposal a tool part carries (its approval request's descriptor), or undefined for any other call. */
export function proposalOf(part: ToolPart): Proposal | undefined {
  const approval: unknown = (part as { approval?: unknown }).approval;
  if (!isRecord(approval) || typeof approval.id !== 'string' || !isRecord(approval.descriptor)) return undefined;
  const { objectName, operation, changes, expiresAt } = approval.descriptor;
  if (typeof objectName !== 'string' || typeof operation !== 'string' || !Array.isArray(changes)) return undefined;
  return {
    approvalId: approval.id,
    objectName,
    operation,
    expiresAt: typeof expiresAt === 'string' ? expiresAt : '',
    changes: changes.filter(isRecord).map((change) => ({
      id: typeof change.id === 'string' ? change.id : null,
      before: isRecord(change.before) ? change.before : null,
      after: isRecord(change.after) ? change.after : null,
    })),
  };
}

/** Where the proposal stands, as the card's `data-outcome` and the sentence under the diff. */
type Outcome = 'pending' | 'approving' | 'rejecting' | 'written' | 'rejected' | 'version_changed' | 'expired' | 'failed';

/** The `{ error: { code, message } }` a failed tool call's text holds (after the runtime's prefix), if it is one. */
function toolError(text: string): { code: string; message: string; reason?: string } | undefined {
  try {
    const parsed: unknown = JSON.parse(text.replace(/^Tool call failed: /, ''));
    const error = isRecord(parsed) && isRecord(parsed.error) ? parsed.error : undefined;
    if (!error || typeof error.code !== 'string') return undefined;
    const details = isRecord(error.details) ? error.details : {};
    return {
      code: error.code,
      message: typeof error.message === 'string' ? error.message : '',
      reason: typeof details.reason === 'string' ? details.reason : undefined,
    };
  } catch {
    return undefined;
  }
}

function outcomeOf(part: ToolPart, proposal: Proposal): { outcome: Outcome; text: string } {
  const approval = (part as { approval?: { approved?: boolean; reason?: string } }).approval;
  switch (part.state) {
    case 'approval-requested': {
      const until = proposal.expiresAt ? new Date(proposal.expiresAt) : undefined;
      const when = until && !Number.isNaN(until.getTime()) ? ` (until ${until.toLocaleTimeString()})` : '';
      return { outcome: 'pending', text: `Nothing is written until you approve${when}.` };
    }
    case 'approval-responded':
      return approval?.approved
        ? { outcome: 'approving', text: 'Approved: writing…' }
        : { outcome: 'rejecting', text: 'Rejected: telling the agent…' };
    case 'output-available': {
      const output = isRecord(part.output) ? part.output : {};
      if (output.status === 'written') {
        const by = typeof output.approvedBy === 'string' ? ` (approved by ${output.approvedBy})` : '';
        return { outcome: 'written', text: `Written${by}.` };
      }
      return { outcome: 'failed', text: 'The write ended without a result.' };
    }
    case 'output-denied':
      return { outcome: 'rejected', text: 'Rejected: nothing was written.' };
    case 'output-error': {
      const error = toolError(part.errorText);
      if (error?.code === 'approval_rejected') {
        return {
          outcome: 'rejected',
          text: `Rejected: nothing was written.${error.reason ? ` Reason: ${error.reason}` : ''}`,
        };
      }
      if (error?.code === 'version_changed') {
        return { outcome: 'version_changed', text: 'Not written: the record changed after the proposal.' };
      }
      if (error?.code === 'approval_expired') {
        return { outcome: 'expired', text: 'Expired: nobody decided in time; nothing was written.' };
      }
      return { outcome: 'failed', text: `Not written: ${error ? `${error.code}: ${error.message}` : part.errorText}` };
    }
    default:
      return { outcome: 'pending', text: '' };
  }
}

function element<K extends keyof HTMLElementTagNameMap>(tag: K, className?: string, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** A field value as a cell shows it: text as it is, anything else as JSON; none as an em dash. */
function cellText(record: Record<string, unknown> | null, field: string): string {
  if (!record || !(field in record) || record[field] === null || record[field] === undefined) return '—';
  const value = record[field];
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** One record's change as a table: field, before, after (only the fields that change, as the server sent them). */
function changeTable(change: ProposedChange, operation: string): HTMLElement {
  const block = element('div', 'approval-change');
  block.dataset.recordId = change.id ?? '';
  const title =
    operation === 'create' ? 'New record' : operation === 'delete' ? `Delete record ${change.id}` : `Record ${change.id}`;
  block.append(element('p', 'approval-record', title));
  const table = element('table', 'approval-diff');
  const head = element('tr');
  head.append(element('th', undefined, 'Field'), element('th', undefined, 'Before'), element('th', undefined, 'After'));
  table.append(element('thead'), element('tbody'));
  table.tHead!.append(head);
  const fields = [...new Set([...Object.keys(change.before ?? {}), ...Object.keys(change.after ?? {})])];
  for (const field of fields) {
    const row = element('tr');
    row.dataset.field = field;
    row.append(
      element('th', 'approval-field', field),
      element('td', 'approval-before', cellText(change.before, field)),
      element('td', 'approval-after', change.after ? cellText(change.after, field) : '(deleted)'),
    );
    table.tBodies[0].append(row);
  }
  block.append(table);
  return block;
}

/**
 * The card of a write proposal: the tool, each record's diff, Approve and Reject (with an optional reason),
 * and what came of it. The diff is drawn once (a proposal never changes); the state and buttons follow the part.
 */
export function createApprovalCard(
  part: ToolPart,
  proposal: Proposal,
  decide: (decision: ApprovalDecision) => void,
  undo?: UndoChangeSet,
): HTMLElement {
  const card = element('section', 'approval-card');
  card.setAttribute('aria-label', `Approval of ${getToolName(part)}`);
  const heading = element('h4', 'approval-title');
  heading.append(
    'Approve ',
    element('code', 'approval-tool', getToolName(part)),
    ` · ${proposal.operation} ${proposal.changes.length === 1 ? 'one' : proposal.changes.length} `,
    element('code', 'approval-object', proposal.objectName),
    ` record${proposal.changes.length === 1 ? '' : 's'}`,
  );
  card.append(heading);
  for (const change of proposal.changes) card.append(changeTable(change, proposal.operation));

  const reasonLabel = element('label', 'approval-reason-label', 'Reason (optional) ');
  const reason = element('input', 'approval-reason');
  reason.type = 'text';
  reason.maxLength = 2000;
  reasonLabel.append(reason);
  const approve = element('button', 'approval-approve', 'Approve');
  const reject = element('button', 'approval-reject', 'Reject');
  approve.type = reject.type = 'button';
  const send = (approved: boolean) => {
    // One decision per proposal: the buttons stay off until the part says otherwise.
    approve.disabled = reject.disabled = reason.disabled = true;
    const text = reason.value.trim();
    decide({ approvalId: proposal.approvalId, approved, ...(text ? { reason: text } : {}) });
  };
  approve.addEventListener('click', () => send(true));
  reject.addEventListener('click', () => send(false));
  const actions = element('div', 'approval-actions');
  actions.append(reasonLabel, approve, reject);
  card.append(actions, element('p', 'approval-outcome'));
  card.querySelector<HTMLElement>('.approval-outcome')!.setAttribute('role', 'status');
  if (undo) card.append(undoBlock(card, undo));
  return card;
}

/** The written change set of a part's result, if the write went through. */
function changeSetOf(part: ToolPart): string | undefined {
  if (part.state !== 'output-available' || !isRecord(part.output) || part.output.status !== 'written') return undefined;
  return typeof part.output.changeSetId === 'string' ? part.output.changeSetId : undefined;
}

/**
 * Under a written proposal: "Undo this change", which reverts its change set as one (all its records, or none when
 * one changed since: the conflicts are listed). Shown once the part says the write went through.
 */
function undoBlock(card: HTMLElement, undo: UndoChangeSet): HTMLElement {
  const block = element('div', 'approval-undo');
  block.hidden = true;
  const control = element('button', 'approval-undo-button', 'Undo this change');
  control.type = 'button';
  const status = element('div', 'approval-undo-status');
  status.setAttribute('role', 'status');
  control.addEventListener('click', () => {
    const changeSetId = card.dataset.changeSetId;
    if (!changeSetId) return;
    control.disabled = true;
    block.dataset.undo = 'undoing';
    status.textContent = 'Undoing…';
    undo(changeSetId).then(
      () => {
        block.dataset.undo = 'undone';
        status.textContent = 'Undone: every record of this change is as it was before.';
      },
      (error: unknown) => {
        const conflicts = conflictsOf(error);
        block.dataset.undo = conflicts ? 'conflict' : 'failed';
        control.disabled = false;
        if (conflicts) {
          status.replaceChildren(
            element('p', undefined, 'Not undone: records changed since this change, and nothing was written.'),
            conflictList(conflicts),
          );
        } else {
          status.textContent = `Not undone: ${error instanceof Error ? error.message : String(error)}`;
        }
      },
    );
  });
  block.append(control, status);
  return block;
}

export function updateApprovalCard(card: HTMLElement, part: ToolPart, proposal: Proposal): void {
  const { outcome, text } = outcomeOf(part, proposal);
  card.dataset.state = part.state;
  card.dataset.outcome = outcome;
  const open = part.state === 'approval-requested';
  const actions = card.querySelector<HTMLElement>('.approval-actions')!;
  actions.hidden = !open && outcome !== 'approving' && outcome !== 'rejecting';
  if (!open)
    for (const control of actions.querySelectorAll<HTMLButtonElement | HTMLInputElement>('button, input'))
      control.disabled = true;
  const line = card.querySelector<HTMLElement>('.approval-outcome')!;
  if (line.textContent !== text) line.textContent = text;
  const undo = card.querySelector<HTMLElement>('.approval-undo');
  const changeSetId = changeSetOf(part);
  if (undo && changeSetId) {
    card.dataset.changeSetId = changeSetId;
    undo.hidden = false;
  }
}
