import type { FieldMeta, ObjectMeta, RelatedMeta } from '../metadata/object-metadata.types';
import { type LinkWrite, lockedLinks } from './links.write';

const field = (name: string, related?: RelatedMeta): FieldMeta => ({
  name,
  label: name,
  type: related?.kind === 'links' ? 'multiselect' : 'number',
  required: false,
  unique: false,
  indexed: false,
  ...(related ? { related } : {}),
});
const link = { table: 'l_1', selfColumn: 'source_id', targetColumn: 'target_id' } as const;
const members = field('members', { kind: 'links', self: 'proj', target: 'person', via: 'members', link, inverse: 'projects' });
const tags = field('tags', { kind: 'links', self: 'proj', target: 'tag', via: 'tags', link: { ...link, table: 'l_2' } });

function proj(...extra: FieldMeta[]): ObjectMeta {
  return { name: 'proj', label: 'proj', fields: [field('budget'), field('status'), members, tags, ...extra] };
}
function person(...extra: FieldMeta[]): ObjectMeta {
  return { name: 'person', label: 'person', fields: [field('hours'), field('team'), ...extra] };
}
const hoursOfMembers = field('member_hours', {
  kind: 'rollup',
  self: 'proj',
  target: 'person',
  via: 'members',
  field: 'hours',
  function: 'sum',
  stored: true,
  filter: { team: 'a' },
});
const budgetOfProjects = field('project_budget', {
  kind: 'rollup',
  self: 'person',
  target: 'proj',
  via: 'projects',
  field: 'budget',
  function: 'sum',
  stored: true,
});
const names = (fields: FieldMeta[]) => fields.map((f) => f.name);
const addTo = (f: FieldMeta): LinkWrite => ({ field: f, add: ['00000000-0000-4000-8000-000000000001'] });

describe('lockedLinks: the links a write of one record locks the other side of first', () => {
  it('follows a links field with an inverse only when a stored field on either side is over it', () => {
    const none = lockedLinks(proj(), () => person(), { links: [addTo(members)] });
    expect(names(none)).toEqual([]);
    const own = lockedLinks(proj(hoursOfMembers), () => person(), { links: [addTo(members)] });
    expect(names(own)).toEqual(['members']);
    const far = lockedLinks(proj(), () => person(budgetOfProjects), { links: [] });
    expect(names(far)).toEqual(['members']);
  });

  it('never follows a links field without an inverse (the other side has no field to lock from)', () => {
    const lastTag = field('last_tag', { kind: 'rollup', self: 'proj', target: 'tag', via: 'tags', field: 'label', stored: true });
    expect(names(lockedLinks(proj(lastTag), () => person(), { links: [addTo(tags)] }))).toEqual([]);
  });

  it('follows on an update only its links writes and the fields the other side rolls up or filters on', () => {
    const target = () => person(budgetOfProjects);
    expect(names(lockedLinks(proj(), target, { links: [], changed: ['budget'] }))).toEqual(['members']);
    expect(names(lockedLinks(proj(), target, { links: [], changed: ['status'] }))).toEqual([]);
    expect(names(lockedLinks(proj(), target, { links: [addTo(members)], changed: [] }))).toEqual(['members']);
    // Its own stored fields' inputs live on the other side: an update of this side does not reach them.
    expect(names(lockedLinks(proj(hoursOfMembers), () => person(), { links: [], changed: ['budget'] }))).toEqual([]);
    // From the other side, the filter's field counts too.
    const personSide: ObjectMeta = {
      ...person(),
      fields: [
        ...person().fields,
        field('projects', { kind: 'links', self: 'person', target: 'proj', via: 'projects', link, inverse: 'members' }),
      ],
    };
    expect(names(lockedLinks(personSide, () => proj(hoursOfMembers), { links: [], changed: ['team'] }))).toEqual(['projects']);
    expect(names(lockedLinks(personSide, () => proj(hoursOfMembers), { links: [], changed: ['name'] }))).toEqual([]);
  });

  it('follows every such field on a delete, whose links go with it', () => {
    expect(names(lockedLinks(proj(hoursOfMembers), () => person(), { links: [] }))).toEqual(['members']);
  });
});
