// The history dashboard's charts: plain canvas, no library, no network.
// Reads the JSON island written by pytest_llmperf/history/dashboard.py; records how long it
// took on <body data-render-ms> (from navigation start) and how many charts it drew on <body data-charts>, and any
// error on <body data-errors> (the Chromium test reads them).
(function () {
  "use strict";
  var errors = [];
  window.addEventListener("error", function (e) {
    errors.push(String(e.message));
    document.body.dataset.errors = errors.join(" | ");
  });
  var t0 = performance.now();
  var DATA = JSON.parse(document.getElementById("llmperf-data").textContent);
  var COLORS = ["#8c959f", "#1a7f37", "#0969da", "#bf8700", "#cf222e", "#8250df"];
  var NAMES = ["measured", "PASS", "IMPROVED", "WARN", "FAIL", "INVALID"];
  var runs = DATA.runs;

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    for (var k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function fmt(v, unit) {
    if (v === null || v === undefined) return "-";
    if (unit === "s") return v < 1 ? (v * 1000).toFixed(v < 0.01 ? 2 : 1) + " ms" : v.toFixed(3) + " s";
    if (unit === "x") return v.toFixed(3) + "\u00d7";
    return (v >= 100 ? v.toFixed(0) : v.toFixed(1)).replace(/\B(?=(\d{3})+(?!\d))/g, ",") + " " + unit;
  }

  function tick(v, unit) {  // the axis: numbers only (the unit is in the chart's subtitle)
    if (unit === "s") v = v * 1000;
    var digits = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2;
    return v.toFixed(digits).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  function pct(v) { return (v >= 0 ? "+" : "\u2212") + Math.abs(v * 100).toFixed(1) + " %"; }

  function facts() {
    var last = runs[runs.length - 1];
    var incomplete = runs.filter(function (r) { return !r[3]; }).length;
    document.getElementById("facts").textContent =
      DATA.store + " \u00b7 " + runs.length + " runs" +
      (last ? " \u00b7 latest " + last[0] + " (" + last[1] + " UTC" + (last[2] ? ", " + last[2] : "") + ")" : "") +
      (incomplete ? " \u00b7 " + incomplete + " incomplete" : "") +
      " \u00b7 " + DATA.series.length + " points \u00b7 generated " + DATA.generated;
  }

  function openTable() {
    var box = document.getElementById("open");
    document.getElementById("open-count").textContent = "(" + DATA.open.length + ")";
    if (!DATA.open.length) { box.appendChild(el("p", {class: "empty"}, "None: every series is level since its first nights.")); return; }
    var table = el("table");
    var head = el("tr");
    ["first bad run", "profile", "point", "change", "95 % interval", "last good run", "what changed between them"].forEach(function (h) { head.appendChild(el("th", {}, h)); });
    table.appendChild(head);
    DATA.open.forEach(function (c) {
      var tr = el("tr");
      tr.appendChild(el("td", {title: c.first_bad_run}, c.first_bad_date + (c.first_bad_commit ? " \u00b7 " + c.first_bad_commit.slice(0, 10) : "")));
      tr.appendChild(el("td", {}, c.profile));
      tr.appendChild(el("td", {}, c.point));
      tr.appendChild(el("td", {class: "num " + (c.worse ? "worse" : "better")}, pct(c.change)));
      tr.appendChild(el("td", {class: "num"}, pct(c.interval[0]) + " to " + pct(c.interval[1])));
      tr.appendChild(el("td", {title: c.last_good_run}, c.last_good_date));
      tr.appendChild(el("td", {class: "changed"}, c.what_changed.join("; ") || "no fingerprint key, version or commit"));
      table.appendChild(tr);
      if (c.bisect) {
        var find = el("tr");
        find.appendChild(el("td", {colspan: "7", class: "bisect"}, "find the commit: "));
        find.lastChild.appendChild(el("code", {}, c.bisect));
        table.appendChild(find);
      }
    });
    box.appendChild(table);
  }

  function draw(canvas, s) {
    var ratio = window.devicePixelRatio || 1;
    var w = canvas.clientWidth || 420, h = canvas.clientHeight || 170;
    canvas.width = w * ratio; canvas.height = h * ratio;
    var ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    var L = 46, R = 8, T = 12, B = 20;
    var n = s.x.length, lo = Infinity, hi = -Infinity, i;
    for (i = 0; i < n; i++) {
      lo = Math.min(lo, s.lo[i]); hi = Math.max(hi, s.hi[i]);
      if (s.g[i] !== null && s.fail) {
        var band = s.lower ? [s.g[i], s.g[i] * (1 + s.fail)] : [s.g[i] * (1 - s.fail), s.g[i]];
        lo = Math.min(lo, band[0]); hi = Math.max(hi, band[1]);
      }
    }
    if (!(hi > lo)) { hi = lo * 1.05 + 1e-9; lo = lo * 0.95; }
    var pad = (hi - lo) * 0.08; lo -= pad; hi += pad;
    var x0 = s.x[0], x1 = s.x[n - 1];
    function X(k) { return L + (x1 > x0 ? (k - x0) / (x1 - x0) : 0.5) * (w - L - R); }
    function Y(v) { return T + (1 - (v - lo) / (hi - lo)) * (h - T - B); }
    ctx.font = "10px system-ui, sans-serif"; ctx.fillStyle = "#656d76"; ctx.strokeStyle = "#d0d7de";
    ctx.lineWidth = 1; ctx.textAlign = "right"; ctx.textBaseline = "middle";
    for (i = 0; i <= 3; i++) {
      var v = lo + (hi - lo) * i / 3, y = Math.round(Y(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(L, y); ctx.lineTo(w - R, y); ctx.stroke();
      ctx.fillText(tick(v, s.unit), L - 4, y);
    }
    ctx.textAlign = "left"; ctx.textBaseline = "alphabetic";
    ctx.fillText(runs[x0][1].slice(0, 10), L, h - 5);
    ctx.textAlign = "right"; ctx.fillText(runs[x1][1].slice(0, 10), w - R, h - 5);
    // The golden's band: its mean to the fail margin, on the side that fails.
    ctx.fillStyle = "rgba(9,105,218,0.10)";
    for (i = 0; i < n; i++) {
      if (s.g[i] === null || !s.fail) continue;
      var a = i > 0 ? (X(s.x[i - 1]) + X(s.x[i])) / 2 : X(s.x[i]) - 2;
      var b = i < n - 1 ? (X(s.x[i]) + X(s.x[i + 1])) / 2 : X(s.x[i]) + 2;
      var edge = s.lower ? s.g[i] * (1 + s.fail) : s.g[i] * (1 - s.fail);
      ctx.fillRect(a, Math.min(Y(s.g[i]), Y(edge)), b - a, Math.abs(Y(edge) - Y(s.g[i])));
    }
    // Golden recordings and fingerprint changes.
    s.rec.forEach(function (r) {  // just before the first night after the recording
      var x = Math.max(X(r[0]) - 3, L);
      ctx.strokeStyle = "#0969da"; ctx.setLineDash([2, 3]);
      ctx.beginPath(); ctx.moveTo(x, T); ctx.lineTo(x, h - B); ctx.stroke(); ctx.setLineDash([]);
    });
    ctx.fillStyle = "#8250df";
    s.marks.forEach(function (m) {
      var x = X(m[0]);
      ctx.beginPath(); ctx.moveTo(x - 5, T - 10); ctx.lineTo(x + 5, T - 10); ctx.lineTo(x, T - 2); ctx.fill();
    });
    // Each run's range, the night means, coloured by verdict.
    ctx.strokeStyle = "rgba(101,109,118,0.35)";
    for (i = 0; i < n; i++) {
      if (s.hi[i] > s.lo[i]) { ctx.beginPath(); ctx.moveTo(X(s.x[i]), Y(s.lo[i])); ctx.lineTo(X(s.x[i]), Y(s.hi[i])); ctx.stroke(); }
    }
    ctx.strokeStyle = "#57606a"; ctx.lineWidth = 1.2; ctx.beginPath();
    for (i = 0; i < n; i++) { if (i) ctx.lineTo(X(s.x[i]), Y(s.y[i])); else ctx.moveTo(X(s.x[i]), Y(s.y[i])); }
    ctx.stroke();
    var r = n > 120 ? 1.6 : 2.6;
    for (i = 0; i < n; i++) {
      ctx.fillStyle = COLORS[s.v[i]] || COLORS[0];
      ctx.beginPath(); ctx.arc(X(s.x[i]), Y(s.y[i]), s.v[i] >= 3 ? r + 1 : r, 0, 6.2832); ctx.fill();
    }
    // Change points, with their size.
    s.cps.forEach(function (c) {
      var x = Math.round(X(c[0]) - (n > 1 ? (X(s.x[1]) - X(s.x[0])) / 2 : 0)) + 0.5;
      ctx.strokeStyle = c[3] ? "#cf222e" : "#1a7f37"; ctx.lineWidth = 1.5; ctx.setLineDash([4, 3]);
      ctx.beginPath(); ctx.moveTo(x, T); ctx.lineTo(x, h - B); ctx.stroke(); ctx.setLineDash([]);
      ctx.fillStyle = ctx.strokeStyle; ctx.font = "bold 11px system-ui, sans-serif";
      ctx.textAlign = x > w - 70 ? "right" : "left";
      ctx.fillText(pct(c[1]), x + (ctx.textAlign === "left" ? 4 : -4), T + 10);
    });
    canvas._geometry = {X: X, Y: Y};
  }

  function tooltip(canvas, s, event) {
    var tip = document.getElementById("tip");
    var rect = canvas.getBoundingClientRect(), mx = event.clientX - rect.left;
    var g = canvas._geometry, best = 0, dist = Infinity;
    for (var i = 0; i < s.x.length; i++) {
      var d = Math.abs(g.X(s.x[i]) - mx);
      if (d < dist) { dist = d; best = i; }
    }
    if (dist > 24) { tip.style.display = "none"; return; }
    var run = runs[s.x[best]];
    var lines = [
      run[0] + (run[3] ? "" : " (incomplete)"), run[1] + " UTC" + (run[2] ? " \u00b7 commit " + run[2] : ""),
      run[5] || "", fmt(s.y[best], s.unit) + "  (runs " + fmt(s.lo[best], s.unit) + " \u2013 " + fmt(s.hi[best], s.unit) + ")",
      NAMES[s.v[best]] + (s.g[best] !== null ? " against golden " + fmt(s.g[best], s.unit) : "")
    ];
    s.marks.forEach(function (m) { if (m[0] === s.x[best]) lines.push("changed: " + m[1]); });
    s.rec.forEach(function (m) { if (m[0] === s.x[best]) lines.push("first night after a golden recording (" + m[1] + ")"); });
    s.cps.forEach(function (c) { if (c[0] === s.x[best]) lines.push("change point: " + pct(c[1]) + " (" + pct(c[2][0]) + " to " + pct(c[2][1]) + ")"); });
    var d = s.d[String(best)];
    if (d) {
      if (d.cause) lines.push("server: " + d.cause);
      (d.gpu || []).forEach(function (g) { lines.push(g); });
      if (d.energy) lines.push("energy: " + d.energy);
      if (d.prof) lines.push(d.prof);
    }
    tip.textContent = lines.filter(Boolean).join("\n");
    if (d && d.srv) tip.appendChild(spark(d.srv));
    tip.style.display = "block";
    tip.style.left = Math.min(event.clientX + 14, window.innerWidth - 430) + "px";
    tip.style.top = (event.clientY + 14) + "px";
  }

  // The server's gauges through a night's runs: running (blue) and queued (orange) requests
  // on one scale, KV-cache use (grey) as a share of the height.
  function spark(srv) {
    var box = el("div", {class: "spark"}), top = 1;
    ["running", "queued"].forEach(function (k) { (srv[k] || []).forEach(function (v) { if (v > top) top = v; }); });
    var legend = el("div", {}, "server through the runs: ");
    [["running", "#4493f8"], ["queued", "#fb8f44"], ["KV cache use (0-100 %)", "#8c959f"]].forEach(function (k, i) {
      legend.appendChild(el("span", {style: "color:" + k[1]}, (i ? ", " : "") + k[0]));
    });
    legend.appendChild(document.createTextNode(" (requests up to " + top + ")"));
    box.appendChild(legend);
    var c = el("canvas", {width: 400, height: 64});
    box.appendChild(c);
    var ctx = c.getContext("2d"), n = srv.t.length;
    function line(values, scale, colour) {
      if (!values) return;
      ctx.strokeStyle = colour; ctx.lineWidth = 1.5; ctx.beginPath();
      var started = false;
      values.forEach(function (v, i) {
        if (v === null) { started = false; return; }
        var x = n > 1 ? i / (n - 1) * 396 + 2 : 200, y = 62 - v / scale * 58;
        if (started) ctx.lineTo(x, y); else ctx.moveTo(x, y);
        started = true;
      });
      ctx.stroke();
    }
    line(srv.kv, 1, "#8c959f");
    line(srv.running, top, "#4493f8");
    line(srv.queued, top, "#fb8f44");
    return box;
  }

  function charts() {
    var grid = document.getElementById("charts");
    var boxes = [];
    var fragment = document.createDocumentFragment();
    DATA.series.forEach(function (s) {
      var box = el("div", {class: "chart"});
      var name = s.profile + " \u00b7 " + s.key;
      // The test and its level, which tell the charts apart; the whole key on hover.
      box.appendChild(el("div", {class: "title", title: name}, s.profile + " \u00b7 " + s.key.split("::").pop()));
      var last = s.cps.length ? s.cps[s.cps.length - 1] : null;
      box.appendChild(el("div", {class: "sub", title: name}, s.metric + " (" + (s.unit === "s" ? "ms" : s.unit) + ") \u00b7 " + s.x.length + " nights" +
        (last ? " \u00b7 latest change " + pct(last[1]) + " at " + runs[last[0]][1].slice(0, 10) : "")));
      var canvas = el("canvas", {"aria-label": name});
      box.appendChild(canvas);
      box._search = (name + " " + s.metric).toLowerCase();
      fragment.appendChild(box);
      boxes.push([box, canvas, s]);
    });
    grid.appendChild(fragment);
    boxes.forEach(function (b) {
      draw(b[1], b[2]);
      b[1].addEventListener("mousemove", function (e) { tooltip(b[1], b[2], e); });
      b[1].addEventListener("mouseleave", function () { document.getElementById("tip").style.display = "none"; });
    });
    // "#tip=CHART,NIGHT" opens a chart's tooltip at a night: a link to one night of one point
    // (and how the Chromium test checks the tooltip without a mouse).
    var wanted = /^#tip=(\d+),(\d+)$/.exec(window.location.hash);
    if (wanted && boxes[+wanted[1]] && +wanted[2] < boxes[+wanted[1]][2].x.length) {
      var b = boxes[+wanted[1]], rect = b[1].getBoundingClientRect();
      b[0].scrollIntoView();
      rect = b[1].getBoundingClientRect();
      tooltip(b[1], b[2], {clientX: rect.left + b[1]._geometry.X(b[2].x[+wanted[2]]), clientY: rect.top + 20});
    }
    document.getElementById("filter").addEventListener("input", function (e) {
      var q = e.target.value.toLowerCase();
      boxes.forEach(function (b) { b[0].style.display = b[0]._search.indexOf(q) >= 0 ? "" : "none"; });
    });
    return boxes.length;
  }

  facts();
  openTable();
  var drawn = charts();
  document.body.dataset.charts = String(drawn);
  // From navigation start (the page's parse and the data's included), and the script alone.
  document.body.dataset.renderMs = String(Math.round(performance.now()));
  document.body.dataset.scriptMs = String(Math.round(performance.now() - t0));
})();
