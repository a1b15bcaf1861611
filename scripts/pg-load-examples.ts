/**
 * Loads the three example databases (built first when missing) into a PostgreSQL server as the
 * databases reex_retail, reex_clinic and reex_music (each replaced when it exists).
 *
 *   npx tsx scripts/pg-load-examples.ts 'postgres://admin:${PGADMIN_PASSWORD}@localhost:5432/postgres' [--reader ROLE]
 *
 * `${NAME}` parts of the URL are read from the environment; --reader gives ROLE SELECT-only access.
 */
import { buildExamples } from "../src/examples/index.js";
import { expandUrl, loadSqliteIntoPostgres } from "../src/pg/index.js";

const args = process.argv.slice(2);
const url = args.find((a) => !a.startsWith("--"));
const readerAt = args.indexOf("--reader");
const reader = readerAt >= 0 ? args[readerAt + 1] : undefined;
if (!url) {
  console.error("usage: npx tsx scripts/pg-load-examples.ts ADMIN_URL [--reader ROLE]");
  process.exit(2);
}
for (const set of await buildExamples()) {
  await loadSqliteIntoPostgres(set.path, expandUrl(url), `reex_${set.dbId}`, reader ? { readerRole: reader } : {});
  console.log(`loaded ${set.dbId} into database reex_${set.dbId}`);
}
