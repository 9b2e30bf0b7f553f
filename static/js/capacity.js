// Run page: the saturation search's chart (requests/s and TTLB p50/p99 against the load of each stage,
// per searched arm). The numbers are in the table #capacity-points beside it; page data comes from
// json_script (#capacity-data), never from inline script.
(function () {
  "use strict";

  var COLORS = {
    plain: "#1f77b4", tls: "#d62728", plain_new: "#7f7f7f", tls_new: "#ff7f0e", tls_resumed: "#2ca02c"
  };

  function color(arm) {
    return (window.Tollgate && window.Tollgate.color) ? window.Tollgate.color(arm) : (COLORS[arm] || "#333");
  }

  function byLoad(points) {
    return points.slice().sort(function (a, b) { return a.load - b.load; });
  }

  function datasets(capacity) {
    var out = [];
    Object.keys(capacity).forEach(function (arm) {
      var points = byLoad(capacity[arm].points);
      function line(label, pick, axis, dash) {
        out.push({
          label: arm + " " + label,
          data: points.map(function (p) { return { x: p.load, y: pick(p) }; }),
          borderColor: color(arm), backgroundColor: color(arm), borderDash: dash, yAxisID: axis,
          pointRadius: 3, fill: false, tension: 0
        });
      }
      line("req/s", function (p) { return p.rps; }, "rps", []);
      line("TTLB p50 ms", function (p) { return p.ttlb_p50_us === null ? null : p.ttlb_p50_us / 1000; }, "ms", [6, 3]);
      line("TTLB p99 ms", function (p) { return p.ttlb_p99_us === null ? null : p.ttlb_p99_us / 1000; }, "ms", [2, 2]);
    });
    return out;
  }

  function draw() {
    var el = document.getElementById("capacity-data");
    var canvas = document.getElementById("chart-capacity");
    if (!el || !canvas || typeof Chart === "undefined") { return; }
    var capacity = JSON.parse(el.textContent) || {};
    var modes = Object.keys(capacity).map(function (arm) { return capacity[arm].mode; });
    var unit = modes.indexOf("rate") >= 0 && modes.indexOf("users") < 0 ? "asked req/s" : "users";
    if (modes.indexOf("rate") >= 0 && modes.indexOf("users") >= 0) { unit = "users or asked req/s"; }
    canvas.dataset.rendered = "1";
    new Chart(canvas, {
      type: "line",
      data: { datasets: datasets(capacity) },
      options: {
        animation: false,
        maintainAspectRatio: false,
        parsing: true,
        scales: {
          x: { type: "logarithmic", title: { display: true, text: "Load (" + unit + ")" } },
          rps: { type: "linear", position: "left", beginAtZero: true, title: { display: true, text: "req/s (solid)" } },
          ms: { type: "linear", position: "right", beginAtZero: true, grid: { drawOnChartArea: false },
                title: { display: true, text: "TTLB ms (p50 dashed, p99 dotted)" } }
        }
      }
    });
  }

  document.addEventListener("DOMContentLoaded", draw);
})();
