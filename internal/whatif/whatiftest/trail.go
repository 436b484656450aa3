// Package whatiftest makes audit trails for what-if replays: records
// written in the shapes the call path writes them (internal/callaudit's
// Record and Fetch, internal/secret's RevealRecord, the approve layer's
// verdicts), each decision made by decide.Decide on the agent's wallet
// pinned from the given cards, as the call path makes it. It is
// test-only: internal/whatif's exactness test replays its trails, and
// Store writes one into a real state store through the store's own API,
// for the end-to-end benchmark of maiden audit whatif.
//
//	tr := whatiftest.NewTrail(t, cs, now)
//	tr.Call("research", "pay", "--to=alice")
//	for _, rec := range tr.Recs { replay.Add(rec) }
package whatiftest

import (
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/cards"
	"github.com/maiden-run/maiden/internal/decide"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/whatif"
)

// The audit kinds a trail writes: the ones internal/whatif reads.
const (
	KindCallAdmitted = whatif.KindCallAdmitted
	KindCallRefused  = whatif.KindCallRefused
	KindFetch        = whatif.KindFetch
	KindReveal       = whatif.KindReveal
	KindApproval     = whatif.KindApproval
)

// Trail records decisions as the call path does: each decided by
// decide.Decide on the agent's wallet pinned from Cards at At, and
// written in the shape of its record.
type Trail struct {
	// T fails the test on a grant or rendering that does not parse (nil:
	// a panic).
	T     testing.TB
	Cards []cards.Card
	Recs  []api.AuditRecord
	At    time.Time
	// Plans are the calls CallWith recorded, by the seq of their record,
	// when not nil: what a test records again on other cards.
	Plans map[int64]Plan
	// Bindings are the bindings (whatif.BindingKey) the approve layers
	// ApproveLayer recorded asked under, by the seq of the call's record
	// and of the request's, when not nil.
	Bindings map[int64]string
	wallets  map[string]*cards.Wallet // pinned on first need: the cards do not change
}

// NewTrail is an empty trail over cs, its wallets pinned at at.
func NewTrail(t testing.TB, cs []cards.Card, at time.Time) *Trail {
	return &Trail{T: t, Cards: cs, At: at}
}

func (tr *Trail) fatalf(format string, args ...any) {
	if tr.T == nil {
		panic(fmt.Sprintf(format, args...))
	}
	tr.T.Helper()
	tr.T.Fatalf(format, args...)
}

// Wallet is agent's wallet, pinned once.
func (tr *Trail) Wallet(agent string) *cards.Wallet {
	if w := tr.wallets[agent]; w != nil {
		return w
	}
	if tr.wallets == nil {
		tr.wallets = map[string]*cards.Wallet{}
	}
	var held []cards.Card
	for _, c := range tr.Cards {
		if c.Holder == agent {
			held = append(held, c)
		}
	}
	tr.wallets[agent] = cards.NewWallet(agent, tr.At, held)
	return tr.wallets[agent]
}

// Add appends a record of kind with body (encoded as JSON).
func (tr *Trail) Add(kind, agent, tool string, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		tr.fatalf("%v", err)
	}
	tr.Recs = append(tr.Recs, api.AuditRecord{Seq: int64(len(tr.Recs) + 1), At: tr.At, Kind: kind, Actor: "agent:" + agent, Agent: agent, Tool: tool, Body: b})
}

// Recorded is a call's decision as its record keeps it (the root's
// recordedDecision): an allowed one without its rule and target.
func Recorded(d cards.Decision) api.Decision {
	if d.Allow {
		return api.Decision{Allow: true, Card: d.Card, Bound: d.Bound, Grant: d.GrantText(), Fix: d.Fix, Wallet: d.Wallet, Component: d.Asked.Component}
	}
	return d.API()
}

// Call records a call of tool with the canonical rendering rendered.
func (tr *Trail) Call(agent, tool, rendered string) bool { return tr.CallOf(agent, tool, rendered, "") }

// CallOf records a call of tool running the component comp ("" not
// known); a file built-in's fs decision on its path too, once its
// tool:invoke allowed it (CallWith).
func (tr *Trail) CallOf(agent, tool, rendered, comp string) bool {
	c, err := grant.ParseRendering(rendered)
	if err != nil {
		tr.fatalf("rendering %q: %v", rendered, err)
	}
	target := grant.CommandTarget(tool, c.Command, c.Args, c.Positionals)
	target.Component = comp
	b := decide.Basis{Wallet: tr.Wallet(agent)}
	d := decide.Decide(b, decide.Invoke(target))
	ok := d.Allow
	rd := Recorded(d)
	body := map[string]any{"rendered": rendered, "decision": &rd}
	if verb := fileVerb(tool); verb != "" && ok {
		fs := tr.fileDecision(b, verb, rendered)
		body["fs"], ok = []api.Decision{fs}, fs.Allow
	}
	kind := KindCallAdmitted
	if !ok {
		kind = KindCallRefused
	}
	tr.Add(kind, agent, tool, body)
	return ok
}

// Preopen is a directory a session's boundary offers a call's tool, and
// whether writable.
type Preopen struct {
	Dir   string
	Write bool
}

// Plan is a call as the pipeline runs it: the agent's input (Rendered[0])
// and each input a middleware layer rewrote it into, in a session whose
// boundary offers Dirs.
type Plan struct {
	Agent, Tool string
	Comp        string // the component the tool runs ("" not known)
	Rendered    []string
	Dirs        []Preopen
	// Credential is the secret an imported tool's import sends its
	// server ("" for none): the call path asks secret:use of it once the
	// agent's own input's tool:invoke allowed the call.
	Credential string
}

// CallWith records p as the pipeline decides and records it: each
// input's tool:invoke until one refuses (the refused record names the
// input refused and keeps the decisions on the inputs before it:
// before_rewrite), an import's credential's secret:use right after the
// agent's own input's (authorize: a denial refuses the call there, before
// any rewrite; every later record of the call keeps it as secret_use),
// then the fs decisions of the session's preopens
// (session.CardPreopens: each directory's fs:read DIR/**, then its
// fs:write DIR/** when read and writable), in the call-admitted record;
// a file built-in's (fs_read, fs_list: fs:read PATH; fs_write: fs:write
// PATH, its --path argument) instead, which refuses the call when denied
// (session.Gate.Hold; the call-refused record keeps it). It returns the
// call's outcome: "refused", or "ran" with each fs decision's.
func (tr *Trail) CallWith(p Plan) string {
	b := decide.Basis{Wallet: tr.Wallet(p.Agent)}
	var before []map[string]any
	var last api.Decision
	var use *api.Decision // the credential's secret:use, once asked
	body := func(m map[string]any) map[string]any {
		if use != nil {
			m["secret_use"] = use
		}
		return m
	}
	for i, r := range p.Rendered {
		c, err := grant.ParseRendering(r)
		if err != nil {
			tr.fatalf("rendering %q: %v", r, err)
		}
		target := grant.CommandTarget(p.Tool, c.Command, c.Args, c.Positionals)
		target.Component = p.Comp
		d := decide.Decide(b, decide.Invoke(target))
		if i > 0 {
			before = append(before, map[string]any{"rendered": p.Rendered[i-1], "decision": last})
		}
		last = Recorded(d)
		if d.Allow && i == 0 && p.Credential != "" {
			u := decide.Decide(b, decide.Use(p.Credential))
			a := u.API()
			if u.Allow {
				a.Rule = "" // as the record keeps an allowed one: its card, bound, grant and target
			}
			use = &a
			if !u.Allow {
				tr.Add(KindCallRefused, p.Agent, p.Tool, body(map[string]any{"rendered": r, "decision": &last}))
				if tr.Plans != nil {
					tr.Plans[tr.Recs[len(tr.Recs)-1].Seq] = p
				}
				return "refused"
			}
		}
		if !d.Allow {
			tr.Add(KindCallRefused, p.Agent, p.Tool, body(map[string]any{"rendered": r, "decision": &last, "before_rewrite": before}))
			if tr.Plans != nil {
				tr.Plans[tr.Recs[len(tr.Recs)-1].Seq] = p
			}
			return "refused"
		}
	}
	if verb := fileVerb(p.Tool); verb != "" {
		fs := []api.Decision{tr.fileDecision(b, verb, p.Rendered[len(p.Rendered)-1])}
		kind, out := KindCallAdmitted, "ran"
		if !fs[0].Allow {
			kind, out = KindCallRefused, "refused"
		}
		tr.Add(kind, p.Agent, p.Tool, map[string]any{"rendered": p.Rendered[len(p.Rendered)-1], "decision": &last, "before_rewrite": before, "fs": fs})
		if tr.Plans != nil {
			tr.Plans[tr.Recs[len(tr.Recs)-1].Seq] = p
		}
		return out
	}
	out := "ran"
	var fs []api.Decision
	for _, o := range p.Dirs {
		verbs := []string{"read", "write"}
		if !o.Write {
			verbs = verbs[:1]
		}
		for _, verb := range verbs {
			d := decide.Decide(b, decide.AccessTree(verb, o.Dir))
			a := d.API()
			if d.Allow {
				a.Rule = "" // as the record keeps an allowed one: its card, bound, grant and target
			}
			fs = append(fs, a)
			out += fmt.Sprintf(" %s=%v", a.Target, d.Allow)
			if !d.Allow {
				break // not writable when not readable
			}
		}
	}
	tr.Add(KindCallAdmitted, p.Agent, p.Tool, body(map[string]any{"rendered": p.Rendered[len(p.Rendered)-1], "decision": &last, "before_rewrite": before, "fs": fs}))
	if tr.Plans != nil {
		tr.Plans[tr.Recs[len(tr.Recs)-1].Seq] = p
	}
	return out
}

// fileVerb is the fs verb a file built-in's path needs, "" for another
// tool.
func fileVerb(tool string) string {
	switch tool {
	case "fs_read", "fs_list":
		return "read"
	case "fs_write":
		return "write"
	}
	return ""
}

// fileDecision is a file built-in's fs decision on the --path of its
// rendering, as the call's record keeps it.
func (tr *Trail) fileDecision(b decide.Basis, verb, rendered string) api.Decision {
	d := decide.Decide(b, decide.Access(verb, tr.pathOf(rendered)))
	a := d.API()
	if d.Allow {
		a.Rule = ""
	}
	return a
}

// pathOf is the --path argument of a file built-in's rendering.
func (tr *Trail) pathOf(rendered string) string {
	c, err := grant.ParseRendering(rendered)
	if err != nil {
		tr.fatalf("rendering %q: %v", rendered, err)
	}
	for _, a := range c.Args {
		if a.Name == "path" {
			return a.Value
		}
	}
	tr.fatalf("rendering %q has no --path", rendered)
	return ""
}

// Fetch records an http-fetch of host:port with credential cred ("" for
// none), decided as callegress's authorizer does.
func (tr *Trail) Fetch(agent, tool, host string, port int, cred string) bool {
	b := decide.Basis{Wallet: tr.Wallet(agent)}
	d := decide.Decide(b, decide.Connect(host, port))
	ds := []api.Decision{d.API()}
	if d.Allow && cred != "" {
		d = decide.Decide(b, decide.Use(cred))
		ds = append(ds, d.API())
	}
	tr.Add(KindFetch, agent, tool, map[string]any{"method": "GET", "credential": cred, "decisions": ds,
		"host": fmt.Sprintf("%s:%d", host, port), "path": "/", "allowed": d.Allow})
	return d.Allow
}

// Tunnel records a CONNECT a wrapped CLI sent to maiden's egress proxy,
// as the gate asks it (network:connect HOST:PORT; a tunnel carries no
// credential) and internal/callaudit's TunnelBody writes it.
func (tr *Trail) Tunnel(agent, tool, host string, port int) bool {
	d := decide.Decide(decide.Basis{Wallet: tr.Wallet(agent)}, decide.Connect(host, port))
	body := map[string]any{"method": "CONNECT", "host": net.JoinHostPort(host, fmt.Sprint(port)), "allowed": d.Allow, "rule": "cards", "decisions": []api.Decision{d.API()}}
	if !d.Allow {
		body["reason"] = d.Reason
	}
	tr.Add(KindFetch, agent, tool, body)
	return d.Allow
}

// Reveal records a reveal of secret by tool, whose binding reveals it
// when inBinding.
func (tr *Trail) Reveal(agent, tool, secret string, inBinding bool) bool {
	bd := decide.Binding{Tool: tool, Secrets: []string{secret}}
	if inBinding {
		bd.Reveal = []string{secret}
	}
	d := decide.Decide(decide.Basis{Wallet: tr.Wallet(agent), Binding: bd}, decide.Reveal(secret))
	a := d.API()
	outcome := "denied"
	if d.Allow {
		outcome = "allowed"
	}
	tr.Add(KindReveal, agent, tool, map[string]any{"secret": secret, "outcome": outcome, "reason": d.Reason, "decision": &a})
	return d.Allow
}

// Approved is a call's approve layer as ApproveLayer records it.
type Approved struct {
	Agent, Tool string
	// Inputs are the agent's input and each a middleware rewrote it into
	// (each allowed by the cards); the approve layer sits after At
	// rewrites, and asks about Inputs[At].
	Inputs []string
	At     int
	// ToolDigest and Policy are the tool's code and policy the call ran
	// under: the layer counts the always-cards bound to them (their
	// whatif.BindingKey) and no other bound ones.
	ToolDigest, Policy string
	// Request is the ID of the approval request a no makes.
	Request string
}

// ApproveLayer records a call whose approve layer (one that may approve
// always) asked approve:always about a.Inputs[a.At] on the agent's wallet
// less the always-cards bound to another binding, as the pipeline
// records it: an always-card's yes is a standing approval (a call-admitted
// record whose approve verdict, pass, names the card); a no asks a human
// (the request's approval record, then the call's call-refused record
// whose verdict, pending, names the request). Each verdict carries the
// answer as Decide returned it. It returns the answer (false, and no
// verdict, when the cards refuse an input before the layer asked).
func (tr *Trail) ApproveLayer(a Approved) bool {
	w := tr.Wallet(a.Agent)
	b := decide.Basis{Wallet: w}
	var mw []map[string]any
	var before []map[string]any
	var last api.Decision
	var always cards.Decision
	for i, r := range a.Inputs {
		c, err := grant.ParseRendering(r)
		if err != nil {
			tr.fatalf("rendering %q: %v", r, err)
		}
		if i > 0 {
			before = append(before, map[string]any{"rendered": a.Inputs[i-1], "decision": last})
			mw = append(mw, map[string]any{"rule": fmt.Sprintf("middleware[%d]", i), "use": "rewrite-args", "verdict": "rewrite", "detail": r})
		}
		d := decide.Decide(b, decide.Invoke(grant.CommandTarget(a.Tool, c.Command, c.Args, c.Positionals)))
		last = Recorded(d)
		if !d.Allow {
			// Refused before (or at) the layer: a refused call's record,
			// no verdict of it.
			body := map[string]any{"rendered": r, "decision": &last, "middleware": mw}
			if len(before) > 0 {
				body["before_rewrite"] = before
			}
			tr.Add(KindCallRefused, a.Agent, a.Tool, body)
			return false
		}
		if i != a.At {
			continue
		}
		t := grant.AlwaysTarget(a.Tool, c.Args)
		if len(c.Command) > 0 || len(c.Positionals) > 0 {
			t = grant.AlwaysCommandTarget(a.Tool, c.Command, c.Args, c.Positionals)
		}
		key := whatif.BindingKey(a.ToolDigest, a.Policy)
		always = decide.Decide(decide.Basis{Wallet: w.BoundTo(key)}, decide.AlwaysApprove(t))
		ad := always.API()
		v := map[string]any{"rule": "approve", "use": "approve", "decision": &ad}
		if always.Allow {
			v["verdict"], v["detail"] = "pass", "approved always by card "+always.Card
		} else {
			v["verdict"], v["detail"] = "pending", a.Request
			tr.Add(KindApproval, a.Agent, a.Tool, map[string]any{"event": "requested", "approval": a.Request, "rule": "approve",
				"reason": "a human decides", "rendered": r, "tool_digest": a.ToolDigest, "policy": json.RawMessage(a.Policy)})
			if tr.Bindings != nil {
				tr.Bindings[tr.Recs[len(tr.Recs)-1].Seq] = key
			}
		}
		mw = append(mw, v)
		if !always.Allow {
			break
		}
	}
	body := map[string]any{"rendered": a.Inputs[len(a.Inputs)-1], "decision": &last, "middleware": mw}
	if len(before) > 0 {
		body["before_rewrite"] = before
	}
	kind := KindCallAdmitted
	if !always.Allow {
		kind, body["kind"], body["approval"] = KindCallRefused, "pending", a.Request
		body["rendered"] = a.Inputs[a.At] // the input it was refused at, and those before it
		if a.At == 0 {
			delete(body, "before_rewrite")
		}
	}
	tr.Add(kind, a.Agent, a.Tool, body)
	if tr.Bindings != nil {
		tr.Bindings[tr.Recs[len(tr.Recs)-1].Seq] = whatif.BindingKey(a.ToolDigest, a.Policy)
	}
	return always.Allow
}
