// Run page while the run is queued or running: polls the progress JSON every second, shows the arm
// and phase, and draws the live charts (throughput, time to last byte median and p95 per measured
// second of the arm being measured, beside the arms measured before it) with a table of the same
// numbers. When the run ends the page reloads into the report.
(function () {
  "use strict";

  var T = null;
  var charts = { rps: null, latency: null };

  function text(id, value) {
    var el = document.getElementById(id);
    if (el) { el.textContent = value; }
  }

  // [{arm, state, requests: [], p50_us: [], p95_us: []}] → {arm: {requests, p50_us, p95_us}}.
  function bySeries(list) {
    var out = {};
    list.forEach(function (s) { out[s.arm] = s; });
    return out;
  }

  function drawChart(key, id, datasets, labels, yAxis) {
    var canvas = document.getElementById(id);
    if (!canvas || typeof Chart === "undefined") { return; }
    var chart = charts[key];
    if (chart) {
      chart.data.labels = labels;
      chart.data.datasets = datasets;
      chart.update("none");
      return;
    }
    charts[key] = new Chart(canvas, {
      type: "line",
      data: { labels: labels, datasets: datasets },
      options: { animation: false, maintainAspectRatio: false, spanGaps: false,
        scales: { x: { title: { display: true, text: "measured second of the arm" } }, y: yAxis } }
    });
  }

  function liveTable(list) {
    var rows = list.map(function (s) {
      var n = s.requests.length;
      return [s.arm, s.state, n, n ? s.requests[n - 1] : null, T.median(s.requests),
        T.ms(T.median(s.p50_us)), T.ms(T.median(s.p95_us))];
    });
    var table = document.getElementById("live-table");
    var body = table && table.tBodies[0];
    if (!body) { return; }
    body.innerHTML = "";
    rows.forEach(function (row, r) {
      var tr = document.createElement("tr");
      tr.dataset.arm = list[r].arm;
      tr.dataset.state = list[r].state;
      row.forEach(function (cell, i) {
        var td = document.createElement(i === 0 ? "th" : "td");
        if (i === 0) { td.scope = "row"; }
        if (i === 1) { td.className = "text"; }
        td.textContent = cell === null || cell === undefined ? "—" : cell;
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
  }

  function showLive(p) {
    var box = document.getElementById("live");
    var list = p.series || [];
    var points = list.reduce(function (n, s) { return n + s.requests.length; }, 0);
    if (!box || !T || !points) { return; }
    box.hidden = false;
    var series = bySeries(list);
    var labels = T.seconds(T.longest(series));
    var current = p.arm;
    drawChart("rps", "chart-live-rps", T.rpsDatasets(series, current), labels,
      { beginAtZero: true, title: { display: true, text: "requests per second" } });
    drawChart("latency", "chart-live-latency", T.latencyDatasets(series, current), labels,
      { beginAtZero: true, title: { display: true, text: "time to last byte, ms" } });
    liveTable(list);
    box.dataset.points = String(points);
  }

  function showProgress(p) {
    if (p.probing) {
      text("run-phase", "");
      text("run-elapsed", p.probing);
    } else if (p.arm) {
      var step = (p.arm_index || 0) + 1;
      var total = p.arms_total || p.arms.length;
      // Arms per round: the TLS matrix's sub-arms count too (arms_total covers them).
      var perRound = p.arms_total && p.rounds ? p.arms_total / p.rounds : p.arms.length;
      var roundText = p.rounds > 1 ? ", round " + (Math.floor((step - 1) / perRound) + 1) + " of " + p.rounds : "";
      text("run-arm", "· arm " + p.arm + " (" + step + " of " + total + roundText + ")");
      text("run-phase", p.phase === "warmup" ? "warming up (not measured)" : "measuring");
      var bar = document.getElementById("run-bar");
      if (bar) { bar.value = p.fraction; bar.textContent = Math.round(p.fraction * 100) + "%"; }
      text("run-elapsed", p.elapsed_s.toFixed(0) + " s elapsed, about " + p.remaining_s.toFixed(0) + " s left");
      text("run-rps", "· " + p.rps.toFixed(0) + " req/s now · " + p.users + " users");
    } else if (p.status === "running") {
      text("run-elapsed", "starting the engine…");
    } else if (p.waiting) {
      text("run-elapsed", p.waiting);
    }
    showLive(p);
  }

  function poll() {
    var box = document.getElementById("progress");
    if (!box || box.dataset.terminal === "true") { return; }
    var url = box.dataset.progressUrl;
    var timer = null;
    function tick() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
        .then(function (p) {
          text("run-status", p.status);
          var status = document.getElementById("run-status");
          if (status) { status.className = "status status-" + p.status; }
          if (p.terminal) {
            clearInterval(timer);
            window.location.reload();
            return;
          }
          showProgress(p);
        })
        .catch(function (err) { text("run-elapsed", "progress unavailable (" + err.message + "), retrying…"); });
    }
    tick();
    timer = setInterval(tick, 1000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    T = window.Tollgate || null;
    poll();
  });
})();
