// The chart's pan and zoom, shared by the trace page and the studio (helikonChartView).
// At its first size the whole chart fits the window: the box is sized so that the SVG, drawn
// at one scale for both axes, fits the width of its column and the height left under it.
// Zoom (the wheel, or the + and - buttons) and pan (drag) move the SVG's viewBox; "fit"
// brings the first view back. A drag does not click what it ends on.
var helikonChartView = (function () {
  var MARGIN = 16; // CSS px kept free under the chart at its first size
  var STEP = 1.25; // a button's zoom factor
  var LARGEST = 1.25; // the first size's largest scale: a big window does not blow it up

  function box(svg) {
    var vb = svg.viewBox.baseVal;
    return { x: vb.x, y: vb.y, width: vb.width, height: vb.height };
  }

  function show(svg, view) {
    svg.setAttribute("viewBox", [view.x, view.y, view.width, view.height].join(" "));
  }

  function attach(frame) {
    var state = { drag: null, dragged: false, moved: false, first: null, shown: null };

    function svg() {
      return frame.querySelector("svg");
    }

    function fit() {
      var drawing = svg();
      if (!drawing || !state.first || !frame.clientWidth) return; // a hidden panel: later
      var top = Math.max(0, frame.getBoundingClientRect().top); // in the window, as shown
      var room = Math.max(160, window.innerHeight - top - MARGIN);
      var scale = Math.min(
        frame.clientWidth / state.first.width, room / state.first.height, LARGEST);
      frame.style.height = Math.ceil(state.first.height * scale) + "px";
      show(drawing, state.first);
      state.moved = false;
    }

    // Take a newly inserted SVG: fitted, or (the studio redraws at each step) at the view
    // the reader had moved to.
    function adopt() {
      var drawing = svg();
      if (!drawing || drawing === state.shown) return;
      var kept = state.shown && state.moved ? box(state.shown) : null;
      state.first = box(drawing);
      state.shown = drawing;
      drawing.removeAttribute("width");
      drawing.removeAttribute("height");
      fit();
      if (kept) {
        show(drawing, kept);
        state.moved = true;
      }
    }

    function toChart(drawing, clientX, clientY) {
      var point = drawing.createSVGPoint();
      point.x = clientX;
      point.y = clientY;
      return point.matrixTransform(drawing.getScreenCTM().inverse());
    }

    // Zoom by `factor` about a point of the window (default: the middle of the chart).
    function zoom(factor, clientX, clientY) {
      var drawing = svg();
      if (!drawing || !frame.clientWidth) return;
      var rect = frame.getBoundingClientRect();
      var x = clientX === undefined ? rect.left + rect.width / 2 : clientX;
      var y = clientY === undefined ? rect.top + rect.height / 2 : clientY;
      var at = toChart(drawing, x, y);
      var view = box(drawing);
      show(drawing, {
        x: at.x - (at.x - view.x) / factor,
        y: at.y - (at.y - view.y) / factor,
        width: view.width / factor,
        height: view.height / factor,
      });
      state.moved = true;
    }

    function pan(event) {
      var drag = state.drag;
      var dx = event.clientX - drag.x;
      var dy = event.clientY - drag.y;
      if (!drag.far && Math.hypot(dx, dy) < 4) return; // a click, so far
      if (!drag.far) frame.setPointerCapture(event.pointerId);
      drag.far = true;
      frame.classList.add("dragging");
      show(svg(), {
        x: drag.view.x - dx * drag.unit,
        y: drag.view.y - dy * drag.unit,
        width: drag.view.width,
        height: drag.view.height,
      });
      state.moved = true;
    }

    // The wheel zooms in, and out as far as the first view; past it, it scrolls the page (a
    // chart as wide as the window would otherwise hold the page still under the pointer).
    frame.addEventListener("wheel", function (event) {
      var drawing = svg();
      var factor = Math.exp(-event.deltaY * 0.002);
      if (!drawing || (factor < 1 && !state.moved)) return;
      event.preventDefault();
      if (factor < 1 && box(drawing).width / factor >= state.first.width) fit();
      else zoom(factor, event.clientX, event.clientY);
    }, { passive: false });
    frame.addEventListener("pointerdown", function (event) {
      var drawing = svg();
      state.dragged = false;
      if (!drawing || event.button !== 0) return;
      var unit = 1 / drawing.getScreenCTM().a;
      state.drag = { x: event.clientX, y: event.clientY, view: box(drawing), unit: unit, far: false };
    });
    frame.addEventListener("pointermove", function (event) {
      if (state.drag) pan(event);
    });
    function stop() {
      frame.classList.remove("dragging");
      state.dragged = Boolean(state.drag && state.drag.far);
      state.drag = null;
    }
    frame.addEventListener("pointerup", stop);
    frame.addEventListener("pointercancel", stop);
    frame.addEventListener("click", function (event) {
      if (state.dragged) event.stopPropagation(); // the click that ends a drag picks nothing
      state.dragged = false;
    }, true);
    function refit() {
      if (!state.moved) fit();
    }
    window.addEventListener("resize", refit);
    adopt();
    return {
      adopt: adopt,
      fit: fit,
      refit: refit, // what is above the chart changed: fit again, unless the reader moved it
      zoomIn: function () { zoom(STEP); },
      zoomOut: function () { zoom(1 / STEP); },
    };
  }

  // The + / - / fit buttons of a chart: each names its action in data-chart-zoom.
  function buttons(root, views) {
    root.querySelectorAll("[data-chart-zoom]").forEach(function (button) {
      button.addEventListener("click", function () {
        var action = button.getAttribute("data-chart-zoom");
        views().forEach(function (view) {
          if (action === "in") view.zoomIn();
          else if (action === "out") view.zoomOut();
          else view.fit();
        });
      });
    });
  }

  return { attach: attach, buttons: buttons };
})();
