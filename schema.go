package maiden

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// inputSchema is a tool's compiled input schema, or why it has none.
type inputSchema struct {
	schema *jsonschema.Schema
	err    error // the schema text is not a usable JSON Schema
}

// schemaCache holds compiled schemas by component digest: a tool's schema()
// is asked once per version of its file, so it is compiled once too.
type schemaCache struct {
	mu sync.Mutex
	m  map[string]*inputSchema
}

const maxCachedSchemas = 1024

func (c *schemaCache) get(digest, text string) *inputSchema {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[digest]; ok {
		return s
	}
	if c.m == nil || len(c.m) >= maxCachedSchemas {
		c.m = map[string]*inputSchema{} // hot reloads over months; start over
	}
	s := compileSchema(text)
	c.m[digest] = s
	return s
}

// noRefs refuses every external $ref: a tool's schema must not make the
// host read files or reach the network.
type noRefs struct{}

func (noRefs) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema refers to %s; maiden resolves only references inside the schema itself", url)
}

// compileSchema checks a tool's schema() text: JSON, a valid JSON Schema
// (any draft it declares; 2020-12 when it declares none) with only internal
// references, describing an object (MCP requires tool inputs to be objects).
func compileSchema(text string) *inputSchema {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return &inputSchema{err: fmt.Errorf("schema() did not return JSON: %v", err)}
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return &inputSchema{err: errors.New("schema() must return a JSON Schema object")}
	}
	if obj["type"] != "object" {
		return &inputSchema{err: fmt.Errorf(`the input schema must have "type": "object" (MCP passes arguments as an object), got %v`, jsonText(obj["type"]))}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noRefs{})
	const loc = "maiden:tool-input-schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return &inputSchema{err: fmt.Errorf("schema() is not a valid JSON Schema: %v", err)}
	}
	s, err := c.Compile(loc)
	if err != nil {
		return &inputSchema{err: fmt.Errorf("schema() is not a valid JSON Schema: %v", oneLine(err))}
	}
	return &inputSchema{schema: s}
}

// parseInput parses a call's input once, for both the JSON check and the
// schema check (parsing was most of a call with a 10 KB input). Numbers stay
// json.Number, as the schema validator expects; trailing data is an error.
func parseInput(input string) (any, error) {
	return jsonschema.UnmarshalJSON(strings.NewReader(input))
}

// validate checks a parsed input against the schema and explains every
// problem, one per line, by location in the input.
func (s *inputSchema) validate(v any) error {
	err := s.schema.Validate(v)
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return err
	}
	var problems []string
	collectLeaves(verr.BasicOutput(), &problems)
	sort.Strings(problems)
	if len(problems) == 0 {
		problems = []string{oneLine(verr)}
	}
	return fmt.Errorf("input does not match the tool's schema:\n  %s", strings.Join(problems, "\n  "))
}

func collectLeaves(u *jsonschema.OutputUnit, out *[]string) {
	if u == nil {
		return
	}
	if u.Error != nil && len(u.Errors) == 0 {
		loc := u.InstanceLocation
		if loc == "" {
			loc = "/"
		}
		*out = append(*out, fmt.Sprintf("at %s: %s", loc, u.Error.String()))
	}
	for i := range u.Errors {
		collectLeaves(&u.Errors[i], out)
	}
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func jsonText(v any) string {
	if v == nil {
		return "none"
	}
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(v)
	return strings.TrimSpace(b.String())
}
