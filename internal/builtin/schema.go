package builtin

// JSON Schemas (draft 2020-12) of each tool's input and output, for tools/list. Tests validate real inputs and
// outputs against them.
const (
	FSReadInputSchema = `{"type":"object","additionalProperties":false,"required":["path"],"properties":{` +
		`"path":{"type":"string","minLength":1,"maxLength":4096,"description":"Absolute path of the file (or relative to the session's workspace, if it has one); normalised: no '..', '.', '//' or trailing '/'."},` +
		`"encoding":{"enum":["text","base64"],"description":"text (default): the content as text when the file is valid UTF-8 without NUL bytes, else base64 anyway; base64: always base64."}}}`
	FSReadOutputSchema = `{"type":"object","additionalProperties":false,"required":["path","content","encoding","size"],"properties":{` +
		`"path":{"type":"string","description":"The absolute path read."},` +
		`"content":{"type":"string"},` +
		`"encoding":{"enum":["text","base64"],"description":"How content is encoded: base64 (standard, padded) for binary files or when asked."},` +
		`"size":{"type":"integer","minimum":0,"maximum":2097152,"description":"Bytes in the file."}}}`

	FSWriteInputSchema = `{"type":"object","additionalProperties":false,"required":["path","content"],"properties":{` +
		`"path":{"type":"string","minLength":1,"maxLength":4096,"description":"Absolute path of the file (or relative to the session's workspace, if it has one); its directory must exist."},` +
		`"content":{"type":"string","description":"The whole new content (at most 2 MiB once decoded); the file is replaced atomically."},` +
		`"encoding":{"enum":["text","base64"],"description":"text (default) or base64 (standard, padded) for binary content."},` +
		`"create":{"type":"boolean","description":"Create the file if it does not exist (default true); false: fail with not_found instead."}}}`
	FSWriteOutputSchema = `{"type":"object","additionalProperties":false,"required":["path","bytes"],"properties":{` +
		`"path":{"type":"string","description":"The absolute path written."},` +
		`"bytes":{"type":"integer","minimum":0,"maximum":2097152,"description":"Bytes written."}}}`

	FSListInputSchema = `{"type":"object","additionalProperties":false,"required":["path"],"properties":{` +
		`"path":{"type":"string","minLength":1,"maxLength":4096,"description":"Absolute path of the directory (or relative to the session's workspace, if it has one)."}}}`
	FSListOutputSchema = `{"type":"object","additionalProperties":false,"required":["path","entries","truncated"],"properties":{` +
		`"path":{"type":"string","description":"The absolute path listed."},` +
		`"entries":{"type":"array","maxItems":10000,"description":"Sorted by name; symlinks are listed, never followed.","items":{"type":"object","additionalProperties":false,"required":["name","type","size"],"properties":{` +
		`"name":{"type":"string"},"type":{"enum":["file","dir","symlink","other"]},"size":{"type":"integer","minimum":0}}}},` +
		`"truncated":{"type":"boolean","description":"The directory holds more than 10000 entries; only 10000 are listed."}}}`

	WebFetchInputSchema = `{"type":"object","additionalProperties":false,"required":["url"],"properties":{` +
		`"url":{"type":"string","minLength":1,"maxLength":8192,"description":"An https URL on the hosts this agent may reach (plain http only to loopback). Redirects are not followed."},` +
		`"method":{"type":"string","maxLength":32,"description":"HTTP method, default GET."},` +
		`"headers":{"type":"object","additionalProperties":{"type":"string"},"description":"Request headers, name to value. Credentials are attached by the host: Authorization, Cookie and Proxy-* are refused."},` +
		`"body":{"type":"string","maxLength":2097152,"description":"Request body, sent as is."}}}`
	WebFetchOutputSchema = `{"type":"object","additionalProperties":false,"required":["status","headers","body","encoding","truncated"],"properties":{` +
		`"status":{"type":"integer","minimum":100,"maximum":999},` +
		`"headers":{"type":"object","additionalProperties":{"type":"array","items":{"type":"string"}},"description":"Response headers, canonical name to values."},` +
		`"body":{"type":"string","description":"The response body (secret values the host attached are redacted)."},` +
		`"encoding":{"enum":["text","base64"],"description":"base64 when the body is not valid UTF-8."},` +
		`"truncated":{"type":"boolean","description":"The body was cut at 1 MiB."}}}`
)

// Spec describes one built-in tool for tools/list.
type Spec struct {
	Name         string
	Description  string
	InputSchema  string
	OutputSchema string
}

// Specs lists the tools of this package, in name order.
var Specs = []Spec{
	{ToolFSList, "List a directory inside the session's sandbox boundary.", FSListInputSchema, FSListOutputSchema},
	{ToolFSRead, "Read a file inside the session's sandbox boundary (text, or base64 for binary).", FSReadInputSchema, FSReadOutputSchema},
	{ToolFSWrite, "Create or replace a file inside the session's sandbox boundary (atomic whole-file replacement).", FSWriteInputSchema, FSWriteOutputSchema},
	{ToolWebFetch, "Fetch a URL over https from the hosts this agent may reach, if the session's boundary allows the network.", WebFetchInputSchema, WebFetchOutputSchema},
}
