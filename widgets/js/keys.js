// Keyboard moves between nodes: the next node in an arrow's direction is the nearest one ahead, what lies off to
// the side counting double (so Down follows the graph's column rather than jumping across).
export function nextInDirection(cy, from, [dx, dy]) {
  const items = cy.nodes().filter((n) => n.isChildless() || n.hasClass("collapsed"));
  if (from.empty()) {
    return items.length ? items.sort((a, b) => a.position("y") - b.position("y") || a.position("x") -
      b.position("x")).first() : null;
  }
  const at = from.position();
  let best = null;
  let bestScore = Infinity;
  items.forEach((n) => {
    if (n.same(from)) return;
    const p = n.position();
    const ahead = (p.x - at.x) * dx + (p.y - at.y) * dy;
    if (ahead <= 0) return;
    const aside = Math.abs((p.x - at.x) * dy) + Math.abs((p.y - at.y) * dx);
    const score = ahead + 2 * aside;
    if (score < bestScore) { bestScore = score; best = n; }
  });
  return best;
}
