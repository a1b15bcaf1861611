/** `music`: a streaming catalogue. Quirks: lengths in milliseconds, genre names with fixed spelling ('Hip-Hop', 'R&B', 'Drum & Bass'), lower-case release types, release dates that are sometimes only a year, featured artists credited in track titles. */
import { ADJECTIVES, FIRST_NAMES, LAST_NAMES, NOUNS } from "./names.js";
import type { Rng } from "./prng.js";
import type { Cell, ExampleDatabase, TableRows } from "./types.js";

const DDL = `
CREATE TABLE artists (
  artist_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  country TEXT,
  formed_year INTEGER
);
CREATE TABLE albums (
  album_id INTEGER PRIMARY KEY,
  artist_id INTEGER NOT NULL,
  title TEXT NOT NULL,
  album_type TEXT NOT NULL,
  release_date TEXT NOT NULL,
  label TEXT,
  FOREIGN KEY (artist_id) REFERENCES artists (artist_id)
);
CREATE TABLE tracks (
  track_id INTEGER PRIMARY KEY,
  album_id INTEGER NOT NULL,
  title TEXT NOT NULL,
  track_number INTEGER NOT NULL,
  duration_ms INTEGER NOT NULL,
  genre TEXT NOT NULL,
  explicit INTEGER NOT NULL DEFAULT 0,
  play_count INTEGER NOT NULL DEFAULT 0,
  FOREIGN KEY (album_id) REFERENCES albums (album_id)
);
CREATE INDEX idx_albums_artist ON albums (artist_id);
CREATE INDEX idx_tracks_album ON tracks (album_id);
`;

const COUNTRIES = { US: 30, GB: 20, KR: 10, SE: 7, CA: 7, JP: 6, NG: 6, FR: 5, AU: 5, BR: 4 };

/** Genre name, weight as a primary genre, track length range in seconds, share of explicit tracks. */
const GENRES: Record<string, { weight: number; seconds: [number, number]; explicit: number }> = {
  Pop: { weight: 20, seconds: [150, 240], explicit: 0.15 },
  "Hip-Hop": { weight: 18, seconds: [140, 290], explicit: 0.6 },
  Rock: { weight: 14, seconds: [180, 330], explicit: 0.08 },
  "R&B": { weight: 12, seconds: [170, 270], explicit: 0.3 },
  Electronic: { weight: 12, seconds: [180, 420], explicit: 0.05 },
  "Indie Folk": { weight: 8, seconds: [180, 300], explicit: 0.03 },
  Jazz: { weight: 6, seconds: [240, 600], explicit: 0 },
  "Lo-Fi": { weight: 5, seconds: [90, 180], explicit: 0 },
  "Drum & Bass": { weight: 5, seconds: [240, 420], explicit: 0.05 },
  "K-Pop": { weight: 0, seconds: [170, 230], explicit: 0.05 },
  Afrobeats: { weight: 0, seconds: [160, 240], explicit: 0.3 },
};
const FEATURING_GENRES = new Set(["Pop", "Hip-Hop", "R&B", "K-Pop", "Afrobeats"]);

const STAGE_FIRST = ["Nova", "Jaylen", "Kai", "Aria", "Remy", "Selena", "Dante", "Mila", "Theo", "Zion", "Luna", "Marcus", "Sable", "Ezra"];
const STAGE_LAST = ["Kingsley", "Vale", "Monroe", "Rivers", "Blake", "Castillo", "Sterling", "Hart", "Okoro", "Reyes", "Lindqvist", "Moreau"];
const KPOP_GROUPS = [
  "NEON CITY",
  "STARLIGHT",
  "BLUE MOMENT",
  "VIVID",
  "ECLIPSE",
  "AURORA",
  "LUMINA",
  "PRISM",
  "TWILIGHT",
  "NOVA9",
  "DAYBREAK",
  "SEOULMATE",
  "ORBIT",
  "HALO",
  "VELVET ROSE",
];
const KOREAN_GIVEN = ["Min-jun", "Ji-woo", "Seo-yeon", "Ha-eun", "Do-yun", "Yuna", "Tae-yang", "Soo-ah"];
const KOREAN_FAMILY = ["Kim", "Lee", "Park", "Choi", "Jung", "Kang"];
const LABELS = { "Blue Harbour Records": 18, "Nightshift Music": 16, "Polar Sounds": 12, Independent: 20, "Sunset Tapes": 10, Goldleaf: 12, "Atlas Audio": 12 };
const TRACK_COUNTS: Record<string, [number, number]> = { album: [8, 12], ep: [4, 6], single: [1, 2], compilation: [12, 16] };

/** Releases by the anchor artist that questions refer to by name. */
const ANCHOR = { name: "Nova Kingsley", country: "US", formed: 2012, genre: "R&B" };
const ANCHOR_ALBUMS = [
  { title: "Glass Houses", type: "ep", date: "2016-03-11" },
  { title: "Midnight Transit", type: "album", date: "2019-05-17" },
  { title: "Neon Psalms", type: "album", date: "2022-10-07" },
];

function generate(rng: Rng): TableRows[] {
  const primaryWeights = Object.fromEntries(Object.entries(GENRES).map(([g, s]) => [g, s.weight]));
  const artists: Record<string, Cell>[] = [{ artist_id: 1, name: ANCHOR.name, country: ANCHOR.country, formed_year: ANCHOR.formed }];
  const artistGenre = [ANCHOR.genre];
  const popularity = [200_000];
  const names = new Set([ANCHOR.name]);
  for (let id = 2; id <= 150; id++) {
    const country = rng.weighted(COUNTRIES);
    let name = "";
    do {
      if (country === "KR") name = rng.chance(0.7) ? rng.pick(KPOP_GROUPS) : `${rng.pick(KOREAN_FAMILY)} ${rng.pick(KOREAN_GIVEN)}`;
      else if (rng.chance(0.35)) name = `The ${rng.pick(ADJECTIVES)} ${rng.pick(NOUNS)}`;
      else if (rng.chance(0.5)) name = `${rng.pick(STAGE_FIRST)} ${rng.pick(STAGE_LAST)}`;
      else name = `${rng.pick(FIRST_NAMES)} ${rng.pick(LAST_NAMES)}`;
    } while (names.has(name));
    names.add(name);
    const genre = country === "KR" && rng.chance(0.85) ? "K-Pop" : country === "NG" && rng.chance(0.7) ? "Afrobeats" : rng.weighted(primaryWeights);
    artists.push({ artist_id: id, name, country: rng.chance(0.05) ? null : country, formed_year: rng.chance(0.04) ? null : rng.int(1968, 2021) });
    artistGenre.push(genre);
    popularity.push(Math.round(10 ** (2.5 + 3.5 * rng.next())));
  }

  const albums: Record<string, Cell>[] = [];
  const release = (artistIndex: number, title: string, type: string, date: string) => {
    albums.push({
      album_id: albums.length + 1,
      artist_id: artistIndex + 1,
      title,
      album_type: type,
      release_date: date,
      label: rng.chance(0.05) ? null : rng.weighted(LABELS),
    });
  };
  for (const a of ANCHOR_ALBUMS) release(0, a.title, a.type, a.date);
  const owners = [...artists.keys()].slice(1);
  for (let i = owners.length; i < 257; i++) owners.push(rng.int(1, artists.length - 1));
  for (const index of owners) {
    const formed = (artists[index]!.formed_year as number | null) ?? 1995;
    const year = rng.int(Math.max(formed, 1970), 2024);
    const date = rng.chance(year < 2000 ? 0.6 : 0.15) ? String(year) : rng.date(`${year}-01-01`, `${year}-12-31`);
    const type = rng.weighted({ album: 42, single: 33, ep: 18, compilation: 7 });
    release(index, rng.chance(0.3) ? rng.pick(NOUNS) : `${rng.pick(ADJECTIVES)} ${rng.pick(NOUNS)}`, type, date);
  }

  const tracks: Record<string, Cell>[] = [];
  for (const album of albums) {
    const artistIndex = (album.artist_id as number) - 1;
    const type = album.album_type as string;
    const [lo, hi] = TRACK_COUNTS[type]!;
    const count = rng.int(lo, hi);
    for (let n = 1; n <= count; n++) {
      const genre = rng.chance(0.85) ? artistGenre[artistIndex]! : rng.weighted(primaryWeights);
      const spec = GENRES[genre]!;
      let title = type === "single" && n === 1 ? (album.title as string) : rng.chance(0.4) ? rng.pick(NOUNS) : `${rng.pick(ADJECTIVES)} ${rng.pick(NOUNS)}`;
      if (FEATURING_GENRES.has(genre) && rng.chance(artistIndex === 0 ? 0.3 : 0.12)) {
        const guest = artists[rng.int(0, artists.length - 1)]!;
        if (guest !== artists[artistIndex]) title += ` (feat. ${guest.name as string})`;
      }
      tracks.push({
        track_id: tracks.length + 1,
        album_id: album.album_id as number,
        title,
        track_number: n,
        duration_ms: rng.int(spec.seconds[0] * 1000, spec.seconds[1] * 1000),
        genre,
        explicit: rng.chance(spec.explicit) ? 1 : 0,
        play_count: Math.round(popularity[artistIndex]! * (0.1 + 1.9 * rng.next()) * (type === "single" ? 3 : 1)),
      });
    }
  }

  return [
    { table: "artists", rows: artists },
    { table: "albums", rows: albums },
    { table: "tracks", rows: tracks },
  ];
}

/** The `music` example database. */
export const music: ExampleDatabase = {
  dbId: "music",
  ddl: DDL,
  generate,
  questions: [
    {
      question: "How many Hip-Hop tracks are longer than four minutes?",
      evidence: "",
      SQL: "SELECT COUNT(*) FROM tracks WHERE genre = 'Hip-Hop' AND duration_ms > 240000",
      difficulty: "simple",
      naive: "SELECT COUNT(*) FROM tracks WHERE genre = 'Hip Hop' AND duration_ms > 240",
    },
    {
      question: "How many tracks are classified as drum and bass?",
      evidence: "",
      SQL: "SELECT COUNT(*) FROM tracks WHERE genre = 'Drum & Bass'",
      difficulty: "simple",
      naive: "SELECT COUNT(*) FROM tracks WHERE genre = 'Drum and Bass'",
    },
    {
      question: "How many artists come from South Korea?",
      evidence: "",
      SQL: "SELECT COUNT(*) FROM artists WHERE country = 'KR'",
      difficulty: "simple",
      naive: "SELECT COUNT(*) FROM artists WHERE country = 'South Korea'",
    },
    {
      question: "How many artists were formed before 1990?",
      evidence: "",
      SQL: "SELECT COUNT(*) FROM artists WHERE formed_year < 1990",
      difficulty: "simple",
    },
    {
      question: "What is the total running time, in minutes, of Nova Kingsley's album Midnight Transit?",
      evidence: "",
      SQL: "SELECT SUM(t.duration_ms) / 60000.0 FROM tracks AS t INNER JOIN albums AS a ON t.album_id = a.album_id INNER JOIN artists AS ar ON a.artist_id = ar.artist_id WHERE ar.name = 'Nova Kingsley' AND a.title = 'Midnight Transit'",
      difficulty: "moderate",
      naive:
        "SELECT SUM(t.duration_ms) / 60.0 FROM tracks AS t INNER JOIN albums AS a ON t.album_id = a.album_id INNER JOIN artists AS ar ON a.artist_id = ar.artist_id WHERE ar.name = 'Nova Kingsley' AND a.title = 'Midnight Transit'",
    },
    {
      question: "How many releases came out in the 1990s?",
      evidence: "releases refers to rows of albums",
      SQL: "SELECT COUNT(*) FROM albums WHERE substr(release_date, 1, 4) BETWEEN '1990' AND '1999'",
      difficulty: "moderate",
      naive: "SELECT COUNT(*) FROM albums WHERE strftime('%Y', release_date) BETWEEN '1990' AND '1999'",
    },
    {
      question: "What is the average length, in seconds, of tracks released on EPs?",
      evidence: "",
      SQL: "SELECT AVG(t.duration_ms) / 1000.0 FROM tracks AS t INNER JOIN albums AS a ON t.album_id = a.album_id WHERE a.album_type = 'ep'",
      difficulty: "moderate",
      naive: "SELECT AVG(t.duration_ms) / 1000.0 FROM tracks AS t INNER JOIN albums AS a ON t.album_id = a.album_id WHERE a.album_type = 'EP'",
    },
    {
      question: "List the titles of the three most played explicit tracks.",
      evidence: "most played refers to the highest play_count",
      SQL: "SELECT title FROM tracks WHERE explicit = 1 ORDER BY play_count DESC LIMIT 3",
      difficulty: "moderate",
    },
    {
      question: "Which artist has the most R&B tracks?",
      evidence: "",
      SQL: "SELECT ar.name FROM artists AS ar INNER JOIN albums AS a ON ar.artist_id = a.artist_id INNER JOIN tracks AS t ON a.album_id = t.album_id WHERE t.genre = 'R&B' GROUP BY ar.artist_id ORDER BY COUNT(*) DESC LIMIT 1",
      difficulty: "moderate",
      naive:
        "SELECT ar.name FROM artists AS ar INNER JOIN albums AS a ON ar.artist_id = a.artist_id INNER JOIN tracks AS t ON a.album_id = t.album_id WHERE t.genre = 'RnB' GROUP BY ar.artist_id ORDER BY COUNT(*) DESC LIMIT 1",
    },
    {
      question: "What percentage of Electronic tracks are explicit?",
      evidence: "explicit refers to explicit = 1",
      SQL: "SELECT CAST(SUM(explicit) AS REAL) * 100 / COUNT(*) FROM tracks WHERE genre = 'Electronic'",
      difficulty: "moderate",
    },
    {
      question: "Which South Korean artist has the highest total play count?",
      evidence: "total play count refers to SUM(play_count) over the artist's tracks",
      SQL: "SELECT ar.name FROM artists AS ar INNER JOIN albums AS a ON ar.artist_id = a.artist_id INNER JOIN tracks AS t ON a.album_id = t.album_id WHERE ar.country = 'KR' GROUP BY ar.artist_id ORDER BY SUM(t.play_count) DESC LIMIT 1",
      difficulty: "challenging",
      naive:
        "SELECT ar.name FROM artists AS ar INNER JOIN albums AS a ON ar.artist_id = a.artist_id INNER JOIN tracks AS t ON a.album_id = t.album_id WHERE ar.country = 'South Korea' GROUP BY ar.artist_id ORDER BY SUM(t.play_count) DESC LIMIT 1",
    },
    {
      question: "How many of Nova Kingsley's tracks feature another artist?",
      evidence: "",
      SQL: "SELECT COUNT(*) FROM tracks AS t INNER JOIN albums AS a ON t.album_id = a.album_id INNER JOIN artists AS ar ON a.artist_id = ar.artist_id WHERE ar.name = 'Nova Kingsley' AND t.title LIKE '%(feat. %'",
      difficulty: "challenging",
    },
    {
      question: "Which of Nova Kingsley's releases has the longest total running time?",
      evidence: "",
      SQL: "SELECT a.title FROM albums AS a INNER JOIN artists AS ar ON a.artist_id = ar.artist_id INNER JOIN tracks AS t ON a.album_id = t.album_id WHERE ar.name = 'Nova Kingsley' GROUP BY a.album_id ORDER BY SUM(t.duration_ms) DESC LIMIT 1",
      difficulty: "challenging",
    },
    {
      question: "How many releases have no track shorter than three minutes?",
      evidence: "releases refers to rows of albums",
      SQL: "SELECT COUNT(*) FROM albums AS a WHERE NOT EXISTS (SELECT 1 FROM tracks AS t WHERE t.album_id = a.album_id AND t.duration_ms < 180000)",
      difficulty: "challenging",
      naive: "SELECT COUNT(*) FROM albums AS a WHERE NOT EXISTS (SELECT 1 FROM tracks AS t WHERE t.album_id = a.album_id AND t.duration_ms < 180)",
    },
    {
      question: "Among tracks released as singles, which genre has the highest average play count?",
      evidence: "",
      SQL: "SELECT t.genre FROM tracks AS t INNER JOIN albums AS a ON t.album_id = a.album_id WHERE a.album_type = 'single' GROUP BY t.genre ORDER BY AVG(t.play_count) DESC LIMIT 1",
      difficulty: "challenging",
      naive:
        "SELECT t.genre FROM tracks AS t INNER JOIN albums AS a ON t.album_id = a.album_id WHERE a.album_type = 'Single' GROUP BY t.genre ORDER BY AVG(t.play_count) DESC LIMIT 1",
    },
  ],
};
