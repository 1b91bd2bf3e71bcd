// Moria's results viewer: the run page's episode table (filters, live updates) and the episode
// pages' step timeline (keyboard navigation). Every string a model or an env wrote is written
// with textContent, never as HTML. The data comes from the page's own JSON script element.
"use strict";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

function readData(id) {
  const node = document.getElementById(id);
  return node ? JSON.parse(node.textContent) : null;
}

function pct(value) {
  return (100 * value).toFixed(1);
}

// ---- run page ------------------------------------------------------------------------------
const FAILED = new Set(["agent_error", "env_error", "cancelled"]);

function filtersOf(form) {
  const number = (name) => {
    const raw = form.elements[name].value;
    return raw === "" ? null : Number(raw);
  };
  return {
    failed: form.elements.failed.checked,
    truncated: form.elements.truncated.checked,
    invalid: form.elements.invalid.checked,
    min: number("min"),
    max: number("max"),
  };
}

function keep(row, f) {
  if (f.failed && !FAILED.has(row.end_reason)) return false;
  if (f.truncated && row.end_reason !== "truncated") return false;
  if (f.invalid && row.invalid_actions === 0) return false;
  const progression = 100 * row.progression;
  if (f.min !== null && progression < f.min) return false;
  if (f.max !== null && progression > f.max) return false;
  return true;
}

function renderEpisodes(state) {
  const form = document.getElementById("filters");
  const body = document.querySelector("#episodes tbody");
  const f = filtersOf(form);
  const rows = state.episodes.filter((row) => keep(row, f));
  body.replaceChildren(...rows.map((row) => el("tr", {class: row.end_reason},
    el("td", {text: row.env}), el("td", {text: row.task}),
    el("td", {}, el("a", {href: row.href, text: String(row.episode_index)})),
    el("td", {text: row.seed}), el("td", {text: row.end_reason}),
    el("td", {class: "num", text: FAILED.has(row.end_reason) ? "-" : pct(row.progression)}),
    el("td", {class: "num", text: String(row.num_steps)}),
    el("td", {class: "num", text: `${row.invalid_actions}/${row.actions}`}),
    el("td", {class: "num", text: String(row.frames)}),
    el("td", {class: "error", text: row.error}))));
  document.getElementById("shown").textContent =
    `${rows.length} of ${state.episodes.length} episodes shown`;
}

function setupRunPage() {
  let state = readData("run-data");
  const form = document.getElementById("filters");
  form.addEventListener("input", () => renderEpisodes(state));
  form.addEventListener("submit", (event) => event.preventDefault());
  renderEpisodes(state);
  const live = document.body.dataset.live === "true" && location.protocol.startsWith("http");
  if (!live) return;
  setInterval(async () => {
    try {
      const response = await fetch("state.json", {cache: "no-store"});
      if (!response.ok) return;
      const fresh = await response.json();
      if (JSON.stringify(fresh) !== JSON.stringify(state)) {
        state = fresh;
        renderEpisodes(state);
      }
    } catch (error) {
      // the server went away: keep the page as it is
    }
  }, 2000);
}

// ---- episode pages -------------------------------------------------------------------------
function block(label, text, cls) {
  if (!text) return null;
  return el("div", {class: "block " + (cls || "")}, el("div", {class: "label", text: label}),
    el("pre", {text: text}));
}

function promptBlock(prompt) {
  if (!prompt || !prompt.length) return null;
  const details = el("details", {class: "prompt"}, el("summary", {text: "prompt as sent"}));
  for (const message of prompt) {
    details.append(el("div", {class: "label", text: message.role}),
      el("pre", {text: message.content}));
  }
  return details;
}

function money(value) {
  return value === null || value === undefined ? "-" : "$" + value.toFixed(5);
}

function turnView(turn) {
  const verdict = turn.valid ? "valid" : "invalid";
  return el("section", {class: "turn " + verdict},
    el("h3", {text: turn.agent_id + (turn.model ? " · " + turn.model : "")}),
    block("observation (as the model read it)", turn.observation, "observation"),
    promptBlock(turn.prompt),
    block("reasoning", turn.reasoning, "reasoning"),
    block("completion", turn.raw_completion, "completion"),
    el("div", {class: "action"},
      el("span", {class: "label", text: "applied action "}),
      el("code", {text: turn.action}),
      el("span", {class: "verdict " + verdict, text: " " + verdict})),
    block("feedback shown to the model", turn.feedback, "feedback"),
    el("div", {class: "facts", text:
      `reward ${turn.reward}` +
      (turn.progression === null ? "" : ` · progression ${pct(turn.progression)}%`) +
      ` · tokens ${turn.input_tokens} in / ${turn.output_tokens} out · ` +
      `latency ${turn.latency_s.toFixed(2)} s · cost ${money(turn.cost_usd)}`}));
}

// The episode's progression after each step when the record has it (runs since the field),
// else the cumulative reward: {label, points: [[steps taken, value]]}.
function curveData(pane) {
  const known = pane.timeline.some((entry) => entry.turns.some((t) => t.progression !== null));
  let value = 0;
  const points = [[0, 0]];
  for (const entry of pane.timeline) {
    for (const turn of entry.turns) {
      value = known ? (turn.progression ?? value) : value + turn.reward;
    }
    if (entry.turns.length) points.push([entry.step + 1, known ? 100 * value : value]);
  }
  return {label: known ? "progression %" : "cumulative reward", points};
}

function rewardCurve(pane) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 300 60");
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("class", "curve");
  const {label, points} = curveData(pane);
  const xs = points.map((p) => p[0]);
  const ys = points.map((p) => p[1]);
  const [x0, x1] = [Math.min(...xs), Math.max(...xs, 1)];
  const [y0, y1] = [Math.min(...ys, 0), Math.max(...ys, 1e-9)];
  const sx = (x) => 5 + 290 * (x - x0) / (x1 - x0 || 1);
  const sy = (y) => 55 - 50 * (y - y0) / (y1 - y0 || 1);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", points.map((p) => `${sx(p[0])},${sy(p[1])}`).join(" "));
  line.setAttribute("class", "line");
  const marker = document.createElementNS(ns, "line");
  marker.setAttribute("class", "marker");
  marker.setAttribute("y1", "0");
  marker.setAttribute("y2", "60");
  svg.append(line, marker);
  return {svg, label, move: (step) => {
    marker.setAttribute("x1", String(sx(step)));
    marker.setAttribute("x2", String(sx(step)));
  }};
}

function paneSummary(pane) {
  const facts = el("div", {class: "summary"},
    el("div", {text: `${pane.env} · ${pane.task} · episode ${pane.episode_index} · seed ${pane.seed}`}),
    el("div", {text: `ended: ${pane.end_reason} · progression ${pct(pane.progression)}% · ` +
      `return ${pane.episode_return} · ${pane.num_steps} steps`}));
  if (pane.mission) facts.append(el("div", {class: "mission", text: "goal: " + pane.mission}));
  if (pane.error) facts.append(el("div", {class: "error", text: pane.error}));
  const stats = pane.stats || {};
  const seats = Object.keys(pane.players || {});
  if (seats.length > 1) {
    const table = el("table", {class: "seats"},
      el("thead", {}, el("tr", {}, el("th", {text: "seat"}), el("th", {text: "player"}),
        el("th", {text: "return"}), el("th", {text: "outcome"}))));
    const body = el("tbody");
    const teamOf = {};
    for (const [colour, team] of Object.entries(stats.teams || {})) {
      for (const agent of team.agents || []) teamOf[agent] = [colour, team];
    }
    for (const seat of seats) {
      const team = teamOf[seat];
      const outcome = (stats.outcome || {})[seat] || (team ? `${team[1].outcome} (${team[0]}, ` +
        `${team[1].goals_for ?? "-"}:${team[1].goals_against ?? "-"})` : "");
      body.append(el("tr", {}, el("td", {text: seat}),
        el("td", {text: String((pane.players[seat] || {}).player || "")}),
        el("td", {class: "num", text: String((stats.returns || {})[seat] ?? "-")}),
        el("td", {text: String(outcome)})));
    }
    table.append(body);
    facts.append(table);
    if (stats.collective_return !== undefined) {
      facts.append(el("div", {text: `collective return ${stats.collective_return}`}));
    }
  }
  return facts;
}

function setupEpisodePage() {
  const data = readData("episode-data");
  const container = document.getElementById("panes");
  const length = Math.max(...data.panes.map((pane) => pane.timeline.length));
  const controls = el("div", {class: "controls"});
  const previous = el("button", {type: "button", id: "previous", text: "◀ previous"});
  const next = el("button", {type: "button", id: "next", text: "next ▶"});
  const slider = el("input", {type: "range", id: "step-slider", min: "0",
    max: String(length - 1), value: "0"});
  const label = el("span", {id: "step-label"});
  controls.append(previous, slider, next, label,
    el("span", {class: "note", text: " keys: ← → (or j k), Home, End"}));
  container.before(controls);

  const views = data.panes.map((pane) => {
    const image = el("img", {class: "frame", alt: "frame"});
    const noFrame = el("p", {class: "note no-frame", text: pane.frames ? "" :
      "no frames saved for this episode (eval.save_images=true, or moria replay --frames)"});
    const curve = rewardCurve(pane);
    const turns = el("div", {class: "turns"});
    const node = el("div", {class: "pane"}, paneSummary(pane),
      el("div", {class: "label curve-label", text: curve.label}), curve.svg,
      el("div", {class: "body"}, el("div", {class: "visual"}, image, noFrame), turns));
    container.append(node);
    return {pane, image, noFrame, turns, curve};
  });

  let index = 0;
  function show(step) {
    index = Math.max(0, Math.min(length - 1, step));
    slider.value = String(index);
    label.textContent = `step ${index} of ${length - 1}`;
    for (const view of views) {
      const entry = view.pane.timeline[Math.min(index, view.pane.timeline.length - 1)];
      if (entry.frame) {
        view.image.src = entry.frame;
        view.image.hidden = false;
      } else {
        view.image.removeAttribute("src");
        view.image.hidden = true;
      }
      view.curve.move(index);
      view.turns.replaceChildren(...(entry.turns.length ? entry.turns.map(turnView) :
        [el("p", {class: "note", text: index >= view.pane.num_steps ?
          "the episode is over: the last frame shows where it ended" : "no turn recorded"})]));
    }
  }
  previous.addEventListener("click", () => show(index - 1));
  next.addEventListener("click", () => show(index + 1));
  slider.addEventListener("input", () => show(Number(slider.value)));
  document.addEventListener("keydown", (event) => {
    if (event.target instanceof HTMLInputElement && event.target.type !== "range") return;
    const moves = {ArrowRight: index + 1, ArrowLeft: index - 1, j: index + 1, k: index - 1,
      Home: 0, End: length - 1};
    if (event.key in moves) {
      event.preventDefault();
      show(moves[event.key]);
    }
  });
  show(0);
}

if (document.getElementById("run-data")) setupRunPage();
if (document.getElementById("episode-data")) setupEpisodePage();
