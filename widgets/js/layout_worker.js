// The layout worker: dagre over a whole element list off the page's main thread (module by module when it has open
// frames: layout.js layoutNested; else the view's own layoutAll), in a headless cytoscape with the view's style. Built
// into a string the view starts a Worker from (package.json `build`); the page applies the positions it posts back.
import cytoscape from "cytoscape";
import { layoutAll, layoutNested } from "./layout.js";
import { STYLE } from "./style.js";

self.onmessage = (event) => {
  const { id, elements } = event.data;
  const start = performance.now();
  const cy = cytoscape({ headless: true, styleEnabled: true, style: STYLE });
  let positions = {};
  if (elements.some((e) => e.data.parent)) positions = layoutNested(cy, elements); // module by module
  else {
    layoutAll(cy, elements);
    cy.nodes().forEach((n) => { positions[n.id()] = n.position(); });
  }
  cy.destroy();
  self.postMessage({ id, positions, ms: performance.now() - start });
};
