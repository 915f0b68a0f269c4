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
// Zoom the chart in (one SVG unit to a CSS pixel; scroll to see it all), or fit it to its column.
var chart = document.querySelector("aside.chart");
var zoom = document.getElementById("zoom");
var toggle = function () {
  var zoomed = chart.classList.toggle("zoomed");
  zoom.setAttribute("aria-pressed", String(zoomed));
  zoom.textContent = zoomed ? "fit to column" : "zoom in";
  chart.querySelectorAll("svg").forEach(function (svg) {
    svg.style.width = zoomed ? svg.viewBox.baseVal.width + "px" : "";
  });
};
if (zoom) {
  zoom.addEventListener("click", toggle);
  chart.querySelectorAll("svg").forEach(function (svg) {
    svg.addEventListener("click", toggle);
  });
}
