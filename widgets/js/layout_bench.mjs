// Times the graph view's dagre layout, headless, on element lists given as JSON files (benchmarks/graph_view.py
// writes them): prints {file: milliseconds}. Same style and layout options as the view.
import cytoscape from "cytoscape";
import fs from "fs";
import { LAYOUT, STYLE } from "./graph_view.js";

const times = {};
for (const file of process.argv.slice(2)) {
  const cy = cytoscape({ headless: true, styleEnabled: true, style: STYLE, elements: JSON.parse(fs.readFileSync(file)) });
  const start = performance.now();
  cy.layout(LAYOUT).run();
  times[file] = Math.round(performance.now() - start);
  cy.destroy();
}
console.log(JSON.stringify(times));
