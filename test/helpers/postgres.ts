/**
 * A real PostgreSQL server for one test file: Debian's binaries, a fresh data folder under the
 * temp dir, a free port on 127.0.0.1, password logins (scram) over TCP. PostgreSQL refuses to run
 * as root, so as root the server runs as the `postgres` system user. Stop it in afterAll.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { buildExamples } from "../../src/examples/index.js";
import { loadSqliteIntoPostgres } from "../../src/pg/index.js";

/** A running server and the roles made on it. */
export interface PgServer {
  port: number;
  /** Superuser URL (database `postgres`). */
  adminUrl: string;
  /** The SELECT-only role's password, for tests that grep outputs for it. */
  readerPassword: string;
  /** URL of `database` as the SELECT-only role `reex_reader`. */
  readerUrl(database: string): string;
  /** URL of `database` as the superuser. */
  adminUrlOf(database: string): string;
  stop(): Promise<void>;
}

/** Folder of the PostgreSQL server binaries (the highest Debian version installed), or undefined. */
export function postgresBinDir(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, "bin", "postgres")))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? join(root, versions[0]!, "bin") : undefined;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

const ADMIN_PASSWORD = "admin-Pw-7f3c9a";
const READER_PASSWORD = "reader-Secret-91b2e4d7";

/** Starts a server (initdb + pg_ctl start), makes the `reex_reader` login role, and returns its handle. */
export async function startPostgres(): Promise<PgServer> {
  const bin = postgresBinDir();
  if (!bin) throw new Error("PostgreSQL is not installed: run scripts/install-system-deps.sh");
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), "reex-pg-"));
  const data = join(dir, "data");
  const pwfile = join(dir, "pw");
  writeFileSync(pwfile, ADMIN_PASSWORD + "\n");
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    chownSync(dir, uid, gid);
    chownSync(pwfile, uid, gid);
  }
  chmodSync(dir, 0o700);
  const run = (cmd: string, args: string[]): void => {
    const full = asRoot ? (["runuser", ["-u", "postgres", "--", join(bin, cmd), ...args]] as const) : ([join(bin, cmd), args] as const);
    const r = spawnSync(full[0], [...full[1]], { encoding: "utf8", cwd: dir });
    if (r.status !== 0) throw new Error(`${cmd} failed: ${r.stderr || r.stdout}`);
  };
  run("initdb", ["-D", data, "-U", "postgres", "--pwfile", pwfile, "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--locale=C", "-N"]);
  const port = await freePort();
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=40 -c shared_buffers=32MB`;
  run("pg_ctl", ["-D", data, "-o", opts, "-l", join(dir, "log"), "-w", "-t", "60", "start"]);
  const adminUrlOf = (db: string): string => `postgres://postgres:${ADMIN_PASSWORD}@127.0.0.1:${port}/${db}`;
  const admin = new pg.Client({ connectionString: adminUrlOf("postgres") });
  await admin.connect();
  await admin.query(`CREATE ROLE reex_reader LOGIN PASSWORD '${READER_PASSWORD}'`);
  await admin.end();
  let stopped = false;
  return {
    port,
    adminUrl: adminUrlOf("postgres"),
    readerPassword: READER_PASSWORD,
    readerUrl: (db) => `postgres://reex_reader:${READER_PASSWORD}@127.0.0.1:${port}/${db}`,
    adminUrlOf,
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** The example databases as `reex_<dbId>` on `server`, readable by `reex_reader`; returns their SQLite paths by dbId. */
export async function loadExamples(server: PgServer): Promise<Map<string, string>> {
  const sets = await buildExamples();
  const out = new Map<string, string>();
  for (const set of sets) {
    await loadSqliteIntoPostgres(set.path, server.adminUrl, `reex_${set.dbId}`, { readerRole: "reex_reader" });
    out.set(set.dbId, set.path);
  }
  return out;
}
