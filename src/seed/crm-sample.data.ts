/**
 * Deterministic sample CRM (accounts, contacts, deals, activities) matching the object definitions
 * in seeds/objects/*.json, each record with the created_at of its history (the three years before the
 * reference date). Pure: no I/O, no clock, no Math.random — every call yields the same data, so tests
 * and evaluations can compare answers against fixed numbers.
 */

/** Records of every sample object, in load (dependency) order. */
export interface SampleDataset {
  objects: Array<{ name: string; records: Array<Record<string, unknown>> }>;
}

export type CrmSampleCounts = { account: number; contact: number; deal: number; activity: number };

export const CRM_SAMPLE_DEFAULT_COUNTS: Readonly<CrmSampleCounts> = {
  account: 200,
  contact: 1000,
  deal: 2000,
  activity: 3000,
};

/**
 * "Today" of the sample: deals closed before it are won/lost, open deals are expected after it, and every
 * record was created before it.
 */
export const CRM_SAMPLE_REFERENCE_DATE = '2025-07-01';

/** Largest count accepted per object; ids reserve 8 hex digits for the index. */
const MAX_COUNT = 1_000_000;

const DAY_MS = 86_400_000;
const FIRST_DAY = Date.UTC(2023, 0, 1) / DAY_MS;
const LAST_DAY = Date.UTC(2026, 11, 31) / DAY_MS;
const REFERENCE_DAY = Date.parse(`${CRM_SAMPLE_REFERENCE_DATE}T00:00:00Z`) / DAY_MS;
/** Share of optional values left null so `$null` filters have something to find. */
const NULL_RATE = 0.07;

// ---------------------------------------------------------------------------------------------
// Randomness and ids
// ---------------------------------------------------------------------------------------------

/** FNV-1a 32-bit hash; the seed lets one key yield several independent hashes. */
function hash32(text: string, seed = 0): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  // Final avalanche: FNV alone leaves similar keys ("deal:1", "deal:2") with similar high bits.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h >>> 0;
}

/** Small seeded PRNG (mulberry32) with the few helpers the generator needs. */
class Rng {
  private state: number;

  constructor(seed: string) {
    this.state = hash32(seed);
  }

  /** Uniform float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Uniform integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** Uniform float in [min, max). */
  float(min: number, max: number): number {
    return min + this.next() * (max - min);
  }

  chance(probability: number): boolean {
    return this.next() < probability;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)];
  }

  /** Picks a value with probability proportional to its weight. */
  weighted<T>(entries: ReadonlyArray<readonly [T, number]>): T {
    let total = 0;
    for (const [, weight] of entries) total += weight;
    let roll = this.next() * total;
    for (const [value, weight] of entries) {
      roll -= weight;
      if (roll < 0) return value;
    }
    return entries[entries.length - 1][0];
  }

  /** `count` distinct items, in the order of `items` (stable, reads naturally in tags/products). */
  sample<T>(items: readonly T[], count: number): T[] {
    const chosen = new Set<number>();
    while (chosen.size < Math.min(count, items.length)) chosen.add(this.int(0, items.length - 1));
    return items.filter((_, i) => chosen.has(i));
  }

  /** `value`, or null with probability `rate`; always draws so the stream does not shift. */
  maybe<T>(value: T, rate = NULL_RATE): T | null {
    return this.chance(rate) ? null : value;
  }
}

/** Picks indices with probability proportional to precomputed weights (binary search on sums). */
class WeightedIndex {
  private readonly cumulative: number[] = [];

  constructor(weights: readonly number[]) {
    let sum = 0;
    for (const weight of weights) this.cumulative.push((sum += weight));
  }

  draw(rng: Rng): number {
    const target = rng.next() * this.cumulative[this.cumulative.length - 1];
    let lo = 0;
    let hi = this.cumulative.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.cumulative[mid] > target) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
}

function hex(value: number, digits: number): string {
  return value.toString(16).padStart(digits, '0').slice(-digits);
}

/**
 * Stable UUID (v4 layout: version nibble 4, RFC 4122 variant) for record `index` of an object.
 * The last 8 hex digits are the index and the 4 before them depend only on the object name, so
 * ids are unique by construction rather than by luck of the hash.
 */
export function sampleRecordId(objectName: string, index: number): string {
  const key = `${objectName}:${index}`;
  const a = hash32(key, 1);
  const b = hash32(key, 2);
  const c = hash32(key, 3);
  const variant = (8 | (c >>> 30)).toString(16);
  return [
    hex(a, 8),
    hex(b >>> 16, 4),
    `4${hex(b, 3)}`,
    `${variant}${hex(c, 3)}`,
    `${hex(hash32(objectName, 4), 4)}${hex(index, 8)}`,
  ].join('-');
}

// ---------------------------------------------------------------------------------------------
// Dates
// ---------------------------------------------------------------------------------------------

/** Day number (days since 1970-01-01 UTC) → 'YYYY-MM-DD'. */
function isoDate(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
}

/** A business-hours UTC timestamp on `day`, on a quarter hour. */
function isoDateTime(rng: Rng, day: number): string {
  const minutes = rng.int(8 * 4, 17 * 4) * 15;
  return new Date(day * DAY_MS + minutes * 60_000).toISOString();
}

function clampDay(day: number): number {
  return Math.min(LAST_DAY, Math.max(FIRST_DAY, day));
}

const round2 = (value: number): number => Math.round(value * 100) / 100;

// ---------------------------------------------------------------------------------------------
// Vocabulary
// ---------------------------------------------------------------------------------------------

const NAME_FIRST_WORDS = [
  'Northwind',
  'Blue Harbor',
  'Silver Peak',
  'Redwood',
  'Granite',
  'Brightline',
  'Evergreen',
  'Ironclad',
  'Lakeside',
  'Summit',
  'Polar',
  'Crescent',
  'Horizon',
  'Keystone',
  'Meridian',
  'Oakridge',
  'Pioneer',
  'Quantum',
  'Riverstone',
  'Sterling',
  'Tidewater',
  'Vanguard',
  'Westfield',
  'Zenith',
  'Atlas',
  'Beacon',
  'Cobalt',
  'Driftwood',
  'Falcon',
  'Golden Gate',
  'Harborview',
  'Juniper',
  'Lumen',
  'Maple',
  'Nimbus',
  'Orion',
  'Pinnacle',
  'Sapphire',
  'Trident',
  'Willow',
];
/** Second name word and the industry it implies (null: any industry, e.g. "Solutions"). */
const NAME_SECOND_WORDS: ReadonlyArray<readonly [string, string | null]> = [
  ['Analytics', 'software'],
  ['Systems', 'software'],
  ['Software', 'software'],
  ['Labs', null],
  ['Logistics', 'logistics'],
  ['Freight', 'logistics'],
  ['Health', 'healthcare'],
  ['Pharma', 'healthcare'],
  ['Biotech', 'healthcare'],
  ['Capital', 'financial_services'],
  ['Bank', 'financial_services'],
  ['Insurance', 'financial_services'],
  ['Foods', 'retail'],
  ['Retail', 'retail'],
  ['Outfitters', 'retail'],
  ['Energy', 'energy'],
  ['Utilities', 'energy'],
  ['Robotics', 'manufacturing'],
  ['Motors', 'manufacturing'],
  ['Materials', 'manufacturing'],
  ['Manufacturing', 'manufacturing'],
  ['Media', 'media'],
  ['Studios', 'media'],
  ['Networks', 'telecommunications'],
  ['Telecom', 'telecommunications'],
  ['Learning', 'education'],
  ['Academy', 'education'],
  ['Properties', 'real_estate'],
  ['Transit', 'public_sector'],
  ['Public Services', 'public_sector'],
  ['Partners', null],
  ['Dynamics', null],
  ['Solutions', null],
  ['Consulting', null],
  ['Group', null],
];

interface CountryInfo {
  name: string;
  weight: number;
  dial: string;
  tld: string;
  legalForms: readonly string[];
}

const COUNTRIES: readonly CountryInfo[] = [
  { name: 'United States', weight: 30, dial: '+1', tld: 'com', legalForms: ['Inc.', 'Corp.', 'LLC'] },
  { name: 'Canada', weight: 6, dial: '+1', tld: 'ca', legalForms: ['Inc.', 'Ltd.'] },
  { name: 'Brazil', weight: 5, dial: '+55', tld: 'com.br', legalForms: ['Ltda.', 'S.A.'] },
  { name: 'United Kingdom', weight: 12, dial: '+44', tld: 'co.uk', legalForms: ['Ltd', 'PLC'] },
  { name: 'Germany', weight: 11, dial: '+49', tld: 'de', legalForms: ['GmbH', 'AG'] },
  { name: 'France', weight: 8, dial: '+33', tld: 'fr', legalForms: ['SAS', 'S.A.'] },
  { name: 'Netherlands', weight: 5, dial: '+31', tld: 'nl', legalForms: ['B.V.', 'N.V.'] },
  { name: 'Spain', weight: 5, dial: '+34', tld: 'es', legalForms: ['S.L.', 'S.A.'] },
  { name: 'India', weight: 7, dial: '+91', tld: 'in', legalForms: ['Pvt. Ltd.', 'Ltd.'] },
  { name: 'Japan', weight: 6, dial: '+81', tld: 'co.jp', legalForms: ['K.K.', 'Co., Ltd.'] },
  { name: 'Australia', weight: 5, dial: '+61', tld: 'com.au', legalForms: ['Pty Ltd', 'Ltd'] },
];

const INDUSTRIES: ReadonlyArray<readonly [string, number]> = [
  ['software', 18],
  ['financial_services', 12],
  ['healthcare', 11],
  ['manufacturing', 12],
  ['retail', 9],
  ['education', 6],
  ['energy', 5],
  ['media', 6],
  ['logistics', 7],
  ['telecommunications', 5],
  ['real_estate', 4],
  ['public_sector', 5],
];
const ACCOUNT_TAGS = ['strategic', 'partner', 'reference', 'at_risk', 'expansion', 'public_sector', 'channel', 'beta_program'];
const NOTE_OPENERS = [
  "Long-standing relationship with the CFO's office.",
  'Inbound interest after our webinar on pipeline analytics.',
  'Procurement is slow; expect security review for every contract.',
  'Evaluating us against two competitors this year.',
  'Champion moved to a new role; relationship needs rebuilding.',
  'Strong executive sponsor in the operations team.',
  'Budget is set annually in Q4.',
];
const NOTE_NEXT_STEPS = [
  'Next step: schedule a roadmap review.',
  'Next step: introduce the customer success manager.',
  'Next step: send updated pricing for additional seats.',
  'Next step: confirm the decision timeline with procurement.',
  'Next step: invite them to the customer advisory board.',
];

const FIRST_NAMES = [
  'Anna',
  'James',
  'Maria',
  'Liam',
  'Sofia',
  'Noah',
  'Emma',
  'Lucas',
  'Olivia',
  'Mateo',
  'Chloe',
  'Ethan',
  'Hannah',
  'Jonas',
  'Aisha',
  'Ravi',
  'Priya',
  'Kenji',
  'Yuki',
  'Lena',
  'Felix',
  'Clara',
  'Daniel',
  'Grace',
  'Omar',
  'Fatima',
  'Pedro',
  'Isabel',
  'Thomas',
  'Julia',
  'Marco',
  'Elena',
  'David',
  'Sarah',
  'Arjun',
  'Mei',
  'Victor',
  'Nora',
  'Samuel',
  'Laura',
  'Hugo',
  'Camille',
  'Oliver',
  'Amelia',
  'Ben',
  'Zoe',
  'Carlos',
  'Ines',
  'Max',
  'Leah',
];
const LAST_NAMES = [
  'Smith',
  'Johnson',
  'Garcia',
  'Müller',
  'Schmidt',
  'Martin',
  'Bernard',
  'Rossi',
  'Silva',
  'Santos',
  'Tanaka',
  'Sato',
  'Patel',
  'Sharma',
  'Kumar',
  'Brown',
  'Wilson',
  'Taylor',
  'Clarke',
  'Walker',
  "O'Brien",
  'Murphy',
  'Dubois',
  'Moreau',
  'Fischer',
  'Weber',
  'de Vries',
  'Jansen',
  'López',
  'Fernández',
  'Nguyen',
  'Kim',
  'Chen',
  'Wang',
  'Anderson',
  'Thompson',
  'White',
  'Harris',
  'Lewis',
  'Young',
  'King',
  'Wright',
  'Scott',
  'Green',
  'Baker',
  'Adams',
  'Nelson',
  'Hill',
  'Campbell',
  'Mitchell',
];
const TITLES: ReadonlyArray<readonly [string, number]> = [
  ['Chief Executive Officer', 2],
  ['Chief Financial Officer', 2],
  ['Chief Technology Officer', 2],
  ['VP of Sales', 4],
  ['VP of Engineering', 3],
  ['VP of Operations', 3],
  ['Head of Data', 4],
  ['Director of IT', 5],
  ['Director of Marketing', 4],
  ['Procurement Manager', 5],
  ['Sales Operations Manager', 6],
  ['Data Engineer', 7],
  ['Business Analyst', 8],
  ['Product Manager', 6],
  ['Account Executive', 5],
  ['Operations Manager', 6],
  ['Software Engineer', 7],
  ['Marketing Specialist', 5],
];
/** Lifecycle of people at buying accounts vs. everyone else (who cannot be customers). */
const BUYER_LIFECYCLE: ReadonlyArray<readonly [string, number]> = [
  ['lead', 8],
  ['marketing_qualified', 7],
  ['sales_qualified', 8],
  ['opportunity', 17],
  ['customer', 50],
  ['churned', 10],
];
const PROSPECT_LIFECYCLE: ReadonlyArray<readonly [string, number]> = [
  ['lead', 40],
  ['marketing_qualified', 25],
  ['sales_qualified', 15],
  ['opportunity', 15],
  ['churned', 5],
];
const PERSONAL_DOMAINS = ['gmail.com', 'outlook.com', 'yahoo.com', 'proton.me'];

const SALES_REPS = [
  'Maya Chen',
  'Daniel Okafor',
  'Sofia Rossi',
  'Liam Becker',
  'Priya Nair',
  'Jack Thompson',
  'Elena Petrova',
  'Marcus Silva',
  'Hannah Weiss',
  'Tom Fischer',
  'Aiko Tanaka',
  'Lucas Moreau',
];

type Stage = 'prospecting' | 'qualification' | 'proposal' | 'negotiation' | 'won' | 'lost';
const STAGES: ReadonlyArray<readonly [Stage, number]> = [
  ['prospecting', 14],
  ['qualification', 13],
  ['proposal', 15],
  ['negotiation', 13],
  ['won', 25],
  ['lost', 20],
];
/** Probability follows the stage exactly, as deal.json documents. */
const STAGE_PROBABILITY: Record<Stage, number> = {
  prospecting: 10,
  qualification: 20,
  proposal: 50,
  negotiation: 75,
  won: 100,
  lost: 0,
};
type DealType = 'new_business' | 'renewal' | 'expansion' | 'pilot';
const BUYER_DEAL_TYPES: ReadonlyArray<readonly [DealType, number]> = [
  ['new_business', 30],
  ['renewal', 30],
  ['expansion', 32],
  ['pilot', 8],
];
/** Accounts that never bought cannot renew or expand. */
const PROSPECT_DEAL_TYPES: ReadonlyArray<readonly [DealType, number]> = [
  ['new_business', 80],
  ['pilot', 20],
];
const DEAL_TYPE_LABELS: Record<DealType, string> = {
  new_business: 'New Business',
  renewal: 'Renewal',
  expansion: 'Expansion',
  pilot: 'Pilot',
};
const NEW_LEAD_SOURCES: ReadonlyArray<readonly [string, number]> = [
  ['website', 25],
  ['referral', 15],
  ['partner', 14],
  ['outbound', 22],
  ['event', 12],
  ['paid_search', 12],
];
/** Product catalogue: list price per seat and year in USD. */
const PRODUCTS: ReadonlyArray<readonly [string, number]> = [
  ['Insight Analytics', 360],
  ['Pipeline CRM', 600],
  ['Service Desk', 480],
  ['Data Connectors', 240],
  ['AI Copilot', 300],
];
const COMPETITORS = ['Salesforce', 'HubSpot', 'Pipedrive', 'Zoho', 'Microsoft Dynamics'];

type ActivityType = 'call' | 'email' | 'meeting' | 'task';
const ACTIVITY_TYPES: ReadonlyArray<readonly [ActivityType, number]> = [
  ['call', 30],
  ['email', 35],
  ['meeting', 20],
  ['task', 15],
];
const SUBJECTS: Record<ActivityType, readonly string[]> = {
  call: ['Discovery call with {who}', 'Check-in call with {who}', 'Pricing call with {who}', 'Follow-up call with {who}'],
  email: ['Follow-up: {topic}', 'Proposal sent: {topic}', 'Intro email to {who}', 'Contract questions: {topic}'],
  meeting: [
    'Product demo for {org}',
    'Executive briefing with {org}',
    'Onsite workshop at {org}',
    'Quarterly business review with {org}',
  ],
  task: ['Send proposal to {who}', 'Prepare quote for {org}', 'Update forecast for {topic}', 'Book security review with {org}'],
};

// ---------------------------------------------------------------------------------------------
// Generators. Each returns the API records plus the hidden facts later objects build on.
// ---------------------------------------------------------------------------------------------

type Row = Record<string, unknown>;

interface AccountFacts {
  id: string;
  name: string;
  domain: string;
  country: CountryInfo;
  employees: number;
  repIndex: number;
  /** Hidden: only buyers ever win deals, so prospects stay prospects (is_customer false). */
  buyer: boolean;
}

/** Unique company base name and its implied industry; numbering kicks in past ~1,400 accounts. */
function companyBaseName(rng: Rng, used: Set<string>, index: number): { base: string; industry: string | null } {
  for (let attempt = 0; ; attempt++) {
    const [word, industry] = rng.pick(NAME_SECOND_WORDS);
    const base = `${rng.pick(NAME_FIRST_WORDS)} ${word}`;
    if (!used.has(base)) return { base, industry };
    if (attempt >= 30) return { base: `${base} ${index + 1}`, industry };
  }
}

/** Lower-case ASCII without spaces or punctuation, for domains and email local parts. */
function slug(text: string): string {
  return text
    .normalize('NFD')
    .replace(/[^A-Za-z0-9 ]/g, '')
    .trim()
    .toLowerCase()
    .replace(/ +/g, '');
}

function phoneNumber(rng: Rng, country: CountryInfo): string {
  return `${country.dial} ${rng.int(200, 989)} 555 ${String(rng.int(0, 9999)).padStart(4, '0')}`;
}

function tierFor(revenue: number): string {
  if (revenue >= 1e9) return 'platinum';
  if (revenue >= 1e8) return 'gold';
  if (revenue >= 1e7) return 'silver';
  return 'bronze';
}

function generateAccounts(count: number): { records: Row[]; facts: AccountFacts[] } {
  const rng = new Rng('account');
  const usedNames = new Set<string>();
  const records: Row[] = [];
  const facts: AccountFacts[] = [];
  for (let i = 0; i < count; i++) {
    const { base, industry } = companyBaseName(rng, usedNames, i);
    usedNames.add(base);
    const country = rng.weighted(COUNTRIES.map((c) => [c, c.weight] as const));
    const name = `${base} ${rng.pick(country.legalForms)}`;
    const domain = `${slug(base)}.${country.tld}`;
    // Squared uniform exponent: many small companies, a long tail of large ones.
    const employees = Math.round(10 * Math.pow(5000, rng.next() ** 2));
    const revenue = Math.round((employees * rng.float(80_000, 300_000)) / 1000) * 1000;
    const founded = Date.UTC(1950, 0, 1) / DAY_MS + rng.int(0, 73 * 365);
    const id = sampleRecordId('account', i);
    records.push({
      id,
      name,
      industry: rng.maybe(industry ?? rng.weighted(INDUSTRIES)),
      website: rng.maybe(`https://www.${domain}`),
      phone: rng.maybe(phoneNumber(rng, country)),
      employees: rng.maybe(employees),
      annual_revenue: rng.maybe(revenue),
      country: rng.maybe(country.name),
      tier: tierFor(revenue),
      tags: rng.chance(0.45) ? [] : rng.sample(ACCOUNT_TAGS, rng.int(1, 3)),
      is_customer: false, // set from won deals once deals exist
      founded_on: rng.maybe(isoDate(founded)),
      notes: rng.chance(0.35) ? null : `${rng.pick(NOTE_OPENERS)} ${rng.pick(NOTE_NEXT_STEPS)}`,
    });
    const repIndex = rng.int(0, SALES_REPS.length - 1);
    facts.push({ id, name, domain, country, employees, repIndex, buyer: rng.chance(0.6) });
  }
  return { records, facts };
}

interface ContactFacts {
  id: string;
  firstName: string;
  accountIndex: number | null;
}

function generateContacts(count: number, accounts: AccountFacts[]): { records: Row[]; facts: ContactFacts[] } {
  const rng = new Rng('contact');
  // Bigger companies have more people we talk to.
  const accountPicker = new WeightedIndex(accounts.map((a) => Math.log10(a.employees + 10)));
  const usedEmails = new Set<string>();
  const records: Row[] = [];
  const facts: ContactFacts[] = [];
  for (let i = 0; i < count; i++) {
    const accountIndex = accounts.length > 0 && rng.chance(0.95) ? accountPicker.draw(rng) : null;
    const account = accountIndex === null ? null : accounts[accountIndex];
    const firstName = rng.pick(FIRST_NAMES);
    const lastName = rng.pick(LAST_NAMES);
    const domain = account ? account.domain : rng.pick(PERSONAL_DOMAINS);
    const local = `${slug(firstName)}.${slug(lastName)}`; // "Müller" → "muller"
    let email = `${local}@${domain}`;
    for (let n = 2; usedEmails.has(email); n++) email = `${local}${n}@${domain}`;
    usedEmails.add(email);
    const id = sampleRecordId('contact', i);
    records.push({
      id,
      first_name: firstName,
      last_name: lastName,
      email: rng.maybe(email, 0.04),
      phone: rng.maybe(phoneNumber(rng, account?.country ?? COUNTRIES[0]), 0.1),
      title: rng.maybe(rng.weighted(TITLES)),
      account: account?.id ?? null,
      lifecycle_stage: rng.maybe(rng.weighted(account?.buyer ? BUYER_LIFECYCLE : PROSPECT_LIFECYCLE), 0.05),
      last_contacted_at: null, // derived from activities
      do_not_call: rng.maybe(rng.chance(0.08), 0.05),
    });
    facts.push({ id, firstName, accountIndex });
  }
  return { records, facts };
}

interface DealFacts {
  id: string;
  accountIndex: number;
  primaryContactIndex: number | null;
  closeDay: number;
  topic: string;
}

/** Contact indexes per account index. */
function groupByAccount(accounts: AccountFacts[], contacts: ContactFacts[]): number[][] {
  const groups = accounts.map((): number[] => []);
  contacts.forEach((c, index) => {
    if (c.accountIndex !== null) groups[c.accountIndex].push(index);
  });
  return groups;
}

/** Close date: closed deals lie before the reference date, open ones after (a few overdue). */
function closeDayFor(rng: Rng, stage: Stage): number {
  if (stage === 'won' || stage === 'lost') return rng.int(FIRST_DAY, REFERENCE_DAY - 1);
  if (rng.chance(0.08)) return rng.int(REFERENCE_DAY - 90, REFERENCE_DAY - 1);
  return rng.int(REFERENCE_DAY, LAST_DAY);
}

/** Quote behind the amount: seats × list prices × contract length, minus discount. */
function quoteFor(rng: Rng, employees: number, type: DealType): { metadata: Row; amount: number } {
  const products = rng.sample(
    PRODUCTS,
    rng.weighted([
      [1, 5],
      [2, 3],
      [3, 2],
    ] as const),
  );
  let seats = Math.max(5, Math.min(2500, Math.round(employees * rng.float(0.02, 0.25))));
  if (type === 'pilot') seats = Math.min(seats, 50);
  const months =
    type === 'pilot'
      ? 12
      : rng.weighted([
          [12, 5],
          [24, 3],
          [36, 2],
        ] as const);
  const discount = rng.chance(0.4) ? 0 : rng.pick([5, 7.5, 10, 15, 20, 25]);
  const yearlyPerSeat = products.reduce((sum, [, price]) => sum + price, 0);
  const amount = round2(seats * yearlyPerSeat * (months / 12) * (1 - discount / 100));
  const metadata = {
    products: products.map(([product]) => product),
    seats,
    contract_months: months,
    discount_percent: discount,
    competitor: rng.chance(0.5) ? rng.pick(COMPETITORS) : null,
  };
  return { metadata, amount };
}

function generateDeals(
  count: number,
  accounts: AccountFacts[],
  contacts: ContactFacts[],
): { records: Row[]; facts: DealFacts[] } {
  if (count > 0 && accounts.length === 0) throw new RangeError('Deals need at least one account');
  const rng = new Rng('deal');
  const sizeWeight = (a: AccountFacts): number => Math.log10(a.employees + 10);
  const anyAccount = new WeightedIndex(accounts.map(sizeWeight));
  // Won deals go to buyers only; with no buyer at all (tiny samples) any account may win.
  const hasBuyer = accounts.some((a) => a.buyer);
  const buyerAccount = hasBuyer ? new WeightedIndex(accounts.map((a) => (a.buyer ? sizeWeight(a) : 0))) : anyAccount;
  const contactsByAccount = groupByAccount(accounts, contacts);
  const records: Row[] = [];
  const facts: DealFacts[] = [];
  for (let i = 0; i < count; i++) {
    const stage = rng.weighted(STAGES);
    const accountIndex = (stage === 'won' ? buyerAccount : anyAccount).draw(rng);
    const account = accounts[accountIndex];
    const type = rng.weighted(account.buyer || !hasBuyer ? BUYER_DEAL_TYPES : PROSPECT_DEAL_TYPES);
    const closeDay = closeDayFor(rng, stage);
    const candidates = contactsByAccount[accountIndex];
    const primaryContactIndex = candidates.length > 0 && rng.chance(0.93) ? rng.pick(candidates) : null;
    const fromInstalledBase = (type === 'renewal' || type === 'expansion') && rng.chance(0.85);
    const leadSource = fromInstalledBase ? 'existing_customer' : rng.weighted(NEW_LEAD_SOURCES);
    const owner = rng.chance(0.8) ? SALES_REPS[account.repIndex] : rng.pick(SALES_REPS);
    const quote = quoteFor(rng, account.employees, type);
    const isOpen = stage !== 'won' && stage !== 'lost';
    const name = `${account.name} – ${DEAL_TYPE_LABELS[type]} ${isoDate(closeDay).slice(0, 4)}`;
    const id = sampleRecordId('deal', i);
    records.push({
      id,
      name,
      account: account.id,
      primary_contact: primaryContactIndex === null ? null : contacts[primaryContactIndex].id,
      deal_type: type,
      stage,
      // Closed deals always carry their value; early open deals sometimes lack a quote yet.
      amount: isOpen ? rng.maybe(quote.amount) : quote.amount,
      probability: STAGE_PROBABILITY[stage],
      close_date: isoDate(closeDay),
      owner: rng.maybe(owner, 0.03),
      lead_source: rng.maybe(leadSource, 0.05),
      metadata: rng.maybe(quote.metadata, 0.08),
    });
    facts.push({ id, accountIndex, primaryContactIndex, closeDay, topic: name });
  }
  return { records, facts };
}

function generateActivities(
  count: number,
  accounts: AccountFacts[],
  contacts: ContactFacts[],
  deals: DealFacts[],
): { records: Row[]; contactIndexes: Array<number | null> } {
  const rng = new Rng('activity');
  const contactsByAccount = groupByAccount(accounts, contacts);
  const records: Row[] = [];
  const contactIndexes: Array<number | null> = [];
  for (let i = 0; i < count; i++) {
    const deal = deals.length > 0 && rng.chance(0.85) ? rng.pick(deals) : null;
    let contactIndex: number | null = null;
    let day: number;
    if (deal) {
      const colleagues = contactsByAccount[deal.accountIndex];
      if (deal.primaryContactIndex !== null && rng.chance(0.65)) contactIndex = deal.primaryContactIndex;
      else if (colleagues.length > 0) contactIndex = rng.pick(colleagues);
      // Work on a deal happens in the months before it closes.
      day = clampDay(deal.closeDay - rng.int(0, 150));
    } else {
      if (contacts.length > 0) contactIndex = rng.int(0, contacts.length - 1);
      day = rng.int(FIRST_DAY, LAST_DAY);
    }
    const contact = contactIndex === null ? null : contacts[contactIndex];
    const accountIndex = deal?.accountIndex ?? contact?.accountIndex ?? null;
    const type = rng.weighted(ACTIVITY_TYPES);
    const subject = rng
      .pick(SUBJECTS[type])
      .replace('{who}', contact?.firstName ?? 'the team')
      .replace('{org}', accountIndex === null ? 'prospect' : accounts[accountIndex].name)
      .replace('{topic}', deal?.topic ?? 'account review');
    const dueAt = isoDateTime(rng, day);
    const isPast = day < REFERENCE_DAY;
    let duration: number | null = null;
    if (type === 'call') duration = rng.int(1, 12) * 5;
    if (type === 'meeting') duration = rng.int(1, 8) * 15;
    records.push({
      id: sampleRecordId('activity', i),
      type,
      subject,
      deal: deal?.id ?? null,
      contact: contact?.id ?? null,
      due_at: rng.maybe(dueAt, 0.03),
      // Past activities are mostly done; a few stay open as overdue work.
      completed: isPast ? rng.chance(0.93) : false,
      duration_minutes: duration === null ? null : rng.maybe(duration, 0.05),
    });
    contactIndexes.push(contactIndex);
  }
  return { records, contactIndexes };
}

// ---------------------------------------------------------------------------------------------
// Cross-object facts, filled in once everything exists
// ---------------------------------------------------------------------------------------------

/** is_customer ⇔ the account has at least one won deal. */
function markCustomers(accounts: Row[], deals: Row[]): void {
  const customers = new Set(deals.filter((d) => d.stage === 'won').map((d) => d.account));
  for (const account of accounts) account.is_customer = customers.has(account.id);
}

/** last_contacted_at = latest completed call, email or meeting with the contact. */
function markLastContacted(contacts: Row[], activities: Row[], contactIndexes: Array<number | null>): void {
  activities.forEach((activity, i) => {
    const index = contactIndexes[i];
    const dueAt = activity.due_at;
    if (index === null || activity.type === 'task' || activity.completed !== true || typeof dueAt !== 'string') return;
    const contact = contacts[index];
    // ISO strings of one format compare chronologically as plain strings.
    if (contact.last_contacted_at === null || dueAt > (contact.last_contacted_at as string)) {
      contact.last_contacted_at = dueAt;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Creation history (created_at): drawn from streams of its own, so the other values stay as they were
// ---------------------------------------------------------------------------------------------

/** The first day a sample record may have been created: three years before the reference date. */
const FIRST_CREATED_DAY = REFERENCE_DAY - 3 * 365;
const REFERENCE_MS = REFERENCE_DAY * DAY_MS;

/**
 * A business-hours instant (ms, on a quarter hour) on a day in firstDay..lastDay (firstDay when lastDay
 * is earlier), then held within notBefore..notAfter: a record is never older than what it points to.
 */
function creationTime(rng: Rng, firstDay: number, lastDay: number, notBefore = -Infinity, notAfter = Infinity): number {
  const day = rng.int(firstDay, Math.max(firstDay, lastDay));
  const time = day * DAY_MS + rng.int(8 * 4, 17 * 4) * 15 * 60_000;
  return Math.min(notAfter, Math.max(notBefore, time));
}

const dayOf = (ms: number): number => Math.floor(ms / DAY_MS);

/**
 * Sets created_at on every record: a deal two weeks to six months before it closed (an open deal within
 * the year before the reference date); an account before its first deal; a contact after its account
 * and before the deals it is the primary contact of; an activity after its deal and contact, shortly
 * before it is due. Everything lies in the three years before the reference date.
 */
function markCreated(accounts: Row[], contacts: Row[], deals: Row[], activities: Row[]): void {
  const created = new Map<unknown, number>();
  const set = (record: Row, ms: number) => {
    created.set(record.id, ms);
    record.created_at = new Date(ms).toISOString();
  };
  const earliest = (into: Map<unknown, number>, key: unknown, ms: number) => {
    if (key !== null && ms < (into.get(key) ?? Infinity)) into.set(key, ms);
  };

  const dealRng = new Rng('deal:created_at');
  const firstDealOf = new Map<unknown, number>();
  const firstDealAsContact = new Map<unknown, number>();
  for (const deal of deals) {
    const closeDay = Date.parse(`${deal.close_date as string}T00:00:00Z`) / DAY_MS;
    const ms =
      closeDay < REFERENCE_DAY
        ? creationTime(dealRng, closeDay - 180, closeDay - 14)
        : creationTime(dealRng, REFERENCE_DAY - 365, REFERENCE_DAY - 1);
    set(deal, ms);
    earliest(firstDealOf, deal.account, ms);
    earliest(firstDealAsContact, deal.primary_contact, ms);
  }

  const accountRng = new Rng('account:created_at');
  for (const account of accounts) {
    const firstDeal = firstDealOf.get(account.id);
    if (firstDeal === undefined) set(account, creationTime(accountRng, FIRST_CREATED_DAY, REFERENCE_DAY - 1));
    else set(account, creationTime(accountRng, Math.max(FIRST_CREATED_DAY, dayOf(firstDeal) - 90), dayOf(firstDeal) - 1));
  }

  const contactRng = new Rng('contact:created_at');
  for (const contact of contacts) {
    const after = contact.account === null ? FIRST_CREATED_DAY * DAY_MS : created.get(contact.account)!;
    const before = firstDealAsContact.get(contact.id) ?? REFERENCE_MS - 1;
    set(contact, creationTime(contactRng, dayOf(after), dayOf(before), after, before));
  }

  const activityRng = new Rng('activity:created_at');
  for (const activity of activities) {
    const after = Math.max(
      FIRST_CREATED_DAY * DAY_MS,
      activity.deal === null ? -Infinity : created.get(activity.deal)!,
      activity.contact === null ? -Infinity : created.get(activity.contact)!,
    );
    const due = typeof activity.due_at === 'string' ? Date.parse(activity.due_at) : Infinity;
    const before = Math.max(after, Math.min(due, REFERENCE_MS - 1));
    set(activity, creationTime(activityRng, Math.max(dayOf(after), dayOf(before) - 14), dayOf(before), after, before));
  }
}

function checkCount(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 0 || value > MAX_COUNT) {
    throw new RangeError(`Sample count for ${name} must be an integer in 0..${MAX_COUNT}, got ${value}`);
  }
}

/**
 * Builds the sample CRM. Same counts → identical dataset. Objects come in load order
 * (account, contact, deal, activity) and every lookup points at a record generated before it.
 */
export function generateCrmSample(counts: Partial<CrmSampleCounts> = {}): SampleDataset {
  // Field by field so an explicit `undefined` still falls back to the default.
  const n: CrmSampleCounts = {
    account: counts.account ?? CRM_SAMPLE_DEFAULT_COUNTS.account,
    contact: counts.contact ?? CRM_SAMPLE_DEFAULT_COUNTS.contact,
    deal: counts.deal ?? CRM_SAMPLE_DEFAULT_COUNTS.deal,
    activity: counts.activity ?? CRM_SAMPLE_DEFAULT_COUNTS.activity,
  };
  for (const [name, value] of Object.entries(n)) checkCount(name, value);

  const accounts = generateAccounts(n.account);
  const contacts = generateContacts(n.contact, accounts.facts);
  const deals = generateDeals(n.deal, accounts.facts, contacts.facts);
  const activities = generateActivities(n.activity, accounts.facts, contacts.facts, deals.facts);
  markCustomers(accounts.records, deals.records);
  markLastContacted(contacts.records, activities.records, activities.contactIndexes);
  markCreated(accounts.records, contacts.records, deals.records, activities.records);

  return {
    objects: [
      { name: 'account', records: accounts.records },
      { name: 'contact', records: contacts.records },
      { name: 'deal', records: deals.records },
      { name: 'activity', records: activities.records },
    ],
  };
}
