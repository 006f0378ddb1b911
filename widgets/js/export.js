// The graph as a picture: PNG from cytoscape's own renderer, SVG written from the laid-out boxes and edges (each
// node a rounded box in its colour with its label, each edge a line with an arrow head), both of the whole graph.
function escape(text) {
  return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

export function pngBlob(cy, background) {
  return cy.png({ output: "blob", full: true, scale: 2, bg: background });
}

function nodeSvg(node) {
  const b = node.boundingBox({ includeLabels: false });
  const style = (name) => node.style(name);
  const expanded = node.hasClass("expanded");
  const fill = expanded ? "none" : style("background-color");
  const stroke = style("border-color");
  const lines = String(node.data("label") || "").split("\n");
  const lineH = 15;
  const top = expanded ? b.y1 - 4 : (b.y1 + b.y2) / 2 - ((lines.length - 1) * lineH) / 2 + 4;
  const text = lines.map((line, i) => `<tspan x="${(b.x1 + b.x2) / 2}" y="${top + i * lineH}">${escape(line)}</tspan>`);
  return `<g class="node" data-id="${escape(node.id())}"><rect x="${b.x1}" y="${b.y1}" width="${b.w}" height="${b.h}" ` +
    `rx="5" fill="${fill}" stroke="${stroke}" stroke-width="${parseFloat(style("border-width"))}"` +
    `${expanded ? ' stroke-dasharray="6 4"' : ""}/>` +
    `<text text-anchor="middle" font-family="monospace" font-size="12" fill="${style("color")}">${text.join("")}</text></g>`;
}

function edgeSvg(edge) {
  const s = edge.sourceEndpoint();
  const t = edge.targetEndpoint();
  return `<line class="edge" x1="${s.x}" y1="${s.y}" x2="${t.x}" y2="${t.y}" stroke="${edge.style("line-color")}" ` +
    'stroke-width="1.5" marker-end="url(#arrow)"/>';
}

export function svgText(cy, background) {
  const bb = cy.elements().boundingBox();
  const pad = 20;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="${bb.x1 - pad} ${bb.y1 - pad} ${bb.w + 2 * pad} ${bb.h + 2 * pad}" ` +
      `width="${Math.ceil(bb.w + 2 * pad)}" height="${Math.ceil(bb.h + 2 * pad)}">`,
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" ' +
      'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#90a4ae"/></marker></defs>',
    `<rect x="${bb.x1 - pad}" y="${bb.y1 - pad}" width="${bb.w + 2 * pad}" height="${bb.h + 2 * pad}" fill="${background}"/>`,
  ];
  // frames first (outermost first), then edges, then the boxes on top
  const frames = cy.nodes(":parent").sort((a, b) => a.ancestors().length - b.ancestors().length);
  frames.forEach((n) => parts.push(nodeSvg(n)));
  cy.edges().forEach((e) => parts.push(edgeSvg(e)));
  cy.nodes(":childless").forEach((n) => parts.push(nodeSvg(n)));
  parts.push("</svg>");
  return parts.join("\n");
}

export function download(blob, name) {
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}
