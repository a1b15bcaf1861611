/**
 * Codes a question names in other words. Databases store `'DE'`, `'SHP'` or `'F'` where people say
 * "Germany", "shipped" or "female"; the value index finds stored text that a question spells, and
 * this module adds the codes a question's phrase stands for, read from the codes themselves:
 *
 * - a column whose values are two-letter region codes (ISO 3166, as `Intl.DisplayNames` knows
 *   them) or US state codes: the region's or state's English name, a few common other names, and
 *   the name plus "n" ("South Korean");
 * - a column of upper-case codes of 2–4 letters: a word of 5 letters or more (and at least twice
 *   the code's length less one) that starts with the code's first letter and holds its letters in
 *   order ("shipped" for SHP, "telehealth" for TEL), unless it names the code's table or one of its
 *   columns, or says what to compute ("average");
 * - a column of one-letter codes: a word written against the column's name ("gold-tier" for the
 *   tier G), or, where the codes include F and M, female and male words;
 * - a yes/no column (Y/N, yes/no, T/F, true/false): what its name flags, for the true value
 *   ("fragile" for `fragile = 'Y'`, "VIPs" for `vip = 'T'`), and after "not", "no", "non", "never" or
 *   "without", for the false one.
 */

/** Text as the matcher compares it: lower-case, diacritics removed, `&` read as "and", spaces collapsed. */
export function fold(text: string): string {
  return text
    .normalize("NFD")
    .replace(/\p{M}+/gu, "")
    .toLowerCase()
    .replace(/\s*&\s*/g, " and ")
    .replace(/\s+/g, " ")
    .trim();
}

/** One column's values, as the code reader sees them. */
export interface CodeColumn {
  table: string;
  column: string;
  values: readonly string[];
}

/** A stored code a phrase stands for, with how sure the reading is (0–1]. */
export interface CodeHit {
  table: string;
  column: string;
  value: string;
  score: number;
}

/** Reads a folded phrase as the codes it names; [] when it names none. */
export type CodeReader = (folded: string) => CodeHit[];

/** Share of a column's values that must read as region (or US state) codes for it to be read as such. */
const REGION_SHARE = 0.8;
/** A column holds at most this many distinct values to be read as region or state codes (ISO 3166 has 249). */
export const MAX_CODES = 300;
/** A column holds at most this many distinct values to be read as abbreviations or one-letter codes. */
const MAX_ABBREVIATIONS = 30;

/** The US states' (and DC's) postal codes and names. */
const US_STATES: Readonly<Record<string, string>> = Object.fromEntries(
  (
    "AL Alabama,AK Alaska,AZ Arizona,AR Arkansas,CA California,CO Colorado,CT Connecticut,DE Delaware,FL Florida," +
    "GA Georgia,HI Hawaii,ID Idaho,IL Illinois,IN Indiana,IA Iowa,KS Kansas,KY Kentucky,LA Louisiana,ME Maine," +
    "MD Maryland,MA Massachusetts,MI Michigan,MN Minnesota,MS Mississippi,MO Missouri,MT Montana,NE Nebraska," +
    "NV Nevada,NH New Hampshire,NJ New Jersey,NM New Mexico,NY New York,NC North Carolina,ND North Dakota,OH Ohio," +
    "OK Oklahoma,OR Oregon,PA Pennsylvania,RI Rhode Island,SC South Carolina,SD South Dakota,TN Tennessee,TX Texas," +
    "UT Utah,VT Vermont,VA Virginia,WA Washington,WV West Virginia,WI Wisconsin,WY Wyoming,DC District of Columbia"
  )
    .split(",")
    .map((entry) => [entry.slice(0, 2), entry.slice(3)]),
);

const OTHER_REGION_NAMES: Readonly<Record<string, readonly string[]>> = {
  US: ["usa", "america", "united states of america", "the us", "the usa"],
  GB: ["uk", "britain", "great britain", "the uk"],
  AE: ["uae"],
  NL: ["holland", "the netherlands"],
  KR: ["korea"],
  CZ: ["czech republic"],
};

/** Words that say what to compute, not which rows: never read as an abbreviation ("average" holds ARG's letters). */
const QUERY_WORDS = new Set(
  (
    "average avg total sum number count maximum minimum highest lowest largest smallest greatest least most greater " +
    "larger smaller bigger longest shortest oldest youngest earliest latest newest different distinct between above " +
    "below under over order ordered sorted descending ascending percentage percent ratio amount rows records entries " +
    "list names give show return find display"
  ).split(" "),
);

const SEX_WORDS: Readonly<Record<string, readonly string[]>> = {
  F: ["female", "females", "woman", "women", "girl", "girls"],
  M: ["male", "males", "man", "men", "boy", "boys"],
};

/** The spellings of a yes/no column's two values, true first (compared in lower case). */
const BOOLEAN_PAIRS: readonly (readonly [string, string])[] = [
  ["y", "n"],
  ["yes", "no"],
  ["t", "f"],
  ["true", "false"],
];

/** Words before a flag's name that ask for its false value. */
const NEGATIONS = ["not", "no", "non", "never", "without"];

/** Words of a flag column's name that say it is a flag, not what it flags. */
const FLAG_MARKERS = new Set(["is", "has", "was", "flag", "ind", "indicator", "yn"]);

/** A column's [true, false] values as stored when it holds exactly one boolean pair; undefined otherwise. */
function booleanPair(values: readonly string[]): [string, string] | undefined {
  if (values.length !== 2) return undefined;
  for (const [yes, no] of BOOLEAN_PAIRS) {
    const t = values.find((v) => v.toLowerCase() === yes);
    const f = values.find((v) => v.toLowerCase() === no);
    if (t !== undefined && f !== undefined) return [t, f];
  }
  return undefined;
}

/** The words of a table or column name, folded: "frequent_flyer", "frequentFlyer" → ["frequent", "flyer"]. */
function identifierWords(name: string): string[] {
  return fold(name.replace(/([a-z])([A-Z])/g, "$1 $2").replace(/[_\W]+/g, " "))
    .split(" ")
    .filter((w) => w.length > 0);
}

/** What a flag column's name says it flags ("is_returned" → "returned", "balconyFlag" → "balcony"); undefined when nothing is left. */
function flagWords(column: string): string | undefined {
  const name = identifierWords(column)
    .filter((w) => !FLAG_MARKERS.has(w))
    .join(" ");
  return name.length >= 3 ? name : undefined;
}

let regionNames: Intl.DisplayNames | undefined;

/** The English name of a two-letter region code; undefined where there is none. */
function regionName(code: string): string | undefined {
  if (!/^[A-Z]{2}$/.test(code)) return undefined;
  try {
    regionNames ??= new Intl.DisplayNames(["en"], { type: "region", fallback: "none" });
    return regionNames.of(code);
  } catch {
    return undefined;
  }
}

/** True when `code` (lower case) is a subsequence of `word` that starts where it starts. */
function abbreviates(code: string, word: string): boolean {
  if (word[0] !== code[0]) return false;
  let i = 0;
  for (const ch of word) if (ch === code[i]) i++;
  return i === code.length;
}

/**
 * The reader of `columns`' codes (columns of more than {@link MAX_CODES} values are not read, nor
 * abbreviations or letters in columns of more than 30).
 * `stopWords` are never read as an abbreviation, nor, for a column, the words of its table's name
 * and column names (`schema`), plural or not, which name the table or a column of it: "shipping"
 * is `orders.shipping_fee`'s, though it holds the letters of `orders.status`'s SHP.
 */
export function codeReader(
  columns: readonly CodeColumn[],
  stopWords: ReadonlySet<string> = new Set(),
  schema: readonly { name: string; columns: readonly string[] }[] = [],
): CodeReader {
  const tableWords = new Map(schema.map((t) => [t.name, new Set([t.name, ...t.columns].flatMap(identifierWords).filter((w) => w.length >= 3))]));
  const namesTable = (table: string, word: string): boolean => {
    const words = tableWords.get(table);
    return words !== undefined && [word, word.replace(/s$/, ""), word.replace(/es$/, "")].some((w) => words.has(w));
  };
  const names = new Map<string, CodeHit[]>();
  const addName = (name: string, hit: CodeHit): void => {
    const list = names.get(name) ?? [];
    if (!list.some((h) => h.table === hit.table && h.column === hit.column && h.value === hit.value)) list.push(hit);
    names.set(name, list);
  };
  const abbreviations: { table: string; column: string; codes: string[] }[] = [];
  const letters: { table: string; column: string; codes: string[]; names: string[] }[] = [];
  for (const c of columns) {
    const values = [...new Set(c.values)];
    if (values.length < 2 || values.length > MAX_CODES) continue;
    // a column of CA, NY, TX is states; one of CA, DE, GB regions: whichever reads more of its values
    const regions = values.map((v) => [v, regionName(v)] as const).filter(([, n]) => n !== undefined);
    const states = values.filter((v) => US_STATES[v] !== undefined);
    if (Math.max(regions.length, states.length) >= REGION_SHARE * values.length) {
      const named =
        states.length > regions.length
          ? states.map((v) => [v, [US_STATES[v]!]] as const)
          : regions.map(([v, n]) => [v, [n!, ...(OTHER_REGION_NAMES[v] ?? [])]] as const);
      for (const [code, spellings] of named) {
        const hit = { table: c.table, column: c.column, value: code, score: 1 };
        for (const n of spellings) {
          addName(fold(n), hit);
          addName(`${fold(n)}n`, hit);
        }
      }
      continue;
    }
    if (values.length > MAX_ABBREVIATIONS) continue;
    const flag = booleanPair(values);
    const flagName = flag && flagWords(c.column);
    if (flag && flagName) {
      // "fragile" for fragile = 'Y', "not fragile" for 'N'
      for (const form of [flagName, `${flagName}s`, `${flagName}es`]) {
        addName(form, { table: c.table, column: c.column, value: flag[0], score: 0.9 });
        for (const not of NEGATIONS) addName(`${not} ${form}`, { table: c.table, column: c.column, value: flag[1], score: 0.95 });
      }
      continue;
    }
    if (values.every((v) => /^[A-Z]{2,4}$/.test(v))) {
      abbreviations.push({ table: c.table, column: c.column, codes: values });
    } else if (values.every((v) => /^[A-Z]$/.test(v))) {
      const words = identifierWords(c.column);
      letters.push({ table: c.table, column: c.column, codes: values, names: [words.join(" "), ...words.slice(-1)] });
      if (values.includes("F") && values.includes("M")) {
        for (const [code, words] of Object.entries(SEX_WORDS)) for (const w of words) addName(w, { table: c.table, column: c.column, value: code, score: 1 });
      }
    }
  }

  return (folded) => {
    const out: CodeHit[] = [...(names.get(folded) ?? [])];
    if (/^\p{L}+$/u.test(folded) && !stopWords.has(folded) && !QUERY_WORDS.has(folded)) {
      for (const a of abbreviations) {
        if (namesTable(a.table, folded)) continue;
        // the longest code the word spells, when exactly one does
        const spelt = a.codes.filter((code) => folded.length >= Math.max(5, 2 * code.length - 1) && abbreviates(code.toLowerCase(), folded));
        const longest = Math.max(0, ...spelt.map((s) => s.length));
        const best = spelt.filter((s) => s.length === longest);
        if (best.length === 1) out.push({ table: a.table, column: a.column, value: best[0]!, score: 0.8 });
      }
    }
    const parts = folded.split(/[\s-]+/);
    if (parts.length >= 2) {
      for (const l of letters) {
        for (const name of l.names) {
          const n = name.split(" ").length;
          const before = parts.length === n + 1 && parts.slice(1).join(" ") === name ? parts[0]! : undefined;
          const after = parts.length === n + 1 && parts.slice(0, n).join(" ") === name ? parts[n]! : undefined;
          for (const word of [before, after]) {
            // "frequent flyer" is the column frequent_flyer named in full, not a code of its last word
            if (!word || word.length < 3 || stopWords.has(word) || l.names[0]!.split(" ").includes(word)) continue;
            const code = l.codes.find((c) => c.toLowerCase() === word[0]);
            if (code) out.push({ table: l.table, column: l.column, value: code, score: 0.9 });
          }
        }
      }
    }
    return out;
  };
}
