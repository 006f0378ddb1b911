// The copies of the placed graph as a list: sorted by bytes or by predicted time (most first), each row a link
// that picks the copy in the view.
const COLUMNS = [["copy", "id"], ["kind", "kind"], ["device", "device"], ["bytes", "bytes_text"],
  ["predicted", "predicted_text"]];
export const SORT_KEYS = { bytes: "bytes", predicted: "predicted_s" };

export function sortedCopies(nodes, kinds, by = "bytes") {
  const key = SORT_KEYS[by];
  return nodes.filter((n) => kinds.has(n.kind)).sort((a, b) => (b[key] || 0) - (a[key] || 0));
}

function cell(tag, text) {
  const node = document.createElement(tag);
  node.textContent = text;
  return node;
}

// Fill `list` (a <details>) with a table of `copies`; a header of a sortable column calls onSort(key).
export function showCopies(list, copies, by, onPick, onSort) {
  const table = document.createElement("table");
  const head = document.createElement("tr");
  for (const [label] of COLUMNS) {
    const th = cell("th", label === by ? `${label} ▼` : label);
    if (SORT_KEYS[label]) {
      th.className = `dgv-sort dgv-sort-${label}`;
      th.onclick = () => onSort(label);
    }
    head.append(th);
  }
  table.append(head);
  for (const copy of copies) {
    const row = document.createElement("tr");
    row.className = "dgv-copy-row";
    row.dataset.id = copy.id;
    for (const [, key] of COLUMNS) row.append(cell("td", String(copy[key] ?? "")));
    row.onclick = () => onPick(copy.id);
    table.append(row);
  }
  const summary = list.querySelector("summary");
  summary.textContent = `copies (${copies.length}), most ${by} first`;
  list.replaceChildren(summary, table);
}
