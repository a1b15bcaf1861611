/** Reading the docs' markdown tables, for tests that hold the code and the docs to each other. */

/** The rows of the first markdown table after `heading` in `doc` (header and rule left out), cells trimmed; throws when the heading is missing. */
export function markdownTableAfter(doc: string, heading: string): string[][] {
  const at = doc.indexOf(heading);
  if (at < 0) throw new Error(`no "${heading}" in the document`);
  const lines = doc.slice(at).split("\n");
  const start = lines.findIndex((l) => l.startsWith("|"));
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(
      line
        .slice(1, -1)
        .split("|")
        .map((c) => c.trim()),
    );
  }
  return rows;
}
