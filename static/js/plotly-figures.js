// trainhub: draw every server-built Plotly figure on the page. An element
// <div data-plotly-figure="ID"> is drawn from the JSON in <script id="ID" type="application/json">
// (Django's json_script); plotly.min.js is served from our own static files.
(function () {
  "use strict";
  function draw() {
    document.querySelectorAll("[data-plotly-figure]").forEach(function (target) {
      const source = document.getElementById(target.dataset.plotlyFigure);
      if (!source || !window.Plotly) { return; }
      const figure = JSON.parse(source.textContent);
      window.Plotly.newPlot(target, figure.data, figure.layout, { responsive: true, displaylogo: false });
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); } else { draw(); }
})();
