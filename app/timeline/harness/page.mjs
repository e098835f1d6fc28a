// Opens a page written by `incident-desk timeline ID --html FILE` in headless Chromium, with every request but
// the page itself aborted and recorded, and reports what was drawn as JSON on stdout: bars, markers, labels
// and whether each lies inside the chart and clear of the bars, the pixels of a screenshot, every request and
// console error. Usage: node harness/page.mjs <page.html> <screenshot.png>
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";

const [pagePath, shotPath] = process.argv.slice(2);
const PAGE = pathToFileURL(pagePath).href;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--host-resolver-rules=MAP * ~NOTFOUND"],
});
const report = { requests: [], consoleErrors: [] };
try {
  const context = await browser.newContext({ viewport: { width: 640, height: 400 }, colorScheme: "light" });
  context.on("request", (request) => { if (request.url() !== PAGE) report.requests.push(request.url()); });
  await context.route("**/*", (route) => (route.request().url() === PAGE ? route.continue() : route.abort()));
  const page = await context.newPage();
  page.on("console", (message) => { if (message.type() === "error") report.consoleErrors.push(message.text()); });
  page.on("pageerror", (error) => report.consoleErrors.push(String(error)));
  await page.goto(PAGE);
  await page.waitForFunction(() => document.querySelectorAll("#chart g.minute").length > 0
    || !document.getElementById("status").textContent.startsWith("Waiting"), null, { timeout: 5000 });
  Object.assign(report, await page.evaluate(() => {
    const chart = document.getElementById("chart");
    const [, , width, height] = chart.getAttribute("viewBox").split(" ").map(Number);
    const bars = [...chart.querySelectorAll("rect.bar")].map((bar) => bar.getBBox());
    const top = Math.min(...bars.map((box) => box.y));
    const texts = [...chart.querySelectorAll("text")].map((text) => {
      const box = text.getBBox();
      return {
        text: text.textContent,
        marker: text.closest("g.marker") !== null,
        inside: box.x >= 0 && box.y >= 0 && box.x + box.width <= width && box.y + box.height <= height,
        bottom: box.y + box.height,
      };
    });
    return {
      minutes: chart.querySelectorAll("g.minute").length,
      bars: bars.length,
      markers: [...chart.querySelectorAll("g.marker")].map((m) => m.getAttribute("class")),
      xLabels: [...chart.querySelectorAll("text.x-label")].map((t) => t.textContent),
      title: document.getElementById("title").textContent,
      status: document.getElementById("status").textContent,
      documentTitle: document.title,
      dataTheme: document.documentElement.getAttribute("data-theme"),
      labelsOutside: texts.filter((t) => !t.inside).map((t) => t.text),
      markerLabelsOverBars: texts.filter((t) => t.marker && t.bottom > top).map((t) => t.text),
    };
  }));
  const png = await page.screenshot({ path: shotPath, fullPage: true });
  report.screenshot = await page.evaluate(async (base64) => {
    const image = new Image();
    image.src = `data:image/png;base64,${base64}`;
    await image.decode();
    const canvas = document.createElement("canvas");
    canvas.width = image.width;
    canvas.height = image.height;
    const context = canvas.getContext("2d");
    context.drawImage(image, 0, 0);
    const data = context.getImageData(0, 0, image.width, image.height).data;
    const counts = new Map();
    for (let i = 0; i < data.length; i += 4) {
      const key = (data[i] << 16) | (data[i + 1] << 8) | data[i + 2];
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    const commonest = Math.max(...counts.values());
    return { width: image.width, height: image.height, colours: counts.size,
      nonBackground: 1 - commonest / (data.length / 4) };
  }, png.toString("base64"));
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(report));
