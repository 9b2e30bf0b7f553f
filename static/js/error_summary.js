// A form's error summary (templates/_error_summary.html): focused when the page loads, so an error
// below the fold is not missed; each link opens the field's section and puts the cursor in the field.
(function () {
  "use strict";

  function reveal(element) {
    for (var d = element.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) {
      d.open = true;
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var summary = document.querySelector("[data-error-summary]");
    if (!summary) { return; }
    summary.focus();
    summary.addEventListener("click", function (event) {
      var link = event.target.closest("a[href^='#']");
      var target = link && document.getElementById(link.getAttribute("href").slice(1));
      if (!target) { return; }
      event.preventDefault();
      reveal(target);
      // A group of checkboxes or radios is linked by its box: the cursor goes to its first input.
      var input = target.matches("input, select, textarea") ? target : target.querySelector("input, select, textarea");
      (target.closest(".field") || target).scrollIntoView({ block: "start" });
      (input || target).focus({ preventScroll: true });
      history.replaceState(null, "", link.getAttribute("href"));
    });
  });
})();
