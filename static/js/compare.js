// Compare page: each run's costs with their 95% intervals, and percentile curves per arm.
(function () {
  "use strict";

  var RUN_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

  function costsChart(data) {
    var canvas = document.getElementById("chart-costs");
    if (!canvas) { return; }
    var labels = data.costs.map(function (row) { return row.name; });
    var datasets = [];
    data.runs.forEach(function (run, i) {
      var color = RUN_COLORS[i % RUN_COLORS.length];
      datasets.push({
        type: "bar",
        label: run + " (95% interval)",
        data: data.costs.map(function (row) {
          var c = row.cells[i];
          if (!c) { return null; }
          var lo = c.ci95 ? c.ci95[0] : c.delta, hi = c.ci95 ? c.ci95[1] : c.delta;
          return [lo / 1000, hi / 1000 + (hi === lo ? 0.001 : 0)];
        }),
        backgroundColor: color + "55", borderColor: color, borderWidth: 1, grouped: true
      });
    });
    data.runs.forEach(function (run, i) {
      var color = RUN_COLORS[i % RUN_COLORS.length];
      datasets.push({
        type: "line", showLine: false, label: run + " Δ", pointStyle: "rectRot", pointRadius: 6,
        data: data.costs.map(function (row) { var c = row.cells[i]; return c ? c.delta / 1000 : null; }),
        borderColor: color, backgroundColor: color
      });
    });
    new Chart(canvas, {
      data: { labels: labels, datasets: datasets },
      options: {
        animation: false, maintainAspectRatio: false,
        scales: { y: { title: { display: true, text: "Δ median time to last byte, ms" } } }
      }
    });
  }

  function curvesChart(data) {
    var canvas = document.getElementById("chart-curves");
    var select = document.getElementById("curve-arm");
    if (!canvas || !select) { return; }
    var arms = [];
    data.curves.forEach(function (curves) {
      Object.keys(curves).forEach(function (arm) { if (arms.indexOf(arm) < 0 && curves[arm]) { arms.push(arm); } });
    });
    arms.forEach(function (arm) {
      var opt = document.createElement("option");
      opt.value = arm; opt.textContent = arm;
      select.appendChild(opt);
    });
    var chart = null;
    function draw() {
      var arm = select.value;
      var labels = null;
      var datasets = data.curves.map(function (curves, i) {
        var curve = curves[arm] || [];
        if (!labels && curve.length) { labels = curve.map(function (p) { return "p" + p[0]; }); }
        var color = RUN_COLORS[i % RUN_COLORS.length];
        return {
          label: data.runs[i], data: curve.map(function (p) { return p[1] / 1000; }),
          borderColor: color, backgroundColor: color, pointRadius: 2, borderWidth: 2
        };
      });
      if (chart) { chart.destroy(); }
      chart = new Chart(canvas, {
        type: "line",
        data: { labels: labels || [], datasets: datasets },
        options: {
          animation: false, maintainAspectRatio: false,
          scales: {
            x: { title: { display: true, text: "percentile" } },
            y: { type: "logarithmic", title: { display: true, text: "time to last byte, ms (log)" } }
          }
        }
      });
    }
    select.addEventListener("change", draw);
    if (arms.length) { draw(); }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var el = document.getElementById("compare-data");
    if (!el || typeof Chart === "undefined") { return; }
    var data = JSON.parse(el.textContent);
    costsChart(data);
    curvesChart(data);
  });
})();
