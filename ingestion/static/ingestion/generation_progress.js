// Each generation progress bar on the page (templates/admin/ingestion/indexgeneration/
// progress.html) asks its progress.json once a second and shows the answer, until the
// generation is ready: no reload. The page already holds the figure it was rendered with,
// and a reload link, which is all a browser without JavaScript gets; a failed poll stops
// polling and shows that link again rather than a figure that silently ages.
"use strict";

(() => {
  const INTERVAL_MS = 1000;

  function watch(widget) {
    const bar = widget.querySelector("progress");
    const label = widget.querySelector(".generation-progress-label");
    const reload = widget.querySelector(".generation-progress-reload");
    reload.hidden = true;

    async function poll() {
      try {
        const response = await fetch(widget.dataset.progressUrl, {
          headers: { Accept: "application/json" },
          redirect: "error", // a login page is not a figure
        });
        if (!response.ok) throw new Error(`progress.json answered ${response.status}`);
        const figures = await response.json();
        // An empty generation is complete: a full bar, as the page renders it.
        bar.max = figures.total || 1;
        bar.value = figures.total ? figures.embedded : 1;
        label.textContent = figures.label;
        widget.dataset.ready = String(figures.ready);
        if (!figures.ready) window.setTimeout(poll, INTERVAL_MS);
      } catch (error) {
        reload.hidden = false;
      }
    }

    window.setTimeout(poll, INTERVAL_MS);
  }

  // The admin loads its media in the page's head, before the bars are parsed.
  document.addEventListener("DOMContentLoaded", () =>
    document.querySelectorAll(".generation-progress[data-ready=false]").forEach(watch),
  );
})();
