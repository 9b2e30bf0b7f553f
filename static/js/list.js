// Runs list: "Compare selected" opens the compare page with the runs in the order they were ticked,
// a pinned baseline first, as the hint beside the button says. Without JavaScript the form still
// works: the server then puts a pinned baseline first and keeps the table's order.
(function () {
  "use strict";

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("compare-form");
    if (!form) { return; }
    var boxes = Array.prototype.slice.call(form.querySelectorAll("input[type=checkbox][name=runs]"));
    var ticked = boxes.filter(function (box) { return box.checked; }).map(function (box) { return box.value; });

    boxes.forEach(function (box) {
      box.addEventListener("change", function () {
        ticked = ticked.filter(function (code) { return code !== box.value; });
        if (box.checked) { ticked.push(box.value); }
        form.dataset.order = ticked.join(",");
      });
    });

    form.addEventListener("submit", function (event) {
      var checked = boxes.filter(function (box) { return box.checked; });
      // Ticked before the script ran (the browser restores checkboxes on back): table order.
      checked.forEach(function (box) { if (ticked.indexOf(box.value) < 0) { ticked.push(box.value); } });
      var order = ticked.filter(function (code) {
        return checked.some(function (box) { return box.value === code; });
      });
      var pinned = checked.filter(function (box) { return box.dataset.baseline === "1"; })
        .map(function (box) { return box.value; });
      function isPinned(code) { return pinned.indexOf(code) >= 0; }
      order = order.filter(isPinned).concat(order.filter(function (code) { return !isPinned(code); }));
      event.preventDefault();
      window.location.assign(form.action + "?runs=" + order.map(encodeURIComponent).join(","));
    });
  });
})();
