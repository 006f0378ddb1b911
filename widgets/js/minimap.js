// The overview navigator: the whole laid-out graph drawn small (boxes in their device colour, copies red, open
// frames outlined) with the part the canvas shows as a blue rectangle. A click or a drag on it centres the canvas
// there; it redraws after every drawing and on every pan or zoom (at most once a frame).
const PAD = 4;

export function minimap(cy, host, onMove) {
  const canvas = document.createElement("canvas");
  canvas.className = "dgv-minimap";
  canvas.title = "overview: click or drag to move the view";
  host.append(canvas);
  let frame = null;
  let map = null; // {x, y, s}: a graph point p is drawn at ((p.x - x) * s + PAD, (p.y - y) * s + PAD)

  function draw() {
    frame = null;
    const width = canvas.clientWidth;
    const height = canvas.clientHeight;
    if (!width || !height) return;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const eles = cy.nodes();
    if (eles.empty()) return;
    const bb = eles.boundingBox({ includeLabels: false });
    const s = Math.min((width - 2 * PAD) / Math.max(bb.w, 1), (height - 2 * PAD) / Math.max(bb.h, 1));
    map = { x: bb.x1, y: bb.y1, s };
    const rect = (b) => [(b.x1 - map.x) * s + PAD, (b.y1 - map.y) * s + PAD, Math.max(b.w * s, 1), Math.max(b.h * s, 1)];
    const opts = { includeLabels: false, includeOverlays: false, includeUnderlays: false };
    cy.nodes(":parent").forEach((n) => {
      ctx.strokeStyle = "#90a4ae";
      ctx.lineWidth = 1;
      ctx.strokeRect(...rect(n.boundingBox(opts)));
    });
    cy.nodes(":childless").forEach((n) => {
      ctx.fillStyle = n.hasClass("copy") ? "#c62828" : n.data("colour") || "#b0bec5";
      ctx.fillRect(...rect(n.boundingBox(opts)));
    });
    const view = cy.extent();
    const shown = rect(view);
    ctx.strokeStyle = "#1565c0";
    ctx.lineWidth = 2;
    ctx.strokeRect(...shown);
    canvas.dataset.view = shown.map((v) => v.toFixed(1)).join(",");
  }

  function redraw() {
    if (frame === null) frame = requestAnimationFrame(draw);
  }

  function moveTo(event) {
    if (!map) return;
    const r = canvas.getBoundingClientRect();
    const x = (event.clientX - r.left - canvas.clientLeft - PAD) / map.s + map.x;
    const y = (event.clientY - r.top - canvas.clientTop - PAD) / map.s + map.y;
    const zoom = cy.zoom();
    cy.pan({ x: cy.width() / 2 - x * zoom, y: cy.height() / 2 - y * zoom });
    onMove();
  }
  let dragging = false;
  canvas.addEventListener("pointerdown", (event) => {
    dragging = true;
    canvas.setPointerCapture(event.pointerId);
    moveTo(event);
  });
  canvas.addEventListener("pointermove", (event) => { if (dragging) moveTo(event); });
  canvas.addEventListener("pointerup", () => { dragging = false; });
  cy.on("viewport resize", redraw);
  return { redraw, draw, element: canvas };
}
