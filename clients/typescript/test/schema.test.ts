// The committed types are what `npm run generate` makes of the admin API's
// OpenAPI document today: a change to the document without regenerating
// fails here.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));

test("src/schema.ts is generated from internal/admin/openapi.yaml", () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-schema-"));
  try {
    const out = join(dir, "schema.ts");
    execFileSync(join(root, "node_modules/.bin/openapi-typescript"), ["../../internal/admin/openapi.yaml", "-o", out], { cwd: root, stdio: "pipe" });
    const want = readFileSync(out, "utf8");
    const got = readFileSync(join(root, "src/schema.ts"), "utf8");
    assert.ok(got === want, "src/schema.ts is stale: run npm run generate in clients/typescript");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
