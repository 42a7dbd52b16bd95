// The optimized module as a graph that scales: instructions grouped by the op_name scopes the front
// end wrote (jit(train_step)/jvp(loss)/dot_general sits in jit(train_step) > jvp(loss)), each group
// drawn as one box until it is opened, like Model Explorer's layers. Only what is open is laid out,
// by dagre (vendor/dagre.min.js), and each layout is kept, so a module of thousands of instructions
// costs what its open groups cost.
//
//   const graph = XlaTeachModuleGraph(data);   // data: the page's JSON; every group closed
//   graph.firstView(width, height);            // open what fits a pane of that size
//   view.innerHTML = graph.svg();              // open groups as clusters, closed ones as boxes
//   graph.toggle("g:jvp(loss)"); graph.reveal("dot.3"); graph.toggleFusion("fusion.2");
//
// Scalar constants are left out (as XLA's graph dumps inline them): their value is in their users'
// HLO lines. The ENTRY's parameters (and its array constants), when there are more than a few, are
// gathered into one closed group of their own, as Model Explorer gathers a model's inputs. More than
// MAX_LOOSE instructions outside any scope beside the scopes get a group of their own; a group with
// more instructions of its own than MAX_MEMBERS is cut into runs of consecutive instructions, so
// that a module without op_names -- or an optimizer's update of every weight -- opens a piece at a time.
//
// Level of detail: firstView(width, height) opens groups breadth first only while the layout still
// fits the given pane at scale 1 (labels 11 px; up to 1.35 times its width and 2.5 times its height,
// the minimap shows the rest), so the first picture of a module of any size is readable; expandAll / collapseAll / focus(group) change what is open, never the text size.
(function () {
  "use strict";
  const MAX_MEMBERS = 40;
  const MAX_LOOSE = 6;  // instructions outside any scope beside the scopes, before they get a group of their own
  const GATHER = 4;  // more parameters (or array constants) than this are gathered into one group
  const EXPAND_ALL_BOXES = 400;
  const TALL = 2.5, WIDE = 1.35;
  const LONG_WIDTH = 1400;  // a first layout wider than this is laid out again without its long edges
  const FIRST_VIEW_BOXES = 60, FIRST_VIEW_MS = 1500;  // the first picture's budget: boxes, and time spent trying
  const LONG_RANKS = 3;  // edges running further are left out of the second layout (see layout())  // expandAll opens level by level while the picture stays under this
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
  const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + "\u2026" : s);

  // "jit(f)/transpose(jvp(g))/mul" -> ["jit(f)", "transpose(jvp(g))", "mul"]; a "/" inside brackets stays.
  function scopes(opName) {
    const parts = [];
    let depth = 0, current = "";
    for (const c of opName) {
      if (c === "(" || c === "[") depth++;
      else if (c === ")" || c === "]") depth--;
      if (c === "/" && depth === 0) { parts.push(current); current = ""; } else current += c;
    }
    parts.push(current);
    return parts;
  }

  function hidden(o) { return o.opcode === "constant" && /\[\]/.test(o.shape); }

  function XlaTeachModuleGraph(data) {
    const instrs = data.instructions;
    const names = Object.keys(instrs).filter((n) => instrs[n].computation === data.entry && !hidden(instrs[n]));
    const shown = new Set(names);

    // ---- the group tree: id "g:" + scope path; "" is the module itself ----------------------
    const groups = new Map();
    function group(path) {
      const id = "g:" + path.join("/");
      if (!groups.has(id)) {
        const parent = path.length ? group(path.slice(0, -1)) : null;
        const g = {id, label: path.length ? path[path.length - 1] : data.title, parent: parent && parent.id,
          groups: [], members: [], size: 0, depth: path.length};
        groups.set(id, g);
        if (parent) parent.groups.push(id);
      }
      return groups.get(id);
    }
    const root = group([]);
    const home = new Map();  // instruction -> its group's id
    // data.flat (a pass's before/after): no groups at all, every instruction a box of its own.
    const path = (o) => (o.op_name && o.opcode !== "parameter" && !data.flat ? scopes(o.op_name).slice(0, -1) : []);
    // The scope every instruction shares (jit(f)) is the module itself: it is left out.
    const firsts = new Set(names.map((n) => path(instrs[n])).filter((p) => p.length).map((p) => p[0]));
    const skip = firsts.size === 1 ? 1 : 0;
    const gathered = {parameter: names.filter((n) => instrs[n].opcode === "parameter"),
      constant: names.filter((n) => instrs[n].opcode === "constant")};
    for (const n of names) {
      const o = instrs[n];
      const kind = !data.flat && gathered[o.opcode] && gathered[o.opcode].length > GATHER ? o.opcode : null;
      const g = kind ? group(["#" + kind + "s"]) : group(path(o).slice(skip));
      if (kind) g.label = gathered[kind].length + " " + kind + "s";
      g.members.push(n);
      home.set(n, g.id);
    }
    // A group that holds one group and nothing else is drawn as one: "jit(f) / jvp(g)".
    for (const g of [...groups.values()].sort((a, b) => a.depth - b.depth)) {
      if (!groups.has(g.id)) continue;
      while (g !== root && g.members.length === 0 && g.groups.length === 1) {
        const only = groups.get(g.groups[0]);
        g.label += " / " + only.label;
        g.groups = only.groups;
        g.members = only.members;
        for (const c of g.groups) groups.get(c).parent = g.id;
        for (const n of g.members) home.set(n, g.id);
        groups.delete(only.id);
      }
    }
    // Cut long runs of a group's own instructions (in schedule order) into pieces. Beside subgroups
    // they go into one group of their own first ("instructions outside any scope"); runs of more
    // than MAX_MEMBERS are cut into at most MAX_MEMBERS pieces a level, so any number of loose
    // instructions opens a readable piece at a time.
    function addGroup(parent, id, label, members) {
      const g = {id, label, parent: parent.id, groups: [], members, size: 0, depth: parent.depth + 1};
      groups.set(id, g);
      parent.groups.push(id);
      for (const n of members) home.set(n, id);
      return g;
    }
    function cut(g, members, first, total, noun) {
      if (members.length <= MAX_MEMBERS) { g.members = members; for (const n of members) home.set(n, g.id); return; }
      g.members = [];
      const pieces = Math.min(MAX_MEMBERS, Math.ceil(members.length / MAX_MEMBERS));
      const run = Math.ceil(members.length / pieces);
      for (let i = 0; i < members.length; i += run) {
        const piece = members.slice(i, i + run);
        const at = first + i;
        cut(addGroup(g, g.id + "#" + at, noun + " " + (at + 1) + "\u2013" + (at + piece.length) + " of " + total, []),
          piece, at, total, noun);
      }
    }
    for (const g of data.flat ? [] : [...groups.values()]) {
      const members = g.members;
      if (g.groups.length && members.length > (g === root ? MAX_LOOSE : MAX_MEMBERS)) {
        g.members = [];
        const own = addGroup(g, g.id + "#own", g === root ? "outside any scope" : g.label + " itself", []);
        cut(own, members, 0, members.length, "instructions");
      } else if (members.length > MAX_MEMBERS) {
        cut(g, members, 0, members.length, g.id === "g:#parameters" ? "parameters" : g.id === "g:#constants" ? "constants" : "instructions");
      }
    }
    (function count(g) {
      g.size = g.members.length + g.groups.reduce((s, c) => s + count(groups.get(c)), 0);
      return g.size;
    })(root);

    const open = new Set([root.id]);
    const openFusions = new Set();
    let focused = root.id;  // the group drawn as the whole picture (focus)

    function ancestors(id) {
      const chain = [];
      for (let g = groups.get(id); g; g = g.parent !== null ? groups.get(g.parent) : null) chain.push(g.id);
      return chain;
    }

    // ---- what is drawn: boxes for closed groups and for instructions in open ones ---------------
    // An instruction that calls computations opens in place: a fusion into its fused instructions,
    // a loop into its body and condition, a conditional into its branches, a call into its callee;
    // each computation's parameters stand for the operands it is given (param_operand).
    const openable = (o) => !!o && ((o.opcode === "fusion" && !!o.members) || !!o.called);
    const partsOf = (o) => (o.opcode === "fusion" ? [{role: "", members: o.members, root: o.fused_root}] : o.called);
    const paramOwner = new Map();  // a called computation's parameter -> [the instruction, its operand index]
    for (const [n, o] of Object.entries(instrs)) {
      if (o.opcode === "fusion" && o.members) {
        for (const m of o.members) for (const x of (instrs[m] || {}).operands || []) {
          if ((instrs[x] || {}).opcode === "parameter") paramOwner.set(x, [n, instrs[x].parameter_number]);
        }
      }
      for (const part of o.called || []) for (const [param, i] of Object.entries(part.param_operand)) paramOwner.set(param, [n, i]);
    }

    function visible() {
      const nodes = [], clusters = [], rep = new Map(), drawnMembers = [];
      function under(g, id) {
        for (const n of g.members) rep.set(n, id);
        for (const c of g.groups) under(groups.get(c), id);
      }
      function draw(n, parent, member) {
        const o = instrs[n];
        if (openable(o) && openFusions.has(n)) {
          const id = "f:" + n;
          clusters.push({id, parent, fusion: n});
          for (const part of partsOf(o)) {
            const at = part.role ? id + "/" + part.role : id;
            if (part.role) clusters.push({id: at, parent: id, fusion: n, role: part.role});
            for (const m of part.members) if (instrs[m] && !hidden(instrs[m])) draw(m, at, true);
          }
        } else {
          nodes.push({id: n, parent, name: n});
          rep.set(n, n);
          if (member) drawnMembers.push(n);
        }
      }
      const top = groups.get(focused) || root;
      (function walk(g, parent) {
        for (const c of g.groups) {
          const child = groups.get(c);
          if (open.has(c)) { clusters.push({id: c, parent, group: child}); walk(child, c); }
          else { nodes.push({id: c, parent, group: child}); under(child, c); }
        }
        for (const n of g.members) draw(n, parent, false);
      })(top, null);
      const edges = new Map();
      const add = (a, b) => { if (a && b && a !== b) edges.set(a + "\u0000" + b, [a, b]); };
      // What stands for a value: its box, or for an opened instruction the root of what it calls.
      const out = (n) => {
        for (let k = 0; k < 8 && openable(instrs[n]) && openFusions.has(n) && rep.get(n) === undefined; k++) n = partsOf(instrs[n])[0].root;
        return rep.get(n);
      };
      for (const n of names) {
        const o = instrs[n];
        if (rep.has(n)) for (const x of o.operands) if (shown.has(x)) add(out(x), rep.get(n));
      }
      for (const m of drawnMembers) {
        for (const x of instrs[m].operands) {
          const p = instrs[x];
          if (!p) continue;
          const owner = paramOwner.get(x);
          if (owner) { const src = instrs[owner[0]].operands[owner[1]]; if (src) add(out(src), rep.get(m)); }
          else if (!hidden(p)) add(out(x), rep.get(m));
        }
      }
      return {nodes, clusters, edges: [...edges.values()]};
    }

    // ---- boxes' text and size ----------------------------------------------------------------
    function displayName(n) {
      const o = instrs[n];
      return o && o.opcode === "parameter" && o.op_name && !o.op_name.includes("/") ? o.op_name : n;
    }
    function lines(node) {
      if (node.group && node.group.id === "g:#parameters") return [node.group.label, "the program's inputs"];
      if (node.group && node.group.id === "g:#constants") return [node.group.label, "arrays held in the program"];
      if (node.group) return [node.group.label, node.group.size + " instructions"];
      const o = instrs[node.name];
      const second = (o.opcode === "fusion" ? "fusion " + (o.fusion_kind || "") : o.opcode) + " " + o.shape;
      const leaf = o.op_name && o.opcode !== "parameter" ? scopes(o.op_name).pop() : "";
      const text = leaf ? [displayName(node.name), second, leaf] : [displayName(node.name), second];
      if (o.split) text.push("\u25a6 " + o.split);  // how the value is split across devices
      if (o.trip_count !== undefined) text.push("\u21bb " + o.trip_count + " iterations");  // a counted loop
      return text;
    }

    // One colour per way of splitting a value, so that values split alike look alike.
    const SPLIT_COLOURS = ["#e65100", "#6a1b9a", "#00838f", "#2e7d32", "#ad1457", "#4e342e", "#283593", "#9e9d24"];
    const splitColour = new Map();
    function colourOfSplit(split) {
      if (split === "replicated") return "#90a4ae";
      if (!splitColour.has(split)) splitColour.set(split, SPLIT_COLOURS[splitColour.size % SPLIT_COLOURS.length]);
      return splitColour.get(split);
    }

    const layouts = new Map();
    // A wide picture is laid out twice: once with every edge, then without the edges that ran more than LONG_RANKS
    // ranks (each one's dummy nodes widen every rank it crosses: a forward block wired to the
    // backward pass at the bottom pushes the blocks apart). A node whose edges in (or out) were all
    // long keeps its shortest, so that it still sits below what feeds it. The long edges are then
    // drawn as light curves straight from source to target ("long" in the picture).
    function layout() {
      const key = focused + "||" + [...open].sort().join("|") + "||" + [...openFusions].sort().join("|");
      if (layouts.has(key)) return layouts.get(key);
      const v = visible();
      const started = performance.now();
      for (const node of v.nodes) {
        node.text = lines(node).map((t) => clip(t, 34));
        node.width = Math.max(60, Math.max(...node.text.map((t) => t.length)) * 6.4 + 18);
        node.height = 14 * node.text.length + 10;
      }
      const build = (edges) => {
        const g = new dagre.graphlib.Graph({compound: true});
        g.setGraph({rankdir: "TB", nodesep: 16, ranksep: 34, marginx: 16, marginy: 16});
        g.setDefaultEdgeLabel(() => ({}));
        for (const c of v.clusters) g.setNode(c.id, {});
        for (const node of v.nodes) g.setNode(node.id, {width: node.width, height: node.height});
        for (const c of v.clusters) if (c.parent) g.setParent(c.id, c.parent);
        for (const node of v.nodes) if (node.parent) g.setParent(node.id, node.parent);
        for (const [a, b] of edges) g.setEdge(a, b);
        dagre.layout(g);
        return g;
      };
      let g = build(v.edges);
      const rank = 34 + 38;
      const span = (e) => Math.abs(g.node(e[1]).y - g.node(e[0]).y) / rank;
      const wide = extent(g).W > LONG_WIDTH;
      const long = new Set(wide ? v.edges.filter((e) => span(e) > LONG_RANKS) : []);
      if (long.size) {
        for (const end of [0, 1]) {  // keep the shortest edge of a node whose edges are all long
          const byNode = new Map();
          for (const e of v.edges) (byNode.get(e[1 - end]) || byNode.set(e[1 - end], []).get(e[1 - end])).push(e);
          for (const edges of byNode.values()) {
            if (edges.every((e) => long.has(e))) long.delete(edges.reduce((a, b) => (span(a) <= span(b) ? a : b)));
          }
        }
        g = build(v.edges.filter((e) => !long.has(e)));
      }
      const result = {graph: g, visible: v, long: v.edges.filter((e) => long.has(e)), ms: performance.now() - started};
      layouts.set(key, result);
      return result;
    }

    // ---- the picture -------------------------------------------------------------------------
    // dagre's bend points joined smoothly: a quadratic curve through each point's midpoints.
    function curve(points) {
      const f = (p) => p.x.toFixed(1) + "," + p.y.toFixed(1);
      let d = "M" + f(points[0]);
      for (let i = 1; i < points.length - 1; i++) {
        const next = points[i + 1];
        d += " Q" + f(points[i]) + " " + f({x: (points[i].x + next.x) / 2, y: (points[i].y + next.y) / 2});
      }
      return d + " L" + f(points[points.length - 1]);
    }

    // The picture's bounds: dagre may route an edge around the nodes, outside the size it reports.
    function extent(graph) {
      const size = graph.graph();
      let x0 = 0, y0 = 0, x1 = size.width || 100, y1 = size.height || 60;
      for (const e of graph.edges()) {
        for (const p of graph.edge(e).points || []) {
          x0 = Math.min(x0, p.x - 8); y0 = Math.min(y0, p.y - 8); x1 = Math.max(x1, p.x + 8); y1 = Math.max(y1, p.y + 8);
        }
      }
      x0 = Math.floor(x0); y0 = Math.floor(y0);
      return {x0, y0, W: Math.ceil(x1 - x0), H: Math.ceil(y1 - y0)};
    }

    function svg() {
      const {graph, visible: v} = layout();
      const {x0, y0, W, H} = extent(graph);
      const palette = data.palette || {};
      let out = '<svg xmlns="http://www.w3.org/2000/svg" class="module-graph" viewBox="' + x0 + " " + y0 + " " + W + " " + H + '" width="' + W + '" height="' + H + '">' +
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">' +
        '<path d="M0,0 L10,5 L0,10 z" fill="#90a4ae"/></marker></defs>';
      // Outer frames first: a cluster's depth is the length of its chain of parent clusters.
      const byId = new Map(v.clusters.map((c) => [c.id, c]));
      const depth = (c) => { let d = 0; for (let p = c.parent; p && byId.has(p) && d < 64; p = byId.get(p).parent) d++; return d; };
      for (const c of v.clusters.slice().sort((a, b) => depth(a) - depth(b))) {
        const box = graph.node(c.id);
        const x = box.x - box.width / 2, y = box.y - box.height / 2;
        const trips = c.role === "body" && instrs[c.fusion].trip_count !== undefined ? " (\u00d7" + instrs[c.fusion].trip_count + ")" : "";
        const label = c.group ? "\u2212 " + c.group.label + " (" + c.group.size + ")"
          : c.role ? c.role + " of " + c.fusion + trips : "\u2212 " + c.fusion;
        out += '<g class="cluster ' + (c.group ? "scope" : "fused") + '" ' + (c.group ? 'data-group="' + esc(c.id) + '"' : 'data-fusion="' + esc(c.fusion) + '"') +
          '><rect x="' + x + '" y="' + y + '" width="' + box.width + '" height="' + box.height + '" rx="6"/>' +
          '<text x="' + (x + 6) + '" y="' + (y + 12) + '"><title>close ' + esc(c.group ? c.group.label : c.fusion) + "</title>" + esc(clip(label, Math.max(8, box.width / 6.2))) + "</text></g>";
      }
      for (const e of graph.edges()) {
        const points = graph.edge(e).points || [];
        if (!points.length) continue;
        out += '<path class="edge" marker-end="url(#arrow)" d="' + curve(points) + '"/>';
      }
      for (const [a, b] of layout().long) {  // from the bottom of one box to the top of the other
        const s = graph.node(a), t = graph.node(b);
        const y0 = s.y + (t.y >= s.y ? s.height / 2 : -s.height / 2), y1 = t.y + (t.y >= s.y ? -t.height / 2 : t.height / 2);
        const bend = Math.max(40, Math.abs(y1 - y0) / 3) * (y1 >= y0 ? 1 : -1);
        out += '<path class="edge long" marker-end="url(#arrow)" d="M' + s.x.toFixed(1) + "," + y0.toFixed(1) + " C" + s.x.toFixed(1) + "," +
          (y0 + bend).toFixed(1) + " " + t.x.toFixed(1) + "," + (y1 - bend).toFixed(1) + " " + t.x.toFixed(1) + "," + y1.toFixed(1) + '"/>';
      }
      for (const node of v.nodes) {
        const box = graph.node(node.id);
        const x = box.x - box.width / 2, y = box.y - box.height / 2;
        const points = x + "," + y + " " + (x + box.width) + "," + y + " " + (x + box.width) + "," + (y + box.height) + " " + x + "," + (y + box.height);
        let colours = ["#eceff1", "#78909c", "#263238"], attrs, title;
        if (node.group) {
          attrs = 'class="scope-box" data-group="' + esc(node.id) + '"';
          title = node.group.label + ": " + node.group.size + " instructions (click to open)";
        } else {
          const o = instrs[node.name];
          colours = palette[o.category] || ["white", "#9e9e9e", "black"];
          attrs = 'class="node' + (o.opcode === "fusion" ? " fusion" : "") + (o.called ? " openable" : "") + (o.category === "collective" ? " collective" : "") +
            '" data-name="' + esc(node.name) + '"';
          title = o.line + (o.op_name ? "\nop_name: " + o.op_name : "") + (o.sharding ? "\nsharding: " + o.sharding : "");
        }
        out += "<g " + attrs + "><title>" + esc(title) + '</title><polygon points="' + points + '" fill="' + colours[0] + '" stroke="' + colours[1] + '"/>';
        const o = node.group ? null : instrs[node.name];
        if (o && o.split) {  // a band down the left edge, coloured by how the value is split
          out += '<rect class="split" data-split="' + esc(o.split) + '" x="' + x + '" y="' + y + '" width="6" height="' + box.height +
            '" fill="' + colourOfSplit(o.split) + '"><title>' + esc(o.split + ": " + o.sharding) + "</title></rect>";
        }
        node.text.forEach((t, i) => {
          out += '<text x="' + box.x + '" y="' + (y + 16 + 14 * i) + '" fill="' + colours[2] + '"' + (i === 0 ? ' font-weight="600"' : "") + ">" + esc(t) + "</text>";
        });
        out += "</g>";
      }
      return out + "</svg>";
    }

    // Open groups breadth first from the focused one, each kept only if the picture still fits a
    // pane of width x height at scale 1 (a layout is cheap next to a picture no one can read).
    function firstView(width, height) {
      for (const id of [...open]) if (id !== root.id && !ancestors(focused).includes(id)) open.delete(id);
      openFusions.clear();
      // Programs read top to bottom: a picture may run to TALL times the pane's height (the
      // minimap shows the rest), and a little wider than the pane.
      const fits = () => { const e = extent(layout().graph); return e.W <= WIDE * width && e.H <= TALL * height; };
      const started = performance.now();
      let boxes = layout().visible.nodes.length;
      // The program's own scopes first, breadth first; then the groups made here (runs of
      // instructions outside a scope) if there is still room. Gathered parameters and constants
      // stay closed: they open when asked.
      for (const made of [false, true]) {
        const queue = [...groups.get(focused).groups];
        while (queue.length && performance.now() - started < FIRST_VIEW_MS) {
          const id = queue.shift();
          const g = groups.get(id);
          if (open.has(id)) { queue.push(...g.groups); continue; }
          const more = g.groups.length + g.members.length - 1;
          if (boxes + more > FIRST_VIEW_BOXES || /^g:#(parameters|constants)/.test(id) || id.includes("#") !== made) continue;
          open.add(id);
          if (fits()) { queue.push(...g.groups); boxes += more; } else open.delete(id);
        }
      }
    }

    // Open level by level while the picture stays under EXPAND_ALL_BOXES boxes; the number of
    // groups left closed.
    function expandAll() {
      let level = [...groups.get(focused).groups].filter((id) => !open.has(id));
      const boxes = () => layout().visible.nodes.length;
      while (level.length) {
        for (const id of level) open.add(id);
        if (boxes() > EXPAND_ALL_BOXES) { for (const id of level) open.delete(id); break; }
        level = level.flatMap((id) => groups.get(id).groups);
      }
      return [...groups.values()].filter((g) => !open.has(g.id) && ancestors(g.id).includes(focused)).length;
    }

    return {
      svg,
      firstView,
      expandAll,
      collapseAll() { for (const id of [...open]) if (id !== root.id && !ancestors(focused).includes(id)) open.delete(id); openFusions.clear(); },
      // Draw only this group's contents (root.id: the whole module again).
      focus(id) {
        if (!groups.has(id)) return;
        focused = id;
        for (const a of ancestors(id)) open.add(a);
      },
      focused: () => focused,
      root: root.id,
      groups,
      layoutMs: () => layout().ms,
      boxes: () => layout().visible.nodes.length,
      isOpen: (id) => open.has(id),
      // Open or close a group (closing one closes what is inside it).
      toggle(id) {
        if (!groups.has(id) || ancestors(focused).includes(id)) return;
        if (open.has(id)) { for (const other of [...open]) if (ancestors(other).includes(id)) open.delete(other); }
        else open.add(id);
      },
      toggleFusion(name) {
        if (openFusions.has(name)) openFusions.delete(name); else if (openable(instrs[name])) openFusions.add(name);
      },
      // Open every group around an instruction (a fused one: around its fusion); true when it changed.
      reveal(name) {
        const o = instrs[name];
        if (!o) return false;
        const at = home.get(o.fusion || name);
        if (at === undefined) return false;
        let changed = false;
        if (!ancestors(at).includes(focused)) { focused = root.id; changed = true; }
        for (const id of ancestors(at)) if (!open.has(id)) { open.add(id); changed = true; }
        return changed;
      },
      // The group an instruction is drawn in while it is closed, for a panel's "in group" line.
      groupOf: (name) => groups.get(home.get((instrs[name] || {}).fusion || name)),
      ancestors,
    };
  }

  XlaTeachModuleGraph.scopes = scopes;
  window.XlaTeachModuleGraph = XlaTeachModuleGraph;
})();
