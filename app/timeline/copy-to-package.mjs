// Ships the built view as package data, so pip, uvx and the frozen executables need no Node.
import { copyFileSync } from "node:fs";

copyFileSync("dist/timeline.html", "../../incident_desk/data/timeline.html");
console.log("copied to incident_desk/data/timeline.html");
