// The graph view's look: cytoscape styles (light and dark) and the dagre options, shared by the view and the
// layout benchmark (layout_bench.mjs).
export const FONT_PX = 12;
export const READABLE_ZOOM = 10 / FONT_PX; // node text is at least 10 px on screen from this zoom up
const CHAR_PX = 0.61 * FONT_PX; // monospace: every character is this wide
const LINE_PX = 1.25 * FONT_PX;
export const LAYOUT = {
  name: "dagre", rankDir: "TB", nodeSep: 16, rankSep: 34, edgeSep: 8, fit: false, animate: false,
};

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

const BASE = [
  { selector: "node", style: {
    shape: "round-rectangle", "background-color": "data(colour)", "border-width": 1, "border-color": "#546e7a",
    label: "data(label)", "text-wrap": "wrap", "text-valign": "center", "text-halign": "center",
    "font-family": "monospace", "font-size": FONT_PX, width: labelWidth, height: labelHeight, padding: 7,
    "min-zoomed-font-size": 10, color: "#000" } },
  { selector: "node.input, node.output", style: { shape: "cut-rectangle" } },
  { selector: "node.delegate", style: { "border-width": 2.5, "border-color": "#263238", "font-weight": "bold" } },
  { selector: "node.copy", style: { "border-width": 3.5, "border-color": "#c62828" } },
  { selector: "node.group.expanded", style: {
    "background-color": "#eceff1", "background-opacity": 0.45, "border-style": "dashed", "border-color": "#78909c",
    "text-valign": "top", "text-halign": "center", "font-size": 13, color: "#37474f", padding: 14,
    "compound-sizing-wrt-labels": "exclude" } }, // boxes hold their labels: no text measuring for frame bounds
  { selector: "node.group.collapsed", style: {
    "border-width": 3, "border-style": "double", "border-color": "#37474f", "font-weight": "bold", padding: 10 } },
  { selector: "edge", style: {
    width: 1.5, "line-color": "#90a4ae", "target-arrow-color": "#90a4ae", "target-arrow-shape": "triangle",
    "curve-style": "bezier", "arrow-scale": 0.9 } },
];
// Marks drawn over either theme: copies inside a box, the picked node, search hits, the keyboard cursor, the filter.
const MARKS = [
  { selector: "node.group.collapsed.has-copies", style: { "border-color": "#c62828" } },
  { selector: "node.picked", style: { "border-width": 5, "border-color": "#1565c0" } },
  { selector: "node.found", style: { "underlay-color": "#ffb300", "underlay-opacity": 0.6, "underlay-padding": 6 } },
  { selector: "node.cursor", style: { "underlay-color": "#1e88e5", "underlay-opacity": 0.45, "underlay-padding": 8 } },
  { selector: ".faded", style: { opacity: 0.18 } },
];

// What changes under JupyterLab's dark theme: frame fills and texts drawn on the canvas background itself.
const DARK = [
  { selector: "node.group.expanded", style: { "background-color": "#37474f", color: "#eceff1",
    "border-color": "#b0bec5" } },
  { selector: "node.group.collapsed", style: { "border-color": "#eceff1" } },
  { selector: "edge", style: { "line-color": "#b0bec5", "target-arrow-color": "#b0bec5" } },
];

export const STYLE = [...BASE, ...MARKS];
export const DARK_STYLE = [...BASE, ...DARK, ...MARKS];
