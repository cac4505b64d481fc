/**
 * The `sluice dev --ui` page, after Spark UI's streaming tab: rates, batch duration, watermark and
 * event-time lag, state rows per operator over time (uPlot), per-shard figures, the last batches'
 * output and the dead letters. Plain DOM and one EventSource; the figures shown are the progress
 * records' own (sums over them), so the browser test can compare them with the run's records.
 * Kept in a .ts string so that the compiled package carries it (tsc copies no .html).
 */
export const PAGE_HTML = /* html */ `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>sluice dev</title>
<link rel="stylesheet" href="/uplot.css">
<style>
  body { font: 14px system-ui, sans-serif; margin: 16px 24px; color: #222; }
  h1 { font-size: 20px; margin: 0 0 4px; }
  h2 { font-size: 16px; margin: 20px 0 8px; }
  #status { color: #555; margin-bottom: 12px; }
  .totals { display: flex; gap: 24px; flex-wrap: wrap; }
  .totals div { background: #f3f5f8; padding: 8px 12px; border-radius: 4px; }
  .totals b { display: block; font-size: 20px; }
  .charts { display: grid; grid-template-columns: repeat(2, 560px); gap: 12px 24px; }
  .chart h3 { font-size: 14px; margin: 8px 0 2px; }
  table { border-collapse: collapse; font-size: 13px; }
  th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
  th { background: #f3f5f8; }
  td.text { text-align: left; font-family: ui-monospace, monospace; }
  .output { display: inline-block; vertical-align: top; margin: 0 16px 12px 0; }
  .output caption { text-align: left; font-weight: bold; padding-bottom: 4px; }
</style>
</head>
<body>
<h1 id="query">sluice dev</h1>
<div id="status">connecting…</div>
<div class="totals">
  <div>batches <b id="total-batches">0</b></div>
  <div>input rows <b id="total-input">0</b></div>
  <div>output rows <b id="total-output">0</b></div>
  <div>late rows dropped <b id="total-late">0</b></div>
  <div>dead-lettered <b id="total-dead">0</b></div>
  <div>state rows (all shards) <b id="total-state">0</b></div>
</div>
<div class="charts">
  <div class="chart"><h3>Input rate and processing rate (rows/s, per batch)</h3><div id="chart-rates"></div></div>
  <div class="chart"><h3>Batch duration (ms)</h3><div id="chart-duration"></div></div>
  <div class="chart"><h3>Watermark delay and event-time lag (s behind wall clock)</h3><div id="chart-lag"></div></div>
  <div class="chart"><h3>State rows per operator (all shards)</h3><div id="chart-state"></div></div>
</div>
<h2>Per shard</h2>
<table id="shards"><thead><tr>
  <th>shard</th><th>batches</th><th>last batch</th><th>input rows</th><th>output rows</th><th>watermark</th>
  <th>state rows</th><th>late rows dropped</th><th>dead-lettered</th>
</tr></thead><tbody></tbody></table>
<h2>Last batches' output</h2>
<div id="outputs"></div>
<h2>Dead letters <span id="dead-count"></span></h2>
<table id="dead-letters"><thead><tr><th>shard</th><th>sequence number</th><th>partition key</th><th>reason</th><th>data</th></tr></thead><tbody></tbody></table>
<script src="/uplot.js"></script>
<script>
"use strict";
var batches = [];
var deadLetters = [];
var charts = {};
window.sluiceCharts = charts;
window.sluiceBatches = batches;
var pending = false;

function sum(list, f) { return list.reduce(function (n, x) { return n + f(x); }, 0); }
function el(tag, text, cls) { var e = document.createElement(tag); if (text !== undefined) e.textContent = String(text); if (cls) e.className = cls; return e; }
function late(p) { return sum(p.stateOperators, function (o) { return o.numRowsDroppedByWatermark; }); }
function stateRows(p) { return sum(p.stateOperators, function (o) { return o.numRowsTotal; }); }

function chart(id, series, data) {
  var target = document.getElementById(id);
  var existing = charts[id];
  // Same series (labels): new data only; a new operator's series means a new chart.
  var labels = series.join("\u0000");
  if (existing && existing.sluiceLabels === labels) { existing.setData(data); return; }
  if (existing) existing.destroy();
  var colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];
  charts[id] = new uPlot({
    width: 560, height: 220,
    scales: { x: { time: true } },
    axes: [{}, { size: 90 }],
    series: [{}].concat(series.map(function (label, i) {
      return { label: label, stroke: colors[i % colors.length], width: 1.5, spanGaps: true, points: { show: data[0].length < 60 } };
    })),
  }, data, target);
  charts[id].sluiceLabels = labels;
}

function render() {
  pending = false;
  var all = batches.slice().sort(function (a, b) { return a.startMs - b.startMs; });
  var counted = all.filter(function (b) { return !b.routed; });
  var fromSource = all.filter(function (b) { return b.fromSource; });
  document.getElementById("total-batches").textContent = String(all.length);
  document.getElementById("total-input").textContent = String(sum(fromSource, function (b) { return b.progress.numInputRows; }));
  document.getElementById("total-output").textContent = String(sum(counted, function (b) { return b.progress.sink.numOutputRows; }));
  document.getElementById("total-late").textContent = String(sum(all, function (b) { return late(b.progress); }));
  document.getElementById("total-dead").textContent = String(sum(all, function (b) { return b.progress.numDeadLetteredRows; }));

  var x = all.map(function (b) { return b.startMs / 1000; });
  chart("chart-rates", ["input rows/s", "processed rows/s"], [x,
    all.map(function (b) { return b.progress.inputRowsPerSecond === undefined ? null : b.progress.inputRowsPerSecond; }),
    all.map(function (b) { return b.progress.processedRowsPerSecond; })]);
  chart("chart-duration", ["batch duration (ms)"], [x, all.map(function (b) { return b.progress.batchDuration; })]);
  chart("chart-lag", ["watermark delay (s)", "event-time lag (s)"], [x,
    all.map(function (b) { return b.watermarkLagMs === null ? null : b.watermarkLagMs / 1000; }),
    all.map(function (b) { return b.eventTimeLagMs === null ? null : b.eventTimeLagMs / 1000; })]);

  // State rows per operator, all shards: each shard's latest count, added up at every batch.
  var operators = [];
  all.forEach(function (b) { b.progress.stateOperators.forEach(function (o, i) { var k = i + ":" + o.operatorName; if (operators.indexOf(k) < 0) operators.push(k); }); });
  var latest = {};
  var perOperator = operators.map(function () { return []; });
  all.forEach(function (b) {
    b.progress.stateOperators.forEach(function (o, i) { latest[b.shard + "|" + i + ":" + o.operatorName] = o.numRowsTotal; });
    operators.forEach(function (k, j) {
      var n = 0;
      Object.keys(latest).forEach(function (key) { if (key.slice(key.indexOf("|") + 1) === k) n += latest[key]; });
      perOperator[j].push(n);
    });
  });
  document.getElementById("total-state").textContent = String(Object.keys(latest).reduce(function (n, k) { return n + latest[k]; }, 0));
  chart("chart-state", operators.length ? operators : ["(no stateful operator)"], [x].concat(operators.length ? perOperator : [x.map(function () { return 0; })]));

  var shards = {};
  all.forEach(function (b) {
    var s = shards[b.shard] || (shards[b.shard] = { batches: 0, last: -1, input: 0, output: 0, watermark: "none", state: 0, late: 0, dead: 0 });
    s.batches++; s.last = Math.max(s.last, b.progress.batchId); s.input += b.progress.numInputRows;
    s.output += b.progress.sink.numOutputRows; s.watermark = b.watermark; s.state = stateRows(b.progress);
    s.late += late(b.progress); s.dead += b.progress.numDeadLetteredRows;
  });
  var body = document.querySelector("#shards tbody");
  body.replaceChildren();
  Object.keys(shards).sort().forEach(function (id) {
    var s = shards[id];
    var tr = el("tr"); tr.dataset.shard = id;
    [[id, "text"], [s.batches], [s.last], [s.input], [s.output], [s.watermark, "text"], [s.state], [s.late], [s.dead]]
      .forEach(function (c) { tr.appendChild(el("td", c[0], c[1])); });
    body.appendChild(tr);
  });

  var outputs = document.getElementById("outputs");
  outputs.replaceChildren();
  counted.filter(function (b) { return b.output && b.output.rows.length > 0; }).slice(-4).reverse().forEach(function (b) {
    var t = el("table", undefined, "output");
    var caption = el("caption", b.shard + " batch " + b.progress.batchId + " (" + b.output.rows.length + " rows)");
    t.appendChild(caption);
    var head = el("tr"); b.output.columns.forEach(function (c) { head.appendChild(el("th", c)); }); t.appendChild(head);
    b.output.rows.slice(0, 20).forEach(function (r) { var tr = el("tr"); r.forEach(function (c) { tr.appendChild(el("td", c)); }); t.appendChild(tr); });
    outputs.appendChild(t);
  });

  var dead = document.querySelector("#dead-letters tbody");
  dead.replaceChildren();
  document.getElementById("dead-count").textContent = "(" + deadLetters.length + ")";
  deadLetters.forEach(function (d) {
    var tr = el("tr");
    [d.shardId, d.sequenceNumber, d.partitionKey, d.reason, d.data].forEach(function (c) { tr.appendChild(el("td", c, "text")); });
    dead.appendChild(tr);
  });
}

function schedule() { if (!pending) { pending = true; setTimeout(render, 100); } }

var source = new EventSource("/events");
source.onmessage = function (message) {
  var event = JSON.parse(message.data);
  if (event.type === "query") {
    document.getElementById("query").textContent = "sluice dev: " + event.name + " (" + event.outputMode + " mode → " + event.sink + " sink, " + event.shards + " shards)";
  } else if (event.type === "batch") {
    batches.push(event);
  } else if (event.type === "deadLetters") {
    deadLetters = event.deadLetters;
  } else if (event.type === "status") {
    document.getElementById("status").textContent = event.text;
    document.body.dataset.done = event.done ? "true" : "false";
  }
  schedule();
};
source.onerror = function () { document.getElementById("status").textContent += " (disconnected)"; };
</script>
</body>
</html>
`;
