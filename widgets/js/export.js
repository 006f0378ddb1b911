// The graph as a picture: PNG from cytoscape's own renderer, SVG written from the laid-out boxes and edges (each
// node a rounded box in its colour with its label, each edge a line with an arrow head), both of the whole graph.
function escape(text) {
  return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

// What one canvas may hold: Chromium draws nothing (and so writes a 0-byte PNG) past 2^28 pixels or 32767 px a side,
// Safari past 2^24 pixels; a picture bigger than this at twice the screen resolution is exported at a smaller scale.
export const PNG_SCALE = 2;
export const MAX_SIDE_PX = 32767;
export const MAX_AREA_PX = 2 ** 28;

// The scale at which the whole graph fits one canvas: PNG_SCALE when it can.
export function pngScale(cy, maxSide = MAX_SIDE_PX, maxArea = MAX_AREA_PX) {
  const bb = cy.elements().boundingBox();
  const w = Math.max(bb.w, 1);
  const h = Math.max(bb.h, 1);
  const fits = Math.min(PNG_SCALE, (maxSide - 2) / w, (maxSide - 2) / h, Math.sqrt(maxArea / (w * h)) * 0.999);
  return fits >= PNG_SCALE ? PNG_SCALE : Math.floor(fits * 1000) / 1000;
}

// The whole graph as a PNG blob and the scale it was drawn at: PNG_SCALE, or less when the picture would not fit
// one canvas; halved again while the browser still hands back nothing. `blob` is null only when even a tiny picture
// fails (the caller says so rather than saving an empty file).
export async function pngBlob(cy, background) {
  let scale = pngScale(cy);
  for (let tries = 0; tries < 6 && scale > 0.001; tries += 1) {
    let blob = null;
    try {
      blob = await cy.png({ output: "blob-promise", full: true, scale, bg: background });
    } catch {
      blob = null; // the canvas was too big to encode
    }
    if (blob && blob.size > 0) return { blob, scale };
    scale /= 2;
  }
  return { blob: null, scale };
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
