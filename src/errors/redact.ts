/**
 * What every message, log line and CLI output that may hold a connection string goes through:
 * {@link capMessage} bounds it (UTF-8 bytes, the cut said in the text) and {@link redactSecrets}
 * hides passwords. Both are linear in the length of their input: each scan moves forward only, and
 * every search whose answer a later position could reuse is remembered, so an input built to make a
 * regular expression backtrack (`postgres://a` repeated 32,000 times without an `@`) costs one pass.
 */

/** The longest message, in UTF-8 bytes with the cut marker, that errors carry. */
export const MAX_MESSAGE_BYTES = 8192;

const isSpace = (c: number): boolean => c === 32 || (c >= 9 && c <= 13) || c === 0xa0 || c === 0x2028 || c === 0x2029 || c === 0xfeff;
const isSchemeChar = (c: number): boolean => (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 43 || c === 45 || c === 46;
/** Ends a URL's user name: `:` `/` `@` `?` `#` or white space. */
const endsUser = (c: number): boolean => c === 58 || c === 47 || c === 64 || c === 63 || c === 35 || isSpace(c);
/** Ends the host after a password's `@`: `/` `?` `#` quotes or white space. */
const endsHost = (c: number): boolean => c === 47 || c === 63 || c === 35 || c === 34 || c === 39 || isSpace(c);

/**
 * Hides the password of every URL with a user name and password (`scheme://user:password@host`,
 * any scheme, also the `scheme:/user:password@host` a path normalisation leaves of it): the text
 * between the user name's `:` and the last `@` of the host part is replaced by `***`.
 */
function redactUserinfo(text: string): string {
  const out: string[] = [];
  let copied = 0;
  // the first `@` or white space at or after `atFrom` is at `atFound` (text.length: none): one scan serves every position up to it
  let atFrom = -1;
  let atFound = -1;
  const nextAtOrSpace = (from: number): number => {
    if (from >= atFrom && from <= atFound) return atFound;
    let i = from;
    while (i < text.length && text.charCodeAt(i) !== 64 && !isSpace(text.charCodeAt(i))) i++;
    atFrom = from;
    atFound = i;
    return i;
  };
  let pos = 0;
  for (;;) {
    const marker = text.indexOf(":/", pos);
    if (marker < 0) break;
    pos = marker + 1;
    if (marker === 0 || !isSchemeChar(text.charCodeAt(marker - 1))) continue;
    let i = marker + 1;
    while (text.charCodeAt(i) === 47) i++;
    while (i < text.length && !endsUser(text.charCodeAt(i))) i++;
    pos = i;
    if (text.charCodeAt(i) !== 58) continue;
    const at = nextAtOrSpace(i + 1);
    if (text.charCodeAt(at) !== 64) {
      pos = at;
      continue;
    }
    let last = at;
    let j = at + 1;
    while (j < text.length && !endsHost(text.charCodeAt(j))) {
      if (text.charCodeAt(j) === 64) last = j;
      j++;
    }
    out.push(text.slice(copied, i + 1), "***");
    copied = last;
    pos = last + 1;
  }
  if (copied === 0) return text;
  out.push(text.slice(copied));
  return out.join("");
}

/** `password=`, `password: `, `"password":`, `PGPASSWORD=`, `pwd=` …: a key that names a password, then its separator. */
const PASSWORD_KEY = /(?:password|passwd|pwd)["']?[ \t]*[=:][ \t]*/gi;
/** Ends an unquoted password value: white space, `&`, `;` or a quote. */
const endsValue = (c: number): boolean => isSpace(c) || c === 38 || c === 59 || c === 34 || c === 39;

/** Hides the value of every `password=…` (and kin, quoted or not, URL parameter or libpq keyword). */
function redactPasswordKeys(text: string): string {
  const out: string[] = [];
  let copied = 0;
  const noMore = { 34: false, 39: false } as Record<number, boolean>;
  PASSWORD_KEY.lastIndex = 0;
  for (let m = PASSWORD_KEY.exec(text); m !== null; m = PASSWORD_KEY.exec(text)) {
    const start = m.index + m[0].length;
    const q = text.charCodeAt(start);
    let end: number;
    if ((q === 34 || q === 39) && !noMore[q]) {
      const close = text.indexOf(q === 34 ? '"' : "'", start + 1);
      if (close < 0) noMore[q] = true;
      end = close;
    } else end = -1;
    let valueStart = start;
    if (end < 0) {
      if (q === 34 || q === 39) valueStart = start + 1;
      end = valueStart;
      while (end < text.length && !endsValue(text.charCodeAt(end))) end++;
    } else valueStart = start + 1;
    if (end === valueStart) continue;
    out.push(text.slice(copied, valueStart), "***");
    copied = end;
    PASSWORD_KEY.lastIndex = Math.max(PASSWORD_KEY.lastIndex, end);
  }
  if (copied === 0) return text;
  out.push(text.slice(copied));
  return out.join("");
}

/**
 * `text` with every password it may hold replaced by `***`: the password of any `scheme://user:pw@`
 * URL (also `scheme:/user:pw@`, what a path normalisation leaves of one) and the value of any
 * `password=` (`?password=`, libpq's `password=…`, `PGPASSWORD=`, `"password": "…"`). Over-redacts
 * rather than under: a `:` after a URL's user name hides everything up to the host's last `@`.
 * Linear in the length of `text`.
 */
export function redactSecrets(text: string): string {
  return redactPasswordKeys(redactUserinfo(text));
}

/** The words that may start a secret cut in half: a URL's scheme separator or a password key. */
const SECRET_START = /:\/|passw|pwd/i;

const encoder = new TextEncoder();

/**
 * `text` cut to at most `max` UTF-8 bytes (default {@link MAX_MESSAGE_BYTES}), the marker
 * ` … [cut at N bytes]` included, so capping twice changes nothing. A cut that falls inside a word
 * that may start a secret (a URL with a user name, a `password=`) drops that word, since what
 * would show its end is gone. Cheap for any length: only the first `max` characters are read.
 */
export function capMessage(text: string, max = MAX_MESSAGE_BYTES): string {
  if (text.length * 3 <= max) return text;
  const head = text.slice(0, max);
  const buf = new Uint8Array(max);
  const fits = encoder.encodeInto(head, buf);
  if (fits.read === text.length) return text;
  const marker = ` … [cut at ${max} bytes]`;
  const room = Math.max(0, max - encoder.encode(marker).length);
  let cut = encoder.encodeInto(text.slice(0, room), buf.subarray(0, room)).read;
  const last = text.charCodeAt(cut - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut--;
  if (!isSpace(text.charCodeAt(cut))) {
    let word = cut;
    while (word > 0 && !isSpace(text.charCodeAt(word - 1))) word--;
    if (SECRET_START.test(text.slice(word, cut))) cut = word;
  }
  return text.slice(0, cut).trimEnd() + marker;
}

/** A message fit to show: capped ({@link capMessage}), then redacted ({@link redactSecrets}). */
export function safeMessage(text: string): string {
  return redactSecrets(capMessage(text));
}

/** A scheme (`postgres:/`, `pg://`), a user-and-host `@`, or a libpq keyword (`host=`, `password=`, …). */
const CONNECTION_LIKE = /[a-z][a-z0-9+.-]*:\/|@|\b(?:password|passwd|pwd|host|hostaddr|dbname|user|port|sslmode|service)\s*=/i;

/**
 * Whether `text` (a path or URL a caller gave) looks like a database URL or connection string that
 * did not parse as one: a message must then not show it, since it may hold a password in a form no
 * redaction foresaw (`x = postgres://…`, `pg://…`, `host=… password=…`, `postgres:/…`).
 */
export function looksLikeConnectionString(text: string): boolean {
  return CONNECTION_LIKE.test(capMessage(text, 4096));
}
