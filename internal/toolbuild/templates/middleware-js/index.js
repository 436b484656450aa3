// A maiden middleware in JavaScript: one ES module exporting describe() and
// handle(event). `maiden build` turns it into a WebAssembly component with
// componentize-js; see README.md. The operator puts it around tool calls in
// agent.toml. It has no network and no files; it may log with
// log(level, message), level "debug" | "info" | "warn" | "error" (the
// import needs the version suffix).
import { log } from "maiden:middleware/host@0.1.0";

export function describe() {
  return "Refuses Atlantis, capitalises city names and withholds outputs that mention a password.";
}

// event is JSON text: {"version":1, "phase":"before"|"after"|"failed",
// "tool", "agent", "session", "rendered", "input":{...}, "output":"..."
// (after only), "error":{"kind","message"} (failed only), "logs":[{"level",
// "source","message"}, ...] (after and failed: the tool's log lines, which
// the agent sees only if this passes)}. Return a verdict (an object or its
// JSON text); throw, and maiden refuses the call (an unknown phase does:
// a phase added later is refused, not passed).
export function handle(event) {
  const ev = JSON.parse(event);
  if (ev.phase === "before") {
    const city = ev.input?.city;
    if (city === "Atlantis") {
      return { verdict: "reject", message: "Atlantis is not on any map" };
    }
    if (typeof city === "string" && city !== "" && city.toLowerCase() === city) {
      // "paris" → "Paris". maiden checks the rewritten input against the
      // tool's schema and the agent's cards again.
      log("info", `${ev.agent}: city ${JSON.stringify(city)} capitalised`);
      return { verdict: "rewrite", input: { ...ev.input, city: city[0].toUpperCase() + city.slice(1) } };
    }
    return { verdict: "pass" };
  }
  if (ev.phase === "after" || ev.phase === "failed") {
    // A tool could log what it may not return, or fail with it: the log
    // lines and the error get the output's check. Only a reject withholds
    // log lines (a rewrite replaces the output alone), and a failure
    // cannot be rewritten.
    if ((ev.logs ?? []).some((l) => mentionsPassword(l.message))) {
      return { verdict: "reject", message: `withheld by ${ev.tool}'s middleware: its log mentioned a password` };
    }
    if (ev.phase === "failed") {
      if (mentionsPassword(ev.error?.message)) {
        return { verdict: "reject", message: `withheld by ${ev.tool}'s middleware: its error mentioned a password` };
      }
      return { verdict: "pass" };
    }
    if (mentionsPassword(ev.output)) {
      return { verdict: "rewrite", output: `[withheld by ${ev.tool}'s middleware: the output mentioned a password]` };
    }
    return { verdict: "pass" };
  }
  throw new Error(`unknown phase ${JSON.stringify(ev.phase)}`);
}

function mentionsPassword(text) {
  return String(text ?? "").toLowerCase().includes("password");
}
