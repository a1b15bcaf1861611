/**
 * Domain templates of the synthetic text-to-SQL generator: small relational worlds (2–3 tables,
 * parents before children) whose columns carry a semantic kind. The kind decides how values are
 * drawn, how they can be stored (the value encodings a model must probe for) and how questions
 * phrase a filter on them. None of {@link DOMAINS} repeats the example databases (retail, clinic,
 * music), which are the demo / evaluation set; {@link LOOKALIKE_DOMAINS} imitate their schemas and
 * are built only on request.
 *
 * Vocabulary is deliberately small and regular: a tiny model trained on CPU sees these words again
 * and again. Phrase templates use `{v}` (a value as a person writes it), `{n}` (a number in the
 * asked unit) and `{cmp}` (the comparison word, from the column's `cmp` pair).
 */

/** A category value: the word a person writes in a question, and the short code a database may store. */
export interface CategoryValue {
  word: string;
  code: string;
}

/** A country: its name, how a sentence writes it, ISO 3166 alpha-2 and alpha-3 codes. */
export interface Country {
  name: string;
  /** "the United Kingdom" where English wants the article; else the name. */
  text: string;
  iso2: string;
  iso3: string;
}

/** A city and a three-letter code (IATA metropolitan style). */
export interface City {
  name: string;
  code: string;
}

export const COUNTRIES: readonly Country[] = [
  { name: "United Kingdom", text: "the United Kingdom", iso2: "GB", iso3: "GBR" },
  { name: "United States", text: "the United States", iso2: "US", iso3: "USA" },
  { name: "France", text: "France", iso2: "FR", iso3: "FRA" },
  { name: "Germany", text: "Germany", iso2: "DE", iso3: "DEU" },
  { name: "Spain", text: "Spain", iso2: "ES", iso3: "ESP" },
  { name: "Italy", text: "Italy", iso2: "IT", iso3: "ITA" },
  { name: "Japan", text: "Japan", iso2: "JP", iso3: "JPN" },
  { name: "Brazil", text: "Brazil", iso2: "BR", iso3: "BRA" },
  { name: "Canada", text: "Canada", iso2: "CA", iso3: "CAN" },
  { name: "India", text: "India", iso2: "IN", iso3: "IND" },
  { name: "Mexico", text: "Mexico", iso2: "MX", iso3: "MEX" },
  { name: "Netherlands", text: "the Netherlands", iso2: "NL", iso3: "NLD" },
  { name: "Sweden", text: "Sweden", iso2: "SE", iso3: "SWE" },
  { name: "Ireland", text: "Ireland", iso2: "IE", iso3: "IRL" },
  { name: "Portugal", text: "Portugal", iso2: "PT", iso3: "PRT" },
  { name: "Australia", text: "Australia", iso2: "AU", iso3: "AUS" },
  { name: "South Korea", text: "South Korea", iso2: "KR", iso3: "KOR" },
  { name: "China", text: "China", iso2: "CN", iso3: "CHN" },
  { name: "Nigeria", text: "Nigeria", iso2: "NG", iso3: "NGA" },
  { name: "Norway", text: "Norway", iso2: "NO", iso3: "NOR" },
  { name: "Poland", text: "Poland", iso2: "PL", iso3: "POL" },
  { name: "Argentina", text: "Argentina", iso2: "AR", iso3: "ARG" },
];

export const CITIES: readonly City[] = [
  { name: "Paris", code: "PAR" },
  { name: "London", code: "LON" },
  { name: "Berlin", code: "BER" },
  { name: "Madrid", code: "MAD" },
  { name: "Rome", code: "ROM" },
  { name: "Tokyo", code: "TYO" },
  { name: "Toronto", code: "YTO" },
  { name: "Chicago", code: "CHI" },
  { name: "Sydney", code: "SYD" },
  { name: "Lisbon", code: "LIS" },
  { name: "Dublin", code: "DUB" },
  { name: "Oslo", code: "OSL" },
  { name: "Vienna", code: "VIE" },
  { name: "Prague", code: "PRG" },
  { name: "Athens", code: "ATH" },
  { name: "Cairo", code: "CAI" },
];

export const FIRST_NAMES: readonly string[] = [
  "Anna",
  "Ben",
  "Clara",
  "David",
  "Ella",
  "Felix",
  "Grace",
  "Hugo",
  "Ivy",
  "Jack",
  "Kate",
  "Leo",
  "Maya",
  "Noah",
  "Olga",
  "Paul",
  "Rosa",
  "Sam",
  "Tara",
  "Victor",
];

export const LAST_NAMES: readonly string[] = [
  "Adams",
  "Baker",
  "Cole",
  "Diaz",
  "Evans",
  "Fox",
  "Green",
  "Hill",
  "Ito",
  "Jones",
  "King",
  "Lopez",
  "Moore",
  "Novak",
  "Park",
  "Reed",
  "Silva",
  "Stone",
  "Wood",
  "Young",
];

export const TITLE_ADJECTIVES: readonly string[] = [
  "Silent",
  "Golden",
  "Hidden",
  "Lost",
  "Bright",
  "Dark",
  "Last",
  "Little",
  "Broken",
  "Wild",
  "Quiet",
  "Red",
  "Blue",
  "Frozen",
  "Secret",
  "Long",
  "Empty",
  "Distant",
  "Gentle",
  "Iron",
];

export const TITLE_NOUNS: readonly string[] = [
  "River",
  "Garden",
  "Road",
  "House",
  "Storm",
  "Island",
  "Mirror",
  "Forest",
  "Letter",
  "Winter",
  "Harbour",
  "Light",
  "City",
  "Bridge",
  "Dream",
  "Song",
  "Shadow",
  "Valley",
  "Tower",
  "Voyage",
];

/** Where a label column's values come from. */
export type LabelPool = "person" | "title" | "flight" | "course" | "company" | "product" | "room" | "session" | "animal" | "plate" | "dish";

/** Comparison words for "greater" and "smaller", e.g. ["more", "fewer"] or ["above", "below"]. */
export type CmpWords = readonly [string, string];

interface ColumnBase {
  /** Stable key used by the generator and in question templates. */
  key: string;
  /** Name variants (snake_case); one is drawn per database, then styled. */
  names: readonly string[];
  /** Left out of some databases (probability 0.25). Default false. */
  optional?: boolean;
}

/** A human-readable identifier of a row (a person's name, a title, a flight number). */
export interface LabelColumn extends ColumnBase {
  kind: "label";
  pool: LabelPool;
  /** Plural noun for lists: "names", "titles", "flight numbers". */
  nouns: string;
}

/** A country; stored as ISO-2, ISO-3, upper, lower or plain names. */
export interface CountryColumn extends ColumnBase {
  kind: "country";
  /** "from {v}". */
  phrase: string;
}

/** A city; stored as a three-letter code, upper, lower or plain names. */
export interface CityColumn extends ColumnBase {
  kind: "city";
  /** "in {v}". */
  phrase: string;
}

/** A closed set of words; stored as codes, one letter, upper, title or plain words. */
export interface CategoryColumn extends ColumnBase {
  kind: "category";
  values: readonly CategoryValue[];
  /** "in the {v} genre". */
  phrase: string;
  /** What one value is called ("genre"), for "For each genre, ...". */
  noun: string;
}

/** A yes/no fact; stored as Y/N, 1/0, yes/no, T/F or true/false. */
export interface BoolColumn extends ColumnBase {
  kind: "bool";
  /** The word hints use: "returned". */
  word: string;
  /** Filter phrase when true: "that were returned". */
  yes: string;
  /** Filter phrase when false: "that were not returned". */
  no: string;
  /** Share of true values. */
  rate: number;
}

/** A measured quantity: money (asked in dollars), weight (kilograms), duration (minutes) or a plain count. */
export interface MeasureColumn extends ColumnBase {
  kind: "money" | "weight" | "duration" | "int";
  /** "price", "weight", "duration", "page count". */
  noun: string;
  /** Range in the asked unit (dollars, kilograms, minutes, or the count itself). */
  min: number;
  max: number;
  /** "with a price {cmp} {n} dollars". */
  phrase: string;
  cmp: CmpWords;
}

/** A calendar date; stored as text in one of several formats. */
export interface DateColumn extends ColumnBase {
  kind: "date";
  /** Inclusive 'YYYY-MM-DD' range. */
  from: string;
  to: string;
  /** "made in {v}" ({v} is a year or "March 2021"). */
  phrase: string;
}

/** A reference to a parent table's primary key. */
export interface RefColumn extends ColumnBase {
  kind: "ref";
  /** The parent table's key. */
  table: string;
  /** Links a child phrase to its parent: "loans {via} members from France" ("by"). */
  via: string;
}

export type ColumnTemplate = LabelColumn | CountryColumn | CityColumn | CategoryColumn | BoolColumn | MeasureColumn | DateColumn | RefColumn;

/** A table template; the name and its singular are drawn from `names` (`[plural, singular]` pairs). */
export interface TableTemplate {
  key: string;
  names: readonly (readonly [string, string])[];
  /** How questions name one row / several rows: "member" / "members". */
  singular: string;
  plural: string;
  /** Row count range. */
  rows: readonly [number, number];
  columns: readonly ColumnTemplate[];
}

/** A domain: tables in dependency order (parents first). */
export interface DomainTemplate {
  name: string;
  tables: readonly TableTemplate[];
}

const money = (key: string, names: string[], noun: string, min: number, max: number, optional = false): MeasureColumn => ({
  kind: "money",
  key,
  names,
  noun,
  min,
  max,
  phrase: `with a ${noun} {cmp} {n} dollars`,
  cmp: ["above", "below"],
  optional,
});

const cats = (pairs: string): CategoryValue[] =>
  pairs.split(",").map((p) => {
    const [word, code] = p.split(":") as [string, string];
    return { word: word.trim(), code: code.trim() };
  });

const library: DomainTemplate = {
  name: "library",
  tables: [
    {
      key: "member",
      names: [
        ["members", "member"],
        ["patrons", "patron"],
        ["borrowers", "borrower"],
      ],
      singular: "member",
      plural: "members",
      rows: [25, 60],
      columns: [
        { kind: "label", key: "name", names: ["name", "full_name"], pool: "person", nouns: "names" },
        { kind: "country", key: "country", names: ["country", "country_code", "nation"], phrase: "from {v}" },
        { kind: "date", key: "joined", names: ["joined", "join_date", "member_since"], from: "2018-01-01", to: "2023-12-31", phrase: "who joined in {v}" },
        {
          kind: "bool",
          key: "student",
          names: ["is_student", "student", "student_flag"],
          word: "student",
          yes: "who are students",
          no: "who are not students",
          rate: 0.35,
          optional: true,
        },
      ],
    },
    {
      key: "book",
      names: [
        ["books", "book"],
        ["titles", "title_record"],
        ["volumes", "volume"],
      ],
      singular: "book",
      plural: "books",
      rows: [30, 80],
      columns: [
        { kind: "label", key: "title", names: ["title", "book_title"], pool: "title", nouns: "titles" },
        {
          kind: "category",
          key: "genre",
          names: ["genre", "genre_code", "category"],
          noun: "genre",
          phrase: "in the {v} genre",
          values: cats("fantasy:FAN,history:HIS,science:SCI,poetry:POE,mystery:MYS,romance:ROM,travel:TRV"),
        },
        {
          kind: "int",
          key: "pages",
          names: ["pages", "page_count", "num_pages"],
          noun: "page count",
          min: 80,
          max: 900,
          phrase: "with {cmp} than {n} pages",
          cmp: ["more", "fewer"],
        },
        money("price", ["price", "list_price", "cost"], "price", 5, 60, true),
      ],
    },
    {
      key: "loan",
      names: [
        ["loans", "loan"],
        ["checkouts", "checkout"],
        ["borrowings", "borrowing"],
      ],
      singular: "loan",
      plural: "loans",
      rows: [80, 200],
      columns: [
        { kind: "ref", key: "member", table: "member", names: [], via: "by" },
        { kind: "ref", key: "book", table: "book", names: [], via: "of" },
        { kind: "date", key: "loan_date", names: ["loan_date", "borrowed_on", "out_date"], from: "2019-01-01", to: "2023-12-31", phrase: "made in {v}" },
        {
          kind: "bool",
          key: "returned",
          names: ["returned", "is_returned", "returned_flag"],
          word: "returned",
          yes: "that were returned",
          no: "that were not returned",
          rate: 0.7,
        },
        money("late_fee", ["late_fee", "fine", "fee"], "late fee", 0.5, 12, true),
      ],
    },
  ],
};

const airline: DomainTemplate = {
  name: "airline",
  tables: [
    {
      key: "passenger",
      names: [
        ["passengers", "passenger"],
        ["travellers", "traveller"],
        ["flyers", "flyer"],
      ],
      singular: "passenger",
      plural: "passengers",
      rows: [30, 70],
      columns: [
        { kind: "label", key: "name", names: ["name", "passenger_name"], pool: "person", nouns: "names" },
        { kind: "country", key: "country", names: ["country", "nationality", "country_code"], phrase: "from {v}" },
        {
          kind: "bool",
          key: "frequent",
          names: ["frequent_flyer", "is_frequent", "loyalty"],
          word: "frequent flyer",
          yes: "who are frequent flyers",
          no: "who are not frequent flyers",
          rate: 0.3,
        },
      ],
    },
    {
      key: "flight",
      names: [
        ["flights", "flight"],
        ["routes", "route"],
      ],
      singular: "flight",
      plural: "flights",
      rows: [20, 50],
      columns: [
        { kind: "label", key: "code", names: ["flight_no", "code", "flight_code"], pool: "flight", nouns: "flight numbers" },
        { kind: "city", key: "origin", names: ["origin", "from_city", "departure_city"], phrase: "departing from {v}" },
        {
          kind: "duration",
          key: "duration",
          names: ["duration", "flight_time", "block_time"],
          noun: "duration",
          min: 45,
          max: 720,
          phrase: "lasting {cmp} than {n} minutes",
          cmp: ["more", "less"],
        },
        {
          kind: "category",
          key: "status",
          names: ["status", "state", "status_code"],
          noun: "status",
          phrase: "with status {v}",
          values: cats("on time:ONT,delayed:DLY,cancelled:CNL,diverted:DIV"),
        },
      ],
    },
    {
      key: "booking",
      names: [
        ["bookings", "booking"],
        ["reservations", "reservation"],
        ["tickets", "ticket"],
      ],
      singular: "booking",
      plural: "bookings",
      rows: [80, 200],
      columns: [
        { kind: "ref", key: "passenger", table: "passenger", names: [], via: "by" },
        { kind: "ref", key: "flight", table: "flight", names: [], via: "on" },
        { kind: "date", key: "booked", names: ["booked_on", "booking_date", "created"], from: "2019-01-01", to: "2023-12-31", phrase: "made in {v}" },
        {
          kind: "category",
          key: "cabin",
          names: ["cabin", "class_code", "fare_class"],
          noun: "cabin",
          phrase: "in {v} class",
          values: cats("economy:ECO,premium:PRE,business:BUS,first:FST"),
        },
        money("fare", ["fare", "amount", "price"], "fare", 40, 1500),
      ],
    },
  ],
};

const school: DomainTemplate = {
  name: "school",
  tables: [
    {
      key: "student",
      names: [
        ["students", "student"],
        ["pupils", "pupil"],
        ["learners", "learner"],
      ],
      singular: "student",
      plural: "students",
      rows: [30, 70],
      columns: [
        { kind: "label", key: "name", names: ["name", "student_name", "full_name"], pool: "person", nouns: "names" },
        { kind: "city", key: "city", names: ["city", "home_city", "hometown"], phrase: "living in {v}" },
        {
          kind: "date",
          key: "enrolled",
          names: ["enrolled", "start_date", "enrolled_on"],
          from: "2018-01-01",
          to: "2023-12-31",
          phrase: "who enrolled in {v}",
        },
        {
          kind: "bool",
          key: "scholarship",
          names: ["scholarship", "has_scholarship", "grant_flag"],
          word: "scholarship",
          yes: "who have a scholarship",
          no: "who have no scholarship",
          rate: 0.25,
          optional: true,
        },
      ],
    },
    {
      key: "course",
      names: [
        ["courses", "course"],
        ["subjects", "subject"],
        ["modules", "module"],
      ],
      singular: "course",
      plural: "courses",
      rows: [15, 40],
      columns: [
        { kind: "label", key: "title", names: ["title", "course_name", "name"], pool: "course", nouns: "titles" },
        {
          kind: "category",
          key: "department",
          names: ["department", "dept", "faculty"],
          noun: "department",
          phrase: "in the {v} department",
          values: cats("mathematics:MAT,physics:PHY,biology:BIO,history:HIS,art:ART,music:MUS"),
        },
        {
          kind: "int",
          key: "credits",
          names: ["credits", "credit_points", "units"],
          noun: "credit value",
          min: 1,
          max: 12,
          phrase: "worth {cmp} than {n} credits",
          cmp: ["more", "fewer"],
        },
      ],
    },
    {
      key: "enrollment",
      names: [
        ["enrollments", "enrollment"],
        ["registrations", "registration"],
        ["attendances", "attendance"],
      ],
      singular: "enrollment",
      plural: "enrollments",
      rows: [80, 200],
      columns: [
        { kind: "ref", key: "student", table: "student", names: [], via: "of" },
        { kind: "ref", key: "course", table: "course", names: [], via: "in" },
        {
          kind: "category",
          key: "term",
          names: ["term", "semester", "term_code"],
          noun: "term",
          phrase: "in the {v} term",
          values: cats("spring:SPR,summer:SUM,autumn:AUT,winter:WIN"),
        },
        {
          kind: "int",
          key: "score",
          names: ["score", "mark", "result"],
          noun: "score",
          min: 20,
          max: 100,
          phrase: "with a score {cmp} {n}",
          cmp: ["above", "below"],
        },
        {
          kind: "bool",
          key: "passed",
          names: ["passed", "is_passed", "pass_flag"],
          word: "passed",
          yes: "that were passed",
          no: "that were failed",
          rate: 0.75,
        },
      ],
    },
  ],
};

const warehouse: DomainTemplate = {
  name: "warehouse",
  tables: [
    {
      key: "supplier",
      names: [
        ["suppliers", "supplier"],
        ["vendors", "vendor"],
        ["makers", "maker"],
      ],
      singular: "supplier",
      plural: "suppliers",
      rows: [15, 35],
      columns: [
        { kind: "label", key: "name", names: ["name", "company", "supplier_name"], pool: "company", nouns: "names" },
        { kind: "country", key: "country", names: ["country", "country_code", "origin"], phrase: "based in {v}" },
      ],
    },
    {
      key: "item",
      names: [
        ["items", "item"],
        ["stock_items", "stock_item"],
        ["parts", "part"],
      ],
      singular: "item",
      plural: "items",
      rows: [30, 80],
      columns: [
        { kind: "label", key: "name", names: ["name", "item_name", "description"], pool: "product", nouns: "names" },
        { kind: "ref", key: "supplier", table: "supplier", names: [], via: "from" },
        {
          kind: "category",
          key: "category",
          names: ["category", "cat", "group_code"],
          noun: "category",
          phrase: "in the {v} category",
          values: cats("tools:TLS,furniture:FUR,garden:GDN,kitchen:KIT,lighting:LGT,toys:TOY"),
        },
        {
          kind: "weight",
          key: "weight",
          names: ["weight", "unit_weight", "mass"],
          noun: "weight",
          min: 0.2,
          max: 40,
          phrase: "weighing {cmp} than {n} kilograms",
          cmp: ["more", "less"],
        },
        money("price", ["price", "unit_price", "cost"], "price", 3, 400, true),
        {
          kind: "bool",
          key: "fragile",
          names: ["fragile", "is_fragile", "fragile_flag"],
          word: "fragile",
          yes: "that are fragile",
          no: "that are not fragile",
          rate: 0.3,
          optional: true,
        },
      ],
    },
    {
      key: "delivery",
      names: [
        ["deliveries", "delivery"],
        ["shipments", "shipment"],
        ["dispatches", "dispatch"],
      ],
      singular: "delivery",
      plural: "deliveries",
      rows: [80, 200],
      columns: [
        { kind: "ref", key: "item", table: "item", names: [], via: "of" },
        { kind: "date", key: "sent", names: ["sent_on", "ship_date", "dispatched"], from: "2019-01-01", to: "2023-12-31", phrase: "sent in {v}" },
        {
          kind: "category",
          key: "status",
          names: ["status", "state", "status_code"],
          noun: "status",
          phrase: "with status {v}",
          values: cats("delivered:DLV,pending:PND,delayed:DLY,returned:RTN"),
        },
        {
          kind: "int",
          key: "quantity",
          names: ["quantity", "qty", "units"],
          noun: "quantity",
          min: 1,
          max: 60,
          phrase: "of {cmp} than {n} units",
          cmp: ["more", "fewer"],
        },
      ],
    },
  ],
};

const hotel: DomainTemplate = {
  name: "hotel",
  tables: [
    {
      key: "guest",
      names: [
        ["guests", "guest"],
        ["visitors", "visitor"],
        ["clients", "client"],
      ],
      singular: "guest",
      plural: "guests",
      rows: [30, 70],
      columns: [
        { kind: "label", key: "name", names: ["name", "guest_name", "full_name"], pool: "person", nouns: "names" },
        { kind: "country", key: "country", names: ["country", "home_country", "nationality"], phrase: "from {v}" },
        { kind: "bool", key: "vip", names: ["vip", "is_vip", "vip_flag"], word: "VIP", yes: "who are VIPs", no: "who are not VIPs", rate: 0.2, optional: true },
      ],
    },
    {
      key: "room",
      names: [
        ["rooms", "room"],
        ["units", "unit"],
        ["suites", "suite_record"],
      ],
      singular: "room",
      plural: "rooms",
      rows: [20, 50],
      columns: [
        { kind: "label", key: "number", names: ["room_no", "number", "label"], pool: "room", nouns: "room numbers" },
        {
          kind: "category",
          key: "type",
          names: ["room_type", "type_code", "kind"],
          noun: "room type",
          phrase: "of type {v}",
          values: cats("single:SGL,double:DBL,twin:TWN,suite:STE,family:FAM"),
        },
        money("rate", ["rate", "nightly_rate", "price"], "nightly rate", 40, 600),
        {
          kind: "bool",
          key: "balcony",
          names: ["balcony", "has_balcony", "balcony_flag"],
          word: "balcony",
          yes: "that have a balcony",
          no: "without a balcony",
          rate: 0.4,
        },
      ],
    },
    {
      key: "stay",
      names: [
        ["stays", "stay"],
        ["visits", "visit"],
        ["bookings", "booking"],
      ],
      singular: "stay",
      plural: "stays",
      rows: [80, 200],
      columns: [
        { kind: "ref", key: "guest", table: "guest", names: [], via: "by" },
        { kind: "ref", key: "room", table: "room", names: [], via: "in" },
        { kind: "date", key: "check_in", names: ["check_in", "arrival", "start_date"], from: "2019-01-01", to: "2023-12-31", phrase: "that started in {v}" },
        {
          kind: "int",
          key: "nights",
          names: ["nights", "num_nights", "night_count"],
          noun: "number of nights",
          min: 1,
          max: 14,
          phrase: "of {cmp} than {n} nights",
          cmp: ["more", "fewer"],
        },
        {
          kind: "category",
          key: "board",
          names: ["board", "meal_plan", "board_code"],
          noun: "meal plan",
          phrase: "with {v}",
          values: cats("room only:RO,bed and breakfast:BB,half board:HB,full board:FB"),
        },
      ],
    },
  ],
};

const gym: DomainTemplate = {
  name: "gym",
  tables: [
    {
      key: "member",
      names: [
        ["members", "member"],
        ["athletes", "athlete"],
        ["customers", "customer"],
      ],
      singular: "member",
      plural: "members",
      rows: [30, 70],
      columns: [
        { kind: "label", key: "name", names: ["name", "member_name", "full_name"], pool: "person", nouns: "names" },
        { kind: "city", key: "city", names: ["city", "home_city", "location"], phrase: "living in {v}" },
        { kind: "date", key: "joined", names: ["joined", "signup_date", "start_date"], from: "2018-01-01", to: "2023-12-31", phrase: "who joined in {v}" },
      ],
    },
    {
      key: "session",
      names: [
        ["sessions", "session"],
        ["workouts", "workout"],
        ["lessons", "lesson"],
      ],
      singular: "class",
      plural: "classes",
      rows: [15, 40],
      columns: [
        { kind: "label", key: "title", names: ["title", "session_name", "name"], pool: "session", nouns: "titles" },
        {
          kind: "category",
          key: "activity",
          names: ["activity", "sport", "activity_code"],
          noun: "activity",
          phrase: "for {v}",
          values: cats("yoga:YOG,spinning:SPN,boxing:BOX,pilates:PIL,swimming:SWM,dance:DNC"),
        },
        {
          kind: "category",
          key: "level",
          names: ["level", "difficulty", "level_code"],
          noun: "level",
          phrase: "at {v} level",
          values: cats("beginner:BEG,intermediate:INT,advanced:ADV"),
        },
        {
          kind: "duration",
          key: "duration",
          names: ["duration", "span", "run_time"],
          noun: "duration",
          min: 20,
          max: 120,
          phrase: "lasting {cmp} than {n} minutes",
          cmp: ["more", "less"],
        },
      ],
    },
    {
      key: "visit",
      names: [
        ["visits", "visit"],
        ["check_ins", "check_in"],
        ["attendance", "attendance_record"],
      ],
      singular: "visit",
      plural: "visits",
      rows: [80, 200],
      columns: [
        { kind: "ref", key: "member", table: "member", names: [], via: "by" },
        { kind: "ref", key: "session", table: "session", names: [], via: "to" },
        { kind: "date", key: "visit_date", names: ["visit_date", "visited_on", "day"], from: "2019-01-01", to: "2023-12-31", phrase: "recorded in {v}" },
        { kind: "bool", key: "paid", names: ["paid", "is_paid", "paid_flag"], word: "paid", yes: "that were paid", no: "that were not paid", rate: 0.8 },
      ],
    },
  ],
};

const zoo: DomainTemplate = {
  name: "zoo",
  tables: [
    {
      key: "keeper",
      names: [
        ["keepers", "keeper"],
        ["staff", "staff_member"],
        ["carers", "carer"],
      ],
      singular: "keeper",
      plural: "keepers",
      rows: [10, 25],
      columns: [
        { kind: "label", key: "name", names: ["name", "keeper_name", "full_name"], pool: "person", nouns: "names" },
        { kind: "date", key: "hired", names: ["hired", "hire_date", "started"], from: "2010-01-01", to: "2023-12-31", phrase: "hired in {v}" },
        { kind: "city", key: "city", names: ["city", "home_city", "town"], phrase: "living in {v}", optional: true },
      ],
    },
    {
      key: "animal",
      names: [
        ["animals", "animal"],
        ["residents", "resident"],
        ["specimens", "specimen"],
      ],
      singular: "animal",
      plural: "animals",
      rows: [30, 80],
      columns: [
        { kind: "label", key: "name", names: ["name", "animal_name", "nickname"], pool: "animal", nouns: "names" },
        { kind: "ref", key: "keeper", table: "keeper", names: [], via: "cared for by" },
        {
          kind: "category",
          key: "class",
          names: ["class", "animal_class", "class_code"],
          noun: "class",
          phrase: "in the {v} class",
          values: cats("mammal:MAM,bird:BRD,reptile:REP,fish:FSH,amphibian:AMP"),
        },
        {
          kind: "category",
          key: "diet",
          names: ["diet", "diet_type", "diet_code"],
          noun: "diet",
          phrase: "with a {v} diet",
          values: cats("herbivore:HRB,carnivore:CRN,omnivore:OMN"),
        },
        {
          kind: "weight",
          key: "weight",
          names: ["weight", "body_weight", "mass"],
          noun: "weight",
          min: 0.5,
          max: 900,
          phrase: "weighing {cmp} than {n} kilograms",
          cmp: ["more", "less"],
        },
        {
          kind: "bool",
          key: "endangered",
          names: ["endangered", "is_endangered", "at_risk"],
          word: "endangered",
          yes: "that are endangered",
          no: "that are not endangered",
          rate: 0.3,
        },
      ],
    },
    {
      key: "feeding",
      names: [
        ["feedings", "feeding"],
        ["meals", "meal"],
        ["feed_log", "feed_entry"],
      ],
      singular: "feeding",
      plural: "feedings",
      rows: [80, 200],
      columns: [
        { kind: "ref", key: "animal", table: "animal", names: [], via: "of" },
        { kind: "date", key: "fed_on", names: ["fed_on", "feed_date", "logged"], from: "2021-01-01", to: "2023-12-31", phrase: "recorded in {v}" },
        {
          kind: "weight",
          key: "food",
          names: ["food", "amount", "portion"],
          noun: "food amount",
          min: 0.1,
          max: 25,
          phrase: "of {cmp} than {n} kilograms",
          cmp: ["more", "less"],
        },
      ],
    },
  ],
};

const cinema: DomainTemplate = {
  name: "cinema",
  tables: [
    {
      key: "movie",
      names: [
        ["movies", "movie"],
        ["films", "film"],
        ["features", "feature"],
      ],
      singular: "movie",
      plural: "movies",
      rows: [25, 60],
      columns: [
        { kind: "label", key: "title", names: ["title", "movie_title", "name"], pool: "title", nouns: "titles" },
        {
          kind: "category",
          key: "genre",
          names: ["genre", "genre_code", "category"],
          noun: "genre",
          phrase: "in the {v} genre",
          values: cats("comedy:COM,drama:DRA,horror:HOR,action:ACT,animation:ANI,documentary:DOC"),
        },
        {
          kind: "duration",
          key: "runtime",
          names: ["runtime", "duration", "play_time"],
          noun: "running time",
          min: 70,
          max: 190,
          phrase: "lasting {cmp} than {n} minutes",
          cmp: ["more", "less"],
        },
        { kind: "country", key: "country", names: ["country", "origin", "country_code"], phrase: "made in {v}" },
      ],
    },
    {
      key: "screening",
      names: [
        ["screenings", "screening"],
        ["shows", "show"],
        ["showings", "showing"],
      ],
      singular: "screening",
      plural: "screenings",
      rows: [80, 200],
      columns: [
        { kind: "ref", key: "movie", table: "movie", names: [], via: "of" },
        { kind: "date", key: "show_date", names: ["show_date", "screened_on", "played"], from: "2019-01-01", to: "2023-12-31", phrase: "held in {v}" },
        { kind: "city", key: "city", names: ["city", "venue_city", "location"], phrase: "in {v}" },
        money("ticket", ["ticket_price", "price", "fare"], "ticket price", 4, 25),
        {
          kind: "bool",
          key: "sold_out",
          names: ["sold_out", "is_full", "full_flag"],
          word: "sold out",
          yes: "that were sold out",
          no: "that were not sold out",
          rate: 0.25,
        },
      ],
    },
  ],
};

const bank: DomainTemplate = {
  name: "bank",
  tables: [
    {
      key: "customer",
      names: [
        ["customers", "customer"],
        ["clients", "client"],
        ["holders", "holder"],
      ],
      singular: "customer",
      plural: "customers",
      rows: [25, 60],
      columns: [
        { kind: "label", key: "name", names: ["name", "client_name", "full_name"], pool: "person", nouns: "names" },
        { kind: "country", key: "country", names: ["country", "residence", "country_code"], phrase: "from {v}" },
        { kind: "city", key: "city", names: ["city", "branch_city", "home_city"], phrase: "living in {v}", optional: true },
      ],
    },
    {
      key: "account",
      names: [
        ["accounts", "account"],
        ["wallets", "wallet"],
      ],
      singular: "account",
      plural: "accounts",
      rows: [40, 100],
      columns: [
        { kind: "ref", key: "customer", table: "customer", names: [], via: "owned by" },
        {
          kind: "category",
          key: "type",
          names: ["account_type", "type_code", "product"],
          noun: "account type",
          phrase: "of type {v}",
          values: cats("savings:SAV,checking:CHK,business:BUS,student:STU"),
        },
        { kind: "date", key: "opened", names: ["opened", "open_date", "opened_on"], from: "2015-01-01", to: "2023-12-31", phrase: "opened in {v}" },
        {
          kind: "bool",
          key: "active",
          names: ["active", "is_active", "status_flag"],
          word: "active",
          yes: "that are active",
          no: "that are closed",
          rate: 0.8,
        },
        money("balance", ["balance", "current_balance", "amount"], "balance", 10, 20000),
      ],
    },
    {
      key: "movement",
      names: [
        ["transactions", "txn"],
        ["movements", "movement"],
        ["transfers", "transfer"],
      ],
      singular: "transaction",
      plural: "transactions",
      rows: [80, 200],
      columns: [
        { kind: "ref", key: "account", table: "account", names: [], via: "on" },
        { kind: "date", key: "posted", names: ["posted", "tx_date", "booked_on"], from: "2020-01-01", to: "2023-12-31", phrase: "made in {v}" },
        {
          kind: "category",
          key: "kind",
          names: ["kind", "tx_type", "type_code"],
          noun: "transaction type",
          phrase: "of type {v}",
          values: cats("deposit:DEP,withdrawal:WDR,transfer:TRF,fee:FEE"),
        },
        money("amount", ["amount", "value", "sum_amount"], "amount", 1, 3000),
      ],
    },
  ],
};

const garage: DomainTemplate = {
  name: "garage",
  tables: [
    {
      key: "owner",
      names: [
        ["owners", "owner"],
        ["drivers", "driver"],
        ["customers", "customer"],
      ],
      singular: "owner",
      plural: "owners",
      rows: [20, 50],
      columns: [
        { kind: "label", key: "name", names: ["name", "owner_name", "full_name"], pool: "person", nouns: "names" },
        { kind: "city", key: "city", names: ["city", "home_city", "town"], phrase: "living in {v}" },
      ],
    },
    {
      key: "car",
      names: [
        ["cars", "car"],
        ["vehicles", "vehicle"],
        ["autos", "auto"],
      ],
      singular: "car",
      plural: "cars",
      rows: [30, 70],
      columns: [
        { kind: "label", key: "plate", names: ["plate", "reg_no", "licence"], pool: "plate", nouns: "plates" },
        { kind: "ref", key: "owner", table: "owner", names: [], via: "owned by" },
        {
          kind: "category",
          key: "make",
          names: ["make", "brand", "make_code"],
          noun: "make",
          phrase: "made by {v}",
          values: cats("Toyota:TOY,Ford:FRD,Honda:HON,Volvo:VLV,Fiat:FIA,Tesla:TSL"),
        },
        {
          kind: "category",
          key: "fuel",
          names: ["fuel", "fuel_type", "engine"],
          noun: "fuel type",
          phrase: "running on {v}",
          values: cats("petrol:PET,diesel:DSL,electric:ELC,hybrid:HYB"),
        },
        {
          kind: "date",
          key: "registered",
          names: ["registered", "reg_date", "first_reg"],
          from: "2010-01-01",
          to: "2023-12-31",
          phrase: "registered in {v}",
          optional: true,
        },
      ],
    },
    {
      key: "repair",
      names: [
        ["repairs", "repair"],
        ["jobs", "job"],
        ["services", "service"],
      ],
      singular: "repair",
      plural: "repairs",
      rows: [80, 200],
      columns: [
        { kind: "ref", key: "car", table: "car", names: [], via: "on" },
        { kind: "date", key: "done", names: ["done_on", "repair_date", "finished"], from: "2019-01-01", to: "2023-12-31", phrase: "done in {v}" },
        {
          kind: "category",
          key: "work",
          names: ["work", "job_type", "work_code"],
          noun: "type of work",
          phrase: "of type {v}",
          values: cats("service:SRV,brakes:BRK,tyres:TYR,engine:ENG,bodywork:BDY"),
        },
        money("cost", ["cost", "charge", "total"], "cost", 30, 2500),
        {
          kind: "duration",
          key: "labour",
          names: ["labour", "labour_time", "work_time"],
          noun: "labour time",
          min: 15,
          max: 600,
          phrase: "taking {cmp} than {n} minutes",
          cmp: ["more", "less"],
          optional: true,
        },
      ],
    },
  ],
};

const museum: DomainTemplate = {
  name: "museum",
  tables: [
    {
      key: "artist",
      names: [
        ["artists", "artist"],
        ["creators", "creator"],
        ["makers", "maker"],
      ],
      singular: "artist",
      plural: "artists",
      rows: [15, 40],
      columns: [
        { kind: "label", key: "name", names: ["name", "artist_name", "full_name"], pool: "person", nouns: "names" },
        { kind: "country", key: "country", names: ["country", "nationality", "country_code"], phrase: "from {v}" },
        { kind: "date", key: "born", names: ["born", "birth_date", "dob"], from: "1900-01-01", to: "1995-12-31", phrase: "born in {v}", optional: true },
      ],
    },
    {
      key: "artwork",
      names: [
        ["artworks", "artwork"],
        ["pieces", "piece"],
        ["works", "work"],
      ],
      singular: "artwork",
      plural: "artworks",
      rows: [40, 120],
      columns: [
        { kind: "label", key: "title", names: ["title", "work_title", "name"], pool: "title", nouns: "titles" },
        { kind: "ref", key: "artist", table: "artist", names: [], via: "by" },
        {
          kind: "category",
          key: "medium",
          names: ["medium", "medium_code", "technique"],
          noun: "medium",
          phrase: "made as {v}",
          values: cats("oil painting:OIL,watercolour:WTC,sculpture:SCU,photograph:PHO,drawing:DRW"),
        },
        {
          kind: "weight",
          key: "weight",
          names: ["weight", "mass", "gross_weight"],
          noun: "weight",
          min: 0.3,
          max: 300,
          phrase: "weighing {cmp} than {n} kilograms",
          cmp: ["more", "less"],
        },
        {
          kind: "bool",
          key: "on_display",
          names: ["on_display", "displayed", "shown_flag"],
          word: "on display",
          yes: "that are on display",
          no: "that are in storage",
          rate: 0.45,
        },
        {
          kind: "date",
          key: "acquired",
          names: ["acquired", "acquired_on", "accession_date"],
          from: "1990-01-01",
          to: "2023-12-31",
          phrase: "acquired in {v}",
        },
        money("value", ["value", "insured_value", "valuation"], "insured value", 500, 90000, true),
      ],
    },
  ],
};

const restaurant: DomainTemplate = {
  name: "restaurant",
  tables: [
    {
      key: "dish",
      names: [
        ["dishes", "dish"],
        ["menu_items", "menu_item"],
        ["plates", "plate"],
      ],
      singular: "dish",
      plural: "dishes",
      rows: [20, 50],
      columns: [
        { kind: "label", key: "name", names: ["name", "dish_name", "title"], pool: "dish", nouns: "names" },
        {
          kind: "category",
          key: "course",
          names: ["course", "course_code", "section"],
          noun: "course",
          phrase: "served as {v}",
          values: cats("starter:STR,main:MAI,dessert:DES,drink:DRK,side:SID"),
        },
        money("price", ["price", "menu_price", "cost"], "price", 3, 45),
        {
          kind: "bool",
          key: "vegetarian",
          names: ["vegetarian", "is_veggie", "veg_flag"],
          word: "vegetarian",
          yes: "that are vegetarian",
          no: "that are not vegetarian",
          rate: 0.4,
        },
        {
          kind: "duration",
          key: "prep",
          names: ["prep_time", "prep", "cook_time"],
          noun: "preparation time",
          min: 2,
          max: 90,
          phrase: "taking {cmp} than {n} minutes to prepare",
          cmp: ["more", "less"],
          optional: true,
        },
      ],
    },
    {
      key: "sale",
      names: [
        ["sales", "sale"],
        ["tickets", "ticket"],
        ["dish_orders", "dish_order"],
      ],
      singular: "sale",
      plural: "sales",
      rows: [80, 200],
      columns: [
        { kind: "ref", key: "dish", table: "dish", names: [], via: "of" },
        { kind: "date", key: "sold_on", names: ["sold_on", "sale_date", "served"], from: "2020-01-01", to: "2023-12-31", phrase: "made in {v}" },
        { kind: "city", key: "branch", names: ["branch", "branch_city", "outlet"], phrase: "at the {v} branch" },
        {
          kind: "int",
          key: "quantity",
          names: ["quantity", "qty", "portions"],
          noun: "quantity",
          min: 1,
          max: 12,
          phrase: "of {cmp} than {n} portions",
          cmp: ["more", "fewer"],
        },
        {
          kind: "category",
          key: "payment",
          names: ["payment", "pay_method", "payment_code"],
          noun: "payment method",
          phrase: "paid by {v}",
          values: cats("cash:CSH,card:CRD,voucher:VCH,phone:PHN"),
        },
      ],
    },
  ],
};

/** Every domain template, in database-assignment order. */
export const DOMAINS: readonly DomainTemplate[] = [library, airline, school, warehouse, hotel, gym, zoo, cinema, bank, garage, museum, restaurant];

/** Domains whose databases form the dev split by default (never seen in train). */
export const DEFAULT_DEV_DOMAINS: readonly string[] = ["museum", "restaurant"];

const retailLike: DomainTemplate = {
  name: "retail_like",
  tables: [
    {
      key: "customer",
      names: [
        ["customers", "customer"],
        ["customers", "customer"],
        ["clients", "client"],
        ["shoppers", "shopper"],
      ],
      singular: "customer",
      plural: "customers",
      rows: [40, 90],
      columns: [
        { kind: "label", key: "name", names: ["name", "name", "full_name", "customer_name"], pool: "person", nouns: "names" },
        { kind: "country", key: "country", names: ["country", "country", "country_code"], phrase: "from {v}" },
        { kind: "city", key: "city", names: ["city", "city", "town"], phrase: "living in {v}", optional: true },
        {
          kind: "category",
          key: "tier",
          names: ["tier", "tier", "loyalty_tier", "level"],
          noun: "tier",
          phrase: "in the {v} tier",
          values: cats("bronze:BRZ,silver:SLV,gold:GLD,platinum:PLT"),
        },
        {
          kind: "date",
          key: "signup",
          names: ["signup_date", "signup_date", "joined", "created_at"],
          from: "2018-01-01",
          to: "2023-12-31",
          phrase: "who signed up in {v}",
          optional: true,
        },
      ],
    },
    {
      key: "product",
      names: [
        ["products", "product"],
        ["products", "product"],
        ["items", "item"],
        ["articles", "article"],
      ],
      singular: "product",
      plural: "products",
      rows: [30, 70],
      columns: [
        { kind: "label", key: "name", names: ["name", "name", "product_name", "title"], pool: "product", nouns: "names" },
        {
          kind: "category",
          key: "category",
          names: ["category", "category", "category_code", "department"],
          noun: "category",
          phrase: "in the {v} category",
          values: cats("garden:GDN,kitchen:KIT,toys:TOY,books:BKS,sports:SPT,electronics:ELC"),
        },
        money("list_price", ["list_price", "price", "retail_price"], "list price", 3, 400),
        {
          kind: "bool",
          key: "discontinued",
          names: ["discontinued", "discontinued", "is_discontinued", "retired"],
          word: "discontinued",
          yes: "that are discontinued",
          no: "that are still on sale",
          rate: 0.2,
        },
      ],
    },
    {
      key: "order",
      names: [
        ["orders", "order"],
        ["orders", "order"],
        ["purchases", "purchase"],
        ["sales", "sale"],
      ],
      singular: "order",
      plural: "orders",
      rows: [90, 220],
      columns: [
        { kind: "ref", key: "customer", table: "customer", names: [], via: "by" },
        {
          kind: "date",
          key: "order_date",
          names: ["order_date", "order_date", "placed_on", "ordered_at"],
          from: "2020-01-01",
          to: "2023-12-31",
          phrase: "placed in {v}",
        },
        {
          kind: "category",
          key: "status",
          names: ["status", "status", "status_code", "state"],
          noun: "status",
          phrase: "that were {v}",
          values: cats("shipped:SHP,pending:PND,cancelled:CNC,returned:RTN"),
        },
        { kind: "country", key: "ship_country", names: ["ship_country", "ship_country", "destination_country", "ship_to"], phrase: "shipped to {v}" },
        money("shipping_fee", ["shipping_fee", "shipping", "delivery_fee"], "shipping fee", 2, 40),
      ],
    },
    {
      key: "order_item",
      names: [
        ["order_items", "order_item"],
        ["order_items", "order_item"],
        ["order_lines", "order_line"],
        ["line_items", "line_item"],
      ],
      singular: "order item",
      plural: "order items",
      rows: [150, 400],
      columns: [
        { kind: "ref", key: "order", table: "order", names: [], via: "in" },
        { kind: "ref", key: "product", table: "product", names: [], via: "of" },
        {
          kind: "int",
          key: "quantity",
          names: ["quantity", "quantity", "qty", "units"],
          noun: "quantity",
          min: 1,
          max: 12,
          phrase: "of {cmp} than {n} units",
          cmp: ["more", "fewer"],
        },
        money("unit_price", ["unit_price", "price_paid", "price"], "unit price", 3, 400),
      ],
    },
  ],
};

const clinicLike: DomainTemplate = {
  name: "clinic_like",
  tables: [
    {
      key: "patient",
      names: [
        ["patients", "patient"],
        ["patients", "patient"],
        ["clients", "client"],
      ],
      singular: "patient",
      plural: "patients",
      rows: [40, 90],
      columns: [
        { kind: "label", key: "name", names: ["name", "name", "full_name", "patient_name"], pool: "person", nouns: "names" },
        { kind: "category", key: "sex", names: ["sex", "sex", "gender"], noun: "sex", phrase: "who are {v}", values: cats("female:F,male:M") },
        {
          kind: "date",
          key: "birth_date",
          names: ["birth_date", "birth_date", "date_of_birth", "dob"],
          from: "1935-01-01",
          to: "2020-12-31",
          phrase: "born in {v}",
        },
        { kind: "city", key: "city", names: ["city", "city", "home_city", "town"], phrase: "living in {v}" },
        {
          kind: "category",
          key: "blood_type",
          names: ["blood_type", "blood_type", "blood_group"],
          noun: "blood type",
          phrase: "with blood type {v}",
          values: cats("O negative:O-,O positive:O+,A negative:A-,A positive:A+,B positive:B+,AB positive:AB+"),
        },
      ],
    },
    {
      key: "doctor",
      names: [
        ["doctors", "doctor"],
        ["doctors", "doctor"],
        ["physicians", "physician"],
        ["clinicians", "clinician"],
      ],
      singular: "doctor",
      plural: "doctors",
      rows: [8, 20],
      columns: [
        { kind: "label", key: "name", names: ["name", "name", "full_name", "doctor_name"], pool: "person", nouns: "names" },
        {
          kind: "category",
          key: "specialty",
          names: ["specialty", "specialty", "speciality", "department"],
          noun: "specialty",
          phrase: "in {v}",
          values: cats("cardiology:CAR,dermatology:DER,pediatrics:PED,neurology:NEU,oncology:ONC,general practice:GEN"),
        },
      ],
    },
    {
      key: "visit",
      names: [
        ["visits", "visit"],
        ["visits", "visit"],
        ["appointments", "appointment"],
        ["consultations", "consultation"],
      ],
      singular: "visit",
      plural: "visits",
      rows: [120, 300],
      columns: [
        { kind: "ref", key: "patient", table: "patient", names: [], via: "by" },
        { kind: "ref", key: "doctor", table: "doctor", names: [], via: "to" },
        {
          kind: "date",
          key: "visit_date",
          names: ["visit_date", "visit_date", "seen_on", "appointment_date"],
          from: "2020-01-01",
          to: "2023-12-31",
          phrase: "that took place in {v}",
        },
        {
          kind: "category",
          key: "visit_type",
          names: ["visit_type", "visit_type", "type", "channel"],
          noun: "visit type",
          phrase: "of type {v}",
          values: cats("telehealth:TEL,emergency:ER,routine:RTN,follow-up:FUP"),
        },
        {
          kind: "duration",
          key: "duration",
          names: ["duration", "duration", "length", "duration_s"],
          noun: "duration",
          min: 5,
          max: 90,
          phrase: "lasting {cmp} than {n} minutes",
          cmp: ["more", "less"],
        },
      ],
    },
  ],
};

const musicLike: DomainTemplate = {
  name: "music_like",
  tables: [
    {
      key: "artist",
      names: [
        ["artists", "artist"],
        ["artists", "artist"],
        ["performers", "performer"],
        ["acts", "act"],
      ],
      singular: "artist",
      plural: "artists",
      rows: [15, 40],
      columns: [
        { kind: "label", key: "name", names: ["name", "name", "artist_name", "stage_name"], pool: "person", nouns: "names" },
        { kind: "country", key: "country", names: ["country", "country", "origin", "country_code"], phrase: "from {v}" },
        {
          kind: "int",
          key: "formed_year",
          names: ["formed_year", "formed_year", "formed", "debut_year"],
          noun: "formation year",
          min: 1960,
          max: 2020,
          phrase: "formed {cmp} {n}",
          cmp: ["after", "before"],
        },
      ],
    },
    {
      key: "album",
      names: [
        ["albums", "album"],
        ["albums", "album"],
        ["releases", "release"],
        ["records", "record"],
      ],
      singular: "album",
      plural: "albums",
      rows: [30, 80],
      columns: [
        { kind: "ref", key: "artist", table: "artist", names: [], via: "by" },
        { kind: "label", key: "title", names: ["title", "title", "album_title", "name"], pool: "title", nouns: "titles" },
        {
          kind: "date",
          key: "release_date",
          names: ["release_date", "release_date", "released", "released_on"],
          from: "1970-01-01",
          to: "2023-12-31",
          phrase: "released in {v}",
        },
        {
          kind: "category",
          key: "album_type",
          names: ["album_type", "album_type", "format", "release_type"],
          noun: "release type",
          phrase: "released as {v}",
          values: cats("album:ALB,single:SGL,EP:EP,compilation:CMP"),
        },
      ],
    },
    {
      key: "track",
      names: [
        ["tracks", "track"],
        ["tracks", "track"],
        ["songs", "song"],
      ],
      singular: "track",
      plural: "tracks",
      rows: [120, 300],
      columns: [
        { kind: "ref", key: "album", table: "album", names: [], via: "on" },
        { kind: "label", key: "title", names: ["title", "title", "track_title", "name"], pool: "title", nouns: "titles" },
        {
          kind: "category",
          key: "genre",
          names: ["genre", "genre", "genre_code", "style"],
          noun: "genre",
          phrase: "in the {v} genre",
          values: cats("rock:RCK,pop:POP,hip-hop:HIP,jazz:JZZ,electronic:ELE,R&B:RNB,drum and bass:DNB"),
        },
        {
          kind: "duration",
          key: "duration",
          names: ["duration", "duration", "length", "duration_s"],
          noun: "length",
          min: 2,
          max: 9,
          phrase: "lasting {cmp} than {n} minutes",
          cmp: ["more", "less"],
        },
        {
          kind: "bool",
          key: "explicit",
          names: ["explicit", "explicit", "is_explicit", "parental_advisory"],
          word: "explicit",
          yes: "that are explicit",
          no: "that are not explicit",
          rate: 0.3,
        },
        {
          kind: "int",
          key: "play_count",
          names: ["play_count", "play_count", "plays", "streams"],
          noun: "play count",
          min: 100,
          max: 90000,
          phrase: "played {cmp} than {n} times",
          cmp: ["more", "fewer"],
        },
      ],
    },
  ],
};

/**
 * Look-alikes of the example databases (retail, clinic, music): their tables and most of their
 * columns under varied names (the example's own name listed twice, so drawn half the time) and encodings. Not in {@link DOMAINS}; `generateSynth` builds them
 * only when asked (`lookalikes`), always into train, so the examples' 45 questions stay unseen.
 */
export const LOOKALIKE_DOMAINS: readonly DomainTemplate[] = [retailLike, clinicLike, musicLike];
