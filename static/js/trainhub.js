// trainhub: small progressive enhancements. Every page reads and submits without this file.
(function () {
  "use strict";

  // Submit form: offer only the accelerators, and counts, that the chosen machine type takes.
  // The catalog comes from the page (json_script); the server validates the choice again.
  function optionsOf(select) {
    return Array.from(select.options).map((option) => ({ value: option.value, label: option.textContent }));
  }

  function fillSelect(select, options, preferred) {
    const keep = options.some((option) => option.value === preferred) ? preferred : options[0].value;
    select.replaceChildren(...options.map((option) => new Option(option.label, option.value)));
    select.value = keep;
  }

  function setUpWorkerPool(pool, catalog) {
    const machine = pool.querySelector("[data-machine-type]");
    const accelerator = pool.querySelector("[data-accelerator-type]");
    const count = pool.querySelector("[data-accelerator-count]");
    const allAccelerators = optionsOf(accelerator);
    const allCounts = optionsOf(count);
    const none = allAccelerators[0];

    function refreshCounts() {
      const attachable = catalog[machine.value] || {};
      const allowed = (attachable[accelerator.value] || []).map(String);
      const options = accelerator.value && machine.value
        ? allCounts.filter((option) => allowed.includes(option.value))
        : [allCounts[0]];
      fillSelect(count, options, count.value);
    }

    function refreshAccelerators() {
      if (!machine.value) {
        fillSelect(accelerator, [none], "");
      } else {
        const attachable = Object.keys(catalog[machine.value] || {});
        const options = [none, ...allAccelerators.filter((option) => attachable.includes(option.value))];
        // Machines with built-in GPUs (A2, A3, A4, G2) have exactly one choice: select it.
        const builtIn = attachable.length === 1 && !machine.value.startsWith("n1-") ? attachable[0] : "";
        fillSelect(accelerator, options, accelerator.value || builtIn);
      }
      refreshCounts();
    }

    machine.addEventListener("change", () => {
      accelerator.value = "";
      refreshAccelerators();
    });
    accelerator.addEventListener("change", refreshCounts);
    refreshAccelerators();
  }

  function setUpSubmitForm() {
    const blob = document.getElementById("machine-catalog");
    if (!blob) return;
    const catalog = JSON.parse(blob.textContent);
    document.querySelectorAll("[data-worker-pool]").forEach((pool) => setUpWorkerPool(pool, catalog));
  }

  // Log tail: keep following the end while the reader is at the bottom, and keep the DOM bounded.
  function setUpLogTail() {
    const log = document.getElementById("log-lines");
    if (!log) return;
    const maxLines = Number(log.dataset.maxLines) || 500;
    let following = true;
    log.scrollTop = log.scrollHeight;
    document.body.addEventListener("htmx:beforeSwap", (event) => {
      if (event.detail.target === log) {
        following = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
      }
    });
    document.body.addEventListener("htmx:afterSwap", (event) => {
      if (event.detail.target !== log) return;
      while (log.children.length > maxLines) log.firstElementChild.remove();
      if (following) log.scrollTop = log.scrollHeight;
    });
  }

  // A poll answered by the login page means the session ended: reload, so the whole page
  // goes to the login form (and comes back here after it) instead of a fragment showing it.
  function setUpSessionExpiry() {
    document.body.addEventListener("htmx:beforeSwap", (event) => {
      const url = new URL(event.detail.xhr.responseURL || window.location.href);
      if (url.pathname.startsWith("/login/")) {
        event.detail.shouldSwap = false;
        window.location.reload();
      }
    });
  }

  function setUpCopyButtons() {
    document.querySelectorAll("[data-copy]").forEach((button) => {
      if (!navigator.clipboard) return;
      button.hidden = false;
      button.addEventListener("click", async () => {
        const source = document.querySelector(button.dataset.copy);
        await navigator.clipboard.writeText((source.value ?? source.textContent).trim());
        const label = button.textContent;
        button.textContent = "Copied";
        setTimeout(() => { button.textContent = label; }, 1500);
      });
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    setUpSubmitForm();
    setUpLogTail();
    setUpSessionExpiry();
    setUpCopyButtons();
  });
})();
