// @sluicehq/client: the Sluice admin API from TypeScript. The types are
// generated from the API's OpenAPI document (src/schema.ts, `npm run
// generate`); openapi-fetch makes the calls; a middleware authenticates
// each one with sluice local's bearer token or with AWS SigV4 (the
// deployed stack's AWS_IAM), signed by AWS's own @smithy/signature-v4.
import createClient, { type Client, type Middleware } from "openapi-fetch";
import { SignatureV4 } from "@smithy/signature-v4";
import { Sha256 } from "@aws-crypto/sha256-js";
import type { components, paths } from "./schema.ts";

export type { components, paths };
type Schemas = components["schemas"];
export type Rule = Schemas["Rule"];
export type RuleInput = Schemas["RuleInput"];
export type Plan = Schemas["Plan"];
export type PlanInput = Schemas["PlanInput"];
export type Problem = Schemas["Problem"];
export type CheckRequest = Schemas["CheckRequest"];
export type CheckResponse = Schemas["CheckResponse"];
export type UsageRequest = Schemas["UsageRequest"];
export type UsageResponse = Schemas["UsageResponse"];
export type Batch = Schemas["Batch"];

/** AWS credentials; a function is called before each request (it may cache). */
export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface SluiceOptions {
  /**
   * The admin API: sluice local's "http://127.0.0.1:8080/admin", or the
   * stack's "https://<id>.execute-api.<region>.amazonaws.com/prod".
   */
  endpoint: string;
  /** sluice local's admin (or read) token: sent as a bearer token. */
  token?: string;
  /** Sign every request with SigV4 (service execute-api) instead. */
  aws?: {
    region: string;
    credentials: AwsCredentials | (() => Promise<AwsCredentials>);
  };
  /** The fetch to call; default globalThis.fetch. */
  fetch?: typeof fetch;
}

/** SluiceError is a response that is not a success: its problem document. */
export class SluiceError extends Error {
  readonly status: number;
  readonly problem?: Problem;
  constructor(status: number, problem?: Problem) {
    super(problem?.detail ?? problem?.title ?? `HTTP ${status}`);
    this.name = "SluiceError";
    this.status = status;
    this.problem = problem;
  }
}

/** The answer of check: its body, and, when denied, Retry-After. */
export interface CheckResult extends CheckResponse {
  /** Seconds to wait before retrying, from Retry-After (denied only). */
  retryAfterHeader?: number;
}

export interface SluiceClient {
  /** Every operation of the admin API, typed: api.GET("/rules/{id}", …). */
  api: Client<paths>;
  /**
   * Decides one request as the authorizer would, and charges it: call it
   * before expensive work. A denial is `allowed: false`, not an error.
   */
  check(req: CheckRequest, init?: { signal?: AbortSignal }): Promise<CheckResult>;
  /**
   * Frees the in-flight slots an allowed check took (its `slot`, set when
   * a concurrency rule applies): call it when the work ends, in a
   * `finally`. A slot never released frees itself at its rule's period.
   */
  release(slot: string, init?: { signal?: AbortSignal }): Promise<void>;
  /**
   * Charges (or refunds, with a negative cost) a cost known only after
   * the work. With an idempotency key, a retry charges nothing.
   */
  usage(req: UsageRequest, init?: { idempotencyKey?: string; signal?: AbortSignal }): Promise<UsageResponse>;
}

/** createSluiceClient returns a client of the admin API at o.endpoint. */
export function createSluiceClient(o: SluiceOptions): SluiceClient {
  if (!o.token === !o.aws) {
    throw new TypeError("createSluiceClient: give token (sluice local) or aws (SigV4), one of them");
  }
  const api = createClient<paths>({ baseUrl: o.endpoint.replace(/\/+$/, ""), fetch: o.fetch });
  api.use(o.token ? bearer(o.token) : sigv4(o.aws!.region, o.aws!.credentials));
  return {
    api,
    async check(req, init) {
      const { data, error, response } = await api.POST("/check", { body: req, signal: init?.signal });
      if (data) return data;
      if (response.status === 429) {
        // A denial is an answer, not a failure: its body is the check's.
        return { ...(error as CheckResponse), retryAfterHeader: Number(response.headers.get("Retry-After")) };
      }
      throw new SluiceError(response.status, error as Problem | undefined);
    },
    async release(slot, init) {
      const { error, response } = await api.POST("/check", { body: { release: slot }, signal: init?.signal });
      if (response.status !== 204) throw new SluiceError(response.status, error as Problem | undefined);
    },
    async usage(req, init) {
      const headers = init?.idempotencyKey ? { "Idempotency-Key": init.idempotencyKey } : undefined;
      const { data, error, response } = await api.POST("/usage", {
        body: req,
        params: { header: headers },
        signal: init?.signal,
      });
      if (data) return data;
      throw new SluiceError(response.status, error as Problem | undefined);
    },
  };
}

/** bearer sends the token on every request. */
function bearer(token: string): Middleware {
  return {
    onRequest({ request }) {
      request.headers.set("Authorization", `Bearer ${token}`);
      return request;
    },
  };
}

/**
 * sigv4 signs every request for API Gateway's AWS_IAM: service
 * execute-api, the body hashed, the session token sent.
 */
function sigv4(region: string, credentials: AwsCredentials | (() => Promise<AwsCredentials>)): Middleware {
  const signer = new SignatureV4({ service: "execute-api", region, credentials, sha256: Sha256 });
  return {
    async onRequest({ request }) {
      const url = new URL(request.url);
      const headers: Record<string, string> = { host: url.host };
      request.headers.forEach((v, k) => {
        headers[k] = v;
      });
      const body = request.body ? await request.clone().text() : undefined;
      const query: Record<string, string | string[]> = {};
      for (const k of new Set(url.searchParams.keys())) {
        const vs = url.searchParams.getAll(k);
        query[k] = vs.length === 1 ? vs[0] : vs;
      }
      const signed = await signer.sign({
        method: request.method,
        protocol: url.protocol,
        hostname: url.hostname,
        port: url.port ? Number(url.port) : undefined,
        path: url.pathname, // escaped again by the signer, as execute-api wants
        query,
        headers,
        body,
      });
      const out = new Headers(request.headers);
      for (const [k, v] of Object.entries(signed.headers)) {
        if (k !== "host") out.set(k, v); // fetch sends the same Host itself
      }
      return new Request(request, { headers: out });
    },
  };
}
