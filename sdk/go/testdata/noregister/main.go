// Command noregister links the SDK but forgets maiden.Register: its exports
// must fail loudly, naming the fix.
package main

import _ "github.com/maiden-run/maiden/sdk/go"

func main() {}
