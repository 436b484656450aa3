package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/wit"
)

// TestReveal runs revealer, a maiden:tool@0.3.0 tool that asks reveal for
// its input handle and echoes the answer into its log and output: the
// call's RevealFunc decides, a refusal reaches the tool as err(message),
// never a trap, and the call's redactor sees what the tool echoes.
func TestReveal(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "revealer")
	var asked []string
	reveal := func(_ context.Context, handle string) (string, error) {
		asked = append(asked, handle)
		if handle == "good-handle" {
			return "s3cr3t-value", nil
		}
		return "", errors.New("no secret:reveal card")
	}
	redact := func(s string) string { return strings.ReplaceAll(s, "s3cr3t-value", "[REDACTED:K]") }

	out, err := sb.Execute(context.Background(), Call{Path: path, Limits: defaultLimits, Input: "good-handle", Reveal: reveal, Redact: redact})
	if err != nil || out.Failure != nil {
		t.Fatalf("got %+v, %v", out, err)
	}
	if out.Output != "[REDACTED:K]" {
		t.Errorf("output %q, want the revealed value redacted", out.Output)
	}
	if len(out.Logs) != 1 || out.Logs[0].Message != "[REDACTED:K]" {
		t.Errorf("logs %+v, want the revealed value redacted", out.Logs)
	}

	out, err = sb.Execute(context.Background(), Call{Path: path, Limits: defaultLimits, Input: "other", Reveal: reveal})
	if err != nil || out.Failure == nil || out.Failure.Kind != KindTool || out.Failure.Message != "no secret:reveal card" {
		t.Errorf("refused reveal: got %+v, %v; want a tool error with the refusal", out, err)
	}
	if strings.Join(asked, ",") != "good-handle,other" {
		t.Errorf("reveal was asked %q", asked)
	}

	// No RevealFunc: every handle refused.
	out, err = sb.Execute(context.Background(), Call{Path: path, Limits: defaultLimits, Input: "good-handle"})
	if err != nil || out.Failure == nil || out.Failure.Kind != KindTool || !strings.Contains(out.Failure.Message, "no secret handles") {
		t.Errorf("no RevealFunc: got %+v, %v", out, err)
	}
}

// TestRevealDeadline: a reveal that outlasts the call's deadline ends the
// call as a deadline, not with the late answer.
func TestRevealDeadline(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "revealer")
	lim := defaultLimits
	lim.Timeout = 200 * time.Millisecond
	slow := func(ctx context.Context, _ string) (string, error) {
		<-ctx.Done()
		return "late", nil
	}
	out, err := sb.Execute(context.Background(), Call{Path: path, Limits: lim, Input: "h", Reveal: slow})
	if err != nil || out.Failure == nil || out.Failure.Kind != KindDeadline {
		t.Errorf("got %+v, %v; want a deadline", out, err)
	}
}

// TestRevealOnlyIn030: reveal is in maiden:tool/host@0.3.0 only, and that
// interface is an import a tool may have.
func TestRevealOnlyIn030(t *testing.T) {
	t.Parallel()
	if !wit.V030.Reveal || wit.V020.Reveal || wit.V010.Reveal {
		t.Fatal("only 0.3.0 has reveal")
	}
	if !importAllowed(wit.V030.HostInterface) {
		t.Error("0.3.0's host interface is not an allowed import")
	}
	if !strings.Contains(wit.V030.Text, "reveal: func(handle: string) -> result<string, string>;") || strings.Contains(wit.V020.Text, "reveal:") {
		t.Error("the WIT texts do not say so")
	}
}

// TestRevealJS: a JavaScript tool that imports reveal from
// maiden:tool/host@0.3.0 is built against 0.3.0 and reveals like the WAT
// one; a refusal reaches it as an exception carrying the host's message.
func TestRevealJS(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, nil)
	path := testkit.Component(t, "js/revealer")
	reveal := func(_ context.Context, handle string) (string, error) {
		if handle == "good-handle" {
			return "s3cr3t-value", nil
		}
		return "", errors.New("no secret:reveal card")
	}
	redact := func(s string) string { return strings.ReplaceAll(s, "s3cr3t-value", "[REDACTED:K]") }
	jsLimits := Limits{Timeout: 20 * time.Second, Memory: 256 << 20}
	out, err := sb.Execute(context.Background(), Call{Path: path, Limits: jsLimits, Input: "good-handle", Reveal: reveal, Redact: redact})
	if err != nil || out.Failure != nil || out.Output != "[REDACTED:K]" {
		t.Fatalf("got %+v, %v", out, err)
	}
	out, err = sb.Execute(context.Background(), Call{Path: path, Limits: jsLimits, Input: "other", Reveal: reveal})
	if err != nil || out.Failure == nil || out.Failure.Kind != KindTool || !strings.Contains(out.Failure.Message, "refused: no secret:reveal card") {
		t.Errorf("refused: got %+v, %v", out, err)
	}
}
