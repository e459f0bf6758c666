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


  // Live fragments. Elements with hx-trigger="th-changed from:body" refresh when the scheduler
  // status (a cheap Redis read) reports a new version, and at least every FORCE_REFRESH_MS;
  // hx-trigger="th-tick from:body" ones (log tails) ask on every tick. Ticks come every 2 s while
  // the reader is active, every 10 s after a minute without input (a wall screen), every 30 s in
  // a hidden tab; the reader can pause them. Without JavaScript every page still reads, and
  // reloading shows the latest state.
  const TICK_ACTIVE_MS = 2000;
  const TICK_IDLE_MS = 10000;
  const TICK_HIDDEN_MS = 30000;
  const IDLE_AFTER_MS = 60000;
  const FORCE_REFRESH_MS = 30000;
  const LIVE_SELECTOR = '[hx-trigger*="th-changed"], [hx-trigger*="th-tick"]';

  function setUpLive() {
    const statusUrl = document.body.dataset.liveStatus;
    if (!statusUrl || !window.htmx) return;
    const indicator = document.querySelector("[data-live-indicator]");
    const text = indicator && indicator.querySelector("[data-live-text]");
    const toggle = indicator && indicator.querySelector("[data-live-toggle]");
    let lastInput = Date.now();
    let lastRefresh = Date.now();
    let version = null;
    let paused = false;
    let timer = null;
    let dueAt = 0;

    function interval() {
      if (document.hidden) return TICK_HIDDEN_MS;
      return Date.now() - lastInput > IDLE_AFTER_MS ? TICK_IDLE_MS : TICK_ACTIVE_MS;
    }

    function show(state) {
      if (!indicator) return;
      indicator.hidden = !document.querySelector(LIVE_SELECTOR);
      indicator.dataset.state = state;
      const time = new Date().toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
      text.textContent = { live: `Live · ${time}`, idle: `Live (idle, every ${TICK_IDLE_MS / 1000} s) · ${time}`,
                           paused: "Updates paused", offline: "Reconnecting…" }[state];
    }

    function schedule(delay) {
      clearTimeout(timer);
      dueAt = Date.now() + delay;
      timer = setTimeout(tick, delay);
    }

    async function tick() {
      if (paused) return;
      if (!document.querySelector(LIVE_SELECTOR)) {
        show("live");
        schedule(interval());
        return;
      }
      htmx.trigger(document.body, "th-tick");
      let changed = Date.now() - lastRefresh >= FORCE_REFRESH_MS;
      let state = Date.now() - lastInput > IDLE_AFTER_MS ? "idle" : "live";
      try {
        const response = await fetch(statusUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" });
        if (response.ok) {
          const current = (await response.json()).version;
          changed = changed || (version !== null && current !== version);
          version = current;
        } else {
          changed = true; // e.g. the session ended: the fragments' answers take the page to the login form
        }
      } catch (error) {
        state = "offline";
      }
      if (changed) {
        lastRefresh = Date.now();
        htmx.trigger(document.body, "th-changed");
      }
      show(state);
      schedule(interval());
    }

    function wake() {
      lastInput = Date.now();
      if (!paused && dueAt - Date.now() > TICK_ACTIVE_MS) schedule(0);
    }

    ["pointermove", "pointerdown", "keydown", "wheel", "touchstart", "focusin"].forEach((name) =>
      window.addEventListener(name, wake, { passive: true }));
    document.addEventListener("visibilitychange", () => { if (!document.hidden) wake(); });
    if (toggle) {
      toggle.addEventListener("click", () => {
        paused = !paused;
        toggle.setAttribute("aria-pressed", String(paused));
        toggle.textContent = paused ? "Resume updates" : "Pause updates";
        if (paused) {
          clearTimeout(timer);
          show("paused");
        } else {
          lastRefresh = 0; // catch up at once
          schedule(0);
        }
      });
    }
    show("live");
    schedule(TICK_ACTIVE_MS);
  }

  // Destructive buttons (data-confirm) ask first; declining leaves the page as it was. Registered
  // before the busy-label listener, which skips a submission this one prevented.
  function setUpConfirmations() {
    document.addEventListener("submit", (event) => {
      const button = event.submitter;
      if (button && button.dataset.confirm && !window.confirm(button.dataset.confirm)) event.preventDefault();
    });
  }

  // Forms whose action takes a while (submit, cancel, save) say so: the button is disabled with a
  // progress label until the next page arrives, which also stops double submissions.
  function setUpBusyForms() {
    document.addEventListener("submit", (event) => {
      const button = event.submitter;
      if (!button || !button.dataset.busyLabel || event.defaultPrevented) return;
      button.setAttribute("aria-busy", "true");
      button.dataset.label = button.textContent;
      button.textContent = button.dataset.busyLabel;
      // Disabled after the browser has read the form, so the button's own name/value still goes.
      setTimeout(() => { button.disabled = true; }, 0);
    });
    // Back/forward cache: a page shown again must not keep a button disabled.
    window.addEventListener("pageshow", () => {
      document.querySelectorAll("button[aria-busy=true]").forEach((button) => {
        button.disabled = false;
        button.removeAttribute("aria-busy");
        button.textContent = button.dataset.label;
      });
    });
  }

  // Dashboard charts: each card's figure (built by the server, as JSON beside it) is drawn with
  // the vendored plotly.js when the card arrives, and released before htmx replaces the card, so
  // a wall screen refreshing for days does not pile up plots.
  function setUpCharts() {
    if (!window.htmx) return;
    const config = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["select2d", "lasso2d"] };
    htmx.onLoad((root) => {
      if (!window.Plotly) return;
      root.querySelectorAll(".chart__plot").forEach((plot) => {
        const figure = JSON.parse(plot.parentElement.querySelector(".chart__figure").textContent);
        // A plot the page's layout grows to fill its grid cell (the wall screen) takes the cell's
        // height, not the one the server chose for a page that scrolls.
        if (getComputedStyle(plot).flexGrow !== "0") delete figure.layout.height;
        Plotly.newPlot(plot, figure.data, figure.layout, config);
      });
    });
    document.body.addEventListener("htmx:beforeSwap", (event) => {
      if (!window.Plotly) return;
      event.detail.target.querySelectorAll(".js-plotly-plot").forEach((plot) => Plotly.purge(plot));
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    setUpSubmitForm();
    setUpLogTail();
    setUpSessionExpiry();
    setUpCopyButtons();
    setUpLive();
    setUpConfirmations();
    setUpBusyForms();
    setUpCharts();
  });
})();
