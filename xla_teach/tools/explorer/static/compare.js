// Two compiles side by side (tools/explorer/compare.py writes the data): each optimized module in
// its own pane, drawn by module_graph.js as the explorer draws one, panned, zoomed and opened on its
// own; the summary on the right. A click on an instruction selects it and its counterparts on the
// other side (the mapping: the same op_name, source line and opcode, fused or not); instructions
// with no counterpart are outlined dashed.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("data").textContent);
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
  const kib = (n) => (n === null || n === undefined ? "?" : n >= 1 << 20 ? (n / (1 << 20)).toFixed(2) + " MiB" : n >= 1024 ? (n / 1024).toFixed(1) + " KiB" : n + " B");
  const MIN_SCALE = 1, MAX_SCALE = 1.5;
  const other = (key) => (key === "a" ? "b" : "a");
  const details = $("details");
  let selected = null;  // {key, name}

  // ---- one side -------------------------------------------------------------------------------
  function makeSide(key, pane) {
    const d = data[key];
    const graph = window.XlaTeachModuleGraph({title: d.label, entry: d.entry, instructions: d.instructions, palette: d.palette});
    const st = {x: 0, y: 0, scale: 1};
    const svgOf = () => pane.querySelector("svg.module-graph");
    const unmatched = new Set(Object.keys(data.map[key]).filter((n) => !data.map[key][n].length));

    function apply() { const svg = svgOf(); if (svg) svg.style.transform = "translate(" + st.x + "px," + st.y + "px) scale(" + st.scale + ")"; }
    function fit() {
      const svg = svgOf();
      if (!svg) return;
      const box = svg.viewBox.baseVal, w = pane.clientWidth, h = pane.clientHeight;
      st.scale = Math.max(MIN_SCALE, Math.min(MAX_SCALE, Math.min(w / box.width, (h - 70) / box.height) * 0.95));
      st.x = box.width * st.scale > w ? 8 : (w - box.width * st.scale) / 2;
      st.y = box.height * st.scale <= h - 70 ? Math.max(30, (h - box.height * st.scale) / 2) : 30;
      apply();
    }
    // Draw what is open; fresh: choose again what fits (the first picture, collapse all); keep:
    // leave the pan and zoom where they are.
    function draw(fresh, keep) {
      if (fresh) graph.firstView(pane.clientWidth - 24, pane.clientHeight - 90);
      const at = {...st};
      const s = d.sizes;
      pane.innerHTML = '<div class="caption">' + key.toUpperCase() + ": " + esc(d.label) + " &middot; " + s.instructions + " instructions, " +
        s.kernels + " kernels</div>" + graph.svg() +
        '<div class="tools"><button data-act="expand" title="open every group while the picture stays readable">Expand all</button>' +
        '<button data-act="collapse" title="close every group">Collapse all</button></div>';
      const svg = svgOf();
      const box = svg.viewBox.baseVal;
      svg.removeAttribute("width");
      svg.removeAttribute("height");
      svg.style.width = box.width + "px";
      svg.style.height = box.height + "px";
      for (const node of svg.querySelectorAll("g.node[data-name]")) node.classList.toggle("unmatched", unmatched.has(node.dataset.name));
      if (keep) { Object.assign(st, at); apply(); } else fit();
      mark();
    }
    // Outline the selection on this side: the instruction clicked, or the counterparts of one
    // clicked on the other side (a fused one drawn as its fusion when the fusion is closed).
    function mark() {
      const names = !selected ? [] : selected.key === key ? [selected.name] : data.map[other(key)][selected.name] || [];
      const wanted = new Set(names);
      for (const n of names) { const o = d.instructions[n]; if (o && o.fusion) wanted.add(o.fusion); }
      const drawn = new Map();
      for (const node of pane.querySelectorAll("g.node[data-name]")) {
        const on = wanted.has(node.dataset.name);
        node.classList.toggle(selected && selected.key === key ? "selected" : "counterpart", on);
        node.classList.toggle(selected && selected.key === key ? "counterpart" : "selected", false);
        if (on) drawn.set(node.dataset.name, node);
      }
      // The best counterpart's box (or its fusion's), for the view to bring in.
      for (const n of names) { const o = d.instructions[n] || {}; const node = drawn.get(n) || drawn.get(o.fusion); if (node) return node; }
      return null;
    }
    function centerOn(node) {
      const r = node.getBoundingClientRect(), v = pane.getBoundingClientRect();
      st.x += pane.clientWidth / 2 - (r.left + r.width / 2 - v.left);
      st.y += pane.clientHeight / 2 - (r.top + r.height / 2 - v.top);
      apply();
    }
    // Open the groups around these instructions, redraw if that changed anything, and bring the
    // first into view.
    function reveal(names) {
      let changed = false;
      for (const n of names) changed = graph.reveal(n) || changed;
      if (changed) draw(false, false);
      const node = mark();
      if (node) {
        const r = node.getBoundingClientRect(), v = pane.getBoundingClientRect();
        if (r.left < v.left || r.right > v.right || r.top < v.top + 30 || r.bottom > v.bottom) centerOn(node);  // not wholly in view
      }
    }

    pane.addEventListener("wheel", (e) => {
      e.preventDefault();
      const r = pane.getBoundingClientRect(), cx = e.clientX - r.left, cy = e.clientY - r.top;
      const next = Math.min(8, Math.max(MIN_SCALE, st.scale * Math.exp(-e.deltaY * 0.0015)));
      st.x = cx - (cx - st.x) * (next / st.scale);
      st.y = cy - (cy - st.y) * (next / st.scale);
      st.scale = next;
      apply();
    }, {passive: false});
    let drag = null;
    pane.addEventListener("mousedown", (e) => {
      if (e.target.closest("g.node, .tools")) return;
      drag = {x: e.clientX - st.x, y: e.clientY - st.y};
      pane.classList.add("dragging");
    });
    window.addEventListener("mousemove", (e) => { if (drag) { st.x = e.clientX - drag.x; st.y = e.clientY - drag.y; apply(); } });
    window.addEventListener("mouseup", () => { drag = null; pane.classList.remove("dragging"); });
    pane.addEventListener("click", (e) => {
      const tool = e.target.closest(".tools button");
      if (tool) {
        if (tool.dataset.act === "expand") { graph.expandAll(); draw(false, false); }
        else { graph.collapseAll(); draw(true, false); }
        return;
      }
      const box = e.target.closest("g.scope-box");
      if (box) { graph.toggle(box.dataset.group); draw(false, true); return; }
      const title = e.target.closest("g.cluster text");
      if (title) {
        const cluster = title.parentNode;
        if (cluster.dataset.group) graph.toggle(cluster.dataset.group); else graph.toggleFusion(cluster.dataset.fusion);
        draw(false, true);
        return;
      }
      const node = e.target.closest("g.node[data-name]");
      if (node) select(key, node.dataset.name);
    });
    pane.addEventListener("dblclick", (e) => {
      const node = e.target.closest("g.node.fusion, g.node.openable");
      if (node) { graph.toggleFusion(node.dataset.name); draw(false, true); }
    });
    return {key, data: d, draw, fit, mark, reveal, graph};
  }

  const sides = {a: makeSide("a", $("side-a")), b: makeSide("b", $("side-b"))};

  // ---- selection ----------------------------------------------------------------------------
  function link(key, name) {
    return '<a data-side="' + key + '" data-name="' + esc(name) + '">' + esc(name) + "</a>";
  }
  function timeOf(key, name) {
    const p = data[key].profile, o = data[key].instructions[name] || {};
    const t = p && (p.thunks[name] !== undefined ? p.thunks[name] : p.thunks[o.fusion]);
    return t === undefined || t === null ? "" : " &middot; " + t.toFixed(1) + " \u00b5s per run" + (p.thunks[name] === undefined ? " (its fusion)" : "");
  }
  function instructionHtml(key, name) {
    const o = data[key].instructions[name] || {};
    const where = o.source_file ? esc(o.source_file.split("/").slice(-2).join("/")) + ":" + o.source_line : "";
    return '<h4 class="instr">' + key.toUpperCase() + ": " + link(key, name) + '<span class="stat">' + timeOf(key, name) + "</span></h4><pre>" +
      esc(o.line || "") + "</pre>" +
      (o.op_name ? '<p class="stat">' + esc(o.op_name) + (where ? " &middot; " + where : "") + "</p>" : "") +
      (o.members ? '<p class="stat">fuses ' + o.members.length + " instructions: " + o.members.slice(0, 12).map(esc).join(", ") +
        (o.members.length > 12 ? " &hellip;" : "") + "</p>" : "");
  }
  function select(key, name) {
    selected = {key, name};
    const there = data.map[key][name] || [];
    sides[key].mark();
    sides[other(key)].reveal(there);
    details.innerHTML = '<p><a data-act="summary">&larr; the comparison</a></p>' + instructionHtml(key, name) +
      "<h3>On side " + other(key).toUpperCase() + "</h3>" + (there.length ? '<p class="stat">' + there.length +
        " counterpart(s): the same op_name, source line and opcode, fused or not, the best first (outlined there).</p>" +
        there.map((n) => instructionHtml(other(key), n)).join("") : '<p class="stat">No counterpart: nothing on side ' + other(key).toUpperCase() +
        " computes this op_name and source line (outlined dashed).</p>");
  }
  details.addEventListener("click", (e) => {
    const a = e.target.closest("a");
    if (!a) return;
    if (a.dataset.act === "summary") { summary(); return; }
    if (a.dataset.name) { select(a.dataset.side, a.dataset.name); sides[a.dataset.side].reveal([a.dataset.name]); }
  });

  // ---- the summary ----------------------------------------------------------------------------
  const MARK = {"*": "changed the module", ".": "ran, changed nothing", "-": "did not run"};
  function ratio(a, b) { return a && b ? (b / a).toFixed(2) + "\u00d7" : ""; }
  function summary() {
    selected = null;
    sides.a.mark();
    sides.b.mark();
    const A = data.a, B = data.b, sa = A.sizes, sb = B.sizes;
    const row = (label, a, b, show) => "<tr><th>" + label + "</th><td>" + show(a) + "</td><td>" + show(b) + "</td><td>" + ratio(a, b) + "</td></tr>";
    const count = (n) => (n === null || n === undefined ? "?" : String(n));
    const seconds = (s) => (s ? s.toFixed(2) + " s" : "?");
    const ms = (us) => (us ? (us / 1000).toFixed(3) + " ms" : "not run");
    let out = "<h2>A vs B</h2><dl><dt>A</dt><dd>" + esc(A.label) + "</dd><dt>B</dt><dd>" + esc(B.label) + "</dd></dl>" +
      '<table class="sizes"><tr><th></th><th>A</th><th>B</th><th>B/A</th></tr>' +
      row("instructions", sa.instructions, sb.instructions, count) + row("kernels", sa.kernels, sb.kernels, count) +
      row("fusions", sa.fusions, sb.fusions, count) + row("peak memory", sa.peak_bytes, sb.peak_bytes, kib) +
      row("temporaries", sa.temp_bytes, sb.temp_bytes, kib) + row("compile", sa.compile_s, sb.compile_s, seconds) +
      row("run (median)", A.profile && A.profile.median_us, B.profile && B.profile.median_us, ms) + "</table>";
    // What matters first: a pass that changed the module on one side only. A pass that ran on
    // one side and not the other without changing anything (one more round of a fixed-point
    // loop) is listed apart.
    const item = (p) => "<li><b>" + esc(p.name) + "</b>: A " + MARK[p.a] + ", B " + MARK[p.b] + "</li>";
    const differ = data.passes.filter((p) => p.a !== p.b && (p.a === "*" || p.b === "*"));
    const idle = data.passes.filter((p) => p.a !== p.b && p.a !== "*" && p.b !== "*");
    out += "<h3>Passes that changed one side only (" + differ.length + ")</h3>" + (differ.length ? '<ul class="passes">' +
      differ.map(item).join("") + "</ul>" : '<p class="stat">Every pass that changed one module changed the other too.</p>') +
      (idle.length ? "<details><summary>" + idle.length + " more ran on one side only, changing nothing</summary><ul class=\"passes\">" +
        idle.map(item).join("") + "</ul></details>" : "");
    const fusions = data.fusions.filter((f) => f.a.length !== f.b.length);
    const names = (key, list) => list.slice(0, 6).map((n) => link(key, n)).join(", ") + (list.length > 6 ? " &hellip;" : "");
    out += "<h3>Fusions that differ (" + fusions.length + " kinds)</h3>" + (fusions.length ? '<ul class="fusions">' + fusions.map((f) =>
      "<li><code>" + esc(f.what) + "</code><br>A " + f.a.length + (f.a.length ? ": " + names("a", f.a) : "") + " &middot; B " + f.b.length +
      (f.b.length ? ": " + names("b", f.b) : "") + "</li>").join("") + "</ul>" : '<p class="stat">The same fusions on both sides.</p>');
    if (A.profile && B.profile) {
      const keys = [...new Set([...Object.keys(A.profile.scopes), ...Object.keys(B.profile.scopes)])]
        .filter((k) => window.XlaTeachModuleGraph.scopes(k).length <= 3);
      keys.sort((x, y) => Math.max(B.profile.scopes[y] || 0, A.profile.scopes[y] || 0) - Math.max(B.profile.scopes[x] || 0, A.profile.scopes[x] || 0));
      out += "<h3>Time by op_name scope (\u00b5s per run)</h3><table class=\"scopes\"><tr><th>scope</th><th>A</th><th>B</th><th>B/A</th></tr>" +
        keys.slice(0, 24).map((k) => { const a = A.profile.scopes[k], b = B.profile.scopes[k];
          return "<tr><td>" + esc(window.XlaTeachModuleGraph.scopes(k).pop()) + '<span class="stat"> ' + esc(k) + "</span></td><td>" +
            (a ? a.toFixed(1) : "") + "</td><td>" + (b ? b.toFixed(1) : "") + "</td><td>" + ratio(a, b) + "</td></tr>"; }).join("") + "</table>" +
        '<p class="stat">Mean over ' + A.profile.runs + " runs on fake arguments after two warm-up runs; a fusion counts in its own scope.</p>";
    }
    const lost = (key) => Object.values(data.map[key]).filter((l) => !l.length).length;
    out += "<h3>Mapping</h3><p class=\"stat\">" + lost("a") + " instruction(s) of A and " + lost("b") + " of B have no counterpart " +
      "(outlined dashed). Click an instruction on either side to select it and its counterparts.</p>" +
      "<details><summary>as text (xla-teach diff)</summary><pre>" + esc(data.text) + "</pre></details>";
    details.innerHTML = out;
  }

  // ---- search, keys -----------------------------------------------------------------------
  const search = $("search");
  search.addEventListener("keydown", (e) => {
    if (e.key === "Escape") { search.blur(); return; }
    if (e.key !== "Enter") return;
    const q = search.value.trim().toLowerCase();
    for (const key of ["a", "b"]) {
      const hit = Object.keys(data.map[key]).find((n) => n.toLowerCase() === q) ||
        Object.keys(data.map[key]).find((n) => n.toLowerCase().includes(q) || (data[key].instructions[n].op_name || "").toLowerCase().includes(q));
      if (hit) { select(key, hit); sides[key].reveal([hit]); break; }
    }
    search.blur();
  });
  document.addEventListener("keydown", (e) => {
    if (e.target === search || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "/") { e.preventDefault(); search.focus(); }
    else if (e.key === "0") summary();
    else if (e.key === "f") { sides.a.fit(); sides.b.fit(); }
  });
  $("summary").addEventListener("click", summary);
  $("fit").addEventListener("click", () => { sides.a.fit(); sides.b.fit(); });
  window.addEventListener("resize", () => { sides.a.fit(); sides.b.fit(); });

  document.body.classList.add("js");
  sides.a.draw(true, false);
  sides.b.draw(true, false);
  summary();
  window.compareTimings = {firstPictureMs: performance.now()};
})();
