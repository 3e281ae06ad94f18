import cf from 'cloudfront';
const crypto = require('crypto');
// Sluice's edge (internal/cdn): deny-only. A request passes to the
// authorizer unless its subject, read as the authorizer reads it, has a
// live entry; anything not read exactly passes.
const C = __CONFIG__;
const kvs = cf.kvs(C.s);
function read(req, s) {
  const m = s[0] === 'h' ? req.headers : req.querystring;
  const x = m && m[s[1]];
  if (!x) return ['', false];
  return [x.value, !!x.multiValue && x.multiValue.length > 1];
}
function subject(req) {
  for (const k in req.querystring || {}) if (/[%+]/.test(k)) return null;
  for (const s of C.src) {
    if (s[0] !== 'h' && s[0] !== 'q') return null;
    const v = read(req, s);
    if (typeof v[0] !== 'string' || !/^[\x20-\x7e]*$/.test(v[0])) return null;
    const t = v[0].trim();
    if (t === '') continue;
    if (v[1] || t.length > 256 || /[,%+]/.test(t)) return null;
    return t;
  }
  return null;
}
function key(s) {
  return crypto.createHmac('sha256', C.k).update(s).digest('hex').slice(0, 32);
}
function deny(v, now, rid) {
  const reset = Math.max(v.t - now, 0);
  const a = {retryAfter: String(v.e - now), limit: String(v.l), remaining: String(v.m), reset: String(reset),
    resetAt: String(v.t), rateLimitPolicy: v.p, rateLimit: v.n + ';r=' + v.m + ';t=' + reset, rule: v.r};
  const val = f => f[1] === '' ? f[2] : f[1] === 'requestId' ? rid : a[f[1].slice(11)];
  const headers = {};
  for (const f of C.h) {
    const x = val(f);
    if (x) headers[f[0].toLowerCase()] = {value: x};
  }
  const body = '{' + C.b.map(f => f[0] + ':' + (f[1] === '' ? f[2] : f[3] + val(f) + f[3])).join(',') + '}';
  return {statusCode: 429, statusDescription: 'Too Many Requests', headers: headers, body: {encoding: 'text', data: body}};
}
async function handler(event) {
  const req = event.request;
  const s = subject(req);
  if (s === null) return req;
  let v;
  try {
    v = JSON.parse(await kvs.get(key(s)));
  } catch (e) {
    return req;
  }
  const now = Math.floor(Date.now() / 1000);
  if (!(v.e > now) || v.a !== C.a) return req;
  return deny(v, now, event.context.requestId);
}
