// Whole layouts of big graphs run in a Web Worker (layout_worker.js, bundled as text into this file's bundle), so the
// page stays responsive while dagre works: the view gets each node's position back and applies them in one batch.
// Where a worker cannot start (a page that forbids blob: workers), layouts run on the main thread as before.
import source from "./build/layout_worker.txt";

let worker = null;
let failed = false;
let next = 0;
const waiting = new Map();

function start() {
  if (worker || failed) return worker;
  try {
    const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
    worker = new Worker(url);
    worker.onmessage = (event) => {
      const done = waiting.get(event.data.id);
      waiting.delete(event.data.id);
      if (done) done.resolve(event.data);
    };
    worker.onerror = (event) => {
      failed = true;
      worker = null;
      for (const done of waiting.values()) done.reject(new Error(event.message || "layout worker failed"));
      waiting.clear();
    };
  } catch {
    failed = true;
  }
  return worker;
}

// dagre over `elements` in the worker: {positions: {id: {x, y}}, ms}, or null when no worker can run it.
export function layoutInWorker(elements) {
  const w = start();
  if (!w) return null;
  const id = (next += 1);
  return new Promise((resolve, reject) => {
    waiting.set(id, { resolve, reject });
    w.postMessage({ id, elements });
  });
}
