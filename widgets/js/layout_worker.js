// The layout worker: dagre over a whole element list off the page's main thread (the view's own layoutAll, in a
// headless cytoscape with the view's style, so positions are the ones the page would compute). Built into a string
// the view starts a Worker from (package.json `build`); the page applies the positions it posts back.
import cytoscape from "cytoscape";
import { layoutAll } from "./layout.js";
import { STYLE } from "./style.js";

self.onmessage = (event) => {
  const { id, elements } = event.data;
  const start = performance.now();
  const cy = cytoscape({ headless: true, styleEnabled: true, style: STYLE });
  layoutAll(cy, elements);
  const positions = {};
  cy.nodes().forEach((n) => {
    if (n.isChildless()) positions[n.id()] = n.position();
  });
  cy.destroy();
  self.postMessage({ id, positions, ms: performance.now() - start });
};
