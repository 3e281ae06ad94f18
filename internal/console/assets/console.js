// The Sluice console: plain JavaScript over the documented admin API
// (docs/admin-api.md), nothing console-only. It is served at /console/ and
// calls ../admin/... on the same origin: sluice local's admin API, or the
// `sluice console` proxy that signs each call with the operator's AWS
// credentials. The token in the URL fragment (#token=…, never sent to a
// server) is kept in sessionStorage and sent as a bearer token.
'use strict';

const API = new URL('../admin', location.href).pathname;
const TOKEN_KEY = 'sluice-console-token';

(function takeToken() {
  const m = location.hash.match(/(?:^#|&)token=([^&]+)/);
  if (m) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    // Out of the address bar and the history: it is a credential.
    history.replaceState(null, '', location.pathname + location.search + '#/rules');
  }
})();

// ---- DOM helpers (no innerHTML: rule descriptions are user data) ----

function h(tag, attrs, ...children) {
  const el = document.createElementNS(tag.startsWith('svg:') ? 'http://www.w3.org/2000/svg' : 'http://www.w3.org/1999/xhtml',
    tag.replace(/^svg:/, ''));
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const app = () => document.getElementById('app');

function render(...nodes) {
  stopTimers();
  app().replaceChildren(...nodes.flat());
}

function flash(kind, text) {
  const f = document.getElementById('flash');
  f.replaceChildren(text ? h('div', { class: kind, 'data-flash': kind }, text) : '');
}

// A page's timers and window listeners end when the next page renders.
let timers = [], listeners = [];
function every(ms, f) { timers.push(setInterval(f, ms)); }
function onWindow(event, f) { window.addEventListener(event, f); listeners.push([event, f]); }
function stopTimers() {
  timers.forEach(clearInterval); timers = [];
  listeners.forEach(([e, f]) => window.removeEventListener(e, f)); listeners = [];
}

// ---- the API ----

class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || ('HTTP ' + status));
    this.status = status;
    this.problem = problem || {};
  }
}

async function api(method, path, opts = {}) {
  const headers = { Accept: 'application/json, application/problem+json' };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = 'Bearer ' + token;
  if (opts.ifMatch !== undefined) headers['If-Match'] = '"' + opts.ifMatch + '"';
  let body;
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  let url = API + path;
  if (opts.query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(opts.query)) if (v !== '' && v !== undefined) q.set(k, v);
    if ([...q].length) url += '?' + q;
  }
  // A read belongs to the page that asked: when the operator moves on,
  // route() aborts it, so a slow page cannot render over the newer one.
  // A write is never aborted (its result must be seen).
  const signal = method === 'GET' ? routeAbort.signal : undefined;
  const resp = await fetch(url, { method, headers, body, cache: 'no-store', signal });
  // Served by `sluice console`: its proxy names the admin API it
  // forwards to, so the operator sees which stack they act on.
  const upstream = resp.headers.get('Sluice-Upstream');
  if (upstream) {
    const ep = document.getElementById('endpoint');
    ep.textContent = 'admin API ' + upstream;
    ep.dataset.upstream = upstream;
  }
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = { detail: text.slice(0, 200) }; }
  if (!resp.ok) throw new ApiError(resp.status, data);
  return data;
}

const enc = encodeURIComponent;

function showError(err) {
  if (err && err.name === 'AbortError') return; // a page left behind
  if (err instanceof ApiError && err.status === 401) {
    // A token sent and refused is not the same trouble as none at all.
    flash('error', sessionStorage.getItem(TOKEN_KEY)
      ? 'The admin API refused this token: open the console with the URL sluice printed (…/console/#token=…) or the token in SLUICE_ADMIN_TOKEN.'
      : 'Not signed in: open the console with the URL sluice printed (…/console/#token=…).');
  } else {
    flash('error', err.message || String(err));
  }
}

// ---- forms: fields, values, problem+json field errors ----

// A field: name (the JSON field), label, type (text, int, select, bool,
// textarea), options, hint, off (a bool unchecked unless true). Optional
// fields are sent only when set.
const RULE_FIELDS = [
  { name: 'api', label: 'API', hint: 'REST API id, or * for every API' },
  { name: 'route', label: 'Route', hint: 'GET /items/{id}, ANY /items, or * for the whole API' },
  { name: 'subject', label: 'Subject', hint: '* (each subject its own bucket) or one subject' },
  { name: 'dimension', label: 'Dimension', hint: 'empty for the default subject, or one of the authorizer\'s DIMENSIONS, such as ip' },
  { name: 'plan', label: 'Plan', hint: 'a plan\'s name instead of limit/period/burst' },
  { name: 'kind', label: 'Kind', type: 'select', options: ['', 'rate', 'quota', 'concurrency'], hint: 'rate (token bucket, default), quota (calendar window) or concurrency (requests in flight; period is the slot TTL)' },
  { name: 'limit', label: 'Limit', type: 'int', hint: 'tokens per period' },
  { name: 'period', label: 'Period', hint: '1s … 365d, such as 1m, 1h, 1d' },
  { name: 'burst', label: 'Burst', type: 'int', hint: 'bucket capacity (rate; default the limit)' },
  { name: 'anchor', label: 'Anchor', hint: 'quota windows start here (RFC 3339, such as 2026-01-01T00:00:00Z)' },
  { name: 'min_remaining', label: 'Min remaining', type: 'int', hint: 'quota: keep this many in reserve' },
  { name: 'cost', label: 'Cost', type: 'int', hint: 'tokens per request (default 1)' },
  { name: 'failure_mode', label: 'Failure mode', type: 'select', options: ['', 'open', 'closed'], hint: 'when Redis fails (default open)' },
  { name: 'mode', label: 'Mode', type: 'select', options: ['', 'enforce', 'shadow'], hint: 'shadow: log, never deny' },
  { name: 'enabled', label: 'Enabled', type: 'bool' },
  { name: 'global', label: 'Global', type: 'bool', off: true, hint: 'one budget across every Region (no shadow, min remaining or durable)' },
  { name: 'expires_at', label: 'Expires at', hint: 'RFC 3339: stops applying then (empty: never)' },
  { name: 'description', label: 'Description', type: 'textarea' },
];

const PLAN_FIELDS = [
  { name: 'name', label: 'Name', hint: 'rules name it in their plan field' },
  { name: 'kind', label: 'Kind', type: 'select', options: ['', 'rate', 'quota', 'concurrency'], hint: 'rate (token bucket, default), quota (calendar window) or concurrency (requests in flight); its rules have its kind' },
  { name: 'limit', label: 'Limit', type: 'int', hint: 'tokens per period (per window for a quota)' },
  { name: 'period', label: 'Period', hint: 'such as 1m, 1h; a quota: 1d, 1w, 1mo or 1y' },
  { name: 'burst', label: 'Burst', type: 'int', hint: 'bucket capacity (rate; default the limit)' },
  { name: 'global', label: 'Global', type: 'bool', off: true, hint: 'its rules share one budget across every Region' },
  { name: 'description', label: 'Description', type: 'textarea' },
];

function fieldInput(f, value) {
  const common = { name: f.name, id: 'f-' + f.name, 'aria-describedby': 'e-' + f.name };
  if (f.type === 'select') {
    return h('select', common, f.options.map(o => h('option', { value: o, selected: String(value ?? '') === o }, o || '(default)')));
  }
  if (f.type === 'bool') return h('input', { ...common, type: 'checkbox', checked: f.off ? value === true : value !== false });
  if (f.type === 'textarea') return h('textarea', common, value ?? '');
  return h('input', { ...common, type: 'text', value: value ?? '', inputmode: f.type === 'int' ? 'numeric' : undefined, autocomplete: 'off' });
}

function formFields(fields, obj, locked) {
  return fields.map(f => [
    h('label', { for: 'f-' + f.name }, f.label),
    (() => { const i = fieldInput(f, obj[f.name]); if (locked && locked.includes(f.name)) i.readOnly = true; return i; })(),
    h('span', { class: 'hint' }, f.hint || ''),
    h('div', { class: 'field-error', id: 'e-' + f.name, 'data-error-for': f.name, hidden: true }),
  ]);
}

// readForm returns the object to send: empty optional fields are left out,
// so a field the API does not know yet is only sent when the operator set it.
function readForm(form, fields) {
  const out = {};
  for (const f of fields) {
    const el = form.elements[f.name];
    if (f.type === 'bool') { out[f.name] = el.checked; continue; }
    const v = el.value.trim();
    if (v === '') continue;
    out[f.name] = f.type === 'int' && /^-?\d+$/.test(v) ? Number(v) : v;
  }
  return out;
}

function clearErrors(form) {
  form.querySelectorAll('.field-error').forEach(e => { e.hidden = true; e.textContent = ''; });
  form.querySelectorAll('.invalid').forEach(e => e.classList.remove('invalid'));
}

// showFieldErrors puts each problem+json field error next to its field;
// errors for fields the form lacks go to the flash.
function showFieldErrors(form, err) {
  clearErrors(form);
  const errors = (err.problem && err.problem.errors) || [];
  const rest = [];
  for (const e of errors) {
    const slot = form.querySelector('[data-error-for="' + CSS.escape(e.field) + '"]');
    if (slot) {
      slot.hidden = false;
      slot.textContent = (slot.textContent ? slot.textContent + '; ' : '') + e.reason;
      const input = form.elements[e.field];
      if (input) input.classList.add('invalid');
    } else {
      rest.push(e.field + ': ' + e.reason);
    }
  }
  flash('error', [err.message].concat(rest).join(' — '));
  // The keyboard goes where the first problem is.
  const first = form.querySelector('.invalid');
  if (first) first.focus();
}

// ---- routing ----

const routes = [
  [/^#\/rules$/, rulesPage],
  [/^#\/rules\/new$/, () => editor(RULE, null)],
  [/^#\/rules\/([^/]+)$/, m => editor(RULE, decodeURIComponent(m[1]))],
  [/^#\/plans$/, plansPage],
  [/^#\/plans\/new$/, () => editor(PLAN, null)],
  [/^#\/plans\/([^/]+)$/, m => editor(PLAN, decodeURIComponent(m[1]))],
  [/^#\/history\/(rule|plan)\/([^/]+)$/, m => historyPage(m[1], decodeURIComponent(m[2]))],
  [/^#\/subject$/, subjectPage],
  [/^#\/stats$/, statsPage],
];

function params() { return new URLSearchParams(location.hash.split('?')[1] || ''); }

let routeAbort = new AbortController();
function route() {
  routeAbort.abort();
  routeAbort = new AbortController();
  const hash = (location.hash || '#/rules').split('?')[0];
  document.querySelectorAll('[data-nav]').forEach(a => a.classList.toggle('active', hash.startsWith('#/' + a.dataset.nav) ||
    (a.dataset.nav === 'rules' && hash.startsWith('#/history/rule')) || (a.dataset.nav === 'plans' && hash.startsWith('#/history/plan'))));
  for (const [re, page] of routes) {
    const m = hash.match(re);
    // Then focus the new view's heading, as a page load would.
    if (m) { Promise.resolve(page(m)).then(focusView).catch(showError); return; }
  }
  location.hash = '#/rules';
}

// focusView moves the keyboard focus to the view's heading, so that a
// screen reader reads it and Tab continues from there.
function focusView() {
  const h1 = app().querySelector('h1');
  if (h1) { h1.tabIndex = -1; h1.focus({ preventScroll: true }); }
}

// go shows hash's page with msg as its flash.
let pendingFlash = null;
function go(hash, msg) {
  if (location.hash === hash) {
    if (msg) flash('ok', msg);
    route();
  } else {
    pendingFlash = msg;
    location.hash = hash;
  }
}

window.addEventListener('hashchange', () => {
  flash(pendingFlash ? 'ok' : undefined, pendingFlash);
  pendingFlash = null;
  route();
});
window.addEventListener('DOMContentLoaded', () => {
  document.getElementById('endpoint').textContent = 'API ' + API;
  // The skip link focuses the view; following #app would change the route.
  document.getElementById('skip').addEventListener('click', e => { e.preventDefault(); focusView(); });
  route();
  probeWrite();
});

// probeWrite asks whether this operator may write: an empty batch writes
// nothing, and a read-only operator (sluice local's read token, a principal
// with only GrantRead) gets 403. Then every write action is hidden
// (console.css, body.read-only) and the header says so; the API refuses
// writes all the same. Any other answer (an older API's 404) leaves the
// console as it was.
async function probeWrite() {
  try {
    await api('POST', '/batch', { body: { set: 'probe', ops: [] } });
  } catch (err) {
    if (err instanceof ApiError && err.status === 403) {
      document.body.classList.add('read-only');
      const ro = document.createElement('span');
      ro.id = 'read-only';
      ro.className = 'muted';
      ro.title = err.problem.detail || 'This operator can read but not change rules.';
      ro.textContent = 'read-only';
      document.querySelector('header').append(ro);
    }
  } finally {
    if (document.body.classList.contains('read-only')) document.querySelectorAll('form.grid').forEach(lockForm);
    document.body.dataset.writeProbe = 'done';
  }
}

// lockForm makes an editor's fields read-only for an operator who cannot
// save: they read as values, not as inputs (console.css).
function lockForm(form) {
  form.querySelectorAll('input, textarea').forEach(i => { i.readOnly = true; });
  form.querySelectorAll('select, input[type=checkbox]').forEach(i => { i.disabled = true; });
}

// ---- rules ----

// numbers returns what limits a rule or plan: limit, period, burst (the
// bucket's capacity, the limit when unset; none for a quota) and kind. A
// rule naming a plan takes the plan's, from plans (name → plan).
function numbers(r, plans) {
  // A subject's limits carry their plan's numbers; a rule only its name.
  const src = r.plan && r.limit === undefined ? plans && plans.get(r.plan) : r;
  if (!src) return null;
  const kind = src.kind || r.kind;
  const quota = kind === 'quota', conc = kind === 'concurrency';
  return { limit: src.limit, period: src.period, burst: quota || conc ? null : src.burst ?? src.limit, quota, conc };
}

// limitText is "10 / 1m", "1000 / 1mo quota", "5 at once (slot TTL 15m)",
// "plan gold: 100 / 1m", or "plan gold" when the plan's numbers are not
// known.
function limitText(r, plans) {
  const n = numbers(r, plans);
  const s = !n ? '?' : n.conc ? n.limit + ' at once (slot TTL ' + n.period + ')' : n.limit + ' / ' + n.period + (n.quota ? ' quota' : '');
  return r.plan ? 'plan ' + r.plan + (n ? ': ' + s : '') : s;
}

// globalBadge marks a global budget, the rule's own or its plan's, after
// the limit; nothing for a regional one.
function globalBadge(r, plans) {
  const p = plans && r.plan ? plans.get(r.plan) : null;
  return r.global || (p && p.global) ? [' ', h('span', { class: 'badge global', 'data-global': '' }, 'global')] : null;
}

function burstText(r, plans) {
  const n = numbers(r, plans);
  return !n ? '?' : n.quota || n.conc ? '—' : String(n.burst);
}

// loadPlans returns every plan by name (GET /plans has no pages).
async function loadPlans() {
  const data = await api('GET', '/plans');
  return new Map(data.plans.map(p => [p.name, p]));
}

// labelled gives each cell of row the name of its column (heads), which
// narrow screens show beside it once the rows become cards.
function labelled(row, heads) {
  [...row.children].forEach((td, i) => { if (heads[i]) td.dataset.label = heads[i]; });
  return row;
}

// table is a table of rows under heads (empty: the text for no rows),
// which scrolls inside itself when too wide and becomes a list of cards
// on a narrow screen.
function table(attrs, heads, rows, empty) {
  const body = rows.length ? rows.map(r => labelled(r, heads)) : [h('tr', { class: 'empty' }, h('td', { colspan: heads.length, class: 'muted' }, empty))];
  return h('div', { class: 'scroll' }, h('table', { ...attrs, class: ((attrs.class || '') + ' cards').trim() },
    h('thead', {}, h('tr', {}, heads.map(t => h('th', {}, t)))), h('tbody', {}, body)));
}

const RULE_HEADS = ['API', 'Route', 'Subject', 'Description', 'Limit', 'Burst', 'Mode', 'On failure', 'Enabled', 'Set', 'Version', ''];

// RULES_PAGE is the page size the list asks for. The API filters and
// sorts (by api, route, subject), so each page continues the one above.
const RULES_PAGE = 100;

// expired says whether rule r's expires_at has passed: it no longer
// applies, as if deleted.
function expired(r) { return !!r.expires_at && new Date(r.expires_at) <= new Date(); }

// enabledText is "yes", "no", "yes, until 2026-12-07 12:44:10 UTC", or
// "expired 2026-12-07 12:44:10 UTC" (the CLI's words) once that has passed.
function enabledText(r) {
  if (expired(r)) return h('span', { 'data-expires': 'expired' }, 'expired ', when(r.expires_at, utcSecond(r.expires_at)));
  return [r.enabled === false ? 'no' : 'yes',
    r.expires_at && h('span', { class: 'muted', 'data-expires': '' }, ', until ', when(r.expires_at, utcSecond(r.expires_at)))];
}

function ruleRow(r, plans) {
  return labelled(h('tr', { 'data-id': r.id, class: r.enabled === false || expired(r) ? 'disabled' : undefined },
    h('td', { class: 'mono' }, r.api), h('td', { class: 'mono' }, r.route),
    h('td', { class: 'mono' }, r.subject, r.dimension && h('span', { class: 'muted' }, ' (' + r.dimension + ')')),
    h('td', { class: 'desc' }, r.description || ''),
    h('td', { 'data-limit': '' }, limitText(r, plans), globalBadge(r, plans)), h('td', { class: 'num', 'data-burst': '' }, burstText(r, plans)),
    h('td', {}, r.mode || 'enforce'), h('td', {}, r.failure_mode || 'open'), h('td', {}, enabledText(r)),
    h('td', { class: 'mono', 'data-set': r.set || '' }, r.set || '—'),
    h('td', { class: 'num' }, r.version),
    h('td', { class: 'links' }, h('a', { href: '#/rules/' + enc(r.id), 'data-edit': r.id, 'aria-label': 'Edit rule ' + ruleWords(r) }, 'edit'), ' · ',
      h('a', { href: '#/history/rule/' + enc(r.id), 'aria-label': 'History of rule ' + ruleWords(r) }, 'history'))), RULE_HEADS);
}

// ruleWords names a rule for a link: "demo GET /search for *".
function ruleWords(r) {
  return r.api + ' ' + r.route + ' for ' + r.subject + (r.dimension ? ' (' + r.dimension + ')' : '');
}

async function rulesPage() {
  const p = params();
  const filters = ['api', 'route', 'subject', 'plan'];
  const form = h('form', { class: 'toolbar', id: 'filters', onsubmit: e => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const f of filters) if (form.elements[f].value.trim()) q.set(f, form.elements[f].value.trim());
    go('#/rules' + (String(q) ? '?' + q : ''));
  } },
  filters.map(f => h('label', {}, f, h('input', { name: f, value: p.get(f) || '', size: 14 }))),
  h('button', { type: 'submit', class: 'secondary', id: 'filter' }, 'Filter'),
  h('a', { class: 'button', href: '#/rules/new', id: 'new-rule' }, 'New rule'));
  const more = h('button', { class: 'secondary', hidden: true, id: 'more' }, 'More');
  const status = h('span', { class: 'muted', id: 'shown' });
  const plans = await loadPlans();
  const list = table({ id: 'rules' }, RULE_HEADS, [], 'No rules match.');
  const tbody = list.querySelector('tbody');
  render(h('h1', {}, 'Rules'), form,
    h('p', { class: 'muted' }, 'Sorted by API, route and subject. Filters match exactly; * is a value like any other.'),
    list, h('p', { class: 'toolbar' }, more, status));
  // cursor continues the list; '' once the last page is shown (More is
  // then hidden, and a click that still arrives fetches nothing). The API
  // filters, sorts and pages: each page is appended as it comes.
  let cursor = '', loading = false, shown = 0;
  async function page() {
    if (loading) return;
    loading = more.disabled = true;
    const q = { limit: RULES_PAGE, cursor };
    for (const f of filters) q[f] = p.get(f) || '';
    let data;
    try {
      data = await api('GET', '/rules', { query: q });
    } finally {
      loading = more.disabled = false;
    }
    if (!shown && data.rules.length) tbody.replaceChildren();
    tbody.append(...data.rules.map(r => ruleRow(r, plans)));
    shown += data.rules.length;
    cursor = data.next_cursor && data.next_cursor !== cursor ? data.next_cursor : '';
    more.hidden = !cursor;
    status.textContent = !shown ? '' : cursor ? `${shown} rules shown; More shows the next ${RULES_PAGE}.` : plural(shown, 'rule') + '.';
  }
  more.addEventListener('click', () => { if (cursor) page().catch(showError); });
  await page();
}

// ---- plans ----

const PLAN_HEADS = ['Name', 'Limit', 'Burst', 'Description', 'Set', 'Version', ''];

async function plansPage() {
  const data = await api('GET', '/plans');
  const rows = data.plans.map(p => h('tr', { 'data-name': p.name },
    h('td', { class: 'mono' }, p.name), h('td', {}, limitText(p), globalBadge(p)), h('td', { class: 'num' }, burstText(p)),
    h('td', { class: 'desc' }, p.description || ''), h('td', { class: 'mono', 'data-set': p.set || '' }, p.set || '—'), h('td', { class: 'num' }, p.version),
    h('td', { class: 'links' }, h('a', { href: '#/plans/' + enc(p.name), 'aria-label': 'Edit plan ' + p.name }, 'edit'), ' · ',
      h('a', { href: '#/history/plan/' + enc(p.name), 'aria-label': 'History of plan ' + p.name }, 'history'),
      ' · ', h('a', { href: '#/rules?plan=' + enc(p.name), 'aria-label': 'Rules of plan ' + p.name }, 'rules'))));
  render(h('h1', {}, 'Plans'), h('p', { class: 'toolbar' }, h('a', { class: 'button', href: '#/plans/new', id: 'new-plan' }, 'New plan')),
    table({ id: 'plans' }, PLAN_HEADS, rows, 'No plans.'));
}

// ---- editing a rule or a plan ----

// A kind of record the editor edits: its form's fields, its URLs in the
// API and in the console, its key, and what a new one starts with.
const RULE = {
  kind: 'rule', title: 'Rule', fields: RULE_FIELDS, collection: '/rules', list: '#/rules',
  path: id => '/rules/' + enc(id), page: id => '#/rules/' + enc(id), history: id => '#/history/rule/' + enc(id),
  keyOf: r => r.id, blank: { api: '', route: '*', subject: '*', enabled: true }, fixed: [],
};
const PLAN = {
  kind: 'plan', title: 'Plan', fields: PLAN_FIELDS, collection: '/plans', list: '#/plans',
  path: n => '/plans/' + enc(n), page: n => '#/plans/' + enc(n), history: n => '#/history/plan/' + enc(n),
  keyOf: p => p.name, blank: {}, fixed: ['name'],
};

// The fields the server owns: never compared, never sent back.
const SERVER_FIELDS = ['id', 'version', 'created_at', 'updated_at'];

// same says whether two values of a field mean the same to the API:
// absent, null and "" are all "not set".
function same(a, b) { return canon(a) === canon(b); }
function canon(v) { return v === undefined || v === null || v === '' ? '' : JSON.stringify(v); }
function showValue(v) { return canon(v) === '' ? '—' : typeof v === 'object' ? JSON.stringify(v) : String(v); }

// formValues is what a form showing obj reads back (readForm), without the
// operator touching it: the yardstick for what they changed.
function formValues(fields, obj) {
  return readForm(h('form', {}, formFields(fields, obj)), fields);
}

// edits returns the fields whose value in now differs from initial (both
// as readForm reads them), as a Map of field to new value (undefined: cleared).
function edits(fields, initial, now) {
  const m = new Map();
  for (const f of fields) if (!same(initial[f.name], now[f.name])) m.set(f.name, now[f.name]);
  return m;
}

// withEdits is record, less the server's fields, with changes applied: the
// body of a PUT. Fields the form does not show (a newer API's) go back as
// they were read, so a save never drops them.
function withEdits(record, changes) {
  const out = {};
  for (const [k, v] of Object.entries(record)) if (!SERVER_FIELDS.includes(k)) out[k] = v;
  for (const [k, v] of changes) {
    if (v === undefined) delete out[k];
    else out[k] = v;
  }
  return out;
}

// merge is the three-way merge after a 412: base is the version the
// operator's changes were made on, current the one stored now. Each field
// either side changed is one of
//   mine      changed only by the operator: reapplied on current
//   theirs    changed only by someone else: kept
//   agreed    changed by both to the same value
//   conflict  changed by both to different values: never reapplied
//
// The fields that together decide what is admitted are one value, the
// rate: when both sides changed any of them and the rates differ, every
// rate field either side changed is a conflict. One side raising the cost
// to 100 and the other lowering the limit must not merge into a rate 100
// times stricter than either chose; nor a plan with the other's limit.
const RATE = ['limit', 'period', 'burst', 'cost', 'plan', 'kind', 'anchor', 'min_remaining'];
const RATE_NOTE = 'Limit, period, burst, cost, plan, kind, anchor and min remaining are one rate. ';
function merge(base, current, changes) {
  const keys = [...new Set([...Object.keys(base), ...Object.keys(current)])].filter(k => !SERVER_FIELDS.includes(k));
  const rows = [];
  const myRate = k => changes.has(k) ? changes.get(k) : base[k];
  const rateConflict = RATE.some(k => changes.has(k)) && RATE.some(k => !same(base[k], current[k])) &&
    RATE.some(k => !same(myRate(k), current[k]));
  const inRate = k => rateConflict && RATE.includes(k);
  for (const k of keys) {
    if (!inRate(k) && !changes.has(k) && !same(base[k], current[k])) rows.push({ field: k, outcome: 'theirs' });
  }
  for (const [k, v] of changes) {
    if (inRate(k)) continue;
    const outcome = same(base[k], current[k]) ? 'mine' : same(v, current[k]) ? 'agreed' : 'conflict';
    rows.push({ field: k, outcome, mine: v });
  }
  if (rateConflict) {
    for (const k of RATE) {
      if (changes.has(k) || !same(base[k], current[k])) rows.push({ field: k, outcome: 'conflict', mine: myRate(k), rate: true });
    }
  }
  const of = o => rows.filter(r => r.outcome === o).map(r => r.field);
  return { rows, mine: of('mine'), theirs: of('theirs'), conflicts: of('conflict') };
}

const OUTCOMES = {
  mine: 'yours: reapplied', theirs: 'theirs: kept', agreed: 'both, the same', conflict: 'both changed it: not reapplied',
};

// conflictPanel shows, after a 412, what the operator loaded, what is
// stored now and what they changed, field by field with the merge's
// outcome, and the actions that fit: reapply when nothing conflicts,
// otherwise editing on the current version.
function conflictPanel(spec, base, current, m, actions, what) {
  const fieldLabel = k => (spec.fields.find(f => f.name === k) || { label: k }).label;
  const rows = m.rows.map(r => h('tr', { 'data-field': r.field, 'data-outcome': r.outcome, class: r.outcome },
    h('td', { 'data-label': 'field' }, fieldLabel(r.field)),
    h('td', { 'data-label': `you loaded (v${base.version})` }, showValue(base[r.field])),
    h('td', { 'data-label': `now (v${current.version})`, class: r.outcome === 'mine' ? '' : 'theirs' }, showValue(current[r.field])),
    h('td', { 'data-label': 'yours', class: r.outcome === 'theirs' ? '' : 'mine' }, r.outcome === 'theirs' ? '' : showValue(r.mine)),
    h('td', { 'data-label': 'outcome' }, r.outcome === 'mine' && m.conflicts.length ? 'yours: carried over' : OUTCOMES[r.outcome])));
  const names = fs => fs.map(fieldLabel).join(', ');
  let advice;
  if (what === 'delete') {
    advice = 'Check what changed before deleting it.';
  } else if (m.conflicts.length) {
    advice = `You and someone else both changed ${names(m.conflicts)}: nothing was saved. ` +
      `Edit on version ${current.version} to decide; your other changes${m.mine.length ? ' (' + names(m.mine) + ')' : ''} are carried over.`;
  } else if (m.mine.length) {
    advice = `Reapplying saves only what you changed (${names(m.mine)}) on top of version ${current.version}` +
      (m.theirs.length ? `, keeping theirs (${names(m.theirs)}).` : '.');
  } else {
    advice = 'Everything you changed is already stored.';
  }
  return h('div', { class: 'panel conflict', id: 'conflict' },
    h('h2', {}, 'Changed by someone else'),
    h('p', {}, `This ${spec.kind} was updated to version ${current.version} after you opened version ${base.version}. `, advice),
    h('div', { class: 'scroll' }, h('table', { class: 'diff cards' },
      h('thead', {}, h('tr', {}, ['field', `you loaded (v${base.version})`, `now (v${current.version})`, 'yours', ''].map(t => h('th', {}, t)))),
      h('tbody', {}, rows))),
    h('p', { class: 'actions' }, actions));
}

// gone shows that a record does not exist (deleted, or never created),
// with the way to its history, which outlives it.
function gone(spec, key) {
  render(h('h1', {}, spec.title + ' ', h('code', {}, key)),
    h('p', { id: 'gone' }, `There is no ${spec.kind} ${key}: it was deleted, or never existed. `,
      h('a', { href: spec.history(key), id: 'gone-history' }, 'Its history'), ' lists every write to it.'),
    h('p', {}, h('a', { class: 'button secondary', href: spec.list }, 'Back')));
}

// deletedFlash is the flash after a delete: the history stays reachable.
function deletedFlash(spec, key) {
  return [`Deleted ${spec.kind} ${key}. `, h('a', { href: spec.history(key), id: 'deleted-history' }, 'Its history'), ' remains.'];
}

// editor shows the form of the rule or plan key (a new one when null) and
// saves it. A save sends If-Match with the version the form shows and
// only changes the fields the operator changed; on a 412 it merges
// (merge) rather than overwriting what someone else saved meanwhile.
async function editor(spec, key) {
  let loaded = null;
  if (key) {
    try {
      loaded = await api('GET', spec.path(key));
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return gone(spec, key);
      throw err;
    }
  }
  show(loaded, loaded || spec.blank, new Map());

  // show renders the form for base (null: a new record) holding values;
  // notes are field → text shown under the field.
  function show(base, values, notes) {
    const slot = h('div');
    const form = h('form', { class: 'grid', id: spec.kind + '-form', novalidate: true },
      formFields(spec.fields, values, base ? spec.fixed : []),
      h('div', { class: 'actions' },
        h('button', { type: 'submit', id: 'save' }, base ? 'Save' : 'Create'),
        base && h('button', { type: 'button', class: 'danger', id: 'delete', onclick: () => del(base) }, 'Delete'),
        base && h('a', { class: 'button secondary', href: spec.history(key) }, 'History'),
        h('a', { class: 'button secondary', href: spec.list }, 'Back')));
    for (const [k, text] of notes) {
      const slot_ = form.querySelector('[data-error-for="' + CSS.escape(k) + '"]');
      slot_.after(h('div', { class: 'field-note', 'data-note-for': k }, text));
    }
    const initial = base && formValues(spec.fields, base);
    form.addEventListener('submit', e => { e.preventDefault(); save(); });

    async function save() {
      clearErrors(form);
      const mine = readForm(form, spec.fields);
      if (!base) {
        try {
          const created = await api('POST', spec.collection, { body: mine });
          go(spec.page(spec.keyOf(created)), `Created ${spec.kind} ${spec.keyOf(created)}.`);
        } catch (err) { failed(err); }
        return;
      }
      const changes = edits(spec.fields, initial, mine);
      if (!changes.size) {
        flash('ok', 'Nothing changed: nothing to save.');
        return;
      }
      await put(base, changes);
    }

    // put saves changes on top of on, the version they are applied to.
    async function put(on, changes) {
      try {
        const updated = await api('PUT', spec.path(key), { body: withEdits(on, changes), ifMatch: on.version });
        const reapplied = [...changes].filter(([k, v]) => !same(on[k], v)).map(([k]) => k);
        go(spec.page(key), 'Saved: version ' + updated.version + '.' +
          (on === base ? '' : ' Reapplied ' + reapplied.join(', ') + ' on version ' + on.version + '.'));
      } catch (err) {
        if (err instanceof ApiError && err.status === 412) return conflict(on, changes);
        failed(err);
      }
    }

    async function conflict(on, changes) {
      let current;
      try {
        current = await api('GET', spec.path(key));
      } catch (err) { return failed(err); }
      const m = merge(on, current, changes);
      flash('error', `Not saved: the ${spec.kind} changed since you opened it.`);
      const actions = [];
      if (!m.conflicts.length && m.mine.length) {
        actions.push(h('button', { id: 'reapply', onclick: () => { slot.replaceChildren(); put(current, changes); } },
          'Reapply my changes on version ' + current.version));
      }
      if (m.conflicts.length) {
        const keep = new Map([...changes].filter(([k]) => !m.conflicts.includes(k)));
        const row = k => m.rows.find(r => r.field === k) || {};
        const notes = new Map(m.conflicts.map(k => [k, (row(k).rate ? RATE_NOTE : '') +
          'Yours was ' + showValue(row(k).mine) + '; this is version ' + current.version + '\'s. Set the value you mean.']));
        actions.push(h('button', { id: 'edit-current', onclick: () => { flash(); show(current, formValuesOf(current, keep), notes); } },
          'Edit on version ' + current.version));
      }
      actions.push(h('button', { class: 'secondary', id: 'reload', onclick: () => go(spec.page(key), 'Loaded version ' + current.version + '.') },
        'Discard mine, load version ' + current.version));
      slot.replaceChildren(conflictPanel(spec, on, current, m, actions));
    }

    // formValuesOf is record with changes, as the form should show it.
    function formValuesOf(record, changes) {
      const out = { ...record };
      for (const [k, v] of changes) out[k] = v;
      return out;
    }

    async function del(on) {
      if (!confirm(`Delete ${spec.kind} ${key} (version ${on.version})?`)) return;
      try {
        await api('DELETE', spec.path(key), { ifMatch: on.version });
        go(spec.list, deletedFlash(spec, key));
      } catch (err) {
        if (err instanceof ApiError && err.status === 412) {
          let current;
          try { current = await api('GET', spec.path(key)); } catch (e) { return failed(e); }
          flash('error', `Not deleted: the ${spec.kind} changed since you opened it.`);
          slot.replaceChildren(conflictPanel(spec, on, current, merge(on, current, new Map()), [
            h('button', { class: 'danger', id: 'delete-current', onclick: () => del(current) }, 'Delete version ' + current.version),
            h('button', { class: 'secondary', id: 'reload', onclick: () => go(spec.page(key), 'Loaded version ' + current.version + '.') },
              'Load version ' + current.version)], 'delete'));
          return;
        }
        failed(err);
      }
    }

    // failed shows an error: a 400's field errors next to their fields, a
    // 404 (deleted meanwhile) with the way to the history; the form keeps
    // the operator's values either way.
    function failed(err) {
      if (err instanceof ApiError && err.status === 400) return showFieldErrors(form, err);
      // A taken scope: the 409 names the rule holding it; link to it.
      const holder = err instanceof ApiError && err.status === 409 && spec === RULE && (err.message.match(/^Rule ([0-9a-f-]{36}) /) || [])[1];
      if (holder) {
        return flash('error', [err.message + ' ', h('a', { href: RULE.page(holder), id: 'scope-holder' }, 'Open rule ' + holder.slice(0, 8) + '…')]);
      }
      if (err instanceof ApiError && err.status === 404 && base) {
        slot.replaceChildren();
        return flash('error', [`Not saved: the ${spec.kind} was deleted since you opened it; your values are still in the form. `,
          h('a', { href: spec.history(key) }, 'Its history'), ' shows who deleted it.']);
      }
      showError(err);
    }

    // A set's record is its file's: say so before the operator edits it.
    const owned = base && base.set && h('p', { class: 'panel owned', id: 'owned-by-set', 'data-set': base.set },
      `This ${spec.kind} belongs to set `, h('code', {}, base.set), ', written by ', h('code', {}, 'sluice apply'),
      `: the next apply of ${base.set} reverts a change made here, and a plan saved before it (apply --plan) then fails. `,
      'For an incident, change it here and in the file.');
    render(h('h1', {}, base ? spec.title + ' ' : 'New ' + spec.kind, base && h('code', {}, key),
      base && h('span', { class: 'muted', id: 'version' }, ' version ' + base.version),
      base && expired(base) && h('span', { class: 'muted', id: 'expired' }, ', expired ', when(base.expires_at, utcSecond(base.expires_at)))),
    owned, slot, form);
    if (document.body.classList.contains('read-only')) lockForm(form);
  }
}

// ---- times ----

// utc is t as the CLI prints it: RFC 3339 in UTC, whole seconds.
function utc(t) { return new Date(t).toISOString().replace(/\.\d+Z$/, 'Z'); }

// utcSecond is "2027-01-01 00:00:05 UTC".
function utcSecond(t) { return new Date(t).toISOString().slice(0, 19).replace('T', ' ') + ' UTC'; }

// plural is "1 rule", "2 rules".
function plural(n, word) { return n + ' ' + word + (n === 1 ? '' : 's'); }

// utcMinute is "2027-01-01 00:00 UTC".
function utcMinute(t) { return new Date(t).toISOString().slice(0, 16).replace('T', ' ') + ' UTC'; }

// when is a <time> showing text (default utc(t)), with the local time on
// hover.
function when(t, text) {
  const d = new Date(t);
  return h('time', { datetime: d.toISOString(), title: d.toLocaleString() + ' (your time)' }, text ?? utc(d));
}

// duration is a short length of time: 850 ms, 42 s, 12 min, 5 h, 3 d.
function duration(ms) {
  if (ms < 1000) return ms + ' ms';
  const s = Math.round(ms / 1000);
  if (s < 120) return s + ' s';
  if (s < 7200) return Math.round(s / 60) + ' min';
  if (s < 172800) return Math.round(s / 3600) + ' h';
  return Math.round(s / 86400) + ' d';
}

// words turns a JSON key into a column name: min_remaining → Min remaining.
function words(key) {
  const s = key.replace(/_/g, ' ');
  return s.charAt(0).toUpperCase() + s.slice(1);
}

// ---- audit history ----

async function historyPage(kind, id) {
  const spec = kind === 'rule' ? RULE : PLAN;
  const data = await api('GET', (kind === 'rule' ? '/rules/' : '/plans/') + enc(id) + '/history');
  const label = k => (spec.fields.find(f => f.name === k) || { label: words(k) }).label;
  const entries = data.entries.slice().reverse().map(e => {
    const before = e.before || {}, after = e.after || {};
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])]
      .filter(k => !SERVER_FIELDS.includes(k) && !same(before[k], after[k]));
    const version = e.action === 'update' ? `v${before.version} → v${after.version}` : `v${(e.after || e.before || {}).version ?? '?'}`;
    // One tbody an entry in one table: every entry has the same columns.
    return h('tbody', { class: 'entry', 'data-action': e.action },
      h('tr', { class: 'entry-head' }, h('td', { colspan: 3 },
        h('span', { class: 'badge ' + e.action }, e.action), ' ', version, ', ', when(e.at), ' by ', h('code', {}, e.actor || 'unknown'))),
      keys.map(k => h('tr', { 'data-field': k }, h('td', {}, label(k)),
        h('td', { class: 'before' }, showValue(before[k])), h('td', { class: 'after' }, showValue(after[k])))));
  });
  const last = data.entries[data.entries.length - 1];
  const latest = last && (last.after || last.before) || {};
  const deleted = last && last.action === 'delete';
  const what = kind === 'rule' ? [latest.api, latest.route, latest.subject].filter(Boolean).join(' ') : '';
  render(h('h1', {}, 'History of ', kind, ' ', h('code', {}, id)),
    h('p', { id: 'history-of' }, what && h('span', { class: 'mono' }, what), what && latest.description && ': ', latest.description || ''),
    h('p', { id: 'history-status' }, deleted
      ? ['Deleted ', when(last.at), ' by ', h('code', {}, last.actor || 'unknown'), '; the history remains.']
      : h('a', { href: spec.page(id) }, 'Open the ' + kind)),
    h('p', { class: 'muted' }, 'Newest first. Every write through the admin API, with who made it. Times in UTC; hover for yours.'),
    entries.length
      ? h('table', { class: 'diff history', id: 'history' },
        h('colgroup', {}, h('col', { class: 'c-field' }), h('col'), h('col')),
        h('thead', {}, h('tr', {}, h('th', {}, 'Field'), h('th', {}, 'Before'), h('th', {}, 'After'))), entries)
      : h('p', { id: 'history', class: 'muted' }, 'No entries.'));
}

// ---- naming rules ----

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

// ruleCache holds, per rule id, the promise of the rule (null when it
// cannot be read; {deleted: true} when it is gone). A page clears it when
// it opens; its refreshes reuse it.
let ruleCache = new Map();

function ruleInfo(id) {
  if (!UUID.test(id)) return Promise.resolve(null);
  if (!ruleCache.has(id)) {
    ruleCache.set(id, api('GET', '/rules/' + enc(id)).catch(err => {
      if (err instanceof ApiError && err.status === 404) return { deleted: true };
      ruleCache.delete(id); // try again on the next refresh
      return null;
    }));
  }
  return ruleCache.get(id);
}

// ruleName names a rule for people: its api, route and subject, and its
// description below, linked to the rule (to its history once deleted);
// the id is on hover. "default" is the configured default limit, "(other)"
// the rules past the statistics' cap.
async function ruleName(id) {
  if (id === 'default') return h('span', { class: 'rule-name' }, 'default limit');
  if (id === '(other)') return h('span', { class: 'rule-name muted' }, 'other rules');
  const r = await ruleInfo(id);
  if (!r) return h('a', { href: '#/rules/' + enc(id), class: 'mono rule-name' }, id);
  if (r.deleted) {
    return h('span', { class: 'rule-name' }, h('a', { href: '#/history/rule/' + enc(id), title: id }, 'deleted rule'),
      h('span', { class: 'muted' }, ' ' + id.slice(0, 8)));
  }
  return h('span', { class: 'rule-name', 'data-rule-name': id },
    h('a', { href: '#/rules/' + enc(id), title: 'rule ' + id, class: 'mono' },
      r.api + ' ' + r.route + (r.subject !== '*' ? ' ' + r.subject : '') + (r.dimension ? ' (' + r.dimension + ')' : '')),
    r.description && h('span', { class: 'desc muted' }, r.description));
}

// ---- a subject ----

// The fields of a subject's limits that have a column or a cell of
// their own; any other field the API adds shows as a column named in words.
const SHOWN_LIMIT_KEYS = ['rule', 'api', 'route', 'subject', 'plan', 'limit', 'period', 'burst', 'cost', 'failure_mode', 'mode',
  'remaining', 'reset_ms', 'kind', 'anchor', 'used', 'resets_at', 'global', 'expires_at', 'denies', 'frees_at', 'in_flight'];

// held is a subject opened from Top offenders after a find: kept in this
// page, never in the URL (it may be an API key).
let held = null;

// isBlock says whether limit l is a block of subject s (a rule of limit 0
// naming it), which Unblock deletes.
function isBlock(l, s) { return l.limit === 0 && l.subject === s && l.rule !== 'default' && !l.plan; }

// denial says whether l denies the subject's next request and when it
// frees: "denies, frees 12:44:10 UTC (in 5 min)", "denies until deleted".
function denial(l, now) {
  if (!l.denies) return 'no';
  if (l.kind === 'concurrency') return 'denies: every slot is in flight';
  if (!l.frees_at) return 'denies until deleted';
  const ms = new Date(l.frees_at) - now;
  return ['denies, frees ', when(l.frees_at, utcSecond(l.frees_at)), ms > 0 && ms < TWO_DAYS ? ' (in ' + duration(ms) + ')' : ''];
}

const TWO_DAYS = 48 * 3600 * 1000;

// refill says when a bucket is full again, or when a quota's window
// resets: "full", "full in 42 s", "resets 2027-01-01 00:00 UTC (in 5 h)".
function refill(l, now) {
  if (l.kind === 'concurrency') return 'a slot frees as a request ends';
  if (l.kind === 'quota' || l.resets_at) {
    const at = l.resets_at ? new Date(l.resets_at) : new Date(now + l.reset_ms);
    return ['resets ', when(at, utcMinute(at)), l.reset_ms < TWO_DAYS ? ' (in ' + duration(l.reset_ms) + ')' : ''];
  }
  if (!l.reset_ms || l.remaining >= l.burst) return 'full';
  const at = new Date(now + l.reset_ms);
  if (l.reset_ms >= TWO_DAYS) return ['full ', when(at, utcMinute(at))];
  return ['full in ', when(at, duration(l.reset_ms))];
}

async function subjectPage() {
  ruleCache = new Map();
  const p = params();
  const form = h('form', { class: 'toolbar', id: 'subject-form', onsubmit: e => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const f of ['s', 'api', 'route']) if (form.elements[f].value.trim()) q.set(f, form.elements[f].value.trim());
    go('#/subject?' + q);
  } },
  h('label', {}, 'subject', h('input', { name: 's', value: p.get('s') || '', size: 24, required: true })),
  h('label', {}, 'api (optional)', h('input', { name: 'api', value: p.get('api') || '', size: 12 })),
  h('label', {}, 'route (optional)', h('input', { name: 'route', value: p.get('route') || '', size: 18 })),
  h('button', { type: 'submit', id: 'look' }, 'Show'));
  const s = p.get('s') || (p.get('held') && held) || '';
  if (s && !p.get('s')) form.elements.s.value = s;
  if (!s) {
    render(h('h1', {}, 'Subject'), form, h('p', { class: 'muted' }, 'The rules that apply to a subject, its live remaining tokens and reset times; reset it from here.'));
    return;
  }
  const out = h('div', { id: 'limits' });
  const live = h('input', { type: 'checkbox', checked: true, id: 'live' });
  const reset = h('button', { class: 'danger', id: 'reset', onclick: async () => {
    if (!confirm('Reset every bucket of ' + s + (p.get('api') ? ' on API ' + p.get('api') : '') + '?')) return;
    try {
      await api('DELETE', '/subjects/' + enc(s) + '/buckets', { query: { api: p.get('api') || '' } });
      flash('ok', 'Reset the buckets of ' + s + '.');
      await load();
    } catch (err) { showError(err); }
  } }, 'Reset buckets');
  // Block: a rule of limit 0 on the API (every API: *) that expires, the
  // reason its description; blocking again moves the end of the block.
  const reason = h('input', { name: 'reason', id: 'block-reason', size: 28, autocomplete: 'off', 'aria-describedby': 'e-reason' });
  const untilIn = h('input', { name: 'until', id: 'block-until-at', type: 'datetime-local', step: 1, 'aria-describedby': 'e-until' });
  const blockForm = h('form', { class: 'toolbar panel', id: 'block-form', novalidate: true, onsubmit: e => { e.preventDefault(); blockUntil(); } },
    h('label', {}, 'reason (kept in the audit log)', reason),
    h('button', { type: 'button', class: 'danger', id: 'block-15m', onclick: () => block(new Date(Date.now() + 15 * 60e3)) }, 'Block 15 min'),
    h('button', { type: 'button', class: 'danger', id: 'block-1h', onclick: () => block(new Date(Date.now() + 3600e3)) }, 'Block 1 h'),
    h('label', {}, 'or until (your time)', untilIn),
    h('button', { type: 'submit', class: 'danger', id: 'block-until' }, 'Block until then'),
    h('div', { class: 'field-error', id: 'e-reason', 'data-error-for': 'reason', hidden: true }),
    h('div', { class: 'field-error', id: 'e-until', 'data-error-for': 'until', hidden: true }));
  let last = [];
  function blockUntil() {
    const at = untilIn.value ? new Date(untilIn.value) : null;
    if (!at || isNaN(at) || at <= new Date()) {
      return showFieldErrors(blockForm, new ApiError(400, { detail: 'Not blocked.', errors: [{ field: 'until', reason: 'must be a time after now' }] }));
    }
    return block(at);
  }
  async function block(at) {
    clearErrors(blockForm);
    const why = reason.value.trim();
    if (!why) return showFieldErrors(blockForm, new ApiError(400, { detail: 'Not blocked.', errors: [{ field: 'reason', reason: 'say why: the audit log keeps it' }] }));
    const scope = p.get('api') || '*';
    const rule = { api: scope, route: '*', subject: s, limit: 0, period: '1m', expires_at: utc(new Date(Math.ceil(at / 1000) * 1000)), description: 'Blocked: ' + why };
    try {
      const cur = last.find(l => isBlock(l, s) && l.api === scope && l.route === '*');
      if (cur) {
        const r = await api('GET', '/rules/' + enc(cur.rule));
        await api('PUT', '/rules/' + enc(cur.rule), { body: { ...withEdits(r, new Map()), ...rule }, ifMatch: r.version });
      } else {
        await api('POST', '/rules', { body: rule });
      }
      flash('ok', ['Blocked ', h('code', {}, s), (scope === '*' ? ' on every API' : ' on API ' + scope) + ' until ', when(rule.expires_at, utcSecond(rule.expires_at)),
        '. Unblock in its row ends it now.']);
      reason.value = '';
      await load();
    } catch (err) { showError(err); }
  }
  async function unblock(id) {
    if (!confirm('Unblock ' + s + ' (delete rule ' + id.slice(0, 8) + ')?')) return;
    try {
      const r = await api('GET', '/rules/' + enc(id));
      await api('DELETE', '/rules/' + enc(id), { ifMatch: r.version });
      flash('ok', ['Unblocked ', h('code', {}, s), '. ', ...deletedFlash(RULE, id)]);
      await load();
    } catch (err) { showError(err); }
  }
  async function load() {
    const data = await api('GET', '/subjects/' + enc(s) + '/limits', { query: { api: p.get('api') || '', route: p.get('route') || '' } });
    last = data.limits;
    const now = Date.now();
    const quota = data.limits.some(l => l.used !== undefined);
    const conc = data.limits.some(l => l.in_flight !== undefined);
    const extra = [...new Set(data.limits.flatMap(l => Object.keys(l)))].filter(k => !SHOWN_LIMIT_KEYS.includes(k));
    // A global rule's budget: what every Region used, this Region's share
    // (its regional bucket's use, a quota's only) and its leased unspent.
    const global = data.limits.some(l => l.global);
    const heads = ['Rule', 'Limit', 'Burst', 'Mode', 'Remaining', 'Denies', ...(quota ? ['Used'] : []), ...(conc ? ['In flight'] : []), 'Full or reset',
      ...(global ? ['Global used', 'This Region', 'Leased unspent'] : []), ...extra.map(words)];
    const names = await Promise.all(data.limits.map(l => ruleName(l.rule)));
    const rows = data.limits.map((l, i) => h('tr', { 'data-rule': l.rule, class: l.denies ? 'denies' : undefined },
      h('td', {}, names[i], isBlock(l, s) && h('button', { class: 'secondary', 'data-unblock': l.rule, onclick: () => unblock(l.rule),
        'aria-label': 'Unblock ' + s + (l.api === '*' ? ' on every API' : ' on API ' + l.api) }, 'Unblock')),
      h('td', {}, limitText(l), l.anchor && h('span', { class: 'muted' }, ', windows from ', when(l.anchor, utcMinute(l.anchor)))),
      h('td', { class: 'num' }, l.kind === 'quota' || l.kind === 'concurrency' ? '—' : l.burst),
      h('td', {}, l.mode),
      h('td', { class: 'num', 'data-remaining': l.remaining }, l.remaining),
      h('td', { 'data-denies': l.denies ? 'yes' : 'no' }, denial(l, now)),
      quota && h('td', { class: 'num' }, l.used ?? ''),
      conc && h('td', { class: 'num', 'data-in-flight': l.in_flight ?? '' }, l.in_flight === undefined ? '' : l.in_flight + ' of ' + l.limit),
      h('td', { 'data-refill': '' }, refill(l, now)),
      global && (l.global ? [
        h('td', { class: 'num', 'data-global-used': l.global.used ?? '' }, l.global.used ?? l.global.error),
        h('td', { class: 'num', 'data-region-used': l.used ?? '' }, l.used ?? '—'),
        h('td', { class: 'num', 'data-leased': l.global.leased ?? '' }, l.global.leased ?? '—'),
      ] : [h('td', {}, '—'), h('td', {}, '—'), h('td', {}, '—')]),
      extra.map(k => h('td', { 'data-extra': k }, typeof l[k] === 'object' ? JSON.stringify(l[k]) : l[k] ?? ''))));
    out.replaceChildren(table({ id: 'limits-table' }, heads, rows, 'No rule applies to this subject.'),
      h('p', { class: 'muted' }, 'Updated ', when(now), '.'));
  }
  render(h('h1', {}, 'Subject ', h('code', {}, s)), form,
    h('p', { class: 'toolbar' }, reset, h('label', {}, h('span', {}, 'live (every 2 s)'), live)), blockForm, out);
  every(2000, () => { if (live.checked) load().catch(showError); });
  await load();
}

// ---- top offenders ----

// WINDOWS are the windows offered, up to the source's max_window (locally
// 15m; Contributor Insights 24h).
const WINDOWS = ['1m', '5m', '15m', '1h', '6h', '24h'];
const DEFAULT_WINDOW = '5m';

// minutes reads "15m", "24h" or "5m0s" as minutes.
function minutes(w) {
  let n = 0;
  for (const [, v, u] of String(w).matchAll(/(\d+)([hms])/g)) n += u === 'h' ? 60 * v : u === 'm' ? +v : v / 60;
  return n;
}

// Presentation attributes do not resolve CSS variables: the colours of
// console.css's --deny, --shadow and --failopen.
const COLORS = [['denied', '#c8372d'], ['shadow_denied', '#e08a1e'], ['fail_open', '#7b3fc4']];

// hhmm is a time's UTC hour and minute.
function hhmm(t) { return new Date(t).toISOString().slice(11, 16); }

// chart draws the series as stacked bars, W user units wide: the width it
// is shown at, so that its text is drawn at its size, not stretched (the
// SVG scales uniformly should the page be resized).
function chart(series, W) {
  const H = 180, pad = 34, base = H - 20;
  const kinds = COLORS;
  const max = Math.max(1, ...series.map(p => kinds.reduce((a, [k]) => a + (p[k] || 0), 0)));
  const bw = (W - pad - 4) / Math.max(1, series.length);
  const svg = h('svg:svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'denials over the window', id: 'chart' });
  svg.append(h('svg:line', { x1: pad, y1: base, x2: W, y2: base, stroke: '#d9dde5' }));
  svg.append(h('svg:text', { x: pad - 4, y: 12, 'text-anchor': 'end' }, String(max)),
    h('svg:text', { x: pad - 4, y: base, 'text-anchor': 'end' }, '0'));
  series.forEach((p, i) => {
    let y = base;
    for (const [k, color] of kinds) {
      const v = p[k] || 0;
      if (!v) continue;
      const bh = (H - 40) * v / max;
      y -= bh;
      svg.append(h('svg:rect', { x: pad + i * bw + 1, y, width: Math.max(1, bw - 2), height: bh, fill: color, 'data-kind': k },
        h('svg:title', {}, utc(p.t) + ' ' + k.replace('_', ' ') + ': ' + v)));
    }
  });
  // Time labels under the first, middle and last bars, inside the box.
  const ticks = [...new Set([0, Math.floor((series.length - 1) / 2), series.length - 1])].filter(i => i >= 0);
  for (const i of ticks) {
    const anchor = i === 0 && ticks.length > 1 ? 'start' : i === series.length - 1 && i > 0 ? 'end' : 'middle';
    const x = anchor === 'start' ? pad : anchor === 'end' ? W - 2 : pad + (i + 0.5) * bw;
    svg.append(h('svg:text', { x, y: H - 5, 'text-anchor': anchor, 'data-tick': '' }, hhmm(series[i].t)));
  }
  return h('div', {}, svg, h('p', { class: 'legend' }, kinds.map(([k]) => h('span', {}, h('i', { class: 'sw-' + k }), k.replace('_', ' ')))));
}

const TOP_RULE_HEADS = ['Rule', 'API', 'Denied', 'Shadow-denied', 'Fail-open', 'Allowed'];
const TOP_SUBJECT_HEADS = ['Subject (hash)', 'Rule', 'API', 'Denied', ''];

async function statsPage() {
  ruleCache = new Map();
  const p = params();
  const window_ = p.get('window') || DEFAULT_WINDOW;
  const sel = h('select', { name: 'window', id: 'window', onchange: () => go('#/stats?window=' + sel.value) });
  // offer fills the window list with those the source answers.
  function offer(maxWindow) {
    const ok = WINDOWS.filter(w => minutes(w) <= minutes(maxWindow));
    if (!ok.includes(window_)) ok.push(window_); // as asked, to show its error
    sel.replaceChildren(...ok.map(w => h('option', { value: w, selected: w === window_ }, w)));
  }
  offer(DEFAULT_WINDOW);
  const out = h('div', { id: 'stats' });
  async function load() {
    let data;
    try {
      data = await api('GET', '/stats', { query: { window: window_, top: 10 } });
    } catch (err) {
      if (err instanceof ApiError && err.status === 400) {
        const e = (err.problem.errors || [])[0];
        out.replaceChildren(h('p', { class: 'field-error', 'data-error-for': 'window' }, e ? e.field + ' ' + e.reason : err.message));
        // Learn the windows there are from the default one.
        const d = await api('GET', '/stats', { query: { top: 1 } }).catch(() => null);
        if (d && d.max_window) offer(d.max_window);
        return;
      }
      throw err;
    }
    if (data.max_window) offer(data.max_window);
    await draw(data);
  }
  // draw shows data; again, at the new width, when the window is resized.
  let last = null, resizing = 0;
  async function draw(data) {
    last = data;
    const sum = k => data.series.reduce((a, s) => a + (s[k] || 0), 0);
    const maxDenied = Math.max(1, ...data.rules.map(r => r.denied));
    const [ruleNames, subjectRuleNames] = await Promise.all([
      Promise.all(data.rules.map(r => ruleName(r.rule))), Promise.all(data.subjects.map(s => ruleName(s.rule)))]);
    const width = Math.max(280, Math.round(out.getBoundingClientRect().width) || 720);
    out.replaceChildren(
      h('div', { class: 'cards-row' },
        h('div', { class: 'card' }, h('b', { id: 'total-denied' }, sum('denied')), 'denied'),
        h('div', { class: 'card' }, h('b', {}, sum('shadow_denied')), 'shadow-denied'),
        h('div', { class: 'card' }, h('b', {}, sum('fail_open')), 'fail-open'),
        data.series.some(s => s.allowed !== undefined) && h('div', { class: 'card' }, h('b', {}, sum('allowed')), 'allowed')),
      chart(data.series, width),
      h('p', { class: 'muted' }, when(data.from), ' to ', when(data.to), ` (UTC; hover for yours), from ${data.source}, one bar per ${data.step.replace(/0s$/, '').replace(/(\D)0m$/, '$1')}.`),
      h('h2', {}, 'Top limiting rules'),
      table({ id: 'top-rules' }, TOP_RULE_HEADS, data.rules.map((r, i) => h('tr', { 'data-rule': r.rule },
        h('td', {}, ruleNames[i]), h('td', { class: 'mono' }, r.api),
        h('td', { class: 'num' }, r.denied > 0 && h('span', { class: 'bar', 'data-w': Math.round(100 * r.denied / maxDenied) }), r.denied),
        h('td', { class: 'num' }, r.shadow_denied), h('td', { class: 'num' }, r.fail_open), h('td', { class: 'num' }, r.allowed ?? '—'))),
      'Nothing limited in this window.'),
      h('h2', {}, 'Top denied subjects'),
      h('p', { class: 'muted' }, 'Subjects are shown as their hash; an identity (a JWT claim, an upstream authorizer\'s answer, an IP) also as sent when SUBJECT_SHOW names its source. A credential (header, query, API key) never is. Find one to mark it.'),
      findForm, findResult(data),
      table({ id: 'top-subjects' }, TOP_SUBJECT_HEADS, data.subjects.map((s, i) => h('tr', {
        'data-subject': s.subject, class: found && s.subject === found.hash ? 'found' : undefined },
      h('td', { class: 'mono hash' }, s.shown && h('span', { class: 'shown', 'data-shown': '' }, s.shown, ' '), s.shown ? h('span', { class: 'muted' }, s.subject) : s.subject,
        found && s.subject === found.hash && h('span', { class: 'found-as', 'data-found': '' }, ' = ' + found.subject)),
      h('td', {}, subjectRuleNames[i]),
      h('td', { class: 'mono' }, s.api), h('td', { class: 'num' }, s.denied), h('td', { class: 'links' }, openLink(s)))),
      'No subject denied in this window.'));
    // Bar widths through the CSSOM: the page's CSP allows no inline styles.
    out.querySelectorAll('.bar').forEach(b => { b.style.width = (b.dataset.w * 0.8) + 'px'; });
    out.querySelectorAll('.legend i').forEach(i => { i.style.background = (COLORS.find(([k]) => 'sw-' + k === i.className) || [])[1]; });
  }
  // found is the subject the operator looked for and its keyed hash
  // (POST /subjects/find): its rows are marked on every refresh. It stays
  // in this page only, never in the URL: a subject may be an API key.
  let found = null;
  const findInput = h('input', { name: 'subject', id: 'find-subject', size: 24, autocomplete: 'off', spellcheck: 'false', required: true });
  const findForm = h('form', { class: 'toolbar', id: 'find-form', onsubmit: async e => {
    e.preventDefault();
    const subject = findInput.value.trim();
    if (!subject) { found = null; if (last) await draw(last); return; }
    try {
      const r = await api('POST', '/subjects/find', { body: { subject, window: window_, top: 10 } });
      found = { subject, hash: r.hash };
      flash();
      if (last) await draw(last);
    } catch (err) {
      if (err instanceof ApiError && err.status === 400) return showFieldErrors(findForm, err);
      showError(err);
    }
  } },
  h('label', {}, 'find a subject', findInput),
  h('button', { type: 'submit', class: 'secondary', id: 'find' }, 'Find'),
  h('div', { class: 'field-error', 'data-error-for': 'subject', hidden: true }));
  // openLink opens a top subject's view, where it is blocked: by the
  // subject as shown, or as found (held in the page, not the URL); a bare
  // hash cannot be opened (find it first).
  function openLink(s) {
    const q = '&api=' + enc(s.api);
    if (s.shown) return h('a', { href: '#/subject?s=' + enc(s.shown) + q, 'data-open': s.subject, 'aria-label': 'Open subject ' + s.shown + ' to block it' }, 'open · block');
    if (found && s.subject === found.hash) {
      return h('a', { href: '#/subject?held=1' + q, 'data-open': s.subject, 'aria-label': 'Open subject ' + found.subject + ' to block it',
        onclick: () => { held = found.subject; } }, 'open · block');
    }
    return h('span', { class: 'muted' }, 'find it to open');
  }
  // findResult says where the found subject is in data's lists.
  function findResult(data) {
    if (!found) return h('p', { id: 'find-result', hidden: true });
    const at = data.subjects.map((s, i) => [s, i + 1]).filter(([s]) => s.subject === found.hash);
    const who = [h('code', {}, found.subject), ' (hash ', h('code', { class: 'hash' }, found.hash), ')'];
    return h('p', { id: 'find-result', 'data-found': at.length ? 'yes' : 'no' }, who, at.length
      ? [' is ', at.map(([s, rank]) => `#${rank} (${s.denied} denied on ${s.api})`).join(' and '), ' of the top denied subjects.']
      : ` is not among the top ${data.subjects.length < 10 ? 'denied subjects' : '10 denied subjects'} of the last ${window_}.`);
  }
  render(h('h1', {}, 'Top offenders'), h('form', { class: 'toolbar' }, h('label', {}, 'window', sel)), out);
  onWindow('resize', () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => { if (last) draw(last).catch(showError); }, 150);
  });
  // Before the first load: a page left meanwhile stops it with its own.
  every(5000, () => load().catch(showError));
  await load();
}
