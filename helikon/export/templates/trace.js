// Fold or unfold every turn; show the chart of the run picked in the selector.
document.querySelectorAll("[data-fold]").forEach(function (button) {
  button.addEventListener("click", function () {
    var open = button.getAttribute("data-fold") === "open";
    document.querySelectorAll("details.turn, details.fold").forEach(function (d) {
      d.open = open;
    });
  });
});
var picker = document.getElementById("chart-run");
if (picker) {
  var show = function () {
    document.querySelectorAll(".chart-panel").forEach(function (panel) {
      panel.hidden = panel.getAttribute("data-run") !== picker.value;
    });
  };
  picker.addEventListener("change", show);
  show();
}
// Each run's chart: fitted to the window at first, then zoomed and panned (chart_view.js).
var views = [];
document.querySelectorAll(".chart-panel .canvas").forEach(function (frame) {
  views.push(helikonChartView.attach(frame));
});
helikonChartView.buttons(document, function () { return views; });
if (picker) {
  picker.addEventListener("change", function () {
    views.forEach(function (view) { view.fit(); });
  });
}
