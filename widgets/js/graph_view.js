// The devcopy graph view (anywidget front end): cytoscape.js draws the elements Python sends, dagre lays out only
// those on screen, and only when Python bumps `layout_version`; anything else restyles in place.
// Built into ../static/graph_view.js by `make widget-js` (one ESM file, no network needed in the browser).
import cytoscape from "cytoscape";
import dagre from "cytoscape-dagre";

cytoscape.use(dagre);

const FONT_PX = 12;
const READABLE_ZOOM = 10 / FONT_PX; // node text is at least 10 px on screen from this zoom up
const MAX_FIT_ZOOM = 1.5; // a few nodes are not blown up to fill the view
const CHAR_PX = 0.61 * FONT_PX; // monospace: every character is this wide
const LINE_PX = 1.25 * FONT_PX;
export const LAYOUT = {
  name: "dagre", rankDir: "TB", nodeSep: 16, rankSep: 34, edgeSep: 8, fit: false, animate: false,
};
export const STYLE = [
  { selector: "node", style: {
    shape: "round-rectangle", "background-color": "data(colour)", "border-width": 1, "border-color": "#546e7a",
    label: "data(label)", "text-wrap": "wrap", "text-valign": "center", "text-halign": "center",
    "font-family": "monospace", "font-size": FONT_PX, width: labelWidth, height: labelHeight, padding: 7,
    "min-zoomed-font-size": 10 } },
  { selector: "node.input, node.output", style: { shape: "cut-rectangle" } },
  { selector: "node.delegate", style: { "border-width": 2.5, "border-color": "#263238", "font-weight": "bold" } },
  { selector: "node.copy", style: { "border-width": 3.5, "border-color": "#c62828" } },
  { selector: "node.group.expanded", style: {
    "background-color": "#eceff1", "background-opacity": 0.45, "border-style": "dashed", "border-color": "#78909c",
    "text-valign": "top", "text-halign": "center", "font-size": 13, color: "#37474f", padding: 14 } },
  { selector: "node.group.collapsed", style: {
    "border-width": 3, "border-style": "double", "border-color": "#37474f", "font-weight": "bold", padding: 10 } },
  { selector: "node.group.collapsed.has-copies", style: { "border-color": "#c62828" } },
  { selector: "edge", style: {
    width: 1.5, "line-color": "#90a4ae", "target-arrow-color": "#90a4ae", "target-arrow-shape": "triangle",
    "curve-style": "bezier", "arrow-scale": 0.9 } },
  { selector: "node.picked", style: { "border-width": 5, "border-color": "#1565c0" } },
  { selector: "node.found", style: { "underlay-color": "#ffb300", "underlay-opacity": 0.6, "underlay-padding": 6 } },
];
// The inspector shows the (label, text) rows Python sends with each node (`rows`); a node without them (a graph
// shown by hand) gets these fields.
const INSPECTOR_ROWS = [
  ["op", "op"], ["kind", "kind"], ["device", "device"], ["module", "module"], ["reason", "reason"],
  ["bytes", "bytes_text"], ["predicted", "predicted_text"],
];

function lines(ele) {
  return String(ele.data("label") || "").split("\n");
}

// Box sizes from the label (monospace), so a layout needs no text measuring and works before the view is on screen.
function labelWidth(ele) {
  return Math.max(24, ...lines(ele).map((line) => line.length * CHAR_PX));
}

function labelHeight(ele) {
  return lines(ele).length * LINE_PX;
}

function make(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function render({ model, el }) {
  const root = make("div", "devcopy-graph-view");
  const bar = make("div", "dgv-bar");
  const search = make("input", "dgv-search");
  Object.assign(search, { type: "search", placeholder: "find a node by name (Enter)" });
  const fit = make("button", "dgv-fit", "fit");
  const reset = make("button", "dgv-reset", "collapse groups");
  const legend = make("span", "dgv-legend");
  const status = make("span", "dgv-status");
  bar.append(search, fit, reset, status, legend);
  const main = make("div", "dgv-main");
  const canvas = make("div", "dgv-canvas");
  const inspector = make("div", "dgv-inspector");
  main.append(canvas, inspector);
  root.append(bar, main);
  el.append(root);
  canvas.style.height = model.get("height");

  // layout "null": the default grid layout would run now, before the view is on screen (its size is NaN then)
  const cy = cytoscape({ container: canvas, style: STYLE, layout: { name: "null" }, minZoom: 0.02, maxZoom: 4,
                         boxSelectionEnabled: false, autounselectify: true, autoungrabify: true });
  root.devcopyCy = cy; // for tests: the DOM element carries its graph (never a global)
  let laidOut = null;
  let layouts = 0;
  let focus = null; // what to bring into view after the next layout: a group or node id, or "all"
  const byId = () => new Map(model.get("nodes").map((n) => [n.id, n]));

  function readable(eles) {
    // Fit `eles`; when that would make text smaller than 10 px, show their top at a readable zoom instead.
    cy.fit(eles, 24);
    if (cy.zoom() > MAX_FIT_ZOOM) {
      cy.zoom(MAX_FIT_ZOOM);
      cy.center(eles);
    }
    if (cy.zoom() >= READABLE_ZOOM) return;
    const box = eles.boundingBox();
    cy.zoom(READABLE_ZOOM);
    const left = box.w * READABLE_ZOOM < cy.width() ? (cy.width() - box.w * READABLE_ZOOM) / 2 : 24;
    cy.pan({ x: left - box.x1 * READABLE_ZOOM, y: 24 - box.y1 * READABLE_ZOOM });
  }

  function bringIntoView() {
    const target = focus && focus !== "all" ? cy.getElementById(focus) : cy.collection();
    if (target.empty()) readable(cy.elements());
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
      kinds: JSON.stringify(counts.kinds), layouts, collapsed: model.get("collapsed").length,
    });
    status.textContent = `${counts.nodes} nodes · ${counts.edges} edges · showing ${counts.visible_nodes}`;
  }

  function publishViewport() {
    root.dataset.zoom = cy.zoom().toFixed(4);
    const pan = cy.pan();
    root.dataset.pan = `${pan.x.toFixed(1)},${pan.y.toFixed(1)}`;
  }

  function draw() {
    const elements = model.get("elements");
    const version = model.get("layout_version");
    if (version === laidOut) {
      cy.batch(() => {
        for (const e of elements) {
          const ele = cy.getElementById(e.data.id);
          ele.data(e.data);
          ele.classes(e.classes || "");
        }
      });
    } else if (canvas.isConnected && canvas.clientWidth > 0) {
      const start = performance.now();
      cy.resize(); // the size cytoscape knows may predate the view being shown
      cy.batch(() => { cy.elements().remove(); cy.add(elements); });
      cy.layout(LAYOUT).run();
      laidOut = version;
      layouts += 1;
      root.dataset.layoutMs = Math.round(performance.now() - start);
      focus = focus || "all";
      bringIntoView();
    } // else: not on screen yet; the resize observer draws once it is
    markPicked();
    showInspector();
    showLegend();
    publishCounts();
  }

  function pick(id) {
    // Select node `id`: Python opens the groups around it when hidden, and the next layout centres it.
    const shown = cy.getElementById(id);
    if (shown.nonempty()) { focus = id; bringIntoView(); } else focus = id;
    model.set("selected", id);
    model.save_changes();
    markPicked();
    showInspector();
  }

  cy.on("tap", (event) => {
    const target = event.target;
    if (target === cy || !target.isNode()) return;
    if (target.hasClass("collapsed")) {
      focus = target.id();
      model.send({ action: "open", group: target.id() });
    } else if (!target.hasClass("group")) pick(target.id());
  });
  cy.on("dbltap", (event) => {
    const target = event.target;
    if (target !== cy && target.isNode() && target.hasClass("expanded")) {
      focus = target.id();
      model.send({ action: "close", group: target.id() });
    }
  });
  cy.on("viewport", publishViewport);
  fit.onclick = () => { cy.fit(undefined, 24); };
  reset.onclick = () => { focus = "all"; model.send({ action: "reset" }); };
  search.onkeydown = (event) => {
    if (event.key !== "Enter") return;
    const text = search.value.trim().toLowerCase();
    if (!text) return;
    const names = [...byId().keys()];
    const hit = names.find((n) => n.toLowerCase() === text) || names.find((n) => n.toLowerCase().includes(text));
    search.classList.toggle("dgv-miss", !hit);
    if (hit) pick(hit);
  };

  const onSelected = () => {
    const id = model.get("selected");
    if (id && cy.getElementById(id).nonempty()) { focus = id; bringIntoView(); }
    markPicked();
    showInspector();
  };
  model.on("change:elements", draw);
  model.on("change:selected", onSelected);
  model.on("change:nodes", showInspector); // Python fills a copy's what-if rows after it is selected
  const resize = new ResizeObserver(() => {
    cy.resize();
    if (model.get("layout_version") !== laidOut) draw();
  });
  resize.observe(canvas);
  draw();
  publishViewport();
  return () => {
    resize.disconnect();
    model.off("change:elements", draw);
    model.off("change:selected", onSelected);
    model.off("change:nodes", showInspector);
    cy.destroy();
  };
}

export default { render };
