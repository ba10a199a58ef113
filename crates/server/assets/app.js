// The Scheduling page: the pool tree, operations, nodes and the newest events, polled from the
// JSON API. With several pool trees, tabs above choose the tree the page shows (`?tree=NAME`
// in the address; default: the default tree).
// Every string from the server goes into the page as text (textContent, attributes), never
// as HTML.
'use strict';

const RESOURCES = ['user_slots', 'cpu', 'gpu', 'memory', 'network'];
const ROOT = '<Root>';
const POLL_MS = 1500;
const EVENT_LIMIT = 50;
// Operations asked for: every unfinished one (up to this many), and with "show finished" the
// newest finished ones (the server keeps the others in its store only).
const UNFINISHED_LIMIT = 500;
const FINISHED_LIMIT = 50;
const FINISHED = new Set(['completed', 'failed', 'aborted']);

const ui = {
  collapsed: new Set(),
  showFinished: false,
  last: null,
  // The tree asked for (`?tree=`); null: the default tree.
  tree: new URLSearchParams(window.location.search).get('tree'),
};

// ---- DOM helpers ------------------------------------------------------------------------

function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function setRows(table, head, rows, emptyText) {
  const thead = table.tHead;
  const tbody = table.tBodies[0];
  thead.replaceChildren(h('tr', null, head.map((c) =>
    typeof c === 'string' ? h('th', null, c) : h('th', { class: c.cls }, c.text))));
  if (rows.length === 0) {
    rows = [h('tr', { class: 'empty' }, h('td', { colspan: head.length }, emptyText))];
  }
  tbody.replaceChildren(...rows);
}

// ---- formatting -------------------------------------------------------------------------

function fmtBytes(b) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (Math.abs(b) >= 1024 && i < units.length - 1) { b /= 1024; i += 1; }
  return (i === 0 ? String(Math.round(b)) : trim(b, b < 10 ? 2 : 1)) + units[i];
}

function trim(x, digits) {
  return String(Number(x.toFixed(digits)));
}

function fmtAmount(kind, v) {
  v = Number(v) || 0;
  if (kind === 'memory') return fmtBytes(v);
  if (kind === 'cpu') return trim(v, 2);
  return String(Math.round(v));
}

function fmtPct(x) {
  if (!Number.isFinite(x)) return '–';
  const p = x * 100;
  if (p === 0) return '0%';
  return (p < 1 ? p.toFixed(2) : p < 10 ? p.toFixed(1) : p.toFixed(0)) + '%';
}

function plural(n, what) {
  return `${n} ${what}${n === 1 ? '' : 's'}`;
}

function fmtAgo(ms) {
  if (ms < 1000) return ms + ' ms';
  const s = ms / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + ' s';
  const m = s / 60;
  if (m < 60) return m.toFixed(0) + ' min';
  return (m / 60).toFixed(1) + ' h';
}

function share(amount, total, kind) {
  const t = Number(total[kind]) || 0;
  return t > 0 ? (Number(amount[kind]) || 0) / t : 0;
}

// ---- bars -------------------------------------------------------------------------------

function widthPct(x) {
  return Math.max(0, Math.min(1, Number(x) || 0)) * 100 + '%';
}

// A bar over the cluster's total of one resource: demand (background), fair share, usage and
// a guarantee tick. `s` holds shares (0..1).
function shareBar(s, title) {
  const bar = h('div', { class: 'bar', title });
  const layer = (cls, v) => {
    if (!(v > 0)) return;
    const d = h('div', { class: cls });
    d.style.width = widthPct(v);
    bar.append(d);
  };
  layer('demand', s.demand);
  layer('fair', s.fair);
  layer('usage', s.usage);
  if (s.guarantee > 0) {
    const g = h('div', { class: 'guarantee' });
    g.style.left = widthPct(s.guarantee);
    bar.append(g);
  }
  if (s.usage > 1) bar.append(h('div', { class: 'over', title: 'usage above the total' }));
  return bar;
}

function usageBar(used, total) {
  return shareBar({ usage: total > 0 ? used / total : 0, fair: 0, demand: 0, guarantee: 0 });
}

function jobsBar(c) {
  const bar = h('div', { class: 'jobs-bar' });
  const total = Math.max(c.total, c.completed + c.running + c.failed + c.aborted + c.pending, 1);
  for (const k of ['completed', 'running', 'failed', 'aborted']) {
    if (c[k] > 0) {
      const d = h('div', { class: k });
      d.style.width = (c[k] / total) * 100 + '%';
      bar.append(d);
    }
  }
  return bar;
}

function badge(text) {
  return h('span', { class: 'badge ' + String(text).replace(/[^a-z_]/g, '') }, text);
}

function ratios(e) {
  if (!e) return h('span', { class: 'share' }, '–');
  return h('span', { class: 'share' },
    h('span', null, h('span', { class: 'k' }, 'fs'), fmtPct(e.fair_share_ratio)),
    h('span', null, h('span', { class: 'k' }, 'use'), fmtPct(e.usage_ratio)),
    h('span', null, h('span', { class: 'k' }, 'dem'), fmtPct(e.demand_ratio)));
}

// ---- the pool tree ----------------------------------------------------------------------

// Explicit pool options from the tree configuration, by pool name.
function poolConfigs(treeConfig) {
  const out = new Map();
  const walk = (pools) => {
    for (const [name, p] of Object.entries(pools || {})) {
      out.set(name, p);
      walk(p.pools);
    }
  };
  walk(treeConfig && treeConfig.pools);
  return out;
}

function resourceColumns(total) {
  const cols = RESOURCES.filter((r) => (Number(total[r]) || 0) > 0);
  return cols.length ? cols : ['cpu'];
}

function poolShares(e, total, r) {
  return {
    guarantee: share(e.effective_strong_guarantee_resources, total, r),
    fair: Number(e.detailed_fair_share.total[r]) || 0,
    usage: share(e.resource_usage, total, r),
    demand: share(e.resource_demand, total, r),
  };
}

function resourceCell(e, total, r) {
  const s = poolShares(e, total, r);
  const amount = (res) => fmtAmount(r, res[r]);
  const fairAmount = fmtAmount(r, s.fair * (Number(total[r]) || 0));
  const title = `${r}: guarantee ${fmtPct(s.guarantee)} (${amount(e.effective_strong_guarantee_resources)}), ` +
    `fair share ${fmtPct(s.fair)} (${fairAmount}), usage ${fmtPct(s.usage)} (${amount(e.resource_usage)}), ` +
    `demand ${fmtPct(s.demand)} (${amount(e.resource_demand)})`;
  return h('td', { class: 'res-cell' },
    shareBar(s, title),
    h('div', { class: 'res-text' },
      h('span', null, `${amount(e.resource_usage)} used · ${fairAmount} fair`), ' ',
      h('span', null, `${amount(e.resource_demand)} dem` +
        (s.guarantee > 0 ? ` · ${amount(e.effective_strong_guarantee_resources)} guar` : ''))));
}

function renderPools(tree) {
  const snap = tree.snapshot;
  const total = snap.total_resources;
  const cols = resourceColumns(total);
  const configs = poolConfigs(tree.config);
  const treeOpts = (tree.config && tree.config.config) || {};
  const children = new Map();
  for (const [name, p] of Object.entries(snap.pools)) {
    const parent = p.parent === null || p.parent === undefined ? null : p.parent;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(name);
  }
  for (const list of children.values()) list.sort();

  const rows = [];
  const visit = (name, depth) => {
    const p = snap.pools[name];
    const e = p; // element fields are flat in the pool
    const kids = children.get(name) || [];
    const collapsed = ui.collapsed.has(name);
    const cfg = configs.get(name) || {};
    const maxRunning = cfg.max_running_operation_count ?? treeOpts.max_running_operation_count_per_pool;
    const twisty = kids.length
      ? h('span', {
        class: 'twisty', title: collapsed ? 'expand' : 'collapse',
        onclick: () => { toggle(name); },
      }, collapsed ? '▸' : '▾')
      : h('span', { class: 'twisty leaf' }, '');
    const nameCell = h('td', null,
      h('span', { class: 'pool-name' },
        h('span', { style: `display:inline-block;width:${depth * 18}px` }),
        twisty,
        name === ROOT ? snap.tree : name),
      p.mode === 'fifo' ? h('span', { class: 'tag' }, 'fifo') : null,
      p.is_ephemeral ? h('span', { class: 'tag' }, 'ephemeral') : null);
    const ops = name === ROOT || maxRunning === undefined
      ? `${p.running_operation_count} / ${p.operation_count}`
      : `${p.running_operation_count} / ${p.operation_count} (max ${maxRunning})`;
    rows.push(h('tr', { class: name === ROOT ? 'root' : null, 'data-pool': name },
      nameCell,
      h('td', { class: 'num' }, trim(e.weight, 2)),
      h('td', { class: 'num', title: 'running / all operations' }, ops),
      h('td', null, e.dominant_resource),
      h('td', null, badge(e.starvation_status)),
      h('td', null, ratios(e)),
      cols.map((r) => resourceCell(e, total, r))));
    if (!collapsed) for (const k of kids) visit(k, depth + 1);
  };
  for (const top of children.get(null) || []) visit(top, 0);
  setRows(document.getElementById('pools'),
    ['Pool', { text: 'Weight', cls: 'num' }, { text: 'Operations', cls: 'num' }, 'Dominant',
      'Starvation', 'Dominant share', ...cols],
    rows, 'no pools');
}

function toggle(name) {
  if (ui.collapsed.has(name)) ui.collapsed.delete(name);
  else ui.collapsed.add(name);
  if (ui.last) render(ui.last);
}

// ---- operations -------------------------------------------------------------------------

function renderOperations(ops, snap, severalTrees) {
  // Newest first.
  const shown = ops
    .filter((o) => ui.showFinished || !FINISHED.has(o.state))
    .slice()
    .sort((a, b) => b.submitted_at - a.submitted_at);
  const rows = shown.map((o) => {
    const s = snap.operations[o.id] || {};
    // Element fields are flat in the operation; absent until a fair-share update saw it.
    const e = s.fair_share_ratio === undefined ? null : s;
    const c = o.job_counts;
    const why = o.why || (FINISHED.has(o.state) ? (o.reason || '') : '');
    const elsewhere = severalTrees && s.pool === undefined && !FINISHED.has(o.state);
    return h('tr', { 'data-operation': o.id },
      h('td', null, h('strong', null, o.id)),
      h('td', null, o.user),
      // Its pool in the tree shown (an operation may run in several trees).
      h('td', null, s.pool || o.pool,
        elsewhere ? h('span', { class: 'tag', title: 'runs in another pool tree' }, 'other tree') : null),
      h('td', null, badge(o.state)),
      h('td', { title: `${c.completed} completed, ${c.running} running, ${c.pending} pending, ` +
        `${c.failed} failed, ${c.aborted} aborted of ${c.total}` },
        h('div', { class: 'share' }, `${c.running} run · ${c.pending} pend · ${c.completed}/${c.total} done` +
          (c.failed ? ` · ${c.failed} failed` : '') + (c.aborted ? ` · ${c.aborted} aborted` : '')),
        jobsBar(c)),
      h('td', null, ratios(e)),
      h('td', null, e ? e.dominant_resource : '–'),
      h('td', null, e ? badge(e.starvation_status) : '–'),
      h('td', { class: 'why' }, why),
      h('td', { class: 'num' }, fmtAgo(Math.max(0, Date.now() - o.submitted_at)) + ' ago'));
  });
  setRows(document.getElementById('operations'),
    ['Operation', 'User', 'Pool', 'State', 'Jobs', 'Dominant share', 'Dominant', 'Starvation',
      'Why it waits', { text: 'Submitted', cls: 'num' }],
    rows, ui.showFinished ? 'no operations' : 'no running or pending operations');
}

// ---- nodes ------------------------------------------------------------------------------

function renderNodes(nodes, total, severalTrees) {
  const cols = resourceColumns(total);
  const rows = nodes.map((n) => h('tr', { 'data-node': n.id },
    h('td', null, h('strong', null, n.id)),
    severalTrees ? h('td', null, n.tree || '–') : null,
    h('td', null, n.tags.length ? n.tags.map((t) => h('span', { class: 'tag' }, t)) : '–'),
    h('td', null, !n.scheduler_jobs_enabled ? badge('disabled') : n.draining ? badge('draining') : 'enabled'),
    h('td', { class: 'num' }, n.allocation_count),
    cols.map((r) => h('td', { class: 'res-cell' },
      usageBar(Number(n.usage[r]) || 0, Number(n.resources[r]) || 0),
      h('div', { class: 'res-text' }, `${fmtAmount(r, n.usage[r])} / ${fmtAmount(r, n.resources[r])}`))),
    h('td', { class: 'num' }, fmtAgo(n.last_heartbeat_ago_ms))));
  setRows(document.getElementById('nodes'),
    ['Node', ...(severalTrees ? ['Tree'] : []), 'Tags', 'Scheduling', { text: 'Jobs', cls: 'num' }, ...cols,
      { text: 'Last heartbeat', cls: 'num' }],
    rows, 'no nodes registered');
}

// ---- events -----------------------------------------------------------------------------

const EVENT_COLUMNS = new Set(['seq', 'unix_ms', 't_ms', 'event', 'operation', 'job', 'node']);

function fmtValue(v) {
  if (v === null || v === undefined) return '';
  if (typeof v !== 'object') return String(v);
  // The preemptor: its operation and job.
  if (v.operation !== undefined && Object.keys(v).every((k) => k === 'operation' || k === 'job')) {
    return v.job === undefined ? v.operation : `${v.operation} (job ${v.job})`;
  }
  return JSON.stringify(v);
}

function renderEvents(events) {
  const rows = events.slice().reverse().map((e) => {
    const details = Object.entries(e)
      .filter(([k]) => !EVENT_COLUMNS.has(k))
      .map(([k, v]) => h('span', { class: 'kv' }, h('span', { class: 'k' }, k), fmtValue(v)));
    return h('tr', { 'data-event': e.seq },
      h('td', { class: 'num' }, e.seq),
      h('td', { class: 'num', title: new Date(e.unix_ms).toISOString() },
        new Date(e.unix_ms).toLocaleTimeString()),
      h('td', null, h('span', { class: 'event ' + String(e.event).replace(/[^a-z_]/g, '') }, e.event)),
      h('td', null, e.operation || ''),
      h('td', null, e.job || ''),
      h('td', null, e.node || ''),
      h('td', { class: 'details' }, details));
  });
  setRows(document.getElementById('events'),
    [{ text: '#', cls: 'num' }, { text: 'Time', cls: 'num' }, 'Event', 'Operation', 'Job', 'Node',
      'Details'],
    rows, 'no events yet');
}

// ---- summary ----------------------------------------------------------------------------

function card(label, value, sub, extra) {
  return h('div', { class: 'card' },
    h('div', { class: 'label' }, label),
    h('div', { class: 'value' }, value),
    sub ? h('div', { class: 'sub' }, sub) : null,
    extra || null);
}

function renderSummary(data) {
  const snap = data.tree.snapshot;
  const total = snap.total_resources;
  const root = snap.pools[ROOT];
  const used = root ? root.resource_usage : {};
  // With several trees: the operations and nodes of the tree shown.
  const severalTrees = data.trees.length > 1;
  const operations = severalTrees
    ? data.operations.filter((o) => snap.operations[o.id] !== undefined)
    : data.operations;
  const byState = {};
  for (const o of operations) byState[o.state] = (byState[o.state] || 0) + 1;
  let runningJobs = 0;
  let pendingJobs = 0;
  for (const o of operations) {
    runningJobs += o.job_counts.running;
    pendingJobs += o.job_counts.pending;
  }
  const starving = Object.values(snap.operations)
    .filter((o) => o.starvation_status && o.starvation_status !== 'non_starving').length;
  const nodes = severalTrees ? data.nodes.filter((n) => n.tree === data.tree.tree) : data.nodes;
  const cards = [
    card('Nodes', String(nodes.length),
      `${nodes.filter((n) => n.scheduler_jobs_enabled).length} scheduling`),
    card('Operations', `${byState.running || 0} running`,
      `${byState.pending || 0} pending · ${starving} starving`),
    card('Jobs', `${runningJobs} running`, `${pendingJobs} pending`),
  ];
  for (const r of resourceColumns(total)) {
    cards.push(card(r, `${fmtAmount(r, used[r])} / ${fmtAmount(r, total[r])}`,
      `${fmtPct(share(used, total, r))} used`,
      usageBar(Number(used[r]) || 0, Number(total[r]) || 0)));
  }
  document.getElementById('summary').replaceChildren(...cards);
  document.getElementById('tree-name').textContent = `pool tree “${snap.tree}”`;
}

// ---- alerts ------------------------------------------------------------------------------

// The scheduler's active alerts, every tree's (e.g. 29000: the root's guarantees exceed the
// tree's cluster and are scaled down); the banner is hidden when there is none.
function renderAlerts(trees) {
  const box = document.getElementById('alerts');
  const alerts = trees.flatMap((t) => t.alerts || []);
  box.replaceChildren(...alerts.map((a) => h('div', {
    class: 'alert',
    'data-alert-code': a.code,
    'data-alert-tree': a.tree,
  },
  h('span', { class: 'alert-code' }, `Alert ${a.code}`),
  h('span', { class: 'alert-tree' }, `pool tree “${a.tree}”:`),
  a.message)));
  box.hidden = alerts.length === 0;
}

// ---- the tree tabs ---------------------------------------------------------------------

function renderTreeTabs(trees, shown) {
  const nav = document.getElementById('tree-tabs');
  if (trees.length < 2) {
    nav.hidden = true;
    nav.replaceChildren();
    return;
  }
  nav.replaceChildren(...trees.map((t) => h('a', {
    class: 'tab',
    role: 'tab',
    href: '?tree=' + encodeURIComponent(t.name),
    'aria-selected': String(t.name === shown),
    'data-tree': t.name,
    title: (t.node_tag_filter ? `nodes tagged ${t.node_tag_filter}` : 'every node') +
      ` · ${t.operation_count} operations`,
    onclick: (ev) => {
      ev.preventDefault();
      selectTree(t.name);
    },
  },
  t.name,
  t.is_default ? h('span', { class: 'tag' }, 'default') : null,
  h('span', { class: 'tab-sub' },
    `${plural(t.node_count, 'node')} · ${plural(t.pool_count, 'pool')}`))));
  nav.hidden = false;
}

// Shows another tree at once (and keeps it in the address, so that a reload keeps it).
function selectTree(name) {
  ui.tree = name;
  ui.collapsed.clear();
  window.history.replaceState(null, '', '?tree=' + encodeURIComponent(name));
  refresh();
}

// ---- the loop ---------------------------------------------------------------------------

function render(data) {
  ui.last = data;
  const severalTrees = data.trees.length > 1;
  renderAlerts(data.trees);
  renderTreeTabs(data.trees, data.tree.tree);
  renderSummary(data);
  renderPools(data.tree);
  renderOperations(data.operations, data.tree.snapshot, severalTrees);
  renderNodes(data.nodes, data.tree.snapshot.total_resources, severalTrees);
  renderEvents(data.events);
}

// The API token, when the server asks for one to read (`authenticate_reads`): given in the
// form, or once in the address as `#token=...` (removed from the address at once); kept in
// sessionStorage, so only this tab has it.
const TOKEN_KEY = 'fairsched-token';

class Unauthenticated extends Error {}

// Whether the last token given was refused (shown until another one is given).
let tokenRefused = false;

function takeTokenFromAddress() {
  const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }
}

async function fetchJson(path) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const resp = await fetch(path, { cache: 'no-store', headers });
  if (resp.status === 401) throw new Unauthenticated(`${path}: HTTP 401`);
  if (!resp.ok) throw new Error(`${path}: HTTP ${resp.status}`);
  return resp.json();
}

// Loads everything the page shows, for the tree asked for (an unknown one: the default tree,
// with `missing` naming it). Null when a newer load started meanwhile.
let loads = 0;
async function load() {
  const seq = ++loads;
  const trees = await fetchJson('/api/v1/pool_trees');
  const known = ui.tree !== null && trees.some((t) => t.name === ui.tree);
  const missing = ui.tree !== null && !known ? ui.tree : null;
  const query = known ? '?tree=' + encodeURIComponent(ui.tree) : '';
  const showFinished = ui.showFinished;
  const [tree, unfinished, finished, nodes, events] = await Promise.all([
    fetchJson('/api/v1/tree' + query),
    fetchJson('/api/v1/operations?jobs=false&state=pending,running&limit=' + UNFINISHED_LIMIT),
    showFinished
      ? fetchJson('/api/v1/operations?jobs=false&state=completed,failed,aborted&limit=' +
        FINISHED_LIMIT)
      : Promise.resolve([]),
    fetchJson('/api/v1/nodes'),
    fetchJson('/api/v1/events?limit=' + EVENT_LIMIT),
  ]);
  if (seq !== loads) return null;
  const operations = unfinished.concat(finished);
  return { trees, tree, operations, nodes, events, missing };
}

async function refresh() {
  const status = document.getElementById('status');
  const error = document.getElementById('error');
  const fail = (what, e) => {
    status.dataset.state = 'error';
    status.textContent = 'not updating';
    error.textContent = what + (e && e.message ? e.message : e) + '. Retrying…';
    error.hidden = false;
  };
  const form = document.getElementById('token-form');
  let data;
  try {
    data = await load();
  } catch (e) {
    if (e instanceof Unauthenticated) {
      if (sessionStorage.getItem(TOKEN_KEY) !== null) {
        tokenRefused = true;
        sessionStorage.removeItem(TOKEN_KEY);
      }
      status.dataset.state = 'error';
      status.textContent = 'needs a token';
      error.textContent = tokenRefused ? 'The scheduler did not accept that token.' : '';
      error.hidden = !tokenRefused;
      form.hidden = false;
      return;
    }
    fail('Cannot reach the scheduler: ', e);
    return;
  }
  form.hidden = true;
  if (data === null) return;
  try {
    render(data);
  } catch (e) {
    fail('Cannot show the scheduler\'s state: ', e);
    return;
  }
  status.dataset.state = 'live';
  status.textContent = 'live · updated ' + new Date().toLocaleTimeString();
  if (data.missing !== null) {
    error.textContent = `There is no pool tree “${data.missing}”; showing the default tree ` +
      `“${data.tree.tree}”.`;
    error.hidden = false;
  } else {
    error.hidden = true;
  }
}

async function poll() {
  try {
    await refresh();
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

document.addEventListener('DOMContentLoaded', () => {
  takeTokenFromAddress();
  const form = document.getElementById('token-form');
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const input = document.getElementById('token-input');
    sessionStorage.setItem(TOKEN_KEY, input.value);
    tokenRefused = false;
    input.value = '';
    refresh();
  });
  const box = document.getElementById('show-finished');
  box.addEventListener('change', () => {
    ui.showFinished = box.checked;
    // The finished operations are asked for only while shown.
    refresh();
  });
  poll();
});
