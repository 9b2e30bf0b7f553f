// Run page: the report's charts, each with its numbers in a table beside it, the cost projection and
// the print path. Live progress and live charts while the run is measured: static/js/live.js, which
// uses the helpers exported here as window.Tollgate.
(function () {
  "use strict";

  var ARM_COLORS = {
    plain: "#1f77b4", tls: "#d62728", plain_new: "#7f7f7f", tls_new: "#ff7f0e", tls_resumed: "#2ca02c"
  };
  // The printable width of A4 portrait with the stylesheet's 12 mm margins, in CSS pixels.
  var PRINT_WIDTH_PX = 700;

  function color(arm) { return ARM_COLORS[arm] || "#333"; }

  function escapeHtml(value) {
    return String(value).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" }[c];
    });
  }

  // A table from a header row and body rows; the first cell of a row is its header.
  function fillTable(id, head, rows, caption) {
    var table = document.getElementById(id);
    if (!table) { return; }
    var html = caption ? "<caption class='muted'>" + escapeHtml(caption) + "</caption>" : "";
    html += "<thead><tr>" + head.map(function (h) { return "<th scope='col'>" + escapeHtml(h) + "</th>"; }).join("") + "</tr></thead><tbody>";
    rows.forEach(function (row) {
      html += "<tr>" + row.map(function (cell, i) {
        var tag = i === 0 ? "th scope='row'" : "td";
        return "<" + tag + ">" + escapeHtml(cell === null || cell === undefined ? "—" : cell) + "</" + tag.split(" ")[0] + ">";
      }).join("") + "</tr>";
    });
    table.innerHTML = html + "</tbody>";
  }

  function numbers(values) { return (values || []).filter(function (v) { return v !== null && v !== undefined; }); }

  function median(values) {
    var v = numbers(values).slice().sort(function (a, b) { return a - b; });
    if (!v.length) { return null; }
    var mid = Math.floor(v.length / 2);
    return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
  }

  function fixed(value, digits) { return value === null || value === undefined ? null : value.toFixed(digits); }
  function ms(us) { return us === null || us === undefined ? null : (us / 1000).toFixed(2); }
  function seconds(n) { var out = []; for (var i = 1; i <= n; i++) { out.push(i); } return out; }

  // One row per arm: how many seconds, and the median, lowest and highest of a per-second value.
  function seriesSummary(id, series, pick, format, unit) {
    var rows = Object.keys(series).map(function (arm) {
      var values = numbers(pick(series[arm]));
      return [arm, values.length, format(median(values)),
        values.length ? format(Math.min.apply(null, values)) : null,
        values.length ? format(Math.max.apply(null, values)) : null];
    });
    fillTable(id, ["Arm", "Seconds", "Median, " + unit, "Lowest, " + unit, "Highest, " + unit], rows,
      "The chart above, per arm over its measured seconds.");
  }

  function histogramChart(data) {
    var canvas = document.getElementById("chart-ttlb");
    if (!canvas || !data.ttlb) { return; }
    var edges = data.ttlb.edges_us;
    var labels = edges.slice(0, -1).map(function (us) { return (us / 1000).toFixed(us < 1000 ? 3 : 2); });
    var arms = Object.keys(data.ttlb.counts);
    var datasets = arms.map(function (arm) {
      var counts = data.ttlb.counts[arm];
      var total = counts.reduce(function (a, b) { return a + b; }, 0) || 1;
      return {
        label: arm + " (n=" + total + ")",
        data: counts.map(function (c) { return +(100 * c / total).toFixed(3); }),
        borderColor: color(arm), backgroundColor: color(arm) + "33",
        fill: true, stepped: true, pointRadius: 0, borderWidth: 2
      };
    });
    fillTable("chart-ttlb-table", ["From, ms"].concat(arms.map(function (arm) { return arm + ", % of requests"; })),
      labels.map(function (label, i) { return [label].concat(datasets.map(function (d) { return d.data[i]; })); }));
    new Chart(canvas, {
      type: "line",
      data: { labels: labels, datasets: datasets },
      options: {
        animation: false, maintainAspectRatio: false, interaction: { mode: "index", intersect: false },
        scales: {
          x: { title: { display: true, text: "time to last byte, ms (log-spaced bins)" }, ticks: { maxTicksLimit: 12 } },
          y: { title: { display: true, text: "% of the arm's requests" }, beginAtZero: true }
        }
      }
    });
  }

  function curveChart(data) {
    var canvas = document.getElementById("chart-curve");
    if (!canvas || !data.curve) { return; }
    var arms = Object.keys(data.curve).filter(function (arm) { return data.curve[arm]; });
    var levels = arms.length ? data.curve[arms[0]].map(function (p) { return "p" + p[0]; }) : [];
    fillTable("chart-curve-table", ["Percentile"].concat(arms.map(function (arm) { return arm + ", ms"; })),
      levels.map(function (level, i) { return [level].concat(arms.map(function (arm) { return ms(data.curve[arm][i][1]); })); }));
    new Chart(canvas, {
      type: "line",
      data: { labels: levels, datasets: arms.map(function (arm) {
        return { label: arm, data: data.curve[arm].map(function (p) { return p[1] / 1000; }), borderColor: color(arm),
          backgroundColor: color(arm), pointRadius: 2, borderWidth: 2 };
      }) },
      options: { animation: false, maintainAspectRatio: false, scales: {
        x: { title: { display: true, text: "percentile (p0 = fastest, p100 = slowest request)" } },
        y: { type: "logarithmic", title: { display: true, text: "time to last byte, ms (log)" } } } }
    });
  }

  // Median and p95 time to last byte per second (solid, dashed), one colour per arm.
  function latencyDatasets(series, emphasize) {
    var datasets = [];
    Object.keys(series).forEach(function (arm) {
      var width = emphasize && emphasize !== arm ? 1 : 2;
      function toMs(v) { return v === null || v === undefined ? null : v / 1000; }
      datasets.push({ label: arm + " median", data: series[arm].p50_us.map(toMs), borderColor: color(arm),
        backgroundColor: color(arm), pointRadius: 1, borderWidth: width });
      datasets.push({ label: arm + " p95", data: series[arm].p95_us.map(toMs), borderColor: color(arm),
        backgroundColor: color(arm), pointRadius: 0, borderWidth: 1, borderDash: [4, 3] });
    });
    return datasets;
  }

  function rpsDatasets(series, emphasize) {
    return Object.keys(series).map(function (arm) {
      return { label: arm, data: series[arm].requests, borderColor: color(arm), backgroundColor: color(arm),
        pointRadius: 1, borderWidth: emphasize && emphasize !== arm ? 1 : 2 };
    });
  }

  function longest(series) {
    var n = 0;
    Object.keys(series).forEach(function (arm) { n = Math.max(n, series[arm].requests.length); });
    return n;
  }

  function timeCharts(data) {
    var series = data.series || {};
    var latency = document.getElementById("chart-latency-time");
    if (latency) {
      new Chart(latency, { type: "line", data: { labels: seconds(longest(series)), datasets: latencyDatasets(series) },
        options: { animation: false, maintainAspectRatio: false, scales: {
          x: { title: { display: true, text: "measured second of the arm (rounds one after another)" } },
          y: { type: "logarithmic", title: { display: true, text: "time to last byte, ms (log)" } } } } });
      seriesSummary("chart-latency-time-table", series, function (s) { return s.p50_us; }, ms, "TTLB median per second, ms");
    }
    var rps = document.getElementById("chart-rps-time");
    if (rps) {
      new Chart(rps, { type: "line", data: { labels: seconds(longest(series)), datasets: rpsDatasets(series) },
        options: { animation: false, maintainAspectRatio: false, scales: {
          x: { title: { display: true, text: "measured second" } },
          y: { beginAtZero: true, title: { display: true, text: "requests per second" } } } } });
      seriesSummary("chart-rps-time-table", series, function (s) { return s.requests; },
        function (v) { return fixed(v, 0); }, "req/s");
    }
  }

  function generatorChart(data) {
    var canvas = document.getElementById("chart-gen");
    var series = data.series || {};
    if (!canvas) { return; }
    var datasets = Object.keys(series).map(function (arm) {
      return { label: arm, data: series[arm].gen_cpu_pct, borderColor: color(arm), backgroundColor: color(arm),
        pointRadius: 2, borderWidth: 2, spanGaps: false };
    });
    new Chart(canvas, {
      type: "line",
      data: { labels: seconds(longest(series)), datasets: datasets },
      options: { animation: false, maintainAspectRatio: false, scales: {
        x: { title: { display: true, text: "measured second of the arm (rounds one after another)" } },
        y: { title: { display: true, text: "generator CPU, % of one core" }, beginAtZero: true, suggestedMax: 100 } } }
    });
    seriesSummary("chart-gen-table", series, function (s) { return s.gen_cpu_pct; },
      function (v) { return fixed(v, 1); }, "% of a core");
  }

  function breakdownChart(data) {
    var canvas = document.getElementById("chart-breakdown");
    if (!canvas || !data.breakdown) { return; }
    var arms = Object.keys(data.breakdown);
    var parts = [["connect_us", "TCP connect", "#7f7f7f"], ["tls_handshake_us", "TLS handshake", "#d62728"],
      ["wait_us", "wait for first byte", "#1f77b4"], ["transfer_us", "transfer", "#2ca02c"]];
    fillTable("chart-breakdown-table", ["Arm"].concat(parts.map(function (p) { return p[1] + ", mean ms"; }), ["time to last byte, mean ms"]),
      arms.map(function (arm) {
        var b = data.breakdown[arm];
        return [arm].concat(parts.map(function (p) { return ms(b[p[0]]); }), [ms(b.ttlb_mean_us)]);
      }));
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
    var n = 0;
    var datasets = [];
    arms.forEach(function (arm) {
      n = Math.max(n, data.server_cpu[arm].cpu_pct.length);
      datasets.push({ label: arm + " CPU %", data: data.server_cpu[arm].cpu_pct, borderColor: color(arm),
        backgroundColor: color(arm), pointRadius: 1, borderWidth: 1 });
      datasets.push({ label: arm + " 15 s average", data: data.server_cpu[arm].ma15, borderColor: color(arm),
        backgroundColor: color(arm), pointRadius: 0, borderWidth: 2, borderDash: [6, 3] });
    });
    new Chart(canvas, {
      type: "line",
      data: { labels: seconds(n), datasets: datasets },
      options: { animation: false, maintainAspectRatio: false, spanGaps: true,
        scales: { x: { title: { display: true, text: "sample (≈ s into the arm's window)" } },
                  y: { beginAtZero: true, title: { display: true, text: "% of one core" } } } }
    });
    seriesSummary("chart-server-cpu-table", data.server_cpu, function (s) { return s.cpu_pct; },
      function (v) { return fixed(v, 1); }, "% of a core");
  }

  // Extra cores = peak req/s × ((1 − f) × Δkeep-alive + f × Δnew) / 1000 (portal.lib.stats.projection.project_cores),
  // its 95% interval the two CPU costs' intervals combined end to end (portal.lib.stats.projection.cores_interval).
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
      var interval = " (unconfirmed: the CPU's 95% interval needs 3 or more rounds)";
      if (p.keepalive_ci95 && p.new_ci95) {
        var lo = rps * ((1 - share) * p.keepalive_ci95[0] + share * p.new_ci95[0]) / 1000;
        var hi = rps * ((1 - share) * p.keepalive_ci95[1] + share * p.new_ci95[1]) / 1000;
        interval = " (95% CI " + lo.toFixed(2) + " … " + hi.toFixed(2) + ")";
        out.dataset.coresLo = lo.toFixed(6);
        out.dataset.coresHi = hi.toFixed(6);
      }
      out.textContent = "TLS needs about " + cores.toFixed(2) + " extra server cores" + interval + " at " + rps +
        " req/s with " + (share * 100).toFixed(1) + "% of requests on new connections (" +
        Number(perReq.toPrecision(3)) + " extra CPU-ms per request).";
      out.dataset.cores = cores.toFixed(6);
    }
    form.addEventListener("input", update);
    form.addEventListener("submit", function (event) { event.preventDefault(); update(); });
    update();
  }

  // The post-quantum hybrid's price at the user's peak (portal.lib.tls.advice.hybrid_at_peak): handshakes/s =
  // peak × share of new connections; extra cores = handshakes/s × Δ CPU-ms / 1000, its interval alike;
  // extra bytes/s = handshakes/s × the handshake bytes both sides sent more.
  function hybridPrice() {
    var form = document.getElementById("hybrid-form");
    if (!form) { return; }
    var items = document.querySelectorAll(".hybrid-cost");
    function num(value) { return value === "" || value === undefined ? null : parseFloat(value); }
    function update() {
      var rps = parseFloat(document.getElementById("hybrid-rps").value);
      var share = parseFloat(document.getElementById("hybrid-new").value) / 100;
      Array.prototype.forEach.call(items, function (item) {
        var out = item.querySelector(".hybrid-at-peak");
        if (!(rps >= 0) || !(share >= 0 && share <= 1)) {
          out.textContent = "Enter requests/s ≥ 0 and a share between 0 and 100%.";
          return;
        }
        var handshakes = rps * share;
        var cpu = num(item.dataset.cpuMs), lo = num(item.dataset.cpuLo), hi = num(item.dataset.cpuHi);
        var bytes = num(item.dataset.bytes);
        var text = "At " + rps + " req/s with " + (share * 100).toFixed(1) + "% on new connections (" +
          handshakes.toFixed(1) + " handshakes/s), " + item.dataset.group + " instead of " + item.dataset.versus +
          " adds " + (num(item.dataset.ttlbUs) / 1000).toFixed(3) + " ms per new connection";
        if (cpu !== null) {
          var cores = handshakes * cpu / 1000;
          text += ", about " + cores.toFixed(3) + " server cores";
          if (lo !== null && hi !== null) {
            text += " (95% CI " + (handshakes * lo / 1000).toFixed(3) + " … " + (handshakes * hi / 1000).toFixed(3) + ")";
          } else {
            text += " (unconfirmed: the CPU's 95% interval needs 3 or more rounds)";
          }
          item.dataset.cores = cores.toFixed(6);
        } else {
          text += " (no server CPU measured: needs a server probe or a sampled local process)";
        }
        if (bytes !== null) { text += " and " + (handshakes * bytes / 1000).toFixed(1) + " kB/s more on the wire"; }
        out.textContent = text + ".";
      });
    }
    form.addEventListener("input", update);
    form.addEventListener("submit", function (event) { event.preventDefault(); update(); });
    update();
  }

  // A printed report shows everything: the collapsed parts opened (all costs, chart tables) and
  // every chart drawn at the paper's width, then back to the screen's. The checks' evidence stays one
  // line per check unless opened by hand (its JSON is whole in the signed report).
  function printing() {
    var link = document.getElementById("print-link");
    if (link) { link.addEventListener("click", function (event) { event.preventDefault(); window.print(); }); }
    var opened = [];
    window.addEventListener("beforeprint", function () {
      Array.prototype.forEach.call(document.querySelectorAll("details:not([open]):not(.evidence)"), function (d) {
        d.open = true;
        opened.push(d);
      });
      if (typeof Chart === "undefined") { return; }
      Object.keys(Chart.instances).forEach(function (key) {
        var chart = Chart.instances[key];
        chart.resize(PRINT_WIDTH_PX, chart.canvas.parentNode.classList.contains("small") ? 200 : 260);
      });
    });
    window.addEventListener("afterprint", function () {
      opened.forEach(function (d) { d.open = false; });
      opened = [];
      if (typeof Chart === "undefined") { return; }
      Object.keys(Chart.instances).forEach(function (key) { Chart.instances[key].resize(); });
    });
  }

  window.Tollgate = {
    color: color, fillTable: fillTable, median: median, ms: ms, seconds: seconds, longest: longest,
    latencyDatasets: latencyDatasets, rpsDatasets: rpsDatasets
  };

  // A check's "evidence" link opens the block it points at.
  function openLinked() {
    var target = window.location.hash && document.getElementById(window.location.hash.slice(1));
    if (target && target.tagName === "DETAILS") { target.open = true; }
  }

  document.addEventListener("DOMContentLoaded", function () {
    printing();
    openLinked();
    window.addEventListener("hashchange", openLinked);
    hybridPrice();
    var el = document.getElementById("chart-data");
    if (!el || typeof Chart === "undefined") { return; }
    var data = JSON.parse(el.textContent);
    histogramChart(data);
    curveChart(data);
    timeCharts(data);
    breakdownChart(data);
    generatorChart(data);
    serverCpuChart(data);
    projection(data);
  });
})();
