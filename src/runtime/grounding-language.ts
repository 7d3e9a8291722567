/**
 * The language an answer is written in, told from its own words (an agent's locale may be another), and
 * the number style that language writes figures in. Pure functions, no I/O.
 */

/** The languages grounding reads figures, months and ordinals of. */
export const GROUNDING_LANGUAGES = ['en', 'de', 'fr', 'es', 'it', 'pt', 'nl'] as const;
export type GroundingLanguage = (typeof GROUNDING_LANGUAGES)[number];

/** The locale whose number style a language's answers use when the agent's locale is of another language. */
const DEFAULT_LOCALE: Record<GroundingLanguage, string> = {
  en: 'en-US',
  de: 'de-DE',
  fr: 'fr-FR',
  es: 'es-ES',
  it: 'it-IT',
  pt: 'pt-BR',
  nl: 'nl-NL',
};

/** Short words frequent in one language (a word shared by several counts for each, less). */
const STOP_WORDS: Record<GroundingLanguage, string> = {
  en: 'the and of to is are was were with for on that this by from has have it at than its which our we you your their there been be not but or in a an won lost million billion',
  de: 'der die das und ist sind mit von den dem des ein eine einen im auf für nicht wir hat haben zu bei über wurde wurden sich auch als vom zum zur noch nach aus oder sie es ihr ihre in mio mrd tsd millionen milliarden gewonnen minuten stunden tage monate jahr im zum deals umsatz kunden konten mitarbeiter mitarbeitende vertrieb einen einem bringt liegt beträgt durchschnitt',
  fr: 'le la les des et est sont du un une pour avec sur dans au aux qui que par pas ont été ce cette ces nous vous leur il elle sa son ses ou mais entre plus de en à avons soit millions milliards affaires heures jours mois année comptes chiffre clients salariés employés ventes affaire vaut moyenne perdue perdues gagnée gagnées environ dont chaque',
  es: 'el la los las y es son del un una para con por en que se al fue ha han más sin su sus entre este esta estos nos como pero o muy hay tiene de lo millones dólares operaciones minutos horas días meses año cuentas ingresos clientes empleados ventas operación importe promedio unos ganadas perdidas cada',
  it: 'il lo la gli le e è sono del della dei delle di un una per con che non ha hanno nel nella al alla stato stata questo questa tra ma o più anche sue suo in milioni miliardi dollari mln minuti ore giorni mesi anno dura circa trattative fatturato clienti dipendenti vendite conta trattativa vinte perse ogni valore',
  pt: 'o a os as e é são do da dos das um uma para com por em no na nos nas que foi tem não mais seu sua entre este esta ou mas também ao aos de milhões bilhões dólares negócios minutos horas dias meses ano contas receita clientes funcionários vendas negócio ganhos perdidos vale cerca cada',
  nl: 'de het een en is zijn van met voor op in dat die niet heeft hebben werd werden naar bij ook als er maar wel deze dit aan om uit of hun miljoen miljard mln we minuten uren dagen maanden jaar omzet klanten medewerkers werknemers verkoop heeft gewonnen verloren gemiddeld elke ongeveer',
};

const WEIGHTS = (() => {
  const counts = new Map<string, number>();
  for (const language of GROUNDING_LANGUAGES)
    for (const word of new Set(STOP_WORDS[language].split(' '))) counts.set(word, (counts.get(word) ?? 0) + 1);
  const weights = new Map<string, Array<[GroundingLanguage, number]>>();
  for (const language of GROUNDING_LANGUAGES)
    for (const word of new Set(STOP_WORDS[language].split(' '))) {
      const list = weights.get(word) ?? [];
      list.push([language, 1 / counts.get(word)!]);
      weights.set(word, list);
    }
  return weights;
})();

/** Letters only one or two of the languages use. */
const LETTERS: Array<[RegExp, GroundingLanguage[]]> = [
  [/[ßäöü]/g, ['de']],
  [/[ãõ]/g, ['pt']],
  [/ç/g, ['fr', 'pt']],
  [/ñ/g, ['es']],
  [/[èàù]/g, ['it', 'fr']],
  [/[êâîôœ]/g, ['fr']],
  [/[óíáú]/g, ['es', 'pt']],
  [/\bij/g, ['nl']],
];

/** Longest stretch of an answer read to tell its language: enough words, bounded work. */
const SAMPLE = 4000;

/**
 * The language of a text by counts of its frequent short words (and a few letters); undefined when too
 * few words say it.
 */
export function detectLanguage(text: string): GroundingLanguage | undefined {
  const sample = text.slice(0, SAMPLE).toLowerCase();
  const scores = new Map<GroundingLanguage, number>(GROUNDING_LANGUAGES.map((l) => [l, 0]));
  for (const match of sample.matchAll(/[\p{L}]+/gu)) {
    for (const [language, weight] of WEIGHTS.get(match[0]) ?? []) scores.set(language, scores.get(language)! + weight);
  }
  for (const [pattern, languages] of LETTERS) {
    const count = Math.min(5, sample.match(pattern)?.length ?? 0);
    for (const language of languages) scores.set(language, scores.get(language)! + (count * 0.5) / languages.length);
  }
  const ranked = [...scores].sort((a, b) => b[1] - a[1]);
  const [[best, top], [, second]] = ranked;
  if (top < 1.5 || top < second * 1.25) return undefined;
  return best;
}

/** The language of a BCP 47 locale, when grounding reads it. */
export function localeLanguage(locale: string | undefined): GroundingLanguage | undefined {
  const language = locale?.split(/[-_]/)[0]?.toLowerCase();
  return (GROUNDING_LANGUAGES as readonly string[]).includes(language ?? '') ? (language as GroundingLanguage) : undefined;
}

/**
 * The locale whose number style the text is written in: the agent's when the text is in its language
 * (or the text's language is not told), else the usual one of the text's language.
 */
export function textLocale(locale: string | undefined, language: GroundingLanguage | undefined): string | undefined {
  if (!language || localeLanguage(locale) === language) return locale;
  // An English answer of an agent set to another language: the agent's region says nothing of it.
  return DEFAULT_LOCALE[language];
}
