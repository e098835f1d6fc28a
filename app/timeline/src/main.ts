// The incident timeline view, on one time axis: bars of log lines stacked by level (per minute, or per wider
// bucket when the span is long, so a day of minutes stays readable), the error lines again in a lane of their own
// scale (a few errors under millions of info lines are otherwise a sliver), a lane per metric series, and markers
// for when the incident opened, the first error, each change event and each act of the desk (restarts; later kinds
// join by their own class); a marker whose time lies outside the span is drawn at the edge it lies beyond. It draws the structured content of a show_incident_timeline result handed over by
// the host, and loads nothing itself. A page written by `incident-desk timeline ID --html FILE` carries that
// content in a #timeline-data element instead, and is drawn without any host.
import { App, applyDocumentTheme, type McpUiHostContext } from "@modelcontextprotocol/ext-apps";

type Level = "error" | "warn" | "info" | "debug";
const LEVELS: Level[] = ["debug", "info", "warn", "error"]; // bottom to top of each stack

interface Minute { start: string; error: number; warn: number; info: number; debug: number }
interface Series {
  name: string;
  labels: Record<string, string>;
  points: { time: string; value: number }[];
  min: number | null;
  max: number | null;
  last: number | null;
}
interface Timeline {
  incident_id: string;
  service: string;
  title: string;
  opened: string;
  minutes: Minute[];
  first_error: { line: number; time: string | null; text: string } | null;
  decisions: { time: string; outcome: string; ticket: string | null; approver: string }[];
  covers: string;
  metrics?: Series[];
  changes?: { time: string; summary: string; source: string }[];
  acts?: { time: string; kind: string; summary: string }[];
  problems?: string[];
}

const SVG_NS = "http://www.w3.org/2000/svg";
const WIDTH = 600;
const LOG_HEIGHT = 220;
// The band above the plot holds the marker labels (three rows), so no label is drawn over a bar.
const PLOT = { left: 36, right: 8, top: 46, bottom: 22 };
const MARKER_ROWS = [12, 26, 40];
// Half the width of an "HH:MM" axis label at 10px, so the first and last stay inside the chart.
const LABEL_HALF_WIDTH = 16;
const MINUTE_MS = 60_000;
// Past this many bars, minutes are summed into buckets of the first of these widths that fits.
const MAX_BARS = 120;
const BUCKET_MINUTES = [1, 2, 5, 10, 15, 30, 60, 120, 240];
const LANE_HEIGHT = 46;
const ERROR_LANE_HEIGHT = 40;
// The lowest error bar is at least this tall, so one error line is seen beside a bucket of thousands.
const MIN_ERROR_BAR = 2;
const MAX_SPAN_MINUTES = 2 * 24 * 60;
const MAX_LANES = 8;
// About the width of one character of a 10px label, to cut labels to the chart's width.
const CHAR_WIDTH = 6;

function svg<K extends keyof SVGElementTagNameMap>(
  name: K,
  attributes: Record<string, string | number>,
  parent: Element,
): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
  parent.append(element);
  return element;
}

function hhmm(iso: string): string {
  return new Date(iso).toISOString().slice(11, 16);
}

/** "MM-DD HH:MM": an outside marker may lie on another day than the span. */
function when(iso: string): string {
  return new Date(iso).toISOString().slice(5, 16).replace("T", " ");
}

function cut(text: string, chars: number): string {
  return text.length <= chars ? text : `${text.slice(0, Math.max(1, chars - 1))}…`;
}

function number(value: number): string {
  return Number.isFinite(value) ? String(Number(value.toPrecision(4))) : String(value);
}

/** The minutes summed into buckets of ``width`` minutes, each starting at its first minute. */
function bucketed(minutes: Minute[], width: number): Minute[] {
  if (width === 1) return minutes;
  const buckets: Minute[] = [];
  for (let i = 0; i < minutes.length; i += width) {
    const group = minutes.slice(i, i + width);
    const sum = (level: Level): number => group.reduce((total, m) => total + m[level], 0);
    buckets.push({ start: group[0].start, error: sum("error"), warn: sum("warn"), info: sum("info"), debug: sum("debug") });
  }
  return buckets;
}

/** The log's minutes widened with quiet ones to cover the metric points and change events too (at most two days),
 * so all of them share one time axis. */
function spanned(timeline: Timeline): Minute[] {
  const minutes = timeline.minutes;
  const times = [
    ...(timeline.metrics ?? []).flatMap((s) => s.points.map((p) => p.time)),
    ...(timeline.changes ?? []).map((c) => c.time),
  ].map((iso) => Math.floor(Date.parse(iso) / MINUTE_MS) * MINUTE_MS).filter(Number.isFinite);
  const first = Date.parse(minutes[0].start);
  const last = Date.parse(minutes[minutes.length - 1].start);
  const from = Math.max(Math.min(first, ...times), last - MAX_SPAN_MINUTES * MINUTE_MS);
  const to = Math.min(Math.max(last, ...times), from + MAX_SPAN_MINUTES * MINUTE_MS);
  const quiet = (at: number): Minute => ({ start: new Date(at).toISOString(), error: 0, warn: 0, info: 0, debug: 0 });
  const before: Minute[] = [];
  for (let at = from; at < first; at += MINUTE_MS) before.push(quiet(at));
  const after: Minute[] = [];
  for (let at = last + MINUTE_MS; at <= to; at += MINUTE_MS) after.push(quiet(at));
  return [...before, ...minutes, ...after];
}

function seriesLabel(series: Series): string {
  const labels = Object.entries(series.labels).filter(([key]) => key !== "__name__")
    .map(([key, value]) => `${key}=${value}`).join(",");
  const range = series.max === null || series.last === null ? "no values"
    : `max ${number(series.max)} last ${number(series.last)}`;
  return `${series.name}${labels ? ` {${labels}}` : ""}: ${range}`;
}

function draw(timeline: Timeline): void {
  const chart = document.getElementById("chart")!;
  chart.replaceChildren();
  document.getElementById("title")!.textContent = `${timeline.incident_id} ${timeline.service}: ${timeline.title}`;
  const status = document.getElementById("status")!;
  if (timeline.minutes.length === 0) {
    chart.setAttribute("viewBox", `0 0 ${WIDTH} ${LOG_HEIGHT}`);
    status.textContent = `No timed log lines; covers ${timeline.covers}`;
    return;
  }
  const filled = spanned(timeline);
  const bucket = BUCKET_MINUTES.find((width) => filled.length / width <= MAX_BARS) ?? 240;
  const minutes = bucketed(filled, bucket);
  const series = (timeline.metrics ?? []).slice(0, MAX_LANES);
  const logBottom = LOG_HEIGHT - PLOT.bottom;
  const lanesTop = logBottom + ERROR_LANE_HEIGHT;
  const height = LOG_HEIGHT + ERROR_LANE_HEIGHT + series.length * LANE_HEIGHT;
  const axisY = height - PLOT.bottom;
  chart.setAttribute("viewBox", `0 0 ${WIDTH} ${height}`);
  const plotWidth = WIDTH - PLOT.left - PLOT.right;
  const plotHeight = logBottom - PLOT.top;
  const slot = plotWidth / minutes.length;
  const peak = Math.max(1, ...minutes.map((m) => m.error + m.warn + m.info + m.debug));
  const first = Date.parse(minutes[0].start);
  const span = minutes.length * bucket;
  const xAt = (iso: string): number | null => {
    const offset = (Date.parse(iso) - first) / MINUTE_MS;
    return offset < 0 || offset > span ? null : PLOT.left + (offset / bucket) * slot;
  };

  const axis = svg("g", { class: "axis" }, chart);
  svg("line", { x1: PLOT.left, x2: WIDTH - PLOT.right, y1: logBottom, y2: logBottom }, axis);
  const yLabel = svg("text", { x: PLOT.left - 4, y: PLOT.top + 4, "text-anchor": "end", class: "y-label" }, axis);
  yLabel.textContent = String(peak);
  const zero = svg("text", { x: PLOT.left - 4, y: logBottom, "text-anchor": "end", class: "y-label" }, axis);
  zero.textContent = "0";
  const ticks = [...new Set([0, Math.floor((minutes.length - 1) / 2), minutes.length - 1])];
  for (const index of ticks) {
    const centre = PLOT.left + (index + 0.5) * slot;
    const x = Math.min(Math.max(centre, LABEL_HALF_WIDTH), WIDTH - LABEL_HALF_WIDTH);
    const label = svg("text", { x, y: height - 6, "text-anchor": "middle", class: "x-label" }, axis);
    label.textContent = hhmm(minutes[index].start);
  }

  const bars = svg("g", { class: "bars" }, chart);
  minutes.forEach((minute, index) => {
    const column = svg("g", { class: "minute", "data-start": minute.start, "data-minutes": bucket }, bars);
    let base = logBottom;
    for (const level of LEVELS) {
      const count = minute[level];
      if (count === 0) continue;
      const barHeight = (count / peak) * plotHeight;
      base -= barHeight;
      const bar = svg("rect", {
        class: `bar ${level}`, x: PLOT.left + index * slot + slot * 0.1, y: base,
        width: Math.max(1, slot * 0.8), height: barHeight,
      }, column);
      const width = bucket === 1 ? "" : ` (${bucket} min)`;
      svg("title", {}, bar).textContent = `${hhmm(minute.start)}${width} ${level}: ${count}`;
    }
  });

  const errorPeak = Math.max(0, ...minutes.map((m) => m.error));
  const errorLane = svg("g", { class: "error-lane", "data-peak": errorPeak }, chart);
  svg("line", { class: "grid", x1: PLOT.left, x2: WIDTH - PLOT.right, y1: lanesTop, y2: lanesTop }, errorLane);
  const per = bucket === 1 ? "minute" : `${bucket} minutes`;
  const errorLabel = svg("text", { x: PLOT.left + 2, y: logBottom + 13, class: "lane-label" }, errorLane);
  errorLabel.textContent = errorPeak === 0 ? "error lines: none"
    : `error lines on their own scale: at most ${errorPeak} per ${per}`;
  const errorTop = logBottom + 18;
  const errorBottom = lanesTop - 4;
  minutes.forEach((minute, index) => {
    if (minute.error === 0) return;
    const barHeight = Math.max(MIN_ERROR_BAR, (minute.error / errorPeak) * (errorBottom - errorTop));
    const bar = svg("rect", {
      class: "lane-bar error", x: PLOT.left + index * slot + slot * 0.1, y: errorBottom - barHeight,
      width: Math.max(1, slot * 0.8), height: barHeight,
    }, errorLane);
    svg("title", {}, bar).textContent = `${hhmm(minute.start)} error: ${minute.error}`;
  });

  const lanes = svg("g", { class: "lanes" }, chart);
  series.forEach((one, index) => {
    const top = lanesTop + index * LANE_HEIGHT;
    const lane = svg("g", { class: "lane", "data-name": one.name }, lanes);
    svg("line", { class: "grid", x1: PLOT.left, x2: WIDTH - PLOT.right, y1: top + LANE_HEIGHT, y2: top + LANE_HEIGHT }, lane);
    const label = svg("text", { x: PLOT.left + 2, y: top + 13, class: "lane-label" }, lane);
    label.textContent = cut(seriesLabel(one), Math.floor(plotWidth / CHAR_WIDTH));
    const low = one.min ?? 0;
    const high = one.max ?? 1;
    const range = high > low ? high - low : 1;
    const plotTop = top + 18;
    const plotBottom = top + LANE_HEIGHT - 4;
    const points: string[] = [];
    for (const point of one.points) {
      const x = xAt(point.time);
      if (x === null || !Number.isFinite(point.value)) continue;
      const y = plotBottom - ((point.value - low) / range) * (plotBottom - plotTop);
      points.push(`${x.toFixed(1)},${y.toFixed(1)}`);
    }
    if (points.length > 0) svg("polyline", { class: "series", points: points.join(" ") }, lane);
  });

  const markers = svg("g", { class: "markers" }, chart);
  // Marker labels are laid out greedily: each takes the first row and side (its preferred side first) where it
  // fits inside the chart clear of the labels placed before it, or else the most room there is, cut to fit.
  const placed: { row: number; from: number; to: number }[] = [];
  const GAP = 4;
  const roomFrom = (row: number, x: number, rightward: boolean): number => {
    let room = rightward ? WIDTH - x - 3 : x - 3;
    for (const other of placed.filter((p) => p.row === row)) {
      if (rightward && other.to > x) room = Math.min(room, other.from - GAP - x - 3);
      if (!rightward && other.from < x) room = Math.min(room, x - 3 - other.to - GAP);
    }
    return Math.max(0, room);
  };
  // Returns whether ``iso`` lies in the span; one outside it is drawn at the edge it lies beyond, with its time.
  const mark = (kind: string, iso: string, text: string): boolean => {
    const inside = xAt(iso);
    const before = Date.parse(iso) < first;
    const x = inside ?? (before ? PLOT.left : WIDTH - PLOT.right);
    if (inside === null) {
      kind = `${kind} outside`;
      // The time and arrow say where it lies, so the summary is cut to leave them room.
      const summary = cut(text, 18);
      text = before ? `← ${when(iso)} ${summary}` : `${summary} ${when(iso)} →`;
    }
    const wanted = cut(text, 32);
    const width = wanted.length * CHAR_WIDTH;
    const preferred = x < WIDTH / 2;
    let best = { row: 0, rightward: preferred, room: -1 };
    for (let row = 0; row < MARKER_ROWS.length && best.room < width; row++) {
      for (const rightward of [preferred, !preferred]) {
        const room = roomFrom(row, x, rightward);
        if (room > best.room) best = { row, rightward, room };
        if (room >= width) break;
      }
    }
    const shown = best.room >= width ? wanted : cut(text, Math.max(1, Math.floor(best.room / CHAR_WIDTH)));
    const shownWidth = shown.length * CHAR_WIDTH;
    const y = MARKER_ROWS[best.row];
    const group = svg("g", { class: `marker ${kind}` }, markers);
    if (inside === null) group.setAttribute("data-side", before ? "before" : "after");
    svg("line", { x1: x, x2: x, y1: y + 2, y2: axisY }, group);
    const labelX = best.rightward ? x + 3 : x - 3;
    const label = svg("text", { x: labelX, y, "text-anchor": best.rightward ? "start" : "end" }, group);
    label.textContent = shown;
    placed.push({
      row: best.row,
      from: best.rightward ? labelX : labelX - shownWidth,
      to: best.rightward ? labelX + shownWidth : labelX,
    });
    svg("title", {}, group).textContent = `${hhmm(iso)} ${text}`;
    return inside !== null;
  };
  mark("opened", timeline.opened, "opened");
  if (timeline.first_error?.time) mark("first-error", timeline.first_error.time, "first error");
  const changesOutside = (timeline.changes ?? []).filter((c) => !mark("change", c.time, c.summary)).length;
  const acts = timeline.acts ?? timeline.decisions.map((d) => ({ time: d.time, kind: "restart", summary: `restart ${d.outcome}` }));
  // An act's class is its kind ("restart"), so kinds added later get their own marker without a change here.
  const actsOutside = acts.filter((a) => !mark(a.kind.replace(/[^a-z0-9-]/gi, "-"), a.time, a.summary)).length;
  const notes: string[] = [];
  if (bucket > 1) notes.push(`bars of ${bucket} minutes`);
  if (actsOutside > 0) notes.push(`${actsOutside} act(s) of the desk outside this span, drawn at its edge`);
  if (changesOutside > 0) notes.push(`${changesOutside} change(s) outside this span, drawn at its edge`);
  const hidden = (timeline.metrics ?? []).length - series.length;
  if (hidden > 0) notes.push(`${hidden} more metric series in the text timeline`);
  for (const problem of timeline.problems ?? []) notes.push(`unavailable: ${problem}`);
  status.textContent = `Covers ${timeline.covers}${notes.map((n) => `; ${n}`).join("")}`;
}

function applyTheme(context: McpUiHostContext | undefined): void {
  if (context?.theme) applyDocumentTheme(context.theme);
}

function preferredTheme(): "light" | "dark" {
  return window.matchMedia?.("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

const embedded = document.getElementById("timeline-data");
if (embedded?.textContent) {
  // A page written by the command line: the data is in the page, and there is no host to connect to.
  applyDocumentTheme(preferredTheme());
  draw(JSON.parse(embedded.textContent) as Timeline);
} else {
  await connectToHost();
}

async function connectToHost(): Promise<void> {
  const app = new App({ name: "incident-desk-timeline", version: "1.0.0" }, {}, { autoResize: true });
  app.addEventListener("toolresult", (result) => {
    const status = document.getElementById("status")!;
    if (result.isError || !result.structuredContent) {
      const text = result.content?.find((block) => block.type === "text");
      status.textContent = text && "text" in text ? String(text.text) : "The timeline could not be read.";
      return;
    }
    draw(result.structuredContent as unknown as Timeline);
  });
  app.addEventListener("hostcontextchanged", (context) => applyTheme(context));
  await app.connect();
  applyTheme(app.getHostContext());
}
