// levee status page: renders the JSON served by the same handler, once a
// second. No dependencies; the charts are plain SVG.
(function () {
  'use strict';
  var SVGNS = 'http://www.w3.org/2000/svg';
  var CRITS = ['CRITICAL_PLUS', 'CRITICAL', 'SHEDDABLE_PLUS', 'SHEDDABLE'];
  var COLORS = { CRITICAL_PLUS: '#1b5e20', CRITICAL: '#1565c0', SHEDDABLE_PLUS: '#f9a825', SHEDDABLE: '#c62828' };

  function $(sel) { return document.querySelector(sel); }
  function num(v) { return v === null || v === undefined ? null : Number(v); }

  function fmt(v, kind) {
    if (v === null || v === undefined || isNaN(v)) { return '–'; }
    switch (kind) {
      case 'int': return String(Math.round(v));
      case 'pct': return (v * 100).toFixed(1) + '%';
      case 'secs': return fmtDuration(v);
      case 'rps': return v >= 100 ? v.toFixed(0) : v.toFixed(1);
      default:
        if (v !== 0 && Math.abs(v) < 0.01) { return v.toExponential(2); }
        return v.toFixed(Math.abs(v) >= 100 ? 0 : 3);
    }
  }
  function fmtDuration(s) {
    if (s < 60) { return s.toFixed(1) + ' s'; }
    if (s < 3600) {
      var m = Math.floor(s / 60), r = Math.floor(s % 60);
      return r === 0 ? m + ' min' : m + 'm ' + (r < 10 ? '0' : '') + r + 's';
    }
    return (s / 3600).toFixed(1) + ' h';
  }

  // set shows text and keeps the raw value in data-value, so that tools
  // (and the browser test) can read the exact number behind the text.
  function set(el, v, kind) {
    el.dataset.value = v === null || v === undefined ? '' : String(v);
    el.textContent = fmt(v, kind);
  }

  var FIELDS = {
    load: 'num', shed_level: 'num', admit_ratio: 'pct', degrade_level: 'int',
    capacity_rps: 'rps', offered_rps: 'rps', retry_ratio: 'pct', shed_seconds: 'secs', degraded_seconds: 'secs'
  };

  function renderState(cur) {
    var badge = $('#state');
    var state = 'OK', cls = '';
    if (cur.overloaded || cur.shed_level > 0) { state = 'OVERLOADED'; cls = 'overloaded'; }
    else if (cur.degrade_level > 0) { state = 'DEGRADED'; cls = 'degraded'; }
    if (cur.no_retry) { state += ' · NO RETRY'; }
    if (cur.dry_run) { state += ' · DRY RUN'; }
    badge.textContent = state;
    badge.className = 'badge ' + cls;
    badge.dataset.value = state;
    var seq = $('#seq');
    seq.textContent = String(cur.seq);
    seq.dataset.value = String(cur.seq);
    $('#time').textContent = new Date(cur.time).toLocaleTimeString();
    Object.keys(FIELDS).forEach(function (k) {
      set($('[data-field="' + k + '"]'), num(cur[k]), FIELDS[k]);
    });
  }

  function cell(tr, field, v, kind) {
    var td = document.createElement('td');
    td.dataset.field = field;
    set(td, v, kind);
    tr.appendChild(td);
    return td;
  }

  function renderSignals(cur) {
    var body = $('#signals tbody');
    body.textContent = '';
    cur.signals.forEach(function (s) {
      var tr = document.createElement('tr');
      tr.dataset.signal = s.name;
      var th = document.createElement('td');
      th.textContent = s.name;
      tr.appendChild(th);
      cell(tr, 'value', num(s.value));
      cell(tr, 'target', num(s.target));
      cell(tr, 'load', num(s.load), 'pct');
      var td = document.createElement('td');
      var bar = document.createElement('div');
      bar.className = 'bar' + (s.load > 1 ? ' over' : '');
      var fill = document.createElement('div');
      // the bar spans 0..150% of the target; the mark is the target
      fill.style.width = Math.min(100, Math.max(0, (s.load || 0) / 1.5 * 100)) + '%';
      var mark = document.createElement('span');
      mark.className = 'mark';
      mark.style.left = (100 / 1.5) + '%';
      bar.appendChild(fill);
      bar.appendChild(mark);
      td.appendChild(bar);
      tr.appendChild(td);
      body.appendChild(tr);
    });
  }

  function renderCrit(cur) {
    var body = $('#crit tbody');
    body.textContent = '';
    cur.criticalities.forEach(function (c) {
      var tr = document.createElement('tr');
      tr.dataset.crit = c.name;
      var th = document.createElement('td');
      var sw = document.createElement('span');
      sw.className = 'sw';
      sw.style.background = COLORS[c.name];
      sw.style.marginLeft = '0';
      th.appendChild(sw);
      th.appendChild(document.createTextNode(c.name));
      tr.appendChild(th);
      cell(tr, 'admitted', c.admitted, 'int');
      cell(tr, 'rejected', c.rejected, 'int');
      cell(tr, 'would_reject', c.would_reject, 'int');
      cell(tr, 'admitted_rps', num(c.admitted_rps), 'rps');
      cell(tr, 'rejected_rps', num(c.rejected_rps), 'rps');
      cell(tr, 'would_reject_rps', num(c.would_reject_rps), 'rps');
      body.appendChild(tr);
    });
  }

  // units formats a resource's used and limit figures.
  function units(v, unit) {
    if (v === null || v === undefined || v === 0) { return '–'; }
    if (unit === 'bytes') {
      var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
      while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
      return (i === 0 ? String(v) : v.toFixed(1)) + ' ' + u[i];
    }
    return String(Math.round(v));
  }

  function renderOverload(ov) {
    var sec = $('#overload');
    if (!ov) { sec.hidden = true; return; }
    sec.hidden = false;
    var lv = $('#ov-level');
    lv.textContent = ov.level;
    lv.dataset.value = ov.level;
    lv.className = ov.level === 'normal' ? '' : 'ov-hot';
    if (ov.level !== 'normal') { // the process nears one of its limits
      var badge = $('#state');
      badge.textContent = (badge.textContent === 'OK' ? '' : badge.textContent + ' · ') + 'LIMIT ' + ov.level.toUpperCase();
      badge.dataset.value = badge.textContent;
      badge.className = 'badge overloaded';
    }
    set($('#ov-inflight'), ov.in_flight, 'int');
    var cap = $('#ov-cap');
    set(cap, ov.in_flight_cap || null, 'int');
    var refused = 0;
    Object.keys(ov.refused || {}).forEach(function (v) {
      Object.keys(ov.refused[v]).forEach(function (c) { refused += ov.refused[v][c]; });
    });
    set($('#ov-refused'), refused, 'int');
    var body = $('#ov-resources tbody');
    body.textContent = '';
    (ov.resources || []).forEach(function (r) {
      var tr = document.createElement('tr');
      tr.dataset.resource = r.name;
      var th = document.createElement('td');
      th.textContent = r.name;
      tr.appendChild(th);
      cell(tr, 'value', num(r.value), 'pct');
      cell(tr, 'used', null).textContent = units(r.used, r.unit);
      cell(tr, 'limit', null).textContent = units(r.limit, r.unit);
      cell(tr, 'enter', null).textContent = r.enter.map(function (e) { return e ? fmt(e, 'pct') : '–'; }).join(' / ');
      var td = cell(tr, 'level', null);
      td.textContent = r.level;
      td.dataset.value = r.level;
      if (r.level !== 'normal') { td.className = 'ov-hot'; }
      body.appendChild(tr);
    });
    body = $('#ov-actions tbody');
    body.textContent = '';
    (ov.actions || []).forEach(function (a) {
      var tr = document.createElement('tr');
      tr.dataset.action = a.action;
      var th = document.createElement('td');
      th.textContent = a.action;
      tr.appendChild(th);
      cell(tr, 'level', null).textContent = a.level;
      var td = cell(tr, 'active', null);
      td.textContent = a.active ? 'active' : '';
      td.dataset.value = String(a.active);
      if (a.active) { td.className = 'ov-hot'; }
      cell(tr, 'since', null).textContent = a.active && a.since ? new Date(a.since).toLocaleTimeString() : '';
      cell(tr, 'active_seconds', num(a.active_seconds), 'secs');
      body.appendChild(tr);
    });
  }

  function el(name, attrs, parent) {
    var e = document.createElementNS(SVGNS, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (parent) { parent.appendChild(e); }
    return e;
  }

  // chart draws series over the time window ending at the latest sample.
  // series: [{values: [number|null], color, dash, area}], one value per
  // sample in times (ms). stacked adds the series on top of each other.
  function chart(svg, times, series, opt) {
    // draw in CSS pixels so that text keeps its size at any width
    var W = Math.max(200, Math.round(svg.getBoundingClientRect().width) || 600), H = 160, L = 44, R = 8, T = 8, B = 20;
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    svg.textContent = '';
    var n = times.length;
    var tEnd = n ? times[n - 1] : 0;
    var span = Math.max(opt.window, 1000);
    var tops = times.map(function () { return 0; });
    var drawn = series.map(function (s) {
      var ys = s.values.map(function (v, i) {
        var base = opt.stacked ? tops[i] : 0;
        var top = v === null ? null : base + v;
        if (opt.stacked && v !== null) { tops[i] = top; }
        return { base: base, top: top };
      });
      return ys;
    });
    var ymax = opt.ymax || 0;
    drawn.forEach(function (ys) { ys.forEach(function (p) { if (p.top !== null && p.top > ymax) { ymax = p.top; } }); });
    if (!opt.ymax) { ymax = ymax > 0 ? ymax * 1.15 : 1; }
    function x(t) { return L + (W - L - R) * (1 - (tEnd - t) / span); }
    function y(v) { return T + (H - T - B) * (1 - Math.min(v, ymax) / ymax); }
    // grid and labels
    [0, 0.5, 1].forEach(function (f) {
      var v = ymax * f;
      el('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: '#e3e6ea' }, svg);
      var t = el('text', { x: L - 4, y: y(v) + 4, 'text-anchor': 'end' }, svg);
      t.textContent = fmt(v, opt.kind);
    });
    var lt = el('text', { x: L, y: H - 5 }, svg);
    lt.textContent = '−' + fmtDuration(span / 1000);
    var rt = el('text', { x: W - R, y: H - 5, 'text-anchor': 'end' }, svg);
    rt.textContent = 'now';
    drawn.forEach(function (ys, si) {
      var s = series[si];
      var d = '', area = '', open = false, run = [];
      function flush() {
        if (run.length && s.area) {
          var a = 'M' + run.map(function (p) { return x(p.t).toFixed(1) + ',' + y(p.top).toFixed(1); }).join('L');
          for (var k = run.length - 1; k >= 0; k--) { a += 'L' + x(run[k].t).toFixed(1) + ',' + y(run[k].base).toFixed(1); }
          area += a + 'Z';
        }
        run = [];
      }
      ys.forEach(function (p, i) {
        if (p.top === null || tEnd - times[i] > span) { open = false; flush(); return; }
        d += (open ? 'L' : 'M') + x(times[i]).toFixed(1) + ',' + y(p.top).toFixed(1);
        run.push({ t: times[i], top: p.top, base: p.base });
        open = true;
      });
      flush();
      if (area) { el('path', { d: area, fill: s.color, 'fill-opacity': 0.35, stroke: 'none' }, svg); }
      if (d) {
        var attrs = { d: d, fill: 'none', stroke: s.color, 'stroke-width': s.width || 1.8, 'data-series': s.name };
        if (s.dash) { attrs['stroke-dasharray'] = s.dash; }
        el('path', attrs, svg);
      }
    });
  }

  // hist is the page's copy of the history, oldest first; each poll asks
  // only for the samples after the last one it holds.
  var hist = [];

  function merge(doc) {
    var last = hist.length ? hist[hist.length - 1].seq : 0;
    if (doc.current.seq < last) { hist = []; last = 0; } // the server restarted
    doc.history.forEach(function (h) { if (h.seq > last) { hist.push(h); } });
    if (!hist.length || hist[hist.length - 1].seq !== doc.current.seq) {
      if (doc.current.seq > last) { hist.push(doc.current); }
    }
    var max = doc.history_max || 300;
    if (hist.length > max) { hist = hist.slice(hist.length - max); }
  }

  function renderCharts(doc) {
    var times = hist.map(function (h) { return Date.parse(h.time); });
    var window = Math.max(60, hist.length * doc.interval_s) * 1000;
    var box = $('#signal-charts');
    var names = doc.current.signals.map(function (s) { return s.name; });
    // one chart per signal, created once and redrawn in place
    names.forEach(function (name) {
      var id = 'chart-signal-' + name.replace(/[^a-zA-Z0-9_-]/g, '_');
      var svg = document.getElementById(id);
      if (!svg) {
        var fig = document.createElement('figure');
        var cap = document.createElement('figcaption');
        cap.innerHTML = '';
        cap.appendChild(document.createTextNode(name + ' '));
        var legend = document.createElement('span');
        legend.innerHTML = '<span class="sw" style="background:#1565c0"></span>value<span class="sw" style="background:#c62828"></span>target';
        cap.appendChild(legend);
        fig.appendChild(cap);
        svg = el('svg', { id: id, 'class': 'chart', viewBox: '0 0 600 160', role: 'img' });
        svg.setAttribute('aria-label', name + ' against its target');
        fig.appendChild(svg);
        box.appendChild(fig);
      }
      function pick(field) {
        return hist.map(function (h) {
          for (var i = 0; i < h.signals.length; i++) { if (h.signals[i].name === name) { return num(h.signals[i][field]); } }
          return null;
        });
      }
      chart(svg, times, [
        { name: 'target', values: pick('target'), color: '#c62828', dash: '6 4' },
        { name: 'value', values: pick('value'), color: '#1565c0', area: true }
      ], { window: window });
    });
    chart($('#chart-shed'), times, [
      { name: 'shed_level', values: hist.map(function (h) { return num(h.shed_level); }), color: '#c62828', area: true },
      { name: 'degrade_level', values: hist.map(function (h) { return num(h.degrade_level); }), color: '#8e24aa', dash: '4 3' }
    ], { window: window, ymax: 4, kind: 'num' });
    function rates(field) {
      // stacked from the bottom: the level shed first at the bottom
      return CRITS.slice().reverse().map(function (c) {
        return {
          name: c, color: COLORS[c], area: true, width: 1,
          values: hist.map(function (h) {
            for (var i = 0; i < h.criticalities.length; i++) { if (h.criticalities[i].name === c) { return num(h.criticalities[i][field]); } }
            return null;
          })
        };
      });
    }
    chart($('#chart-admitted'), times, rates('admitted_rps'), { window: window, stacked: true, kind: 'rps' });
    chart($('#chart-rejected'), times, rates('rejected_rps'), { window: window, stacked: true, kind: 'rps' });
  }

  function renderLegend() {
    var lg = $('#crit-legend');
    CRITS.forEach(function (c) {
      var sw = document.createElement('span');
      sw.className = 'sw';
      sw.style.background = COLORS[c];
      lg.appendChild(sw);
      lg.appendChild(document.createTextNode(c));
    });
  }

  function render(doc) {
    if (!doc || !doc.current) { return; }
    merge(doc);
    renderState(doc.current);
    renderSignals(doc.current);
    renderCrit(doc.current);
    renderOverload(doc.overload);
    renderCharts(doc);
    document.body.dataset.rendered = String(doc.current.seq);
    document.body.dataset.samples = String(hist.length);
  }

  var busy = false;
  function poll() {
    if (busy) { return; }
    busy = true;
    var since = hist.length ? hist[hist.length - 1].seq : 0;
    fetch('?format=json&since=' + since, { cache: 'no-store' }).then(function (r) {
      if (!r.ok) { throw new Error('HTTP ' + r.status); }
      return r.json();
    }).then(function (doc) {
      render(doc);
      var c = $('#conn');
      c.textContent = 'live';
      c.className = 'conn';
    }).catch(function () {
      var c = $('#conn');
      c.textContent = 'disconnected';
      c.className = 'conn down';
    }).then(function () { busy = false; });
  }

  renderLegend();
  try { render(JSON.parse($('#initial').textContent)); } catch (e) { /* the first poll renders */ }
  setInterval(poll, 1000);
})();
