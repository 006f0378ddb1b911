// The graph's data in the page: `nodes` and `elements` as the kernel last described them. They come whole with the
// widget's state; every change after that comes as a patch message (widgets/graph_view.py `graph_patch`: the items
// set, the changed fields of others, the ids removed, the new order) just before the `revision` bump the views draw
// on. One copy per model, shared by its views (a second output of the same widget draws the same data). A patch that does not start from
// the revision held (one missed while the page loaded the module) asks the kernel for everything again (`resync`).
// anywidget hands each view (and initialize) its own proxy of the model, so the data is keyed by something the views
// share: the model's layout model (one per widget instance), or the model itself where there is none.
const held = new WeakMap();
const keyOf = (model) => model.get("layout") || model;

// `patch.update` holds [id, fields] of items whose other fields stay (graph_view.py list_patch).
function applyList(list, patch, key) {
  const update = patch.update || [];
  if (!patch.set.length && !update.length && !patch.remove.length && !patch.order) return list;
  const byId = new Map(list.map((item) => [key(item), item]));
  for (const id of patch.remove) byId.delete(id);
  for (const item of patch.set) byId.set(key(item), item);
  for (const [id, fields] of update) byId.set(id, { ...byId.get(id), ...fields });
  const order = patch.order || list.map(key).filter((id) => byId.has(id));
  return order.map((id) => byId.get(id));
}

function receive(model, data, content) {
  if (!content || content.kind !== "graph_patch") return;
  if (content.full) {
    data.nodes = applyList([], content.nodes, (n) => n.id);
    data.elements = applyList([], content.elements, (e) => e.data.id);
    data.revision = content.revision;
    data.asked = false;
    data.patches += 1;
    for (const redraw of data.views) redraw();
    return;
  }
  if (content.base !== data.revision) {
    if (!data.asked) model.send({ action: "resync" });
    data.asked = true;
    return;
  }
  data.nodes = applyList(data.nodes, content.nodes, (n) => n.id);
  data.elements = applyList(data.elements, content.elements, (e) => e.data.id);
  data.revision = content.revision;
  data.patches += 1;
}

// The model's data (made on first use: by anywidget's initialize, or by the first view).
export function graphData(model) {
  let data = held.get(keyOf(model));
  if (data) return data;
  const revision = model.get("data_revision");
  data = {
    nodes: model.get("nodes") || [],
    elements: model.get("elements") || [],
    revision: revision === undefined ? model.get("revision") : revision,
    views: new Set(), // each view's redraw, called when a resync brings everything
    asked: false,
    patches: 0,
  };
  held.set(keyOf(model), data);
  model.on("msg:custom", (content) => receive(model, data, content));
  // a whole list set on the model (a page that sets state by hand, as the bundle tests' stand-in does)
  model.on("change:nodes", () => { data.nodes = model.get("nodes"); });
  model.on("change:elements", () => { data.elements = model.get("elements"); });
  model.on("change:data_revision", () => { data.revision = model.get("data_revision"); data.asked = false; });
  return data;
}

// True when the data is at the revision the model says; otherwise asks once for everything and returns false.
export function current(model, data) {
  const revision = model.get("revision");
  if (revision === undefined || data.revision === revision) return true;
  if (!data.asked) model.send({ action: "resync" });
  data.asked = true;
  return false;
}
