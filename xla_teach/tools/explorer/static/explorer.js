// The compile explorer's page script. Everything it shows is in the JSON of <script id="data">.
// The optimized module is drawn by module_graph.js (groups by op_name scope, laid out by dagre);
// the pictures of what each pass changed are SVGs that Graphviz laid out when the page was written.
// This script steps through the passes, pans and zooms, searches, and opens a panel for an
// instruction with its HLO line, source line, fusion, kernel, buffer and time.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("data").textContent);
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
  // view: "module", a pass picture's index, "memory" or "profile"
  const state = {pass: -1, view: null, scale: 1, x: 0, y: 0, selected: null, heat: false, step: -1};
  const graph = window.XlaTeachModuleGraph(data);
  // Never drawn smaller than this: the pictures' labels are 11 px at scale 1. A picture larger
  // than the pane is panned, with the minimap for the whole of it; the module graph keeps to what
  // fits by opening fewer groups (level of detail), not by shrinking.
  const MIN_SCALE = 1, MAX_SCALE = 1.5;

  // ---- passes ------------------------------------------------------------------------
  const list = $("pass-list");
  data.passes.forEach((p, i) => {
    const li = document.createElement("li");
    li.className = p.skipped ? "skipped" : (p.changed ? "changed" : "unchanged");
    li.dataset.index = i;
    li.title = p.pipeline + "/" + p.name + (p.skipped ? " (" + p.skipped + ")" : "");
    li.innerHTML = '<span class="name">' + esc(p.name) + ' <span class="pipeline">' + esc(p.pipeline) +
      '</span></span><span class="time">' + p.ms.toFixed(1) + " ms</span>";
    li.addEventListener("click", () => showPass(i));
    list.appendChild(li);
  });
  $("changed-only").addEventListener("change", (e) => $("passes").classList.toggle("changed-only", e.target.checked));

  function visiblePasses() {
    const changedOnly = $("changed-only").checked;
    return data.passes.map((p, i) => i).filter((i) => !changedOnly || data.passes[i].changed);
  }

  function step(delta) {
    const order = visiblePasses();
    if (!order.length) return;
    let at = order.indexOf(state.pass);
    at = at < 0 ? (delta > 0 ? 0 : order.length - 1) : Math.min(order.length - 1, Math.max(0, at + delta));
    showPass(order[at]);
  }

  function showPass(i) {
    state.pass = i;
    const p = data.passes[i];
    for (const li of list.children) li.classList.toggle("current", Number(li.dataset.index) === i);
    const current = list.children[i];
    if (current) current.scrollIntoView({block: "nearest"});
    if (p.order) showOrder(p);
    else if (p.sides) showSides(p);
    let html = "<h2>" + esc(p.pipeline) + "/" + esc(p.name) + "</h2>";
    html += '<div class="stat">' + (p.skipped ? "skipped: " + esc(p.skipped) : (p.changed ? "changed the module" : "no change")) +
      " &middot; " + p.ms.toFixed(2) + " ms &middot; instructions " + p.instructions[0] + " &rarr; " + p.instructions[1] +
      " (fused ones counted) &middot; fusions " + p.fusions[0] + " &rarr; " + p.fusions[1] + "</div>";
    if (p.steps && p.steps.length) html += '<h3>Rewrites (' + p.steps.length + ')</h3><div id="step"></div>';
    if (p.diff) html += diffHtml(p.diff);
    if (p.notes.length) {
      const items = p.notes.map((n) => "<li>" + linkNames(esc(n)) + "</li>").join("");
      html += p.notes.length > 8
        ? "<details><summary><h3 style=display:inline>Notes (" + p.notes.length + ")</h3></summary><ul class=notes>" + items + "</ul></details>"
        : "<h3>Notes</h3><ul class=notes>" + items + "</ul>";
    }
    if (p.order) html += orderHtml(p.order);
    if (p.steps && p.steps.length) html += '<details><summary><h3 style=display:inline>Every rewrite, in order</h3></summary><ol class="steps">' +
      p.steps.map((st, k) => '<li><a data-step="' + k + '">' + esc(st.rule) + "</a></li>").join("") + "</ol></details>";
    $("details").innerHTML = html;
    state.step = -1;
    if (p.steps && p.steps.length) showStep(-1);
    remember("pass-" + p.index);
  }

  // ---- rewrite by rewrite: each rule application or fusion decision of the pass ---------------
  function showStep(k) {
    const p = data.passes[state.pass];
    if (!p || !p.steps || !p.steps.length) return;
    k = Math.max(-1, Math.min(p.steps.length - 1, k));
    state.step = k;
    if (k < 0) {  // the pass as a whole: the piece it touched, before and after
      $("step").innerHTML = '<div class="stat">The pass as a whole is drawn; <a data-step="0">step through its ' + p.steps.length +
        " rewrites</a> one by one (<kbd>]</kbd> next, <kbd>[</kbd> back).</div>";
      for (const li of $("details").querySelectorAll("ol.steps li")) li.classList.remove("current");
      if (p.order) showOrder(p); else if (p.sides) showSides(p);
      return;
    }
    const st = p.steps[k];
    const code = (data.ruleCode || {})[st.where];
    $("step").innerHTML = '<div class="stat">rewrite ' + (k + 1) + " of " + p.steps.length +
      ' &middot; <a data-step="' + (k - 1) + '">&larr; previous</a> &middot; <a data-step="' + (k + 1) + '">next &rarr;</a> ' +
      "(<kbd>[</kbd> <kbd>]</kbd>)</div><div><b>" + esc(st.rule) + "</b></div>" +
      (st.where ? '<div class="stat">' + esc(st.where) + "</div>" : "") +
      (code ? "<details><summary>the rule's code</summary><pre class=source>" + esc(code) + "</pre></details>" : "") +
      '<pre class="before">' + esc(st.before.join("\n")) + '</pre><pre class="after">' + esc(st.after.join("\n")) + "</pre>";
    for (const li of $("details").querySelectorAll("ol.steps li")) li.classList.toggle("current", li.firstChild.dataset.step === String(k));
    // The middle pane: this rewrite's own before and after, the instructions it touched outlined.
    showSides(p, {before: stepTable(st.before), after: stepTable(st.after), touched: st.touched},
      p.name + ", rewrite " + (k + 1) + " of " + p.steps.length + ": " + st.rule);
  }

  // A step's HLO lines as a small instruction table (indented lines, a fusion's body, are left out).
  function stepTable(lines) {
    const table = {};
    for (const line of lines) {
      if (/^\s/.test(line)) continue;
      const m = line.match(/^(?:ROOT )?%?([\w.\-]+) = /);
      if (!m) continue;
      let rest = line.slice(m[0].length), shape;
      if (rest[0] === "(") {
        let depth = 0, i = 0;
        for (; i < rest.length; i++) { if (rest[i] === "(") depth++; else if (rest[i] === ")" && --depth === 0) break; }
        shape = rest.slice(0, i + 1); rest = rest.slice(i + 2);
      } else { shape = rest.split(" ")[0]; rest = rest.slice(shape.length + 1); }
      const op = rest.match(/^([a-z][\w\-]*)\((.*?)\)(?:,|$)/);
      if (!op) continue;
      table[m[1]] = {opcode: op[1], shape, computation: "side", category: (data.categories || {})[op[1]] || "elementwise",
        op_name: "", line, operands: (op[2].match(/%[\w.\-]+/g) || []).map((x) => x.slice(1)), fusion: ""};
    }
    for (const o of Object.values(table)) o.operands = o.operands.filter((x) => table[x]);
    return table;
  }

  function nameLink(n) { return '<a data-name="' + esc(n) + '">' + esc(displayName(n)) + "</a>"; }

  // A parameter is shown by its pytree path (params['w1']) when the front end wrote one.
  function displayName(n) {
    const o = data.instructions[n];
    return o && o.opcode === "parameter" && o.op_name && !o.op_name.includes("/") ? o.op_name + " (" + n + ")" : n;
  }

  function diffHtml(d) {
    let html = "";
    const fusions = Object.keys(d.fused);
    if (fusions.length) {
      html += "<h3>Fused</h3><ul>" + fusions.map((f) => '<li class="fused">' + nameLink(f) + " &larr; " +
        d.fused[f].map((m) => ((data.renamed || {})[m] || data.instructions[m] ? nameLink(m) : esc(m))).join(", ") + "</li>").join("") + "</ul>";
    }
    if (d.added.length) html += '<h3>Added</h3><ul class="added">' + d.added.map((n) => "<li>" + nameLink(n) + "</li>").join("") + "</ul>";
    if (d.removed.length) html += '<h3>Removed</h3><ul class="removed">' + d.removed.map((n) => "<li>" + esc(n) + "</li>").join("") + "</ul>";
    if (d.changed.length) {
      html += "<h3>Changed</h3>" + d.changed.map((c) => "<div>" + nameLink(c.name) + '<pre class="before">' + esc(c.before) +
        '</pre><pre class="after">' + esc(c.after) + "</pre></div>").join("");
    }
    return html || '<p class="stat">The text changed, but no instruction did (names, order or metadata).</p>';
  }

  // Instruction names inside notes become links.
  // A plain word that happens to be an instruction's name ("while", "tuple", "dot") stays a word:
  // only names with a number, a dot, a dash or an underscore (dot.3, param_0, add-dependency) link.
  function linkNames(text) {
    const known = (w) => (data.instructions[w] || (data.renamed || {})[w]) && /[\d._-]/.test(w);
    return text.replace(/[A-Za-z_][\w.\-]*/g, (w) => (known(w) ? nameLink(w) : w));
  }

  $("details").addEventListener("click", (e) => {
    const step = e.target.closest("a[data-step]");
    if (step) { showStep(Number(step.dataset.step)); return; }
    const focus = e.target.closest("a[data-focus-group]");
    if (focus) { groupTool("focus", graph.groups.get(focus.dataset.focusGroup)); return; }
    const fusion = e.target.closest("a[data-open-fusion]");
    if (fusion) {
      graph.toggleFusion(fusion.dataset.openFusion);
      showModule();
      const node = mark(fusion.dataset.openFusion) || view.querySelector('[data-fusion="' + CSS.escape(fusion.dataset.openFusion) + '"]');
      if (node) centerOn(node);
      return;
    }
    const a = e.target.closest("a[data-name]");
    if (a) selectInstruction(a.dataset.name, false);
  });

  // ---- the graph: pan, zoom, fit -------------------------------------------------------
  const view = $("graph");
  let shownOnce = false;

  // Put a picture in the middle pane at its own size (from its viewBox), fitted to the pane.
  function place(caption, svgText) {
    view.innerHTML = '<div class="caption">' + esc(caption) + "</div>" + svgText;
    const svg = view.querySelector("svg");
    if (!svg) return null;
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    const box = svg.viewBox.baseVal;
    svg.style.width = box.width + "px";
    svg.style.height = box.height + "px";
    minimap(svg);
    fit();
    return svg;
  }

  // ---- the minimap: the whole picture, small and without text, with the part on screen --------
  function minimap(svg) {
    const box = svg.viewBox.baseVal;
    const scale = Math.min(200 / box.width, 140 / box.height);
    const map = document.createElement("div");
    map.className = "minimap";
    map.style.width = Math.ceil(box.width * scale) + "px";
    map.style.height = Math.ceil(box.height * scale) + "px";
    const copy = svg.cloneNode(true);
    for (const t of copy.querySelectorAll("text, title, marker")) t.remove();
    // No classes or data in the copy (the page's selectors must find only the picture itself):
    // what the style sheet gave edges and group frames is written on them instead.
    for (const e of copy.querySelectorAll("path:not([fill])")) { e.setAttribute("fill", "none"); e.setAttribute("stroke", "#90a4ae"); }
    for (const e of copy.querySelectorAll("rect:not([fill])")) { e.setAttribute("fill", "#f5f7f8"); e.setAttribute("stroke", "#b0bec5"); }
    for (const e of copy.querySelectorAll("[class], [data-name], [data-names], [data-group], [data-fusion]")) {
      for (const a of ["class", "data-name", "data-names", "data-group", "data-fusion"]) e.removeAttribute(a);
    }
    for (const e of copy.querySelectorAll("[marker-end]")) e.removeAttribute("marker-end");
    copy.removeAttribute("style");
    copy.setAttribute("width", box.width * scale);
    copy.setAttribute("height", box.height * scale);
    copy.classList.add("overview");
    map.appendChild(copy);
    const port = document.createElement("div");
    port.className = "port";
    map.appendChild(port);
    map.dataset.scale = scale;
    map.title = "the whole picture: click to go there";
    view.appendChild(map);
    const go = (e) => {
      const r = map.getBoundingClientRect();
      const px = (e.clientX - r.left) / scale, py = (e.clientY - r.top) / scale;
      state.x = view.clientWidth / 2 - px * state.scale;
      state.y = view.clientHeight / 2 - py * state.scale;
      apply();
    };
    map.addEventListener("mousedown", (e) => { e.stopPropagation(); go(e); drag = {map: true}; });
    map.addEventListener("mousemove", (e) => { if (drag && drag.map) go(e); });
  }

  function updateMinimap() {
    const map = view.querySelector(".minimap");
    const svg = view.querySelector("svg:not(.overview):not(.timeline-chart)");
    if (!map || !svg) return;
    const box = svg.viewBox.baseVal, k = Number(map.dataset.scale);
    const whole = box.width * state.scale <= view.clientWidth && box.height * state.scale <= view.clientHeight;
    map.classList.toggle("hidden", whole);
    const port = map.querySelector(".port");
    port.style.left = Math.max(0, -state.x / state.scale * k) + "px";
    port.style.top = Math.max(0, -state.y / state.scale * k) + "px";
    port.style.width = Math.min(box.width * k, view.clientWidth / state.scale * k) + "px";
    port.style.height = Math.min(box.height * k, view.clientHeight / state.scale * k) + "px";
  }

  // The pane's room for a picture at scale 1 (less the caption and the legend).
  function room() { return [view.clientWidth - 24, view.clientHeight - 70]; }

  // The optimized module, grouped; keep: leave the pan and zoom as they are; fresh: choose again
  // which groups are open, as many as fit the pane (the first picture, collapse all, focus).
  function showModule(keep, fresh) {
    const at = {x: state.x, y: state.y, scale: state.scale};
    if (fresh || !shownOnce) graph.firstView(...room());
    shownOnce = true;
    state.view = "module";
    const focus = graph.focused() === graph.root ? "" : " \u00b7 focused on " +
      graph.ancestors(graph.focused()).reverse().slice(1).map((id) => graph.groups.get(id).label).join(" \u203a ");
    const svg = place("optimized module" + focus + ": " + graph.boxes() + " boxes; click a group to open it, its title to close it", graph.svg());
    const focusable = state.selected && graph.groupOf(state.selected);
    view.insertAdjacentHTML("beforeend", '<div class="tools">' +
      '<button data-act="expand" title="open every group, level by level, while the picture stays readable">Expand all</button>' +
      '<button data-act="collapse" title="close every group">Collapse all</button>' +
      (focusable && focusable.depth ? '<button data-act="focus" title="draw only the group of the selected instruction">Focus on ' +
        esc(focusable.label) + "</button>" : "") +
      (graph.focused() !== graph.root ? '<button data-act="unfocus" title="the whole module again">Whole module</button>' : "") +
      (data.profile ? '<button data-act="heat" title="colour the boxes by measured time (h)">' + (state.heat ? "Heat off" : "Heat") + "</button>" : "") +
      "</div>");
    view.insertAdjacentHTML("beforeend", '<div class="legend">' + (data.legend || []).map((l) => '<span style="background:' + l[1] +
      ";border-color:" + l[2] + ";color:" + l[3] + '">' + esc(l[0]) + "</span>").join("") + '<span class="scope">group (op_name scope)</span></div>');
    if (keep && svg) { Object.assign(state, at); apply(); }
    paintHeat();
    if (state.selected) mark(state.selected);
  }

  // Open or close a group or fusion, keeping the place clicked where it was on the screen.
  // When the picture grows past the pane at the current zoom (a small picture is shown at up to
  // 1.5x), it is fitted again -- never below MIN_SCALE -- and the opened place is brought into view.
  function regroup(change, anchor) {
    const before = anchor && anchor.getBoundingClientRect();
    const scale = state.scale;
    change();
    showModule(true);
    if (!before) return;
    const selector = anchor.dataset.group ? '[data-group="' + CSS.escape(anchor.dataset.group) + '"]'
      : '[data-fusion="' + CSS.escape(anchor.dataset.fusion || anchor.dataset.name) + '"], g.node[data-name="' + CSS.escape(anchor.dataset.fusion || anchor.dataset.name) + '"]';
    const svg = view.querySelector("svg:not(.overview)");
    const box = svg && svg.viewBox.baseVal;
    if (box && scale > MIN_SCALE && (box.width * scale > view.clientWidth || box.height * scale > view.clientHeight)) {
      fit();
      const now = view.querySelector(selector);
      if (now) {
        const r = now.getBoundingClientRect(), v = view.getBoundingClientRect();
        if (r.right < v.left || r.left > v.right || r.bottom < v.top || r.top > v.bottom) centerOn(now);
      }
      return;
    }
    const now = view.querySelector(selector);
    if (!now) return;
    const after = now.getBoundingClientRect();
    state.x += before.left - after.left;
    state.y += before.top - after.top;
    apply();
  }

  view.addEventListener("click", (e) => {
    const tool = e.target.closest(".tools button");
    if (tool) { groupTool(tool.dataset.act); return; }
    const box = e.target.closest("g.scope-box");
    if (box) { regroup(() => graph.toggle(box.dataset.group), box); return; }
    const title = e.target.closest("g.cluster text");
    if (!title) return;
    const cluster = title.parentNode;
    if (cluster.dataset.group) regroup(() => graph.toggle(cluster.dataset.group), cluster);
    else regroup(() => graph.toggleFusion(cluster.dataset.fusion), null);
  });
  view.addEventListener("dblclick", (e) => {
    const node = e.target.closest("g.node.fusion, g.node.openable");
    if (node) regroup(() => graph.toggleFusion(node.dataset.name), null);
  });

  // The graph's own buttons: expand all, collapse all, focus on a group and back.
  function groupTool(act, group) {
    if (act === "expand") {
      const closed = graph.expandAll();
      showModule(false);
      if (closed) view.querySelector(".caption").textContent += " (" + closed + " groups stay closed: more would not be readable)";
    } else if (act === "collapse") {
      graph.collapseAll();
      showModule(false);
    } else if (act === "focus") {
      const g = group || graph.groupOf(state.selected);
      if (g) graph.focus(g.id);
      showModule(false, true);
      if (state.selected) mark(state.selected);
    } else if (act === "unfocus") {
      graph.focus(graph.root);
      showModule(false, true);
    } else if (act === "heat" && data.profile) {
      state.heat = !state.heat;
      showModule(true);
    }
  }

  // ---- a changed pass: before and after side by side, in the module graph's own look ----------
  function sideSvg(table, title) {
    return window.XlaTeachModuleGraph({title, entry: "side", instructions: table, palette: data.palette, flat: true}).svg();
  }

  function showSides(p, sides, caption) {
    state.view = "pass-" + p.index;
    sides = sides || p.sides;
    const parts = [["before " + p.name, sides.before], ["after " + p.name, sides.after]].map(([title, table]) => {
      const svg = Object.keys(table).length ? sideSvg(table, title) : '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 200 40" width="200" height="40"></svg>';
      const box = svg.match(/viewBox="([^"]*)"/)[1].split(" ").map(Number);
      return {title, svg, box};
    });
    const gap = 48, top = 28;
    const width = parts[0].box[2] + gap + parts[1].box[2], height = top + Math.max(parts[0].box[3], parts[1].box[3]);
    let out = '<svg xmlns="http://www.w3.org/2000/svg" class="module-graph pass-sides" viewBox="0 0 ' + width + " " + height +
      '" width="' + width + '" height="' + height + '">';
    let x = 0;
    for (const part of parts) {
      out += '<text class="side-title" x="' + (x + 4) + '" y="18">' + esc(part.title) + "</text>";
      out += part.svg.replace("<svg ", '<svg x="' + x + '" y="' + top + '" ');
      x += part.box[2] + gap;
    }
    out += '<line x1="' + (parts[0].box[2] + gap / 2) + '" y1="0" x2="' + (parts[0].box[2] + gap / 2) + '" y2="' + height +
      '" stroke="#b0bec5" stroke-dasharray="4 4"/></svg>';
    const svg = place(caption || p.name + ": before and after, what it touched outlined in red (the same instruction is selected on both sides)", out);
    if (!svg) return;
    const touched = new Set(sides.touched);
    for (const node of svg.querySelectorAll("g.node[data-name]")) node.classList.toggle("touched", touched.has(node.dataset.name));
    // No heat here: the profile timed the optimized module's kernels, not this stage's instructions.
    if (state.selected) mark(state.selected);
  }

  // The instructions of the new order that moved: those outside the longest run that kept its
  // relative order (the longest increasing subsequence of old positions, n log n), so that one
  // instruction moved up does not count everything it passed as moved.
  function movedInOrder(order) {
    const at = new Map(order.before.map((n, i) => [n, i]));
    const pos = order.after.map((n) => at.get(n));
    const tails = [], tailAt = [], parent = new Array(pos.length).fill(-1);
    pos.forEach((v, i) => {
      let lo = 0, hi = tails.length;
      while (lo < hi) { const mid = (lo + hi) >> 1; if (tails[mid] < v) lo = mid + 1; else hi = mid; }
      tails[lo] = v; tailAt[lo] = i; parent[i] = lo > 0 ? tailAt[lo - 1] : -1;
    });
    const kept = new Set();
    for (let i = tails.length ? tailAt[tails.length - 1] : -1; i >= 0; i = parent[i]) kept.add(order.after[i]);
    return new Set(order.after.filter((n) => !kept.has(n)));
  }

  // The scheduler's choice: the ENTRY's instructions in their old and new order, each joined to
  // itself by a line; the instructions it moved in red.
  function showOrder(p) {
    state.view = "pass-" + p.index;
    const {before, after} = p.order;
    const at = new Map(before.map((n, i) => [n, i]));
    const movedSet = movedInOrder(p.order);
    const H = 16, colW = 260, gap = 160, top = 30;
    const width = 2 * colW + gap, height = top + H * Math.max(before.length, after.length) + 10;
    let out = '<svg xmlns="http://www.w3.org/2000/svg" class="module-graph order" viewBox="0 0 ' + width + " " + height + '" width="' + width +
      '" height="' + height + '"><text class="side-title" x="4" y="18">order before</text><text class="side-title" x="' + (colW + gap + 4) +
      '" y="18">order after ' + esc(p.name) + "</text>";
    after.forEach((n, j) => {
      const i = at.get(n);
      const moved = movedSet.has(n);
      out += '<line x1="' + colW + '" y1="' + (top + i * H + 6) + '" x2="' + (colW + gap) + '" y2="' + (top + j * H + 6) + '" stroke="' +
        (moved ? "#d81b60" : "#cfd8dc") + '" stroke-width="' + (moved ? 1.4 : 1) + '"/>';
    });
    const row = (n, k, x, anchor) => '<g class="node" data-name="' + esc(n) + '"><text x="' + x + '" y="' + (top + k * H + 10) +
      '" style="text-anchor:' + anchor + '" fill="#212121">' + esc((k + 1) + ". " + n) + "</text></g>";
    before.forEach((n, i) => { out += row(n, i, colW - 6, "end"); });
    after.forEach((n, j) => { out += row(n, j, colW + gap + 6, "start"); });
    place(p.name + ": the order it chose (the instructions it moved in red)", out + "</svg>");
    if (state.selected) mark(state.selected);
  }

  function orderHtml(order) {
    const moved = movedInOrder(order);
    return "<h3>Order</h3><p class=stat>The pass moved " + moved.size + " of the ENTRY computation's " + order.after.length +
      " instructions (the others keep their order; the picture joins each one's old and new place, the moved ones in red). From " +
      "here on, the text order is the schedule.</p>" + (moved.size ? "<div>Moved: " + [...moved].slice(0, 60).map(nameLink).join(", ") +
      (moved.size > 60 ? " &hellip;" : "") + "</div>" : "");
  }

  function apply() {
    const svg = view.querySelector("svg:not(.overview):not(.timeline-chart)");
    if (svg) svg.style.transform = "translate(" + state.x + "px," + state.y + "px) scale(" + state.scale + ")";
    updateMinimap();
  }

  // As large as fits, but never below MIN_SCALE: a picture larger than the pane shows its top
  // (where the program starts), and the minimap shows the rest.
  function fit() {
    const svg = view.querySelector("svg:not(.overview):not(.timeline-chart)");
    if (!svg) return;
    const box = svg.viewBox.baseVal;
    const w = view.clientWidth, h = view.clientHeight;
    state.scale = Math.max(MIN_SCALE, Math.min(MAX_SCALE, Math.min(w / box.width, (h - 40) / box.height) * 0.95));
    // A chart or a pass's before/after too wide for the pane starts at its left edge; a graph, centred.
    const chart = state.view === "memory" || state.view === "profile" || String(state.view).startsWith("pass-");
    state.x = box.width * state.scale > w && chart ? 0 : (w - box.width * state.scale) / 2;
    state.y = box.height * state.scale <= h - 40 ? Math.max(24, (h - box.height * state.scale) / 2) : 24;
    apply();
  }

  function zoomAt(factor, cx, cy) {
    const next = Math.min(8, Math.max(MIN_SCALE, state.scale * factor));
    state.x = cx - (cx - state.x) * (next / state.scale);
    state.y = cy - (cy - state.y) * (next / state.scale);
    state.scale = next;
    apply();
  }

  view.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = view.getBoundingClientRect();
    zoomAt(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  }, {passive: false});
  let drag = null;
  view.addEventListener("mousedown", (e) => {
    if (e.target.closest("g.node, .minimap, .tools")) return;
    drag = {x: e.clientX - state.x, y: e.clientY - state.y};
    view.classList.add("dragging");
  });
  window.addEventListener("mousemove", (e) => { if (drag && !drag.map) { state.x = e.clientX - drag.x; state.y = e.clientY - drag.y; apply(); } });
  window.addEventListener("mouseup", () => { drag = null; view.classList.remove("dragging"); });
  view.addEventListener("click", (e) => {
    const node = e.target.closest("g.node");
    if (!node || !node.dataset.name) return;
    e.preventDefault();
    selectInstruction(node.dataset.name, true);
  });
  $("fit").addEventListener("click", fit);
  $("whole").addEventListener("click", () => { leavePass(); showModule(); summary(); remember("module"); });

  // Back to the optimized module from a pass: no pass is current, the panel is the module's.
  function leavePass() {
    state.pass = -1;
    state.step = -1;
    for (const li of list.children) li.classList.remove("current");
  }

  // Bring a box to the middle of the pane (at the current zoom, never below MIN_SCALE).
  function centerOn(node) {
    const r = node.getBoundingClientRect(), v = view.getBoundingClientRect();
    state.x += view.clientWidth / 2 - (r.left + r.width / 2 - v.left);
    state.y += view.clientHeight / 2 - (r.top + r.height / 2 - v.top);
    apply();
  }

  // ---- selection, provenance --------------------------------------------------------------
  function mark(name) {
    const info = data.instructions[name] || {};
    const related = new Set();
    if (info.source_line) {
      for (const [other, o] of Object.entries(data.instructions)) {
        if (o.source_file === info.source_file && o.source_line === info.source_line) related.add(other);
      }
    }
    let target = null;
    for (const cluster of view.querySelectorAll("g.cluster.selected")) cluster.classList.remove("selected");
    for (const node of view.querySelectorAll("g.node")) {
      const n = node.dataset.name;
      node.classList.toggle("selected", n === name);
      node.classList.toggle("related", n !== name && related.has(n));
      if (n === name) target = node;
    }
    if (!target) {  // an opened fusion is drawn as a cluster
      target = view.querySelector('g.cluster[data-fusion="' + CSS.escape(name) + '"]');
      if (target) target.classList.add("selected");
    }
    if (!target && info.fusion) {  // a fused instruction drawn as its fusion
      target = view.querySelector('g.node[data-name="' + CSS.escape(info.fusion) + '"]');
      if (target) target.classList.add("selected");
    }
    return target;
  }

  // fromGraph: clicked in the graph shown; where "module": show it in the optimized module;
  // otherwise (a link in a pass's panel) in the picture shown when it is there.
  function selectInstruction(name, fromGraph, where) {
    state.selected = name;
    const info = data.instructions[name];
    const shown = view.querySelector('g.node[data-name="' + CSS.escape(name) + '"]');
    if (!fromGraph && (where === "module" || !shown)) {
      if (graph.reveal(name) || state.view !== "module") showModule();
    }
    const node = mark(name);
    if (node && !fromGraph) centerOn(node);
    markBars();
    $("details").innerHTML = info ? instructionHtml(name, info) : goneHtml(name);
    remember("instr-" + encodeURIComponent(name));
  }

  // ---- history: each pass, instruction and view the reader goes to is a step Back returns to ----
  let restoring = false;
  function remember(hash) {
    if (restoring || location.hash === "#" + hash) return;
    history.pushState(null, "", "#" + hash);
  }

  function route(hash) {
    restoring = true;
    try {
      if (hash.startsWith("pass-")) {
        const i = data.passes.findIndex((p) => "pass-" + p.index === hash);
        if (i >= 0) showPass(i);
      } else if (hash.startsWith("instr-")) {
        selectInstruction(decodeURIComponent(hash.slice(6)), false, "module");
      } else if (hash === "memory") showMemory();
      else if (hash === "profile") showProfile();
      else { leavePass(); showModule(); summary(); }
    } finally {
      restoring = false;
    }
  }
  window.addEventListener("popstate", () => route(location.hash.slice(1)));

  // An instruction of an earlier stage: where it went, and its line as the pass left it.
  function goneHtml(name) {
    const now = (data.renamed || {})[name];
    let html = "<h2>" + esc(name) + "</h2>";
    html += now ? '<p>Not in the optimized module by this name: it was fused into what is now ' + nameLink(now) + ".</p>"
      : '<p class="stat">Not in the optimized module (a pass removed it).</p>';
    const p = data.passes[state.pass];
    const side = p && p.sides && (p.sides.after[name] || p.sides.before[name]);
    if (side) html += "<h3>In " + esc(p.name) + "</h3><pre>" + esc(side.line) + "</pre>";
    return html;
  }

  // What the opcode computes (xla_teach/hlo/op_semantics.py), with its example and the docs page.
  function semanticsHtml(opcode) {
    const s = (data.semantics || {})[opcode];
    if (!s) return "";
    const page = data.semanticsPage ? ' &middot; <a target="_blank" href="' + esc(data.semanticsPage) + "#op-" + esc(opcode) +
      '">operation semantics</a>' : ' &middot; <span class="stat">docs: Operation semantics, ' + esc(opcode) + "</span>";
    let html = '<p class="semantics">' + esc(s.summary).replace(/``([^`]+)``/g, "<code>$1</code>") + page + "</p>";
    if (s.example) html += '<details class="semantics"><summary>an example of ' + esc(opcode) + "</summary><pre>" + esc(s.example) + "</pre></details>";
    return html;
  }

  function instructionHtml(name, o) {
    let html = "<h2>" + esc(name) + ' <span class="stat">' + esc(o.opcode) + "</span></h2>";
    html += semanticsHtml(o.opcode);
    html += "<pre>" + esc(o.line) + "</pre><dl>";
    html += "<dt>shape</dt><dd><code>" + esc(o.shape) + "</code></dd>";
    html += "<dt>computation</dt><dd>" + esc(o.computation) + "</dd>";
    if (o.op_name) html += "<dt>op_name</dt><dd><code>" + esc(o.op_name) + "</code></dd>";
    if (o.fusion) html += "<dt>fused into</dt><dd>" + nameLink(o.fusion) + "</dd>";
    if (o.fusion_kind) html += "<dt>fusion kind</dt><dd>" + esc(o.fusion_kind) + " (" + o.members.length + " instructions) &middot; " +
      '<a data-open-fusion="' + esc(name) + '">open or close it in the graph</a></dd>';
    if (o.called) {
      html += "<dt>calls</dt><dd>" + o.called.map((c) => esc(c.role) + " " + esc(c.computation) + " (" + c.members.length + " instructions)").join(", ") +
        ' &middot; <a data-open-fusion="' + esc(name) + '">open or close it in the graph</a></dd>';
      const t = data.profile && data.profile.thunks[name];
      if (o.trip_count !== undefined || (t && t.iterations)) {
        html += "<dt>iterations</dt><dd>" + (o.trip_count !== undefined ? o.trip_count + " (known when compiled: <code>known_trip_count</code>)" : "") +
          (t && t.iterations ? (o.trip_count !== undefined ? "; " : "") + t.iterations + " measured, " + t.per_iteration_us.toFixed(2) +
            " \u00b5s per iteration" : "") + "</dd>";
      }
    }
    const scope = graph.groupOf(name);
    if (scope && scope.depth) html += "<dt>group</dt><dd>" + graph.ancestors(scope.id).reverse().slice(1).map((id) => esc(graph.groups.get(id).label)).join(" &rsaquo; ") +
      ' &middot; <a data-focus-group="' + esc(scope.id) + '">focus on it</a></dd>';
    if (o.kernel) html += "<dt>kernel</dt><dd><code>" + esc(o.kernel) + "</code></dd>";
    if (o.buffer) html += "<dt>buffer</dt><dd>" + esc(o.buffer) + "</dd>";
    if (o.sharding) html += "<dt>sharding</dt><dd>" + esc(o.split) + ": <code>" + esc(o.sharding) + "</code></dd>";
    html += liveHtml(name);
    const t = data.profile && data.profile.thunks[name];
    if (t) html += "<dt>time</dt><dd>" + t.us.toFixed(2) + " \u00b5s per run (" + (100 * t.us / Math.max(data.profile.run_us, 1e-9)).toFixed(1) + "% of a run)</dd>";
    const share = insideShare(name);
    if (share) html += "<dt>time</dt><dd>\u2248 " + share.us.toFixed(2) + " \u00b5s of its fusion's " + data.profile.thunks[o.fusion].us.toFixed(2) +
      " \u00b5s (estimated from " + share.alone_us.toFixed(2) + " \u00b5s when it runs alone, unfused)</dd>";
    html += "</dl>";
    if (o.source_file) {
      const code = (data.sources[o.source_file] || {})[String(o.source_line)];
      html += "<h3>Python source</h3><div>" + esc(o.source_file) + ":" + o.source_line + "</div>";
      if (code !== undefined) html += '<pre class="source">' + esc(code) + "</pre>";
      const same = Object.entries(data.instructions).filter(([n, x]) => n !== name &&
        x.source_file === o.source_file && x.source_line === o.source_line).map(([n]) => n);
      if (same.length) html += '<div class="stat">Same line: ' + same.slice(0, 40).map(nameLink).join(", ") + (same.length > 40 ? " &hellip;" : "") + "</div>";
    }
    const decisions = fusionDecisions(name);
    if (decisions.length) {
      html += "<h3>Fusion decisions</h3><ul class=notes>" + decisions.slice(0, 8).map((d) => "<li><span class=stat>" + esc(d.pass) +
        ":</span> " + linkNames(esc(d.note)) + "</li>").join("") + "</ul>";
    }
    if (o.members) html += "<h3>Fused instructions</h3><div>" + o.members.map(nameLink).join(", ") + "</div>";
    const inside = data.profile && (data.profile.inside || {})[name];
    if (inside) {
      const ranked = Object.entries(inside.members).sort((a, b) => b[1].us - a[1].us);
      html += "<h3>Time inside (estimated)</h3><ul>" + ranked.map(([m, x]) => "<li>" + nameLink(m) + " &middot; \u2248 " + x.us.toFixed(2) +
        " \u00b5s</li>").join("") + '</ul><p class="stat">Unfused, these instructions take ' + inside.alone_us.toFixed(2) +
        " \u00b5s as separate kernels; fused, " + data.profile.thunks[name].us.toFixed(2) + " \u00b5s. Each one's share of the fusion's time " +
        "follows its time alone (the explorer ran the defused module too).</p>";
    }
    const kernel = o.kernel ? o.kernel : (o.fusion && data.instructions[o.fusion] ? data.instructions[o.fusion].kernel : "");
    if (kernel) {
      html += '<h3>Kernel code</h3><div class="code" data-kernel="' + esc(kernel) + '" data-mark="' + esc(name) + '">' +
        '<p class="stat">' + (o.kernel ? "" : "Computed inside " + nameLink(o.fusion) + "'s kernel; its lines are marked. ") +
        "Loading the code of " + esc(kernel) + "\u2026</p></div>";
      showCode(kernel, name);
    }
    return html;
  }

  // ---- a kernel's code: inflated from the page's packed sections on first use ----------------
  let codeTable = null;
  function kernelCode() {
    if (!codeTable) {
      const bytes = Uint8Array.from(atob(data.code || ""), (c) => c.charCodeAt(0));
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
      codeTable = new Response(stream).text().then((text) => JSON.parse(text));
    }
    return codeTable;
  }

  // The sections (LLVM IR, optimized, assembly, runtime library, PTX), each folded, with the lines
  // that define a value named after the instruction marked (the emitter names them: %"multiply.17").
  function showCode(kernel, name) {
    if (!data.code) return;
    const own = new RegExp('^\\s*%"?' + name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + '(\\.[0-9]+)*"? =');
    kernelCode().then((table) => {
      const box = $("details").querySelector('.code[data-kernel="' + CSS.escape(kernel) + '"][data-mark="' + CSS.escape(name) + '"]');
      if (!box) return;
      const sections = table[kernel] || [];
      let marked = 0;
      box.innerHTML = (box.querySelector("p.stat") ? box.querySelector("p.stat").outerHTML.replace(/Loading the code of .*$/, "</p>") : "") +
        sections.map(([title, text], i) => {
          const lines = text.split("\n").map((line) => {
            if (!own.test(line)) return esc(line);
            marked++;
            return '<mark class="own">' + esc(line) + "</mark>";
          });
          return "<details" + (i === 0 ? " open" : "") + "><summary>" + esc(title) + " of " + esc(kernel) + "</summary><pre>" +
            lines.join("\n") + "</pre></details>";
        }).join("") + (marked ? '<p class="stat">' + marked + " line(s) compute " + esc(name) + " (marked).</p>" : "");
    });
  }

  // The selected instruction's buffer or thunk (its fusion's, for a fused one) in the memory and
  // profile views: one selection, outlined in every view.
  function markBars() {
    const name = state.selected;
    const info = (name && data.instructions[name]) || {};
    for (const bar of view.querySelectorAll("g.buffer, g.thunk")) {
      const names = (bar.dataset.names || bar.dataset.name || "").split(" ");
      bar.classList.toggle("selected", !!name && (names.includes(name) || (!!info.fusion && names.includes(info.fusion))));
    }
  }

  // Where an instruction's buffer lives in the schedule, and the buffers it could not share bytes with.
  function liveHtml(name) {
    const m = data.memory;
    const mine = m && m.buffers.find((b) => b.names.includes(name));
    if (!mine) return "";
    const overlap = m.buffers.filter((b) => b !== mine && b.start <= mine.end && mine.start <= b.end).sort((a, b) => b.size - a.size);
    return "<dt>live</dt><dd>steps " + mine.start + "&ndash;" + mine.end + " of " + m.steps.length + " (" + esc(mine.kind) + ", " + kib(mine.size) +
      "); could not share bytes with the " + overlap.length + " buffer(s) live at the same time" + (overlap.length ? ", the largest: " +
      overlap.slice(0, 6).map((b) => nameLink(b.names[0]) + " (" + kib(b.size) + ", steps " + b.start + "&ndash;" + b.end + ")").join(", ") : "") + "</dd>";
  }

  // What the fusion passes said about an instruction: why it was (or was not) fused, by name.
  function fusionDecisions(name) {
    const found = [];
    for (const p of data.passes) {
      if (!/fusion/.test(p.name)) continue;
      for (const note of p.notes) {
        const words = note.match(/[A-Za-z_][\w.\-]*/g) || [];
        if (words.some((w) => w.replace(/\.$/, "") === name)) found.push({pass: p.name, note});
      }
    }
    return found;
  }

  // ---- memory: every buffer the peak counts, over the ENTRY's schedule -------------------------
  const KIND_COLOURS = {parameter: "#ffcc80", constant: "#c5e1a5", output: "#90caf9", external: "#b0bec5", temp: "#ce93d8"};
  function kib(n) { return n >= 1 << 20 ? (n / (1 << 20)).toFixed(1) + " MiB" : n >= 1024 ? (n / 1024).toFixed(1) + " KiB" : n + " B"; }

  // Memory as buffer assignment sees it: above, the bytes live at each step of the schedule (the
  // peak in red) with a byte axis; below, every buffer as a rectangle in (step x address): from its
  // first to its last step, at its offset in its allocation, as tall as its bytes. Temporaries that
  // share an arena stack and reuse its bytes as their live ranges allow.
  function showMemory() {
    const m = data.memory;
    state.view = "memory";
    if (!m) { view.innerHTML = '<div class="empty">No buffer assignment on this backend.</div>'; return; }
    const steps = Math.max(m.steps.length, 1), W = 18, left = 150, top = 36, chartH = 90;
    const live = new Array(steps).fill(0);
    for (const b of m.buffers) for (let t = b.start; t <= Math.min(b.end, steps - 1); t++) live[t] += b.size;
    const most = Math.max(1, ...live);
    // Allocations stacked from the top, each as tall as its bytes (at least a few pixels).
    const allocs = new Map();
    for (const b of m.buffers) {
      const key = b.allocation === undefined ? "?" + b.kind : b.allocation;
      const a = allocs.get(key) || {key, kind: b.kind, size: 0, buffers: []};
      a.size = Math.max(a.size, (b.offset || 0) + b.size);
      a.buffers.push(b);
      allocs.set(key, a);
    }
    // The temporaries' arena first (where bytes are reused), then outputs, parameters, constants.
    const rank = {temp: 0, output: 1, parameter: 2, constant: 3};
    const order = [...allocs.values()].sort((a, b) => (rank[a.kind] ?? 4) - (rank[b.kind] ?? 4) || b.size - a.size);
    const total = order.reduce((sum, a) => sum + a.size, 0) || 1;
    const perByte = Math.max(600, 22 * order.length) / total;
    const minH = 16;
    let y = top + chartH + 50;
    const width = left + steps * W + 30;
    let body = "";
    for (const a of order) {
      const h = Math.max(minH, a.size * perByte);
      body += '<rect x="' + left + '" y="' + y + '" width="' + steps * W + '" height="' + h + '" fill="#fafafa" stroke="#cfd8dc"/>' +
        '<text x="' + (left - 6) + '" y="' + (y + 12) + '" font-size="11" text-anchor="end" fill="#37474f">' +
        esc(((a.key + "").startsWith("?") ? "" : "#" + a.key + " ") + a.kind + ", " + kib(a.size)) + "</text>";
      for (const b of a.buffers) {
        const by = y + (b.offset || 0) * (h / Math.max(a.size, 1)), bh = Math.max(3, b.size * (h / Math.max(a.size, 1)));
        const end = Math.min(b.end, steps - 1), bx = left + b.start * W, bw = (end - b.start + 1) * W - 2;
        const label = (b.labels || b.names).map((l, k) => (l === b.names[k] ? displayName(l) : l)).join(", ");
        body += '<g class="buffer" data-buffer="' + m.buffers.indexOf(b) + '" data-name="' + esc(b.names[0]) + '" data-names="' +
          esc(b.names.join(" ")) + '"><rect x="' + bx + '" y="' + by +
          '" width="' + bw + '" height="' + bh + '" fill="' + (KIND_COLOURS[b.kind] || "#cfd8dc") + '" stroke="' +
          (b.start <= m.peak_step && m.peak_step <= b.end ? "#e53935" : "#78909c") + '" stroke-width="0.6"><title>' + esc(label) + " (" + b.kind +
          "): " + kib(b.size) + " at offset " + (b.offset || 0) + ", steps " + b.start + "-" + b.end + "</title></rect>" +
          (bh >= 15 && bw >= 70 ? '<text x="' + (bx + 4) + '" y="' + (by + 12) + '" font-size="11" fill="#212121">' +
            esc(label.length > bw / 6.5 ? label.slice(0, Math.max(3, Math.floor(bw / 6.5) - 1)) + "\u2026" : label) + "</text>" : "") + "</g>";
      }
      y += h + 10;
    }
    const height = y + 10;
    let svg = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ' + width + " " + height + '" width="' + width + '" height="' + height + '" class="memory">';
    svg += '<text x="8" y="18" font-size="13" font-weight="600" fill="#212121">Bytes live at each step (peak ' + kib(m.peak_bytes) + " at step " +
      m.peak_step + "); below, each buffer at its offset in its allocation, over its live range</text>";
    // The byte axis of the chart, and the step axis under it.
    for (const f of [0, 0.5, 1]) {
      const ty = top + chartH - chartH * f;
      svg += '<line x1="' + (left - 3) + '" y1="' + ty + '" x2="' + (left + steps * W) + '" y2="' + ty + '" stroke="#eceff1"/>' +
        '<text x="' + (left - 6) + '" y="' + (ty + 4) + '" font-size="11" text-anchor="end" fill="#37474f">' + kib(Math.round(most * f)) + "</text>";
    }
    live.forEach((bytes, t) => {
      const h = chartH * bytes / most;
      svg += '<rect x="' + (left + t * W) + '" y="' + (top + chartH - h) + '" width="' + (W - 2) + '" height="' + h + '" fill="' +
        (t === m.peak_step ? "#e53935" : "#90a4ae") + '"><title>step ' + t + " " + esc(m.steps[t] || "") + ": " + kib(bytes) + "</title></rect>";
    });
    const every = Math.max(1, Math.ceil(60 / W));
    for (let t = 0; t < steps; t += every) {
      svg += '<text x="' + (left + t * W + W / 2) + '" y="' + (top + chartH + 16) + '" font-size="11" text-anchor="middle" fill="#37474f">' + t + "</text>";
    }
    svg += '<text x="' + (left - 6) + '" y="' + (top + chartH + 16) + '" font-size="11" text-anchor="end" fill="#37474f">step</text>';
    svg += '<line x1="' + (left + m.peak_step * W + W / 2 - 1) + '" y1="' + top + '" x2="' + (left + m.peak_step * W + W / 2 - 1) + '" y2="' + height +
      '" stroke="#e53935" stroke-dasharray="4 3"/>';
    svg += body + "</svg>";
    place("memory: bytes over the schedule, buffers by address", svg);
    markBars();
    const atPeak = m.buffers.filter((b) => b.start <= m.peak_step && m.peak_step <= b.end).sort((a, b) => b.size - a.size);
    $("details").innerHTML = "<h2>Memory</h2><dl><dt>peak</dt><dd>" + kib(m.peak_bytes) + " (" + m.peak_bytes + " bytes) at step " + m.peak_step +
      ", " + nameLink(m.steps[m.peak_step] || "") + "</dd><dt>temporaries</dt><dd>" + kib(m.temp_bytes) + " in one arena, reused as live ranges allow</dd></dl>" +
      "<h3>Live at the peak</h3><ul>" + atPeak.map((b) => "<li>" + b.names.map(nameLink).join(", ") + " &middot; " + b.kind + " &middot; " + kib(b.size) +
      " &middot; steps " + b.start + "&ndash;" + b.end + "</li>").join("") + "</ul>" +
      '<p class="stat">Two buffers can share bytes only if their live ranges do not overlap: every buffer live at the peak overlaps all the others there. Parameters and constants live for the whole run.</p>';
  }
  $("memory").addEventListener("click", () => { showMemory(); remember("memory"); });
  view.addEventListener("click", (e) => {
    const bar = e.target.closest("g.buffer");
    if (bar) selectInstruction(bar.dataset.name, true);
  });

  // ---- profile: measured time per thunk, heat colours, the runs' timeline ----------------------
  let timeline = null;  // the profile's timeline while it is shown
  function heat(share) {  // 0 -> pale yellow, 1 -> red
    return "hsl(" + Math.round(55 - 55 * share) + ", 95%, " + Math.round(88 - 38 * share) + "%)";
  }

  // A fused instruction's estimated share of its fusion's time ({us, alone_us}), when profiled.
  function insideShare(name) {
    const o = data.instructions[name];
    const inside = o && o.fusion && data.profile && (data.profile.inside || {})[o.fusion];
    return inside ? inside.members[name] : undefined;
  }

  // WCAG's relative luminance of a CSS colour the browser resolved ("rgb(r, g, b)").
  function luminance(css) {
    const [r, g, b] = (css.match(/[\d.]+/g) || ["0", "0", "0"]).slice(0, 3).map((v) => {
      const c = Number(v) / 255;
      return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  }

  // Heat on a box: its fill shows the time, a band down its left edge keeps its category colour,
  // and its text is black or white, whichever contrasts more with the heat colour.
  function heatBox(node, share) {
    const shape = node.querySelector("polygon, ellipse");
    if (!shape) return;
    const category = shape.getAttribute("fill");
    shape.style.fill = heat(share);
    const fill = getComputedStyle(shape).fill;
    const text = luminance(fill) > 0.179 ? "#000000" : "#ffffff";
    for (const t of node.querySelectorAll("text")) t.setAttribute("fill", text);
    const box = shape.getBBox();
    node.insertAdjacentHTML("beforeend", '<rect class="category" x="' + box.x + '" y="' + box.y + '" width="7" height="' + box.height +
      '" fill="' + category + '" stroke="' + (shape.getAttribute("stroke") || "#78909c") + '"/>');
  }

  // One scale for what is drawn: the slowest box shown (a kernel, or a closed group's kernels
  // together) is red, the others in proportion.
  function paintHeat() {
    const p = data.profile;
    if (!p || !state.heat || state.view !== "module") return;
    const inside = {};
    for (const [name, t] of Object.entries(p.thunks)) {
      const g = graph.groupOf(name);
      if (g) for (const id of graph.ancestors(g.id)) inside[id] = (inside[id] || 0) + t.us;
    }
    const shown = [];
    for (const node of view.querySelectorAll("svg.module-graph g.node[data-name]")) {
      const t = insideShare(node.dataset.name) || p.thunks[node.dataset.name] || p.thunks[(data.instructions[node.dataset.name] || {}).fusion];
      if (t) shown.push([node, t.us]);
    }
    for (const box of view.querySelectorAll("svg.module-graph g.scope-box")) {
      const us = inside[box.dataset.group];
      if (!us) continue;
      shown.push([box, us]);
      box.querySelector("title").textContent += "\n" + us.toFixed(1) + " \u00b5s per run inside";
    }
    const most = Math.max(1e-9, ...shown.map(([, us]) => us));
    for (const [node, us] of shown) heatBox(node, us / most);
  }

  function showProfile() {
    const p = data.profile;
    state.view = "profile";
    if (!p) {
      view.innerHTML = '<div class="empty">No profile in this page: write it with <code>xla-teach explore --profile N</code> or <code>compiled.explore(profile_runs=N)</code>.</div>';
      return;
    }
    // The timeline draws itself (timeline_chart.js) and zooms along time only, so the pane's own
    // pan and zoom leave it alone.
    view.innerHTML = '<div class="caption">profile: ' + p.runs + " timed runs, " + p.run_us.toFixed(1) +
      ' \u00b5s each (mean); the last run shown</div><div class="timeline"></div>';
    timeline = drawTimeline(view.querySelector(".timeline"), p.timeline, {
      label: displayName, select: (name) => selectInstruction(name, true), drawn: markBars, mean: (name) => (p.thunks[name] || {}).us});
    // A loop's thunk includes its body's kernels: those are listed under it and counted once.
    const ranked = Object.entries(p.thunks).filter(([, t]) => !t.nested).sort((a, b) => b[1].us - a[1].us);
    const total = ranked.reduce((sum, [, t]) => sum + t.us, 0) || 1;
    const inside = (loop) => Object.entries(p.thunks).filter(([n, t]) => t.nested && loopOf(n) === loop).sort((a, b) => b[1].us - a[1].us);
    const item = ([n, t]) => "<li>" + nameLink(n) + " &middot; " + t.us.toFixed(2) + " \u00b5s &middot; " + (100 * t.us / total).toFixed(1) +
      "% &middot; " + esc(t.kind) + (t.kind === "collective" ? " &middot; " + kib(t.bytes || 0) + " in per device" : "") + (t.iterations ? " &middot; " + t.iterations + " iterations, " + t.per_iteration_us.toFixed(2) +
      " \u00b5s each" : "") + (inside(n).length ? "<ul>" + inside(n).map(([m, u]) => "<li>" + nameLink(m) + " &middot; " + u.us.toFixed(2) +
      " \u00b5s in all</li>").join("") + "</ul>" : "") + "</li>";
    $("details").innerHTML = "<h2>Profile</h2><p class=stat>Mean over " + p.runs + " runs on fake arguments, after two warm-up runs. " +
      "In the graph (<kbd>0</kbd>), <b>Heat</b> (<kbd>h</kbd>) colours the boxes by the time of the kernel that computes them, pale to red " +
      "(a band keeps each box's category colour); inside an opened fusion, by each instruction's estimated share of the fusion's time.</p>" +
      "<h3>Thunks by time</h3><p class=stat>They add up to " + total.toFixed(1) + " \u00b5s of the " + p.run_us.toFixed(1) +
      " \u00b5s run (the rest is the host's work between them); a loop's kernels are listed under it, inside its time.</p><ul>" +
      ranked.map(item).join("") + "</ul>" + collectivesHtml(p) + scopesHtml(p, total);
  }

  // A program of several devices: what its collectives cost device 0 (time includes the wait for the slowest member).
  function collectivesHtml(p) {
    const all = Object.entries(p.thunks).filter(([, t]) => t.kind === "collective");
    if (!all.length) return "";
    const us = all.reduce((sum, [, t]) => sum + t.us * (t.nested ? 0 : 1), 0);
    const bytes = all.reduce((sum, [, t]) => sum + (t.bytes || 0) * t.calls, 0);
    return "<h3>Between devices</h3><p class=stat>This program runs on " + (p.devices || 1) + " devices, one thread each; the times are device 0's. Its " +
      all.length + " collective(s) take " + us.toFixed(1) + " \u00b5s of the " + p.run_us.toFixed(1) + " \u00b5s run (" + (100 * us / Math.max(p.run_us, 1e-9)).toFixed(1) +
      "%) and take in " + kib(bytes) + " from each device per run. A collective's time includes waiting for the slowest device to arrive.</p><ul>" +
      all.sort((a, b) => b[1].us - a[1].us).map(([n, t]) => "<li>" + nameLink(n) + " &middot; " + t.us.toFixed(2) + " \u00b5s &middot; " + kib(t.bytes || 0) +
      " &middot; " + rate((t.bytes || 0) / Math.max(t.us, 1e-9)) + "</li>").join("") + "</ul>";
  }
  function rate(bytesPerUs) {  // bytes per microsecond = MB/s
    return bytesPerUs >= 1e3 ? (bytesPerUs / 1e3).toFixed(2) + " GB/s" : bytesPerUs.toFixed(bytesPerUs >= 10 ? 0 : 2) + " MB/s";
  }

  // The ENTRY instruction (a loop, conditional or call) whose computations hold ``name``.
  let callerOf = null;  // computation -> the instruction that calls it (made once)
  function loopOf(name) {
    if (!callerOf) {
      callerOf = new Map();
      for (const [n, o] of Object.entries(data.instructions)) {
        for (const c of o.called || []) callerOf.set(c.computation, n);
        if (o.fusion_kind && (o.members || []).length) callerOf.set((data.instructions[o.members[0]] || {}).computation, n);
      }
    }
    let comp = (data.instructions[name] || {}).computation;
    for (let k = 0; k < 8 && comp && comp !== data.entry; k++) {
      const owner = callerOf.get(comp);
      if (!owner) return null;
      if (data.instructions[owner].computation === data.entry) return owner;
      comp = data.instructions[owner].computation;
    }
    return null;
  }

  // Time by op_name scope, nested, three levels deep; fused instructions count by their estimated share.
  function scopesHtml(p, total) {
    const scopes = Object.entries(p.scopes || {});
    if (!scopes.length) return "";
    const depth = (k) => window.XlaTeachModuleGraph.scopes(k).length;
    return '<h3>Time by op_name scope</h3><ul class="scopes">' + scopes.filter(([k]) => depth(k) <= 3).map(([k, us]) =>
      '<li style="margin-left:' + (depth(k) - 1) * 1.2 + 'em">' + esc(window.XlaTeachModuleGraph.scopes(k).pop()) + " &middot; " + us.toFixed(2) +
      " \u00b5s &middot; " + (100 * us / total).toFixed(1) + "%</li>").join("") + "</ul>";
  }
  $("profile").addEventListener("click", () => { showProfile(); remember("profile"); });
  view.addEventListener("click", (e) => {
    const bar = e.target.closest("g.thunk");
    if (bar) selectInstruction(bar.dataset.name, true);
  });

  // ---- search ----------------------------------------------------------------------------
  const search = $("search"), results = $("results");
  let hits = [], active = 0;
  function runSearch() {
    const q = search.value.trim().toLowerCase();
    for (const node of view.querySelectorAll("g.node")) node.classList.remove("match");
    if (!q) { results.classList.add("hidden"); return; }
    hits = Object.entries(data.instructions).filter(([n, o]) => n.toLowerCase().includes(q) ||
      o.opcode.toLowerCase() === q || (o.op_name || "").toLowerCase().includes(q));
    // The name itself first, then names that start with it, then the rest.
    const rank = ([n]) => (n.toLowerCase() === q ? 0 : n.toLowerCase().startsWith(q) ? 1 : 2);
    hits = hits.map((h, i) => [h, i]).sort((a, b) => rank(a[0]) - rank(b[0]) || a[1] - b[1]).map(([h]) => h).slice(0, 200);
    active = 0;
    const names = new Set(hits.map(([n]) => n));
    for (const node of view.querySelectorAll("g.node")) node.classList.toggle("match", names.has(node.dataset.name));
    results.innerHTML = hits.length ? hits.map(([n, o], i) => '<div data-name="' + esc(n) + '"' + (i === 0 ? ' class="active"' : "") +
      ">" + esc(n) + '<span class="op">' + esc(o.opcode) + (o.op_name ? " &middot; " + esc(o.op_name) : "") + "</span></div>").join("")
      : '<div class="op">no instruction matches</div>';
    const r = search.getBoundingClientRect();
    results.style.left = r.left + "px";
    results.style.top = r.bottom + 2 + "px";
    results.classList.remove("hidden");
  }
  search.addEventListener("input", runSearch);
  search.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && hits.length) {  // then the keys are shortcuts again, not the search text
      selectInstruction(hits[active][0], false, "module");
      results.classList.add("hidden");
      search.blur();
    }
    else if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      active = (active + (e.key === "ArrowDown" ? 1 : hits.length - 1)) % Math.max(hits.length, 1);
      [...results.children].forEach((d, i) => d.classList.toggle("active", i === active));
    } else if (e.key === "Escape") { results.classList.add("hidden"); search.blur(); }
  });
  results.addEventListener("click", (e) => {
    const d = e.target.closest("div[data-name]");
    if (d) { selectInstruction(d.dataset.name, false, "module"); results.classList.add("hidden"); search.blur(); }
  });

  // ---- keys --------------------------------------------------------------------------------
  document.addEventListener("keydown", (e) => {
    if (e.target === search || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "j" || e.key === "ArrowDown") { e.preventDefault(); step(1); }
    else if (e.key === "k" || e.key === "ArrowUp") { e.preventDefault(); step(-1); }
    else if (state.view === "profile" && timeline && "+=-,.f".includes(e.key)) {  // the timeline zooms along time
      if (e.key === "+" || e.key === "=") timeline.zoom(2);
      else if (e.key === "-") timeline.zoom(0.5);
      else if (e.key === "f") timeline.run(timeline.current());
      else timeline.run(timeline.current() + (e.key === "," ? -1 : 1));
    }
    else if (e.key === "f") fit();
    else if (e.key === "+" || e.key === "=") zoomAt(1.25, view.clientWidth / 2, view.clientHeight / 2);
    else if (e.key === "-") zoomAt(0.8, view.clientWidth / 2, view.clientHeight / 2);
    else if (e.key === "/") { e.preventDefault(); search.focus(); }
    else if (e.key === "0") { leavePass(); showModule(); summary(); remember("module"); }
    else if (e.key === "m") { showMemory(); remember("memory"); }
    else if (e.key === "p") { showProfile(); remember("profile"); }
    else if (e.key === "h") groupTool("heat");
    else if (e.key === "]" && state.pass >= 0) showStep(state.step + 1);
    else if (e.key === "[" && state.pass >= 0) showStep(state.step - 1);
  });
  window.addEventListener("resize", () => { if (state.view === "profile" && timeline) timeline.redraw(); else fit(); });

  // ---- start: the optimized module, or what the address asks for -----------------------------
  document.body.classList.add("js");
  showModule();
  window.explorerTimings = {firstPictureMs: performance.now(), layoutMs: graph.layoutMs()};
  function summary() {
    $("details").innerHTML = '<h2>' + esc(data.title) + '</h2><p>' + data.passes.length + ' pass runs, ' +
      data.passes.filter((p) => p.changed).length + ' changed the module. Pick a pass on the left, or a box in the graph.</p>' +
      '<p class="stat"><kbd>j</kbd>/<kbd>k</kbd> next/previous pass &middot; <kbd>/</kbd> search &middot; <kbd>f</kbd> fit &middot; ' +
      '<kbd>+</kbd>/<kbd>-</kbd> zoom &middot; <kbd>0</kbd> the optimized module &middot; <kbd>m</kbd> memory &middot; <kbd>p</kbd> profile &middot; ' +
      '<kbd>h</kbd> heat &middot; drag to pan, wheel to zoom &middot; Back returns to where you were</p>';
  }
  const hash = location.hash.slice(1);
  if (hash && hash !== "module") route(hash); else summary();
})();
