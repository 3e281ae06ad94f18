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

let timers = [];
function every(ms, f) { timers.push(setInterval(f, ms)); }
function stopTimers() { timers.forEach(clearInterval); timers = []; }

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
  const resp = await fetch(url, { method, headers, body, cache: 'no-store' });
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = { detail: text.slice(0, 200) }; }
  if (!resp.ok) throw new ApiError(resp.status, data);
  return data;
}

const enc = encodeURIComponent;

function showError(err) {
  if (err instanceof ApiError && err.status === 401) {
    flash('error', 'Not signed in: open the console with the URL sluice printed (…/console/#token=…).');
  } else {
    flash('error', err.message || String(err));
  }
}

// ---- forms: fields, values, problem+json field errors ----

// A field: name (the JSON field), label, type (text, int, select, bool,
// textarea), options, hint. Optional fields are sent only when set.
const RULE_FIELDS = [
  { name: 'api', label: 'API', hint: 'REST API id, or * for every API' },
  { name: 'route', label: 'Route', hint: 'GET /items/{id}, ANY /items, or * for the whole API' },
  { name: 'subject', label: 'Subject', hint: '* (each subject its own bucket) or one subject' },
  { name: 'dimension', label: 'Dimension', hint: 'empty for the default subject, or one of the authorizer\'s DIMENSIONS, such as ip' },
  { name: 'plan', label: 'Plan', hint: 'a plan\'s name instead of limit/period/burst' },
  { name: 'kind', label: 'Kind', type: 'select', options: ['', 'rate', 'quota'], hint: 'rate (token bucket, default) or quota (calendar window)' },
  { name: 'limit', label: 'Limit', type: 'int', hint: 'tokens per period' },
  { name: 'period', label: 'Period', hint: '1s … 365d, such as 1m, 1h, 1d' },
  { name: 'burst', label: 'Burst', type: 'int', hint: 'bucket capacity (rate; default the limit)' },
  { name: 'anchor', label: 'Anchor', hint: 'quota windows start here (RFC 3339, such as 2026-01-01T00:00:00Z)' },
  { name: 'min_remaining', label: 'Min remaining', type: 'int', hint: 'quota: keep this many in reserve' },
  { name: 'cost', label: 'Cost', type: 'int', hint: 'tokens per request (default 1)' },
  { name: 'failure_mode', label: 'Failure mode', type: 'select', options: ['', 'open', 'closed'], hint: 'when Redis fails (default open)' },
  { name: 'mode', label: 'Mode', type: 'select', options: ['', 'enforce', 'shadow'], hint: 'shadow: log, never deny' },
  { name: 'enabled', label: 'Enabled', type: 'bool' },
  { name: 'description', label: 'Description', type: 'textarea' },
];

const PLAN_FIELDS = [
  { name: 'name', label: 'Name', hint: 'rules name it in their plan field' },
  { name: 'kind', label: 'Kind', type: 'select', options: ['', 'rate', 'quota'], hint: 'rate (token bucket, default) or quota (calendar window); its rules have its kind' },
  { name: 'limit', label: 'Limit', type: 'int', hint: 'tokens per period (per window for a quota)' },
  { name: 'period', label: 'Period', hint: 'such as 1m, 1h; a quota: 1d, 1w, 1mo or 1y' },
  { name: 'burst', label: 'Burst', type: 'int', hint: 'bucket capacity (rate; default the limit)' },
  { name: 'description', label: 'Description', type: 'textarea' },
];

function fieldInput(f, value) {
  const common = { name: f.name, id: 'f-' + f.name, 'aria-describedby': 'e-' + f.name };
  if (f.type === 'select') {
    return h('select', common, f.options.map(o => h('option', { value: o, selected: String(value ?? '') === o }, o || '(default)')));
  }
  if (f.type === 'bool') return h('input', { ...common, type: 'checkbox', checked: value !== false });
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

function route() {
  const hash = (location.hash || '#/rules').split('?')[0];
  document.querySelectorAll('[data-nav]').forEach(a => a.classList.toggle('active', hash.startsWith('#/' + a.dataset.nav) ||
    (a.dataset.nav === 'rules' && hash.startsWith('#/history/rule')) || (a.dataset.nav === 'plans' && hash.startsWith('#/history/plan'))));
  for (const [re, page] of routes) {
    const m = hash.match(re);
    if (m) { Promise.resolve(page(m)).catch(showError); return; }
  }
  location.hash = '#/rules';
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
  route();
});

// ---- rules ----

function limitText(r) {
  const s = r.plan ? 'plan ' + r.plan : (r.limit ?? '?') + ' / ' + (r.period || '?');
  return r.kind && r.kind !== 'rate' ? s + ' (' + r.kind + ')' : s;
}

async function rulesPage() {
  const p = params();
  const filters = ['api', 'subject', 'route', 'plan'];
  const form = h('form', { class: 'toolbar', id: 'filters', onsubmit: e => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const f of filters) if (form.elements[f].value.trim()) q.set(f, form.elements[f].value.trim());
    go('#/rules' + (String(q) ? '?' + q : ''));
  } },
  filters.map(f => h('label', {}, f, h('input', { name: f, value: p.get(f) || '', size: 14 }))),
  h('button', { type: 'submit', class: 'secondary', id: 'filter' }, 'Filter'),
  h('a', { class: 'button', href: '#/rules/new', id: 'new-rule' }, 'New rule'));
  const tbody = h('tbody');
  const more = h('button', { class: 'secondary', hidden: true, id: 'more' }, 'More');
  render(h('h1', {}, 'Rules'), form,
    h('table', { id: 'rules' }, h('thead', {}, h('tr', {}, ['API', 'Route', 'Subject', 'Limit', 'Burst', 'Mode', 'Failure', 'Enabled', 'Version', ''].map(t => h('th', {}, t)))), tbody),
    h('p', {}, more));
  // cursor continues the list; '' once the last page is shown (More is
  // then hidden, and a click that still arrives fetches nothing).
  let cursor = '', loading = false;
  async function page() {
    if (loading) return;
    loading = more.disabled = true;
    const q = { limit: 100, cursor };
    for (const f of filters) q[f] = p.get(f) || '';
    let data;
    try {
      data = await api('GET', '/rules', { query: q });
    } finally {
      loading = more.disabled = false;
    }
    for (const r of data.rules) {
      tbody.append(h('tr', { 'data-id': r.id },
        h('td', { class: 'mono' }, r.api), h('td', { class: 'mono' }, r.route), h('td', { class: 'mono' }, r.subject),
        h('td', {}, limitText(r)), h('td', { class: 'num' }, r.burst ?? ''), h('td', {}, r.mode || 'enforce'),
        h('td', {}, r.failure_mode || 'open'), h('td', {}, r.enabled === false ? 'no' : 'yes'), h('td', { class: 'num' }, r.version),
        h('td', {}, h('a', { href: '#/rules/' + enc(r.id), 'data-edit': r.id }, 'edit'), ' · ',
          h('a', { href: '#/history/rule/' + enc(r.id) }, 'history'))));
    }
    if (!tbody.children.length) tbody.append(h('tr', {}, h('td', { colspan: 10, class: 'muted' }, 'No rules match.')));
    cursor = data.next_cursor && data.next_cursor !== cursor ? data.next_cursor : '';
    more.hidden = !cursor;
  }
  more.addEventListener('click', () => { if (cursor) page().catch(showError); });
  await page();
}

// ---- plans ----

async function plansPage() {
  const data = await api('GET', '/plans');
  const rows = data.plans.map(p => h('tr', { 'data-name': p.name },
    h('td', { class: 'mono' }, p.name), h('td', {}, p.limit + ' / ' + p.period), h('td', { class: 'num' }, p.burst ?? ''),
    h('td', {}, p.description || ''), h('td', { class: 'num' }, p.version),
    h('td', {}, h('a', { href: '#/plans/' + enc(p.name) }, 'edit'), ' · ', h('a', { href: '#/history/plan/' + enc(p.name) }, 'history'),
      ' · ', h('a', { href: '#/rules?plan=' + enc(p.name) }, 'rules'))));
  render(h('h1', {}, 'Plans'), h('p', { class: 'toolbar' }, h('a', { class: 'button', href: '#/plans/new', id: 'new-plan' }, 'New plan')),
    h('table', { id: 'plans' }, h('thead', {}, h('tr', {}, ['Name', 'Limit', 'Burst', 'Description', 'Version', ''].map(t => h('th', {}, t)))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No plans.')))));
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
function merge(base, current, changes) {
  const keys = [...new Set([...Object.keys(base), ...Object.keys(current)])].filter(k => !SERVER_FIELDS.includes(k));
  const rows = [];
  for (const k of keys) {
    if (!changes.has(k) && !same(base[k], current[k])) rows.push({ field: k, outcome: 'theirs' });
  }
  for (const [k, v] of changes) {
    const outcome = same(base[k], current[k]) ? 'mine' : same(v, current[k]) ? 'agreed' : 'conflict';
    rows.push({ field: k, outcome, mine: v });
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
    h('div', { class: 'scroll' }, h('table', { class: 'diff' },
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
        const notes = new Map(m.conflicts.map(k => [k, 'Yours was ' + showValue(changes.get(k)) + '; this is version ' + current.version + '\'s. Set the value you mean.']));
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
      if (err instanceof ApiError && err.status === 404 && base) {
        slot.replaceChildren();
        return flash('error', [`Not saved: the ${spec.kind} was deleted since you opened it; your values are still in the form. `,
          h('a', { href: spec.history(key) }, 'Its history'), ' shows who deleted it.']);
      }
      showError(err);
    }

    render(h('h1', {}, base ? spec.title + ' ' : 'New ' + spec.kind, base && h('code', {}, key),
      base && h('span', { class: 'muted', id: 'version' }, ' version ' + base.version)),
    slot, form);
  }
}

// ---- audit history ----

async function historyPage(kind, id) {
  const data = await api('GET', (kind === 'rule' ? '/rules/' : '/plans/') + enc(id) + '/history');
  const show = v => v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
  const entries = data.entries.slice().reverse().map(e => {
    const before = e.before || {}, after = e.after || {};
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])]
      .filter(k => !['updated_at', 'created_at'].includes(k) && show(before[k]) !== show(after[k]));
    return h('div', { class: 'entry', 'data-action': e.action },
      h('header', {}, h('span', { class: 'badge ' + e.action }, e.action), ' ', new Date(e.at).toLocaleString(), ' by ', h('code', {}, e.actor || 'unknown')),
      h('table', { class: 'diff' }, h('thead', {}, h('tr', {}, h('th', {}, 'field'), h('th', {}, 'before'), h('th', {}, 'after'))),
        h('tbody', {}, keys.map(k => h('tr', { 'data-field': k }, h('td', { class: 'mono' }, k),
          h('td', { class: 'before' }, show(before[k])), h('td', { class: 'after' }, show(after[k])))))));
  });
  render(h('h1', {}, 'History of ', kind, ' ', h('code', {}, id)),
    h('p', { class: 'muted' }, 'Newest first. Every write through the admin API, with who made it.'),
    h('p', {}, h('a', { href: kind === 'rule' ? '#/rules/' + enc(id) : '#/plans/' + enc(id) }, 'Open the ' + kind)),
    h('div', { id: 'history' }, entries.length ? entries : h('p', { class: 'muted' }, 'No entries.')));
}

// ---- a subject ----

const KNOWN_LIMIT_KEYS = ['rule', 'api', 'route', 'subject', 'plan', 'limit', 'period', 'burst', 'cost', 'failure_mode', 'mode', 'remaining', 'reset_ms'];

function duration(ms) {
  if (ms < 1000) return ms + ' ms';
  const s = Math.round(ms / 1000);
  if (s < 120) return s + ' s';
  if (s < 7200) return Math.round(s / 60) + ' min';
  return Math.round(s / 3600) + ' h';
}

async function subjectPage() {
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
  const s = p.get('s');
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
  async function load() {
    const data = await api('GET', '/subjects/' + enc(s) + '/limits', { query: { api: p.get('api') || '', route: p.get('route') || '' } });
    // Columns the API adds (quota: used, resets_at, …) show as they come.
    const extra = [...new Set(data.limits.flatMap(l => Object.keys(l)))].filter(k => !KNOWN_LIMIT_KEYS.includes(k));
    const now = Date.now();
    out.replaceChildren(h('table', {},
      h('thead', {}, h('tr', {}, ['Rule', 'API', 'Route', 'Subject', 'Limit', 'Burst', 'Mode', 'Remaining', 'Full again in', ...extra].map(t => h('th', {}, t)))),
      h('tbody', {}, data.limits.length ? data.limits.map(l => h('tr', { 'data-rule': l.rule },
        h('td', {}, l.rule === 'default' ? 'default' : h('a', { href: '#/rules/' + enc(l.rule), class: 'mono' }, l.rule)),
        h('td', { class: 'mono' }, l.api), h('td', { class: 'mono' }, l.route), h('td', { class: 'mono' }, l.subject),
        h('td', {}, limitText(l)), h('td', { class: 'num' }, l.burst), h('td', {}, l.mode),
        h('td', { class: 'num', 'data-remaining': l.remaining }, l.remaining),
        h('td', { title: new Date(now + l.reset_ms).toLocaleTimeString() }, l.reset_ms ? duration(l.reset_ms) + ' (' + new Date(now + l.reset_ms).toLocaleTimeString() + ')' : 'full'),
        extra.map(k => h('td', { 'data-extra': k }, typeof l[k] === 'object' ? JSON.stringify(l[k]) : l[k] ?? ''))))
        : h('tr', {}, h('td', { colspan: 9, class: 'muted' }, 'No rule applies to this subject.')))),
    h('p', { class: 'muted' }, 'Updated ' + new Date().toLocaleTimeString() + '.'));
  }
  render(h('h1', {}, 'Subject ', h('code', {}, s)), form,
    h('p', { class: 'toolbar' }, reset, h('label', {}, h('span', {}, 'live (every 2 s)'), live)), out);
  await load();
  every(2000, () => { if (live.checked) load().catch(showError); });
}

// ---- top offenders ----

const WINDOWS = ['1m', '5m', '15m', '1h', '6h', '24h'];
// Presentation attributes do not resolve CSS variables: the colours of
// console.css's --deny, --shadow and --failopen.
const COLORS = [['denied', '#c8372d'], ['shadow_denied', '#e08a1e'], ['fail_open', '#7b3fc4']];

function chart(series) {
  const W = 720, H = 180, pad = 28;
  const kinds = COLORS;
  const max = Math.max(1, ...series.map(p => kinds.reduce((a, [k]) => a + (p[k] || 0), 0)));
  const bw = (W - pad - 8) / Math.max(1, series.length);
  const svg = h('svg:svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': 'denials over the window', id: 'chart' });
  svg.append(h('svg:line', { x1: pad, y1: H - 20, x2: W, y2: H - 20, stroke: '#d9dde5' }));
  svg.append(h('svg:text', { x: 2, y: 12 }, String(max)), h('svg:text', { x: 2, y: H - 22 }, '0'));
  series.forEach((p, i) => {
    let y = H - 20;
    for (const [k, color] of kinds) {
      const v = p[k] || 0;
      if (!v) continue;
      const bh = (H - 40) * v / max;
      y -= bh;
      svg.append(h('svg:rect', { x: pad + i * bw + 1, y, width: Math.max(1, bw - 2), height: bh, fill: color, 'data-kind': k },
        h('svg:title', {}, new Date(p.t).toLocaleTimeString() + ' ' + k.replace('_', ' ') + ': ' + v)));
    }
    if (i === 0 || i === series.length - 1 || (series.length > 6 && i === Math.floor(series.length / 2))) {
      svg.append(h('svg:text', { x: pad + i * bw, y: H - 6 }, new Date(p.t).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })));
    }
  });
  return h('div', {}, svg, h('p', { class: 'legend' }, kinds.map(([k, c]) => h('span', {}, h('i', { class: 'sw-' + k }), k.replace('_', ' ')))));
}

async function statsPage() {
  const p = params();
  const window_ = p.get('window') || '5m';
  const sel = h('select', { name: 'window', id: 'window', onchange: () => go('#/stats?window=' + sel.value) },
    WINDOWS.map(w => h('option', { value: w, selected: w === window_ }, w)));
  const out = h('div', { id: 'stats' });
  async function load() {
    let data;
    try {
      data = await api('GET', '/stats', { query: { window: window_, top: 10 } });
    } catch (err) {
      if (err instanceof ApiError && err.status === 400) {
        const e = (err.problem.errors || [])[0];
        out.replaceChildren(h('p', { class: 'field-error', 'data-error-for': 'window' }, e ? e.field + ' ' + e.reason : err.message));
        return;
      }
      throw err;
    }
    const sum = k => data.series.reduce((a, s) => a + (s[k] || 0), 0);
    const maxDenied = Math.max(1, ...data.rules.map(r => r.denied));
    out.replaceChildren(
      h('div', { class: 'cards' },
        h('div', { class: 'card' }, h('b', { id: 'total-denied' }, sum('denied')), 'denied'),
        h('div', { class: 'card' }, h('b', {}, sum('shadow_denied')), 'shadow-denied'),
        h('div', { class: 'card' }, h('b', {}, sum('fail_open')), 'fail-open'),
        data.series.some(s => s.allowed !== undefined) && h('div', { class: 'card' }, h('b', {}, sum('allowed')), 'allowed')),
      chart(data.series),
      h('p', { class: 'muted' }, `${new Date(data.from).toLocaleTimeString()} to ${new Date(data.to).toLocaleTimeString()}, from ${data.source}, one bar per ${data.step}.`),
      h('h2', {}, 'Top limiting rules'),
      h('table', { id: 'top-rules' }, h('thead', {}, h('tr', {}, ['Rule', 'API', 'Denied', 'Shadow-denied', 'Fail-open', 'Allowed'].map(t => h('th', {}, t)))),
        h('tbody', {}, data.rules.length ? data.rules.map(r => h('tr', { 'data-rule': r.rule },
          h('td', {}, h('a', { href: '#/rules/' + enc(r.rule), class: 'mono' }, r.rule)), h('td', { class: 'mono' }, r.api),
          h('td', { class: 'num' }, h('span', { class: 'bar', 'data-w': Math.round(100 * r.denied / maxDenied) }), r.denied),
          h('td', { class: 'num' }, r.shadow_denied), h('td', { class: 'num' }, r.fail_open), h('td', { class: 'num' }, r.allowed ?? '—')))
          : h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'Nothing limited in this window.')))),
      h('h2', {}, 'Top denied subjects'),
      h('p', { class: 'muted' }, 'Subjects are shown as their hash, never as sent (a subject may be an API key).'),
      h('table', { id: 'top-subjects' }, h('thead', {}, h('tr', {}, ['Subject (hash)', 'Rule', 'API', 'Denied'].map(t => h('th', {}, t)))),
        h('tbody', {}, data.subjects.length ? data.subjects.map(s => h('tr', { 'data-subject': s.subject },
          h('td', { class: 'mono' }, s.subject), h('td', {}, h('a', { href: '#/rules/' + enc(s.rule), class: 'mono' }, s.rule)),
          h('td', { class: 'mono' }, s.api), h('td', { class: 'num' }, s.denied)))
          : h('tr', {}, h('td', { colspan: 4, class: 'muted' }, 'No subject denied in this window.')))));
    // Bar widths through the CSSOM: the page's CSP allows no inline styles.
    out.querySelectorAll('.bar').forEach(b => { b.style.width = (b.dataset.w * 0.8) + 'px'; });
    out.querySelectorAll('.legend i').forEach(i => { i.style.background = (COLORS.find(([k]) => 'sw-' + k === i.className) || [])[1]; });
  }
  render(h('h1', {}, 'Top offenders'), h('form', { class: 'toolbar' }, h('label', {}, 'window', sel)), out);
  await load();
  every(5000, () => load().catch(showError));
}
