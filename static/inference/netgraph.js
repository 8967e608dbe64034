// A network drawn as its graph of layers (as DIGITS drew the prototxt): one box per layer with its
// output shape and parameter count, an edge from each input; branches side by side (GoogLeNet),
// skip connections as arcs (ResNet). The server sends {nodes: [{id, name, type, detail, shape,
// params, inputs}], params, input, output}; this module lays it out in rows and draws SVG.
import { getJSON } from "../workbench/http.js";
import { formatCount } from "../workbench/format.js";

const SVG = "http://www.w3.org/2000/svg";
const BOX_W = 210, BOX_H = 50, GAP_X = 30, GAP_Y = 26;
const MIN_BAND_ROWS = 4; // fewer rows than this per band reads as a scatter, not a flow


function shapeText(shape) { return shape.length ? shape.join("×") : "scalar"; }

// Row of each node: one below its lowest input; a source that is not the image (ViT's class
// token, position embedding) sits just above the first layer that uses it.
function layout(nodes) {
  const row = new Array(nodes.length).fill(0);
  for (const node of nodes) row[node.id] = node.inputs.length ? 1 + Math.max(...node.inputs.map((i) => row[i])) : 0;
  const users = nodes.map(() => []);
  for (const node of nodes) for (const i of node.inputs) users[i].push(node.id);
  for (const node of nodes) {
    if (!node.inputs.length && node.type !== "Input" && users[node.id].length) {
      row[node.id] = Math.max(0, Math.min(...users[node.id].map((u) => row[u])) - 1);
    }
  }
  const rows = [];
  for (const node of nodes) (rows[row[node.id]] ||= []).push(node.id);
  const place = [];
  rows.forEach((ids, r) => ids.forEach((id, column) => { place[id] = { row: r, column }; }));
  return { place, rows: rows.length, columns: Math.max(1, ...rows.map((ids) => (ids ? ids.length : 0))) };
}

function el(name, attrs, text) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function shortName(name) {
  const parts = name.split(".");
  return parts.length > 2 ? `…${parts.slice(-2).join(".")}` : name;
}

// A network is a tall, narrow column of boxes: folded into side-by-side bands that use the
// card's width (a chain of layers filled a fifth of it), each band as tall as the rows need.
function bandsFor(container, rows, columns) {
  const bandWidth = columns * (BOX_W + GAP_X) + GAP_X + 60;
  // The card's inner width: the canvas itself has none while empty (display: none).
  const card = container.parentElement;
  const style = getComputedStyle(card);
  const inner = card.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 4;
  const available = inner > 0 ? inner : bandWidth;
  const bands = Math.max(1, Math.min(Math.floor(available / bandWidth), Math.ceil(rows / MIN_BAND_ROWS)));
  return { bands, rowsPerBand: Math.ceil(rows / bands), bandWidth: Math.max(bandWidth, available / bands) };
}

function draw(container, graph) {
  const { place, rows, columns } = layout(graph.nodes);
  const { bands, rowsPerBand, bandWidth } = bandsFor(container, rows, columns);
  const width = Math.floor(bands * bandWidth), height = rowsPerBand * (BOX_H + GAP_Y) + GAP_Y;
  const svg = el("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "netgraph", role: "img",
    "aria-label": `${graph.network}: ${graph.nodes.length} layers, ${formatCount(graph.params)} parameters` });
  const band = (id) => Math.floor(place[id].row / rowsPerBand);
  const at = (id) => ({
    x: band(id) * bandWidth + GAP_X + place[id].column * (BOX_W + GAP_X),
    y: GAP_Y + (place[id].row % rowsPerBand) * (BOX_H + GAP_Y),
  });
  const edges = el("g", { class: "edges" });
  for (const node of graph.nodes) {
    const to = at(node.id);
    for (const input of node.inputs) {
      const from = at(input);
      const x1 = from.x + BOX_W / 2, y1 = from.y + BOX_H, x2 = to.x + BOX_W / 2, y2 = to.y;
      const span = place[node.id].row - place[input].row;
      // A skip over several rows in the same column would cross the boxes between: arc beside them.
      const sameColumn = place[node.id].column === place[input].column && band(node.id) === band(input);
      const d = span > 1 && sameColumn
        ? `M${from.x + BOX_W},${from.y + BOX_H / 2} C${from.x + BOX_W + 40},${from.y + BOX_H / 2} ${to.x + BOX_W + 40},${to.y + BOX_H / 2} ${to.x + BOX_W},${to.y + BOX_H / 2}`
        : `M${x1},${y1} C${x1},${y1 + GAP_Y} ${x2},${y2 - GAP_Y} ${x2},${y2}`;
      edges.append(el("path", { d, "data-from": input, "data-to": node.id }));
    }
  }
  svg.append(edges);
  for (const node of graph.nodes) {
    const { x, y } = at(node.id);
    const box = el("g", { class: `layer layer-${node.type.toLowerCase()}`, transform: `translate(${x},${y})`, "data-id": node.id });
    box.append(el("title", {}, `${node.name}\n${node.type} ${node.detail}\noutput ${shapeText(node.shape)}\n${node.params} parameters`));
    box.append(el("rect", { width: BOX_W, height: BOX_H, rx: 5 }));
    box.append(el("text", { x: 8, y: 15, class: "layer-name" }, `${node.type} ${node.detail}`.trim()));
    box.append(el("text", { x: 8, y: 30, class: "layer-path" }, shortName(node.name)));
    const params = node.params ? ` · ${formatCount(node.params)} params` : "";
    box.append(el("text", { x: 8, y: 44, class: "layer-shape" }, `${shapeText(node.shape)}${params}`));
    svg.append(box);
  }
  container.replaceChildren(svg);
}

// The graph card: `summary` gets one line of totals, `canvas` the picture, `error` the reason a
// network cannot take the images. `show(url)` fetches and draws; the latest call wins.
export function networkGraph(card) {
  const summary = card.querySelector(".netgraph-summary");
  const canvas = card.querySelector(".netgraph-canvas");
  const error = card.querySelector(".netgraph-error");
  let latest = 0;
  return async function show(url) {
    const call = ++latest;
    error.textContent = "";
    let graph;
    try {
      graph = await getJSON(url);
    } catch (failure) {
      if (call !== latest) return;
      canvas.replaceChildren();
      summary.textContent = "";
      error.textContent = failure.message;
      return;
    }
    if (call !== latest) return;
    if (graph.not_drawn) { // a detector or segmentation network: the reason, as a note, not an error
      canvas.replaceChildren();
      summary.textContent = graph.not_drawn;
      return;
    }
    const layers = graph.nodes.filter((n) => n.type !== "Input" && n.type !== "Parameter").length;
    summary.textContent = `${graph.network}: ${layers} layers, ${formatCount(graph.params)} parameters; `
      + `input ${shapeText(graph.input)} → output ${shapeText(graph.output)} (class scores).`;
    draw(canvas, graph);
  };
}
