// Run form: say before submitting when the run is too short for confidence intervals
// (the same rule as portal.lib.report.evidence.too_short_for_intervals, which renders the note's first state).
(function () {
  "use strict";

  document.addEventListener("DOMContentLoaded", function () {
    var note = document.getElementById("ci-note");
    var duration = document.getElementById("id_duration_s");
    var rounds = document.getElementById("id_rounds");
    if (!note || !duration) { return; }
    var minSeconds = Number(note.dataset.minSeconds);
    var minRounds = Number(note.dataset.minRounds);

    function update() {
      var seconds = parseFloat(duration.value);
      var n = rounds ? parseInt(rounds.value, 10) : 1;
      if (!(n >= 1)) { n = 1; }
      note.hidden = !(seconds > 0 && n < minRounds && Math.floor(seconds) * n < minSeconds);
    }

    duration.addEventListener("input", update);
    if (rounds) { rounds.addEventListener("input", update); }
    update();
  });
})();

// Run form: say which target the run joins, or that it makes a new one, as the URLs are typed (the
// same rule as portal.targets.editing.target_note, which renders the note's first state): a typo in a
// URL makes a new target, so the note points to the target to edit instead.
(function () {
  "use strict";

  function typed(input, scheme) {
    var value = input ? input.value.trim() : "";
    return value && value.indexOf("://") < 0 ? scheme + "://" + value : value;  // as URLField assumes
  }

  function origin(url) {
    try { return url ? new URL(url).origin : null; } catch (e) { return null; }
  }

  function link(href, text) {
    var a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    return a;
  }

  document.addEventListener("DOMContentLoaded", function () {
    var note = document.getElementById("target-note");
    var data = document.getElementById("known-targets");
    var plainInput = document.getElementById("id_plain_url");
    var tlsInput = document.getElementById("id_tls_url");
    if (!note || !data || !(plainInput || tlsInput)) { return; }
    var known = JSON.parse(data.textContent);

    function update() {
      var plain = typed(plainInput, "http"), tls = typed(tlsInput, "https");
      note.hidden = !(plain || tls);
      if (note.hidden) { return; }
      var joins = known.filter(function (t) { return t.plain_url === plain && t.tls_url === tls; })[0];
      note.textContent = "";
      var strong = document.createElement("strong");
      if (joins) {
        strong.textContent = joins.name;
        note.append("These URLs are those of the target ", strong, ": the run joins it (its trend, its baseline).");
        return;
      }
      var wanted = [origin(plain), origin(tls)].filter(Boolean);
      var near = known.filter(function (t) {
        return [origin(t.plain_url), origin(t.tls_url)].some(function (o) { return o && wanted.indexOf(o) >= 0; });
      }).slice(0, 3);
      strong.textContent = "new target";
      note.append("No target of this project has exactly these URLs: starting makes a ", strong, ".");
      if (!known.length) { return; }
      note.append(" To correct the URL of an existing target instead, edit it");
      if (near.length) {
        note.append(": ");
        near.forEach(function (t, i) {
          note.append(link(t.edit_url, t.name), " (" + (t.tls_url || t.plain_url) + ")" + (i < near.length - 1 ? ", " : ""));
        });
      } else {
        note.append(" on the ", link(note.dataset.targetsUrl, "Targets"), " page");
      }
      note.append(".");
    }

    [plainInput, tlsInput].forEach(function (input) { if (input) { input.addEventListener("input", update); } });
    update();
  });
})();
