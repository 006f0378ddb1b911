// The devcopy graph view (anywidget front end): cytoscape.js draws the elements Python sends. dagre lays out what
// is on screen when the graph first shows; after that a change keeps the layout (layout.js): restyles in place,
// lays out only an opened group, puts new nodes between their neighbours.
// Built into ../static/graph_view.js by `make widget-js` (one ESM file, no network needed in the browser).
import cytoscape from "cytoscape";
import { showCopies, sortedCopies } from "./copies.js";
import { current, graphData } from "./data.js";
import { download, PNG_SCALE, pngBlob, svgText } from "./export.js";
import { nextInDirection } from "./keys.js";
import { layoutAll, patch, replace } from "./layout.js";
import { minimap } from "./minimap.js";
import { layoutInWorker } from "./worker.js";
import { DARK_STYLE, READABLE_ZOOM, STYLE } from "./style.js";

export { LAYOUT, STYLE } from "./style.js";

const MAX_FIT_ZOOM = 1.5; // a few nodes are not blown up to fill the view
const FIT_PAD = 24; // px around the graph when it is fitted
const MAX_CANVAS_PX = 840; // the canvas grows up to this height to show the whole graph with readable text
const BUSY_AFTER_MS = 300; // the busy state shows when something takes longer than this
const BIG_LAYOUT = 60; // laying out more items than this at once says busy first
const WORKER_LAYOUT = 150; // laying out more items than this at once runs dagre in a Web Worker
// The inspector shows the (label, text) rows Python sends with each node (`rows`); a node without them (a graph
// shown by hand) gets these fields.
const INSPECTOR_ROWS = [
  ["op", "op"], ["kind", "kind"], ["device", "device"], ["module", "module"], ["reason", "reason"],
  ["bytes", "bytes_text"], ["predicted", "predicted_text"],
];
const ARROWS = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };

function make(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function darkTheme() {
  return document.body.dataset.jpThemeLight === "false";
}

function render({ model, el }) {
  const data = graphData(model); // nodes and elements, patched as the kernel changes them
  const root = make("div", "devcopy-graph-view");
  const bar = make("div", "dgv-bar");
  const search = make("input", "dgv-search");
  Object.assign(search, { type: "search", placeholder: "find nodes by name (Enter: next)" });
  const matches = make("span", "dgv-matches");
  const fit = make("button", "dgv-fit", "fit");
  const reset = make("button", "dgv-reset", "collapse groups");
  const tidy = make("button", "dgv-tidy", "tidy layout");
  tidy.title = "lay out everything shown again (changes keep the layout, so new nodes sit beside their neighbours)";
  const copiesOnly = make("input", "dgv-copies-only");
  copiesOnly.type = "checkbox";
  const copiesLabel = make("label", "dgv-copies-label");
  copiesLabel.append(copiesOnly, " copies only");
  const prevCopy = make("button", "dgv-prev-copy", "◀ copy");
  const nextCopy = make("button", "dgv-next-copy", "copy ▶");
  const copyAt = make("span", "dgv-copy-at");
  const png = make("button", "dgv-png", "PNG");
  const svg = make("button", "dgv-svg", "SVG");
  const busyText = make("span", "dgv-busy-text");
  const exportNote = make("span", "dgv-export-note");
  const legend = make("span", "dgv-legend");
  const status = make("span", "dgv-status");
  prevCopy.title = nextCopy.title = "copies from the most bytes to the fewest";
  bar.append(search, matches, fit, reset, tidy, copiesLabel, prevCopy, nextCopy, copyAt, png, svg, exportNote, busyText, status, legend);
  const main = make("div", "dgv-main");
  const canvas = make("div", "dgv-canvas");
  canvas.tabIndex = 0; // keyboard: arrows move between nodes, Enter inspects (or opens a box), Escape clears
  canvas.setAttribute("aria-label", "placed graph: arrow keys move between nodes, Enter inspects");
  const inspector = make("div", "dgv-inspector");
  const side = make("div", "dgv-side"); // the overview above the inspector
  side.append(inspector);
  main.append(canvas, side);
  const copyList = make("details", "dgv-copies");
  copyList.append(make("summary", "", "copies"));
  root.append(bar, main, copyList);
  el.append(root);
  canvas.style.height = model.get("height");

  // layout "null": the default grid layout would run now, before the view is on screen (its size is NaN then)
  const cy = cytoscape({ container: canvas, style: darkTheme() ? DARK_STYLE : STYLE, layout: { name: "null" },
                         minZoom: 0.002, maxZoom: 4, boxSelectionEnabled: false, autounselectify: true,
                         autoungrabify: true });
  root.devcopyCy = cy; // for tests: the DOM element carries its graph (never a global)
  root.devcopyData = data; // and the data it draws
  const overviewMap = minimap(cy, side, () => { autoView = false; });
  side.prepend(overviewMap.element);
  // A drag anywhere pans, also one that starts on a node or a module's frame (nodes are never dragged: the layout
  // is the view's); a press without moving is still a click.
  cy.on("add", "node", (event) => { event.target.panify(); });
  let laidOut = null;
  let layouts = 0; // new layout versions drawn
  let fullLayouts = 0; // of which dagre laid out everything
  let renders = 0;
  let focus = null; // what to bring into view after the next drawing: a group or node id, or "all"
  let autoView = false; // the view shows the overview the view chose (no user zoom or pan since): refit on resize
  let cursor = null; // the node the keyboard is on
  let found = [];
  let foundAt = -1;
  let copyIndex = -1;
  let copyOrder = "bytes"; // the copy list's order: "bytes" or "predicted"
  const byId = () => new Map(data.nodes.map((n) => [n.id, n]));

  // Busy: anything still running after BUSY_AFTER_MS (Python computing, a message waiting on the kernel, a big
  // layout) shows the busy state: a class on the view and a line of text.
  const busy = new Set();
  let busyTimer = null;
  function showBusy(on) {
    root.classList.toggle("dgv-busy", on);
    root.dataset.busy = String(on);
    busyText.textContent = on ? "working …" : "";
  }
  function setBusy(why, on) {
    if (on) busy.add(why); else busy.delete(why);
    if (busy.size && busyTimer === null && root.dataset.busy !== "true") {
      busyTimer = setTimeout(() => { busyTimer = null; if (busy.size) showBusy(true); }, BUSY_AFTER_MS);
    } else if (!busy.size) {
      clearTimeout(busyTimer);
      busyTimer = null;
      showBusy(false);
    }
  }
  function send(content) {
    setBusy("kernel", true); // until the kernel's answer is drawn
    model.send(content);
  }

  // cytoscape caches where its canvas is on the page; the notebook scrolls inside its own element, cells move and
  // resize, so the cache is dropped on any scroll (capture: every scrolling element) and before every press.
  const forget = () => cy.renderer().invalidateContainerClientCoordsCache();
  const onScroll = () => forget();
  document.addEventListener("scroll", onScroll, { capture: true, passive: true });
  for (const type of ["pointerdown", "mousedown", "touchstart", "wheel"]) {
    canvas.addEventListener(type, forget, { capture: true, passive: true });
  }

  function baseHeight() {
    return parseFloat(model.get("height")) || 560;
  }

  function grow(eles) {
    // The canvas is the widget's height, or taller (up to MAX_CANVAS_PX) when the whole of `eles` would otherwise be
    // fitted with text smaller than 10 px.
    const box = eles.boundingBox();
    const across = (cy.width() - 2 * FIT_PAD) / Math.max(box.w, 1);
    const zoom = Math.min(READABLE_ZOOM, across);
    const want = Math.min(MAX_CANVAS_PX, Math.ceil(box.h * zoom + 2 * FIT_PAD));
    const height = Math.max(baseHeight(), want);
    if (Math.abs(canvas.clientHeight - height) > 1) {
      canvas.style.height = `${height}px`;
      cy.resize();
      forget();
    }
  }

  function overview(eles = cy.nodes()) {
    // The whole of `eles` inside the canvas (growing it first if text would be unreadable), at most MAX_FIT_ZOOM.
    if (eles.empty()) return;
    grow(eles);
    cy.fit(eles, FIT_PAD);
    if (cy.zoom() > MAX_FIT_ZOOM) {
      cy.zoom(MAX_FIT_ZOOM);
      cy.center(eles);
    }
    autoView = true;
  }

  function readable(eles) {
    // Fit `eles`; when that would make text smaller than 10 px, zoom to where it shows and centre the copies.
    cy.fit(eles, 24);
    if (cy.zoom() > MAX_FIT_ZOOM) {
      cy.zoom(MAX_FIT_ZOOM);
      cy.center(eles);
    }
    if (cy.zoom() >= READABLE_ZOOM) return;
    cy.zoom(READABLE_ZOOM);
    const copies = eles.filter(".copy, .has-copies");
    const box = (copies.nonempty() ? copies : eles).boundingBox();
    if (box.w * READABLE_ZOOM <= cy.width() && box.h * READABLE_ZOOM <= cy.height()) {
      cy.center(copies.nonempty() ? copies : eles);
      return;
    }
    // the top of the graph, or the first copy when it lies further down; across, the first copy (or the left)
    const first = copies.nonempty() ? copies.sort((a, b) => a.position("y") - b.position("y")).first() : null;
    const z = READABLE_ZOOM;
    const x = first ? cy.width() / 2 - first.position("x") * z : 24 - box.x1 * z;
    const top = 24 - eles.boundingBox().y1 * z;
    const y = first && first.position("y") * z + top > cy.height() - 60 ? cy.height() / 2 - first.position("y") * z : top;
    cy.pan({ x, y });
  }

  function bringIntoView() {
    autoView = false; // overview() sets it again
    const target = focus && focus !== "all" ? cy.getElementById(focus) : cy.collection();
    if (target.empty()) overview();
    else if (target.isParent() || target.hasClass("collapsed")) readable(target.union(target.descendants()));
    else {
      cy.zoom(Math.max(cy.zoom(), 1));
      cy.center(target);
    }
    focus = null;
  }

  function markPicked() {
    const id = model.get("selected");
    cy.nodes(".picked").removeClass("picked");
    if (id) cy.getElementById(id).addClass("picked");
    root.dataset.selected = id;
  }

  function showInspector() {
    inspector.replaceChildren();
    const node = byId().get(model.get("selected"));
    if (!node) {
      inspector.append(make("div", "dgv-hint", "Click a node to inspect it; click a double-bordered module group " +
        "to open it, double-click an open group's frame to close it. Wheel zooms, drag pans."));
      return;
    }
    inspector.append(make("div", "dgv-title", node.id));
    const table = make("table");
    const rows = node.rows || INSPECTOR_ROWS.map(([label, key]) => [label, node[key]]);
    for (const [label, text] of rows) {
      if (text === "" || text === null || text === undefined) continue;
      const row = make("tr", `dgv-row-${String(label).replace(/\W+/g, "-")}`);
      row.append(make("th", "", label), make("td", "", String(text)));
      table.append(row);
    }
    for (const [label, key] of [["inputs", "inputs"], ["users", "users"]]) {
      const row = make("tr", `dgv-row-${label}`);
      const cell = make("td");
      for (const other of node[key]) {
        const link = make("a", "dgv-link", other);
        link.href = "#";
        link.onclick = (event) => { event.preventDefault(); pick(other); };
        cell.append(link, " ");
      }
      row.append(make("th", "", label), cell);
      table.append(row);
    }
    inspector.append(table);
  }

  function showLegend() {
    legend.replaceChildren();
    for (const { device, colour, count } of model.get("legend")) {
      const chip = make("span", "dgv-chip dgv-device", `${device} ${count}`);
      chip.style.background = colour;
      chip.dataset.device = device;
      chip.dataset.count = count;
      legend.append(chip);
    }
    legend.append(make("span", "dgv-chip dgv-copy-chip", "copy"), make("span", "dgv-chip dgv-group-chip", "module"));
  }

  function publishCounts() {
    const counts = model.get("counts");
    Object.assign(root.dataset, {
      nodes: counts.nodes, edges: counts.edges, visibleNodes: counts.visible_nodes,
      visibleEdges: counts.visible_edges, devices: JSON.stringify(counts.devices),
      kinds: JSON.stringify(counts.kinds), layouts, fullLayouts, collapsed: model.get("collapsed").length,
    });
    status.textContent = `${counts.nodes} nodes · ${counts.edges} edges · showing ${counts.visible_nodes}`;
  }

  function publishViewport() {
    root.dataset.zoom = cy.zoom().toFixed(4);
    const pan = cy.pan();
    root.dataset.pan = `${pan.x.toFixed(1)},${pan.y.toFixed(1)}`;
  }

  function markFiltered() {
    // copies only: everything that is not a copy (or a box holding one), and edges not touching one, fade
    cy.elements(".faded").removeClass("faded");
    if (!copiesOnly.checked) return;
    const keep = cy.nodes(".copy, .has-copies");
    cy.nodes().not(keep).not(":parent").addClass("faded");
    cy.edges().not(keep.connectedEdges()).addClass("faded");
  }

  function markFound() {
    cy.nodes(".found").removeClass("found");
    for (const id of found) cy.getElementById(id).addClass("found");
    cy.nodes(".cursor").removeClass("cursor");
    if (cursor) cy.getElementById(cursor).addClass("cursor");
  }

  function finish() {
    // after every drawing: marks, side panels, and the render counter tests and benchmarks wait on
    markPicked();
    markFound();
    markFiltered();
    showInspector();
    showLegend();
    publishCounts();
    listCopies();
    overviewMap.redraw();
    renders += 1;
    root.dataset.renders = renders;
    root.dataset.renderDone = model.get("revision");
    setBusy("kernel", false);
    setBusy("layout", false);
  }

  let layoutTicket = 0; // a worker's layout applies only if nothing was drawn since it was asked for
  let inFlight = null; // the layout version the worker is laying out now (a resize meanwhile does not ask again)

  function layoutEverything(elements, version) {
    // dagre over everything: in the worker for a big graph (the page stays responsive), else here
    const start = performance.now();
    const ticket = (layoutTicket += 1);
    cy.resize(); // the size cytoscape knows may predate the view being shown
    const done = (where, dagreMs) => {
      laidOut = version;
      layouts += 1;
      fullLayouts += 1;
      root.dataset.layoutMs = Math.round(performance.now() - start);
      root.dataset.layoutWhere = where;
      root.dataset.dagreMs = Math.round(dagreMs);
      focus = focus || "all";
      const shown = performance.now();
      bringIntoView();
      const fitted = performance.now();
      finish();
      root.dataset.fitMs = Math.round(fitted - shown);
      root.dataset.finishMs = Math.round(performance.now() - fitted);
    };
    const items = elements.filter((e) => !("source" in e.data)).length;
    const job = items > WORKER_LAYOUT ? layoutInWorker(elements) : null;
    if (!job) {
      layoutAll(cy, elements);
      done("main", performance.now() - start);
      return;
    }
    setBusy("layout", true);
    const asked = performance.now();
    inFlight = version;
    job.then(({ positions, ms }) => {
      root.dataset.workerAt = `${asked.toFixed(1)},${performance.now().toFixed(1)}`; // while the page stayed free
      if (ticket !== layoutTicket) return;
      inFlight = null;
      const applying = performance.now();
      replace(cy, elements.map((e) => (positions[e.data.id] ? { ...e, position: positions[e.data.id] } : e)));
      root.dataset.applyMs = Math.round(performance.now() - applying);
      done("worker", ms);
    }, (error) => {
      root.dataset.workerError = String(error && error.message);
      if (ticket !== layoutTicket) return;
      inFlight = null;
      layoutAll(cy, elements);
      done("main", performance.now() - start);
    });
  }

  function later(work) {
    // something big: show the busy state first, then do it once the browser has painted
    setBusy("layout", true);
    showBusy(true);
    requestAnimationFrame(() => setTimeout(work, 0));
  }

  function update() {
    const elements = data.elements;
    const version = model.get("layout_version");
    const start = performance.now();
    layoutTicket += 1; // a layout still running in the worker is for older elements
    inFlight = null;
    if (!patch(cy, elements)) {
      focus = "all"; // a new layout: show all of it
      layouts -= version !== laidOut ? 0 : 1; // counted once, by layoutEverything
      layoutEverything(elements, version);
      return;
    }
    root.dataset.patchMs = Math.round(performance.now() - start);
    if (version !== laidOut) layouts += 1;
    laidOut = version;
    if (focus) bringIntoView();
    finish();
  }

  function draw() {
    if (!current(model, data)) return; // a patch was missed: the kernel sends everything, then this draws
    root.dataset.patches = data.patches;
    const elements = data.elements;
    const version = model.get("layout_version");
    if (!canvas.isConnected || canvas.clientWidth === 0) return; // not on screen yet: the observers draw later
    const items = elements.filter((e) => !("source" in e.data)).length;
    if (inFlight === version && laidOut === null) return; // the worker is laying this out already
    if (laidOut === null || cy.elements().empty()) {
      if (items <= BIG_LAYOUT) layoutEverything(elements, version);
      else later(() => layoutEverything(data.elements, model.get("layout_version")));
    } else if (items - cy.nodes().length > BIG_LAYOUT) later(update); // a big group opening
    else update();
  }

  function pick(id) {
    // Select node `id`: Python opens the groups around it when hidden, and the next drawing centres it.
    const shown = cy.getElementById(id);
    focus = id;
    if (shown.nonempty()) bringIntoView();
    model.set("selected", id);
    model.save_changes();
    markPicked();
    showInspector();
  }

  function activate(node) {
    // what a click (or Enter on the keyboard cursor) does to a node: open a box, inspect anything else
    if (node.hasClass("collapsed")) {
      focus = node.id();
      send({ action: "open", group: node.id() });
    } else if (node.hasClass("expanded")) {
      focus = node.id();
      send({ action: "close", group: node.id() });
    } else pick(node.id());
  }

  cy.on("tap", (event) => {
    forget();
    const target = event.target;
    if (target === cy || !target.isNode() || target.hasClass("expanded")) return;
    activate(target);
  });
  cy.on("dbltap", (event) => {
    const target = event.target;
    if (target !== cy && target.isNode() && target.hasClass("expanded")) activate(target);
  });
  cy.on("viewport", publishViewport);
  cy.on("dragpan scrollzoom pinchzoom", () => { autoView = false; });
  fit.onclick = () => { focus = null; overview(); };
  reset.onclick = () => { focus = "all"; send({ action: "reset" }); };
  tidy.onclick = () => later(() => layoutEverything(data.elements, model.get("layout_version")));

  function findAll() {
    const text = search.value.trim().toLowerCase();
    const names = text ? [...byId().keys()] : [];
    const exact = names.filter((n) => n.toLowerCase() === text);
    found = [...exact, ...names.filter((n) => n.toLowerCase().includes(text) && !exact.includes(n))];
    foundAt = -1;
    matches.textContent = text ? `${found.length} match${found.length === 1 ? "" : "es"}` : "";
    root.dataset.matches = found.length;
    search.classList.toggle("dgv-miss", Boolean(text) && !found.length);
    markFound();
  }
  search.oninput = findAll;
  search.onkeydown = (event) => {
    if (event.key !== "Enter") return;
    if (foundAt === -1 && !found.length) findAll();
    if (!found.length) return;
    foundAt = (foundAt + (event.shiftKey ? found.length - 1 : 1)) % found.length;
    matches.textContent = `${foundAt + 1} of ${found.length}`;
    pick(found[foundAt]);
  };

  const copies = (by) => sortedCopies(data.nodes, new Set(model.get("copy_kinds")), by);
  let listed = []; // the nodes, order and kinds the copy list was made from
  function listCopies() {
    // made again only when one of them changed: a group opened or closed leaves the nodes as they were, and
    // remaking the list (a row per copy: hundreds on a big model) cost every drawing DOM work and garbage
    const from = [data.nodes, copyOrder, model.get("copy_kinds")];
    if (from.every((v, i) => v === listed[i])) return;
    listed = from;
    showCopies(copyList, copies(copyOrder), copyOrder, pick, (by) => { copyOrder = by; listCopies(); });
  }

  function stepCopy(step) {
    // the copies from the most bytes to the fewest; a copy inside a box opens it (Python reveals the picked node)
    const byBytes = copies("bytes");
    if (!byBytes.length) { copyAt.textContent = "no copies"; return; }
    copyIndex = (copyIndex + step + byBytes.length) % byBytes.length;
    const copy = byBytes[copyIndex];
    copyAt.textContent = `copy ${copyIndex + 1}/${byBytes.length}: ${copy.bytes_text}`;
    pick(copy.id);
  }
  prevCopy.onclick = () => stepCopy(-1);
  nextCopy.onclick = () => stepCopy(1);
  copiesOnly.onchange = markFiltered;

  canvas.addEventListener("keydown", (event) => {
    const step = ARROWS[event.key];
    if (step) {
      const from = cursor ? cy.getElementById(cursor) : cy.collection();
      const next = nextInDirection(cy, from, step);
      if (next) {
        cursor = next.id();
        markFound();
        cy.center(next);
      }
      root.dataset.cursor = cursor || "";
      event.preventDefault();
    } else if (event.key === "Enter" && cursor && cy.getElementById(cursor).nonempty()) {
      activate(cy.getElementById(cursor));
      event.preventDefault();
    } else if (event.key === "Escape") {
      cursor = null;
      root.dataset.cursor = "";
      markFound();
    }
  });

  const background = () => getComputedStyle(canvas).backgroundColor;
  png.onclick = async () => {
    // never an empty file: a picture too big for one canvas at twice the screen resolution is drawn smaller, and
    // the note beside the buttons says at what scale (and that the SVG has it all)
    const { blob, scale } = await pngBlob(cy, background());
    root.dataset.exportScale = blob ? String(scale) : "";
    if (!blob) {
      exportNote.textContent = "PNG: the graph is too big for one picture in this browser; SVG exports it whole";
      return;
    }
    exportNote.textContent = scale < PNG_SCALE ? `PNG at scale ${scale} (the graph is too big for one picture at ` +
      `${PNG_SCALE}x in this browser; SVG exports it at any size)` : "";
    download(blob, "devcopy-graph.png");
  };
  svg.onclick = () => download(new Blob([svgText(cy, background())], { type: "image/svg+xml" }), "devcopy-graph.svg");

  function followTheme() {
    const dark = darkTheme();
    root.dataset.theme = dark ? "dark" : "light";
    cy.style(dark ? DARK_STYLE : STYLE);
  }
  const theme = new MutationObserver(followTheme);
  theme.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light"] });
  root.dataset.theme = darkTheme() ? "dark" : "light";

  const onSelected = () => {
    const id = model.get("selected");
    if (id && cy.getElementById(id).nonempty()) { focus = id; bringIntoView(); }
    markPicked();
    showInspector();
  };
  const onBusy = () => setBusy("python", model.get("busy"));
  model.on("change:revision", draw);
  model.on("change:selected", onSelected);
  model.on("change:nodes", showInspector); // nodes set whole on the model (the bundle tests' stand-in)
  data.views.add(draw);
  model.on("change:busy", onBusy);
  const resize = new ResizeObserver(() => {
    forget();
    cy.resize();
    if (model.get("layout_version") !== laidOut) draw();
    else if (autoView && !busy.size) overview(); // keep the overview whole when the cell or page changes size
  });
  resize.observe(canvas);
  const shown = new IntersectionObserver(() => { forget(); cy.resize(); });
  shown.observe(canvas);
  draw();
  publishViewport();
  return () => {
    resize.disconnect();
    shown.disconnect();
    theme.disconnect();
    document.removeEventListener("scroll", onScroll, { capture: true });
    model.off("change:revision", draw);
    model.off("change:selected", onSelected);
    model.off("change:nodes", showInspector);
    data.views.delete(draw);
    model.off("change:busy", onBusy);
    clearTimeout(busyTimer);
    cy.destroy();
  };
}

// anywidget calls this once per model, before any view: the model's data starts following patches at once
function initialize({ model }) {
  graphData(model);
}

export default { initialize, render };
