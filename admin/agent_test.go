package admin

import (
	"reflect"
	"slices"
	"testing"
)

// TestAgentStateHasOnlyCardOperations holds the line between an agent and
// the operator: what State.As returns (what the cards_* built-ins act
// with) has the agent's card operations and no other method, so no code
// handed it can grant, mint a token, decide an approval or reset a
// session with an operator's authority, and it is no *State either.
func TestAgentStateHasOnlyCardOperations(t *testing.T) {
	agentOps := []string{"Agent", "Card", "Cards", "Derive", "Revoke", "Transfer"}
	var as any = (&State{}).As("a")
	if _, ok := as.(*State); ok {
		t.Fatal("State.As returns a *State: the agent would hold every operator method")
	}
	at := reflect.TypeOf(as)
	var got []string
	for i := range at.NumMethod() {
		got = append(got, at.Method(i).Name)
	}
	if !slices.Equal(got, agentOps) {
		t.Errorf("%v has methods %v, want exactly the agent's card operations %v", at, got, agentOps)
	}
	// Every operator method of State, by name, is absent from it.
	st := reflect.TypeOf(&State{})
	for i := range st.NumMethod() {
		name := st.Method(i).Name
		if slices.Contains(agentOps, name) {
			continue
		}
		if _, ok := at.MethodByName(name); ok {
			t.Errorf("%v has the operator method %s", at, name)
		}
	}
	if st.NumMethod() <= len(agentOps) {
		t.Errorf("State has %d methods: the operator's work is missing from the comparison", st.NumMethod())
	}
}
