// Fails when dist/ is not what the sources build: bundles src/ with the same
// configuration into a temporary directory and compares every file byte for byte
// with the committed dist/ (run by `npm run check`, which `make test` runs).
import { build } from "vite";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const committed = join(root, "dist");

function files(dir) {
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(relative(dir, p));
    }
  };
  walk(dir);
  return out.sort();
}

const tmp = mkdtempSync(join(tmpdir(), "slowstart-web-"));
let problems = [];
try {
  const fresh = join(tmp, "dist");
  await build({ root, logLevel: "warn", build: { outDir: fresh, emptyOutDir: true } });
  const want = files(fresh);
  const have = new Set(files(committed));
  for (const f of want) {
    if (!have.has(f)) problems.push(`dist/${f} is missing`);
    else if (!readFileSync(join(fresh, f)).equals(readFileSync(join(committed, f)))) problems.push(`dist/${f} differs from what src/ builds`);
    have.delete(f);
  }
  for (const f of have) problems.push(`dist/${f} is not built from src/ any more`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
if (problems.length > 0) {
  console.error(`web/dist is stale:\n  ${problems.join("\n  ")}\nRebuild it (make web, or cd web && npm ci && npm run build) and commit web/dist.`);
  process.exit(1);
}
console.log("web/dist is what src/ builds");
