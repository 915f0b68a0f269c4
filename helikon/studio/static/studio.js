// helikon studio: renders the debugger's snapshots and posts its commands.
//
// Every text that comes from the run (state, conversation, events, names) is set with
// textContent, never parsed as HTML. The one markup inserted is the chart's SVG, which
// Graphviz drew from the chart and which is parsed as XML (DOMParser), not as HTML; the
// page's Content-Security-Policy runs no script but this file.
//
// The page is one browser session (the server's cookie names it): its breakpoints and its
// step are its own. A live run is driven by one browser session at a time; while another
// drives it, `driven_elsewhere` is set and this page only watches (its controls disabled).
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  let version = 0;
  let shownSvg = null;
  let chart = null;
  let latest = null;
  const chartView = helikonChartView.attach(document.getElementById("diagram"));

  // ------------------------------------------------------------ helpers

  function h(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function showError(message) {
    const box = $("error");
    box.hidden = !message;
    box.textContent = message || "";
  }

  async function call(method, path, body) {
    const init = { method: method, headers: {} };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (err) {
      showError("The studio does not answer: is `helikon studio` still running?");
      return null;
    }
    const data = await response.json();
    if (!response.ok) {
      showError(data.error || response.statusText);
      return null;
    }
    showError(null);
    render(data);
    return data;
  }

  // ------------------------------------------------------------ rendering

  function render(data) {
    if (data.version < version) return; // an older snapshot, overtaken by the stream
    version = data.version;
    latest = data;
    if (!chart || chart.digest !== data.chart.digest) setUpChart(data.chart);
    renderHeader(data);
    renderDiagram(data);
    renderBreakpoints(data.breakpoints);
    renderStep($("last-step"), data.last_step, "No step yet: press Step.");
    renderNext(data);
    renderTimeline(data);
    renderConversation(data.conversation);
    renderStored(data);
    renderCrumbs(data);
    renderPending(data);
    renderCompare(data);
    $("state").textContent = JSON.stringify(data.state, null, 2);
    $("next-input").textContent = data.next_input
      ? JSON.stringify(data.next_input.value, null, 2)
      : "none";
    if (data.error) showError(data.error);
    chartView.refit(); // the panels above the chart may have come or gone
  }

  function statusText(data) {
    if (data.driven_elsewhere) return ["watching: another browser session drives this run", "busy"];
    if (data.busy === "continue") return ["continuing…", "busy"];
    if (data.busy) return [data.busy + "…", "busy"];
    const stop = data.stop;
    if (stop && stop.reason === "breakpoint" && stop.breakpoint) {
      return ["breakpoint " + stop.breakpoint.text, "hit"];
    }
    if (stop && stop.reason === "diverged") return ["diverged: " + stop.divergence, "failed"];
    if (stop && stop.reason === "paused") return ["paused", "hit"];
    if (stop && stop.reason === "suspended") return ["suspended: waiting for approval", "hit"];
    if (data.finished) return ["finished", data.phase === "Failed" ? "failed" : "done"];
    return ["ready", "idle"];
  }

  function renderHeader(data) {
    $("agent").textContent = data.agent + " · " + data.chart.name;
    $("mode").textContent = data.mode;
    $("mode").className = "badge " + data.mode;
    $("scripted").hidden = !data.scripted; // canned answers never pass for a model's
    $("phase").textContent = data.phase;
    const total = data.recorded ? " of " + data.recorded : "";
    $("position").textContent = "step " + data.position + total;
    const [text, kind] = statusText(data);
    $("status").textContent = text;
    $("status").className = "badge " + kind;
    const others = (data.browsers || 1) - 1;
    const watched = others > 0 ? others + " other browser session(s) open" : "";
    const who = data.driving ? "you drive this run" : "";
    $("watchers").textContent = [who, watched].filter(Boolean).join(" · ");
    const idle = !data.busy && !data.driven_elsewhere;
    $("step").disabled = !idle || data.finished;
    $("continue").disabled = !idle || data.finished;
    $("back").disabled = !idle || data.position === 0;
    $("pause").disabled = data.busy !== "continue" || data.driven_elsewhere;
    $("bp-add").disabled = Boolean(data.driven_elsewhere);
    $("live").closest("label").hidden = data.mode === "replay"; // a replay has no model to call
    document.title = data.phase + " · step " + data.position + " · helikon studio";
  }

  function renderDiagram(data) {
    const drawn = data.diagram;
    const box = $("diagram");
    if (drawn.svg !== shownSvg) {
      shownSvg = drawn.svg;
      box.replaceChildren();
      box.style.height = ""; // the DOT text, or the next drawing fitted (chartView.adopt)
      $("dot").hidden = Boolean(drawn.svg);
      $("dot").textContent = drawn.dot || "";
      $("diagram-note").hidden = !drawn.note;
      $("diagram-note").textContent = drawn.note || "";
      if (drawn.svg) {
        const parsed = new DOMParser().parseFromString(drawn.svg, "image/svg+xml");
        const svg = parsed.documentElement;
        if (svg.nodeName === "svg") {
          box.appendChild(document.importNode(svg, true));
          chartView.adopt(); // fitted at first, then as the reader zoomed and panned
        }
      }
    }
    box.querySelectorAll("g.node").forEach(function (group) {
      const title = group.querySelector("title");
      const name = title ? title.textContent : "";
      group.classList.toggle("current", name === data.phase);
      group.classList.toggle("phase", chart.phases.includes(name));
      group.dataset.phase = name;
    });
  }

  function renderBreakpoints(breakpoints) {
    const list = $("breakpoints");
    list.replaceChildren();
    breakpoints.forEach(function (bp) {
      const item = h("li", "breakpoint");
      item.dataset.id = bp.id;
      item.append(h("span", "bp-id", "#" + bp.id), h("span", "bp-kind", bp.kind));
      item.append(h("code", "bp-value", bp.value));
      const remove = h("button", "small remove", "delete");
      remove.type = "button";
      remove.title = "Delete breakpoint #" + bp.id;
      remove.addEventListener("click", function () {
        call("DELETE", "/api/break/" + bp.id);
      });
      item.append(remove);
      list.append(item);
    });
    $("no-breakpoints").hidden = breakpoints.length > 0;
  }

  // The input kind is the step's own, shown in its title: a row reads [guards] / action → target.
  function rowText(row) {
    const guards = row.guards.length ? "[" + row.guards.join(" and ") + "] " : "";
    return guards + "/ " + row.action + " → " + row.target;
  }

  function renderAttempts(attempts) {
    const list = h("ol", "attempts");
    attempts.forEach(function (attempt) {
      const item = h("li", attempt.taken ? "attempt taken" : "attempt passed");
      const head = h("div", "attempt-head");
      head.append(h("span", "row-index", "row " + attempt.row.index));
      head.append(h("code", "row-text", rowText(attempt.row)));
      const verdict = h("span", "verdict", attempt.taken ? "✓ taken" : "✗");
      verdict.title = attempt.taken ? "the row the step took" : "a guard did not hold";
      head.append(verdict);
      item.append(head);
      if (attempt.guards.length) {
        const guards = h("ul", "guards");
        attempt.guards.forEach(function (guard) {
          const ok = guard.value === guard.expected;
          const entry = h("li", ok ? "guard ok" : "guard failed");
          entry.append(h("code", null, guard.name), h("span", "guard-value", String(guard.value)));
          if (!ok) entry.append(h("span", "guard-note", "needs " + guard.expected));
          guards.append(entry);
        });
        item.append(guards);
      }
      list.append(item);
    });
    return list;
  }

  function renderEvents(events) {
    const list = h("ul", "events");
    events.forEach(function (event) {
      const item = h("li", "event");
      const count = event.count > 1 ? " ×" + event.count : "";
      item.append(h("span", "event-type " + event.type, event.type + count));
      if (event.text) item.append(h("span", "event-text", event.text));
      list.append(item);
    });
    return list;
  }

  function renderEffect(effect) {
    const line = h("p", "effect-result");
    line.append(h("b", null, effect.effect), h("span", "muted", " returned "));
    line.append(h("code", null, effect.text));
    return line;
  }

  function renderStep(box, step, empty) {
    box.replaceChildren();
    if (!step) {
      box.append(h("p", "empty", empty));
      return;
    }
    const title = h("p", "step-title");
    title.append(h("span", "seq", "#" + step.seq));
    title.append(h("b", null, step.from + " → " + step.to));
    title.append(h("span", "muted", " on " + step.input_kind));
    box.append(title);
    if (step.divergence) box.append(h("p", "divergence", step.divergence));
    box.append(renderAttempts(step.match.attempts));
    if (step.effect) box.append(renderEffect(step.effect));
    if (step.events.length) box.append(renderEvents(step.events));
  }

  function renderNext(data) {
    const box = $("next-step");
    box.replaceChildren();
    if (data.busy) {
      box.append(h("p", "empty", "running…"));
    } else if (data.finished || !data.next_row) {
      box.append(h("p", "empty", data.finished ? "The run is over." : "No input is due."));
    } else {
      const title = h("p", "step-title");
      title.append(h("b", null, data.phase), h("span", "muted", " on " + data.next_input.kind));
      box.append(title, renderAttempts(data.next_row.attempts));
    }
  }

  function renderTimeline(data) {
    const list = $("timeline");
    list.replaceChildren();
    const start = h("li", "moment" + (data.position === 0 ? " here" : ""));
    const head = h("div", "moment-head");
    head.append(h("span", "seq", "#0"), h("b", null, "start in " + data.chart.initial));
    head.append(rewindButton(0, data));
    start.append(head);
    list.append(start);
    data.history.forEach(function (step, index) {
      const here = index + 1 === data.position;
      const item = h("li", "moment" + (here ? " here" : ""));
      const head = h("div", "moment-head");
      head.append(h("span", "seq", "#" + step.seq));
      head.append(h("b", null, step.from + " → " + step.to));
      head.append(rewindButton(index + 1, data), forkButton(index + 1, data));
      let detail = "on " + step.input_kind + " · row " + step.row + " / " + step.action;
      if (step.at) detail += " · at " + step.at + (step.took ? ", after " + step.took : "");
      if (step.resumed) item.append(h("p", "resumed", "⏵ resumed here"));
      item.append(head, h("div", "moment-detail muted", detail));
      if (step.divergence) item.append(h("p", "divergence", step.divergence));
      if (step.effect) item.append(renderEffect(step.effect));
      if (step.events.length) item.append(renderEvents(step.events));
      list.append(item);
    });
    const here = list.querySelector(".here");
    if (here && data.busy) here.scrollIntoView({ block: "nearest" });
  }

  function forkButton(at, data) {
    const button = h("button", "small fork-here", "fork here");
    button.type = "button";
    button.title = "Fork after step " + at + ": replace the input the next step applies";
    button.disabled = Boolean(data.busy) || data.driven_elsewhere;
    button.addEventListener("click", function () {
      $("fork-at").value = String(at);
      $("fork-value").focus();
    });
    return button;
  }

  function rewindButton(to, data) {
    const button = h("button", "small rewind", "rewind here");
    button.type = "button";
    button.title = "Go back to the run after " + to + " step(s)";
    button.disabled = Boolean(data.busy) || data.driven_elsewhere || to === data.position;
    button.addEventListener("click", function () {
      call("POST", "/api/rewind", { to: to });
    });
    return button;
  }

  function itemText(item) {
    if (item.type === "tool_call") return item.name + "(" + item.arguments + ")";
    if (item.type === "tool_result") return item.content;
    if ("content" in item) return item.content;
    return JSON.stringify(item);
  }

  function renderConversation(items) {
    const list = $("conversation");
    list.replaceChildren();
    if (!items.length) list.append(h("li", "empty", "Empty: the first step adds the input."));
    items.forEach(function (item) {
      const entry = h("li", "item " + item.type);
      entry.append(h("span", "item-type", item.type.replace("_", " ")));
      entry.append(h("span", "item-text", itemText(item)));
      list.append(entry);
    });
  }

  // ------------------------------------------------------------ forks

  function stepText(row) {
    if (!row) return "—";
    const said = row.appends
      .filter((item) => item.type === "assistant_message" || item.type === "tool_call")
      .map((item) => (item.type === "tool_call" ? item.name + "(" + item.arguments + ")" : item.content));
    return row.from + " → " + row.to + " on " + row.input + (said.length ? ": " + said.join("; ") : "");
  }

  function renderCompare(data) {
    const compare = data.compare;
    $("fork-store-label").hidden = !data.stored;
    $("compare").hidden = !compare;
    $("unfork").hidden = !compare;
    const idle = !data.busy && !data.driven_elsewhere;
    $("fork-go").disabled = !idle;
    $("unfork").disabled = !idle;
    $("compare-legend").hidden = !compare;
    if (!compare) return;
    const split = compare.diverged_at ? compare.steps[compare.diverged_at - 1] : null;
    const from = split ? (split.original || split.fork).from : null;
    $("legend-split").textContent = split
      ? "where they part: step " + compare.diverged_at + ", from " + from
      : "where they part: no step differs yet";
    $("diverged").textContent =
      "fork of " + compare.of + " after step " + compare.at + ": " +
      (compare.diverged_at ? "the paths diverge at step " + compare.diverged_at : "no step differs yet");
    const body = $("compare-rows").querySelector("tbody");
    body.replaceChildren();
    compare.steps.forEach(function (step) {
      const row = h("tr", step.differs ? "differs" : "same");
      row.append(h("td", null, "#" + step.step), h("td", null, stepText(step.original)));
      row.append(h("td", null, stepText(step.fork)));
      body.append(row);
    });
  }

  function submitFork(event) {
    event.preventDefault();
    const kind = $("fork-kind").value;
    let value = $("fork-value").value;
    if (kind === "tool") {
      try {
        value = JSON.parse(value);
      } catch (err) {
        showError("tool results are a JSON object of call id to result text");
        return;
      }
    }
    const lines = $("fork-then").value.split("\n").filter((line) => line.trim());
    const body = { at: Number($("fork-at").value), kind: kind, value: value };
    if (latest && latest.stored && $("fork-store").checked) {
      call("POST", "/api/fork_stored", body).then(function (forked) {
        if (forked) window.location.reload(); // the page starts over on the stored fork
      });
      return;
    }
    if (lines.length) body.then = lines;
    call("POST", "/api/fork", body);
  }

  // ------------------------------------------------------------ approvals

  // A stored run's pending calls are the store's: deciding resumes the stored run (with the
  // agent of --chart), and the page then follows its records. `decide_refused` says why the
  // buttons are off here (a replay of a trace, a store without --chart).
  function renderPending(data) {
    const pending = data.pending || [];
    $("approvals").hidden = pending.length === 0;
    const stored = data.stored && data.breadcrumb.length === 1 && !data.compare;
    if (stored) {
      const runId = h("code", "run-id", data.stored.run_id);
      $("approvals-title").replaceChildren("Stored run ", runId, " waits for approval");
    } else {
      $("approvals-title").textContent = "Waiting for approval";
    }
    $("approvals-note").hidden = !data.decide_refused;
    $("approvals-note").textContent = data.decide_refused || "";
    const body = $("pending").querySelector("tbody");
    body.replaceChildren();
    const idle = !data.busy && !data.driven_elsewhere && !data.decide_refused;
    pending.forEach(function (request) {
      const row = h("tr", "pending-call");
      row.dataset.callId = request.call_id;
      row.append(h("td", "mono", request.tool), h("td", "mono", request.arguments));
      row.append(h("td", "muted", request.asked_by));
      const cell = h("td");
      [
        ["approve", true],
        ["reject", false],
      ].forEach(function ([label, approved]) {
        const button = h("button", "small " + label, label[0].toUpperCase() + label.slice(1));
        button.type = "button";
        button.disabled = !idle;
        button.title = data.decide_refused
          ? data.decide_refused
          : label + " call " + request.call_id + " (only this one; the others wait)";
        button.addEventListener("click", function () {
          const decision = {
            call_id: request.call_id,
            arguments_hash: request.arguments_hash,
            approved: approved,
            seq: request.seq,
          };
          call("POST", "/api/decide", { decisions: [decision] });
        });
        cell.append(button);
      });
      row.append(cell);
      body.append(row);
    });
  }

  // ------------------------------------------------------------ nested runs

  function renderCrumbs(data) {
    const crumbs = data.breadcrumb || [];
    const nested = data.nested_runs || [];
    $("crumbs").hidden = crumbs.length < 2 && nested.length === 0;
    const list = $("breadcrumb");
    list.replaceChildren();
    crumbs.forEach(function (crumb, index) {
      const item = h("li", index === crumbs.length - 1 ? "crumb here" : "crumb");
      const label = crumb.agent + " · " + crumb.run_id;
      if (index === crumbs.length - 1) {
        item.append(h("b", null, label));
      } else {
        const up = h("button", "small crumb-link", label);
        up.type = "button";
        up.title = "Back to run " + crumb.run_id;
        up.disabled = Boolean(data.busy) || data.driven_elsewhere;
        up.addEventListener("click", () => call("POST", "/api/step_out", { to: index }));
        item.append(up);
      }
      list.append(item);
    });
    const box = $("nested");
    box.replaceChildren();
    nested.forEach(function (runId) {
      const open = h("button", "small step-into", "step into " + runId);
      open.type = "button";
      open.dataset.runId = runId;
      open.disabled = Boolean(data.busy) || data.driven_elsewhere;
      open.addEventListener("click", () => call("POST", "/api/step_in", { run_id: runId }));
      box.append(open);
    });
    const idle = !data.busy && !data.driven_elsewhere;
    $("step-in").disabled = !idle || nested.length === 0;
    $("step-out").disabled = !idle || crumbs.length < 2;
    $("toggle-break").disabled = !idle;
  }

  function toggleBreak() {
    if (!latest) return;
    const found = latest.breakpoints.find((b) => b.kind === "phase" && b.value === latest.phase);
    if (found) call("DELETE", "/api/break/" + found.id);
    else call("POST", "/api/break", { kind: "phase", value: latest.phase });
  }

  // ------------------------------------------------------------ a run store's runs

  let runsShown = false;

  function renderStored(data) {
    const stored = data.stored;
    $("runs-panel").hidden = !stored;
    if (!stored) return;
    const badge = $("following");
    badge.hidden = false;
    badge.textContent = stored.following ? "following: the run is " + stored.status : stored.status;
    badge.className = "badge " + (stored.following ? "busy" : "idle");
    if (!runsShown) {
      runsShown = true;
      loadRuns();
      window.setInterval(loadRuns, 2000);
    }
  }

  async function loadRuns() {
    let response;
    try {
      response = await fetch("/api/runs");
    } catch (err) {
      return;
    }
    if (!response.ok) return;
    const data = await response.json();
    const body = $("runs").querySelector("tbody");
    body.replaceChildren();
    const current = latest ? latest.run_id : null;
    data.runs.forEach(function (run) {
      const row = h("tr", run.run_id === current ? "run current" : "run");
      row.dataset.runId = run.run_id;
      const forked = run.forked_from ? " (fork of " + run.forked_from + " at " + run.forked_at + ")" : "";
      row.append(h("td", "mono", run.run_id + forked), h("td", null, run.agent));
      row.append(h("td", "status " + run.status, run.status), h("td", "mono", run.phase));
      row.append(h("td", null, run.turns));
      const cell = h("td");
      const open = h("button", "small open", run.run_id === current ? "open (shown)" : "open");
      open.type = "button";
      open.title = "Replay run " + run.run_id;
      open.addEventListener("click", async function () {
        const opened = await call("POST", "/api/open", { run_id: run.run_id });
        if (opened) window.location.reload(); // the page starts over on the run's chart
      });
      cell.append(open);
      row.append(cell);
      body.append(row);
    });
  }

  // ------------------------------------------------------------ the breakpoint form

  function setUpChart(facts) {
    shownSvg = null; // another chart: draw it afresh
    $("tool-names").replaceChildren();
    chart = {
      digest: facts.digest,
      phases: facts.phases.map((p) => p.name),
      guards: facts.guards,
      events: facts.events,
      tools: facts.tools,
    };
    const names = $("tool-names");
    facts.tools.forEach((name) => names.append(h("option", null, name)));
    fillValues();
  }

  function fillValues() {
    const kind = $("bp-kind").value;
    const select = $("bp-value");
    const tool = kind === "tool";
    select.hidden = tool;
    $("bp-tool").hidden = !tool;
    if (tool) return;
    const values = { phase: chart.phases, guard: chart.guards, event: chart.events }[kind];
    select.replaceChildren();
    values.forEach(function (value) {
      const option = h("option", null, value);
      option.value = value;
      select.append(option);
    });
  }

  function breakOnPhase(name) {
    $("bp-kind").value = "phase";
    fillValues();
    $("bp-value").value = name;
    $("bp-value").focus();
  }

  // ------------------------------------------------------------ wiring

  function post(path, body) {
    return function () {
      return call("POST", path, body ? body() : undefined);
    };
  }

  $("step").addEventListener("click", post("/api/step", () => ({ live: $("live").checked })));
  $("continue").addEventListener("click", post("/api/continue"));
  $("pause").addEventListener("click", post("/api/pause"));
  $("back").addEventListener("click", post("/api/back", () => ({ steps: 1 })));
  $("fork-form").addEventListener("submit", submitFork);
  $("unfork").addEventListener("click", post("/api/unfork"));
  $("step-in").addEventListener("click", post("/api/step_in"));
  $("step-out").addEventListener("click", post("/api/step_out"));
  $("toggle-break").addEventListener("click", toggleBreak);
  $("bp-kind").addEventListener("change", fillValues);
  $("break-form").addEventListener("submit", function (event) {
    event.preventDefault();
    const kind = $("bp-kind").value;
    const value = kind === "tool" ? $("bp-tool").value.trim() : $("bp-value").value;
    call("POST", "/api/break", { kind: kind, value: value });
  });
  helikonChartView.buttons(document, () => [chartView]);
  $("diagram").addEventListener("click", function (event) {
    const group = event.target.closest("g.node.phase");
    if (group) breakOnPhase(group.dataset.phase);
  });
  document.addEventListener("keydown", function (event) {
    if (event.target.closest("input, select, textarea") || event.ctrlKey || event.metaKey) return;
    const button = {
      s: "step",
      c: "continue",
      b: "back",
      p: "pause",
      t: "toggle-break",
      i: "step-in",
      o: "step-out",
    }[event.key];
    if (button && !$(button).disabled) $(button).click();
  });

  const stream = new EventSource("/api/events");
  stream.addEventListener("state", (event) => render(JSON.parse(event.data)));
  call("GET", "/api/state");
  window.helikonStudio = { latest: () => latest, loadRuns: loadRuns };
})();
