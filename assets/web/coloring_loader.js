// ColorConcept Lab coloring canvas: the js_on_load of gr.HTML, called with (element, trigger,
// props, server, upload, watch). app/coloring_canvas.py puts `const CANVAS = {...};` before it:
// settings (tolerance and swatches, read once), and script and color_names, the server paths of
// coloring.js and of evaluation.color.naming's table as JSON (app.coloring_canvas.served_files).
// Both are fetched through Gradio's file route once per page, not carried in the page's
// configuration; then coloring.js runs with this call's arguments and
// SETTINGS = {...settings, color_names}. Without the table the colors stay unnamed; without the
// script the status line says so.

const ARGS = "element trigger props server upload watch SETTINGS".split(" ");
const root = String(window.gradio_config?.root ?? "").replace(/\/$/, "");
const loads = (window.colorconceptCanvasFiles ??= new Map());

function load(path, read) {
  if (!loads.has(path)) {
    const loading = fetch(root + "/gradio_api/file=" + encodeURI(path)).then((response) => {
      if (!response.ok) throw new Error("HTTP " + response.status + " for " + path);
      return read(response);
    });
    loads.set(path, loading);
    loading.catch(() => loads.delete(path)); // a later canvas tries again
  }
  return loads.get(path);
}

Promise.allSettled([load(CANVAS.script, (r) => r.text()), load(CANVAS.color_names, (r) => r.json())]).then(
  ([script, names]) => {
    if (script.status === "rejected") {
      console.error("The coloring canvas did not load:", script.reason);
      const status = element.querySelector(".cc-status");
      if (status) status.textContent = "The coloring tool did not load (" + script.reason.message + "): reload the page.";
      return;
    }
    if (names.status === "rejected") console.warn("Color names did not load:", names.reason);
    const SETTINGS = { ...CANVAS.settings, color_names: names.value ?? null };
    const run = Function(...ARGS, script.value + "\n//# sourceURL=coloring.js");
    run(element, trigger, props, server, upload, watch, SETTINGS);
  },
);
