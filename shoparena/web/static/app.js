// shoparena web: the only script, served locally. Click a column head of a table.sortable to sort its rows
// (numbers by the cell's data-v, text otherwise); click again to reverse. Pages work without it.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (th, col) {
      th.addEventListener("click", function () {
        var numeric = th.dataset.sort === "num";
        var dir = th.dataset.dir === "asc" ? -1 : 1;
        th.dataset.dir = dir === 1 ? "asc" : "desc";
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[col], y = b.cells[col];
          if (!x || !y) { return 0; }
          if (numeric) {
            return dir * ((parseFloat(x.dataset.v || x.textContent) || 0) - (parseFloat(y.dataset.v || y.textContent) || 0));
          }
          return dir * x.textContent.trim().localeCompare(y.textContent.trim());
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
});
