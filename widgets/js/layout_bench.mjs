// Times the graph view's layouts, headless, on element lists given as JSON files (benchmarks/graph_view.py writes
// them): each file laid out whole by dagre, and each later file reached from the first by the view's incremental
// update (layout.js `patch`). Prints {file: ms, "patch:file": ms}. Same style and layout options as the view.
import cytoscape from "cytoscape";
import fs from "fs";
import { layoutAll, patch } from "./layout.js";
import { STYLE } from "./style.js";

const files = process.argv.slice(2);
const read = (file) => JSON.parse(fs.readFileSync(file));
const times = {};
for (const file of files) {
  const cy = cytoscape({ headless: true, styleEnabled: true, style: STYLE });
  const start = performance.now();
  layoutAll(cy, read(file));
  times[file] = Math.round(performance.now() - start);
  cy.destroy();
}
for (const file of files.slice(1)) {
  const cy = cytoscape({ headless: true, styleEnabled: true, style: STYLE });
  layoutAll(cy, read(files[0]));
  const start = performance.now();
  const kept = patch(cy, read(file));
  times[`patch:${file}`] = kept ? Math.round(performance.now() - start) : null; // null: it laid out everything
  cy.destroy();
}
console.log(JSON.stringify(times));
process.exit(0); // headless cytoscape leaves timers behind
