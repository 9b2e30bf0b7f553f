// Scenario page: each cost's Δ median TTLB per judged run with its 95% interval as a band, the
// baseline's cost as a dashed line, regressions marked (red triangles) and improvements (blue).
(function () {
  "use strict";
  var COLORS = {
    keepalive_tls: "#d62728", new_connection_tls: "#9467bd", handshake: "#ff7f0e", resumption_saving: "#2ca02c"
  };
  var BAND_ALPHA = 0.15;  // as on the trend page: a tint behind the line, never a block
  var MARK = { regression: ["triangle", "#b00020", 8], improvement: ["rectRot", "#1f5fbf", 7] };

  function rgba(hex, alpha) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16 & 255) + ", " + (n >> 8 & 255) + ", " + (n & 255) + ", " + alpha + ")";
  }

  document.addEventListener("DOMContentLoaded", function () {
    var el = document.getElementById("judgements-data");
    var canvas = document.getElementById("chart-judgements");
    if (!el || !canvas || typeof Chart === "undefined") { return; }
    var points = JSON.parse(el.textContent);
    var labels = points.map(function (p) { return p.t.slice(0, 16).replace("T", " "); });
    var names = [];
    points.forEach(function (p) { Object.keys(p.costs).forEach(function (n) { if (names.indexOf(n) < 0) { names.push(n); } }); });
    var datasets = [];
    names.forEach(function (name) {
      var color = COLORS[name] || "#555555";
      function series(get) { return points.map(function (p) { var c = p.costs[name]; return c ? get(c) : null; }); }
      function ms(v) { return v === null || v === undefined ? null : v / 1000; }
      datasets.push({ label: name + " 95% low", data: series(function (c) { return c.ci95 ? ms(c.ci95[0]) : null; }),
        borderColor: rgba(color, 0), backgroundColor: rgba(color, BAND_ALPHA), pointRadius: 0, fill: false });
      datasets.push({ label: name + " 95% high", data: series(function (c) { return c.ci95 ? ms(c.ci95[1]) : null; }),
        borderColor: rgba(color, 0), backgroundColor: rgba(color, BAND_ALPHA), pointRadius: 0, fill: "-1" });
      datasets.push({ label: name + " baseline", data: series(function (c) { return ms(c.baseline_delta); }),
        borderColor: color, borderDash: [6, 4], borderWidth: 1, pointRadius: 0, fill: false });
      var marks = series(function (c) { return MARK[c.judgement] || null; });
      datasets.push({ label: name, data: series(function (c) { return ms(c.delta); }),
        borderColor: color, backgroundColor: marks.map(function (m) { return m ? m[1] : color; }),
        pointStyle: marks.map(function (m) { return m ? m[0] : "circle"; }),
        pointRadius: marks.map(function (m) { return m ? m[2] : 3; }), borderWidth: 2 });
    });
    new Chart(canvas, {
      type: "line",
      data: { labels: labels, datasets: datasets },
      options: {
        animation: false, maintainAspectRatio: false,
        scales: {
          x: { title: { display: true, text: "run (UTC)" } },
          y: { title: { display: true, text: "Δ median time to last byte, ms" } }
        },
        plugins: { legend: { labels: { filter: function (item) { return item.text.indexOf("95%") < 0; } } } }
      }
    });
  });
})();
