//===- ReportGraph.cpp - graph.dot and graph.html -------------------------===//
//
// The graph coloured by strategy class. The HTML page is self-contained (a
// report directory gets copied around and opened offline): the data is
// embedded as JSON and an inline script lays it out as a layered DAG in SVG.
//
//===----------------------------------------------------------------------===//

#include "ReportModel.h"

#include <nlohmann/json.hpp>

#include <sstream>

namespace ppc::report {
namespace {

std::string escapeHtml(const std::string &s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

std::string title(const ReportModel &m) {
  const ReportInput &in = *m.input;
  return (in.modelName.empty() ? std::string("model") : in.modelName) + " on " +
         (in.machineName.empty() ? in.problem.machine.name : in.machineName);
}

} // namespace

std::string writeDot(const ReportModel &m) {
  std::ostringstream os;
  os << "digraph \"" << escapeDot(title(m)) << "\" {\n";
  os << "  graph [rankdir=TB, fontname=\"Helvetica\", labelloc=t, label=\""
     << escapeDot(title(m)) << ": " << fixed(m.found.iterationTime * 1e3, 3)
     << " ms per iteration\"];\n";
  os << "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", "
        "fontsize=10];\n";
  os << "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#666666\"];\n";
  for (size_t i = 0; i < m.ops.size(); ++i) {
    const OpRow &o = m.ops[i];
    os << "  op" << i << " [label=\"" << escapeDot(o.name) << "\\n"
       << escapeDot(o.degrees) << " @ " << escapeDot(o.devices)
       << "\", fillcolor=\"" << colorOf(o.cls) << "\", tooltip=\""
       << escapeDot(o.kind + " " + o.shape + ", " +
                    stringifyStrategyClass(o.cls) + ", fwd " +
                    fixed(o.fwdMs, 3) + " ms, bwd " + fixed(o.bwdMs, 3) +
                    " ms, comm " + fixed(o.commMs, 3) + " ms")
       << "\"];\n";
  }
  for (const EdgeRow &e : m.edges) {
    os << "  op" << e.producer << " -> op" << e.consumer;
    // Only edges whose configurations differ move data: label and colour
    // them so the resharding points stand out.
    if (e.reshardBytes > 0)
      os << " [label=\"" << formatBytes(e.reshardBytes)
         << "\", color=\"#d62728\", fontcolor=\"#d62728\"]";
    os << ";\n";
  }
  os << "  subgraph cluster_legend {\n    label=\"strategy\";\n    "
        "style=dashed;\n    fontname=\"Helvetica\";\n";
  for (int c = 0; c < kNumStrategyClasses; ++c) {
    auto cls = static_cast<StrategyClass>(c);
    os << "    legend" << c << " [label=\"" << stringifyStrategyClass(cls)
       << "\", fillcolor=\"" << colorOf(cls) << "\"];\n";
  }
  os << "    legend_reshard [label=\"red edge: resharding\\n(forward bytes)\", "
        "shape=plaintext, style=\"\", fontcolor=\"#d62728\"];\n";
  os << "    legend0 -> legend1 -> legend2 -> legend3 -> legend4 -> "
        "legend_reshard [style=invis];\n  }\n}\n";
  return os.str();
}

namespace {

const char *kStyle = R"CSS(
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
       margin: 0; color: #222; background: #fafafa; }
header { padding: 12px 20px; background: #fff; border-bottom: 1px solid #ddd;
         display: flex; flex-wrap: wrap; gap: 16px 40px; align-items: flex-start; }
h1 { font-size: 18px; margin: 0 0 8px 0; }
table { border-collapse: collapse; font-size: 12px; }
td, th { padding: 2px 8px; text-align: right; white-space: nowrap; }
th { border-bottom: 1px solid #bbb; font-weight: 600; }
td:first-child, th:first-child { text-align: left; }
table.kv td { text-align: left; padding: 1px 8px 1px 0; }
table.kv td:first-child { color: #666; }
tr.best td { font-weight: 700; background: #fff3c4; }
tr.found td:first-child::after { content: " (found)"; color: #666;
                                  font-weight: 400; }
#why { flex-basis: 100%; }
#why p { font-size: 13px; max-width: 1100px; margin: 4px 0 8px 0;
         white-space: pre-wrap; }
#legend { display: flex; flex-wrap: wrap; gap: 6px 14px; font-size: 12px;
          padding: 8px 20px; background: #fff; border-bottom: 1px solid #ddd;
          align-items: center; }
.sw { display: inline-block; width: 14px; height: 14px; border-radius: 3px;
      border: 1px solid #888; vertical-align: -3px; margin-right: 4px; }
#controls { margin-left: auto; }
#controls button { font-size: 12px; margin-left: 4px; }
#graph { overflow: auto; padding: 10px; text-align: center; }
svg text { font-size: 11px; pointer-events: none; }
svg .node rect { stroke: #555; stroke-width: 1; cursor: pointer; }
svg .node:hover rect, svg .node.sel rect { stroke: #000; stroke-width: 2.5; }
svg .fold rect { stroke: #777; }
svg path.edge { fill: none; stroke: #999; stroke-width: 1.2; }
svg path.reshard { stroke: #d62728; stroke-width: 1.8; }
svg text.elabel { fill: #d62728; font-size: 10px; paint-order: stroke;
                  stroke: #fafafa; stroke-width: 3px; }
#tip { position: fixed; display: none; background: #fff; border: 1px solid #888;
       border-radius: 4px; padding: 6px 10px; font-size: 12px;
       box-shadow: 0 2px 8px rgba(0,0,0,.2); pointer-events: none;
       max-width: 420px; z-index: 10; }
#tip table.kv td { padding: 0 8px 0 0; }
)CSS";

// Longest-path layers, then barycentre sweeps to reduce crossings: enough
// for the chains and fork/joins of DL graphs without a layout library.
// Repeated blocks laid out alike (data.folds) are drawn as one node each
// until clicked, so a deep model reads as its distinct blocks; the layout is
// redone over the nodes shown whenever a fold opens or closes.
const char *kScript = R"JS(
(function() {
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var ops = data.ops, folds = data.folds || [];
  var open = folds.map(function() { return false; });
  var NW = 178, NH = 46, DW = 14, GX = 26, GY = 44, M = 20;
  var svg = document.getElementById('canvas'), NS = svg.namespaceURI;
  var tip = document.getElementById('tip'), pinned = -1, sel = null;
  var W = 0, H = 0, zoom = 1;
  function el(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    for (var a in attrs) e.setAttribute(a, attrs[a]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function clip(s, k) { return s.length > k ? s.slice(0, k - 1) + '\u2026' : s; }
  function row(k, v) { return '<tr><td>' + k + '</td><td>' + v + '</td></tr>'; }
  function esc(s) { return String(s).replace(/[&<>"]/g, function(c) {
    return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]; }); }
  function bytes(b) {
    var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], k = 0;
    while (Math.abs(b) >= 1024 && k < 4) { b /= 1024; k++; }
    return b.toFixed(k ? 1 : 0) + ' ' + u[k];
  }
  function place(ev) {
    tip.style.display = 'block';
    var x = ev.clientX + 14, y = ev.clientY + 14;
    var r = tip.getBoundingClientRect();
    if (x + r.width > window.innerWidth) x = ev.clientX - r.width - 14;
    if (y + r.height > window.innerHeight) y = ev.clientY - r.height - 14;
    tip.style.left = Math.max(0, x) + 'px'; tip.style.top = Math.max(0, y) + 'px';
  }
  function showOp(i, inBytes, ev) {
    var o = ops[i];
    tip.innerHTML = '<b>' + esc(o.name) + '</b><table class="kv">' +
      row('kind', esc(o.kind)) + row('output', esc(o.shape)) +
      row('strategy', esc(data.classes[o.cls].name)) +
      row('degrees', esc(o.degrees)) + row('devices', esc(o.devices)) +
      row('forward', o.fwd.toFixed(3) + ' ms') + row('backward', o.bwd.toFixed(3) + ' ms') +
      row('communication', o.comm.toFixed(3) + ' ms') + row('memory / device', esc(o.mem)) +
      row('resharded in', inBytes > 0 ? esc(o.reshardIn) : 'none') + '</table>';
    place(ev);
  }
  function showFold(f, ev) {
    var fo = folds[f], fwd = 0, bwd = 0, comm = 0;
    for (var i = fo.begin; i < fo.end; i++) { fwd += ops[i].fwd; bwd += ops[i].bwd; comm += ops[i].comm; }
    tip.innerHTML = '<b>' + esc(fo.first + ' \u2026 ' + fo.last) + '</b><table class="kv">' +
      row('blocks', fo.blocks + ' of ' + fo.length + ' ops') +
      row('layout', 'as ' + esc(fo.like) + ', op for op') +
      row('forward', fwd.toFixed(3) + ' ms') + row('backward', bwd.toFixed(3) + ' ms') +
      row('communication', comm.toFixed(3) + ' ms') + '</table>click to draw them';
    place(ev);
  }
  function unpin() {
    pinned = -1; if (sel) sel.classList.remove('sel'); sel = null; tip.style.display = 'none';
  }
  function render() {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    unpin();
    // The nodes shown: every op outside a closed fold, one node per closed
    // fold. Folds are ranges of the topological order, so the nodes stay in
    // topological order and an edge never runs backwards.
    var nodes = [], nodeOf = new Array(ops.length), f = 0;
    for (var i = 0; i < ops.length; i++) {
      while (f < folds.length && folds[f].end <= i) f++;
      if (f < folds.length && !open[f] && i >= folds[f].begin) {
        if (i == folds[f].begin) nodes.push({fold: f});
      } else {
        nodes.push({op: i});
      }
      nodeOf[i] = nodes.length - 1;
    }
    var n = nodes.length, edges = [], index = {};
    data.edges.forEach(function(e) {
      var a = nodeOf[e.from], b = nodeOf[e.to];
      if (a == b) return;
      var key = a + ',' + b;
      if (key in index) { edges[index[key]].bytes += e.bytes; return; }
      index[key] = edges.length;
      edges.push({from: a, to: b, bytes: e.bytes});
    });
    var preds = [], succs = [];
    for (var i = 0; i < n; i++) { preds.push([]); succs.push([]); }
    edges.forEach(function(e) { preds[e.to].push(e.from); succs[e.from].push(e.to); });
    var layer = new Array(n).fill(0), nl = 0;
    for (var i = 0; i < n; i++) {
      preds[i].forEach(function(p) { layer[i] = Math.max(layer[i], layer[p] + 1); });
      nl = Math.max(nl, layer[i] + 1);
    }
    // Edges that skip layers (residuals) get a virtual node per skipped
    // layer, so that they are routed around the nodes in between.
    var nv = n, chains = [];
    edges.forEach(function(e) {
      var chain = [e.from];
      for (var l = layer[e.from] + 1; l < layer[e.to]; l++) {
        preds.push([chain[chain.length - 1]]); succs.push([]);
        succs[chain[chain.length - 1]].push(nv); layer.push(l); chain.push(nv++);
      }
      if (chain.length > 1) {
        var last = chain[chain.length - 1];
        succs[last].push(e.to);
        preds[e.to] = preds[e.to].map(function(p) { return p == e.from ? last : p; });
      }
      chain.push(e.to);
      chains.push(chain);
    });
    var layers = [];
    for (var l = 0; l < nl; l++) layers.push([]);
    for (var v = 0; v < nv; v++) layers[layer[v]].push(v);
    var pos = new Array(nv).fill(0);
    layers.forEach(function(L) { L.forEach(function(v, k) { pos[v] = k; }); });
    function bary(v, nb) {
      if (!nb[v].length) return pos[v];
      var s = 0; nb[v].forEach(function(u) { s += pos[u]; }); return s / nb[v].length;
    }
    for (var it = 0; it < 8; it++) {
      var down = it % 2 == 0;
      for (var k = 0; k < nl; k++) {
        var L = layers[down ? k : nl - 1 - k];
        var b = {};
        L.forEach(function(v) { b[v] = bary(v, down ? preds : succs); });
        L.sort(function(a, c) { return b[a] - b[c] || a - c; });
        L.forEach(function(v, j) { pos[v] = j; });
      }
    }
    function width(v) { return v < n ? NW : DW; }
    function rowWidth(L) {
      var w = 0; L.forEach(function(v) { w += width(v); }); return w + Math.max(0, L.length - 1) * GX;
    }
    var maxW = 0;
    layers.forEach(function(L) { maxW = Math.max(maxW, rowWidth(L)); });
    W = 2 * M + maxW; H = 2 * M + nl * NH + Math.max(0, nl - 1) * GY;
    var X = [], Y = [], CX = [];  // CX: centre of a node or virtual node
    layers.forEach(function(L, l) {
      var x = (W - rowWidth(L)) / 2;
      L.forEach(function(v) {
        X[v] = x; CX[v] = x + width(v) / 2; Y[v] = M + l * (NH + GY); x += width(v) + GX;
      });
    });
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    setZoom(zoom);
    var ge = el('g', {}, svg), gl = el('g', {}, svg), gn = el('g', {}, svg);
    var inBytes = new Array(n).fill(0);
    edges.forEach(function(e, k) {
      inBytes[e.to] += e.bytes;
      var c = chains[k], d = '';
      // A curve between consecutive layers; straight through virtual nodes.
      for (var j = 0; j + 1 < c.length; j++) {
        var x1 = CX[c[j]], y1 = Y[c[j]] + NH, x2 = CX[c[j + 1]], y2 = Y[c[j + 1]];
        if (j == 0) d += 'M' + x1 + ',' + (Y[c[0]] + NH);
        else d += ' L' + x1 + ',' + y1;
        d += ' C' + x1 + ',' + (y1 + GY * 0.6) + ' ' + x2 + ',' + (y2 - GY * 0.6) + ' ' + x2 + ',' + y2;
      }
      el('path', {d: d, 'class': e.bytes > 0 ? 'edge reshard' : 'edge'}, ge);
      if (e.bytes > 0) {
        // Next to where the bytes arrive: the last segment's midpoint.
        var a = c[c.length - 2], b = c[c.length - 1];
        var t = el('text', {x: (CX[a] + CX[b]) / 2 + 4, y: Y[b] - GY / 2 + 4, 'class': 'elabel'}, gl);
        t.textContent = bytes(e.bytes);
      }
    });
    nodes.forEach(function(node, v) {
      var g = el('g', {'class': node.op === undefined ? 'node fold' : 'node',
                       transform: 'translate(' + X[v] + ',' + Y[v] + ')'}, gn);
      var lines;
      if (node.op !== undefined) {
        var o = ops[node.op];
        el('rect', {width: NW, height: NH, rx: 6, fill: data.classes[o.cls].color}, g);
        lines = [o.name, o.kind.replace(/^ppc\./, '') + ' ' + o.shape, o.degrees + ' @ ' + o.devices];
      } else {
        // A stack of cards: the blocks folded under one node.
        var fo = folds[node.fold];
        el('rect', {x: 6, y: -6, width: NW, height: NH, rx: 6, fill: '#fff'}, g);
        el('rect', {x: 3, y: -3, width: NW, height: NH, rx: 6, fill: '#fff'}, g);
        el('rect', {width: NW, height: NH, rx: 6, fill: '#fff'}, g);
        lines = ['\u00d7' + fo.blocks + ' like ' + fo.like, fo.first + ' \u2026 ' + fo.last,
                 fo.blocks * fo.length + ' ops, same layout'];
      }
      lines.forEach(function(s, k) {
        var t = el('text', {x: NW / 2, y: 15 + 13 * k, 'text-anchor': 'middle'}, g);
        if (k == 0) t.setAttribute('font-weight', 600);
        if (k == 1) t.setAttribute('fill', '#444');
        t.textContent = clip(s, k == 0 ? 26 : 28);
      });
      function show(ev) {
        if (node.op !== undefined) showOp(node.op, inBytes[v], ev); else showFold(node.fold, ev);
      }
      g.addEventListener('mousemove', function(ev) { if (pinned < 0) show(ev); });
      g.addEventListener('mouseleave', function() { if (pinned < 0) tip.style.display = 'none'; });
      g.addEventListener('click', function(ev) {
        ev.stopPropagation();
        if (node.op === undefined) { open[node.fold] = true; render(); return; }
        if (sel) sel.classList.remove('sel');
        if (pinned == v) { unpin(); return; }
        pinned = v; sel = g; g.classList.add('sel'); show(ev);
      });
    });
  }
  document.addEventListener('click', unpin);
  function setZoom(z) { zoom = z; svg.setAttribute('width', W * z); svg.setAttribute('height', H * z); }
  function fit() {
    var c = document.getElementById('graph');
    setZoom(Math.min(1, (c.clientWidth - 20) / W));
  }
  document.getElementById('zin').onclick = function() { setZoom(zoom * 1.25); };
  document.getElementById('zout').onclick = function() { setZoom(zoom / 1.25); };
  document.getElementById('zfit').onclick = fit;
  var unfold = document.getElementById('unfold');
  if (!folds.length) unfold.style.display = 'none';
  unfold.onclick = function() {
    var any = open.some(function(o) { return !o; });
    open = open.map(function() { return any; });
    unfold.textContent = any ? 'fold blocks' : 'unfold blocks';
    render();
  };
  // graph.html#unfolded opens with every block drawn.
  if (location.hash == '#unfolded') unfold.onclick(); else render();
  // Wide graphs start fitted to the window; tall ones scroll.
  if (W > document.getElementById('graph').clientWidth) fit();
})();
)JS";

} // namespace

std::string writeHtml(const ReportModel &m) {
  const ReportInput &in = *m.input;
  nlohmann::json data;
  data["classes"] = nlohmann::json::array();
  for (int c = 0; c < kNumStrategyClasses; ++c) {
    auto cls = static_cast<StrategyClass>(c);
    data["classes"].push_back(
        {{"name", stringifyStrategyClass(cls)}, {"color", colorOf(cls)}});
  }
  std::vector<double> reshardIn(m.ops.size(), 0);
  for (const EdgeRow &e : m.edges)
    reshardIn[e.consumer] += e.reshardBytes;
  data["ops"] = nlohmann::json::array();
  for (size_t i = 0; i < m.ops.size(); ++i) {
    const OpRow &o = m.ops[i];
    data["ops"].push_back(
        {{"name", o.name},
         {"kind", o.kind},
         {"shape", o.shape},
         {"degrees", o.degrees},
         {"devices", o.devices},
         {"cls", static_cast<int>(o.cls)},
         {"fwd", o.fwdMs},
         {"bwd", o.bwdMs},
         {"comm", o.commMs},
         {"mem", formatBytes(static_cast<double>(o.memoryBytes))},
         {"reshardIn", formatBytes(reshardIn[i])}});
  }
  data["edges"] = nlohmann::json::array();
  for (const EdgeRow &e : m.edges)
    data["edges"].push_back(
        {{"from", e.producer}, {"to", e.consumer}, {"bytes", e.reshardBytes}});
  data["folds"] = nlohmann::json::array();
  for (const FoldRow &f : m.folds)
    data["folds"].push_back({{"begin", f.begin},
                             {"end", f.end},
                             {"blocks", f.blocks},
                             {"length", f.length},
                             {"likeOp", f.like},
                             {"like", f.likeName},
                             {"first", f.firstName},
                             {"last", f.lastName}});
  // "</" inside a script element would end it early.
  std::string json = data.dump();
  for (size_t at = 0; (at = json.find("</", at)) != std::string::npos;)
    json.replace(at, 2, "<\\/");

  const sim::SimResult &r = m.found;
  double ms = r.iterationTime * 1e3;
  auto speedup = [&](double base) {
    return ms > 0 && base > 0 ? fixed(base / ms, 2) + "x" : "n/a";
  };
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
     << "<title>ppc report: " << escapeHtml(title(m)) << "</title>\n"
     << "<style>" << kStyle << "</style></head><body>\n<header><div>\n"
     << "<h1>ppc report: " << escapeHtml(title(m)) << "</h1>\n"
     << "<table class=\"kv\">\n";
  auto kv = [&](const std::string &k, const std::string &v) {
    os << "<tr><td>" << escapeHtml(k) << "</td><td>" << escapeHtml(v)
       << "</td></tr>\n";
  };
  kv("devices", std::to_string(in.problem.machine.numDevices()));
  kv("batch", std::to_string(in.batchSize) + " samples");
  kv("algorithm", (in.found.algorithm.empty() ? std::string("(given)")
                                              : in.found.algorithm) +
                      " (" + std::to_string(in.found.iterations) +
                      " strategies, " + fixed(in.found.seconds, 1) + " s)");
  for (const std::string &candidate : in.found.considered)
    kv("considered", candidate);
  for (const std::string &cut : in.found.cutShort)
    kv("cut short", cut);
  kv("iteration time", fixed(ms, 3) + " ms (predicted)");
  kv("throughput",
     fixed(r.iterationTime > 0 ? in.batchSize / r.iterationTime : 0, 1) +
         " samples/s");
  kv("speedup", speedup(m.dataParallelMs) + " over data parallel" +
                    (m.bestBaselineName.empty() || m.bestBaselineIsDataParallel
                         ? std::string()
                         : ", " + speedup(m.bestBaselineMs) + " over " +
                               m.bestBaselineName));
  kv("peak memory", formatBytes(static_cast<double>(r.peakMemory())) + " of " +
                        formatBytes(static_cast<double>(m.capacity)) +
                        " per device" +
                        (r.outOfMemory ? " (OUT OF MEMORY)" : ""));
  os << "</table></div>\n<div><h1>Baselines</h1>\n<table>\n"
     << "<tr><th>strategy</th><th>iteration ms</th><th>samples/s</th>"
        "<th>vs data parallel</th><th>bytes moved</th><th>peak memory</th>"
        "<th>OOM</th></tr>\n";
  for (const StrategyRow &s : m.strategies) {
    std::string cls = std::string(s.best ? "best" : "") +
                      (s.found ? (s.best ? " found" : "found") : "");
    os << "<tr" << (cls.empty() ? "" : " class=\"" + cls + "\"") << "><td>"
       << escapeHtml(s.name) << "</td><td>"
       << fixed(s.result.iterationTime * 1e3, 3) << "</td><td>"
       << fixed(s.throughput, 1) << "</td><td>"
       << fixed(s.speedupVsDataParallel, 2) << "x</td><td>"
       << formatBytes(s.result.totalBytes()) << "</td><td>"
       << formatBytes(static_cast<double>(s.result.peakMemory())) << "</td><td>"
       << (s.result.outOfMemory ? "yes" : "no") << "</td></tr>\n";
  }
  os << "</table><div style=\"font-size:11px;color:#666;margin-top:4px\">"
        "highlighted: best (fastest that fits in memory)</div></div>\n";
  if (!m.why.empty()) {
    os << "<div id=\"why\"><h1>Why</h1>\n";
    for (const std::string &paragraph : m.why) {
      std::string html = escapeHtml(paragraph);
      for (size_t at = html.find('\n'); at != std::string::npos;
           at = html.find('\n', at))
        html.replace(at, 1, "<br>");
      os << "<p>" << html << "</p>\n";
    }
    os << "</div>\n";
  }
  os << "</header>\n<div id=\"legend\"><b>strategy:</b>\n";
  for (int c = 0; c < kNumStrategyClasses; ++c) {
    auto cls = static_cast<StrategyClass>(c);
    os << "<span><span class=\"sw\" style=\"background:" << colorOf(cls)
       << "\"></span>" << stringifyStrategyClass(cls) << "</span>\n";
  }
  os << "<span><span class=\"sw\" style=\"background:#d62728;height:3px;"
        "border:0;vertical-align:3px\"></span>resharding edge (forward "
        "bytes)</span>\n<span style=\"color:#666\">node: name / kind output "
        "/ degrees @ devices; hover or click for times</span>\n"
        "<span id=\"controls\"><button id=\"unfold\">unfold "
        "blocks</button><button id=\"zout\">&minus;</button>"
        "<button id=\"zin\">+</button><button id=\"zfit\">fit</button>"
        "</span></div>\n<div id=\"graph\"><svg "
        "id=\"canvas\"></svg></div>\n<div id=\"tip\"></div>\n"
     << "<script type=\"application/json\" id=\"report-data\">" << json
     << "</script>\n<script>" << kScript << "</script>\n</body></html>\n";
  return os.str();
}

} // namespace ppc::report
