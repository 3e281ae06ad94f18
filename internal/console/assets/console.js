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
  { name: 'limit', label: 'Limit', type: 'int' },
  { name: 'period', label: 'Period', hint: 'such as 1m, 1h, 30d' },
  { name: 'burst', label: 'Burst', type: 'int', hint: 'default the limit' },
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
  [/^#\/rules\/new$/, () => ruleForm(null)],
  [/^#\/rules\/([^/]+)$/, m => ruleForm(decodeURIComponent(m[1]))],
  [/^#\/plans$/, plansPage],
  [/^#\/plans\/new$/, () => planForm(null)],
  [/^#\/plans\/([^/]+)$/, m => planForm(decodeURIComponent(m[1]))],
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
  let cursor = '';
  async function page() {
    const q = { limit: 100, cursor };
    for (const f of filters) q[f] = p.get(f) || '';
    const data = await api('GET', '/rules', { query: q });
    for (const r of data.rules) {
      tbody.append(h('tr', { 'data-id': r.id },
        h('td', { class: 'mono' }, r.api), h('td', { class: 'mono' }, r.route), h('td', { class: 'mono' }, r.subject),
        h('td', {}, limitText(r)), h('td', { class: 'num' }, r.burst ?? ''), h('td', {}, r.mode || 'enforce'),
        h('td', {}, r.failure_mode || 'open'), h('td', {}, r.enabled === false ? 'no' : 'yes'), h('td', { class: 'num' }, r.version),
        h('td', {}, h('a', { href: '#/rules/' + enc(r.id), 'data-edit': r.id }, 'edit'), ' · ',
          h('a', { href: '#/history/rule/' + enc(r.id) }, 'history'))));
    }
    if (!tbody.children.length) tbody.append(h('tr', {}, h('td', { colspan: 10, class: 'muted' }, 'No rules match.')));
    cursor = data.next_cursor || '';
    more.hidden = !cursor;
  }
  more.addEventListener('click', () => page().catch(showError));
  await page();
}

// conflictPanel shows, after a 412, what someone else changed since the
// form was loaded (base → current) and what the operator is about to
// send, and offers to reapply the operator's values on the current version.
function conflictPanel(kind, base, current, mine, onReapply, onReload) {
  const keys = [...new Set([...Object.keys(base), ...Object.keys(current), ...Object.keys(mine)])]
    .filter(k => !['version', 'created_at', 'updated_at', 'id'].includes(k));
  const show = v => v === undefined ? '—' : typeof v === 'object' ? JSON.stringify(v) : String(v);
  const rows = keys.filter(k => show(base[k]) !== show(current[k]) || show(mine[k]) !== show(current[k]))
    .map(k => h('tr', { 'data-field': k }, h('td', { class: 'mono' }, k), h('td', {}, show(base[k])),
      h('td', { class: show(base[k]) !== show(current[k]) ? 'after' : '' }, show(current[k])), h('td', {}, show(mine[k]))));
  return h('div', { class: 'panel conflict', id: 'conflict' },
    h('h2', {}, 'Changed by someone else'),
    h('p', {}, `This ${kind} was updated to version ${current.version} after you opened it (version ${base.version}). `,
      'Review the differences, then reapply your values on top of the current version, or reload it.'),
    h('table', { class: 'diff' }, h('thead', {}, h('tr', {}, ['field', `you loaded (v${base.version})`, `now (v${current.version})`, 'yours'].map(t => h('th', {}, t)))),
      h('tbody', {}, rows)),
    h('p', { class: 'actions' }, h('button', { id: 'reapply', onclick: onReapply }, 'Reapply my changes'),
      h('button', { class: 'secondary', id: 'reload', onclick: onReload }, 'Discard mine, load current')));
}

async function ruleForm(id) {
  const rule = id ? await api('GET', '/rules/' + enc(id)) : { api: '', route: '*', subject: '*', enabled: true };
  let base = rule;
  const conflictSlot = h('div');
  const form = h('form', { class: 'grid', id: 'rule-form', novalidate: true },
    formFields(RULE_FIELDS, rule),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', id: 'save' }, id ? 'Save' : 'Create'),
      id && h('button', { type: 'button', class: 'danger', id: 'delete', onclick: () => del() }, 'Delete'),
      id && h('a', { class: 'button secondary', href: '#/history/rule/' + enc(id) }, 'History'),
      h('a', { class: 'button secondary', href: '#/rules' }, 'Back')));
  async function save(version) {
    const body = readForm(form, RULE_FIELDS);
    try {
      if (!id) {
        const created = await api('POST', '/rules', { body });
        go('#/rules/' + enc(created.id), 'Created rule ' + created.id + '.');
        return;
      }
      const updated = await api('PUT', '/rules/' + enc(id), { body, ifMatch: version });
      go('#/rules/' + enc(id), 'Saved: version ' + updated.version + '.');
    } catch (err) {
      if (err instanceof ApiError && err.status === 400) return showFieldErrors(form, err);
      if (err instanceof ApiError && err.status === 412) {
        const current = await api('GET', '/rules/' + enc(id));
        flash('error', 'Not saved: the rule changed since you opened it.');
        conflictSlot.replaceChildren(conflictPanel('rule', base, current, body,
          () => { conflictSlot.replaceChildren(); save(current.version); },
          () => go('#/rules/' + enc(id), 'Loaded version ' + current.version + '.')));
        return;
      }
      showError(err);
    }
  }
  async function del() {
    if (!confirm('Delete rule ' + id + '?')) return;
    try {
      await api('DELETE', '/rules/' + enc(id), { ifMatch: base.version });
      go('#/rules', 'Deleted rule ' + id + '.');
    } catch (err) {
      if (err instanceof ApiError && err.status === 412) flash('error', 'Not deleted: the rule changed since you opened it; reload and check it.');
      else showError(err);
    }
  }
  form.addEventListener('submit', e => { e.preventDefault(); clearErrors(form); save(base.version); });
  render(h('h1', {}, id ? 'Rule ' : 'New rule', id && h('code', {}, id), id && h('span', { class: 'muted', id: 'version' }, ' version ' + rule.version)),
    conflictSlot, form);
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

async function planForm(name) {
  const plan = name ? await api('GET', '/plans/' + enc(name)) : {};
  const base = plan;
  const conflictSlot = h('div');
  const form = h('form', { class: 'grid', id: 'plan-form', novalidate: true },
    formFields(PLAN_FIELDS, plan, name ? ['name'] : []),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', id: 'save' }, name ? 'Save' : 'Create'),
      name && h('button', { type: 'button', class: 'danger', id: 'delete', onclick: () => del() }, 'Delete'),
      name && h('a', { class: 'button secondary', href: '#/history/plan/' + enc(name) }, 'History'),
      h('a', { class: 'button secondary', href: '#/plans' }, 'Back')));
  async function save(version) {
    const body = readForm(form, PLAN_FIELDS);
    try {
      if (!name) {
        const created = await api('POST', '/plans', { body });
        go('#/plans/' + enc(created.name), 'Created plan ' + created.name + '.');
        return;
      }
      const updated = await api('PUT', '/plans/' + enc(name), { body, ifMatch: version });
      go('#/plans/' + enc(name), 'Saved: version ' + updated.version + '.');
    } catch (err) {
      if (err instanceof ApiError && err.status === 400) return showFieldErrors(form, err);
      if (err instanceof ApiError && err.status === 412) {
        const current = await api('GET', '/plans/' + enc(name));
        flash('error', 'Not saved: the plan changed since you opened it.');
        conflictSlot.replaceChildren(conflictPanel('plan', base, current, body,
          () => { conflictSlot.replaceChildren(); save(current.version); },
          () => go('#/plans/' + enc(name), 'Loaded version ' + current.version + '.')));
        return;
      }
      showError(err);
    }
  }
  async function del() {
    if (!confirm('Delete plan ' + name + '?')) return;
    try {
      await api('DELETE', '/plans/' + enc(name), { ifMatch: base.version });
      go('#/plans', 'Deleted plan ' + name + '.');
    } catch (err) { showError(err); }
  }
  form.addEventListener('submit', e => { e.preventDefault(); clearErrors(form); save(base.version); });
  render(h('h1', {}, name ? 'Plan ' : 'New plan', name && h('code', {}, name), name && h('span', { class: 'muted', id: 'version' }, ' version ' + plan.version)),
    conflictSlot, form);
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
