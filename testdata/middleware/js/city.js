// city: the JavaScript middleware of maiden's tests (testkit.Middleware
// "js/city"), the same decisions as the Go one (../city/main.go): before the
// tool runs, input.city "Atlantis" is rejected and "paris" rewritten to
// "Paris"; everything else passes, and so does every output and every
// failure. An event of an unknown phase is an error (the host refuses the
// call).
import { log } from 'maiden:middleware/host@0.1.0';

export function describe() {
  return 'Refuses Atlantis and capitalises Paris.';
}

export function handle(event) {
  const ev = JSON.parse(event);
  if (ev.phase === 'after' || ev.phase === 'failed') return { verdict: 'pass' };
  if (ev.phase !== 'before') throw new Error(`unknown phase ${JSON.stringify(ev.phase)}`);
  log('info', `${ev.agent} called ${ev.tool} with ${ev.rendered}`);
  const input = ev.input ?? {};
  if (input.city === 'Atlantis') {
    return { verdict: 'reject', message: 'Atlantis is not a city the weather service knows' };
  }
  if (input.city === 'paris') {
    return { verdict: 'rewrite', input: { ...input, city: 'Paris' } };
  }
  return { verdict: 'pass' };
}
