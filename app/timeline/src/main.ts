// The incident timeline view: bars of log lines per minute stacked by level, with markers for when the
// incident opened, the first error and each restart decision. It draws the structured content of a
// show_incident_timeline result handed over by the host, and loads nothing itself. A page written by
// `incident-desk timeline ID --html FILE` carries that content in a #timeline-data element instead, and is
// drawn without any host.
import { App, applyDocumentTheme, type McpUiHostContext } from "@modelcontextprotocol/ext-apps";

type Level = "error" | "warn" | "info" | "debug";
const LEVELS: Level[] = ["debug", "info", "warn", "error"]; // bottom to top of each stack

interface Minute { start: string; error: number; warn: number; info: number; debug: number }
interface Timeline {
  incident_id: string;
  service: string;
  title: string;
  opened: string;
  minutes: Minute[];
  first_error: { line: number; time: string | null; text: string } | null;
  decisions: { time: string; outcome: string; ticket: string | null; approver: string }[];
  covers: string;
}

const SVG_NS = "http://www.w3.org/2000/svg";
const WIDTH = 600;
const HEIGHT = 220;
// The band above the plot holds the marker labels (two rows), so no label is drawn over a bar.
const PLOT = { left: 36, right: 8, top: 34, bottom: 22 };
const MARKER_ROWS = [12, 26];
// Half the width of an "HH:MM" axis label at 10px, so the first and last stay inside the chart.
const LABEL_HALF_WIDTH = 16;
const MINUTE_MS = 60_000;

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

function draw(timeline: Timeline): void {
  const chart = document.getElementById("chart")!;
  chart.replaceChildren();
  chart.setAttribute("viewBox", `0 0 ${WIDTH} ${HEIGHT}`);
  document.getElementById("title")!.textContent = `${timeline.incident_id} ${timeline.service}: ${timeline.title}`;
  const status = document.getElementById("status")!;
  const minutes = timeline.minutes;
  if (minutes.length === 0) {
    status.textContent = `No timed log lines; covers ${timeline.covers}`;
    return;
  }
  const plotWidth = WIDTH - PLOT.left - PLOT.right;
  const plotHeight = HEIGHT - PLOT.top - PLOT.bottom;
  const slot = plotWidth / minutes.length;
  const peak = Math.max(1, ...minutes.map((m) => m.error + m.warn + m.info + m.debug));
  const first = Date.parse(minutes[0].start);
  const xAt = (iso: string): number | null => {
    const offset = (Date.parse(iso) - first) / MINUTE_MS;
    return offset < 0 || offset > minutes.length ? null : PLOT.left + offset * slot;
  };

  const axis = svg("g", { class: "axis" }, chart);
  svg("line", { x1: PLOT.left, x2: WIDTH - PLOT.right, y1: HEIGHT - PLOT.bottom, y2: HEIGHT - PLOT.bottom }, axis);
  const yLabel = svg("text", { x: PLOT.left - 4, y: PLOT.top + 4, "text-anchor": "end", class: "y-label" }, axis);
  yLabel.textContent = String(peak);
  const zero = svg("text", { x: PLOT.left - 4, y: HEIGHT - PLOT.bottom, "text-anchor": "end", class: "y-label" }, axis);
  zero.textContent = "0";
  const ticks = [...new Set([0, Math.floor((minutes.length - 1) / 2), minutes.length - 1])];
  for (const index of ticks) {
    const centre = PLOT.left + (index + 0.5) * slot;
    const x = Math.min(Math.max(centre, LABEL_HALF_WIDTH), WIDTH - LABEL_HALF_WIDTH);
    const label = svg("text", { x, y: HEIGHT - 6, "text-anchor": "middle", class: "x-label" }, axis);
    label.textContent = hhmm(minutes[index].start);
  }

  const bars = svg("g", { class: "bars" }, chart);
  minutes.forEach((minute, index) => {
    const column = svg("g", { class: "minute", "data-start": minute.start }, bars);
    let base = HEIGHT - PLOT.bottom;
    for (const level of LEVELS) {
      const count = minute[level];
      if (count === 0) continue;
      const height = (count / peak) * plotHeight;
      base -= height;
      const bar = svg("rect", {
        class: `bar ${level}`, x: PLOT.left + index * slot + slot * 0.1, y: base,
        width: Math.max(1, slot * 0.8), height,
      }, column);
      svg("title", {}, bar).textContent = `${hhmm(minute.start)} ${level}: ${count}`;
    }
  });

  const markers = svg("g", { class: "markers" }, chart);
  const mark = (kind: string, iso: string, text: string): boolean => {
    const x = xAt(iso);
    if (x === null) return false;
    const row = MARKER_ROWS[(markers.childElementCount) % MARKER_ROWS.length];
    const group = svg("g", { class: `marker ${kind}` }, markers);
    svg("line", { x1: x, x2: x, y1: row + 2, y2: HEIGHT - PLOT.bottom }, group);
    // Labels read to the right of their line, or to its left near the right edge, so none leaves the chart.
    const rightward = x < WIDTH / 2;
    const anchor = rightward ? "start" : "end";
    const label = svg("text", { x: rightward ? x + 3 : x - 3, y: row, "text-anchor": anchor }, group);
    label.textContent = text;
    return true;
  };
  mark("opened", timeline.opened, "opened");
  if (timeline.first_error?.time) mark("first-error", timeline.first_error.time, "first error");
  const outside = timeline.decisions.filter((d) => !mark("restart", d.time, `restart ${d.outcome}`)).length;
  const note = outside > 0 ? `; ${outside} restart decision(s) outside this span` : "";
  status.textContent = `Covers ${timeline.covers}${note}`;
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
