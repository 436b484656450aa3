//go:build !wasip1

package maiden_test

import (
	"context"
	"errors"
	"fmt"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

func ExampleSchemaFor() {
	type Input struct {
		City  string `json:"city" jsonschema:"city name, e.g. Paris"`
		Units string `json:"units,omitempty" jsonschema:"metric (default) or imperial"`
	}
	fmt.Println(maiden.SchemaFor[Input]())
	// Output:
	// {"type":"object","properties":{"city":{"type":"string","description":"city name, e.g. Paris"},"units":{"type":"string","description":"metric (default) or imperial"}},"required":["city"]}
}

func ExampleFunc() {
	type In struct {
		Name string `json:"name"`
	}
	type Out struct {
		Greeting string `json:"greeting"`
	}
	tool := maiden.Func("Greets someone by name.", func(ctx context.Context, in In) (Out, error) {
		if in.Name == "" {
			return Out{}, errors.New("name is required")
		}
		return Out{Greeting: "Hello, " + in.Name + "!"}, nil
	})
	// In a tool: func init() { maiden.Register(tool) }. Here, call it directly.
	out, err := tool.Execute(context.Background(), []byte(`{"name":"Ada"}`))
	fmt.Println(string(out), err)
	_, err = tool.Execute(context.Background(), []byte(`{}`))
	fmt.Println(err)
	// Output:
	// {"greeting":"Hello, Ada!"} <nil>
	// name is required
}

// A stand-in host lets a tool's own tests exercise its Fetch calls.
type fakeWeather struct{}

func (fakeWeather) Log(level maiden.Level, msg string) { fmt.Printf("[%s] %s\n", level, msg) }

func (fakeWeather) Fetch(req maiden.Request) (maiden.Response, error) {
	if req.Credential != "WEATHER_TOKEN" {
		return maiden.Response{}, &maiden.FetchError{Kind: maiden.FetchDenied, Message: "credential not declared"}
	}
	return maiden.Response{Status: 200, Body: []byte(`{"temp_c":21.5}`)}, nil
}

func ExampleSetHost() {
	defer maiden.SetHost(fakeWeather{})()

	resp, err := maiden.Fetch(maiden.Request{URL: "https://api.weather.example/v1/current?city=Paris", Credential: "WEATHER_TOKEN"})
	fmt.Println(resp.Status, string(resp.Body), err)
	_, err = maiden.Fetch(maiden.Request{URL: "https://api.weather.example/"})
	fmt.Println(errors.Is(err, maiden.ErrDenied), err)
	maiden.Log(maiden.LevelInfo, "done")
	// Output:
	// 200 {"temp_c":21.5} <nil>
	// true fetch denied: credential not declared
	// [info] done
}
