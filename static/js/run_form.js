// Run form: say before submitting when the run is too short for confidence intervals
// (the same rule as portal.lib.evidence.too_short_for_intervals, which renders the note's first state).
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
