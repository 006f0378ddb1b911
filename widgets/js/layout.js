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

// The room an element takes: its body and its label (a frame's name sits above it), never the marks (underlays of a
// search hit or the cursor, the overlay of a press), which come and go: a box measured with them would drift.
export function box(ele) {
  const b = ele.boundingBox({ includeOverlays: false, includeUnderlays: false });
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
  place(group, before);
}

// Move `group` (with what it holds) so that its box, label included, has its top where `before` had it and the same
// centre across: a box opened into a frame and closed again comes back exactly where it was, however often.
function place(group, before) {
  const b = box(group);
  const shift = { x: (before.x1 + before.x2) / 2 - (b.x1 + b.x2) / 2, y: before.y1 - b.y1 };
  if (group.isChildless()) group.shift(shift);
  else group.descendants().filter((n) => n.isChildless()).shift(shift);
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

// Closing a frame that dagre laid out open: something beside it entirely below the box's new bottom would be left
// behind (or run into what moves up from below), so the caller lays out everything instead. (What only reaches
// below the box's bottom was beside the box when it opened, and goes back beside it.)
function besideBelow(cy, frame, now, skip) {
  return cy.nodes().some((n) => {
    if (!n.isChildless() || skip.has(n.id())) return false;
    const b = box(n);
    return b.y1 < frame.y2 - 1 && b.y1 >= now.y2 - 1 && (b.x1 >= frame.x2 - 1 || b.x2 <= frame.x1 + 1);
  });
}

// True when the opened frame (or closed box) overlaps anything but what it holds and the frames around it.
function clashes(cy, group) {
  const mine = new Set([group.id(), ...group.descendants().map((n) => n.id()), ...group.ancestors().map((n) => n.id())]);
  const g = box(group);
  return cy.nodes().some((n) => !mine.has(n.id()) && !n.ancestors().contains(group) && overlaps(box(n), g));
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

// What turns the elements `cy` shows into `elements` (`want`: them by id): `stale`, the elements to remove (gone, or
// moved to another parent, with their edges), and `fresh`, the element descriptions to add.
function difference(cy, elements, want) {
  const moved = cy.elements().filter((ele) => {
    const e = want.get(ele.id());
    return !e || (ele.isNode() && (ele.data("parent") || "") !== (e.data.parent || ""));
  });
  const stale = moved.union(moved.connectedEdges()); // a node re-added takes its edges with it
  const staleIds = new Set(stale.map((ele) => ele.id()));
  const fresh = elements.filter((e) => staleIds.has(e.data.id) || cy.getElementById(e.data.id).empty());
  return { stale, staleIds, fresh };
}

// Remove `stale`, restyle what stays and add `fresh`, in one batch: styles are applied when it ends. An element that
// stays keeps its style and its measured label, so a big graph's change costs cytoscape only what changed.
function change(cy, elements, stale, fresh) {
  cy.batch(() => {
    stale.remove();
    for (const e of elements) {
      const ele = cy.getElementById(e.data.id);
      if (ele.nonempty()) restyle(ele, e);
    }
    cy.add(fresh);
  });
}

// Show `elements`, each node where its `position` says (a layout of everything, from the worker): the elements that
// stay are moved, not removed and added again (which made cytoscape restyle and measure every label anew: seconds
// on the main thread for a big model), and all positions are set in one call.
export function replace(cy, elements) {
  const want = new Map(elements.map((e) => [e.data.id, e]));
  const { stale, fresh } = difference(cy, elements, want);
  cy.batch(() => {
    change(cy, elements, stale, fresh);
    cy.nodes().filter((n) => n.isChildless() && want.get(n.id()).position)
      .positions((n) => want.get(n.id()).position);
  });
}

// Show `elements` keeping the layout of what stays. Returns false (and changes nothing) when too much is new for
// that to read well: the caller then lays out everything.
export function patch(cy, elements) {
  const want = new Map(elements.map((e) => [e.data.id, e]));
  const { stale, staleIds, fresh } = difference(cy, elements, want);
  const turned = [];
  cy.nodes(".group").forEach((ele) => {
    const e = want.get(ele.id());
    if (!e || staleIds.has(ele.id())) return;
    const now = (e.classes || "").split(" ").includes("collapsed");
    if (ele.hasClass("collapsed") !== now) turned.push({ id: ele.id(), opened: !now, before: box(ele) });
  });
  if (turned.length > 1) return false; // several groups opened or closed at once ("collapse groups"): lay out anew
  const inTurned = (e) => turned.some((t) => t.opened && isInside(e, t.id, want));
  const loose = fresh.filter((e) => !("source" in e.data) && !inTurned(e));
  const shown = elements.filter((e) => !("source" in e.data)).length;
  if (loose.length > Math.max(12, 0.3 * shown)) return false;
  change(cy, elements, stale, fresh); // sizes and boxes below are the new ones
  const freshIds = new Set(fresh.map((e) => e.data.id));
  const placed = new Set(cy.nodes().filter((n) => !freshIds.has(n.id())).map((n) => n.id()));
  for (const t of turned) {
    const group = cy.getElementById(t.id);
    if (t.opened) layoutInside(cy, group, t.before, want);
    else place(group, t.before);
    const skip = new Set([t.id, ...group.descendants().map((n) => n.id())]);
    if (!t.opened && besideBelow(cy, t.before, box(group), skip)) return false;
    shiftAround(cy, t.before, box(group), skip);
    if (clashes(cy, group)) return false;
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

// The room a frame's name takes above it (13 px text) and its padding on each side (style.js).
const FRAME_LABEL = 20;
const FRAME_PAD = 14;

// Lay out a graph of module frames one frame at a time: each open frame's direct children (nodes, boxes, and inner
// frames as boxes of their own laid-out size) by dagre on their own, innermost frames first, then each frame's
// contents moved to where its box went. dagre recurses along the chains it ranks, so one run over thousands of
// nodes in a row overflows a worker's stack; here a run sees one frame's children only (a layer's ops, the layers of
// a model). Returns {id: {x, y}} for every childless node; `cy` is a headless cytoscape with the view's style.
export function layoutNested(cy, elements) {
  const nodes = elements.filter((e) => !("source" in e.data));
  const parentOf = new Map(nodes.map((e) => [e.data.id, e.data.parent || ""]));
  const kids = new Map([["", []]]);
  for (const e of nodes) {
    const p = e.data.parent || "";
    if (!kids.has(p)) kids.set(p, []);
    kids.get(p).push(e.data.id);
  }
  // leaf sizes from the view's style, measured once
  cy.batch(() => {
    cy.elements().remove();
    cy.add(nodes.filter((e) => !kids.has(e.data.id)).map((e) => ({ data: { ...e.data, parent: undefined },
      classes: e.classes || "" })));
  });
  const size = new Map();
  cy.nodes().forEach((n) => { size.set(n.id(), { w: n.outerWidth(), h: n.outerHeight() }); });
  cy.elements().remove();
  // each edge joins the two children of the innermost frame holding both ends
  const path = (id) => {
    const up = [];
    for (let at = id; at; at = parentOf.get(at)) up.unshift(at);
    return up;
  };
  const links = new Map(); // frame -> Set of "a\tb"
  for (const e of elements) {
    if (!("source" in e.data)) continue;
    const a = path(e.data.source);
    const b = path(e.data.target);
    let i = 0;
    while (i < a.length && i < b.length && a[i] === b[i]) i += 1;
    if (i === a.length || i === b.length) continue; // an edge to or from a frame holding the other end
    const frame = i === 0 ? "" : a[i - 1];
    if (!links.has(frame)) links.set(frame, new Set());
    links.get(frame).add(`${a[i]}\t${b[i]}`);
  }
  const boxes = cytoscape({ headless: true, styleEnabled: true, style: BOXES });
  const rel = new Map(); // item -> position inside its frame's own layout
  const inner = new Map(); // frame -> box of its children in its own layout
  const order = [];
  const visit = (frame) => {
    for (const k of kids.get(frame) || []) if (kids.has(k)) visit(k);
    order.push(frame);
  };
  visit("");
  for (const frame of order) {
    const items = kids.get(frame);
    const els = items.map((id) => {
      const s = size.get(id) || { w: inner.get(id).w + 2 * FRAME_PAD, h: inner.get(id).h + 2 * FRAME_PAD + FRAME_LABEL };
      return { data: { id, w: s.w, h: s.h } };
    });
    for (const pair of links.get(frame) || []) {
      const [source, target] = pair.split("\t");
      els.push({ data: { id: pair, source, target } });
    }
    const level = layoutBoxes(boxes, els);
    let x1 = Infinity;
    let y1 = Infinity;
    let x2 = -Infinity;
    let y2 = -Infinity;
    level.nodes().forEach((n) => {
      const p = n.position();
      const w = n.data("w");
      const h = n.data("h");
      rel.set(n.id(), { x: p.x, y: p.y });
      x1 = Math.min(x1, p.x - w / 2);
      y1 = Math.min(y1, p.y - h / 2);
      x2 = Math.max(x2, p.x + w / 2);
      y2 = Math.max(y2, p.y + h / 2);
    });
    inner.set(frame, { x1, y1, w: x2 - x1, h: y2 - y1 });
    level.elements().remove();
  }
  // top down: a frame's children around where the frame's box went (below its name)
  const positions = {};
  const place = (frame, cx, cy0) => {
    const b = inner.get(frame);
    for (const id of kids.get(frame)) {
      const p = rel.get(id);
      const x = p.x - (b.x1 + b.w / 2) + cx;
      const y = p.y - (b.y1 + b.h / 2) + cy0;
      if (kids.has(id)) place(id, x, y + FRAME_LABEL / 2);
      else positions[id] = { x, y };
    }
  };
  place("", 0, 0);
  boxes.destroy();
  return positions;
}

const BOXES = [{ selector: "node", style: { shape: "rectangle", width: "data(w)", height: "data(h)", padding: 0,
  "border-width": 0 } }];

// dagre over `els` (nodes sized by their data w and h) in the headless `cy`, which it leaves holding them.
function layoutBoxes(cy, els) {
  cy.batch(() => {
    cy.elements().remove();
    cy.add(els);
  });
  cy.layout(LAYOUT).run();
  return cy;
}
