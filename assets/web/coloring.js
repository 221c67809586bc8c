// ColorConcept Lab coloring canvas: the body of gr.HTML's js_on_load, called with
// (element, trigger, props, server, upload, watch, SETTINGS) by coloring_loader.js, the
// component's js_on_load (app/coloring_canvas.py), which fetches this file when a canvas first
// loads. SETTINGS: tolerance, swatches (preset colors a study may offer, "#rrggbb"; none by
// default) and color_names (evaluation.color.naming's lookup table and its names, null if it
// did not load), read once. They are not props: a canvas first shown by a handler's update
// (the Coloring tab's) gets that update's props only.
//
// Layers: the sketch (line art, never changed) and a color layer (RGBA, alpha 255 where
// painted, 0 elsewhere). The view shows them as annotation.coloring.composite does: a
// painted non-line pixel is its color times the sketch luminance, a line or unpainted
// pixel is the sketch. The bucket fill is annotation.coloring.fill_region step for
// step: a 4-connected flood on the luminance within the tolerance, stopped by line
// pixels (luminance < line_threshold), then edge_grow 4-connected steps into non-line
// pixels so the anti-aliased fringe along lines is colored (no white halo).
//
// props in: task_id, sketch_src (PNG data URL or URL), line_threshold, edge_grow,
// forget_task_id (a submitted task whose saved work is dropped). props.value out: JSON {task_id, color_layer (PNG data URL, "" if nothing is painted), elapsed_s},
// written COMMIT_DELAY_MS after the last edit; element.coloringCanvas.flush() writes it at
// once and returns it (events that send the value call it first). Work in progress is
// kept in localStorage per task id, and its undo and redo history in IndexedDB (typed
// arrays, too large for localStorage), so both survive a reload. A flush (a submit) marks the
// kept work as submitted until the next edit: a save moves the designer to the next sketch,
// so work restored with that mark was not saved (Gradio reloads the page when a lost
// connection comes back, and the submit pressed meanwhile was lost), and the status says so.
//
// The view fits the window: the drawing area takes the height left below its top, so the
// whole tool is on one screen, and the zoom label gives sketch pixels per screen pixel
// (the fit view of a large sketch shows less than 100%). A new task opens with the page
// scrolled to its top, where that height was measured, and with DEFAULT_TOOL: otherwise
// the scroll of the long instructions page, or the last sketch's brush, carried over.

const WIP_PREFIX = "colorconcept:wip:";
const RECENT_KEY = "colorconcept:recent-colors";
const MAX_WIP_ENTRIES = 30;
const MAX_RECENT = 12;
const MAX_UNDO_BYTES = 160e6;
const COMMIT_DELAY_MS = 250;
const MIN_ZOOM_OF_FIT = 0.5;
const MIN_VIEWPORT_PX = 320;
const BOTTOM_MARGIN_PX = 12;
const TAP_SLOP_PX = 10;  // how far (CSS px) a finger may travel and still tap
const HISTORY_DB = "colorconcept-canvas";
const HISTORY_STORE = "history";
const MAX_SAVED_UNDO_BYTES = 48e6;
const MAX_SCALE = 32;
const GRAY = [0.2125, 0.7154, 0.0721]; // skimage.color.rgb2gray
const DEFAULT_TOOL = "fill";
const KEPT_TOOLS = ["fill", "brush", "eraser"]; // what a reload gives back (`restoreWork`)
const NOT_SAVED =
  "Not saved: the Submit you pressed did not save this sketch (a save shows the next one; the " +
  "connection was lost, or the submit was refused). Your work is restored: press Submit again.";

const DRAWING_CHANGED =
  "This concept's drawing was changed since you last worked on it: your unsaved coloring of " +
  "the earlier drawing does not fit this one, so this drawing starts blank (that coloring stays in " +
  "this browser and comes back if the concept goes back to the earlier drawing).";

const root = element.querySelector(".cc-root");
const $ = (sel) => root.querySelector(sel);
const viewport = $(".cc-viewport");
const stage = $(".cc-stage");
const canvas = $(".cc-canvas");
const cursor = $(".cc-cursor");
const crosshair = $(".cc-kb");
const ctx = canvas.getContext("2d", { willReadFrequently: true });

const S = {
  W: 0, H: 0, lum: null, line: null, layer: null, display: null, region: null, queue: null,
  taskId: "", src: "", lastValue: props.value || "", ready: false,
  tool: DEFAULT_TOOL, color: "#d62828", hsv: [0, 0.81, 0.84], size: 24, tolerance: Number(SETTINGS.tolerance ?? 32),
  undo: [], redo: [], undoBytes: 0, edit: 0, historyEdit: -1,
  scale: 1, fit: 1, panX: 0, panY: 0,
  stroke: null, pan: null, pointer: null, spaceDown: false, kb: null,
  touches: new Map(), pinch: null, tap: null,
  elapsedBase: 0, openedAt: performance.now(), commitTimer: null,
};

// ---------- helpers ----------
const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));
const hexToRgb = (hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
const rgbToHex = (r, g, b) => "#" + [r, g, b].map((v) => v.toString(16).padStart(2, "0")).join("");
const normHex = (text) => {
  const m = /^#?([0-9a-f]{6}|[0-9a-f]{3})$/i.exec(String(text).trim());
  if (!m) return null;
  const h = m[1].length === 3 ? m[1].replace(/./g, "$&$&") : m[1];
  return "#" + h.toLowerCase();
};
function status(text, kind = "info") {
  const el = $(".cc-status");
  el.textContent = text;
  el.dataset.kind = kind;
}
function parseValue(text) {
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" ? v : null;
  } catch (e) {
    return null;
  }
}
function loadImage(src) {
  return new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => resolve(img);
    img.onerror = () => reject(new Error("could not load image"));
    img.src = src;
  });
}
function imageData(img, fillWhite) {
  const off = document.createElement("canvas");
  off.width = S.W;
  off.height = S.H;
  const c = off.getContext("2d", { willReadFrequently: true });
  if (fillWhite) {
    c.fillStyle = "#fff";
    c.fillRect(0, 0, S.W, S.H);
  }
  c.drawImage(img, 0, 0);
  return c.getImageData(0, 0, S.W, S.H).data;
}

// ---------- loading a task ----------
async function loadTask() {
  const taskId = String(props.task_id ?? "");
  const src = String(props.sketch_src ?? "");
  S.taskId = taskId;
  S.src = src;
  S.ready = false;
  root.dataset.ready = "false";
  root.classList.toggle("cc-no-sketch", !src);
  if (!src) {
    status("No sketch loaded.");
    return;
  }
  let img;
  try {
    img = await loadImage(src);
  } catch (e) {
    status("The sketch could not be loaded.", "error");
    return;
  }
  if (S.taskId !== taskId || S.src !== src) return; // a newer task arrived meanwhile
  S.W = img.naturalWidth;
  S.H = img.naturalHeight;
  canvas.width = S.W;
  canvas.height = S.H;
  const d = imageData(img, true);
  const n = S.W * S.H;
  const threshold = Number(props.line_threshold ?? 128);
  S.lum = new Uint8Array(n);
  S.line = new Uint8Array(n);
  for (let i = 0, j = 0; i < n; i++, j += 4) {
    const L = Math.round(GRAY[0] * d[j] + GRAY[1] * d[j + 1] + GRAY[2] * d[j + 2]);
    S.lum[i] = L;
    S.line[i] = L < threshold ? 1 : 0;
  }
  S.layer = new Uint8ClampedArray(n * 4);
  S.display = ctx.createImageData(S.W, S.H);
  S.region = new Uint8Array(n);
  S.queue = new Int32Array(n);
  S.undo = [];
  S.redo = [];
  S.undoBytes = 0;
  S.edit = 0;
  S.submittedEdit = null;
  S.historyEdit = -1;
  S.elapsedBase = 0;
  S.openedAt = performance.now();
  await restoreWork(taskId);
  if (S.taskId !== taskId) return;
  if (window.scrollY) window.scrollTo(0, 0);
  render(0, 0, S.W, S.H);
  sizeViewport();
  fitView();
  S.ready = true;
  S.kb = { x: S.W / 2, y: S.H / 2 };
  root.dataset.ready = "true";
  updateButtons();
  showCrosshair();
}

async function restoreWork(taskId) {
  const fromServer = parseValue(props.value);
  let saved = null;
  try {
    saved = JSON.parse(localStorage.getItem(WIP_PREFIX + taskId) || "null");
  } catch (e) {
    saved = null;
  }
  const serverLayer = fromServer && String(fromServer.task_id) === taskId ? fromServer : null;
  const source = serverLayer && serverLayer.color_layer ? serverLayer : saved;
  S.elapsedBase = Math.max(Number(saved?.elapsed_s) || 0, Number(serverLayer?.elapsed_s) || 0);
  if (!source || !source.color_layer) {
    commitNow();
    if (workOnAnotherDrawing(taskId)) status(DRAWING_CHANGED, "warn");
    else status("Pick a color, then click inside a region to fill it.");
    return;
  }
  try {
    const img = await loadImage(source.color_layer);
    if (img.naturalWidth !== S.W || img.naturalHeight !== S.H) throw new Error("size");
    S.layer.set(imageData(img, false));
    let history = true;
    if (source === saved) {
      S.edit = Number(saved.edit) || 0;
      history = await restoreHistory(taskId, S.edit);
      // The tool in hand when the work was last saved comes back: an eraser came back as the fill, and the
      // next click filled (outside probe 227).
      if (KEPT_TOOLS.includes(saved.tool)) setTool(saved.tool);
    }
    const unsent = source === saved && saved.submitted_edit === saved.edit;
    if (unsent) S.submittedEdit = S.edit;
    if (unsent) status(NOT_SAVED, "error");
    else if (source !== saved) status("Loaded the saved coloring.");
    else if (history) status("Restored your unsaved work for this sketch.");
    else status("Restored your unsaved work for this sketch; its undo history was not kept (the page " +
      "was left while it was being saved), so Undo starts from here.", "warn");
  } catch (e) {
    status("Saved work for this sketch could not be restored.", "error");
  }
  commitNow();
}

// Work kept for this task on another sketch (a key is "<instance>:<task>:<sketch>"): the
// admin chose another drawing for the concept while the task was held (outside probe 217).
function workOnAnotherDrawing(taskId) {
  if (taskId.lastIndexOf(":") < 0) return false;
  const task = WIP_PREFIX + taskId.slice(0, taskId.lastIndexOf(":") + 1);
  for (let i = 0; i < localStorage.length; i++) {
    const k = localStorage.key(i);
    if (!k || !k.startsWith(task) || k === WIP_PREFIX + taskId) continue;
    try {
      if (JSON.parse(localStorage.getItem(k)).color_layer) return true;
    } catch (e) { /* not ours to read */ }
  }
  return false;
}

// ---------- undo history kept over a reload (IndexedDB) ----------
let historyDb = null;
function openHistory() {
  historyDb ??= new Promise((resolve, reject) => {
    const request = indexedDB.open(HISTORY_DB, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(HISTORY_STORE);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
  return historyDb;
}
async function historyRequest(mode, act) {
  const db = await openHistory();
  return new Promise((resolve, reject) => {
    const request = act(db.transaction(HISTORY_STORE, mode).objectStore(HISTORY_STORE));
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}
// The newest undo steps up to MAX_SAVED_UNDO_BYTES and the redo steps, stamped with the
// edit they end at (`S.edit`, also in the saved work): a reload restores them only beside
// that very work. Saved when an edit was made since, not on every commit.
function saveHistory(taskId, stamp) {
  let bytes = 0, first = S.undo.length;
  while (first > 0 && bytes + S.undo[first - 1].before.length * 2 <= MAX_SAVED_UNDO_BYTES) {
    first -= 1;
    bytes += S.undo[first].before.length * 2;
  }
  const record = { stamp, undo: S.undo.slice(first), redo: S.redo.slice() };
  return historyRequest("readwrite", (store) => store.put(record, taskId)).then(
    () => true,
    () => false /* the history is a convenience: the work itself is in localStorage */
  );
}
// False when the history kept is not that of the work restored (or none is kept).
async function restoreHistory(taskId, stamp) {
  let record = null;
  try {
    record = await historyRequest("readonly", (store) => store.get(taskId));
  } catch (e) {
    return false;
  }
  if (S.taskId !== taskId) return true;
  if (!record || record.stamp !== stamp) return false;
  S.historyEdit = stamp;
  S.undo = record.undo;
  S.redo = record.redo;
  S.undoBytes = S.undo.reduce((sum, e) => sum + e.before.length * 2, 0);
  return true;
}
function forgetHistory(taskId) {
  historyRequest("readwrite", (store) => store.delete(taskId)).catch(() => {});
}

// ---------- rendering and view ----------
function render(x0, y0, x1, y1) {
  x0 = clamp(Math.floor(x0), 0, S.W);
  y0 = clamp(Math.floor(y0), 0, S.H);
  x1 = clamp(Math.ceil(x1), 0, S.W);
  y1 = clamp(Math.ceil(y1), 0, S.H);
  if (x1 <= x0 || y1 <= y0) return;
  const out = S.display.data, lay = S.layer, lum = S.lum, line = S.line;
  for (let y = y0; y < y1; y++) {
    for (let i = y * S.W + x0, end = y * S.W + x1; i < end; i++) {
      const j = i * 4, L = lum[i];
      if (line[i] || lay[j + 3] === 0) {
        out[j] = out[j + 1] = out[j + 2] = L;
      } else {
        out[j] = Math.floor((lay[j] * L + 127) / 255);
        out[j + 1] = Math.floor((lay[j + 1] * L + 127) / 255);
        out[j + 2] = Math.floor((lay[j + 2] * L + 127) / 255);
      }
      out[j + 3] = 255;
    }
  }
  ctx.putImageData(S.display, 0, 0, x0, y0, x1 - x0, y1 - y0);
}

// The drawing area's height: what the window has left below the area's top (the page
// scrolled to its top) after the lines under it, never taller than the sketch needs at
// this width, never below MIN_VIEWPORT_PX.
function sizeViewport() {
  if (!S.W || !viewport.clientWidth) return;
  const box = viewport.getBoundingClientRect();
  const below = root.getBoundingClientRect().bottom - box.bottom;
  const room = window.innerHeight - (box.top + window.scrollY) - below - BOTTOM_MARGIN_PX;
  const needed = (viewport.clientWidth * S.H) / S.W;
  viewport.style.height = Math.round(Math.max(MIN_VIEWPORT_PX, Math.min(room, needed))) + "px";
}
// Fit again after the window or the area changed size, keeping the zoom relative to the fit.
function relayout() {
  const keep = S.scale / (S.fit || 1);
  sizeViewport();
  fitView();
  if (keep !== 1) zoomAt(keep, viewport.clientWidth / 2, viewport.clientHeight / 2);
}
function applyView() {
  stage.style.transform = `translate(${S.panX}px, ${S.panY}px) scale(${S.scale})`;
  canvas.classList.toggle("cc-pixelated", S.scale >= 2);
  $(".cc-zoom-level").textContent = Math.round(S.scale * 100) + "%";
  $(".cc-zoom-level").title = "Screen pixels per sketch pixel" + (Math.abs(S.scale - S.fit) < 1e-9 ? " (fit)" : "");
  updateCursor();
  showCrosshair();
}
function fitView() {
  const vw = viewport.clientWidth, vh = viewport.clientHeight;
  if (!S.W || !vw || !vh) return;
  S.fit = Math.min(vw / S.W, vh / S.H);
  S.scale = S.fit;
  S.panX = (vw - S.W * S.scale) / 2;
  S.panY = (vh - S.H * S.scale) / 2;
  applyView();
}
function zoomAt(factor, cx, cy) {
  const next = clamp(S.scale * factor, S.fit * MIN_ZOOM_OF_FIT, MAX_SCALE);
  S.panX = cx - ((cx - S.panX) * next) / S.scale;
  S.panY = cy - ((cy - S.panY) * next) / S.scale;
  S.scale = next;
  applyView();
}
function toImage(ev) {
  const r = viewport.getBoundingClientRect();
  return { x: (ev.clientX - r.left - S.panX) / S.scale, y: (ev.clientY - r.top - S.panY) / S.scale };
}
function imageToClient(x, y) {
  const r = viewport.getBoundingClientRect();
  return { x: r.left + S.panX + x * S.scale, y: r.top + S.panY + y * S.scale };
}

// ---------- undo ----------
function beginOp() {
  return S.layer.slice();
}
function endOp(before, box, label) {
  if (!box) return false;
  const { x0, y0, x1, y1 } = box;
  const w = x1 - x0, h = y1 - y0;
  const rect = (src) => {
    const out = new Uint8ClampedArray(w * h * 4);
    for (let y = 0; y < h; y++) {
      const start = ((y0 + y) * S.W + x0) * 4;
      out.set(src.subarray(start, start + w * 4), y * w * 4);
    }
    return out;
  };
  const entry = { x0, y0, w, h, before: rect(before), after: rect(S.layer), label };
  S.undo.push(entry);
  S.undoBytes += entry.before.length * 2;
  while (S.undoBytes > MAX_UNDO_BYTES && S.undo.length > 1) {
    const old = S.undo.shift();
    S.undoBytes -= old.before.length * 2;
  }
  S.redo = [];
  edited();
  return true;
}
// Every change of the layer or of its history: a new edit stamp, buttons, a commit soon.
function edited() {
  S.edit = Date.now() + Math.random();
  updateButtons();
  keepHistory(); // now: a reload before the commit keeps it (an IndexedDB write takes a moment)
  scheduleCommit();
}
function putRect(entry, data) {
  for (let y = 0; y < entry.h; y++) {
    const start = ((entry.y0 + y) * S.W + entry.x0) * 4;
    S.layer.set(data.subarray(y * entry.w * 4, (y + 1) * entry.w * 4), start);
  }
  render(entry.x0, entry.y0, entry.x0 + entry.w, entry.y0 + entry.h);
}
function undo() {
  const e = S.undo.pop();
  if (!e) return;
  S.undoBytes -= e.before.length * 2;
  putRect(e, e.before);
  S.redo.push(e);
  status("Undid " + e.label + ".");
  edited();
}
function redo() {
  const e = S.redo.pop();
  if (!e) return;
  putRect(e, e.after);
  S.undo.push(e);
  S.undoBytes += e.before.length * 2;
  status("Redid " + e.label + ".");
  edited();
}
function resetAll() {
  if (!S.ready) return;
  const before = beginOp();
  S.layer.fill(0);
  render(0, 0, S.W, S.H);
  endOp(before, { x0: 0, y0: 0, x1: S.W, y1: S.H }, "reset");
  status("Cleared all color (Undo brings it back).");
}

// ---------- tools ----------
function fillAt(px, py) {
  const x = Math.floor(px), y = Math.floor(py);
  if (x < 0 || y < 0 || x >= S.W || y >= S.H) return;
  const W = S.W, H = S.H, lum = S.lum, line = S.line, region = S.region, queue = S.queue;
  const start = y * W + x;
  if (line[start]) {
    status("That point is on a line: click inside a region to fill it.", "warn");
    return;
  }
  region.fill(0);
  const seed = lum[start], tol = S.tolerance;
  let head = 0, tail = 0, minX = x, maxX = x, minY = y, maxY = y;
  region[start] = 1;
  queue[tail++] = start;
  const visit = (j) => {
    if (!region[j] && !line[j] && Math.abs(lum[j] - seed) <= tol) {
      region[j] = 1;
      queue[tail++] = j;
    }
  };
  while (head < tail) {
    const i = queue[head++], cx = i % W, cy = (i - cx) / W;
    if (cx < minX) minX = cx; else if (cx > maxX) maxX = cx;
    if (cy < minY) minY = cy; else if (cy > maxY) maxY = cy;
    if (cx > 0) visit(i - 1);
    if (cx < W - 1) visit(i + 1);
    if (cy > 0) visit(i - W);
    if (cy < H - 1) visit(i + W);
  }
  const grow = Number(props.edge_grow ?? 2);
  for (let k = 0; k < grow; k++) {
    minX = Math.max(0, minX - 1); maxX = Math.min(W - 1, maxX + 1);
    minY = Math.max(0, minY - 1); maxY = Math.min(H - 1, maxY + 1);
    const added = [];
    for (let yy = minY; yy <= maxY; yy++) {
      for (let xx = minX, i = yy * W + minX; xx <= maxX; xx++, i++) {
        if (region[i] || line[i]) continue;
        if ((xx > 0 && region[i - 1]) || (xx < W - 1 && region[i + 1]) ||
            (yy > 0 && region[i - W]) || (yy < H - 1 && region[i + W])) added.push(i);
      }
    }
    for (const i of added) region[i] = 1;
  }
  const before = beginOp();
  const [r, g, b] = hexToRgb(S.color);
  const lay = S.layer;
  let count = 0;
  for (let yy = minY; yy <= maxY; yy++) {
    for (let i = yy * W + minX, end = yy * W + maxX; i <= end; i++) {
      if (!region[i]) continue;
      const j = i * 4;
      lay[j] = r; lay[j + 1] = g; lay[j + 2] = b; lay[j + 3] = 255;
      count++;
    }
  }
  render(minX, minY, maxX + 1, maxY + 1);
  endOp(before, { x0: minX, y0: minY, x1: maxX + 1, y1: maxY + 1 }, "fill");
  rememberColor(S.color);
  status(`Filled ${count.toLocaleString()} px with ${said(S.color)}.`);
}

function stamp(cx, cy, erase, box) {
  const r = S.size / 2, [cr, cg, cb] = hexToRgb(S.color), lay = S.layer;
  const x0 = Math.max(0, Math.floor(cx - r)), x1 = Math.min(S.W - 1, Math.ceil(cx + r));
  const y0 = Math.max(0, Math.floor(cy - r)), y1 = Math.min(S.H - 1, Math.ceil(cy + r));
  for (let y = y0; y <= y1; y++) {
    const dy = y + 0.5 - cy;
    for (let x = x0; x <= x1; x++) {
      const dx = x + 0.5 - cx;
      if (dx * dx + dy * dy > r * r) continue;
      const j = (y * S.W + x) * 4;
      if (erase) { lay[j] = lay[j + 1] = lay[j + 2] = lay[j + 3] = 0; }
      else { lay[j] = cr; lay[j + 1] = cg; lay[j + 2] = cb; lay[j + 3] = 255; }
    }
  }
  if (x1 >= x0 && y1 >= y0) {
    box.x0 = Math.min(box.x0, x0); box.y0 = Math.min(box.y0, y0);
    box.x1 = Math.max(box.x1, x1 + 1); box.y1 = Math.max(box.y1, y1 + 1);
    render(x0, y0, x1 + 1, y1 + 1);
  }
}
function strokeTo(p) {
  const s = S.stroke, erase = s.erase;
  const dx = p.x - s.last.x, dy = p.y - s.last.y, dist = Math.hypot(dx, dy);
  const step = Math.max(1, S.size / 4), n = Math.max(1, Math.ceil(dist / step));
  for (let k = 1; k <= n; k++) stamp(s.last.x + (dx * k) / n, s.last.y + (dy * k) / n, erase, s.box);
  s.last = p;
}
function pickAt(p) {
  const x = Math.floor(p.x), y = Math.floor(p.y);
  if (x < 0 || y < 0 || x >= S.W || y >= S.H) return;
  const j = (y * S.W + x) * 4;
  if (S.layer[j + 3] === 0 || S.line[y * S.W + x]) {
    status("Nothing painted there to pick.", "warn");
    return;
  }
  setColor(rgbToHex(S.layer[j], S.layer[j + 1], S.layer[j + 2]));
  status("Picked " + said(S.color) + ".");
}

// ---------- colors: hue bar, saturation/value square, hex and RGB fields ----------
function hsvToRgb(h, s, v) {
  const f = (n) => {
    const k = (n + h / 60) % 6;
    return Math.round(255 * (v - v * s * Math.max(0, Math.min(k, 4 - k, 1))));
  };
  return [f(5), f(3), f(1)];
}
function rgbToHsv(r, g, b) {
  [r, g, b] = [r / 255, g / 255, b / 255];
  const max = Math.max(r, g, b), d = max - Math.min(r, g, b);
  let h = 0;
  if (d) h = max === r ? ((g - b) / d) % 6 : max === g ? (b - r) / d + 2 : (r - g) / d + 4;
  return [(h * 60 + 360) % 360, max ? d / max : 0, max];
}
// `hsv` is given when the color comes from the square or the bar, so that the hue of a
// grey or of black (which has none) stays where the person left it.
function setColor(hex, hsv = null) {
  S.color = hex;
  const rgb = hexToRgb(hex);
  if (hsv) S.hsv = hsv;
  else {
    const next = rgbToHsv(...rgb);
    if (!next[1] || !next[2]) next[0] = S.hsv[0];
    S.hsv = next;
  }
  const [h, sat, v] = S.hsv;
  $(".cc-hex").value = hex;
  $(".cc-hex").classList.remove("cc-invalid");
  ["r", "g", "b"].forEach((c, i) => { $(".cc-" + c).value = rgb[i]; });
  $(".cc-current-swatch").style.background = hex;
  $(".cc-current-swatch").title = colorName(hex) || hex;
  $(".cc-current-name").textContent = colorName(hex);
  $(".cc-sv").style.backgroundColor = `hsl(${h} 100% 50%)`;
  $(".cc-sv-knob").style.left = sat * 100 + "%";
  $(".cc-sv-knob").style.top = (1 - v) * 100 + "%";
  // Read out with the color's name: a number alone ("Hue 40") named no color (outsider 95).
  const named = colorName(hex) || hex;
  $(".cc-sv").setAttribute("aria-valuetext", `saturation ${Math.round(sat * 100)}%, brightness ${Math.round(v * 100)}%: ${named}`);
  $(".cc-hue-knob").style.left = (h / 360) * 100 + "%";
  $(".cc-hue").setAttribute("aria-valuenow", String(Math.round(h)));
  $(".cc-hue").setAttribute("aria-valuetext", `hue ${Math.round(h)}°: ${named}`);
}
function setHsv(h, s, v) {
  const hsv = [clamp(h, 0, 359.999), clamp(s, 0, 1), clamp(v, 0, 1)];
  setColor(rgbToHex(...hsvToRgb(...hsv)), hsv);
}
// Drag on the square or the bar: `pick(fx, fy)` gets the pointer's place as fractions.
function dragArea(area, pick) {
  const at = (ev) => {
    const r = area.getBoundingClientRect();
    pick(clamp((ev.clientX - r.left) / r.width, 0, 1), clamp((ev.clientY - r.top) / r.height, 0, 1));
  };
  area.addEventListener("pointerdown", (ev) => {
    area.setPointerCapture(ev.pointerId);
    area.focus({ preventScroll: true });
    at(ev);
  });
  area.addEventListener("pointermove", (ev) => { if (area.hasPointerCapture(ev.pointerId)) at(ev); });
}
function arrowKeys(area, move) {
  area.addEventListener("keydown", (ev) => {
    const step = ev.shiftKey ? 10 : 1;
    // PageUp/PageDown: 30 steps along the bar (a slider's large step), as ten Shift+arrows took.
    const d = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, step], ArrowDown: [0, -step],
                PageUp: [30, 0], PageDown: [-30, 0] }[ev.key];
    if (!d) return;
    ev.preventDefault();
    ev.stopPropagation();
    move(...d);
  });
}
function rgbEntered() {
  const rgb = ["r", "g", "b"].map((c) => Number($(".cc-" + c).value));
  if (rgb.some((v) => !Number.isInteger(v) || v < 0 || v > 255)) {
    status("Red, green and blue are whole numbers from 0 to 255.", "warn");
    setColor(S.color);
    return;
  }
  setColor(rgbToHex(...rgb));
}
function drawPresets() {
  const list = (Array.isArray(SETTINGS.swatches) ? SETTINGS.swatches : []).map(normHex).filter(Boolean);
  $(".cc-presets-box").hidden = !list.length;
  $(".cc-presets").replaceChildren(...list.map(swatchButton));
}
function recentColors() {
  try {
    const list = JSON.parse(localStorage.getItem(RECENT_KEY) || "[]");
    return Array.isArray(list) ? list.map(normHex).filter(Boolean) : [];
  } catch (e) {
    return [];
  }
}
function rememberColor(hex) {
  const list = [hex, ...recentColors().filter((c) => c !== hex)].slice(0, MAX_RECENT);
  try {
    localStorage.setItem(RECENT_KEY, JSON.stringify(list));
  } catch (e) { /* the list is a convenience */ }
  drawRecent(list);
}
function swatchButton(hex) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "cc-swatch";
  const name = colorName(hex);
  b.style.background = hex;
  b.title = name ? `${name} (${hex})` : hex;
  b.dataset.color = hex;
  b.setAttribute("aria-label", "Use " + (name ? `${name}, ${hex}` : hex));
  return b;
}
function drawRecent(list = recentColors()) {
  $(".cc-recent").replaceChildren(...list.map(swatchButton));
}

// ---------- color names: evaluation.color.naming's table, looked up, never recomputed ----------
// SETTINGS.color_names: {bits, table (base64 of zlib-compressed little-endian uint16, the level 3
// row of each cell of sRGB cut to `bits` bits per channel), l3, basic (lists by row)}.
const NAMES = { spec: null, rows: null };
async function loadNames() {
  const spec = SETTINGS.color_names;
  if (!spec || !spec.table || typeof DecompressionStream === "undefined") return;
  try {
    const packed = Uint8Array.from(atob(spec.table), (c) => c.charCodeAt(0));
    const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("deflate"));
    const view = new DataView(await new Response(stream).arrayBuffer());
    const rows = new Uint16Array(view.byteLength / 2);
    for (let i = 0; i < rows.length; i++) rows[i] = view.getUint16(2 * i, true);
    NAMES.spec = spec;
    NAMES.rows = rows;
  } catch (e) {
    return; // colors stay unnamed: the names are a help, not part of the task
  }
  setColor(S.color, S.hsv);
  drawPresets();
  drawRecent();
}
// A color as the status line says it to a screen reader: its name and code when the names
// are loaded ("vivid yellow · yellow (#f3c300)"), else its code.
function said(hex) {
  const name = colorName(hex);
  return name ? `${name} (${hex})` : hex;
}
// "moderate olive brown · brown" ("white" when both are one word), or "" until the table
// is loaded.
function colorName(hex) {
  if (!NAMES.rows) return "";
  const bits = NAMES.spec.bits, s = 8 - bits, [r, g, b] = hexToRgb(hex);
  const row = r === g && g === b
    ? NAMES.spec.grey[r]  // exact: a grey cell holds four greys, and a border may cross it
    : NAMES.rows[((r >> s) << (2 * bits)) | ((g >> s) << bits) | (b >> s)];
  const l3 = NAMES.spec.l3[row], basic = NAMES.spec.basic[row];
  return l3 === basic ? l3 : l3 + " · " + basic;
}

// ---------- value and work in progress ----------
function elapsed() {
  return Math.round((S.elapsedBase + (performance.now() - S.openedAt) / 1000) * 10) / 10;
}
function layerUrl() {
  let painted = false;
  for (let j = 3; j < S.layer.length; j += 4) if (S.layer[j]) { painted = true; break; }
  if (!painted) return "";
  const off = document.createElement("canvas");
  off.width = S.W;
  off.height = S.H;
  off.getContext("2d").putImageData(new ImageData(S.layer, S.W, S.H), 0, 0);
  return off.toDataURL("image/png");
}
function scheduleCommit() {
  clearTimeout(S.commitTimer);
  S.commitTimer = setTimeout(commitNow, COMMIT_DELAY_MS);
}
function commitNow() {
  clearTimeout(S.commitTimer);
  if (!S.layer) return;
  const url = layerUrl();
  const value = JSON.stringify({ task_id: S.taskId, color_layer: url, elapsed_s: elapsed() });
  S.lastValue = value;
  props.value = value;
  saveWork(url);
  keepHistory();
  root.dataset.committed = String(Date.now());
}
function keepHistory() {
  if (S.edit === S.historyEdit) return;
  const edit = S.edit;
  // Written a moment later (IndexedDB): a reload before then keeps the work, not its history.
  saveHistory(S.taskId, edit).then((saved) => {
    if (saved) root.dataset.historySaved = String(edit);
  });
  S.historyEdit = S.edit;
}
// The value with every edit in it, written now: what a submit must send (see
// app.coloring_canvas.flush_js), not the value of up to COMMIT_DELAY_MS ago.
function flush() {
  if (!S.ready) return String(props.value ?? "");
  S.submittedEdit = S.edit;
  commitNow();
  return S.lastValue;
}
function saveWork(url) {
  const key = WIP_PREFIX + S.taskId;
  const entry = JSON.stringify({
    color_layer: url, elapsed_s: elapsed(), saved_at: Date.now(), edit: S.edit,
    submitted_edit: S.submittedEdit === S.edit ? S.edit : null, tool: S.tool,
  });
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      localStorage.setItem(key, entry);
      return;
    } catch (e) {
      pruneWork(attempt === 0 ? MAX_WIP_ENTRIES : 5 - attempt * 2, key);
    }
  }
  status("This browser's storage is full: your work is not saved locally until you submit.", "error");
}
function pruneWork(keep, current) {
  const entries = [];
  for (let i = 0; i < localStorage.length; i++) {
    const k = localStorage.key(i);
    if (k && k.startsWith(WIP_PREFIX) && k !== current) {
      let at = 0;
      try { at = JSON.parse(localStorage.getItem(k)).saved_at || 0; } catch (e) { at = 0; }
      entries.push([at, k]);
    }
  }
  entries.sort((a, b) => b[0] - a[0]);
  for (const [, k] of entries.slice(Math.max(0, keep - 1))) {
    localStorage.removeItem(k);
    forgetHistory(k.slice(WIP_PREFIX.length));
  }
}

// ---------- UI wiring ----------
function setTool(tool) {
  S.tool = tool;
  root.querySelectorAll("[data-tool]").forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.tool === tool)));
  root.dataset.tool = tool;
  updateCursor();
}
function setSize(size) {
  S.size = clamp(Math.round(size), 1, 128);
  $(".cc-size").value = S.size;
  $(".cc-size-out").textContent = S.size + " px";
  updateCursor();
}
function setTolerance(t) {
  S.tolerance = clamp(Math.round(t), 0, 127);
  $(".cc-tol").value = S.tolerance;
  $(".cc-tol-out").textContent = String(S.tolerance);
}
function updateButtons() {
  const undo = $('[data-action="undo"]'), redo = $('[data-action="redo"]');
  const held = document.activeElement;
  undo.disabled = !S.undo.length;
  redo.disabled = !S.redo.length;
  // A button that disables itself under the keyboard's focus dropped it to the page's top
  // (outsider 95): it goes to the other one, or to the drawing.
  if (held === undo && undo.disabled) (redo.disabled ? viewport : redo).focus();
  else if (held === redo && redo.disabled) (undo.disabled ? viewport : undo).focus();
}
function updateCursor(ev) {
  if (ev) {
    const r = viewport.getBoundingClientRect();
    S.pointer = { x: ev.clientX - r.left, y: ev.clientY - r.top };
  }
  const show = S.pointer && (S.tool === "brush" || S.tool === "eraser") && !S.spaceDown;
  cursor.style.display = show ? "block" : "none";
  if (!show) return;
  const d = Math.max(4, S.size * S.scale);
  cursor.style.width = cursor.style.height = d + "px";
  cursor.style.transform = `translate(${S.pointer.x - d / 2}px, ${S.pointer.y - d / 2}px)`;
}

// Touch: one finger uses the tool; two fingers pinch to zoom and drag to pan, whatever the tool.
// The first finger's brush stroke is taken back when the second lands, and a fill or a pick
// waits for the finger to lift, so that a pinch leaves the drawing as it was (it painted).
function onPointerDown(ev) {
  if (!S.ready) return;
  root.focus({ preventScroll: true });
  viewport.setPointerCapture(ev.pointerId);
  if (ev.pointerType === "touch") {
    S.touches.set(ev.pointerId, { x: ev.clientX, y: ev.clientY });
    if (S.touches.size === 2) startPinch();
    if (S.touches.size > 1) return;
  }
  if (ev.button === 1 || S.tool === "hand" || S.spaceDown) {
    S.pan = { x: ev.clientX - S.panX, y: ev.clientY - S.panY };
    root.classList.add("cc-panning");
    return;
  }
  if (ev.button !== 0) return;
  const p = toImage(ev);
  if (ev.pointerType === "touch" && (S.tool === "fill" || S.tool === "picker")) S.tap = { p, x: ev.clientX, y: ev.clientY };
  else if (S.tool === "fill") fillAt(p.x, p.y);
  else if (S.tool === "picker") pickAt(p);
  else {
    const erase = S.tool === "eraser";
    S.stroke = { erase, last: p, before: beginOp(), box: { x0: S.W, y0: S.H, x1: 0, y1: 0 } };
    stamp(p.x, p.y, erase, S.stroke.box);
  }
}

// ---------- keyboard: a crosshair the arrow keys move; Enter applies the tool there ----------
// For people who color without a pointer. The crosshair starts at the sketch's centre,
// moves 4 screen pixels a press (40 with Shift) and shows while the drawing has the focus.
function showCrosshair() {
  const show = S.ready && S.kb && document.activeElement === viewport;
  crosshair.style.display = show ? "block" : "none";
  if (!show) return;
  crosshair.style.transform = `translate(${S.panX + S.kb.x * S.scale}px, ${S.panY + S.kb.y * S.scale}px)`;
  viewport.dataset.crosshair = `${Math.floor(S.kb.x)} ${Math.floor(S.kb.y)}`;
}
function keepCrosshairInView() {
  const x = S.panX + S.kb.x * S.scale, y = S.panY + S.kb.y * S.scale, margin = 24;
  const vw = viewport.clientWidth, vh = viewport.clientHeight;
  if (x < margin || x > vw - margin) S.panX += x < margin ? margin - x : vw - margin - x;
  if (y < margin || y > vh - margin) S.panY += y < margin ? margin - y : vh - margin - y;
  applyView();
}
function applyAtCrosshair() {
  const { x, y } = S.kb;
  if (S.tool === "fill") fillAt(x, y);
  else if (S.tool === "picker") pickAt({ x, y });
  else if (S.tool === "brush" || S.tool === "eraser") {
    const erase = S.tool === "eraser", before = beginOp(), box = { x0: S.W, y0: S.H, x1: 0, y1: 0 };
    stamp(x, y, erase, box);
    if (box.x1 > box.x0) {
      endOp(before, box, erase ? "eraser stroke" : "brush stroke");
      if (!erase) rememberColor(S.color);
      status(erase ? "Erased." : `Painted with ${said(S.color)}.`);
    }
  } else status("Pan moves the view: choose Fill, Brush or Eraser to color with Enter.", "warn");
}
function onViewportKey(ev) {
  if (!S.ready || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const moves = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
  if (moves[ev.key]) {
    const [dx, dy] = moves[ev.key], step = (ev.shiftKey ? 40 : 4) / S.scale;
    S.kb = { x: clamp(S.kb.x + dx * step, 0, S.W - 0.5), y: clamp(S.kb.y + dy * step, 0, S.H - 0.5) };
    keepCrosshairInView();
  } else if (ev.key === "Enter") applyAtCrosshair();
  else return;
  ev.preventDefault();
  ev.stopPropagation();
}
function startPinch() {
  if (S.stroke) {
    S.layer.set(S.stroke.before);
    render(0, 0, S.W, S.H);
    S.stroke = null;
  }
  S.tap = null;
  S.pan = null;
  root.classList.remove("cc-panning");
  const [a, b] = [...S.touches.values()];
  S.pinch = { dist: Math.hypot(a.x - b.x, a.y - b.y) || 1, mid: midpoint(a, b), scale: S.scale, panX: S.panX, panY: S.panY };
}
function midpoint(a, b) {
  return { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 };
}
// The sketch point under the fingers' first midpoint stays under their midpoint now.
function pinchTo() {
  const [a, b] = [...S.touches.values()], P = S.pinch, r = viewport.getBoundingClientRect();
  const mid = midpoint(a, b);
  const next = clamp((P.scale * Math.hypot(a.x - b.x, a.y - b.y)) / P.dist, S.fit * MIN_ZOOM_OF_FIT, MAX_SCALE);
  const ix = (P.mid.x - r.left - P.panX) / P.scale, iy = (P.mid.y - r.top - P.panY) / P.scale;
  S.scale = next;
  S.panX = mid.x - r.left - ix * next;
  S.panY = mid.y - r.top - iy * next;
  applyView();
}
function onPointerMove(ev) {
  if (S.touches.has(ev.pointerId)) S.touches.set(ev.pointerId, { x: ev.clientX, y: ev.clientY });
  // A finger that travels is a swipe, not a tap: it filled where it started (outside probe 117).
  if (S.tap && Math.hypot(ev.clientX - S.tap.x, ev.clientY - S.tap.y) > TAP_SLOP_PX) S.tap = null;
  if (S.pinch) {
    if (S.touches.size >= 2) pinchTo();
    return;
  }
  updateCursor(ev);
  if (S.pan) {
    S.panX = ev.clientX - S.pan.x;
    S.panY = ev.clientY - S.pan.y;
    applyView();
  } else if (S.stroke) {
    const events = ev.getCoalescedEvents ? ev.getCoalescedEvents() : [ev];
    for (const e of events.length ? events : [ev]) strokeTo(toImage(e));
  }
}
function onPointerUp(ev) {
  S.touches.delete(ev.pointerId);
  if (S.pinch) {  // until every finger has lifted: the one left does not paint
    if (!S.touches.size) S.pinch = null;
    return;
  }
  if (S.tap) {
    const { p } = S.tap;
    S.tap = null;
    if (ev.type === "pointerup") S.tool === "fill" ? fillAt(p.x, p.y) : pickAt(p);
  }
  if (S.pan) {
    S.pan = null;
    root.classList.remove("cc-panning");
  }
  if (S.stroke) {
    const s = S.stroke;
    S.stroke = null;
    const box = s.box.x1 > s.box.x0 ? s.box : null;
    endOp(s.before, box, s.erase ? "eraser stroke" : "brush stroke");
    if (box && !s.erase) rememberColor(S.color);
    if (box) status(s.erase ? "Erased." : `Painted with ${said(S.color)}.`);
  }
}
function onKey(ev) {
  if (ev.target.closest("input")) return;
  const k = ev.key.toLowerCase(), mod = ev.ctrlKey || ev.metaKey;
  const tools = { f: "fill", g: "fill", b: "brush", e: "eraser", i: "picker", h: "hand" };
  if (mod && k === "z") { ev.shiftKey ? redo() : undo(); }
  else if (mod && k === "y") redo();
  else if (mod) return;
  else if (tools[k]) setTool(tools[k]);
  else if (k === "[") setSize(S.size / 1.25);
  else if (k === "]") setSize(S.size * 1.25 + 1);
  else if (k === "+" || k === "=") zoomAt(1.25, viewport.clientWidth / 2, viewport.clientHeight / 2);
  else if (k === "-") zoomAt(0.8, viewport.clientWidth / 2, viewport.clientHeight / 2);
  else if (k === "0") fitView();
  else if (k === " ") { S.spaceDown = true; root.classList.add("cc-space"); updateCursor(); }
  else return;
  ev.preventDefault();
}

root.querySelectorAll("[data-tool]").forEach((b) => b.addEventListener("click", () => setTool(b.dataset.tool)));
root.addEventListener("click", (ev) => {
  const action = ev.target.closest("[data-action]")?.dataset.action;
  const swatch = ev.target.closest(".cc-swatch");
  if (swatch) setColor(swatch.dataset.color);
  const mid = [viewport.clientWidth / 2, viewport.clientHeight / 2];
  if (action === "undo") undo();
  else if (action === "redo") redo();
  else if (action === "reset") resetAll();
  else if (action === "zoom-in") zoomAt(1.25, ...mid);
  else if (action === "zoom-out") zoomAt(0.8, ...mid);
  else if (action === "fit") fitView();
});
dragArea($(".cc-sv"), (fx, fy) => setHsv(S.hsv[0], fx, 1 - fy));
dragArea($(".cc-hue"), (fx) => setHsv(fx * 360, S.hsv[1], S.hsv[2]));
arrowKeys($(".cc-sv"), (dx, dy) => setHsv(S.hsv[0], S.hsv[1] + dx / 100, S.hsv[2] + dy / 100));
arrowKeys($(".cc-hue"), (dx) => setHsv((S.hsv[0] + dx + 360) % 360, S.hsv[1], S.hsv[2]));
root.querySelectorAll(".cc-rgb input").forEach((input) => input.addEventListener("change", rgbEntered));
$(".cc-hex").addEventListener("change", (ev) => {
  const hex = normHex(ev.target.value);
  if (hex) setColor(hex);
  else {
    ev.target.classList.add("cc-invalid");
    status(`"${ev.target.value}" is not a hex color such as #1a7f37.`, "warn");
  }
});
$(".cc-hex").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter") ev.target.dispatchEvent(new Event("change"));
});
$(".cc-size").addEventListener("input", (ev) => setSize(Number(ev.target.value)));
$(".cc-tol").addEventListener("input", (ev) => setTolerance(Number(ev.target.value)));
viewport.addEventListener("pointerdown", onPointerDown);
viewport.addEventListener("keydown", onViewportKey);
viewport.addEventListener("focus", showCrosshair);
viewport.addEventListener("blur", showCrosshair);
viewport.addEventListener("pointermove", onPointerMove);
viewport.addEventListener("pointerup", onPointerUp);
viewport.addEventListener("pointercancel", onPointerUp);
viewport.addEventListener("pointerleave", () => { S.pointer = null; updateCursor(); });
viewport.addEventListener("contextmenu", (ev) => ev.preventDefault());
viewport.addEventListener("wheel", (ev) => {
  if (!S.ready) return;
  ev.preventDefault();
  const r = viewport.getBoundingClientRect();
  zoomAt(Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top);
}, { passive: false });
root.addEventListener("keydown", onKey);
root.addEventListener("keyup", (ev) => {
  if (ev.key === " ") { S.spaceDown = false; root.classList.remove("cc-space"); updateCursor(); }
});
new ResizeObserver(relayout).observe(viewport);
window.addEventListener("resize", relayout);
window.addEventListener("pagehide", () => { if (S.ready) commitNow(); });

function forgetWork() {
  const id = String(props.forget_task_id ?? "");
  if (id && id !== S.taskId) {
    localStorage.removeItem(WIP_PREFIX + id);
    forgetHistory(id);
  }
}

// One string split, not quoted names: gr.HTML takes a name quoted on its own in this script
// for a custom event and copies that event's trigger into every update setting a prop of
// the name, which the plain-JSON API route (/gradio_api/call) cannot encode.
const TASK_PROPS = "task_id sketch_src value forget_task_id".split(" ");
watch(TASK_PROPS, () => {
  forgetWork();
  const taskChanged = String(props.task_id ?? "") !== S.taskId || String(props.sketch_src ?? "") !== S.src;
  if (taskChanged) {
    setTool(DEFAULT_TOOL);
    loadTask();
    return;
  }
  if (props.value === S.lastValue || !S.ready) return;
  const v = parseValue(props.value);
  if (!v || String(v.task_id) !== S.taskId) return;
  if (!v.color_layer) {
    S.layer.fill(0);
    render(0, 0, S.W, S.H);
    S.undo = []; S.redo = []; S.undoBytes = 0;
    S.edit = Date.now() + Math.random();
    updateButtons();
    commitNow();
  } else {
    loadTask();
  }
});

element.coloringCanvas = {
  imageToClient,
  state: () => ({ ready: S.ready, taskId: S.taskId, width: S.W, height: S.H, tool: S.tool,
    color: S.color, size: S.size, tolerance: S.tolerance, scale: S.scale, undo: S.undo.length,
    redo: S.redo.length, fit: S.fit, edit: S.edit }),
  commitNow,
  flush,
};

// The color last painted with, as before a reload (it went back to the default red, and the
// next fill painted red: outside probe 132); the default in a browser that painted none.
setColor(recentColors()[0] || S.color);
drawPresets();
setSize(S.size);
setTolerance(S.tolerance);
setTool(DEFAULT_TOOL);
drawRecent();
updateButtons();
loadTask();
loadNames();
