/**
 * What an answer in another language calls a value of the results: a country by its name in that language (from the
 * runtime's own region names), and the common words of sales and support data (stages, sources, activity kinds,
 * deal types, industries) in the languages the checker reads. A value found this way is the same mention as the
 * value itself, so "Allemagne : 24 comptes" is about the row of Germany.
 */

/** The languages answers are read in besides English. */
const LANGUAGES = ['de', 'fr', 'es', 'it', 'pt', 'nl', 'pl'] as const;

/** Common values (as results spell them, lower case, spaces for `_`) → their words in the other languages. */
const WORDS: Readonly<Record<string, readonly string[]>> = {
  meeting: [
    'besprechung',
    'termin',
    'réunion',
    'rendez-vous',
    'reunión',
    'riunione',
    'incontro',
    'reunião',
    'vergadering',
    'afspraak',
    'spotkanie',
  ],
  call: [
    'anruf',
    'telefonat',
    'appel',
    'llamada',
    'chiamata',
    'telefonata',
    'chamada',
    'ligação',
    'telefoongesprek',
    'telefoontje',
    'połączenie',
    'rozmowa',
  ],
  email: ['e-mail', 'courriel', 'correo', 'correo electrónico', 'mail'],
  task: ['aufgabe', 'tâche', 'tarea', 'compito', 'tarefa', 'taak', 'zadanie'],
  event: ['veranstaltung', 'messe', 'événement', 'salon', 'evento', 'eventos', 'evenement', 'wydarzenie'],
  referral: [
    'empfehlung',
    'recommandation',
    'parrainage',
    'referido',
    'referidos',
    'recomendación',
    'segnalazione',
    'passaparola',
    'indicação',
    'indicações',
    'doorverwijzing',
    'aanbeveling',
    'polecenie',
  ],
  website: ['webseite', 'site web', 'site internet', 'sitio web', 'sito web', 'site', 'strona internetowa'],
  'paid search': [
    'bezahlte suche',
    'recherche payante',
    'búsqueda pagada',
    'búsqueda de pago',
    'ricerca a pagamento',
    'busca paga',
    'pesquisa paga',
    'betaald zoeken',
    'płatne wyszukiwanie',
  ],
  'existing customer': [
    'bestandskunde',
    'bestandskunden',
    'client existant',
    'clients existants',
    'cliente existente',
    'clientes existentes',
    'cliente esistente',
    'clienti esistenti',
    'bestaande klant',
    'bestaande klanten',
    'obecny klient',
    'obecni klienci',
  ],
  outbound: ['kaltakquise', 'prospection sortante', 'prospección', 'prospecção'],
  renewal: [
    'verlängerung',
    'verlängerungen',
    'renouvellement',
    'renouvellements',
    'renovación',
    'renovaciones',
    'rinnovo',
    'rinnovi',
    'renovação',
    'renovações',
    'verlenging',
    'verlengingen',
    'odnowienie',
    'odnowienia',
  ],
  expansion: [
    'erweiterung',
    'erweiterungen',
    'extension',
    'expansión',
    'ampliación',
    'espansione',
    'expansão',
    'uitbreiding',
    'uitbreidingen',
    'rozszerzenie',
  ],
  'new business': [
    'neugeschäft',
    'neukunden',
    'nouvelle affaire',
    'nouvelles affaires',
    'nouveau client',
    'nouveaux clients',
    'nuevo negocio',
    'nuevos negocios',
    'nuovo business',
    'nuovi clienti',
    'novo negócio',
    'novos negócios',
    'nieuwe klant',
    'nieuwe klanten',
    'nowy biznes',
    'nowi klienci',
  ],
  pilot: ['pilotprojekt', 'pilotprojekte', 'piloto', 'pilotos', 'pilota', 'progetto pilota'],
  software: ['logiciel', 'logiciels', 'oprogramowanie'],
  healthcare: [
    'gesundheitswesen',
    'gesundheit',
    'santé',
    'salud',
    'sanidad',
    'sanità',
    'saúde',
    'gezondheidszorg',
    'opieka zdrowotna',
    'ochrona zdrowia',
  ],
  retail: [
    'einzelhandel',
    'commerce de détail',
    'comercio minorista',
    'minorista',
    'commercio al dettaglio',
    'vendita al dettaglio',
    'varejo',
    'retalho',
    'detailhandel',
    'handel detaliczny',
  ],
  manufacturing: [
    'fertigung',
    'produktion',
    'industrie manufacturière',
    'fabrication',
    'manufactura',
    'fabricación',
    'manifattura',
    'manufatura',
    'indústria',
    'productie',
    'maakindustrie',
    'produkcja',
  ],
  education: [
    'bildung',
    'bildungswesen',
    'éducation',
    'enseignement',
    'educación',
    'istruzione',
    'educação',
    'ensino',
    'onderwijs',
    'edukacja',
  ],
  finance: ['finanzen', 'finanzwesen', 'finances', 'finanzas', 'finanza', 'finanças', 'financiën', 'finanse'],
  'financial services': [
    'finanzdienstleistungen',
    'services financiers',
    'servicios financieros',
    'servizi finanziari',
    'serviços financeiros',
    'financiële dienstverlening',
    'usługi finansowe',
  ],
  media: ['medien', 'médias', 'medios', 'mídia'],
  hospitality: ['gastgewerbe', 'hôtellerie', 'hostelería', 'ospitalità', 'hotelaria', 'horeca'],
  technology: ['technologie', 'tecnología', 'tecnologia', 'technologia'],
  prospecting: ['akquise', 'prospection', 'prospección', 'prospezione', 'prospecção', 'prospectie', 'pozyskiwanie'],
  qualification: [
    'qualifizierung',
    'qualification',
    'calificación',
    'cualificación',
    'qualificazione',
    'qualificação',
    'kwalificatie',
    'kwalifikacja',
  ],
  proposal: ['angebot', 'proposition', 'propuesta', 'proposta', 'voorstel', 'oferta', 'propozycja'],
  negotiation: [
    'verhandlung',
    'négociation',
    'negociación',
    'negoziazione',
    'trattativa',
    'negociação',
    'onderhandeling',
    'negocjacje',
  ],
};

let countries: Map<string, string[]> | undefined;

/** English country names (lower case) → the names in the other languages, from Intl's region names. */
function countryNames(): Map<string, string[]> {
  if (countries) return countries;
  countries = new Map();
  const english = new Intl.DisplayNames(['en'], { type: 'region' });
  const others = LANGUAGES.map((language) => new Intl.DisplayNames([language], { type: 'region' }));
  for (let a = 65; a <= 90; a++)
    for (let b = 65; b <= 90; b++) {
      const code = String.fromCharCode(a, b);
      let name: string | undefined;
      try {
        name = english.of(code);
      } catch {
        continue;
      }
      if (!name || name === code) continue;
      const names = others.map((names) => names.of(code)).filter((n): n is string => !!n && n !== code);
      countries.set(name.toLowerCase(), [...new Set(names.map((n) => n.toLowerCase()).filter((n) => n !== name.toLowerCase()))]);
    }
  return countries;
}

/** The other languages' words for a value of the results (lower case), or none. */
export function translationsOf(value: string): readonly string[] {
  return WORDS[value] ?? countryNames().get(value) ?? [];
}
