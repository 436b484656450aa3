package egress_test

import (
	"context"
	"fmt"

	"github.com/maiden-run/maiden/internal/egress"
)

// Requests the policy refuses never reach the network; the tool gets a
// denial that names the rule.
func ExampleGate_Fetch() {
	p, err := egress.NewPolicy("weather", egress.Rules{Hosts: []string{"api.weather.example"},
		Secrets: []string{"WEATHER_TOKEN"},
	})
	if err != nil {
		panic(err)
	}
	g := egress.New(nil)
	for _, req := range []egress.Request{
		{URL: "https://evil.example/"},
		{URL: "https://api.weather.example@evil.example/"},
		{URL: "http://api.weather.example/"},
		{URL: "https://api.weather.example/", Headers: []egress.Header{{Name: "authorization", Value: "Bearer x"}}},
		{URL: "https://api.weather.example/", Credential: "GITHUB_TOKEN", HasCredential: true},
	} {
		_, ferr := g.Fetch(context.Background(), p, req)
		fmt.Println(ferr)
	}
	// Output:
	// denied: host "evil.example" is not in this tool's http_allow (rule: allowlist)
	// denied: URL "https://api.weather.example@evil.example/" contains user info before '@'; the host is what follows it, and credentials are attached by name (rule: userinfo)
	// denied: plain http to api.weather.example is not allowed; use https (plain http is only for loopback) (rule: https-required)
	// denied: header "authorization" may not be set by a tool: it carries authority; maiden attaches credentials itself (name a secret with the credential argument) (rule: header-refused)
	// denied: credential "GITHUB_TOKEN" is not in this tool's secrets (rule: credential-undeclared)
}

// A redactor hides a tool's secret values, and their encodings, in text.
func ExampleGate_Redactor() {
	p, _ := egress.NewPolicy("t", egress.Rules{Secrets: []string{"TOKEN"}})
	g := egress.New(&egress.Options{LookupSecret: func(name string) (string, bool) {
		return "s3cr3t-value", name == "TOKEN"
	}})
	redact := g.Redactor(p)
	fmt.Println(redact("raw s3cr3t-value, base64 czNjcjN0LXZhbHVl, hex 7333637233742d76616c7565"))
	// Output:
	// raw [REDACTED:TOKEN], base64 [REDACTED:TOKEN], hex [REDACTED:TOKEN]
}

// A caller's permissions narrow a tool's rules for one call: only what both
// allow is left.
func ExampleRules_Intersect() {
	tool := egress.Rules{
		Hosts:   []string{"api.example.com", "*.tiles.example"},
		Secrets: []string{"API_TOKEN", "TILES_KEY"},
	}
	card := egress.Rules{
		Hosts:            []string{"a.tiles.example", "evil.example"},
		Secrets:          []string{"TILES_KEY"},
		MaxResponseBytes: 64 << 10,
	}
	r := tool.Intersect(card)
	fmt.Println(r.Hosts, r.Secrets, r.MaxResponseBytes)
	// Output:
	// [a.tiles.example] [TILES_KEY] 65536
}
