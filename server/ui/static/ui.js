// tilec's web page: fills the server-rendered shells from the /v1/ui JSON routes.
// The token a visitor pastes stays in this tab's sessionStorage and travels only in the Authorization
// header of fetch(): never in a URL, a cookie or the page. Every value is put in with textContent.
"use strict";

(() => {
  const TOKEN_KEY = "tilec.token";
  const PAGE = 50;
  const POLL_MS = 1000;
  const ACTIVE = new Set(["queued", "running"]);
  const body = document.body;
  const ROOT = body.dataset.root || "";
  const main = document.getElementById("main");
  const KEY = main.dataset.key || "";
  const $ = (sel, from = document) => from.querySelector(sel);

  class HttpError extends Error {
    constructor(status, data) {
      const detail = data && typeof data === "object" ? data.detail : String(data || "");
      super(detail || `HTTP ${status}`);
      this.status = status;
    }
  }

  // ---- the token and the API ----

  const token = () => sessionStorage.getItem(TOKEN_KEY) || "";

  async function api(path, { method = "GET", params = {}, text = false } = {}) {
    const url = new URL(ROOT + path, location.origin);
    for (const [k, v] of Object.entries(params)) {
      if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
    }
    const headers = { Accept: text ? "text/plain" : "application/json" };
    if (token()) headers.Authorization = `Bearer ${token()}`;
    const r = await fetch(url, { method, headers, credentials: "omit", cache: "no-store", redirect: "error" });
    const isJson = (r.headers.get("content-type") || "").includes("json");
    const data = isJson ? await r.json() : await r.text();
    if (!r.ok) throw new HttpError(r.status, data);
    return data;
  }

  function notice(text) {
    const n = $("#notice");
    n.textContent = text || "";
    n.hidden = !text;
  }

  function explain(err) {
    if (err.status === 401) {
      return token()
        ? `The service refused this token (${err.message}). Paste a valid one above.`
        : "This service needs a token: paste one with the read scope above (it is kept in this tab only).";
    }
    if (err.status === 403) return `This token may not do that: ${err.message}.`;
    if (err.status === 404) return `Not found: ${err.message}.`;
    return `Could not load: ${err.message}`;
  }

  function setupTokenForm(who) {
    const form = $("#token-form");
    const input = $("#token-input");
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const value = input.value.trim();
      input.value = "";
      if (value) sessionStorage.setItem(TOKEN_KEY, value);
      location.reload();
    });
    $("#token-forget").addEventListener("click", () => {
      sessionStorage.removeItem(TOKEN_KEY);
      location.reload();
    });
    const state = $("#token-state");
    if (who === null) state.textContent = token() ? "token refused" : "no token";
    else if (!who.auth) state.textContent = "auth off: no token needed";
    else state.textContent = `token #${who.token_id}: ${who.scopes.join(", ")}`;
  }

  // ---- small DOM helpers ----

  function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") e.textContent = v;
      else if (k === "class") e.className = v;
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) {
      if (c !== undefined && c !== null) e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  const td = (...children) => el("td", {}, ...children);
  const link = (href, text, attrs = {}) => el("a", { href: ROOT + href, ...attrs }, text);
  const enc = encodeURIComponent;
  const short = (key) => el("code", { title: key }, key.slice(0, 12));

  function when(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    return el("time", { datetime: d.toISOString() }, d.toISOString().slice(0, 19).replace("T", " ") + "Z");
  }

  function configLabel(config) {
    if (!config) return "(unreadable)";
    const kw = Object.entries(config.kwargs || {}).map(([k, v]) => `${k}=${v}`);
    if (config.num_warps != null) kw.push(`warps=${config.num_warps}`);
    if (config.num_stages != null) kw.push(`stages=${config.num_stages}`);
    return kw.join(" ") || "(default)";
  }

  const ms = (v) => (v == null ? "" : Number(v).toPrecision(4));

  function bytes(n) {
    if (n == null) return "";
    return n < 1024 ? `${n} B` : `${(n / 1024).toFixed(1)} KiB`;
  }

  function fillRows(table, rows, empty, columns) {
    const tbody = $("tbody", table);
    if (!rows.length) {
      tbody.replaceChildren(el("tr", {}, el("td", { colspan: columns, class: "empty" }, empty)));
      return;
    }
    tbody.replaceChildren(...rows);
  }

  function codeLines(list, text) {
    const lines = (text || "").replace(/\n$/, "").split("\n");
    list.replaceChildren(...lines.map((line) => el("li", {}, line)));
  }

  function facts(dl, pairs) {
    dl.replaceChildren();
    for (const [term, value] of pairs) {
      if (value === undefined || value === null || value === "") continue;
      dl.append(el("dt", {}, term), el("dd", {}, value));
    }
  }

  const params = () => new URLSearchParams(location.search);

  function filters(names) {
    const p = params();
    const out = {};
    for (const name of names) {
      const value = p.get(name) || "";
      out[name] = value;
      const input = $(`.filters [name="${name}"]`);
      if (input) input.value = value;
    }
    const offset = parseInt(p.get("offset") || "0", 10);
    out.offset = Number.isFinite(offset) && offset > 0 ? offset : 0;
    return out;
  }

  function pager(nav, page, count) {
    nav.replaceChildren();
    const at = (offset) => {
      const p = params();
      if (offset) p.set("offset", offset);
      else p.delete("offset");
      const q = p.toString();
      return location.pathname + (q ? `?${q}` : "");
    };
    if (page.offset > 0) nav.append(el("a", { href: at(Math.max(0, page.offset - page.limit)), rel: "prev" }, "← Newer"));
    const first = count ? page.offset + 1 : 0;
    nav.append(el("span", {}, `rows ${first}–${page.offset + count}`));
    if (page.more) nav.append(el("a", { href: at(page.offset + page.limit), rel: "next" }, "Older →"));
    if (page.hidden) nav.append(el("span", { class: "note" }, `${page.hidden} unreadable row(s) left out`));
  }

  async function fillChoices() {
    try {
      const f = await api("/v1/ui/facets");
      const t = $("#targets");
      if (t) t.replaceChildren(...f.targets.map((v) => el("option", { value: v })));
      const g = $("#gpus");
      if (g) g.replaceChildren(...f.gpu_models.map((v) => el("option", { value: v })));
    } catch (_err) {
      // the choices are a convenience: the filters take typed values as well
    }
  }

  const ready = (node) => {
    node.dataset.ready = "true";
  };

  // ---- views ----

  async function kernelsView() {
    const q = filters(["name", "target"]);
    fillChoices();
    const page = await api("/v1/ui/kernels", { params: { ...q, limit: PAGE } });
    const rows = page.items.map((k) =>
      el("tr", { "data-key": k.key },
        td(link(`/ui/kernels/${enc(k.key)}`, k.name)),
        td(short(k.key)),
        td(k.kind),
        td(when(k.created_at)),
        td(submitter(k)),
        td(Object.entries(k.artifacts).map(([t, n]) => `${t} ×${n}`).join(", ") || "none")));
    fillRows($("#kernels"), rows, "No kernel matches.", 6);
    pager($(".pager"), page, page.items.length);
    ready($("#kernels-box"));
  }

  function submitter(k) {
    if (k.submitted_by == null) return "anonymous";
    return k.submitter ? `token #${k.submitted_by} (${k.submitter})` : `token #${k.submitted_by}`;
  }

  function resources(a) {
    const spills = a.spill_stores == null && a.spill_loads == null ? "" : `${a.spill_stores ?? 0} / ${a.spill_loads ?? 0} B`;
    return [a.registers ?? "", spills, a.shared_bytes == null ? "" : bytes(a.shared_bytes)];
  }

  // "x_ptr:*fp32,y_ptr:*fp32,n:i32" has no space to wrap at and made the table twice the page's width:
  // the types alone, wrapping after each comma, the whole text on hover (and on the result's own page)
  function dtypesCell(dtypes) {
    if (!dtypes) return "";
    const types = dtypes.split(",").map((p) => p.slice(p.lastIndexOf(":") + 1));
    return el("span", { class: "dtypes", title: dtypes }, types.join(", "));
  }

  // a tuning result: on the tuning page with its kernel and when it improved, on a kernel's page without
  function resultRow(r, withKernel) {
    return el("tr", { "data-key": r.tuning_key },
      withKernel ? td(link(`/ui/kernels/${enc(r.kernel_key)}`, r.kernel_name)) : null,
      td(link(`/ui/tuning/${enc(r.tuning_key)}`, r.key || "(no key)", { "aria-label": `tuning result ${r.kernel_name} ${r.key} ${r.target}` })),
      td(dtypesCell(r.dtypes)),
      td(r.target),
      td(configLabel(r.best_config), r.decision && r.decision.rule === "pinned" ? el("strong", { class: "pinned" }, " (pinned)") : ""),
      td(`${ms(r.best_time_ms)} ms`),
      td(r.trials),
      td(r.gpu_models.join(", ") || "cpu"),
      withKernel ? td(when(r.updated_at)) : null);
  }

  async function kernelView() {
    const k = await api(`/v1/ui/kernels/${enc(KEY)}`);
    document.title = `${k.name} · Kernel · tilec`;
    $("#title").textContent = `Kernel ${k.name}`;
    const params = k.params.map((p) => (p.constexpr ? `${p.name}: constexpr` : p.name)).join(", ");
    const configs = k.autotune && k.autotune.configs ? `${k.autotune.configs.length} configs, key [${(k.autotune.key || []).join(", ")}]` : "";
    facts($("#facts"), [
      ["Key", el("code", {}, k.key)],
      ["Kind", k.kind],
      ["Submitted", when(k.created_at)],
      ["By", submitter(k)],
      ["Parameters", params],
      ["Autotune", configs],
    ]);
    codeLines($("#source"), k.source || "(submitted as tile IR)");
    const irShown = kernelIr(k);
    const arts = k.artifact_rows.map((a) =>
      el("tr", { "data-artifact": a.id },
        td(a.target),
        td(configLabel(a.config)),
        td(bytes(a.size)),
        ...resources(a).map((v) => td(v)),
        td(el("code", { title: a.compiler_version }, a.compiler_version.slice(0, 12))),
        td(when(a.created_at)),
        td(link(`/ui/artifacts/${enc(a.id)}`, a.target.startsWith("cuda") ? "PTX, passes" : "LLVM IR, passes",
          { "aria-label": `code of the ${a.target} build ${a.id.slice(0, 12)}` }))));
    fillRows($("#artifacts"), arts, "No artifact yet.", 9);
    if (k.artifacts_more) $("#artifacts").after(el("p", { class: "note" }, "Only the first 500 artifacts are listed."));
    fillRows($("#results"), k.results.map((r) => resultRow(r, false)), "No tuning result yet.", 7);
    ready($("#detail"));
    await irShown;
  }

  // A kernel's tile IR as the frontend builds it (it reads the source with `ast` and runs none of it). A source
  // kernel's IR depends on its specialisation (argument types, constexprs): the one of a build of it, named
  // in the note. When that build kept no per-pass dumps, they are computed (a submit token's request), and
  // the first is this IR.
  async function kernelIr(k) {
    const note = $("#ir-note");
    const list = $("#ir");
    const say = (...parts) => {
      note.replaceChildren(...parts);
      note.hidden = false;
    };
    const from = k.ir_from;
    const build = from && link(`/ui/artifacts/${enc(from.artifact_id)}`, `the ${from.target} build ${from.artifact_id.slice(0, 12)}`);
    const spec = from && [
      Object.entries(from.signature).map(([n, t]) => `${n}: ${t}`).join(", "),
      Object.entries(from.constexprs).map(([n, v]) => `${n}=${v}`).join(" "),
    ].filter(Boolean).join("; ");
    if (from) say("As the frontend builds it for ", build, spec ? ` (${spec})` : "", ": open that build for its IR after each pass.");
    let ir = k.ir;
    if (!ir && from) {
      say("Building the tile IR for ", build, spec ? ` (${spec})` : "", "…");
      try {
        const dumps = await api(`/v1/ui/artifacts/${enc(from.artifact_id)}/passes`);
        ir = dumps.passes[0].ir;
        say("As the frontend builds it for ", build, spec ? ` (${spec})` : "", ": open that build for its IR after each pass.");
      } catch (err) {
        list.hidden = true;
        if (err.status === 403) say("Its tile IR is built per specialisation, here that of ", build, ": building it needs a token with the submit scope (the compile pool runs the frontend on the stored source).");
        else say(`Its tile IR for that build could not be had. ${explain(err)}`);
        return;
      }
    }
    if (!ir) {
      list.hidden = true;
      say("Its tile IR is built per specialisation (argument types, constexprs), and it has no build yet: compile it once and its IR shows here.");
      return;
    }
    if (!from) note.hidden = true;
    list.hidden = false;
    codeLines(list, ir);
  }

  async function artifactView() {
    const a = await api(`/v1/ui/artifacts/${enc(KEY)}`);
    document.title = `${a.kernel_name} on ${a.target} · Artifact · tilec`;
    $("#title").textContent = `${a.kernel_name} on ${a.target}`;
    const [registers, spills, shared] = resources(a);
    facts($("#facts"), [
      ["Kernel", link(`/ui/kernels/${enc(a.kernel_key)}`, a.kernel_name)],
      ["Artifact", el("code", {}, a.id)],
      ["Target", a.target],
      ["Config", configLabel(a.config)],
      // the constexprs the build was specialised on (a plain build's BLOCK_SIZE=1024 is not in its config)
      ["Constexprs", a.spec && a.spec.constexprs ? Object.entries(a.spec.constexprs).map(([n, v]) => `${n}=${v}`).join(" ") || "none" : ""],
      ["Signature", a.spec && a.spec.signature ? Object.entries(a.spec.signature).map(([n, t]) => `${n}: ${t}`).join(", ") : ""],
      ["Size", `${bytes(a.size)} (${a.emit})`],
      ["sha256", el("code", {}, a.sha256)],
      ["Registers", registers],
      ["Spills (stores / loads)", spills],
      ["Shared memory", shared],
      ["Threads per block", a.threads_per_block],
      ["Compiler version", el("code", {}, a.compiler_version)],
      ["Built", when(a.created_at)],
    ]);
    const buttons = [...document.querySelectorAll(".tabs button")];
    for (const b of buttons) {
      const form = b.dataset.form;
      if (form !== "passes" && !a.forms.includes(form)) b.hidden = true;
      b.addEventListener("click", () => show(form));
    }
    // The strip, the highlighted pass and the IR shown are one state: `shown` counts the loads, and a load that
    // another click overtook draws nothing; the strip is emptied before a load, so neither a failed load nor
    // a slow one leaves an earlier strip's highlight over other code. The pass picked is kept in the URL's
    // fragment (#pass-N): a reload shows that pass again; another artifact's page starts at the last pass.
    let shown = 0;
    let dumps = null;
    let picked = null; // the pass picked on this page, kept when another tab is shown and this one again
    let loading = 0; // loads in flight: the code box is aria-busy until the last one has ended
    async function show(form) {
      const mine = ++shown;
      loading += 1;
      $("#code").setAttribute("aria-busy", "true");
      try {
        await load(form, mine);
      } finally {
        loading -= 1;
        if (!loading) $("#code").setAttribute("aria-busy", "false");
      }
    }
    async function load(form, mine) {
      for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.form === form));
      const note = $("#code-note");
      const nav = $("#passes-nav");
      nav.replaceChildren();
      nav.hidden = form !== "passes";
      $("#code").replaceChildren();
      delete $("#code").dataset.pass;
      if (form !== "passes") history.replaceState(null, "", location.pathname + location.search);
      note.textContent = form === "passes" ? "Running the passes again on the stored source…" : "Loading…";
      try {
        if (form === "passes") {
          dumps = dumps || (await api(`/v1/ui/artifacts/${enc(KEY)}/passes`)).passes;
          if (mine !== shown) return;
          showPasses(dumps, wantedPass(dumps.length));
          note.textContent = "The tile IR as the frontend builds it, then after each pass (recomputed from the stored source, spec and config).";
        } else {
          const text = await api(`/v1/artifacts/${enc(KEY)}/${form}`, { text: true });
          if (mine !== shown) return;
          codeLines($("#code"), text);
          note.textContent = "";
        }
      } catch (err) {
        if (mine === shown) note.textContent = explain(err);
      }
    }
    function wantedPass(count) {
      const m = /^#pass-(\d+)$/.exec(location.hash);
      const i = picked ?? (m ? parseInt(m[1], 10) : count - 1);
      return i >= 0 && i < count ? i : count - 1;
    }
    function showPasses(passes, first) {
      const nav = $("#passes-nav");
      const pick = (i) => {
        for (const b of nav.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b.dataset.index === String(i)));
        codeLines($("#code"), passes[i].ir);
        $("#code").dataset.pass = String(i);
        picked = i;
        history.replaceState(null, "", `${location.pathname}${location.search}#pass-${i}`);
      };
      nav.replaceChildren(...passes.map((p, i) => {
        const same = i > 0 && passes[i - 1].ir === p.ir;
        const b = el("button", { type: "button", "data-index": i, "aria-pressed": "false", class: same ? "same" : "" },
          `${i}. ${p.name}${same ? " (no change)" : ""}`);
        b.addEventListener("click", () => pick(i));
        return b;
      }));
      pick(first);
    }
    ready($("#detail"));
    const first = /^#pass-\d+$/.test(location.hash) ? "passes" : a.forms.includes("ptx") ? "ptx" : a.forms.includes("llir") ? "llir" : "passes";
    await show(first);
  }

  async function tuningView() {
    const q = filters(["name", "target", "gpu"]);
    fillChoices();
    const page = await api("/v1/ui/tuning-results", { params: { ...q, limit: PAGE } });
    fillRows($("#results"), page.items.map((r) => resultRow(r, true)), "No tuning result matches.", 9);
    pager($(".pager"), page, page.items.length);
    ready($("#results-box"));
    const slower = await api("/v1/tuning-history/slower", { params: { target: q.target } });
    fillRows($("#slower"), slower.map((s) => el("tr", { "data-key": s.tuning_key },
      td(link(`/ui/tuning/${enc(s.tuning_key)}`, s.tuning_key.slice(0, 12))), td(el("code", {}, s.key || "(none)")),
      td(s.target), td(s.gpu_model || "cpu"), td(ms(s.before_ms)), td(ms(s.after_ms)),
      td(short(s.before_version), " → ", short(s.after_version)))), "No key got slower.", 7);
    ready($("#slower-box"));
  }

  function decisionText(d) {
    if (!d) return "measured";
    if (d.rule === "pinned") return `pinned by token #${d.pinned_by ?? "?"}${d.reason ? `: ${d.reason}` : ""} (measured best: ${configLabel(d.measured)})`;
    if (d.rule === "tie") return `tie: ${d.tied.length} configs' intervals overlap the fastest's; chosen by ${d.by}`;
    return d.runner_up_ms == null ? "measured (one config)" : `measured: clear of the runner-up (${ms(d.runner_up_ms)} ms)`;
  }

  function drawHistory(points) {
    const box = $("#history");
    box.replaceChildren();
    if (!points.length) {
      box.append(el("p", { class: "note" }, "No tune recorded for this key yet."));
      return;
    }
    if (!window.Plot) {
      box.append(el("p", { class: "note" }, "The chart library did not load."));
      return;
    }
    const data = points.map((p) => ({ when: new Date(p.recorded_at), time: p.best_time_ms,
      series: `${p.gpu_model || "cpu"} · ${p.compiler_version.slice(0, 8)}`, config: configLabel(p.config) }));
    box.append(window.Plot.plot({
      width: Math.max(300, box.clientWidth || 600), height: 220, marginLeft: 60,
      style: { fontSize: "12px", background: "transparent" },
      x: { label: "tuned at", type: "utc" }, y: { label: "best time (ms)", grid: true, zero: true },
      color: { legend: true },
      ariaLabel: `best time per tune, ${data.length} tunes`,
      marks: [
        window.Plot.line(data, { x: "when", y: "time", stroke: "series" }),
        window.Plot.dot(data, { x: "when", y: "time", fill: "series", r: 4,
          title: (d) => `${d.series}: ${ms(d.time)} ms (${d.config})` }),
      ],
    }));
  }

  const KINDS = ["best", "timed", "stopped early"];
  const COLORS = ["#c2410c", "#2563eb", "#9ca3af"];

  function chartData(trials) {
    return trials.map((t) => ({
      label: configLabel(t.config),
      time: t.time_ms,
      lo: t.lo_ms ?? t.time_ms,
      hi: t.hi_ms ?? t.time_ms,
      kind: t.best ? "best" : t.status === "stopped" ? "stopped early" : "timed",
      gpu: t.gpu_model || "cpu",
    }));
  }

  function drawChart(trials) {
    const box = $("#chart");
    box.replaceChildren();
    if (!trials.length) {
      box.append(el("p", { class: "note" }, "No trial to chart."));
      return;
    }
    if (!window.Plot) {
      box.append(el("p", { class: "note" }, "The chart library did not load; the table below has every trial."));
      return;
    }
    const data = chartData(trials);
    const width = Math.max(300, box.clientWidth || 600);
    const longest = Math.max(...data.map((d) => d.label.length));
    const chart = window.Plot.plot({
      width,
      height: 50 + 24 * data.length,
      marginLeft: Math.min(Math.round(width * 0.6), 24 + 7.5 * longest),
      marginRight: 48,
      style: { fontSize: "12px", background: "transparent" },
      x: { label: "time (ms), median and interval", grid: true, nice: true },
      y: { label: null, domain: data.map((d) => d.label) },
      color: { domain: KINDS, range: COLORS, legend: true },
      ariaLabel: `time per config, ${data.length} trials`,
      marks: [
        window.Plot.ruleY(data, { y: "label", x1: "lo", x2: "hi", stroke: "kind", strokeWidth: 2 }),
        window.Plot.dot(data, {
          y: "label", x: "time", fill: "kind", r: 5, stroke: "white",
          title: (d) => `${d.label}: ${ms(d.time)} ms [${ms(d.lo)}, ${ms(d.hi)}] on ${d.gpu}`,
        }),
        window.Plot.text(data.filter((d) => d.kind === "best"), {
          y: "label", x: "hi", text: () => "★ best", dx: 8, textAnchor: "start", fontWeight: "bold", fill: COLORS[0],
        }),
      ],
    });
    box.append(chart);
  }

  async function resultView() {
    const r = await api(`/v1/ui/tuning-results/${enc(KEY)}`);
    document.title = `${r.kernel_name} ${r.key} · Tuning result · tilec`;
    $("#title").textContent = `${r.kernel_name} on ${r.target}`;
    facts($("#facts"), [
      ["Kernel", link(`/ui/kernels/${enc(r.kernel_key)}`, r.kernel_name)],
      ["Tuning key", el("code", {}, r.tuning_key)],
      ["Key values", r.key || "(none)"],
      ["Dtypes", r.dtypes],
      ["Target", r.target],
      ["Best config", configLabel(r.best_config)],
      ["Decision", el("span", { id: "decision", "data-rule": (r.decision && r.decision.rule) || "measured" }, decisionText(r.decision))],
      ["Best time", `${ms(r.best_time_ms)} ms`],
      ["Best build", r.artifact_id ? link(`/ui/artifacts/${enc(r.artifact_id)}`, r.artifact_id.slice(0, 12)) : ""],
      ["GPU models", r.gpu_models.join(", ") || "cpu"],
      ["Updated", when(r.updated_at)],
    ]);
    const rows = r.trial_rows.map((t) =>
      el("tr", { class: t.best ? "best" : "", "data-trial": t.id },
        td(configLabel(t.config), t.best ? el("strong", {}, " ★ best") : ""),
        td(t.status),
        td(ms(t.time_ms)),
        td(t.lo_ms == null ? "" : `${ms(t.lo_ms)} – ${ms(t.hi_ms)}`),
        td(t.reps ?? ""),
        td(t.gpu_model || "cpu"),
        td(t.driver_version || ""),
        td(t.sm_clock_mhz == null ? "" : `${t.sm_clock_mhz} / ${t.mem_clock_mhz ?? "?"}`),
        td(when(t.created_at))));
    fillRows($("#trials"), rows, "No trial recorded.", 9);
    // a compile error's reason is "file:line:col: message", the source line and a caret under it: kept as
    // lines, in a monospace block, so the caret points at its column
    const reason = (text) => (text && text.includes("\n") ? el("pre", { class: "reason" }, text) : text || "");
    const untimed = r.untimed.map((u) => el("tr", {}, td(configLabel(u.config)), td(u.status), td(reason(u.reason))));
    fillRows($("#untimed"), untimed, "None: every config the newest job tried was timed.", 3);
    $("#untimed-note").textContent = r.job_id ? `From tune job #${r.job_id}.` : "No tune job ran for this key (its trials were published by a client).";
    const points = await api(`/v1/tuning-history/${enc(KEY)}`);
    const redraw = () => {
      drawChart(r.trial_rows);
      drawHistory(points);
    };
    redraw();
    let pending = 0;
    window.addEventListener("resize", () => {
      clearTimeout(pending);
      pending = setTimeout(redraw, 200);
    });
    ready($("#detail"));
  }

  // a queued job whose target no live worker serves waits until one starts: said, with when one was last seen
  function noWorker(j, full) {
    const start = `tilec worker --target ${j.target}`;
    if (!full) {
      const last = j.worker_last_seen ? ["last seen ", when(j.worker_last_seen)] : ["none seen yet"];
      return el("span", { class: "no-worker", title: `It waits queued until one starts: ${start}, on a machine with that GPU` },
        `No worker serves ${j.target}`, el("br"), el("small", {}, ...last));
    }
    const seen = j.worker_last_seen ? ["a worker of it was last seen ", when(j.worker_last_seen)] : ["none was seen yet"];
    return [`No worker serves ${j.target}: this job waits queued until one starts (`, ...seen, "). Start one with ",
      el("code", {}, start), " on a machine with that GPU."];
  }

  function jobsView(who) {
    const q = filters(["state", "name", "target"]);
    fillChoices();
    const canCancel = !who.auth || who.scopes.includes("submit");
    if (!canCancel) $("#live-note").before(el("p", { class: "note", id: "cancel-note" }, "Cancelling a job needs a token with the submit scope."));
    const tbody = $("#jobs tbody");
    let timer = 0;

    function row(j) {
      const progress = el("progress", { max: Math.max(j.trials_planned, 1), value: j.trials_done, "aria-label": `job ${j.id}: ${j.trials_done} of ${j.trials_planned} configs` });
      const action = canCancel && ACTIVE.has(j.state)
        ? el("button", { type: "button", class: "cancel", "data-job": j.id, "aria-label": `Cancel job ${j.id}` }, "Cancel")
        : "";
      // a done job links to the tuning result it wrote; the key values tell jobs of one kernel apart
      const bestText = j.best_time_ms == null ? "" : `${ms(j.best_time_ms)} ms (${configLabel(j.best_config)})`;
      const best = bestText && j.state === "done"
        ? link(`/ui/tuning/${enc(j.tuning_key)}`, bestText, { class: "result", "aria-label": `tuning result of job ${j.id}` })
        : bestText;
      return el("tr", { "data-job": j.id, "data-state": j.state },
        td(link(`/ui/jobs/${enc(j.id)}`, `#${j.id}`, { "aria-label": `tune job ${j.id}` })),
        td(link(`/ui/kernels/${enc(j.kernel_key)}`, j.kernel_name), el("br"), el("code", { class: "key" }, j.key || "(no key)")),
        td(j.target),
        td(j.strategy),
        td(el("span", { class: `state state-${j.state}`, title: j.error || "" }, j.state)),
        el("td", { class: "progress" }, progress, el("span", { class: "count" }, ` ${j.trials_done} / ${j.trials_planned}`)),
        td(j.worker ? el("code", {}, j.worker) : j.no_worker ? noWorker(j, false) : ""),
        td(when(j.created_at)),
        td(best),
        td(action));
    }

    async function refresh() {
      clearTimeout(timer);
      try {
        const page = await api("/v1/ui/tune-jobs", { params: { ...q, limit: PAGE } });
        const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.job : undefined;
        fillRows($("#jobs"), page.items.map(row), "No tune job matches.", 10);
        if (focused) {
          const again = $(`button.cancel[data-job="${focused}"]`, tbody);
          if (again) again.focus();
        }
        pager($(".pager"), page, page.items.length);
        $("#live-note").textContent = `Updated ${new Date().toISOString().slice(11, 19)}Z`;
        ready($("#jobs-box"));
      } catch (err) {
        notice(explain(err));
        if (err.status === 401) return; // nothing more to show without a token
      }
      timer = setTimeout(refresh, document.hidden ? POLL_MS * 5 : POLL_MS);
    }

    tbody.addEventListener("click", async (ev) => {
      const button = ev.target.closest("button.cancel");
      if (!button) return;
      button.disabled = true;
      try {
        await api(`/v1/tune-jobs/${enc(button.dataset.job)}/cancel`, { method: "POST" });
        notice("");
      } catch (err) {
        notice(explain(err));
      }
      refresh();
    });
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden) refresh();
    });
    return refresh();
  }

  async function missesView(who) {
    const canQueue = !who.auth || who.scopes.includes("submit");
    const misses = await api("/v1/misses", { params: { limit: 200 } });
    const spec = (s) => {
      const sig = Object.entries(s.signature || {}).map(([n, t]) => {
        const h = Object.entries((s.hints || {})[n] || {}).map(([k, v]) => `${k}=${v}`).join(",");
        return h ? `${n}=${t} (${h})` : `${n}=${t}`;
      });
      const consts = Object.entries(s.constexprs || {}).map(([k, v]) => `${k}=${v}`);
      const parts = [sig.join(", "), consts.join(", ")];
      if (s.config) parts.push(configLabel(s.config));
      if (s.tuning) parts.push(`key ${s.tuning.key || "(launch)"}`);
      return el("code", { class: "key" }, parts.filter(Boolean).join("; "));
    };
    const row = (m) => el("tr", { "data-miss": m.id },
      td(link(`/ui/kernels/${enc(m.kernel_key)}`, m.name)), td(m.what), td(m.target), td(spec(m.specialisation)),
      td(String(m.count)), td(when(m.first_seen)), td(when(m.last_seen)),
      td(canQueue && m.tunable
        ? el("button", { type: "button", class: "queue", "data-miss": m.id, "aria-label": `Queue the ${m.what === "tune" ? "tune" : "build"} of miss ${m.id}` },
          m.what === "tune" ? "Queue tune" : "Queue build")
        : ""));
    fillRows($("#misses"), misses.map(row), "No miss reported.", 8);
    if (!canQueue) $("#queue-note").textContent = "Queueing a build or a tune needs a token with the submit scope.";
    $("#misses tbody").addEventListener("click", async (ev) => {
      const button = ev.target.closest("button.queue");
      if (!button) return;
      button.disabled = true;
      try {
        const out = await api(`/v1/misses/${enc(button.dataset.miss)}/queue`, { method: "POST" });
        $("#queue-note").textContent = out.artifact ? `Built artifact ${out.artifact.id.slice(0, 12)}.` : `Tune job #${out.job.id} ${out.job.state}.`;
        notice("");
      } catch (err) {
        button.disabled = false;
        notice(explain(err));
      }
    });
    ready($("#misses-box"));
  }

  // one job: its facts, whether a worker serves it, every config's outcome so far; polled while it is active
  function jobView(who) {
    const canCancel = !who.auth || who.scopes.includes("submit");
    let timer = 0;

    async function refresh() {
      clearTimeout(timer);
      let j;
      try {
        j = await api(`/v1/ui/tune-jobs/${enc(KEY)}`);
      } catch (err) {
        notice(explain(err));
        throw err;
      }
      notice("");
      document.title = `Job #${j.id} · Tune job · tilec`;
      $("#title").textContent = `Tune job #${j.id}: ${j.kernel_name} on ${j.target}`;
      const banner = $("#no-worker");
      banner.hidden = !(j.state === "queued" && j.no_worker);
      banner.replaceChildren(...(banner.hidden ? [] : noWorker(j, true)));
      const done = j.state === "done" && j.best_time_ms != null;
      facts($("#facts"), [
        ["Kernel", link(`/ui/kernels/${enc(j.kernel_key)}`, j.kernel_name)],
        ["State", el("span", { class: `state state-${j.state}`, id: "job-state" }, j.state)],
        ["Progress", `${j.trials_done} / ${j.trials_planned} configs`],
        ["Target", j.target],
        ["Strategy", j.strategy],
        ["Key values", j.key || "(none)"],
        ["Dtypes", j.dtypes],
        ["Worker", j.worker ? el("code", {}, j.worker) : j.state === "queued" ? "none yet" : ""],
        ["Deliveries", j.deliveries || ""],
        ["Best", done ? link(`/ui/tuning/${enc(j.tuning_key)}`, `${ms(j.best_time_ms)} ms (${configLabel(j.best_config)})`, { class: "result" }) : ""],
        ["Error", j.error ? el("pre", { class: "reason" }, j.error) : ""],
        ["Submitted", when(j.created_at)],
        ["Started", when(j.started_at)],
        ["Finished", when(j.finished_at)],
      ]);
      const actions = $("#job-actions");
      const active = ACTIVE.has(j.state);
      if (canCancel && active && !$("button.cancel", actions)) {
        const b = el("button", { type: "button", class: "cancel", "data-job": j.id }, "Cancel this job");
        b.addEventListener("click", async () => {
          b.disabled = true;
          try {
            await api(`/v1/tune-jobs/${enc(j.id)}/cancel`, { method: "POST" });
          } catch (err) {
            notice(explain(err));
          }
          refresh().catch(() => {});
        });
        actions.replaceChildren(b);
      } else if (!canCancel && active) {
        actions.replaceChildren(el("span", { class: "note", id: "cancel-note" }, "Cancelling a job needs a token with the submit scope."));
      } else if (!active) actions.replaceChildren();
      const reason = (text) => (text && text.includes("\n") ? el("pre", { class: "reason" }, text) : text || "");
      const trials = j.trials.map((t) => el("tr", { "data-status": t.status },
        td(configLabel(t.config)),
        td(t.status),
        td(ms(t.time_ms)),
        td(t.lo_ms == null ? "" : `${ms(t.lo_ms)} – ${ms(t.hi_ms)}`),
        td(t.gpu_model || (t.time_ms == null ? "" : "cpu")),
        td(reason(t.reason))));
      fillRows($("#trials"), trials, j.state === "queued" ? "None yet: the job has not started." : "None recorded.", 6);
      ready($("#detail"));
      if (active) timer = setTimeout(() => refresh().catch(() => {}), document.hidden ? POLL_MS * 5 : POLL_MS);
    }

    document.addEventListener("visibilitychange", () => {
      if (!document.hidden && $("#detail").dataset.ready === "true") refresh().catch(() => {});
    });
    return refresh();
  }

  const VIEWS = {
    kernels: kernelsView, kernel: kernelView, artifact: artifactView, tuning: tuningView, result: resultView, jobs: jobsView,
    misses: missesView, job: jobView,
  };

  async function start() {
    let who = null;
    try {
      who = await api("/v1/ui/whoami");
    } catch (err) {
      setupTokenForm(null);
      notice(explain(err));
      body.dataset.state = "refused";
      return;
    }
    setupTokenForm(who);
    try {
      await VIEWS[body.dataset.view](who);
      body.dataset.state = "ready";
    } catch (err) {
      notice(explain(err));
      body.dataset.state = "failed";
    }
  }

  start();
})();
