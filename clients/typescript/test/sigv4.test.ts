// SigV4: the client's signature, checked by an independent verifier
// written from AWS's Signature Version 4 specification with node:crypto
// (execute-api: path segments encoded twice), at a server in the test.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, createHmac } from "node:crypto";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { createSluiceClient } from "../src/index.ts";

const creds = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", sessionToken: "session-token" };

const enc = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const hmac = (k: string | Buffer, s: string) => createHmac("sha256", k).update(s).digest();

// verify returns the signature the request should carry, and its scope.
function verify(req: IncomingMessage, body: string): { want: string; got: string; scope: string } {
  const auth = req.headers.authorization ?? "";
  const m = /^AWS4-HMAC-SHA256 Credential=([^,]+), SignedHeaders=([^,]+), Signature=([0-9a-f]+)$/.exec(auth);
  assert.ok(m, `Authorization ${auth}`);
  const [, credential, signedHeaders, got] = m;
  const scope = credential.split("/").slice(1).join("/");
  const [date, region, service] = scope.split("/");
  const url = new URL(req.url!, "http://x");
  const path = url.pathname.split("/").map((seg) => enc(seg)).join("/");
  const query = [...url.searchParams].map(([k, v]) => [enc(k), enc(v)]).sort().map(([k, v]) => `${k}=${v}`).join("&");
  const headers = signedHeaders.split(";").map((h) => `${h}:${String(req.headers[h]).trim()}\n`).join("");
  const canonical = [req.method, path, query, headers, signedHeaders, sha(body)].join("\n");
  const amzDate = String(req.headers["x-amz-date"]);
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha(canonical)].join("\n");
  let key = hmac("AWS4" + creds.secretAccessKey, date);
  for (const part of [region, service, "aws4_request"]) key = hmac(key, part);
  return { want: hmac(key, toSign).toString("hex"), got, scope };
}

test("sigv4 signs what API Gateway's AWS_IAM checks", async () => {
  const seen: { want: string; got: string; scope: string; token?: string }[] = [];
  const srv = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      seen.push({ ...verify(req, body), token: req.headers["x-amz-security-token"] as string });
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(req.url!.includes("/usage") ? '{"subject":"s","api":"a","route":"*","cost":1,"duplicate":false,"buckets":[]}' : '{"rules":[],"next_cursor":""}');
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address() as AddressInfo;
  try {
    const sluice = createSluiceClient({ endpoint: `http://127.0.0.1:${port}/prod`, aws: { region: "eu-west-1", credentials: async () => creds } });
    const list = await sluice.api.GET("/rules", { params: { query: { api: "a b", subject: "user:42/x" } } });
    assert.equal(list.response.status, 200);
    await sluice.usage({ api: "a", route: "*", subject: "s", cost: 1 }, { idempotencyKey: "k-1" });
    const limits = await sluice.api.GET("/subjects/{subject}/limits", { params: { path: { subject: "a b/c" } } });
    assert.equal(limits.response.status, 200);
  } finally {
    srv.close();
  }
  assert.equal(seen.length, 3);
  for (const s of seen) {
    assert.equal(s.got, s.want, "signature");
    assert.match(s.scope, /^\d{8}\/eu-west-1\/execute-api\/aws4_request$/);
    assert.equal(s.token, creds.sessionToken);
  }
});

test("a client needs one way to authenticate", () => {
  assert.throws(() => createSluiceClient({ endpoint: "http://x" }), TypeError);
  assert.throws(() => createSluiceClient({ endpoint: "http://x", token: "t", aws: { region: "r", credentials: creds } }), TypeError);
});
