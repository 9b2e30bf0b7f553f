// Trend page: each cost's Δ median TTLB per run over time, with its 95% interval as a band.
(function () {
  "use strict";
  var COLORS = {
    keepalive_tls: "#d62728", new_connection_tls: "#9467bd", handshake: "#ff7f0e", resumption_saving: "#2ca02c",
    h2_vs_tls: "#17becf", h2_vs_plain: "#8c564b", h2_new_vs_tls_new: "#e377c2", h2_tls: "#7f7f7f"
  };
  var BAND_ALPHA = 0.15;  // the 95% interval: a tint behind the line, never a block

  // "#rrggbb" with an alpha, as rgba(): appending hex digits to a short or unknown colour made an
  // invalid colour, which the canvas painted black.
  function rgba(hex, alpha) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16 & 255) + ", " + (n >> 8 & 255) + ", " + (n & 255) + ", " + alpha + ")";
  }

  document.addEventListener("DOMContentLoaded", function () {
    var el = document.getElementById("trend-data");
    var canvas = document.getElementById("chart-trend");
    if (!el || !canvas || typeof Chart === "undefined") { return; }
    var points = JSON.parse(el.textContent);
    var labelsEl = document.getElementById("trend-labels");
    var names = labelsEl ? JSON.parse(labelsEl.textContent) : {};
    var datasets = [];
    Object.keys(points).forEach(function (key) {
      var color = COLORS[key] || "#555555";
      var name = names[key] || key;
      var rows = points[key];
      function xy(value) { return function (p) { return { x: p.t.slice(0, 19).replace("T", " "), y: value(p) }; }; }
      datasets.push({ label: name + " 95% low", data: rows.map(xy(function (p) { return p.ci95 ? p.ci95[0] / 1000 : null; })),
        borderColor: rgba(color, 0), backgroundColor: rgba(color, BAND_ALPHA), pointRadius: 0, fill: false });
      datasets.push({ label: name + " 95% high", data: rows.map(xy(function (p) { return p.ci95 ? p.ci95[1] / 1000 : null; })),
        borderColor: rgba(color, 0), backgroundColor: rgba(color, BAND_ALPHA), pointRadius: 0, fill: "-1" });
      datasets.push({ label: name, data: rows.map(xy(function (p) { return p.delta / 1000; })),
        borderColor: color, backgroundColor: color, pointRadius: 3, borderWidth: 2 });
    });
    var labels = [];
    datasets.forEach(function (d) { d.data.forEach(function (p) { if (labels.indexOf(p.x) < 0) { labels.push(p.x); } }); });
    labels.sort();
    new Chart(canvas, {
      type: "line",
      data: { labels: labels, datasets: datasets },
      options: {
        animation: false, maintainAspectRatio: false, parsing: true,
        scales: {
          x: { type: "category", title: { display: true, text: "run (UTC)" } },
          y: { title: { display: true, text: "Δ median time to last byte, ms" } }
        },
        plugins: { legend: { labels: { filter: function (item) { return item.text.indexOf("95%") < 0; } } } }
      }
    });
  });
})();
