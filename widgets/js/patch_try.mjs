import cytoscape from "cytoscape";
import fs from "fs";
import { layoutAll, patch } from "./layout.js";
import { STYLE } from "./style.js";
const seq = JSON.parse(fs.readFileSync("/tmp/seq.json"));
const cy = cytoscape({ headless: true, styleEnabled: true, style: STYLE });
let t = performance.now();
layoutAll(cy, seq.opened); console.log("full", Math.round(performance.now() - t));
for (const k of ["open", "dedupe", "toggle", "close", "reset"]) {
  t = performance.now();
  const ok = patch(cy, seq[k]);
  const ms = Math.round(performance.now() - t);
  const ids = new Set(seq[k].map((e) => e.data.id));
  const same = cy.elements().length === ids.size && cy.elements().every((e) => ids.has(e.id()));
  // overlaps among leaves
  const leaves = cy.nodes().filter((n) => n.isChildless());
  let over = 0;
  const bbs = leaves.map((n) => n.boundingBox({includeLabels: false}));
  for (let i = 0; i < bbs.length; i++) for (let j = i + 1; j < bbs.length; j++) { const a = bbs[i], b = bbs[j]; if (a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2) over++; }
  console.log(k, ok, ms, "same", same, "overlaps", over, "n", leaves.length);
  if (!ok) layoutAll(cy, seq[k]);
}
t = performance.now(); layoutAll(cy, seq.open); console.log("full open", Math.round(performance.now() - t));
