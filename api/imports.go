package api

// ImportedDefinition is what an imported tool shows agents: the upstream's
// title, description and input schema (as the upstream gave them: escape
// them before showing them on a terminal), and their pin digest.
type ImportedDefinition struct {
	Title       string `json:"title,omitempty"`
	Description string `json:"description"`
	InputSchema string `json:"input_schema"`
	Digest      string `json:"digest"`
}

// ImportReview is one tool of an import as an operator reviews it before
// accepting: State is "new" (never accepted), "changed" (Changes says what
// differs from Accepted) or "accepted" (Offered is what was accepted).
// Accepting a review pins Offered; a review whose Offered no longer matches
// its Digest is refused.
type ImportReview struct {
	Tool     string              `json:"tool"` // NAME.TOOL
	State    string              `json:"state"`
	Changes  []string            `json:"changes,omitempty"`
	Accepted *ImportedDefinition `json:"accepted,omitempty"`
	Offered  ImportedDefinition  `json:"offered"`
	// UpstreamName is the upstream's own name for the tool, which Tool
	// may show sanitised; it is pinned with Offered.
	UpstreamName string `json:"-"`
}
