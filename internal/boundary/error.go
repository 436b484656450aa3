package boundary

import (
	"fmt"
	"regexp"
)

// ErrorCode is the code of every CommandError.
const ErrorCode = "SANDBOX_COMMAND_EXECUTION_FAILED"

// ReasonBoundaryRequired is the reason of a failure that asking can repair: RequiredExpansion says what to ask for.
const ReasonBoundaryRequired = "sandbox_boundary_required"

// Domains of a CommandError.
const (
	DomainCommand           = "command"
	DomainBackgroundCommand = "background_command"
	DomainFilesystem        = "filesystem"
	DomainNetwork           = "network" // maiden: a need for the network (web_fetch, http-fetch, a CLI's egress)
)

// Stages of a CommandError (others may be added; each matches ^[a-z0-9_]+$).
const (
	StageValidation = "validation"
	StageLaunch     = "launch"
)

var reasonPattern = regexp.MustCompile(`^[a-z0-9_]+$`)

// CommandError is the structured failure of a command or tool that cannot run inside its boundary. Its JSON is
// what the model sees as MCP structuredContent:
//
//	{"code":"SANDBOX_COMMAND_EXECUTION_FAILED","domain":"filesystem","stage":"validation",
//	 "reason":"sandbox_boundary_required","requiredExpansion":{...},"message":"..."}
//
// requestId and requiredExpansion appear only when set. Message is for people and must hold no secret.
type CommandError struct {
	Code              string     `json:"code"`
	Domain            string     `json:"domain"`
	Stage             string     `json:"stage"`
	Reason            string     `json:"reason"`
	RequestID         string     `json:"requestId,omitempty"`
	RequiredExpansion *Expansion `json:"requiredExpansion,omitempty"`
	Message           string     `json:"message,omitempty"`
}

func (e *CommandError) Error() string {
	s := fmt.Sprintf("%s: %s at %s: %s", e.Code, e.Domain, e.Stage, e.Reason)
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Validate reports what is wrong with e's fields: the code, a known domain, a stage and reason of ^[a-z0-9_]+$,
// a request ID of the request pattern, and an expansion exactly when the reason is sandbox_boundary_required.
func (e *CommandError) Validate() error {
	switch {
	case e.Code != ErrorCode:
		return fmt.Errorf("boundary: command error code %q: want %s", e.Code, ErrorCode)
	case e.Domain != DomainCommand && e.Domain != DomainBackgroundCommand && e.Domain != DomainFilesystem && e.Domain != DomainNetwork:
		return fmt.Errorf("boundary: command error domain %q: want command, background_command, filesystem or network", e.Domain)
	case !reasonPattern.MatchString(e.Stage):
		return fmt.Errorf("boundary: command error stage %q: want ^[a-z0-9_]+$", e.Stage)
	case !reasonPattern.MatchString(e.Reason):
		return fmt.Errorf("boundary: command error reason %q: want ^[a-z0-9_]+$", e.Reason)
	case e.RequestID != "" && !idPattern.MatchString(e.RequestID):
		return fmt.Errorf("boundary: command error requestId %q: want ^[A-Za-z0-9_-]{1,128}$", e.RequestID)
	case (e.Reason == ReasonBoundaryRequired) != (e.RequiredExpansion != nil):
		return fmt.Errorf("boundary: command error: requiredExpansion goes with reason %s and only with it", ReasonBoundaryRequired)
	}
	return nil
}

// Required is the error of a need Check refused with an expansion: the model can ask for exactly x.
func Required(domain, stage string, x Expansion, message string) *CommandError {
	return &CommandError{Code: ErrorCode, Domain: domain, Stage: stage, Reason: ReasonBoundaryRequired, RequiredExpansion: &x, Message: message}
}

// Refused is the error of a failure asking cannot repair (reason such as explicit_deny).
func Refused(domain, stage, reason, message string) *CommandError {
	return &CommandError{Code: ErrorCode, Domain: domain, Stage: stage, Reason: reason, Message: message}
}

// Settled is the error a call waiting on request r gets when r ends other than approved: the reason is r's when it
// is a reason string (turn_stopped, host_restarted, explicit_deny, ...), else "denied", with the operator's words in
// the message.
func Settled(domain, stage string, r Request) *CommandError {
	e := &CommandError{Code: ErrorCode, Domain: domain, Stage: stage, Reason: r.Reason, RequestID: r.ID}
	if !reasonPattern.MatchString(r.Reason) {
		e.Reason, e.Message = ReasonDenied, r.Reason
	}
	return e
}
