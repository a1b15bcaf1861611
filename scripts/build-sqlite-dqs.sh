#!/usr/bin/env bash
# Compiles scripts/sqlite-dqs/reex_dqs.c, the loadable extension that gives reex's SQLite
# connections stock SQLite's double-quoted string literals (see docs/security.md, "Double-quoted strings"),
# against the sqlite3ext.h that better-sqlite3 ships, into node_modules/.cache/reex-sqlite/.
# Offline; needs a C compiler (cc, as node-gyp does); idempotent (rebuilds only when the source is
# newer). Run by `npm install` (the prepare script); src/sql/dqs.ts also runs it when the file is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
src=scripts/sqlite-dqs/reex_dqs.c
inc="$(dirname "$(node -p 'require.resolve("better-sqlite3/package.json")' 2>/dev/null || echo node_modules/better-sqlite3/package.json)")/deps/sqlite3"
dest=node_modules/.cache/reex-sqlite/reex_dqs.so
[ -f "$dest" ] && [ "$dest" -nt "$src" ] && exit 0
if [ ! -f "$inc/sqlite3ext.h" ]; then
  echo "build-sqlite-dqs: $inc/sqlite3ext.h not found (is better-sqlite3 installed?)" >&2
  exit 1
fi
mkdir -p "$(dirname "$dest")"
tmp="$dest.$$.tmp"
trap 'rm -f "$tmp"' EXIT
"${CC:-cc}" -O2 -fPIC -shared -I "$inc" -o "$tmp" "$src"
mv -f "$tmp" "$dest"
echo "build-sqlite-dqs: built $dest"
