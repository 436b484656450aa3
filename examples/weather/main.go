// weather: a maiden tool in Go that calls a web API with a credential it
// may only name. The operator grants the host and the credential in
// agent.toml:
//
//	[tools.weather]
//	path = "weather/weather.wasm"
//	http_allow = ["api.weather.example"]
//	secrets = ["WEATHER_TOKEN"]       # value from MAIDEN_SECRET_WEATHER_TOKEN
//
// The tool asks for "WEATHER_TOKEN"; the host attaches
// "Authorization: Bearer <value>" and the value never enters the sandbox.
// api.weather.example is a placeholder: point http_allow (and the "api"
// input) at a real service, or see examples_test.go for a local one.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

// defaultAPI is the weather service. The "api" input may name another port
// or path on the same host (for a test server); any other host is refused
// here, and the host's allowlist would refuse it anyway.
const defaultAPI = "https://api.weather.example"

// Input is what an agent sends.
type Input struct {
	City  string `json:"city" jsonschema:"city name, e.g. Paris"`
	Units string `json:"units,omitempty" jsonschema:"metric (default) or imperial"`
	API   string `json:"api,omitempty" jsonschema:"base URL of the weather API; default https://api.weather.example"`
}

// Output is what the tool returns.
type Output struct {
	City        string  `json:"city"`
	Temperature float64 `json:"temperature"`
	Units       string  `json:"units"`
	Conditions  string  `json:"conditions"`
}

// current is the weather API's answer (the part this tool reads).
type current struct {
	Location  string  `json:"location"`
	TempC     float64 `json:"temp_c"`
	Condition string  `json:"condition"`
}

func weather(ctx context.Context, in Input) (Output, error) {
	if in.City == "" {
		return Output{}, errors.New("city is required")
	}
	units := in.Units
	if units == "" {
		units = "metric"
	}
	if units != "metric" && units != "imperial" {
		return Output{}, fmt.Errorf("units must be metric or imperial, not %q", units)
	}
	api := defaultAPI
	if in.API != "" {
		u, err := url.Parse(in.API)
		if err != nil || u.Scheme != "https" || u.Hostname() != "api.weather.example" {
			return Output{}, fmt.Errorf("api must be an https URL on api.weather.example, not %q", in.API)
		}
		api = in.API
	}

	resp, err := maiden.Fetch(maiden.Request{
		URL:        api + "/v1/current?city=" + url.QueryEscape(in.City),
		Header:     maiden.Headers{{Name: "Accept", Value: "application/json"}},
		Credential: "WEATHER_TOKEN",
	})
	switch {
	case errors.Is(err, maiden.ErrDenied):
		return Output{}, fmt.Errorf("maiden refused the request (check http_allow and secrets for this tool): %w", err)
	case err != nil:
		return Output{}, fmt.Errorf("the weather service did not answer: %w", err)
	case resp.Status == 401 || resp.Status == 403:
		return Output{}, fmt.Errorf("the weather service refused the credential (HTTP %d): is MAIDEN_SECRET_WEATHER_TOKEN set?", resp.Status)
	case resp.Status == 404:
		return Output{}, fmt.Errorf("the weather service does not know the city %q", in.City)
	case resp.Status != 200:
		return Output{}, fmt.Errorf("the weather service answered HTTP %d", resp.Status)
	}
	var c current
	if err := json.Unmarshal(resp.Body, &c); err != nil {
		return Output{}, fmt.Errorf("the weather service sent something that is not its JSON: %w", err)
	}
	maiden.Logf(maiden.LevelInfo, "weather for %s: %.1f°C, %s", c.Location, c.TempC, c.Condition)
	out := Output{City: c.Location, Temperature: c.TempC, Units: units, Conditions: c.Condition}
	if units == "imperial" {
		out.Temperature = c.TempC*9/5 + 32
	}
	return out, nil
}

func init() {
	maiden.Register(maiden.Func("Current weather for a city: temperature and conditions, from the weather service the operator configured.", weather))
}

func main() {}
