// Renders the desk's view in headless Chromium through the test host, then reports what was drawn as JSON on
// stdout: bars, markers, axis labels, the pixels of a screenshot in each theme, every network request, and
// console errors. Usage: node harness/run.mjs <input.json> <screenshot-dir>
import { readFileSync } from "node:fs";
import { chromium } from "playwright-core";

const [inputPath, shotDir] = process.argv.slice(2);
const input = JSON.parse(readFileSync(inputPath, "utf8"));
const hostPage = readFileSync(new URL("../dist-harness/host.html", import.meta.url), "utf8");
const HOST = "http://host.test/";

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE host.test"],
});
const report = { requests: [], consoleErrors: [], themes: {} };
try {
  // Requests are watched and routed for the whole context, so the sandboxed frame's are seen too; the app's
  // console errors include any load the CSP blocked or that failed (an attempt at the network either way).
  const context = await browser.newContext({ viewport: { width: 640, height: 400 } });
  context.on("request", (request) => { if (request.url() !== HOST) report.requests.push(request.url()); });
  context.on("requestfailed", (request) => { if (request.url() !== HOST) report.requests.push(request.url()); });
  const page = await context.newPage();
  page.on("console", (message) => { if (message.type() === "error") report.consoleErrors.push(message.text()); });
  await context.route("**/*", (route) =>
    route.request().url() === HOST
      ? route.fulfill({ status: 200, contentType: "text/html", body: hostPage })
      : route.abort());
  await page.goto(HOST);
  await page.evaluate((options) => window.harness.render(options), { ...input, theme: "dark" });
  const frame = () => page.frames().find((f) => f !== page.mainFrame());
  await page.waitForFunction(() => document.querySelector("iframe")?.contentWindow !== null);
  const view = frame();
  await view.waitForSelector("#chart g.minute, #status", { timeout: 5000 });
  await view.waitForFunction(() => document.querySelectorAll("#chart g.minute").length > 0
    || !document.getElementById("status").textContent.startsWith("Waiting"), null, { timeout: 5000 });

  const drawn = await view.evaluate(() => ({
    ...(() => {
      // Whether every label lies inside the chart, and every marker label clear of the bars (as page.mjs).
      const chart = document.getElementById("chart");
      const [, , width, height] = chart.getAttribute("viewBox").split(" ").map(Number);
      const tops = [...chart.querySelectorAll("rect.bar")].map((bar) => bar.getBBox().y);
      const top = Math.min(...tops);
      const texts = [...chart.querySelectorAll("text")].map((text) => {
        const box = text.getBBox();
        return { text: text.textContent, marker: text.closest("g.marker") !== null, bottom: box.y + box.height,
          inside: box.x >= 0 && box.y >= 0 && box.x + box.width <= width && box.y + box.height <= height };
      });
      return {
        labelsOutside: texts.filter((t) => !t.inside).map((t) => t.text),
        markerLabelsOverBars: texts.filter((t) => t.marker && t.bottom > top).map((t) => t.text),
        lanes: [...chart.querySelectorAll("g.lane")].map((lane) => ({
          name: lane.getAttribute("data-name"),
          label: lane.querySelector("text")?.textContent,
          points: (lane.querySelector("polyline")?.getAttribute("points") ?? "").split(" ").filter(Boolean).length,
        })),
        errorLane: (() => {
          const lane = chart.querySelector("g.error-lane");
          return lane && {
            label: lane.querySelector("text")?.textContent,
            heights: [...lane.querySelectorAll("rect.lane-bar.error")].map((bar) => bar.getBBox().height),
            renderedHeights: [...lane.querySelectorAll("rect.lane-bar.error")].map((bar) => bar.getBoundingClientRect().height),
          };
        })(),
        stackedErrorHeights: [...chart.querySelectorAll("rect.bar.error")].map((bar) => bar.getBoundingClientRect().height),
        outsideMarkers: [...chart.querySelectorAll("g.marker.outside")].map((marker) => ({
          class: marker.getAttribute("class"),
          side: marker.getAttribute("data-side"),
          label: marker.querySelector("text")?.textContent,
          x: Number(marker.querySelector("line")?.getAttribute("x1")),
          width,
        })),
        bucketMinutes: [...new Set([...chart.querySelectorAll("g.minute")].map((m) => m.getAttribute("data-minutes")))],
        markerLabels: [...chart.querySelectorAll("g.marker > text")].map((t) => t.textContent),
        markerLabelsOverlapping: (() => {
          const boxes = [...chart.querySelectorAll("g.marker > text")].map((t) => [t.textContent, t.getBBox()]);
          const clash = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
          return boxes.flatMap(([text, box], i) => boxes.slice(i + 1).filter(([, other]) => clash(box, other))
            .map(([other]) => `${text} / ${other}`));
        })(),
      };
    })(),
    minutes: document.querySelectorAll("#chart g.minute").length,
    bars: [...document.querySelectorAll("#chart rect.bar")].map((bar) => bar.getAttribute("class")),
    markers: [...document.querySelectorAll("#chart g.marker")].map((m) => m.getAttribute("class")),
    xLabels: [...document.querySelectorAll("#chart text.x-label")].map((t) => t.textContent),
    yLabels: [...document.querySelectorAll("#chart text.y-label")].map((t) => t.textContent),
    title: document.getElementById("title").textContent,
    status: document.getElementById("status").textContent,
  }));
  Object.assign(report, drawn);

  async function shoot(theme) {
    const theming = await view.evaluate(() => ({
      dataTheme: document.documentElement.getAttribute("data-theme"),
      background: getComputedStyle(document.body).backgroundColor,
    }));
    const png = await page.locator("iframe").screenshot({ path: `${shotDir}/timeline-${theme}.png` });
    const pixels = await page.evaluate(async (base64) => {
      const image = new Image();
      image.src = `data:image/png;base64,${base64}`;
      await image.decode();
      const canvas = document.createElement("canvas");
      canvas.width = image.width;
      canvas.height = image.height;
      const context = canvas.getContext("2d");
      context.drawImage(image, 0, 0);
      const data = context.getImageData(0, 0, image.width, image.height).data;
      const colours = new Set();
      const counts = new Map();
      for (let i = 0; i < data.length; i += 4) {
        const key = (data[i] << 16) | (data[i + 1] << 8) | data[i + 2];
        colours.add(key);
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
      const commonest = Math.max(...counts.values());
      return { width: image.width, height: image.height, colours: colours.size,
        nonBackground: 1 - commonest / (data.length / 4) };
    }, png.toString("base64"));
    report.themes[theme] = { ...theming, ...pixels };
  }
  await shoot("dark");
  await page.evaluate(() => window.harness.setTheme("light"));
  await view.waitForFunction(() => document.documentElement.getAttribute("data-theme") === "light",
    null, { timeout: 5000 });
  await shoot("light");
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(report));
