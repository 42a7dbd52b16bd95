// The profile's timeline: every timed run on one time axis, zoomed and panned along time.
//
// Tracks, top to bottom, each work inside the one above it:
//   runs         one span per timed run of the executable;
//   thunks       what the runtime ran, one after another: kernels, library calls, copies, loops;
//   in loops     a loop's body kernels, inside the loop's own thunk (a second row for a loop in a loop);
//   host         the gaps between a run's thunks: the runtime's own (Python) work between them;
//   pool lane N  the parts of a kernel split over the thread pool, one row per thread that ran one.
// The wheel zooms around the pointer, a drag pans, the buttons step from run to run. Only what
// falls inside the window is drawn, so a window of thousands of events stays quick. A click on a
// bar selects its instruction, as a click on its box does.
//
// drawTimeline(host, timeline, options) -> {zoom(f), pan(px), run(k), all(), current(), redraw(), window()}
//   timeline: the page data's profile.timeline (names, kinds, runs, events, parts, lanes);
//   options:  {label(name), select(name), drawn(), mean(name) -> µs}.
function drawTimeline(host, tl, options) {
  "use strict";
  const LEFT = 118, ROW = 22, AXIS = 30, FONT = 11;
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})[c]);
  const runs = tl.runs.map(([start, us], k) => ({start, us, k}));
  const end = Math.max(1, ...runs.map((r) => r.start + r.us), ...tl.events.map((e) => e[2] + e[3]));
  const depth = Math.max(0, ...tl.events.map((e) => e[5]));
  const rows = [{title: "runs", items: runs.map((r) => ({start: r.start, us: r.us, text: "run " + (r.k + 1), run: r.k, kind: "run"}))}];
  for (let d = 0; d <= depth; d++) {
    rows.push({title: d === 0 ? "thunks" : d === 1 ? "in loops" : "in loops (" + d + ")", items: tl.events.filter((e) => e[5] === d).map((e) => ({
      name: tl.names[e[0]], run: e[1], start: e[2], us: e[3], kind: tl.kinds[e[4]]}))});
  }
  // The host's work: each run's time not covered by a top-level thunk.
  const gaps = [];
  for (const r of runs) {
    let at = r.start;
    const top = tl.events.filter((e) => e[1] === r.k && e[5] === 0).sort((a, b) => a[2] - b[2]);
    for (const e of top.concat([[null, r.k, r.start + r.us, 0]])) {
      if (e[2] - at > 0.05) gaps.push({start: at, us: e[2] - at, run: r.k, kind: "host", text: "host"});
      at = Math.max(at, e[2] + e[3]);
    }
  }
  rows.push({title: "host", items: gaps});
  for (let lane = 0; lane < tl.lanes; lane++) {
    rows.push({title: "pool lane " + (lane + 1), items: tl.parts.filter((q) => q[2] === lane).map((q) => ({
      name: tl.names[q[0]], run: q[1], start: q[3], us: q[4], kind: "part", text: tl.names[q[0]] + " [" + q[5] + "]"}))});
  }
  for (const row of rows) row.items.sort((a, b) => a.start - b.start);

  // Heat, as in the graph: the slowest thunk red, the others in proportion; text black or white.
  const most = Math.max(1e-9, ...tl.names.map((n) => options.mean(n) || 0));
  function rgb(h, s, l) {  // HSL (degrees, 0-1, 0-1) to [r, g, b] in 0-255
    const a = s * Math.min(l, 1 - l), f = (n) => { const k = (n + h / 30) % 12; return l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1)); };
    return [f(0), f(8), f(4)].map((v) => Math.round(v * 255));
  }
  function luminance([r, g, b]) {
    const c = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * c(r) + 0.7152 * c(g) + 0.0722 * c(b);
  }
  function colours(item) {
    let fill = item.kind === "run" ? [207, 216, 220] : item.kind === "host" ? [236, 239, 241] : null;
    if (!fill) { const share = (options.mean(item.name) || item.us) / most; fill = rgb(55 - 55 * Math.min(1, share), 0.95, 0.88 - 0.38 * Math.min(1, share)); }
    return ["rgb(" + fill.join(",") + ")", luminance(fill) > 0.179 ? "#000000" : "#ffffff"];
  }

  // The window on the time axis, in µs from the first run's start.
  const last = runs[runs.length - 1] || {start: 0, us: end};
  const view = {t0: last.start, t1: last.start + last.us};
  const pad = (a, b) => [a - (b - a) * 0.01, b + (b - a) * 0.01];
  [view.t0, view.t1] = pad(view.t0, view.t1);

  host.innerHTML = '<div class="timeline-tools">' +
    '<button data-act="prev" title="the run before (,)">&#9664; run</button><span class="which"></span>' +
    '<button data-act="next" title="the run after (.)">run &#9654;</button>' +
    '<button data-act="all" title="every timed run">all runs</button>' +
    '<button data-act="in" title="zoom in (+, or the wheel)">+</button><button data-act="out" title="zoom out (-)">&minus;</button>' +
    '<button data-act="trace" title="the runs in the Chrome trace format, for Perfetto or chrome://tracing">trace.json</button>' +
    '<span class="hint">wheel: zoom &middot; drag: pan &middot; click a bar: its instruction</span></div><div class="timeline-plot"></div>';
  const plot = host.querySelector(".timeline-plot");

  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
  }
  function fmt(us, step) {  // in ms from 1 ms on, with as many decimals as the step needs
    const decimals = (unit) => Math.max(0, -Math.floor(Math.log10(step / unit) + 1e-9));
    return us >= 1000 || step >= 1000 ? (us / 1000).toFixed(decimals(1000)) + " ms" : us.toFixed(decimals(1)) + " \u00b5s";
  }
  function fit(text, width) {
    const room = Math.floor((width - 6) / 6.4);
    return text.length <= room ? text : room >= 4 ? text.slice(0, room - 1) + "\u2026" : "";
  }

  function draw() {
    const width = Math.max(400, plot.clientWidth || host.clientWidth || 1200);
    const span = view.t1 - view.t0, scale = (width - LEFT - 8) / span;
    const x = (t) => LEFT + (t - view.t0) * scale;
    const height = AXIS + rows.length * ROW + 8;
    let svg = '<svg xmlns="http://www.w3.org/2000/svg" class="timeline-chart" width="' + width + '" height="' + height + '" viewBox="0 0 ' + width + " " + height + '">' +
      '<defs><clipPath id="timeline-clip"><rect x="' + LEFT + '" y="0" width="' + (width - LEFT) + '" height="' + height + '"/></clipPath></defs>';
    // The axis: ticks at 1, 2 or 5 times a power of ten, about every 110 pixels.
    const step = niceStep(110 / scale);
    svg += '<g class="axis">';
    for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
      svg += '<line x1="' + x(t) + '" y1="' + (AXIS - 6) + '" x2="' + x(t) + '" y2="' + height + '" stroke="#eceff1"/>' +
        '<text x="' + x(t) + '" y="' + (AXIS - 10) + '" font-size="' + FONT + '" text-anchor="middle" fill="#37474f">' + fmt(t, step) + "</text>";
    }
    svg += "</g>";
    rows.forEach((row, r) => {
      const y = AXIS + r * ROW;
      svg += '<text class="track" x="' + (LEFT - 6) + '" y="' + (y + 15) + '" font-size="' + FONT + '" text-anchor="end" fill="#37474f">' + esc(row.title) + "</text>" +
        '<line x1="' + LEFT + '" y1="' + (y + ROW - 1) + '" x2="' + width + '" y2="' + (y + ROW - 1) + '" stroke="#f5f5f5"/>';
      svg += '<g clip-path="url(#timeline-clip)">';
      for (const item of row.items) {
        if (item.start > view.t1 || item.start + item.us < view.t0) continue;
        const x0 = x(item.start), w = Math.max(1, item.us * scale);
        const [fill, ink] = colours(item);
        const text = item.text || options.label(item.name);
        const seen = Math.min(x0 + w, width) - Math.max(x0, LEFT);  // the part of the bar inside the plot
        const label = seen > 30 ? fit(text, seen) : "";
        const tip = (item.name || text) + (item.kind === "run" || item.kind === "host" ? "" : " (" + item.kind + ")") + ": " +
          item.us.toFixed(2) + " \u00b5s, run " + (item.run + 1);
        svg += "<g" + (item.name ? ' class="thunk" data-name="' + esc(item.name) + '"' : item.kind === "run" ? ' class="run" data-run="' + item.run + '"' : "") + ">" +
          '<rect x="' + x0 + '" y="' + (y + 2) + '" width="' + w + '" height="' + (ROW - 5) + '" fill="' + fill + '" stroke="#78909c" stroke-width="0.5"><title>' +
          esc(tip) + "</title></rect>" + (label ? '<text x="' + (Math.max(x0, LEFT) + 3) + '" y="' + (y + 15) + '" font-size="' + FONT + '" fill="' + ink + '">' +
          esc(label) + "</text>" : "") + "</g>";
      }
      svg += "</g>";
    });
    plot.innerHTML = svg + "</svg>";
    const shown = runs.filter((r) => Math.min(r.start + r.us, view.t1) - Math.max(r.start, view.t0) > 0.05 * span).map((r) => r.k + 1);
    host.querySelector(".which").textContent = shown.length === 1 ? "run " + shown[0] + " of " + runs.length :
      shown.length ? "runs " + shown[0] + "\u2013" + shown[shown.length - 1] + " of " + runs.length : "";
    options.drawn();
  }
  let pending = false;
  const redraw = () => { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; draw(); }); } };

  // Zoom by `factor` (>1: in) keeping time `at` (default: the middle) where it is on screen.
  function zoom(factor, at) {
    const middle = at === undefined ? (view.t0 + view.t1) / 2 : at;
    const span = Math.min(end * 1.05, Math.max(0.5, (view.t1 - view.t0) / factor));
    const share = (middle - view.t0) / (view.t1 - view.t0);
    view.t0 = middle - share * span;
    view.t1 = view.t0 + span;
    redraw();
  }
  function pan(pixels) {
    const plotWidth = Math.max(1, (plot.clientWidth || 1200) - LEFT - 8);
    const dt = pixels * (view.t1 - view.t0) / plotWidth;
    view.t0 -= dt;
    view.t1 -= dt;
    redraw();
  }
  function showRun(k) {
    const r = runs[Math.max(0, Math.min(runs.length - 1, k))];
    if (r) [view.t0, view.t1] = pad(r.start, r.start + r.us);
    redraw();
  }
  function all() { [view.t0, view.t1] = pad(0, end); redraw(); }
  const current = () => { const mid = (view.t0 + view.t1) / 2; const r = runs.findIndex((q) => q.start + q.us >= mid); return r < 0 ? runs.length - 1 : r; };

  // A download of the runs in the Chrome trace format (the same rows, for Perfetto).
  function trace() {
    const events = [];
    rows.forEach((row, tid) => {
      events.push({name: "thread_name", ph: "M", pid: 1, tid, args: {name: row.title}});
      for (const item of row.items) events.push({name: item.name || item.text, cat: item.kind, ph: "X", ts: item.start, dur: item.us, pid: 1, tid, args: {run: item.run}});
    });
    const link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([JSON.stringify({traceEvents: events, displayTimeUnit: "ms"})], {type: "application/json"}));
    link.download = "trace.json";
    link.click();
  }

  host.querySelector(".timeline-tools").addEventListener("click", (e) => {
    const act = e.target.closest("button") && e.target.closest("button").dataset.act;
    if (act === "prev") showRun(current() - 1);
    else if (act === "next") showRun(current() + 1);
    else if (act === "all") all();
    else if (act === "in") zoom(2);
    else if (act === "out") zoom(0.5);
    else if (act === "trace") trace();
  });
  const timeAt = (clientX) => {
    const r = plot.getBoundingClientRect();
    return view.t0 + (clientX - r.left - LEFT) * (view.t1 - view.t0) / Math.max(1, r.width - LEFT - 8);
  };
  plot.addEventListener("wheel", (e) => {
    e.preventDefault();
    e.stopPropagation();
    if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) pan(-e.deltaX);
    else zoom(Math.exp(-e.deltaY * 0.002), timeAt(e.clientX));
  }, {passive: false});
  let drag = null;  // a drag pans; a click that barely moved selects
  plot.addEventListener("pointerdown", (e) => {
    e.stopPropagation();
    drag = {x: e.clientX, moved: 0};
    plot.setPointerCapture(e.pointerId);
  });
  plot.addEventListener("mousedown", (e) => e.stopPropagation());
  plot.addEventListener("pointermove", (e) => {
    if (!drag) return;
    drag.moved += Math.abs(e.clientX - drag.x);
    pan(e.clientX - drag.x);
    drag.x = e.clientX;
  });
  plot.addEventListener("pointerup", () => { setTimeout(() => { drag = null; }, 0); });
  plot.addEventListener("click", (e) => {
    if (drag && drag.moved > 3) return;
    const bar = e.target.closest("g.thunk"), run = e.target.closest("g.run");
    if (bar) options.select(bar.dataset.name);
    else if (run) showRun(Number(run.dataset.run));
  });
  draw();
  return {zoom, pan, run: showRun, all, current, redraw: draw, window: () => [view.t0, view.t1]};
}
