package admin

import (
	"encoding/json"
	"strings"

	"github.com/maiden-run/maiden/api"
)

// OCSFVersion is the version of the Open Cybersecurity Schema Framework
// the OCSF export follows (metadata.version of every event).
const OCSFVersion = "1.8.0"

// OCSF classes the export writes.
const (
	// OCSFAPIActivity is API Activity (category Application Activity, 6):
	// a call (admitted, refused, succeeded, failed), an http-fetch, a
	// human's decision, a session or boundary change, a reveal.
	OCSFAPIActivity = 6003
	// OCSFUserAccess is User Access Management (category Identity & Access
	// Management, 3): a card granted, derived, transferred or revoked, a
	// token minted or revoked: an agent's privileges changing.
	OCSFUserAccess = 3005
)

// ocsfEvent is the OCSF event of one audit record: the attributes both
// classes share, then each class's own (omitted when empty).
type ocsfEvent struct {
	ActivityID   int          `json:"activity_id"`
	ActivityName string       `json:"activity_name"`
	CategoryUID  int          `json:"category_uid"`
	ClassUID     int          `json:"class_uid"`
	TypeUID      int          `json:"type_uid"`
	SeverityID   int          `json:"severity_id"`
	Time         int64        `json:"time"`
	StatusID     int          `json:"status_id,omitempty"`
	Status       string       `json:"status,omitempty"`
	StatusDetail string       `json:"status_detail,omitempty"`
	Message      string       `json:"message,omitempty"`
	Metadata     ocsfMetadata `json:"metadata"`
	Actor        *ocsfActor   `json:"actor,omitempty"`

	// API Activity.
	API          *ocsfAPI          `json:"api,omitempty"`
	SrcEndpoint  *ocsfEndpoint     `json:"src_endpoint,omitempty"`
	DstEndpoint  *ocsfEndpoint     `json:"dst_endpoint,omitempty"`
	HTTPResponse *ocsfHTTPResponse `json:"http_response,omitempty"`
	Resources    []ocsfResource    `json:"resources,omitempty"`
	Trace        *ocsfTrace        `json:"trace,omitempty"`

	// User Access Management.
	User       *ocsfUser `json:"user,omitempty"`
	Privileges []string  `json:"privileges,omitempty"`

	// Unmapped is the record as maiden keeps it: its kind, body and the
	// hashes that chain it (prev, hash), so a SIEM can check continuity.
	Unmapped ocsfUnmapped `json:"unmapped"`
}

type ocsfMetadata struct {
	Version  string      `json:"version"`
	Product  ocsfProduct `json:"product"`
	UID      string      `json:"uid"`
	Sequence int64       `json:"sequence"`
	LogName  string      `json:"log_name"`
}

type ocsfProduct struct {
	Name       string `json:"name"`
	VendorName string `json:"vendor_name"`
}

type ocsfActor struct {
	User    *ocsfUser `json:"user,omitempty"`
	AppName string    `json:"app_name"`
}

type ocsfUser struct {
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
}

type ocsfAPI struct {
	Operation string       `json:"operation"`
	Service   *ocsfService `json:"service,omitempty"`
}

type ocsfService struct {
	Name string `json:"name"`
}

type ocsfEndpoint struct {
	Name     string `json:"name,omitempty"`
	Hostname string `json:"hostname,omitempty"`
}

type ocsfHTTPResponse struct {
	Code int `json:"code"`
}

type ocsfResource struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type ocsfTrace struct {
	UID string `json:"uid"`
}

type ocsfUnmapped struct {
	Kind string          `json:"maiden_kind"`
	Body json.RawMessage `json:"maiden_body,omitempty"`
	Prev string          `json:"maiden_prev"`
	Hash string          `json:"maiden_hash"`
}

// ocsfBody is what the mapping reads of a record's body (call records,
// fetches, card and token changes); everything else stays in unmapped.
type ocsfBody struct {
	Kind     string `json:"kind"`
	Event    string `json:"event"`
	Message  string `json:"message"`
	TraceID  string `json:"trace_id"`
	Host     string `json:"host"`
	Method   string `json:"method"`
	Status   int    `json:"status"`
	Allowed  *bool  `json:"allowed"`
	Error    string `json:"error"`
	Op       string `json:"op"`
	Card     string `json:"card"`
	Token    string `json:"token"`
	Decision *struct {
		Allow bool   `json:"allow"`
		Rule  string `json:"rule"`
	} `json:"decision"`
}

// Severities (severity_id): informational for what was allowed or done,
// low for a refusal or failure (the system worked as configured; a SIEM
// raises its own alerts).
const (
	ocsfInformational = 1
	ocsfLow           = 2
)

// OCSFEvent is r as one OCSF event (OCSFVersion), as a JSON line: API
// Activity, or User Access Management for card and token changes. The
// record's own fields stay in unmapped (maiden_kind, maiden_body,
// maiden_prev, maiden_hash), so nothing of the trail is lost and the chain
// can be checked from the events.
func OCSFEvent(r api.AuditRecord) ([]byte, error) {
	var body ocsfBody
	if len(r.Body) > 0 && r.Body[0] == '{' {
		_ = json.Unmarshal(r.Body, &body) // a body of another shape maps nothing; it is in unmapped whole
	}
	e := ocsfEvent{
		ActivityID: 99, ActivityName: r.Kind, SeverityID: ocsfInformational,
		Time: r.At.UnixMilli(),
		Metadata: ocsfMetadata{Version: OCSFVersion, Product: ocsfProduct{Name: "maiden", VendorName: "maiden"},
			UID: r.Hash, Sequence: r.Seq, LogName: "audit"},
		Actor:    &ocsfActor{AppName: "maiden"},
		Unmapped: ocsfUnmapped{Kind: r.Kind, Body: r.Body, Prev: r.Prev, Hash: r.Hash},
	}
	if r.Actor != "" {
		kind, _, _ := strings.Cut(r.Actor, ":")
		e.Actor.User = &ocsfUser{Name: r.Actor, Type: kind}
	}
	success := func(ok bool, detail string) {
		if ok {
			e.StatusID, e.Status = 1, "Success"
			return
		}
		e.StatusID, e.Status, e.StatusDetail, e.SeverityID = 2, "Failure", detail, ocsfLow
	}
	switch r.Kind {
	case AuditCardChange, AuditTokenChange:
		e.CategoryUID, e.ClassUID = 3, OCSFUserAccess
		switch body.Op {
		case "revoke":
			e.ActivityID, e.ActivityName = 2, "Revoke Privileges"
		case "grant", "derive", "transfer", "mint":
			e.ActivityID, e.ActivityName = 1, "Assign Privileges"
		}
		agent := r.Agent
		if agent == "" {
			agent = r.Actor // an operator's own token
		}
		e.User = &ocsfUser{Name: agent}
		switch {
		case body.Card != "":
			e.Privileges = []string{"card " + body.Card}
		case body.Token != "":
			e.Privileges = []string{"token " + body.Token}
		default:
			e.Privileges = []string{r.Kind}
		}
		e.Message = r.Kind + " " + body.Op
		success(true, "")
	default:
		e.CategoryUID, e.ClassUID = 6, OCSFAPIActivity
		e.API = &ocsfAPI{Operation: r.Kind}
		src := r.Agent
		if src == "" {
			src = r.Actor
		}
		e.SrcEndpoint = &ocsfEndpoint{Name: src}
		if src == "" {
			e.SrcEndpoint.Name = "maiden"
		}
		if r.Tool != "" {
			e.API.Service = &ocsfService{Name: r.Tool}
			e.Resources = []ocsfResource{{Name: r.Tool, Type: "tool"}}
		}
		switch r.Kind {
		case AuditCallAdmitted, AuditCallSucceeded:
			success(true, "")
		case AuditCallRefused, AuditCallFailed, AuditDenial:
			success(false, strings.TrimSpace(string(body.Kind)+": "+body.Message))
		case AuditApproval:
			if body.Event == "requested" {
				// The approve layer's record of a call asking for a
				// human (actor the agent): nobody has decided yet, so
				// neither a success nor a failure.
				e.ActivityName = r.Kind + " requested"
				e.StatusID, e.Status, e.StatusDetail = 99, "Pending", "awaiting a human's decision"
				break
			}
			success(true, "") // a human approved (a denial is AuditDenial)
		case AuditFetch:
			e.API.Operation = "http-fetch " + body.Method
			if body.Host != "" {
				e.DstEndpoint = &ocsfEndpoint{Hostname: body.Host}
			}
			if body.Status != 0 {
				e.HTTPResponse = &ocsfHTTPResponse{Code: body.Status}
			}
			success(body.Allowed != nil && *body.Allowed && body.Error == "", body.Error)
		}
		if body.TraceID != "" {
			e.Trace = &ocsfTrace{UID: body.TraceID}
		}
	}
	e.TypeUID = e.ClassUID*100 + e.ActivityID
	b, err := json.Marshal(e)
	return append(b, '\n'), err
}
