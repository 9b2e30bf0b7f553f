// Run page: live progress by polling the progress JSON, and the latency histogram overlay.
(function () {
  "use strict";

  var ARM_COLORS = {
    plain: "#1f77b4", tls: "#d62728", plain_new: "#7f7f7f", tls_new: "#ff7f0e", tls_resumed: "#2ca02c"
  };

  function text(id, value) {
    var el = document.getElementById(id);
    if (el) { el.textContent = value; }
  }

  function pollProgress() {
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
          if (p.probing) {
            text("run-phase", "");
            text("run-elapsed", p.probing);
          } else if (p.arm) {
            var step = (p.arm_index || 0) + 1;
            var total = p.arms_total || p.arms.length;
            var roundText = p.rounds > 1 ? ", round " + (Math.floor((step - 1) / p.arms.length) + 1) + " of " + p.rounds : "";
            text("run-arm", "· arm " + p.arm + " (" + step + " of " + total + roundText + ")");
            text("run-phase", p.phase === "warmup" ? "warming up (not measured)" : "measuring");
            var bar = document.getElementById("run-bar");
            if (bar) { bar.value = p.fraction; bar.textContent = Math.round(p.fraction * 100) + "%"; }
            text("run-elapsed", p.elapsed_s.toFixed(0) + " s elapsed, about " + p.remaining_s.toFixed(0) + " s left");
            text("run-rps", "· " + p.rps.toFixed(0) + " req/s now · " + p.users + " users");
          } else if (p.status === "running") {
            text("run-elapsed", "starting the engine…");
          }
        })
        .catch(function (err) { text("run-elapsed", "progress unavailable (" + err.message + "), retrying…"); });
    }
    tick();
    timer = setInterval(tick, 1000);
  }

  function fmtMs(us) { return (us / 1000).toFixed(us < 1000 ? 3 : 2); }

  function histogramChart() {
    var dataEl = document.getElementById("chart-data");
    var canvas = document.getElementById("chart-ttlb");
    if (!dataEl || !canvas || typeof Chart === "undefined") { return; }
    var data = JSON.parse(dataEl.textContent).ttlb;
    var edges = data.edges_us;
    var labels = edges.slice(0, -1).map(fmtMs);
    var datasets = [];
    var table = document.getElementById("chart-ttlb-table");
    var head = "<thead><tr><th scope='col'>from ms</th>";
    Object.keys(data.counts).forEach(function (arm) {
      var counts = data.counts[arm];
      var total = counts.reduce(function (a, b) { return a + b; }, 0) || 1;
      datasets.push({
        label: arm + " (n=" + total + ")",
        data: counts.map(function (c) { return +(100 * c / total).toFixed(3); }),
        borderColor: ARM_COLORS[arm] || "#333",
        backgroundColor: (ARM_COLORS[arm] || "#333") + "33",
        fill: true, stepped: true, pointRadius: 0, borderWidth: 2
      });
      head += "<th scope='col'>" + arm + " %</th>";
    });
    if (table) {
      var rows = labels.map(function (label, i) {
        return "<tr><td>" + label + "</td>" + datasets.map(function (d) { return "<td>" + d.data[i] + "</td>"; }).join("") + "</tr>";
      });
      table.innerHTML = head + "</tr></thead><tbody>" + rows.join("") + "</tbody>";
    }
    new Chart(canvas, {
      type: "line",
      data: { labels: labels, datasets: datasets },
      options: {
        animation: false,
        maintainAspectRatio: false,
        interaction: { mode: "index", intersect: false },
        scales: {
          x: { title: { display: true, text: "time to last byte, ms (log-spaced bins)" }, ticks: { maxTicksLimit: 12 } },
          y: { title: { display: true, text: "% of the arm's requests" }, beginAtZero: true }
        }
      }
    });
  }

  function generatorChart() {
    var dataEl = document.getElementById("chart-data");
    var canvas = document.getElementById("chart-gen");
    if (!dataEl || !canvas || typeof Chart === "undefined") { return; }
    var all = JSON.parse(dataEl.textContent).series || {};
    var series = {};
    Object.keys(all).forEach(function (arm) { series[arm] = all[arm].gen_cpu_pct; });
    var longest = 0;
    var datasets = Object.keys(series).map(function (arm) {
      longest = Math.max(longest, series[arm].length);
      return {
        label: arm, data: series[arm], borderColor: ARM_COLORS[arm] || "#333",
        backgroundColor: ARM_COLORS[arm] || "#333", pointRadius: 2, borderWidth: 2, spanGaps: false
      };
    });
    var labels = [];
    for (var i = 1; i <= longest; i++) { labels.push(i); }
    new Chart(canvas, {
      type: "line",
      data: { labels: labels, datasets: datasets },
      options: {
        animation: false,
        maintainAspectRatio: false,
        scales: {
          x: { title: { display: true, text: "measured second of the arm (rounds one after another)" } },
          y: { title: { display: true, text: "generator CPU, % of one core" }, beginAtZero: true, suggestedMax: 100 }
        }
      }
    });
  }

  function chartData() {
    var el = document.getElementById("chart-data");
    return el && typeof Chart !== "undefined" ? JSON.parse(el.textContent) : null;
  }

  function seconds(n) { var out = []; for (var i = 1; i <= n; i++) { out.push(i); } return out; }

  function curveChart(data) {
    var canvas = document.getElementById("chart-curve");
    if (!canvas || !data.curve) { return; }
    var labels = null;
    var datasets = Object.keys(data.curve).filter(function (arm) { return data.curve[arm]; }).map(function (arm) {
      var curve = data.curve[arm];
      if (!labels) { labels = curve.map(function (p) { return "p" + p[0]; }); }
      return { label: arm, data: curve.map(function (p) { return p[1] / 1000; }), borderColor: ARM_COLORS[arm] || "#333",
        backgroundColor: ARM_COLORS[arm] || "#333", pointRadius: 2, borderWidth: 2 };
    });
    new Chart(canvas, {
      type: "line", data: { labels: labels || [], datasets: datasets },
      options: { animation: false, maintainAspectRatio: false, scales: {
        x: { title: { display: true, text: "percentile (p0 = fastest, p100 = slowest request)" } },
        y: { type: "logarithmic", title: { display: true, text: "time to last byte, ms (log)" } } } }
    });
  }

  function timeCharts(data) {
    var series = data.series || {};
    var longest = 0;
    Object.keys(series).forEach(function (arm) { longest = Math.max(longest, series[arm].requests.length); });
    var latency = document.getElementById("chart-latency-time");
    if (latency) {
      var datasets = [];
      Object.keys(series).forEach(function (arm) {
        var color = ARM_COLORS[arm] || "#333";
        datasets.push({ label: arm + " p50", data: series[arm].p50_us.map(function (v) { return v === null ? null : v / 1000; }),
          borderColor: color, backgroundColor: color, pointRadius: 1, borderWidth: 2 });
        datasets.push({ label: arm + " p95", data: series[arm].p95_us.map(function (v) { return v === null ? null : v / 1000; }),
          borderColor: color, backgroundColor: color, pointRadius: 0, borderWidth: 1, borderDash: [4, 3] });
      });
      new Chart(latency, { type: "line", data: { labels: seconds(longest), datasets: datasets },
        options: { animation: false, maintainAspectRatio: false, scales: {
          x: { title: { display: true, text: "measured second of the arm (rounds one after another)" } },
          y: { type: "logarithmic", title: { display: true, text: "time to last byte, ms (log)" } } } } });
    }
    var rps = document.getElementById("chart-rps-time");
    if (rps) {
      new Chart(rps, { type: "line", data: { labels: seconds(longest), datasets: Object.keys(series).map(function (arm) {
        return { label: arm, data: series[arm].requests, borderColor: ARM_COLORS[arm] || "#333",
          backgroundColor: ARM_COLORS[arm] || "#333", pointRadius: 1, borderWidth: 2 }; }) },
        options: { animation: false, maintainAspectRatio: false, scales: {
          x: { title: { display: true, text: "measured second" } },
          y: { beginAtZero: true, title: { display: true, text: "requests per second" } } } } });
    }
  }

  function breakdownChart(data) {
    var canvas = document.getElementById("chart-breakdown");
    if (!canvas || !data.breakdown) { return; }
    var arms = Object.keys(data.breakdown);
    var parts = [["connect_us", "TCP connect", "#7f7f7f"], ["tls_handshake_us", "TLS handshake", "#d62728"],
      ["wait_us", "wait for first byte", "#1f77b4"], ["transfer_us", "transfer", "#2ca02c"]];
    new Chart(canvas, {
      type: "bar",
      data: { labels: arms, datasets: parts.map(function (p) {
        return { label: p[1], data: arms.map(function (arm) { return data.breakdown[arm][p[0]] / 1000; }), backgroundColor: p[2] };
      }) },
      options: { indexAxis: "y", animation: false, maintainAspectRatio: false, scales: {
        x: { stacked: true, title: { display: true, text: "mean ms per request" } }, y: { stacked: true } } }
    });
  }

  function serverCpuChart(data) {
    var canvas = document.getElementById("chart-server-cpu");
    if (!canvas || !data.server_cpu) { return; }
    var arms = Object.keys(data.server_cpu);
    var longest = 0;
    arms.forEach(function (arm) { longest = Math.max(longest, data.server_cpu[arm].cpu_pct.length); });
    var datasets = [];
    arms.forEach(function (arm) {
      var color = ARM_COLORS[arm] || "#333";
      datasets.push({ label: arm + " CPU %", data: data.server_cpu[arm].cpu_pct, borderColor: color,
        backgroundColor: color, pointRadius: 1, borderWidth: 1 });
      datasets.push({ label: arm + " 15 s average", data: data.server_cpu[arm].ma15, borderColor: color,
        backgroundColor: color, pointRadius: 0, borderWidth: 2, borderDash: [6, 3] });
    });
    new Chart(canvas, {
      type: "line",
      data: { labels: seconds(longest), datasets: datasets },
      options: { animation: false, maintainAspectRatio: false, spanGaps: true,
        scales: { x: { title: { display: true, text: "sample (≈ s into the arm's window)" } },
                  y: { beginAtZero: true, title: { display: true, text: "% of one core" } } } }
    });
  }

  // Extra cores = peak req/s × ((1 − f) × Δkeep-alive + f × Δnew) / 1000 (portal.lib.projection.project_cores).
  function projection(data) {
    var form = document.getElementById("projection-form");
    if (!form || !data.projection) { return; }
    var p = data.projection;
    var out = document.getElementById("projection-result");
    function update() {
      var rps = parseFloat(document.getElementById("proj-rps").value);
      var share = parseFloat(document.getElementById("proj-new").value) / 100;
      if (!(rps >= 0) || !(share >= 0 && share <= 1)) {
        out.textContent = "Enter requests/s ≥ 0 and a share between 0 and 100%.";
        return;
      }
      var perReq = (1 - share) * p.keepalive_ms_per_req + share * p.new_ms_per_req;
      var cores = rps * perReq / 1000;
      out.textContent = "TLS needs about " + cores.toFixed(2) + " extra server cores at " + rps + " req/s with " +
        (share * 100).toFixed(1) + "% of requests on new connections (" + perReq.toFixed(4) +
        " extra CPU-ms per request).";
      out.dataset.cores = cores.toFixed(6);
    }
    form.addEventListener("input", update);
    update();
  }

  // A printed report shows everything: open the collapsed parts (evidence, all costs, chart tables).
  window.addEventListener("beforeprint", function () {
    Array.prototype.forEach.call(document.querySelectorAll("details"), function (d) { d.open = true; });
  });

  document.addEventListener("DOMContentLoaded", function () {
    pollProgress();
    histogramChart();
    generatorChart();
    var data = chartData();
    if (data) {
      curveChart(data);
      timeCharts(data);
      breakdownChart(data);
      serverCpuChart(data);
      projection(data);
    }
  });
})();
