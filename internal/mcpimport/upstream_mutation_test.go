package mcpimport_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/mcpimport"
)

// The tests of this file were written in the eighth mutation pass
// (docs/security-tests.md): each kills a planted bug the package's tests
// let through, by asserting the refusal the bug took away.

// mutationFlag, as this test binary's first argument, makes it a stdio MCP
// server (an init runs before any test). An argument rather than an
// environment variable, so that a server can be started with no
// environment at all.
const mutationFlag = "-maiden-mutation-upstream="

func init() {
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], mutationFlag) {
		mutationUpstream(strings.TrimPrefix(os.Args[1], mutationFlag))
		os.Exit(0)
	}
}

// mutationUpstream serves stdin and stdout. Mode "tools=N" lists N tools
// in one page; "pages" answers every tools/list with an empty page and a
// cursor to another; "env" has a tool "env" answering with its
// environment; "biglog" sends a 100 KiB log message before its tools/list
// answer (no call owns it: it goes to the operator's log).
func mutationUpstream(mode string) {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	reply := func(id json.RawMessage, result string) {
		out.WriteString(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + "}\n")
		out.Flush()
	}
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Cursor          string `json:"cursor"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &m) != nil || m.ID == nil {
			continue
		}
		switch m.Method {
		case "initialize":
			v, _ := json.Marshal(m.Params.ProtocolVersion)
			reply(m.ID, `{"protocolVersion":`+string(v)+`,"capabilities":{"tools":{}},"serverInfo":{"name":"mutation","version":"1"}}`)
		case "tools/list":
			switch {
			case strings.HasPrefix(mode, "tools="):
				n, _ := strconv.Atoi(strings.TrimPrefix(mode, "tools="))
				var b strings.Builder
				for i := range n {
					if i > 0 {
						b.WriteByte(',')
					}
					b.WriteString(`{"name":"t` + strconv.Itoa(i) + `","inputSchema":{"type":"object"}}`)
				}
				reply(m.ID, `{"tools":[`+b.String()+`]}`)
			case mode == "pages":
				next, _ := strconv.Atoi(m.Params.Cursor)
				reply(m.ID, `{"tools":[],"nextCursor":"`+strconv.Itoa(next+1)+`"}`)
			case mode == "biglog":
				out.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("L", 100<<10) + `"}}` + "\n")
				reply(m.ID, `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`)
			default:
				reply(m.ID, `{"tools":[{"name":"env","inputSchema":{"type":"object"}}]}`)
			}
		default:
			text, _ := json.Marshal(strings.Join(os.Environ(), "\n"))
			reply(m.ID, `{"content":[{"type":"text","text":`+string(text)+`}]}`)
		}
	}
}

// mutationServer makes (not starts) the upstream of mode.
func mutationServer(t *testing.T, mode string, o mcpimport.Options) *mcpimport.Upstream {
	t.Helper()
	o.Name, o.BackoffInitial = "mut", time.Hour
	o.Command = []string{os.Args[0], mutationFlag + mode}
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	u, err := mcpimport.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

// TestToolCapIsExactInOnePage: MaxTools holds for the tools of one page as
// for many: 1,000 tools in one page are listed, 1,001 refused naming the
// cap (TestToolCountBounded's pages of 2,000 pass the cap only on the
// second page).
func TestToolCapIsExactInOnePage(t *testing.T) {
	for _, c := range []struct {
		n  int
		ok bool
	}{{mcpimport.MaxTools, true}, {mcpimport.MaxTools + 1, false}} {
		u := mutationServer(t, fmt.Sprintf("tools=%d", c.n), mcpimport.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := u.Start(ctx)
		cancel()
		kept := len(u.Tools())
		switch {
		case c.ok && (err != nil || kept != c.n):
			t.Errorf("one page of %d tools: start %v, %d kept; want all listed", c.n, err, kept)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d tools", mcpimport.MaxTools))):
			t.Errorf("one page of %d tools: start %v, %d kept; want the listing refused as more than %d tools", c.n, err, kept, mcpimport.MaxTools)
		case !c.ok && kept != 0:
			t.Errorf("one page of %d tools refused, yet %d kept", c.n, kept)
		}
	}
}

// TestEndlessPagesRefused: an upstream whose every page of tools is empty
// and points to another is refused after 100 pages, naming the cap, long
// before the connect deadline.
func TestEndlessPagesRefused(t *testing.T) {
	u := mutationServer(t, "pages", mcpimport.Options{ConnectTimeout: 20 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := u.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "more than 100 pages of tools") {
		t.Fatalf("an endless listing of empty pages: start %v; want it refused as more than 100 pages", err)
	}
}

// TestCommandWithoutEnvInheritsNothing: Env is the command's complete
// environment, an empty one included: a stdio server given no Env must not
// inherit maiden's (where its secrets are, as MAIDEN_SECRET_*).
func TestCommandWithoutEnvInheritsNothing(t *testing.T) {
	const canary = "MAIDEN_SECRET_MUTATION_CANARY"
	t.Setenv(canary, "canary-value-7d1")
	u := mutationServer(t, "env", mcpimport.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := u.Call(ctx, "env", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Text, canary) || strings.Contains(res.Text, "canary-value-7d1") {
		t.Errorf("a server given no Env inherited maiden's environment (%d variables, %s among them)", len(strings.Split(res.Text, "\n")), canary)
	}
}

// TestOperatorLogMessageCut: a log message no call owns reaches the
// operator's log cut to MaxLogMessage (16 KiB), however large the
// upstream made it (here 100 KiB, under the 4 MiB message cap).
func TestOperatorLogMessageCut(t *testing.T) {
	l, logged := capturingLogger(t)
	u := mutationServer(t, "biglog", mcpimport.Options{Logger: l})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := u.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the upstream's log message never reached the operator's log", func() bool {
		return strings.Contains(logged(), `msg="MCP upstream log message"`)
	})
	for _, line := range strings.Split(logged(), "\n") {
		if strings.Contains(line, `msg="MCP upstream log message"`) {
			if n := strings.Count(line, "L"); n > mcpimport.MaxLogMessage {
				t.Errorf("a 100 KiB log message reached the operator's log with %d of its bytes; want at most %d (MaxLogMessage)", n, mcpimport.MaxLogMessage)
			}
		}
	}
}

// TestNothingLeftOfANameIsNotExposed: a tool whose name sanitises to
// nothing is refused, not exposed as "NAME." (an empty exposed name).
func TestNothingLeftOfANameIsNotExposed(t *testing.T) {
	got, errs := mcpimport.ExposedNames([]string{"...", "echo"}, nil)
	if _, ok := got[""]; ok || len(got) != 1 || got["echo"] != "echo" {
		t.Errorf("exposed %q; want only echo (the tool named ... refused)", got)
	}
	var ne *mcpimport.NameError
	if len(errs) != 1 || !errors.As(errs[0], &ne) || ne.Upstream != "..." || !strings.Contains(ne.Reason, "give it a name") {
		t.Errorf("refusals %v; want one, of ..., asking for a name", errs)
	}
}
