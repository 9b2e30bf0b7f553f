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
          if (p.arm) {
            text("run-arm", "· arm " + p.arm + " (" + (p.arms_done.length + 1) + " of " + p.arms.length + ")");
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

  document.addEventListener("DOMContentLoaded", function () {
    pollProgress();
    histogramChart();
  });
})();
