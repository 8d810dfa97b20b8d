// Suggestions under the search box as a visitor types (GET /api/suggest), as the WAI-ARIA
// combobox pattern has it: the box becomes a combobox only here, so without JavaScript it
// is the plain search box it always was. Arrow keys move through the suggestions (the
// box keeps focus; aria-activedescendant says which one), Enter on one searches for it,
// Escape closes the list, and how many there are is announced.
(function () {
  "use strict";

  var WAIT_MS = 80; // a pause in typing, not every keystroke, asks the server
  var MIN_CHARS = 2; // fewer are suggested nothing (retrieval/pg/suggestions.py)

  var input = document.getElementById("q");
  if (!input || !input.dataset.suggest || !window.fetch) {
    return;
  }
  var form = input.form;
  var list = document.createElement("ul");
  list.id = "q-suggestions";
  list.className = "suggestions";
  list.setAttribute("role", "listbox");
  list.setAttribute("aria-label", "Suggestions");
  list.hidden = true;
  var status = document.createElement("div");
  status.className = "visually-hidden";
  status.setAttribute("role", "status");
  input.parentNode.appendChild(list);
  input.parentNode.appendChild(status);
  input.setAttribute("role", "combobox");
  input.setAttribute("aria-autocomplete", "list");
  input.setAttribute("aria-controls", list.id);
  input.setAttribute("aria-expanded", "false");

  var timer = null;
  var asking = null; // the request in flight, aborted when a newer one starts
  var active = -1;

  function options() {
    return list.querySelectorAll("[role=option]");
  }

  function close() {
    list.hidden = true;
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
    active = -1;
  }

  function highlight(index) {
    var all = options();
    if (!all.length) {
      return;
    }
    active = (index + all.length) % all.length;
    for (var i = 0; i < all.length; i++) {
      all[i].setAttribute("aria-selected", i === active ? "true" : "false");
    }
    input.setAttribute("aria-activedescendant", all[active].id);
    all[active].scrollIntoView({ block: "nearest" });
  }

  function choose(option) {
    input.value = option.dataset.text;
    close();
    form.requestSubmit ? form.requestSubmit() : form.submit();
  }

  function show(suggestions) {
    list.textContent = "";
    suggestions.forEach(function (suggestion, index) {
      var option = document.createElement("li");
      option.id = "q-suggestion-" + index;
      option.setAttribute("role", "option");
      option.setAttribute("aria-selected", "false");
      option.dataset.text = suggestion.text;
      option.textContent = suggestion.text;
      if (suggestion.kind === "venue") {
        var kind = document.createElement("span");
        kind.className = "kind";
        kind.textContent = " · venue";
        option.appendChild(kind);
      }
      list.appendChild(option);
    });
    active = -1;
    input.removeAttribute("aria-activedescendant");
    var open = suggestions.length > 0 && document.activeElement === input;
    list.hidden = !open;
    input.setAttribute("aria-expanded", open ? "true" : "false");
    status.textContent = open
      ? suggestions.length + (suggestions.length === 1 ? " suggestion" : " suggestions") +
        ": up and down arrows to choose"
      : "";
  }

  function ask() {
    var typed = input.value.trim();
    if (asking) {
      asking.abort();
      asking = null;
    }
    if (typed.replace(/[^\p{L}\p{N}]/gu, "").length < MIN_CHARS) {
      show([]);
      return;
    }
    asking = new AbortController();
    fetch(input.dataset.suggest + "?" + new URLSearchParams({ q: typed }), {
      signal: asking.signal,
      headers: { Accept: "application/json" },
    })
      .then(function (response) {
        return response.ok ? response.json() : { suggestions: [] };
      })
      .then(function (body) {
        show(body.suggestions);
      })
      .catch(function () {}); // aborted by a newer keystroke, or offline: nothing to show
  }

  input.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(ask, WAIT_MS);
  });
  input.addEventListener("keydown", function (event) {
    var open = !list.hidden;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      if (!options().length) {
        return;
      }
      event.preventDefault();
      if (!open) {
        list.hidden = false;
        input.setAttribute("aria-expanded", "true");
      }
      // Down from nothing chosen is the first, up the last; both wrap around.
      highlight(event.key === "ArrowDown" ? active + 1 : Math.max(active, 0) - 1);
    } else if (event.key === "Enter" && open && active >= 0) {
      event.preventDefault();
      choose(options()[active]);
    } else if (event.key === "Escape" && open) {
      event.preventDefault(); // the first Escape closes the list, the next clears the box
      close();
    } else if (event.key === "Tab") {
      close();
    }
  });
  // mousedown, not click: the box keeps focus, so the list is still there on release.
  list.addEventListener("mousedown", function (event) {
    var option = event.target.closest("[role=option]");
    if (option) {
      event.preventDefault();
      choose(option);
    }
  });
  input.addEventListener("blur", close);
})();
