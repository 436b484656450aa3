package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSecretDestinations reads [secrets.NAME] tables: hosts normalised,
// methods and prefixes kept, lines recorded; a file without them binds
// nothing.
func TestSecretDestinations(t *testing.T) {
	src := agentsTools + `
[secrets.WEATHER_TOKEN]
hosts = ["API.example.com.", "*.cdn.example.com"]
methods = ["GET", "HEAD"]
path_prefixes = ["/v1/", "/status"]

[secrets.OTHER]
hosts = ["other.example.com"]
`
	cfg, err := parse("agent.toml", []byte(src), "/cfg", fakeFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []SecretDestination{
		{Name: "OTHER", Hosts: []string{"other.example.com"}, Line: 16, Kind: "bearer"},
		{Name: "WEATHER_TOKEN", Hosts: []string{"api.example.com", "*.cdn.example.com"}, Methods: []string{"GET", "HEAD"}, PathPrefixes: []string{"/v1/", "/status"}, Line: 11, Kind: "bearer"},
	}
	if diff := cmp.Diff(want, cfg.SecretDestinations()); diff != "" {
		t.Errorf("destinations (-want +got):\n%s", diff)
	}
	d, ok := cfg.SecretDestination("WEATHER_TOKEN")
	if !ok || d.Line != 11 {
		t.Errorf("SecretDestination: %+v, %v", d, ok)
	}
	d.Hosts[0] = "changed"
	if again, _ := cfg.SecretDestination("WEATHER_TOKEN"); again.Hosts[0] != "api.example.com" {
		t.Error("SecretDestination returned shared state")
	}
	if _, ok := cfg.SecretDestination("NOPE"); ok {
		t.Error("an undeclared binding was found")
	}
	plain, err := parse("agent.toml", []byte(agentsTools), "/cfg", fakeFiles(t))
	if err != nil || len(plain.SecretDestinations()) != 0 {
		t.Errorf("no [secrets]: %v, %v", plain.SecretDestinations(), err)
	}
}

// TestSecretDestinationErrors: every problem is reported with its line and
// key, and a binding that names no declared secret (a typo would leave the
// real one unbound) or could never be used is an error.
func TestSecretDestinationErrors(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      []string
	}{
		{"misspelt secret", "[secrets.WEATHER_TOKN]\nhosts = [\"api.example.com\"]\n", []string{
			`agent.toml:11: secrets.WEATHER_TOKN: no tool lists secret "WEATHER_TOKN" in its secrets (a misspelt name here would leave the real secret unbound); declared secrets: OTHER, WEATHER_TOKEN`,
		}},
		{"bad name", "[secrets.weather]\nhosts = [\"api.example.com\"]\n", []string{
			`agent.toml:11: secrets.weather: invalid secret name "weather"`,
		}},
		{"entry not a table", "[secrets]\nWEATHER_TOKEN = \"api.example.com\"\n", []string{
			`agent.toml:12: secrets.WEATHER_TOKEN: must be a table (hosts = [...]`,
		}},
		{"hosts missing", "[secrets.WEATHER_TOKEN]\nmethods = [\"GET\"]\n", []string{
			`agent.toml:11: secrets.WEATHER_TOKEN.hosts: required key is missing`,
		}},
		{"hosts empty", "[secrets.WEATHER_TOKEN]\nhosts = []\n", []string{
			`agent.toml:12: secrets.WEATHER_TOKEN.hosts: must name at least one host`,
		}},
		{"bad host", "[secrets.WEATHER_TOKEN]\nhosts = [\"api.example.com/v1\"]\n", []string{
			`agent.toml:12: secrets.WEATHER_TOKEN.hosts[0]: invalid host pattern "api.example.com/v1"`,
		}},
		{"bad methods", "[secrets.WEATHER_TOKEN]\nhosts = [\"a.example.com\"]\nmethods = [\"get\", \"CONNECT\", \"GET\", \"GET\", 5]\n", []string{
			`agent.toml:13: secrets.WEATHER_TOKEN.methods[0]: invalid method "get": write it in upper case`,
			`agent.toml:13: secrets.WEATHER_TOKEN.methods[1]: CONNECT is never allowed by http-fetch`,
			`agent.toml:13: secrets.WEATHER_TOKEN.methods[3]: duplicate entry "GET"`,
			`agent.toml:13: secrets.WEATHER_TOKEN.methods[4]: must be a string, got integer 5`,
		}},
		{"empty methods", "[secrets.WEATHER_TOKEN]\nhosts = [\"a.example.com\"]\nmethods = []\n", []string{
			`agent.toml:13: secrets.WEATHER_TOKEN.methods: is empty, so the secret could never be sent`,
		}},
		{"bad prefixes", "[secrets.WEATHER_TOKEN]\nhosts = [\"a.example.com\"]\npath_prefixes = [\"v1/\", \"/v1/%2e\", \"/v1/../x\", \"/v1?q\", \"/ok/\", \"/ok/\"]\n", []string{
			`agent.toml:13: secrets.WEATHER_TOKEN.path_prefixes[0]: path prefix "v1/" must start with '/'`,
			`agent.toml:13: secrets.WEATHER_TOKEN.path_prefixes[1]: path prefix "/v1/%2e" has "%" at byte 4`,
			`agent.toml:13: secrets.WEATHER_TOKEN.path_prefixes[2]: path prefix "/v1/../x" has a "." or ".." segment`,
			`agent.toml:13: secrets.WEATHER_TOKEN.path_prefixes[3]: path prefix "/v1?q" has "?" at byte 3`,
			`agent.toml:13: secrets.WEATHER_TOKEN.path_prefixes[5]: duplicate entry "/ok/"`,
		}},
		{"empty prefixes", "[secrets.WEATHER_TOKEN]\nhosts = [\"a.example.com\"]\npath_prefixes = []\n", []string{
			`agent.toml:13: secrets.WEATHER_TOKEN.path_prefixes: is empty, so the secret could never be sent`,
		}},
		{"unknown key", "[secrets.WEATHER_TOKEN]\nhosts = [\"a.example.com\"]\nhost = \"b\"\n", []string{
			`agent.toml:13: secrets.WEATHER_TOKEN.host: unknown key (did you mean "hosts"?)`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse("agent.toml", []byte(agentsTools+"\n"+tt.src), "/cfg", fakeFiles(t))
			if err == nil {
				t.Fatal("accepted")
			}
			errs := err.(Errors)
			if len(errs) != len(tt.want) {
				t.Fatalf("%d errors, want %d:\n%v", len(errs), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(errs[i].Error(), w) {
					t.Errorf("error %d:\n got %s\nwant %s...", i, errs[i].Error(), w)
				}
			}
		})
	}
}

// TestCredentialKinds reads each kind's settings from [secrets.NAME].
func TestCredentialKinds(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      SecretDestination
	}{
		{"header", "kind = \"header\"\nheader = \"X-Api-Key\"\ntemplate = \"token {value}\"\n",
			SecretDestination{Kind: "header", Header: "X-Api-Key", Template: "token {value}"}},
		{"basic", "kind = \"basic\"\nusername = \"alice\"\n", SecretDestination{Kind: "basic", Username: "alice"}},
		{"hmac", "kind = \"hmac\"\nalgorithm = \"sha512\"\nsignature_header = \"X-Sig\"\ntimestamp_header = \"X-Ts\"\n",
			SecretDestination{Kind: "hmac", Algorithm: "sha512", SignatureHeader: "X-Sig", TimestampHeader: "X-Ts"}},
		{"sigv4", "kind = \"sigv4\"\naccess_key_id = \"AKIDEXAMPLE\"\nregion = \"us-east-1\"\nservice = \"s3\"\nsession_token = true\n",
			SecretDestination{Kind: "sigv4", AccessKeyID: "AKIDEXAMPLE", Region: "us-east-1", Service: "s3", SessionToken: true}},
		{"mtls", "kind = \"mtls\"\ncert_file = \"client.pem\"\n", SecretDestination{Kind: "mtls", CertFile: "/cfg/client.pem"}},
		{"oauth2", "kind = \"oauth2\"\ntoken_url = \"https://api.example.com/oauth/token\"\nclient_id = \"svc\"\nscopes = [\"read\", \"write\"]\n",
			SecretDestination{Kind: "oauth2", TokenURL: "https://api.example.com/oauth/token", ClientID: "svc", Scopes: []string{"read", "write"}}},
		{"oauth2 refresh", "kind = \"oauth2\"\ntoken_url = \"https://api.example.com/oauth/token\"\nclient_id = \"web\"\ngrant = \"refresh_token\"\nclient_secret = true\n",
			SecretDestination{Kind: "oauth2", TokenURL: "https://api.example.com/oauth/token", ClientID: "web", Grant: "refresh_token", ClientSecret: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := agentsTools + "\n[secrets.WEATHER_TOKEN]\nhosts = [\"api.example.com\"]\n" + tt.src
			cfg, err := parse("agent.toml", []byte(src), "/cfg", fakeFiles(t))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := cfg.SecretDestination("WEATHER_TOKEN")
			tt.want.Name, tt.want.Hosts, tt.want.Line = "WEATHER_TOKEN", []string{"api.example.com"}, 11
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCredentialKindErrors: an unknown kind, a setting of another kind, a
// missing required setting and a bad value are each reported with the
// file, line and key.
func TestCredentialKindErrors(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      []string
	}{
		{"unknown kind", "kind = \"jwt\"\n", []string{
			`agent.toml:13: secrets.WEATHER_TOKEN.kind: unknown kind "jwt": one of "bearer", "header", "basic", "hmac", "sigv4", "mtls", "oauth2"`}},
		{"setting of another kind", "kind = \"basic\"\nusername = \"a\"\nregion = \"us-east-1\"\n", []string{
			`agent.toml:15: secrets.WEATHER_TOKEN.region: is a setting of kind "sigv4", and this secret is kind "basic"`}},
		{"setting without kind", "header = \"X-Key\"\n", []string{
			`agent.toml:13: secrets.WEATHER_TOKEN.header: is a setting of kind "header", and this secret is kind "bearer"`}},
		{"sigv4 missing", "kind = \"sigv4\"\nregion = \"us-east-1\"\n", []string{
			`agent.toml:13: secrets.WEATHER_TOKEN.access_key_id: required key is missing for kind "sigv4"`,
			`agent.toml:13: secrets.WEATHER_TOKEN.service: required key is missing for kind "sigv4"`}},
		{"hmac algorithm", "kind = \"hmac\"\nalgorithm = \"md5\"\n", []string{
			`agent.toml:14: secrets.WEATHER_TOKEN.algorithm: must be one of sha256, sha512, got "md5"`}},
		{"header refused", "kind = \"header\"\nheader = \"Host\"\n", []string{
			`agent.toml:14: secrets.WEATHER_TOKEN.header: header name "Host" is a header maiden sets or refuses itself`}},
		{"template without value", "kind = \"header\"\nheader = \"X-Key\"\ntemplate = \"token\"\n", []string{
			`agent.toml:15: secrets.WEATHER_TOKEN.template: must hold {value} exactly once`}},
		{"basic colon", "kind = \"basic\"\nusername = \"a:b\"\n", []string{
			`agent.toml:14: secrets.WEATHER_TOKEN.username: may not hold ':'`}},
		{"oauth2 endpoint outside hosts", "kind = \"oauth2\"\ntoken_url = \"https://auth.other.example/token\"\nclient_id = \"svc\"\n", []string{
			`agent.toml:14: secrets.WEATHER_TOKEN.token_url: host "auth.other.example" is not in this secret's hosts`}},
		{"oauth2 plain http", "kind = \"oauth2\"\ntoken_url = \"http://api.example.com/token\"\nclient_id = \"svc\"\n", []string{
			`agent.toml:14: secrets.WEATHER_TOKEN.token_url: must be an https URL`}},
		{"oauth2 bad scope", "kind = \"oauth2\"\ntoken_url = \"https://api.example.com/token\"\nclient_id = \"svc\"\nscopes = [\"a b\"]\n", []string{
			`agent.toml:16: secrets.WEATHER_TOKEN.scopes[0]: invalid scope "a b"`}},
		{"oauth2 unknown grant", "kind = \"oauth2\"\ntoken_url = \"https://api.example.com/token\"\nclient_id = \"svc\"\ngrant = \"password\"\n", []string{
			`agent.toml:16: secrets.WEATHER_TOKEN.grant: must be one of client_credentials, refresh_token, got "password"`}},
		{"oauth2 client_secret without refresh", "kind = \"oauth2\"\ntoken_url = \"https://api.example.com/token\"\nclient_id = \"svc\"\nclient_secret = true\n", []string{
			`agent.toml:16: secrets.WEATHER_TOKEN.client_secret: is for grant = "refresh_token"`}},
		{"session token not bool", "kind = \"sigv4\"\naccess_key_id = \"A\"\nregion = \"r\"\nservice = \"s\"\nsession_token = \"yes\"\n", []string{
			`agent.toml:17: secrets.WEATHER_TOKEN.session_token: must be true or false`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := agentsTools + "\n[secrets.WEATHER_TOKEN]\nhosts = [\"api.example.com\"]\n" + tt.src
			_, err := parse("agent.toml", []byte(src), "/cfg", fakeFiles(t))
			if err == nil {
				t.Fatal("accepted")
			}
			errs := err.(Errors)
			if len(errs) != len(tt.want) {
				t.Fatalf("%d errors, want %d:\n%v", len(errs), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(errs[i].Error(), w) {
					t.Errorf("error %d:\n got %s\nwant %s...", i, errs[i].Error(), w)
				}
			}
		})
	}
}

// TestImportCredentialBinding: an [mcp.NAME] import sends its credential
// itself, as "Authorization: Bearer VALUE" to its url, outside the egress
// gate; a [secrets.NAME] binding of that secret must allow exactly that
// (the url's host and path, the methods streamable HTTP sends it with, a
// bearer token), or the configuration is refused. A secret bound to one
// API otherwise went to any upstream that named it, and a signing key or
// client key went out as a bearer token.
func TestImportCredentialBinding(t *testing.T) {
	const base = agentsTools + "\n[mcp.up]\nurl = \"https://MCP.Example.com./v1/mcp\"\ncredential = \"WEATHER_TOKEN\"\n" +
		"\n[secrets.WEATHER_TOKEN]\n"
	for _, tt := range []struct {
		name, src string
		want      string // "" accepted
	}{
		{"host bound", "hosts = [\"mcp.example.com\"]\n", ""},
		{"wildcard host and prefix", "hosts = [\"*.example.com\"]\npath_prefixes = [\"/v1/\"]\nmethods = [\"DELETE\", \"GET\", \"POST\"]\n", ""},
		{"another host", "hosts = [\"api.example.com\"]\n",
			`agent.toml:13: mcp.up.credential: the credential "WEATHER_TOKEN" may not be sent to this import's url: its host "mcp.example.com" is not in the hosts of [secrets.WEATHER_TOKEN] (agent.toml:15): ["api.example.com"]`},
		{"another path", "hosts = [\"mcp.example.com\"]\npath_prefixes = [\"/v2/\"]\n",
			`agent.toml:13: mcp.up.credential: the credential "WEATHER_TOKEN" may not be sent to this import's url: its path "/v1/mcp" is not under the path_prefixes of [secrets.WEATHER_TOKEN] (agent.toml:15): ["/v2/"]`},
		{"methods without DELETE", "hosts = [\"mcp.example.com\"]\nmethods = [\"GET\", \"POST\"]\n",
			`agent.toml:13: mcp.up.credential: the credential "WEATHER_TOKEN" may not be sent to this import's url: streamable HTTP sends it with POST, GET and DELETE, and the methods of [secrets.WEATHER_TOKEN] (agent.toml:15) are ["GET", "POST"]`},
		{"signing kind", "hosts = [\"mcp.example.com\"]\nkind = \"hmac\"\nalgorithm = \"sha256\"\n",
			`agent.toml:13: mcp.up.credential: the credential "WEATHER_TOKEN" is of kind "hmac" ([secrets.WEATHER_TOKEN], agent.toml:15): an import sends its value itself as "Authorization: Bearer VALUE", so only a bearer secret may be an import's credential`},
		{"oauth2 client secret", "hosts = [\"mcp.example.com\"]\nkind = \"oauth2\"\ntoken_url = \"https://mcp.example.com/token\"\nclient_id = \"c\"\n",
			`agent.toml:13: mcp.up.credential: the credential "WEATHER_TOKEN" is of kind "oauth2" ([secrets.WEATHER_TOKEN], agent.toml:15): an import sends its value itself`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse("agent.toml", []byte(base+tt.src), "/cfg", fakeFiles(t))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want %s", tt.want)
			}
			errs := err.(Errors)
			if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tt.want) {
				t.Fatalf("got:\n%v\nwant one error starting:\n%s", err, tt.want)
			}
		})
	}
	// A binding for a secret only an import uses is a binding, not a typo.
	src := "version = 1\n[mcp.up]\nurl = \"https://mcp.example.com/mcp\"\ncredential = \"UP_TOKEN\"\n[secrets.UP_TOKEN]\nhosts = [\"mcp.example.com\"]\n"
	if _, err := parse("agent.toml", []byte(src), "/cfg", fakeFiles(t)); err != nil {
		t.Errorf("a binding of an import's own credential was refused: %v", err)
	}
}
