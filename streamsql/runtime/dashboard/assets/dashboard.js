// streamsql ui: polls the page's JSON (body[data-api]) every second and puts the numbers in
// place; draws the job page's plots as SVG; sends STOP / STOP WITH DRAIN after a confirmation.
(function () {
  "use strict";
  var api = document.body.getAttribute("data-api");
  var SVG = "http://www.w3.org/2000/svg";
  var EVERY_MS = 1000;

  function text(el, value) {
    if (el && el.textContent !== value) el.textContent = value;
  }

  function el(tag, attrs, content) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (content !== undefined) node.textContent = content;
    return node;
  }

  // -- the job list: one row per job, cells keyed like the table's headings
  function renderList(data) {
    var table = document.getElementById("jobs");
    var keys = Array.prototype.map.call(table.querySelectorAll("thead th"), function (th) {
      return th.getAttribute("data-key");
    });
    var body = table.tBodies[0];
    var rows = data.jobs.map(function (job) {
      var row = body.querySelector('tr[data-job="' + CSS.escape(job.id) + '"]') || el("tr", { "data-job": job.id });
      if (!row.children.length) {
        keys.forEach(function (key) { row.appendChild(el("td", { "data-key": key, "class": key })); });
        var link = el("a", { href: "/jobs/" + encodeURIComponent(job.id) }, job.name);
        row.children[0].appendChild(link);
        row.children[0].appendChild(el("small", {}, job.id));
      }
      keys.forEach(function (key, i) {
        if (key === "name") return;
        text(row.children[i], job.display[key] || "");
        if (key === "status") row.children[i].className = "status status-" + job.status.toLowerCase();
      });
      return row;
    });
    rows.forEach(function (row) { body.appendChild(row); });  // newest first, as served
    Array.prototype.forEach.call(body.querySelectorAll("tr"), function (row) {
      if (rows.indexOf(row) < 0) body.removeChild(row);
    });
    var empty = document.getElementById("empty");
    if (empty) empty.hidden = data.jobs.length > 0;
  }

  // -- a job's page
  function renderJob(job) {
    Array.prototype.forEach.call(document.querySelectorAll("dd[data-key]"), function (dd) {
      text(dd, job.display[dd.getAttribute("data-key")] || "");
    });
    var badge = document.getElementById("status-badge");
    text(badge, job.status);
    badge.className = "badge status-" + job.status.toLowerCase();
    var error = document.getElementById("error");
    text(error, job.error || "");
    error.hidden = !job.error;
    ["stop", "drain"].forEach(function (id) {
      document.getElementById(id).disabled = job.status !== "RUNNING" || stopping;
    });
    var sparkUi = document.getElementById("spark-ui");
    if (sparkUi) sparkUi.hidden = job.status !== "RUNNING";  // Spark's UI ends with the job
    (job.plans || []).forEach(function (plan) {
      var svg = document.querySelector('svg.plan[data-query="' + CSS.escape(plan.query) + '"]');
      if (!svg) return;
      Object.keys(plan.rows || {}).forEach(function (id) {
        var known = plan.rows[id];
        text(svg.querySelector('[data-rows="' + id + '"]'), known.out.toLocaleString("en-US") + " rows");
      });
    });
    renderOperators(job.queries || {});
    Array.prototype.forEach.call(document.querySelectorAll("svg[data-metric]"), function (svg) {
      drawChart(svg, job.history || [], svg.getAttribute("data-metric"));
    });
    var log = document.getElementById("log");
    if (job.log) {
      var atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
      text(log, job.log);
      if (atEnd) log.scrollTop = log.scrollHeight;
    }
  }

  function renderOperators(queries) {
    var body = document.getElementById("operators").tBodies[0];
    var rows = [];
    Object.keys(queries).forEach(function (query) {
      (queries[query].operators || []).forEach(function (op, i) {
        rows.push([query, i + ": " + op.name, op.state_rows, op.state_bytes, op.rows_updated, op.late]);
      });
    });
    if (!rows.length) return;
    body.textContent = "";
    rows.forEach(function (cells) {
      var tr = el("tr");
      cells.forEach(function (c) {
        tr.appendChild(el("td", {}, typeof c === "number" ? c.toLocaleString("en-US") : String(c)));
      });
      body.appendChild(tr);
    });
  }

  // -- a plot: one line per query of the job, over the micro-batches' times
  var COLORS = ["#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed"];
  var W = 360, H = 140, LEFT = 52, BOTTOM = 18, TOP = 8;

  function drawChart(svg, history, metric) {
    var series = {};
    history.forEach(function (s) {
      var v = s[metric];
      if (v === null || v === undefined || s.t === null) return;
      (series[s.query] = series[s.query] || []).push([s.t, v]);
    });
    var points = [].concat.apply([], Object.keys(series).map(function (k) { return series[k]; }));
    svg.textContent = "";
    svg.setAttribute("data-points", String(points.length));
    if (!points.length) {
      svgText(svg, W / 2, H / 2, "no micro-batch yet", "middle", "none");
      return;
    }
    var t0 = Math.min.apply(null, points.map(function (p) { return p[0]; }));
    var t1 = Math.max.apply(null, points.map(function (p) { return p[0]; }));
    var top = Math.max.apply(null, points.map(function (p) { return p[1]; }));
    top = top > 0 ? top * 1.1 : 1;
    var x = function (t) { return LEFT + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - LEFT - 6); };
    var y = function (v) { return TOP + (1 - v / top) * (H - TOP - BOTTOM); };
    svgLine(svg, LEFT, y(0), W - 6, y(0), "axis");
    svgLine(svg, LEFT, TOP, LEFT, y(0), "axis");
    svgText(svg, LEFT - 4, TOP + 8, short(top), "end", "tick");
    svgText(svg, LEFT - 4, y(0), "0", "end", "tick");
    svgText(svg, LEFT, H - 4, clock(t0), "start", "tick");
    svgText(svg, W - 6, H - 4, clock(t1), "end", "tick");
    Object.keys(series).forEach(function (query, i) {
      var line = document.createElementNS(SVG, "polyline");
      line.setAttribute("points", series[query].map(function (p) { return x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1); }).join(" "));
      line.setAttribute("class", "series");
      line.setAttribute("stroke", COLORS[i % COLORS.length]);
      var title = document.createElementNS(SVG, "title");
      var last = series[query][series[query].length - 1][1];
      title.textContent = query + ": " + last.toLocaleString("en-US");
      line.appendChild(title);
      svg.appendChild(line);
    });
  }

  function svgLine(svg, x1, y1, x2, y2, cls) {
    var line = document.createElementNS(SVG, "line");
    [["x1", x1], ["y1", y1], ["x2", x2], ["y2", y2], ["class", cls]].forEach(function (a) { line.setAttribute(a[0], a[1]); });
    svg.appendChild(line);
  }

  function svgText(svg, x, y, content, anchor, cls) {
    var t = document.createElementNS(SVG, "text");
    t.setAttribute("x", x); t.setAttribute("y", y); t.setAttribute("text-anchor", anchor); t.setAttribute("class", cls);
    t.textContent = content;
    svg.appendChild(t);
  }

  function short(v) {
    var units = [[1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (var i = 0; i < units.length; i++) if (v >= units[i][0]) return (v / units[i][0]).toFixed(1) + units[i][1];
    return v >= 10 ? v.toFixed(0) : v.toFixed(2);
  }

  function clock(t) {
    return new Date(t * 1000).toTimeString().slice(0, 8);
  }

  // -- STOP / STOP WITH DRAIN
  var stopping = false;

  function wireStop() {
    ["stop", "drain"].forEach(function (id) {
      var button = document.getElementById(id);
      if (!button) return;
      button.addEventListener("click", function () {
        var drain = button.getAttribute("data-drain") === "true";
        var name = document.getElementById("job-name").textContent;
        var question = drain
          ? "Stop job " + name + " WITH DRAIN? Its open windows fire and its timers run first, then it finishes."
          : "Stop job " + name + "? Its checkpoint is kept: running its script again resumes it.";
        if (!window.confirm(question)) return;
        stopping = true;
        document.getElementById("stop").disabled = document.getElementById("drain").disabled = true;
        fetch(api + "/stop", {
          method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/json" }, body: JSON.stringify({ drain: drain })
        }).then(function (r) { return r.json(); }).then(function (answer) {
          text(document.getElementById("action-result"), answer.message || answer.error || "");
          if (answer.error) stopping = false;
        }).catch(function (e) {
          stopping = false;
          text(document.getElementById("action-result"), "The request failed: " + e);
        });
      });
    });
  }

  function poll() {
    fetch(api, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
      if (r.status === 401) { window.location.href = "/login"; return null; }
      return r.ok ? r.json() : null;
    }).then(function (data) {
      if (!data) return;
      if (document.body.classList.contains("list")) renderList(data); else renderJob(data);
      text(document.getElementById("updated"), "updated " + new Date().toTimeString().slice(0, 8));
    }).catch(function () {
      text(document.getElementById("updated"), "the dashboard is not answering");
    }).then(function () { setTimeout(poll, EVERY_MS); });
  }

  if (api) {
    wireStop();
    poll();
  }
})();
