package maiden_test

import (
	"encoding/json"
	"testing"
	"time"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

type Base struct {
	ID string `json:"id" jsonschema:"identifier"`
}

type node struct {
	Name     string  `json:"name"`
	Children []*node `json:"children,omitempty"`
}

type everything struct {
	Base
	Name     string            `json:"name" jsonschema:"a \"quoted\" description"`
	Count    int               `json:"count,omitempty"`
	Ratio    float64           `json:"ratio,omitzero"`
	Flag     bool              `json:"flag"`
	Size     uint16            `json:"size"`
	Opt      *string           `json:"opt"`
	Tags     []string          `json:"tags"`
	Pair     [2]int            `json:"pair"`
	Labels   map[string]int    `json:"labels"`
	Blob     []byte            `json:"blob"`
	Any      any               `json:"any"`
	Raw      json.RawMessage   `json:"raw"`
	When     time.Time         `json:"when"`
	Quoted   int64             `json:"quoted,string"`
	Tree     node              `json:"tree"`
	Skipped  string            `json:"-"`
	NoTag    string            // no tag: keeps its Go name
	private  string            // unexported: not encoded
	Nested   struct{ A int }   `json:"nested"`
	Dynamic  map[string]any    `json:"dynamic,omitempty"`
	Matrix   [][]float32       `json:"matrix,omitempty"`
	Embedded map[string][]Base `json:"embedded,omitempty"`
}

func TestSchemaFor(t *testing.T) {
	_ = everything{}.private // keep the field (it is the point of the case)
	for _, tt := range []struct {
		name, got, want string
	}{
		{"string", maiden.SchemaFor[string](), `{"type":"string"}`},
		{"pointer", maiden.SchemaFor[*int](), `{"type":"integer"}`},
		{"empty struct", maiden.SchemaFor[struct{}](), `{"type":"object","properties":{}}`},
		{"recursive", maiden.SchemaFor[node](), `{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{}}},"required":["name"]}`},
		{"everything", maiden.SchemaFor[everything](), `{"type":"object","properties":{` +
			`"id":{"type":"string","description":"identifier"},` +
			`"name":{"type":"string","description":"a \"quoted\" description"},` +
			`"count":{"type":"integer"},` +
			`"ratio":{"type":"number"},` +
			`"flag":{"type":"boolean"},` +
			`"size":{"type":"integer","minimum":0},` +
			`"opt":{"type":"string"},` +
			`"tags":{"type":"array","items":{"type":"string"}},` +
			`"pair":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2},` +
			`"labels":{"type":"object","additionalProperties":{"type":"integer"}},` +
			`"blob":{"type":"string","contentEncoding":"base64"},` +
			`"any":{},` +
			`"raw":{},` +
			`"when":{"type":"string","format":"date-time"},` +
			`"quoted":{"type":"string"},` +
			`"tree":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{}}},"required":["name"]},` +
			`"NoTag":{"type":"string"},` +
			`"nested":{"type":"object","properties":{"A":{"type":"integer"}},"required":["A"]},` +
			`"dynamic":{"type":"object","additionalProperties":{}},` +
			`"matrix":{"type":"array","items":{"type":"array","items":{"type":"number"}}},` +
			`"embedded":{"type":"object","additionalProperties":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string","description":"identifier"}},"required":["id"]}}}` +
			`},"required":["id","name","flag","size","tags","pair","labels","blob","any","raw","when","quoted","tree","NoTag","nested"]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", tt.got, tt.want)
			}
			if !json.Valid([]byte(tt.got)) {
				t.Errorf("not JSON: %s", tt.got)
			}
		})
	}
}
