package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/grant"
	"github.com/maiden-run/maiden/internal/mcphub"
	"github.com/maiden-run/maiden/internal/mcpimport"
	"github.com/maiden-run/maiden/internal/safetext"
	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/toolinfo"
)

// This file is MCP imports ([mcp.NAME], issue 13): maiden as a client of
// someone else's MCP server (internal/mcpimport), whose tools it serves as
// NAME.TOOL. An agent binds the import by NAME; each call goes through the
// same stages as a tool (exposure, the cards on tool:invoke NAME.TOOL and
// its arguments, the upstream's input schema checked by maiden, middleware,
// approvals, the audit trail) and is then sent upstream. An upstream that
// dies is restarted with backoff; its tools answer kind unavailable
// meanwhile.

// importBackend is the backend of the tools of imported MCP servers. It
// holds what it needs of the Host (newBackends), not the Host.
type importBackend struct {
	exposures *exposures   // each tool as exposed, and its compiled egress policy (resolveTool)
	upstreams *upstreams   // the imported servers (internal/mcphub)
	pins      *importPins  // the accepted definitions (pins.go)
	schemas   *toolSchemas // the upstreams' input schemas, compiled
	gate      *egress.Gate // redaction
	// lookupSecret resolves the credential an upstream holds, which its
	// answers are redacted of (Host.lookupSecret).
	lookupSecret func(name string) (string, bool)
	log          *slog.Logger
}

// resolve exposes NAME.TOOL as the agent binds NAME, whose middleware it
// gets.
func (b *importBackend) resolve(_ context.Context, cfg *config.Config, call Call, _ time.Time) (resolved, *ToolError, error) {
	bind := call.Tool
	if imp, _, ok := config.ImportOf(bind); ok {
		bind = imp
	}
	return resolveTool(b.exposures, cfg, call, bind)
}

func (b *importBackend) carded() bool                { return true }
func (b *importBackend) secretHandles() bool         { return false } // the upstream gets the input as sent
func (b *importBackend) preopens() bool              { return false }
func (b *importBackend) files() bool                 { return false }
func (b *importBackend) pooled() bool                { return false }
func (b *importBackend) confined(t config.Tool) bool { return len(t.MCP.Command) > 0 }
func (b *importBackend) typedCommands(ToolInfo) bool { return false }
func (b *importBackend) parse(context.Context, *invocation) (parsed, *ToolError, error) {
	return parsed{}, nil, nil
}

// credential is the import's credential: mcphub attaches it to every
// request to the import's server, outside the egress gate, so the
// agent's cards are asked secret:use of it before each call (authorize).
func (b *importBackend) credential(t *config.Tool) (string, string) {
	if t.MCP == nil || t.MCP.Credential == "" {
		return "", ""
	}
	imp, _, _ := config.ImportOf(t.Name)
	return t.MCP.Credential, "import " + imp
}

// open finds the tool on its upstream and checks the input against the
// upstream's schema, under the import's timeout.
func (b *importBackend) open(ctx context.Context, inv *invocation, _ bool) (loaded, *ToolError, error) {
	li, upstreamTool, refusal, err := b.load(ctx, inv)
	if err != nil {
		return loaded{}, nil, err
	}
	found := loaded{digest: li.Digest, upstreamTool: upstreamTool} // a refused call's record names the definition found
	if refusal != nil {
		return found, refusal, nil
	}
	schema := b.schemas.in.get(li.Digest, li.Schema)
	if schema.err != nil {
		return found, &ToolError{Kind: KindInvalid, Message: "the MCP server's input schema: " + schema.err.Error()}, nil
	}
	if err := inv.validateInput(ctx, schema, inv.tool.Timeout); err != nil {
		if ctx.Err() != nil {
			return found, nil, ctx.Err()
		}
		return found, &ToolError{Kind: KindInput, Message: err.Error()}, nil
	}
	found.schema = schema
	return found, nil, nil
}

func (b *importBackend) reparse(_ *invocation, doc any) ([]grant.Arg, *command.Invocation, error) {
	args, err := grant.RenderJSONInput(doc)
	return args, nil, err
}

// identity is the SHA-256 of its upstream (command, environment,
// directory, URL) and of the input schema the upstream reports for it.
func (b *importBackend) identity(inv *invocation) string {
	m := inv.tool.MCP
	return "mcp:" + digestOf(struct {
		Command []string
		Env     []string
		Dir     string
		URL     string
		Schema  string
	}{m.Command, m.Env, m.Dir, m.URL, inv.toolDigest})
}

func (b *importBackend) approvalPolicy(inv *invocation) ApprovalPolicy {
	out, m := basePolicy(inv.cfg, *inv.tool), inv.tool.MCP
	out.ReadPaths, out.WritePaths, out.Unconfined, out.Env = m.ReadPaths, m.WritePaths, m.Unconfined, envNames(m.Env)
	out.Upstream, out.Credential = m.URL, m.Credential
	if out.Upstream == "" {
		out.Upstream = strings.Join(m.Command, " ")
	}
	if m.Credential != "" && !strings.Contains(","+strings.Join(out.Secrets, ",")+",", ","+m.Credential+",") {
		out.Secrets = append(out.Secrets, m.Credential)
	}
	return out
}

func (b *importBackend) describe(ctx context.Context, _ *config.Config, t config.Tool) ([]ToolInfo, error) {
	infos, _, err := b.tools(ctx, t)
	return infos, err
}

// check starts the upstream and reports a tool refused by its pin (never
// accepted, or changed since) as a warning: the import works, that tool
// will not.
func (b *importBackend) check(ctx context.Context, t config.Tool) (LoadReport, error) {
	rep := LoadReport{Tool: "mcp." + t.Name}
	infos, _, err := b.tools(ctx, t)
	switch {
	case err != nil:
		rep.Err = err
	case len(infos) == 0:
		rep.Err = b.whyNoTools(ctx, t)
	}
	for _, info := range infos {
		if info.Error != nil && info.Error.Kind == KindDenied {
			rep.Warnings = append(rep.Warnings, info.Error.Message)
		}
	}
	return rep, nil
}

// whyNoTools says why import t lists no tools: the server did not start
// (the cause, and the last lines it wrote on stderr, where a program says
// why it could not start: an unreadable file under confinement, a missing
// module), or it is up and offers none. One line per stderr line, after
// the first.
func (b *importBackend) whyNoTools(ctx context.Context, t config.Tool) error {
	u, err := b.upstreams.upstream(ctx, t.Name, t.MCP)
	if err != nil {
		return err
	}
	down := u.Down()
	if down == nil {
		return fmt.Errorf("the MCP server %q is up but offers no tools", t.Name)
	}
	msg := fmt.Sprintf("the MCP server %q did not start", t.Name)
	var ue *mcpimport.UnavailableError
	if errors.As(down, &ue) && ue.Cause != nil {
		msg += ": " + ue.Cause.Error()
	}
	if tail := u.StderrTail(); len(tail) > 0 {
		msg += "; the last lines it wrote on stderr:"
		for _, l := range tail {
			msg += "\n    " + l
		}
	} else if len(t.MCP.Command) > 0 {
		msg += " (it wrote nothing on stderr)"
	}
	return errors.New(msg)
}

// commandSpec: an import (or its tool) has no command description that
// CommandHelp shows.
func (b *importBackend) commandSpec(_ context.Context, t config.Tool) (*command.Spec, error) {
	return nil, fmt.Errorf("%w %q", ErrUnknownTool, t.Name)
}

// importTool is the exposure of an imported tool: the import's table with
// the tool's full name (importBackend.load finds its upstream name).
func importTool(cfg *config.Config, name string) (config.Tool, bool) {
	imp, _, ok := config.ImportOf(name)
	if !ok {
		return config.Tool{}, false
	}
	t, ok := cfg.Tool(imp)
	if !ok || t.MCP == nil {
		return config.Tool{}, false
	}
	t.Name = name
	return t, true
}

// upstreams are the Host's imported servers (internal/mcphub), made on
// first need with opts (Host.hubOptions, given in New).
type upstreams struct {
	once sync.Once
	hub  *mcphub.Hub
	opts mcphub.Options
}

// errRetired: the import a call (or a listing) was made for is no longer
// the configuration's: a reload removed or changed its [mcp.NAME] table.
var errRetired = mcphub.ErrRetired

// get is the hub of the upstreams, made on first need.
func (u *upstreams) get() *mcphub.Hub {
	u.once.Do(func() { u.hub = mcphub.New(u.opts) })
	return u.hub
}

// hubOptions are what the Host's upstreams need of it: an import is
// current while the configuration in force has the same [mcp.NAME] table;
// the host's secrets; the proof of confinement; the logger.
func (h *Host) hubOptions() mcphub.Options {
	cfg, probe := &h.cfg, &h.probe
	return mcphub.Options{
		Current: func(name string, imp *config.MCPImport) bool {
			return sameImport(cfg.Load(), name, imp)
		},
		Secret: h.lookupSecret,
		Confinement: func(ctx context.Context) error {
			_, err := probe.confinement(ctx)
			return err
		},
		Logger: h.log,
	}
}

// hub is the Host's upstreams.
func (h *Host) hub() *mcphub.Hub { return h.imports.get() }

// sameImport reports whether cfg's [mcp.NAME] table is imp.
func sameImport(cfg *config.Config, name string, imp *config.MCPImport) bool {
	t, ok := cfg.Tool(name)
	return ok && t.MCP != nil && reflect.DeepEqual(t.MCP, imp)
}

// upstream returns the running upstream of import name, started if need be
// (mcphub.Hub.Get).
func (u *upstreams) upstream(ctx context.Context, name string, imp *config.MCPImport) (*mcpimport.Upstream, error) {
	up, err := u.get().Get(ctx, name, imp)
	if errors.Is(err, api.ErrClosed) {
		return nil, ErrClosed
	}
	return up, err
}

// retireImports retires the upstreams whose [mcp.NAME] table cfg no longer
// has as it was (SetConfig, after storing cfg).
func (h *Host) retireImports(cfg *config.Config) {
	h.hub().Retire(func(name string, imp *config.MCPImport) bool { return sameImport(cfg, name, imp) })
}

// OnToolsChanged registers f, called when an imported server's tool list
// changes (front ends tell their clients: notifications/tools/list_changed).
func (h *Host) OnToolsChanged(f func()) { h.hub().OnChange(f) }

// importedTool is an imported tool as the host serves it: the upstream's
// tool, the definition served (the accepted pin), and why a call of it is
// refused (nil when it may run).
type importedTool struct {
	mcphub.ExposedTool
	served  mcpimport.Pin
	refusal *ToolError
}

// exposedTools names the upstream's tools NAME.TOOL (collisions refused and
// logged), sorted by name.
func exposedTools(imp string, tools []mcpimport.Tool, log *slog.Logger) []importedTool {
	exposed := mcphub.Exposed(imp, tools, log)
	out := make([]importedTool, len(exposed))
	for i, x := range exposed {
		out[i] = importedTool{ExposedTool: x}
	}
	return out
}

// tools lists import t's tools as NAME.TOOL, with their upstream names;
// none when a reload has just removed or changed the import (the listing
// was made on the configuration before it).
func (b *importBackend) tools(ctx context.Context, t config.Tool) ([]ToolInfo, map[string]importedTool, error) {
	infos, byExposed, _, err := b.toolsOf(ctx, t)
	if errors.Is(err, errRetired) {
		return nil, nil, nil
	}
	return infos, byExposed, err
}

// toolsOf lists import t's tools. Each is served as an operator
// accepted it (pins.go): a tool whose definition changed since is listed
// with its accepted definition and an Error (kind denied) saying what
// changed; one never accepted is listed with an Error and no definition
// (front ends do not serve it). The title and description are escaped
// (safetext.Text): no escape sequence or bidirectional control of an
// upstream's reaches an agent or a terminal through them. up reports
// whether the upstream is up.
func (b *importBackend) toolsOf(ctx context.Context, t config.Tool) (infos []ToolInfo, byExposed map[string]importedTool, up bool, err error) {
	u, err := b.upstreams.upstream(ctx, t.Name, t.MCP)
	if err != nil {
		return nil, nil, false, err
	}
	byExposed = map[string]importedTool{}
	for _, x := range exposedTools(t.Name, u.Tools(), b.log) {
		x.served, x.refusal = b.pins.check(t.Name, t.MCP, x.Full, x.Tool)
		byExposed[x.Full] = x
		info := ToolInfo{Name: x.Full, Policy: toolinfo.PolicyOf(t), Hints: toolinfo.HintsOf(t), Error: x.refusal}
		if x.served.Digest != "" {
			// accepted (as it is now, or before the change refused)
			info.Title, info.Description = safetext.Text(x.served.Title), safetext.Text(x.served.Description)
			info.InputSchema = safetext.JSON(string(x.served.InputSchema)) // the same schema, no raw bidi controls
			info.Digest = schemaDigest(x.Full, x.served.InputSchema)
			// The upstream's output schema is not served: it is not
			// pinned (its descriptions would reach agents unreviewed, and
			// change whenever the upstream likes), and maiden holds no
			// output to it (a client that checks structuredContent
			// against it would fail the call).
		}
		if !x.Available && x.refusal == nil {
			info.Error = &ToolError{Kind: KindUnavailable, Message: fmt.Sprintf("the MCP server %q is down; maiden restarts it", t.Name)}
		}
		infos = append(infos, info)
	}
	return infos, byExposed, u.Available(), nil
}

func schemaDigest(name string, schema []byte) string {
	sum := sha256.Sum256(append([]byte("mcp\x00"+name+"\x00"), schema...))
	return "mcp:" + hex.EncodeToString(sum[:])
}

// run sends a call to its upstream, under the import's timeout_ms
// (mcphub.Hub.Call).
func (b *importBackend) run(ctx context.Context, inv *invocation) (ran, *ToolError, error) {
	imp, _, _ := config.ImportOf(inv.tool.Name)
	if inv.upstreamTool == "" { // load found the import retired
		return ran{}, &ToolError{Kind: KindUnavailable, Message: mcphub.RetiredMessage(imp)}, nil
	}
	// The upstream gets the call's input (and the tool's name), as a
	// server an http-fetch reaches gets a request: bytes_out pays for it
	// before it goes, and counts it sent or not once the call was made (a
	// bound that errs high).
	sent := int64(len(inv.upstreamTool) + len(inv.call.Input))
	if refusal, failed := inv.budget.Pay(ctx, sent); failed {
		return ran{}, nil, fmt.Errorf("%w: %s", ErrState, refusal)
	} else if refusal != "" {
		return ran{}, &ToolError{Kind: KindDenied, Message: refusal}, nil
	}
	gate := b.gate.Redactor(inv.policy)
	redact := gate
	if name := inv.tool.MCP.Credential; name != "" {
		// The upstream holds the credential maiden sends it: whatever it
		// echoes back of it (output, logs, errors) is redacted like a
		// tool's secrets.
		if v, ok := b.lookupSecret(name); ok {
			cred := mcphub.CredentialRedactor(name, v)
			redact = func(s string) string { return gate(cred(s)) }
		}
	}
	var onProgress func(mcpimport.Progress)
	relay := inv.progressRelay(redact)
	if relay != nil {
		onProgress = func(p mcpimport.Progress) {
			relay.Report(Progress{Progress: p.Progress, Total: p.Total, Message: p.Message})
		}
	}
	uctx, end := inv.upstreamSpan(ctx, imp, inv.upstreamTool)
	out, err := b.upstreams.get().Call(uctx, mcphub.Call{
		Import: imp, Table: inv.tool.MCP, Exposed: inv.tool.Name, Tool: inv.upstreamTool, Input: []byte(inv.call.Input),
		Timeout: inv.tool.Timeout, Redact: redact, OnLog: inv.call.OnLog, OnProgress: onProgress,
	})
	inv.budget.Sent(sent)
	switch {
	case err != nil:
		end("error")
	case out.Failure != nil:
		end(string(out.Failure.Kind))
	default:
		end("")
	}
	relay.Finish()
	r := ran{logs: out.Logs}
	switch {
	case errors.Is(err, api.ErrClosed):
		return r, nil, ErrClosed
	case err != nil:
		return r, nil, err
	case out.Failure != nil:
		return r, &ToolError{Kind: out.Failure.Kind, Message: out.Failure.Message}, nil
	}
	r.output = out.Output
	return r, nil, nil
}

// load finds an imported tool's upstream name and input schema, for the
// schema check. A tool refused by its pin, or unknown while its upstream
// is down (not listed yet), is refused with a ToolError.
func (b *importBackend) load(ctx context.Context, inv *invocation) (sandbox.LoadInfo, string, *ToolError, error) {
	imp, _, _ := config.ImportOf(inv.tool.Name)
	t, ok := inv.cfg.Tool(imp)
	if !ok {
		return sandbox.LoadInfo{}, "", nil, fmt.Errorf("%w %q", ErrUnknownTool, inv.tool.Name)
	}
	_, byExposed, up, err := b.toolsOf(ctx, t)
	if errors.Is(err, errRetired) {
		// A reload removed or changed the import since the call began:
		// nothing is sent anywhere. run answers unavailable
		// (inv.upstreamTool stays "").
		return sandbox.LoadInfo{Info: sandbox.Info{World: sandbox.WorldTool, Schema: "{}"}, Digest: "mcp:retired"}, "", nil, nil
	} else if err != nil {
		return sandbox.LoadInfo{}, "", nil, err
	}
	x, ok := byExposed[inv.tool.Name]
	switch {
	case !ok && !up:
		// Down (restarting, or never up since maiden started): whether it
		// still offers the tool is not known yet.
		return sandbox.LoadInfo{}, "", &ToolError{Kind: KindUnavailable, Message: b.upstreamDown(imp, inv.tool.MCP)}, nil
	case !ok:
		return sandbox.LoadInfo{}, "", nil, fmt.Errorf("%w %q: the MCP server %q does not offer it (now)", ErrUnknownTool, inv.tool.Name, imp)
	case x.refusal != nil:
		return sandbox.LoadInfo{}, "", x.refusal, nil
	}
	return sandbox.LoadInfo{Info: sandbox.Info{World: sandbox.WorldTool, Description: x.Description, Schema: string(x.InputSchema)}, Digest: schemaDigest(inv.tool.Name, x.InputSchema)}, x.Name, nil, nil
}

// upstreamDown says why import imp cannot be called now, in the words of
// its upstream (the cause and the next attempt).
func (b *importBackend) upstreamDown(imp string, mcp *config.MCPImport) string {
	msg := fmt.Sprintf("the MCP server %q is not up; maiden restarts it", imp)
	if u, err := b.upstreams.upstream(context.Background(), imp, mcp); err == nil {
		if err := u.Down(); err != nil {
			msg = err.Error()
		}
	}
	return msg
}
