// Fence operator page. Hand-written, no framework, no build step, no eval,
// no HTML built from strings: every value reaches the DOM as textContent.
//
// Calls: the Watch stream (GET /v1/watch, read with fetch so that the
// bearer token can be sent: EventSource cannot send headers), and unary
// JSON POSTs to /fence.v1.<Service>/<Method>.
'use strict';

(function () {
  const MODE = document.querySelector('meta[name="fence-ui-mode"]').content;
  const TOKEN_KEY = 'fence.token';
  const PREFIX_KEY = 'fence.prefix';
  const ROW_H = 28;          // px, the CSS height of a row (td height)
  const OVERSCAN = 10;       // rows rendered above and below the visible ones
  const MAX_ROWS = 120;      // never more rows in the DOM than this
  const STORY_KEEP = 64;     // changes remembered per lock for its story
  const TOKENS_KEEP = 200000; // token -> lock names remembered (refusals)
  const HEARTBEAT_GRACE = 40000; // ms without a byte before the watch is redialled

  const $ = (id) => document.getElementById(id);
  // vis shows a value's direction controls (U+202A-202E, U+2066-2069,
  // U+200E/200F, U+061C) and invisible characters (U+00AD, U+180E,
  // U+200B-200D, U+2060-2064, U+FEFF) as visible escapes: a lock name or
  // owner with a right-to-left override would otherwise be drawn
  // reversed, two names differing only by a zero-width space would look
  // the same, and a confirmation could name another owner than the one
  // released.
  const BIDI = /[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;
  const vis = (v) => String(v).replace(BIDI, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = vis(text);
    return e;
  };

  document.documentElement.classList.add('mode-' + MODE);

  // ---- credentials and calls ------------------------------------------------

  let who = null; // {principal, admin, enabled}

  function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
  function authHeaders() {
    const h = {};
    const t = token();
    if (t) h.Authorization = 'Bearer ' + t;
    return h;
  }

  class CallError extends Error {
    constructor(status, body) {
      super((body && (body.message || body.code)) || ('HTTP ' + status));
      this.status = status;
      this.body = body || {};
    }
  }

  async function call(service, method, req) {
    const headers = authHeaders();
    headers['Content-Type'] = 'application/json';
    const res = await fetch('/fence.v1.' + service + '/' + method, {
      method: 'POST', headers, body: JSON.stringify(req || {}), cache: 'no-store',
    });
    const text = await res.text();
    let body = {};
    if (text) { try { body = JSON.parse(text); } catch (e) { body = { message: text }; } }
    if (!res.ok) {
      if (res.status === 401) showLogin('The server asks for a token: ' + (body.message || 'unauthenticated'));
      throw new CallError(res.status, body);
    }
    return body;
  }

  // unserved: the server does not have this procedure (an older server, or
  // the OperatorService not built in): the page falls back.
  function unserved(e) {
    return e instanceof CallError && (e.status === 404 || e.body.code === 'unimplemented');
  }

  async function whoAmI() {
    try {
      const r = await call('OperatorService', 'WhoAmI', {});
      return { principal: r.principal || '', admin: !!r.admin, enabled: !!r.authEnabled, perms: r.permissions || [] };
    } catch (e) {
      if (!unserved(e)) throw e;
    }
    const r = await call('AuthService', 'Status', {});
    return { principal: r.principal || '', admin: !!r.admin, enabled: !!r.enabled, perms: [] };
  }

  function canAct() { return MODE === 'full' && who && who.admin; }

  // ---- login ------------------------------------------------------------------

  function showLogin(why) {
    stopWatch();
    for (const v of document.querySelectorAll('.view')) v.hidden = true;
    $('login').hidden = false;
    banner(why || '', true);
    $('token-input').focus();
  }

  $('login-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $('token-input').value.trim());
    $('token-input').value = '';
    start();
  });
  $('forget').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    who = null;
    showLogin('Token forgotten.');
  });

  function banner(text, bad) {
    const b = $('banner');
    b.textContent = text;
    b.hidden = !text;
    b.classList.toggle('error', !!bad);
  }

  // ---- durations --------------------------------------------------------------

  // ms reads a JSON duration ("4.5s", "250ms", "0s"); absent is 0.
  function ms(d) {
    if (d === undefined || d === null || d === '') return 0;
    if (typeof d === 'number') return d * 1000;
    const s = String(d);
    if (s.endsWith('ms')) return parseFloat(s) || 0;
    if (s.endsWith('s')) return (parseFloat(s) || 0) * 1000;
    return parseFloat(s) * 1000 || 0;
  }
  function fmtMs(v) {
    if (v <= 0) return '0.0s';
    if (v < 60000) return (v / 1000).toFixed(1) + 's';
    const m = Math.floor(v / 60000), s = Math.floor((v % 60000) / 1000);
    if (m < 60) return m + 'm' + String(s).padStart(2, '0') + 's';
    return Math.floor(m / 60) + 'h' + String(m % 60).padStart(2, '0') + 'm';
  }
  function clock(t) {
    const d = t ? new Date(t) : new Date();
    return d.toLocaleTimeString(undefined, { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0');
  }

  // ---- the lock table's data ----------------------------------------------------

  // locks: name -> {name, holders: [{token, owner, mode, deadline}], waiters}
  const locks = new Map();
  // stories: lock name -> recent events seen by this page (the fallback
  // story when the server has no LockStory).
  const stories = new Map();
  // tokenLock: token -> lock name, so a refused write (a change of a
  // resource) is told in the story of the lock that granted its token.
  const tokenLock = new Map();

  function remember(tok, name) {
    if (!tok) return;
    tokenLock.set(tok, name);
    if (tokenLock.size > TOKENS_KEEP) tokenLock.delete(tokenLock.keys().next().value);
  }
  function story(name, ev) {
    let s = stories.get(name);
    if (!s) { s = []; stories.set(name, s); }
    s.push(ev);
    if (s.length > STORY_KEEP) s.shift();
    if (route.view === 'story' && route.name === name) renderStory();
  }

  function holderOf(h, at) {
    return { token: h.token || 0, owner: h.owner || '', mode: h.mode || 'exclusive', deadline: at + ms(h.remaining) };
  }

  function applyStatePage(st) {
    const at = performance.now();
    if (!st.page) { locks.clear(); }
    for (const l of st.locks || []) {
      const holders = (l.holders || []).map((h) => holderOf(h, at));
      for (const h of holders) remember(h.token, l.name);
      locks.set(l.name, { name: l.name, holders, waiters: l.waiters || 0 });
    }
    watchState.loading = !!st.more;
    if (!st.more && !stateShown) {
      performance.mark('fence-state-received');
      try { performance.measure('fence-state-received', 'fence-follow', 'fence-state-received'); } catch (e) { /* no follow mark */ }
    }
    if (st.historyGone) watchState.note = 'history gone: the state replaced the changes missed';
    dirty();
  }

  function applyChange(c, position) {
    const now = performance.now();
    const ev = { at: Date.now(), position, kind: c.kind, token: c.token || 0, owner: c.owner || '', mode: c.mode || '',
      ttl: ms(c.ttl), waiters: c.waiters || 0, holders: c.holders || 0, principal: c.principal || '',
      lastAccepted: c.lastAccepted || 0, version: c.version || 0, resource: '' };
    if (c.kind === 'written' || c.kind === 'refused') {
      ev.resource = c.name;
      const lock = tokenLock.get(ev.token) || tokenLock.get(ev.lastAccepted);
      story(lock || c.name, ev);
      return;
    }
    let l = locks.get(c.name);
    if (!l) { l = { name: c.name, holders: [], waiters: 0 }; locks.set(c.name, l); }
    const prev = stories.get(c.name);
    const last = prev && prev[prev.length - 1];
    switch (c.kind) {
      case 'granted':
        remember(ev.token, c.name);
        l.holders.push({ token: ev.token, owner: ev.owner, mode: ev.mode || 'exclusive', deadline: now + ev.ttl });
        if (last && (last.kind === 'released' || last.kind === 'expired') && last.waiters > 0) ev.handoff = true;
        break;
      case 'released':
      case 'expired':
        l.holders = l.holders.filter((h) => h.token !== ev.token);
        break;
    }
    l.waiters = ev.waiters;
    if (l.holders.length > ev.holders) l.holders = l.holders.slice(l.holders.length - ev.holders);
    if (!l.holders.length && !l.waiters) locks.delete(c.name);
    story(c.name, ev);
    dirty();
  }

  // ---- the watch: SSE over fetch ---------------------------------------------

  const watchState = { prefix: null, ctl: null, lastId: '', loading: false, live: false, error: '', note: '', events: 0 };

  function stopWatch() {
    if (watchState.ctl) watchState.ctl.abort();
    watchState.ctl = null;
  }

  function follow(prefix) {
    stopWatch();
    locks.clear();
    watchState.prefix = prefix;
    watchState.lastId = '';
    watchState.error = '';
    watchState.note = '';
    watchState.live = false;
    watchState.loading = true;
    sessionStorage.setItem(PREFIX_KEY, prefix);
    const ctl = new AbortController();
    watchState.ctl = ctl;
    performance.clearMarks('fence-follow');
    performance.mark('fence-follow');
    firstRows = false;
    stateShown = false;
    dirty();
    runWatch(prefix, ctl);
  }

  async function runWatch(prefix, ctl) {
    let backoff = 250;
    while (!ctl.signal.aborted) {
      let cut = false;
      try {
        const headers = authHeaders();
        if (watchState.lastId) headers['Last-Event-ID'] = watchState.lastId;
        const res = await fetch('/v1/watch?prefix=' + encodeURIComponent(prefix), { headers, signal: ctl.signal, cache: 'no-store' });
        if (!res.ok) {
          // The reason header comes with the status line, before the body.
          const reason = res.headers.get('Fence-Reason') || '';
          let body = {};
          try { body = await res.json(); } catch (e) { /* not JSON, or cut */ }
          if (ctl.signal.aborted) return; // another prefix is followed now: this watch says nothing
          if (res.status === 401) { showLogin('The server asks for a token: ' + (body.message || reason || 'unauthenticated')); return; }
          watchState.error = (body.message || reason || 'refused') + ' (HTTP ' + res.status + ')';
          watchState.live = false;
          locks.clear();
          dirty();
          if (res.status !== 429 && res.status < 500) return; // a refusal retrying does not change
          cut = true;
        } else {
          backoff = 250;
          watchState.error = '';
          cut = await readSSE(res.body, ctl);
        }
      } catch (e) {
        if (ctl.signal.aborted) return;
        cut = true;
      }
      if (ctl.signal.aborted) return;
      watchState.live = false;
      dirty();
      if (!cut) return;
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 5000);
    }
  }

  // readSSE parses text/event-stream (fields event, data, id; comments are
  // heartbeats) until the stream ends; true when it should be redialled.
  async function readSSE(body, ctl) {
    const reader = body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    let event = '', data = [], id = null;
    let timer = 0;
    const arm = () => { clearTimeout(timer); timer = setTimeout(() => reader.cancel(), HEARTBEAT_GRACE); };
    arm();
    watchState.live = true;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (ctl.signal.aborted) return false;
        if (done) return true;
        arm();
        buf += dec.decode(value, { stream: true });
        let start = 0, nl;
        while ((nl = buf.indexOf('\n', start)) >= 0) {
          let line = buf.slice(start, nl);
          start = nl + 1;
          if (line.endsWith('\r')) line = line.slice(0, -1);
          if (line === '') {
            if (data.length) {
              if (id !== null) watchState.lastId = id;
              const stop = dispatch(event || 'message', data.join('\n'));
              if (stop !== undefined) return stop;
            }
            event = ''; data = []; id = null;
            continue;
          }
          if (line[0] === ':') continue; // heartbeat or greeting
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? '' : line.slice(colon + 1);
          if (val[0] === ' ') val = val.slice(1);
          if (field === 'event') event = val;
          else if (field === 'data') data.push(val);
          else if (field === 'id') id = val;
        }
        buf = buf.slice(start);
      }
    } finally {
      clearTimeout(timer);
    }
  }

  // dispatch handles one event; a boolean ends the stream (true: redial).
  function dispatch(event, data) {
    let v;
    try { v = JSON.parse(data); } catch (e) { return undefined; }
    watchState.events++;
    if (event === 'state' || v.state) {
      applyStatePage(v.state || {});
    } else if (event === 'change' || v.change) {
      applyChange(v.change || {}, v.position);
    } else if (event === 'error') {
      watchState.error = v.message || v.code || 'the watch ended';
      dirty();
      if (v.code === 'unauthenticated') { showLogin('The token is no longer valid: ' + watchState.error); return false; }
      return v.code === 'resource_exhausted' || v.code === 'unavailable';
    }
    return undefined;
  }

  // ---- the lock table ------------------------------------------------------------

  let sortKey = 'name', sortDir = 1;
  let filter = '';
  let rows = [];             // the locks shown, filtered and sorted
  let rowsDirty = true;
  let scheduled = false;
  let firstRows = false;
  let stateShown = false;
  let selected = -1;         // index in rows of the selected row
  let lastSort = 0;

  function dirty() {
    rowsDirty = true;
    if (!scheduled) { scheduled = true; requestAnimationFrame(frame); }
  }
  function frame() {
    scheduled = false;
    if (route.view !== 'locks') return;
    // A very large table is re-sorted at most 4 times a second while
    // changes stream in; the countdown ticks between.
    const now = performance.now();
    if (rowsDirty && (locks.size < 20000 || now - lastSort > 250 || watchState.loading === false && rows.length === 0)) {
      rebuild();
      lastSort = performance.now();
    } else if (rowsDirty && !scheduled) {
      scheduled = true;
      setTimeout(() => requestAnimationFrame(frame), 250);
    }
    renderRows();
    renderStatus();
    if (!watchState.loading && !stateShown && watchState.live) {
      stateShown = true;
      performance.mark('fence-state-shown');
      try { performance.measure('fence-whole-state', 'fence-follow', 'fence-state-shown'); } catch (e) { /* no follow mark */ }
    }
  }

  function sortValue(l, key, now) {
    const h = l.holders[0];
    switch (key) {
      case 'mode': return h ? h.mode : '';
      case 'owner': return h ? h.owner : '';
      case 'token': return h ? h.token : 0;
      case 'remaining': return h ? Math.min(...l.holders.map((x) => x.deadline)) - now : -1;
      case 'waiters': return l.waiters;
      default: return l.name;
    }
  }

  function rebuild() {
    rowsDirty = false;
    const f = filter.toLowerCase();
    const out = [];
    for (const l of locks.values()) {
      if (f && !l.name.toLowerCase().includes(f) && !l.holders.some((h) => h.owner.toLowerCase().includes(f))) continue;
      out.push(l);
    }
    const now = performance.now();
    const key = sortKey, dir = sortDir;
    if (key === 'name') {
      out.sort((a, b) => (a.name < b.name ? -dir : a.name > b.name ? dir : 0));
    } else {
      const keyed = out.map((l) => [sortValue(l, key, now), l]);
      keyed.sort((a, b) => (a[0] < b[0] ? -dir : a[0] > b[0] ? dir : (a[1].name < b[1].name ? -1 : 1)));
      for (let i = 0; i < keyed.length; i++) out[i] = keyed[i][1];
    }
    rows = out;
    if (selected >= rows.length) selected = rows.length - 1;
  }

  const body = $('locks-body');
  const scroller = $('locks-scroll');
  const topPad = el('tr', 'spacer');
  const botPad = el('tr', 'spacer');
  topPad.appendChild(el('td'));
  botPad.appendChild(el('td'));
  topPad.firstChild.colSpan = 7;
  botPad.firstChild.colSpan = 7;
  body.appendChild(topPad);
  body.appendChild(botPad);
  const pool = [];

  function rowEl() {
    const tr = el('tr', 'lock');
    const name = el('td');
    const link = el('a');
    name.appendChild(link);
    tr.appendChild(name);
    for (const c of ['mode', 'owner', 'num token', 'num remaining', 'num waiters']) tr.appendChild(el('td', c));
    const act = el('td', 'act-col');
    const btn = el('button', null, 'Release');
    btn.type = 'button';
    btn.addEventListener('click', () => askRelease(tr.dataset.name, Number(tr.dataset.token), tr.dataset.owner));
    act.appendChild(btn);
    tr.appendChild(act);
    return tr;
  }

  function renderRows() {
    const n = rows.length;
    const viewH = scroller.clientHeight || 600;
    const first = Math.max(0, Math.floor(scroller.scrollTop / ROW_H) - OVERSCAN);
    const count = Math.min(MAX_ROWS, Math.ceil(viewH / ROW_H) + 2 * OVERSCAN, Math.max(0, n - first));
    topPad.firstChild.style.height = (first * ROW_H) + 'px';
    botPad.firstChild.style.height = (Math.max(0, n - first - count) * ROW_H) + 'px';
    while (pool.length < count) pool.push(rowEl());
    // Rows in the DOM: exactly count, between the two spacers.
    let cur = topPad.nextSibling;
    for (let i = 0; i < count; i++) {
      const tr = pool[i];
      if (cur !== tr) body.insertBefore(tr, cur); else cur = cur.nextSibling;
      fillRow(tr, rows[first + i], first + i);
    }
    for (let i = count; i < pool.length; i++) if (pool[i].parentNode) pool[i].remove();
    if (count > 0 && !firstRows) {
      firstRows = true;
      performance.mark('fence-first-rows');
      try { performance.measure('fence-first-paint', 'fence-follow', 'fence-first-rows'); } catch (e) { /* no follow mark */ }
    }
  }

  function fillRow(tr, l, i) {
    const now = performance.now();
    const c = tr.children;
    const h = l.holders;
    tr.dataset.name = l.name;
    tr.dataset.index = String(i);
    tr.classList.toggle('sel', i === selected);
    const a = c[0].firstChild;
    if (a.textContent !== vis(l.name)) {
      a.textContent = vis(l.name);
      a.href = '#/story/' + encodeURIComponent(l.name);
    }
    c[1].textContent = h.length ? h[0].mode : '';
    c[2].textContent = vis(h.map((x) => x.owner || '—').join(', '));
    c[3].textContent = h.map((x) => x.token).join(', ');
    c[4].textContent = h.length ? fmtMs(Math.min(...h.map((x) => x.deadline)) - now) : '';
    c[5].textContent = String(l.waiters || 0);
    const btn = c[6].firstChild;
    if (canAct() && h.length) {
      btn.hidden = false;
      tr.dataset.token = String(h[0].token);
      tr.dataset.owner = h[0].owner;
      btn.setAttribute('aria-label', 'Release ' + l.name + ' (token ' + h[0].token + ')');
    } else {
      btn.hidden = true;
    }
  }

  function renderStatus() {
    const s = $('locks-status');
    const p = watchState.prefix === '' ? 'every lock' : 'prefix "' + watchState.prefix + '"';
    if (watchState.error) {
      s.textContent = vis('Not following ' + p + ': ' + watchState.error);
      s.classList.add('error');
      return;
    }
    s.classList.remove('error');
    const shown = rows.length === locks.size ? locks.size + ' locks' : rows.length + ' of ' + locks.size + ' locks';
    const state = watchState.loading ? 'loading the state…' : watchState.live ? 'live' : 'reconnecting…';
    s.textContent = vis('Following ' + p + ': ' + shown + ', ' + state + (watchState.note ? ' (' + watchState.note + ')' : ''));
  }

  scroller.addEventListener('scroll', () => { if (!scheduled) { scheduled = true; requestAnimationFrame(frame); } }, { passive: true });
  window.addEventListener('resize', () => dirty());

  // Keyboard: arrows move the selection (scrolling it into view), Enter
  // opens the selected lock's story.
  scroller.addEventListener('keydown', (ev) => {
    if (!rows.length) return;
    let next = selected;
    if (ev.key === 'ArrowDown') next = Math.min(rows.length - 1, selected + 1);
    else if (ev.key === 'ArrowUp') next = Math.max(0, selected - 1);
    else if (ev.key === 'PageDown') next = Math.min(rows.length - 1, selected + Math.floor(scroller.clientHeight / ROW_H));
    else if (ev.key === 'PageUp') next = Math.max(0, selected - Math.floor(scroller.clientHeight / ROW_H));
    else if (ev.key === 'Home') next = 0;
    else if (ev.key === 'End') next = rows.length - 1;
    else if (ev.key === 'Enter' && selected >= 0 && ev.target === scroller) { location.hash = '#/story/' + encodeURIComponent(rows[selected].name); return; }
    else return;
    ev.preventDefault();
    selected = next;
    const top = selected * ROW_H, head = ROW_H;
    if (top < scroller.scrollTop + head) scroller.scrollTop = top - head;
    else if (top + ROW_H > scroller.scrollTop + scroller.clientHeight) scroller.scrollTop = top + ROW_H - scroller.clientHeight;
    renderRows();
  });

  for (const b of document.querySelectorAll('#locks-table th button')) {
    b.addEventListener('click', () => {
      const k = b.dataset.sort;
      if (sortKey === k) sortDir = -sortDir; else { sortKey = k; sortDir = 1; }
      for (const th of document.querySelectorAll('#locks-table th')) th.removeAttribute('aria-sort');
      b.parentNode.setAttribute('aria-sort', sortDir > 0 ? 'ascending' : 'descending');
      rowsDirty = true;
      rebuild();
      renderRows();
    });
  }

  $('prefix-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const p = $('prefix-input').value;
    if (route.view !== 'locks') location.hash = '#/locks';
    follow(p);
  });
  $('filter-input').addEventListener('input', () => {
    filter = $('filter-input').value;
    performance.clearMarks('fence-filter');
    performance.mark('fence-filter');
    rowsDirty = true;
    rebuild();
    scroller.scrollTop = 0;
    renderRows();
    renderStatus();
    // The filter's time: from the keystroke to the frame that shows it.
    requestAnimationFrame(() => setTimeout(() => {
      performance.mark('fence-filter-shown');
      try { performance.measure('fence-filter', 'fence-filter', 'fence-filter-shown'); } catch (e) { /* cleared */ }
    }, 0));
  });

  // The countdown: the visible rows' remaining times, four times a second.
  setInterval(() => { if (route.view === 'locks' && rows.length) renderRows(); }, 250);

  // ---- release ----------------------------------------------------------------------

  let pending = null;
  function askRelease(name, tok, owner) {
    if (!canAct()) return;
    pending = { name, token: tok, owner };
    // Name and owner quoted as JSON strings: a quote in an owner cannot
    // end its quotation and write a token of its own into the sentence.
    $('confirm-text').textContent = vis('Release ' + JSON.stringify(name) + ', held by ' + (owner ? JSON.stringify(owner) : 'an owner with no name') + ' with token ' + tok + '?');
    $('confirm').showModal();
  }
  $('confirm-cancel').addEventListener('click', () => { pending = null; $('confirm').close(); });
  $('confirm-ok').addEventListener('click', async () => {
    const p = pending;
    pending = null;
    $('confirm').close();
    if (!p) return;
    try {
      // An admin's Release of another principal's lease: the token is the
      // confirmation (a newer holder is refused STALE_TOKEN and keeps it).
      await call('LockService', 'Release', { name: p.name, token: p.token });
      banner('Released "' + p.name + '" (token ' + p.token + ').', false);
    } catch (e) {
      banner('Release of "' + p.name + '" refused: ' + e.message, true);
    }
  });

  // ---- story -------------------------------------------------------------------------

  let storyFromServer = null; // {name, events} from LockStory, or null

  async function loadStory(name) {
    storyFromServer = null;
    $('story-name').textContent = vis(name);
    renderStory();
    try {
      const r = await call('OperatorService', 'LockStory', { name });
      if (route.view === 'story' && route.name === name) {
        storyFromServer = { name, events: r.events || [], truncated: !!r.truncated, since: r.sinceUnixMs || 0 };
        renderStory();
      }
    } catch (e) {
      if (!unserved(e)) $('story-source').textContent = 'The server did not tell this lock\'s story: ' + e.message;
    }
  }

  // storyLine is one event (LockStory's StoryEvent, or a change this page
  // saw) as {cls, kind, text}; a refusal puts the two tokens side by side
  // as the store said it.
  function storyLine(e) {
    const tok = e.token || 0;
    const owner = e.owner ? ' to "' + e.owner + '"' : '';
    const kind = { grant: 'granted', handoff: 'handoff', release: 'released', expire: 'expired', write: 'written', refused_stale: 'refused' }[e.kind] || e.kind;
    const handoff = kind === 'handoff' || (kind === 'granted' && e.handoff);
    switch (kind) {
      case 'granted':
      case 'handoff':
        return { cls: handoff ? 'handoff' : 'granted', kind: handoff ? 'hand-off' : 'granted',
          text: 'token ' + tok + owner + (e.mode && e.mode !== 'exclusive' ? ' (' + e.mode + ')' : '') +
            (e.ttl ? ', ttl ' + fmtMs(e.ttl) : '') + (handoff ? ', the next waiter' : '') };
      case 'released': return { cls: 'released', kind: 'released', text: 'token ' + tok + (e.owner ? ' of "' + e.owner + '"' : '') };
      case 'expired': return { cls: 'expired', kind: 'expired', text: 'token ' + tok + (e.owner ? ' of "' + e.owner + '"' : '') + ': its lease ran out' };
      case 'queued': return { cls: 'queued', kind: 'queued', text: (e.owner ? '"' + e.owner + '" ' : '') + 'waits (' + (e.waiters || 1) + ' waiting)' };
      case 'left_queue': return { cls: 'queued', kind: 'left queue', text: (e.owner ? '"' + e.owner + '" ' : 'a waiter ') + 'stopped waiting' };
      case 'written': return { cls: 'written', kind: 'written', text: (e.resource ? e.resource + ' ' : '') + 'with token ' + tok + (e.version ? ' (version ' + e.version + ')' : '') };
      case 'refused': {
        const bad = e.refusedToken || tok, acc = e.acceptedToken || e.lastAccepted || 0;
        return { cls: 'refused', kind: 'refused', text: 'write' + (e.resource ? ' to ' + e.resource : '') + ': token ' + bad + ' is older than accepted token ' + acc, tokens: [bad, acc] };
      }
      default: return { cls: '', kind: e.kind || '?', text: 'token ' + tok };
    }
  }

  function renderStory() {
    if (route.view !== 'story') return;
    const name = route.name;
    const now = $('story-now');
    now.textContent = '';
    const l = locks.get(name);
    if (l && l.holders.length) {
      const t = performance.now();
      now.appendChild(el('span', null, 'Held now: '));
      for (const h of l.holders) {
        now.appendChild(el('span', 'tok', 'token ' + h.token));
        now.appendChild(el('span', null, ' by "' + h.owner + '", ' + fmtMs(h.deadline - t) + ' left  '));
      }
      if (l.waiters) now.appendChild(el('span', null, l.waiters + ' waiting'));
      if (canAct()) {
        const b = el('button', 'danger', 'Release…');
        b.type = 'button';
        b.addEventListener('click', () => askRelease(name, l.holders[0].token, l.holders[0].owner));
        now.appendChild(b);
      }
    } else {
      now.textContent = l ? 'Not held; ' + l.waiters + ' waiting.' : 'Not held now (or not under the prefix this page follows).';
    }
    const list = $('story-list');
    list.textContent = '';
    let events, source;
    if (storyFromServer && storyFromServer.name === name) {
      events = storyFromServer.events.map((e) => Object.assign({ at: e.atUnixMs }, e));
      // The changes seen live after the last entry the node told (and the
      // refusals of other resources whose token this lock granted).
      const lastIdx = events.reduce((m, e) => Math.max(m, e.logIndex || 0), 0);
      for (const e of stories.get(name) || []) if (posIndex(e.position) > lastIdx || (e.kind === 'refused' && e.resource !== name)) events.push(e);
      source = 'From this node\'s record of the lock (LockStory' + (storyFromServer.truncated ? ', older events may be missing' : '') +
        (storyFromServer.since ? ', since ' + new Date(storyFromServer.since).toLocaleString() : '') + '), then the changes seen live.';
    } else {
      events = (stories.get(name) || []).slice();
      source = 'From the changes this page has seen since it started following; the server\'s record (OperatorService.LockStory) was not available.';
    }
    $('story-source').textContent = source;
    for (let i = events.length - 1; i >= 0; i--) {
      const e = events[i];
      const s = storyLine(e);
      const li = el('li', s.cls);
      li.appendChild(el('span', 'when', clock(e.at || e.time || e.unixMs)));
      li.appendChild(el('span', 'kind', s.kind));
      li.appendChild(el('span', s.cls === 'refused' ? 'why' : 'what', s.text));
      if (e.principal) li.appendChild(el('span', 'note', '  principal ' + e.principal));
      if (e.position) li.dataset.position = e.position;
      if (s.tokens) { li.dataset.refused = String(s.tokens[0]); li.dataset.accepted = String(s.tokens[1]); }
      list.appendChild(li);
    }
    if (!events.length) list.appendChild(el('li', null, 'Nothing yet.'));
  }

  function posIndex(p) { return p ? Number(String(p).split('.')[0]) || 0 : 0; }

  // ---- sessions, cluster, activity -------------------------------------------------

  function fillTable(tbody, items, cols) {
    tbody.textContent = '';
    for (const it of items) {
      const tr = el('tr');
      for (const c of cols) tr.appendChild(el('td', null, c(it)));
      tbody.appendChild(tr);
    }
  }

  async function loadSessions() {
    const s = $('sessions-status');
    try {
      const list = [];
      let pageToken = '', pages = 0, more = false;
      do {
        const r = await call('OperatorService', 'ListSessions', { pageToken, limit: 1000 });
        list.push(...(r.sessions || []));
        pageToken = r.nextPageToken || '';
        more = !!pageToken && ++pages >= 10;
      } while (pageToken && !more);
      s.textContent = list.length + ' session' + (list.length === 1 ? '' : 's') + (more ? ' (the first ' + list.length + ')' : '');
      s.classList.remove('error');
      fillTable($('sessions-body'), list, [
        (x) => String(x.sessionId || ''), (x) => x.principal || '—',
        (x) => [...new Set((x.leases || []).map((l) => l.owner).filter(Boolean))].join(', '),
        (x) => fmtMs(x.ttlMs || 0), (x) => fmtMs(x.sinceKeepaliveMs || 0),
        (x) => String((x.leases || []).length + (x.hiddenLeases || 0)) +
          ((x.leases || []).length ? ': ' + x.leases.map((l) => l.name + ' #' + l.token).join(', ') : '') +
          (x.hiddenLeases ? ' (' + x.hiddenLeases + ' not readable)' : ''),
      ]);
    } catch (e) {
      s.textContent = unserved(e) ? 'This server does not list sessions (OperatorService.ListSessions).' : 'Sessions: ' + e.message;
      s.classList.add('error');
    }
  }

  async function loadCluster() {
    const s = $('cluster-status');
    let nodes = [];
    try {
      const r = await call('OperatorService', 'ClusterOverview', {});
      nodes = (r.members || []).map((n) => Object.assign({ raftAddr: n.address, health: n.healthy ? 'healthy' : (n.error || 'not ready') }, n));
    } catch (e) {
      if (!unserved(e)) { s.textContent = 'Cluster: ' + e.message; s.classList.add('error'); return; }
      try {
        const r = await call('ClusterService', 'Members', {});
        nodes = (r.members || []).map((m) => Object.assign({ health: m.error ? m.error : (m.status && m.status.ready ? 'ready' : 'not ready') }, m.status || {}, m));
      } catch (e2) { s.textContent = 'Cluster: ' + e2.message; s.classList.add('error'); return; }
    }
    s.classList.remove('error');
    const leader = nodes.find((n) => n.leader || n.role === 'leader');
    s.textContent = nodes.length + ' node' + (nodes.length === 1 ? '' : 's') + (leader ? ', leader ' + (leader.id || leader.nodeId) : ', no leader known');
    fillTable($('cluster-body'), nodes, [
      (n) => n.id || n.nodeId || '', (n) => n.raftAddr || '—', (n) => n.role || '', (n) => (n.leader || n.role === 'leader' ? 'yes' : ''),
      (n) => String(n.term || 0), (n) => String(n.appliedIndex || 0),
      (n) => n.health || n.error || (n.fatal ? 'failed: ' + n.fatal : n.ready ? 'ready' : 'not ready'), (n) => String(n.lastToken || 0),
    ]);
  }

  const SVG = 'http://www.w3.org/2000/svg';
  function chart(title, series, unit) {
    const box = el('div', 'chart');
    box.appendChild(el('h3', null, title));
    const w = 360, h = 120, pad = 24;
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
    svg.setAttribute('role', 'img');
    let max = 0, len = 0;
    for (const s of series) { for (const v of s.values) if (v > max) max = v; len = Math.max(len, s.values.length); }
    const top = max > 0 ? max : 1;
    const axis = document.createElementNS(SVG, 'path');
    axis.setAttribute('class', 'axis');
    axis.setAttribute('d', 'M' + pad + ' 4 V' + (h - 14) + ' H' + w);
    svg.appendChild(axis);
    const lab = document.createElementNS(SVG, 'text');
    lab.setAttribute('x', '0'); lab.setAttribute('y', '12');
    lab.textContent = fmtNum(top) + (unit || '');
    svg.appendChild(lab);
    const lab2 = document.createElementNS(SVG, 'text');
    lab2.setAttribute('x', String(pad)); lab2.setAttribute('y', String(h - 2));
    lab2.textContent = '−15 min';
    svg.appendChild(lab2);
    const lab3 = document.createElementNS(SVG, 'text');
    lab3.setAttribute('x', String(w - 24)); lab3.setAttribute('y', String(h - 2));
    lab3.textContent = 'now';
    svg.appendChild(lab3);
    series.forEach((s, k) => {
      if (!s.values.length) return;
      const p = document.createElementNS(SVG, 'polyline');
      const pts = s.values.map((v, i) => {
        const x = pad + (len <= 1 ? 0 : (i * (w - pad - 2)) / (len - 1));
        const y = (h - 14) - (v / top) * (h - 22);
        return x.toFixed(1) + ',' + y.toFixed(1);
      });
      p.setAttribute('points', pts.join(' '));
      p.setAttribute('class', 's' + (k % 5));
      svg.appendChild(p);
    });
    const label = title + ': ' + series.map((s) => s.name + ' now ' + fmtNum(s.values[s.values.length - 1] || 0) + (unit || '')).join(', ');
    svg.setAttribute('aria-label', label);
    box.appendChild(svg);
    const leg = el('div', 'legend');
    series.forEach((s, k) => leg.appendChild(el('span', 'k' + (k % 5), '— ' + s.name + ' ' + fmtNum(s.values[s.values.length - 1] || 0) + (unit || ''))));
    box.appendChild(leg);
    return box;
  }
  function fmtNum(v) { return v >= 100 ? String(Math.round(v)) : v >= 10 ? v.toFixed(1) : v.toFixed(2); }

  async function loadActivity() {
    const s = $('activity-status');
    const box = $('charts');
    try {
      const r = await call('OperatorService', 'Activity', {});
      const pts = r.points || [];
      const step = (r.stepMs || 5000) / 1000;
      const perS = (v) => (Number(v) || 0) / step;
      const reasons = new Set();
      for (const p of pts) for (const x of p.refusals || []) reasons.add(x.reason);
      const count = (p, k) => { const x = (p.refusals || []).find((y) => y.reason === k); return x ? x.count : 0; };
      box.textContent = '';
      box.appendChild(chart('Grants per second', [{ name: 'grants/s', values: pts.map((p) => perS(p.grants)) }], '/s'));
      const refusals = [...reasons].sort().map((k) => ({ name: k, values: pts.map((p) => perS(count(p, k))) }));
      box.appendChild(chart('Refusals per second, by reason', refusals.length ? refusals : [{ name: 'none', values: pts.map(() => 0) }], '/s'));
      box.appendChild(chart('Acquire latency', [
        { name: 'p50', values: pts.map((p) => (p.acquireP50Us || 0) / 1000) },
        { name: 'p99', values: pts.map((p) => (p.acquireP99Us || 0) / 1000) },
      ], ' ms'));
      s.textContent = pts.length + ' steps of ' + step + 's, this node\'s view';
      s.classList.remove('error');
    } catch (e) {
      s.textContent = unserved(e) ? 'This server keeps no activity ring (OperatorService.Activity).' : 'Activity: ' + e.message;
      s.classList.add('error');
    }
  }

  // ---- routing ---------------------------------------------------------------------

  const route = { view: '', name: '' };
  let poll = 0;

  function parseHash() {
    const h = location.hash.replace(/^#\/?/, '');
    if (h.startsWith('story/')) return { view: 'story', name: decodeURIComponent(h.slice(6)) };
    const v = h.split('?')[0];
    return { view: ['locks', 'sessions', 'cluster', 'activity'].includes(v) ? v : 'locks', name: '' };
  }

  function show() {
    if (!who) return;
    const r = parseHash();
    route.view = r.view;
    route.name = r.name;
    clearInterval(poll);
    $('login').hidden = true;
    for (const v of document.querySelectorAll('.view')) v.hidden = v.id !== 'view-' + route.view;
    for (const a of document.querySelectorAll('.top nav a')) {
      if (a.id === 'nav-' + route.view || (route.view === 'story' && a.id === 'nav-locks')) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    const again = (f, every) => { f(); poll = setInterval(f, every); };
    switch (route.view) {
      case 'locks': dirty(); break;
      case 'story': loadStory(route.name); poll = setInterval(renderStory, 1000); break;
      case 'sessions': again(loadSessions, 3000); break;
      case 'cluster': again(loadCluster, 3000); break;
      case 'activity': again(loadActivity, 5000); break;
    }
  }
  window.addEventListener('hashchange', show);

  async function start() {
    banner('', false);
    try {
      who = await whoAmI();
    } catch (e) {
      if (!(e instanceof CallError && e.status === 401)) showLogin('Cannot reach the server: ' + e.message);
      return;
    }
    $('who').textContent = (who.principal ? who.principal : (who.enabled ? 'anonymous' : 'authentication off')) +
      (who.admin ? ' (admin)' : '') + (MODE === 'read' ? ' · read-only page' : '');
    $('forget').hidden = !token();
    document.documentElement.classList.toggle('noadmin', !canAct());
    const p = sessionStorage.getItem(PREFIX_KEY) || '';
    $('prefix-input').value = p;
    follow(p);
    show();
  }

  start();
})();
