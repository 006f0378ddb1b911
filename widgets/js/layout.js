// Keeping the layout across changes. Nodes that stay keep their place; a group that opens is laid out on its own
// (dagre in a headless cytoscape) where its box was, and what lies below or beside it moves by the room it takes;
// a group that closes becomes a box where its frame was; other new nodes go between their neighbours. dagre runs
// over everything only for the first drawing, or when most of what is shown is new.
import cytoscape from "cytoscape";
import dagre from "cytoscape-dagre";
import { LAYOUT, STYLE } from "./style.js";

cytoscape.use(dagre);

const GAP = 16;
export const MARK_CLASSES = new Set(["picked", "found", "cursor", "faded"]);

function box(ele) {
  const b = ele.boundingBox();
  return { x1: b.x1, y1: b.y1, x2: b.x2, y2: b.y2, w: b.w, h: b.h };
}

function overlaps(a, b) {
  return a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2;
}

export function layoutAll(cy, elements) {
  cy.batch(() => { cy.elements().remove(); cy.add(elements); });
  cy.layout(LAYOUT).run();
}

// New data and classes on an element that stays (the marks the view adds are put back by the caller).
function restyle(ele, e) {
  if (Object.keys(e.data).some((k) => ele.data(k) !== e.data[k])) ele.data(e.data);
  const classes = e.classes || "";
  if (ele.classes().filter((c) => !MARK_CLASSES.has(c)).join(" ") !== classes) ele.classes(classes);
}

// Lay out what an opened group holds on its own, centred under where its box was.
function layoutInside(cy, group, before, want) {
  const ids = new Set(group.descendants().map((n) => n.id()));
  if (ids.size === 0) return;
  const inner = [...ids].map((id) => {
    const e = want.get(id);
    const data = { ...e.data };
    if (data.parent === group.id()) delete data.parent;
    return { data, classes: e.classes || "" };
  });
  group.descendants().connectedEdges().forEach((edge) => {
    if (ids.has(edge.source().id()) && ids.has(edge.target().id())) inner.push({ data: { ...edge.data() } });
  });
  const alone = cytoscape({ headless: true, styleEnabled: true, style: STYLE, elements: inner });
  alone.layout(LAYOUT).run();
  const bb = alone.elements().boundingBox();
  const dx = (before.x1 + before.x2) / 2 - (bb.x1 + bb.x2) / 2;
  const dy = before.y1 + GAP - bb.y1;
  alone.nodes().filter((n) => n.isChildless()).forEach((n) => {
    const p = n.position();
    cy.getElementById(n.id()).position({ x: p.x + dx, y: p.y + dy });
  });
  alone.destroy();
}

// Make room for a box that changed size from `before` to `after`: what is below moves down (or up), what is beside
// it on the same band moves out (or in) by half the change in width.
function shiftAround(cy, before, after, skip) {
  const dy = after.h - before.h;
  const dx = (after.w - before.w) / 2;
  cy.nodes().filter((n) => n.isChildless() && !skip.has(n.id())).forEach((n) => {
    const b = box(n);
    if (b.y1 >= before.y2 - 1) n.shift({ x: 0, y: dy });
    else if (b.y2 > before.y1 && b.x1 >= before.x2 - 1) n.shift({ x: dx, y: 0 });
    else if (b.y2 > before.y1 && b.x2 <= before.x1 + 1) n.shift({ x: -dx, y: 0 });
  });
}

// A new node between its placed neighbours (below its inputs, above its users), moved right until it overlaps
// nothing. Returns false when no neighbour is placed yet.
function placeNear(cy, node, placed, obstacles) {
  const near = (eles) => eles.filter((n) => placed.has(n.id())).map(box);
  const ins = near(node.incomers().nodes());
  const outs = near(node.outgoers().nodes());
  const all = [...ins, ...outs];
  if (all.length === 0) return false;
  const w = node.outerWidth();
  const h = node.outerHeight();
  let x = all.reduce((s, b) => s + (b.x1 + b.x2) / 2, 0) / all.length;
  const below = ins.length ? Math.max(...ins.map((b) => b.y2)) : null;
  const above = outs.length ? Math.min(...outs.map((b) => b.y1)) : null;
  let y;
  if (below !== null && above !== null) y = (below + above) / 2;
  else if (below !== null) y = below + LAYOUT.rankSep + h / 2;
  else y = above - LAYOUT.rankSep - h / 2;
  for (let tries = 0; tries < 60; tries += 1) {
    const b = { x1: x - w / 2, x2: x + w / 2, y1: y - h / 2, y2: y + h / 2 };
    const hit = obstacles.find((o) => overlaps(o, b));
    if (!hit) break;
    x = hit.x2 + GAP + w / 2;
  }
  node.position({ x, y });
  placed.add(node.id());
  obstacles.push(box(node));
  return true;
}

// Show `elements` keeping the layout of what stays. Returns false (and changes nothing) when too much is new for
// that to read well: the caller then lays out everything.
export function patch(cy, elements) {
  const want = new Map(elements.map((e) => [e.data.id, e]));
  const moved = cy.elements().filter((ele) => {
    const e = want.get(ele.id());
    return !e || (ele.isNode() && (ele.data("parent") || "") !== (e.data.parent || ""));
  });
  const stale = moved.union(moved.connectedEdges()); // a node re-added takes its edges with it
  const staleIds = new Set(stale.map((ele) => ele.id()));
  const fresh = elements.filter((e) => staleIds.has(e.data.id) || cy.getElementById(e.data.id).empty());
  const turned = [];
  cy.nodes(".group").forEach((ele) => {
    const e = want.get(ele.id());
    if (!e || staleIds.has(ele.id())) return;
    const now = (e.classes || "").split(" ").includes("collapsed");
    if (ele.hasClass("collapsed") !== now) turned.push({ id: ele.id(), opened: !now, before: box(ele) });
  });
  const inTurned = (e) => turned.some((t) => t.opened && isInside(e, t.id, want));
  const loose = fresh.filter((e) => !("source" in e.data) && !inTurned(e));
  const shown = elements.filter((e) => !("source" in e.data)).length;
  if (loose.length > Math.max(12, 0.3 * shown)) return false;
  cy.batch(() => {
    stale.remove();
    for (const e of elements) {
      const ele = cy.getElementById(e.data.id);
      if (ele.nonempty()) restyle(ele, e);
    }
    cy.add(fresh);
  }); // styles are applied when the batch ends: sizes and boxes below are the new ones
  const freshIds = new Set(fresh.map((e) => e.data.id));
  const placed = new Set(cy.nodes().filter((n) => !freshIds.has(n.id())).map((n) => n.id()));
  for (const t of turned) {
    const group = cy.getElementById(t.id);
    if (t.opened) layoutInside(cy, group, t.before, want);
    else group.position({ x: (t.before.x1 + t.before.x2) / 2, y: t.before.y1 + group.outerHeight() / 2 });
    const skip = new Set([t.id, ...group.descendants().map((n) => n.id())]);
    shiftAround(cy, t.before, box(group), skip);
    skip.forEach((id) => placed.add(id));
  }
  const obstacles = cy.nodes().filter((n) => n.isChildless() && placed.has(n.id())).map(box);
  let waiting = loose.map((e) => cy.getElementById(e.data.id)).filter((n) => n.isChildless());
  while (waiting.length) {
    const left = waiting.filter((n) => !placeNear(cy, n, placed, obstacles));
    if (left.length === waiting.length) break;
    waiting = left;
  }
  const bottom = cy.nodes().filter((n) => placed.has(n.id())).boundingBox();
  waiting.forEach((n, i) => n.position({ x: bottom.x1 + i * 160, y: bottom.y2 + LAYOUT.rankSep * 2 }));
  return true;
}

function isInside(e, groupId, want) {
  for (let parent = e.data.parent; parent; parent = want.get(parent)?.data.parent) {
    if (parent === groupId) return true;
  }
  return false;
}
