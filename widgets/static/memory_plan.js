// The memory-plan picture's browser side (widgets/memory_plan_view.py): Python draws the SVG; this shows it, says
// which tensor the pointer is on, and sends a click on a tensor back as `selected`. Plain ESM, no dependencies and
// no build step (the graph view's bundle is built by `make widget-js`; this file is used as it is).
function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "devcopy-memory-plan";
  root.style.fontFamily = "monospace";
  root.style.fontSize = "12px";
  const head = document.createElement("div");
  head.className = "dmp-summary";
  const hover = document.createElement("div");
  hover.className = "dmp-hover";
  hover.style.minHeight = "1.3em";
  const drawing = document.createElement("div");
  drawing.className = "dmp-drawing";
  drawing.style.overflow = "auto";
  drawing.style.maxHeight = "560px";
  root.append(head, hover, drawing);
  el.append(root);

  function draw() {
    head.textContent = model.get("summary");
    drawing.innerHTML = model.get("svg"); // Python's own SVG, its texts escaped there
    root.dataset.blocks = drawing.querySelectorAll(".dmp-block").length;
    root.dataset.selected = model.get("selected");
    root.dataset.renders = Number(root.dataset.renders || 0) + 1;
  }
  const named = (event) => event.target.closest && event.target.closest(".dmp-block");
  drawing.addEventListener("mouseover", (event) => {
    const block = named(event);
    hover.textContent = block ? block.querySelector("title").textContent.split("\n")[0] : "";
  });
  drawing.addEventListener("click", (event) => {
    const block = named(event);
    if (!block) return;
    model.set("selected", block.dataset.value);
    model.save_changes();
  });
  model.on("change:svg", draw);
  model.on("change:summary", draw);
  draw();
  return () => {
    model.off("change:svg", draw);
    model.off("change:summary", draw);
  };
}

export default { render };
