// The search page's progressive results (retrieval/web/page.py). The stylesheet alone swaps
// the preview for the final results; this only says so to screen readers, and keeps a
// preview the user has focused in place until focus leaves it, so nothing moves under them.
(function () {
  "use strict";

  function announce(final) {
    var region = document.getElementById("announce");
    if (region) {
      region.textContent = final.getAttribute("data-announce");
    }
  }

  function settle(final) {
    var preview = document.getElementById("preview");
    if (!preview) {
      return; // one response with the final results: nothing was replaced
    }
    if (!preview.contains(document.activeElement)) {
      announce(final);
      return;
    }
    preview.classList.add("held");
    preview.addEventListener("focusout", function release(event) {
      if (preview.contains(event.relatedTarget)) {
        return;
      }
      preview.removeEventListener("focusout", release);
      preview.classList.remove("held");
      announce(final);
    });
  }

  // Loaded async, so it never holds up the page: the final results may already be there.
  // If not, mutation records arrive before the next rendering, so a held preview never
  // flickers.
  function finalResults() {
    return document.getElementById("final");
  }
  if (finalResults()) {
    settle(finalResults());
    return;
  }
  var observer = new MutationObserver(function () {
    if (finalResults()) {
      observer.disconnect();
      settle(finalResults());
    }
  });
  observer.observe(document.documentElement, { childList: true, subtree: true });
})();
