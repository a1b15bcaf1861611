#!/usr/bin/env node
// Runs the compiled CLI from dist/. In a checkout whose TypeScript is newer than dist/ (or without
// dist/), it rebuilds first, so an edit or a `git pull` never silently runs old code; an
// up-to-date dist/ starts at once (`npm start` no longer rebuilds every time).
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const entry = join(root, "dist", "src", "cli.js");

/** The newest modification time of the TypeScript that dist/ is built from (0 when there is none). */
function newestSource() {
  let newest = 0;
  const walk = (dir) => {
    let names;
    try {
      names = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const d of names) {
      const p = join(dir, d.name);
      if (d.isDirectory()) walk(p);
      else if (d.name.endsWith(".ts")) newest = Math.max(newest, statSync(p).mtimeMs);
    }
  };
  walk(join(root, "src"));
  walk(join(root, "scripts"));
  for (const f of ["tsconfig.json", "tsconfig.build.json"]) if (existsSync(join(root, f))) newest = Math.max(newest, statSync(join(root, f)).mtimeMs);
  return newest;
}

const built = existsSync(entry) ? statSync(entry).mtimeMs : 0;
if (newestSource() > built) {
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  if (existsSync(tsc)) {
    console.error(built ? "reex: src/ changed since dist/ was built; rebuilding (npm run build)…" : "reex: dist/ is missing; building it (npm run build)…");
    const r = spawnSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], { stdio: ["ignore", "inherit", "inherit"] });
    if (r.status !== 0) {
      console.error("reex: the build failed; fix the errors above or run `npm run build`.");
      process.exit(1);
    }
  } else if (!built) {
    console.error("reex: dist/ is missing and TypeScript is not installed; run `npm install` (it builds dist/).");
    process.exit(1);
  } else {
    console.error("reex: warning: src/ is newer than dist/ and TypeScript is not installed to rebuild it; running dist/ as built.");
  }
}
await import(entry);
