// The client against a built `sluice local` (SLUICE_BIN, default
// ../../build/sluice): every call goes over HTTP to the real admin API.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { createSluiceClient, SluiceError, type SluiceClient } from "../src/index.ts";

const bin = process.env.SLUICE_BIN ?? fileURLToPath(new URL("../../../build/sluice", import.meta.url));
const token = "sl_client_test_token";
let proc: ChildProcess;
let endpoint: string;
let sluice: SluiceClient;

before(async () => {
  proc = spawn(bin, ["local", "--addr", "127.0.0.1:0", "--seed", ""], {
    env: { ...process.env, SLUICE_ADMIN_TOKEN: token },
    stdio: ["ignore", "pipe", "pipe"],
  });
  proc.stderr!.resume();
  endpoint = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${bin} printed no admin API address in 20 s`)), 20_000);
    proc.once("exit", (code) => reject(new Error(`${bin} exited with ${code}`)));
    createInterface({ input: proc.stdout! }).on("line", (line) => {
      const m = /^\s*admin API\s+(\S+?)\/?\s*$/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
  });
  sluice = createSluiceClient({ endpoint, token });
});

after(() => {
  proc?.kill();
});

test("rules: create, list, update with If-Match, 412 when stale, delete", async () => {
  const { api } = sluice;
  const created = await api.POST("/rules", {
    body: { api: "demo", route: "GET /search", subject: "*", limit: 3, period: "1m" },
  });
  assert.equal(created.response.status, 201, JSON.stringify(created.error));
  const rule = created.data!;
  assert.equal(created.response.headers.get("ETag"), '"1"');
  assert.equal(rule.version, 1);

  const list = await api.GET("/rules", { params: { query: { api: "demo" } } });
  assert.deepEqual(list.data?.rules.map((r) => r.id), [rule.id]);
  assert.equal(list.data?.next_cursor, "");

  const updated = await api.PUT("/rules/{id}", {
    params: { path: { id: rule.id }, header: { "If-Match": '"1"' } },
    body: { ...rule, limit: 2 },
  });
  assert.equal(updated.response.status, 200, JSON.stringify(updated.error));
  assert.equal(updated.data?.limit, 2);
  assert.equal(updated.response.headers.get("ETag"), '"2"');

  const stale = await api.PUT("/rules/{id}", {
    params: { path: { id: rule.id }, header: { "If-Match": '"1"' } },
    body: { ...rule, limit: 5 },
  });
  assert.equal(stale.response.status, 412);
  assert.equal(stale.response.headers.get("Content-Type"), "application/problem+json");
  assert.match(stale.error?.type ?? "", /admin-api\.md#precondition-failed$/);

  const bad = await api.POST("/rules", { body: { api: "demo", route: "GET /x", subject: "*", limit: -1, period: "1m" } });
  assert.equal(bad.response.status, 400);
  assert.ok(bad.error?.errors?.some((e) => e.field === "limit"), JSON.stringify(bad.error));

  const del = await api.DELETE("/rules/{id}", { params: { path: { id: rule.id }, header: { "If-Match": '"2"' } } });
  assert.equal(del.response.status, 204);
  const gone = await api.GET("/rules/{id}", { params: { path: { id: rule.id } } });
  assert.equal(gone.response.status, 404);
});

test("check, then usage: ask before the work, charge after", async () => {
  const { api } = sluice;
  const plan = await api.POST("/plans", { body: { name: "tokens", limit: 100, period: "1h" } });
  assert.equal(plan.response.status, 201, JSON.stringify(plan.error));
  const rule = await api.POST("/rules", {
    body: { api: "demo", route: "POST /chat", subject: "*", plan: "tokens" },
  });
  assert.equal(rule.response.status, 201, JSON.stringify(rule.error));
  const req = { api: "demo", route: "POST /chat", subject: "carol" };
  // sluice local's authorizer sees a write at its next poll (250 ms).
  let first = await sluice.check(req);
  for (let i = 0; first.limit !== 100 && i < 40; i++) {
    await new Promise((r) => setTimeout(r, 100));
    first = await sluice.check(req);
  }
  assert.equal(first.allowed, true);
  assert.equal(first.limit, 100);
  assert.equal(first.rule, rule.data!.id);

  const used = await sluice.usage({ ...req, cost: 98 }, { idempotencyKey: "resp-1" });
  assert.equal(used.duplicate, false);
  assert.equal(used.buckets[0].remaining, first.remaining - 98);
  const again = await sluice.usage({ ...req, cost: 98 }, { idempotencyKey: "resp-1" });
  assert.equal(again.duplicate, true, "a retry with the same key charges nothing");

  // One token left: the next check passes, the one after is denied.
  assert.equal((await sluice.check(req)).allowed, true);
  const denied = await sluice.check(req);
  assert.equal(denied.allowed, false);
  assert.ok(denied.retryAfter > 0 && denied.retryAfterHeader === denied.retryAfter, JSON.stringify(denied));

  await assert.rejects(sluice.usage({ ...req, cost: 0 }), (err: unknown) => {
    assert.ok(err instanceof SluiceError);
    assert.equal(err.status, 400);
    assert.equal(err.problem?.errors?.[0].field, "cost");
    return true;
  });
});

test("in flight: a check holds a slot until release", async () => {
  const { api } = sluice;
  const rule = await api.POST("/rules", {
    body: { api: "demo", route: "POST /exports", subject: "*", kind: "concurrency", limit: 1, period: "1h" },
  });
  assert.equal(rule.response.status, 201, JSON.stringify(rule.error));
  const req = { api: "demo", route: "POST /exports", subject: "dave" };
  let held = await sluice.check(req);
  for (let i = 0; !held.slot && i < 40; i++) {
    // sluice local's authorizer sees the rule at its next poll.
    await new Promise((r) => setTimeout(r, 100));
    if (held.slot === undefined && held.allowed) held = await sluice.check(req);
  }
  assert.ok(held.allowed && held.slot, JSON.stringify(held));
  const second = await sluice.check(req);
  assert.equal(second.allowed, false, "one export in flight: the second waits");
  await sluice.release(held.slot!);
  const third = await sluice.check(req);
  assert.ok(third.allowed && third.slot, "released: the slot is free again");
  await sluice.release(third.slot!);
  await assert.rejects(sluice.release("s1.not-a-slot"), (err: unknown) => {
    assert.ok(err instanceof SluiceError);
    assert.equal(err.status, 400);
    return true;
  });
});

test("batch: a set's writes all or nothing", async () => {
  const { api } = sluice;
  const applied = await api.POST("/batch", {
    body: {
      set: "platform",
      ops: [
        { action: "create", plan: { name: "gold", limit: 1000, period: "1m" } },
        { action: "create", rule: { api: "shop", route: "*", subject: "customer-42", plan: "gold" } },
      ],
    },
  });
  assert.equal(applied.response.status, 200, JSON.stringify(applied.error));
  const [plan, rule] = applied.data!.results;
  assert.equal(plan.plan?.set, "platform");
  assert.equal(rule.rule?.plan, "gold");

  // A stale op fails the whole batch: nothing of it is written.
  const stale = await api.POST("/batch", {
    body: {
      set: "platform",
      ops: [
        { action: "create", rule: { api: "shop", route: "GET /x", subject: "*", limit: 1, period: "1s" } },
        { action: "delete", rule: { id: rule.rule!.id }, if_version: 7 },
      ],
    },
  });
  assert.equal(stale.response.status, 412);
  const list = await api.GET("/rules", { params: { query: { api: "shop" } } });
  assert.equal(list.data?.rules.length, 1);
});

test("a token it does not know is a 401 problem; the document is served", async () => {
  const stranger = createSluiceClient({ endpoint, token: "sl_wrong" });
  const r = await stranger.api.GET("/plans");
  assert.equal(r.response.status, 401);
  assert.match(r.error?.type ?? "", /#unauthorized$/);
  const doc = await sluice.api.GET("/openapi.json");
  assert.equal((doc.data as { openapi?: string }).openapi, "3.1.0");
});
