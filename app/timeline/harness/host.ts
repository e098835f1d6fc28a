// A minimal MCP Apps host for tests: it renders the desk's view resource in a sandboxed iframe through the
// ext-apps AppBridge and hands it a tool result, the way a desktop client would.
import { AppBridge, PostMessageTransport, type McpUiHostContext } from "@modelcontextprotocol/ext-apps/app-bridge";

interface RenderOptions {
  html: string;
  csp: { connectDomains?: string[]; resourceDomains?: string[] } | undefined;
  arguments: Record<string, unknown>;
  result: Record<string, unknown>;
  theme: "light" | "dark";
}

function cspOf(csp: RenderOptions["csp"]): string {
  const connect = csp?.connectDomains?.length ? csp.connectDomains : ["'none'"];
  const resources = (csp?.resourceDomains ?? []).join(" ");
  return [
    "default-src 'none'",
    `script-src 'self' 'unsafe-inline' ${resources}`,
    `style-src 'self' 'unsafe-inline' ${resources}`,
    `img-src 'self' data: ${resources}`,
    `font-src 'self' ${resources}`,
    `connect-src ${connect.join(" ")}`,
    "frame-src 'none'",
    "object-src 'none'",
    "base-uri 'self'",
  ].join("; ");
}

let context: McpUiHostContext = {};
let bridge: AppBridge | undefined;

async function render(options: RenderOptions): Promise<void> {
  const iframe = document.createElement("iframe");
  iframe.setAttribute("sandbox", "allow-scripts");
  document.getElementById("slot")!.append(iframe);
  context = { theme: options.theme, displayMode: "inline" };
  bridge = new AppBridge(
    null,
    { name: "incident-desk-test-host", version: "1.0.0" },
    { serverTools: {}, serverResources: {}, logging: {} },
    { hostContext: context },
  );
  const initialized = new Promise<void>((resolve) => bridge!.addEventListener("initialized", () => resolve()));
  bridge.addEventListener("sizechange", ({ height }) => {
    if (height) iframe.style.height = `${height}px`;
  });
  await bridge.connect(new PostMessageTransport(iframe.contentWindow!, iframe.contentWindow!));
  const meta = `<meta http-equiv="Content-Security-Policy" content="${cspOf(options.csp)}">`;
  iframe.srcdoc = options.html.replace(/<head>/i, `<head>${meta}`);
  await initialized;
  await bridge.sendToolInput({ arguments: options.arguments });
  await bridge.sendToolResult(options.result as Parameters<AppBridge["sendToolResult"]>[0]);
}

function setTheme(theme: "light" | "dark"): void {
  context = { ...context, theme };
  bridge!.setHostContext(context);
}

(window as unknown as { harness: object }).harness = { render, setTheme };
