package config

import (
	"slices"
	"strings"
)

// Operator is one [operators.NAME] table: a human who may decide approval
// requests and use the inbox page, with tokens minted by
// `maiden operators token NAME`. Operators are not agents: an operator
// token never calls a tool, and an agent token never decides.
type Operator struct {
	Name string
	Line int
}

// Operators returns the [operators.NAME] tables, by name.
func (c *Config) Operators() []Operator { return slices.Clone(c.operators) }

// Operator returns the operator of that name.
func (c *Config) Operator(name string) (Operator, bool) {
	i, ok := slices.BinarySearchFunc(c.operators, name, func(o Operator, n string) int { return strings.Compare(o.Name, n) })
	if !ok {
		return Operator{}, false
	}
	return c.operators[i], true
}

// operatorsTable reads [operators]: tables of operators, which have no
// keys yet.
func (c *checker) operatorsTable(n *tnode) {
	if n.kind != tableNode {
		c.errorf(n.line, "operators", "must be a table of operators ([operators.NAME]), got %s", describe(n))
		return
	}
	for _, name := range n.order {
		v := n.keys[name]
		key := formatKey([]string{"operators", name})
		if !toolNameRE.MatchString(name) {
			c.errorf(v.line, key, "invalid operator name %s: must be 1 to %d characters of a-z, 0-9, '_' and '-', starting with a letter or digit",
				quoteShort(name), MaxToolNameLen)
			continue
		}
		if v.kind != tableNode {
			c.errorf(v.line, key, "must be a table ([operators.%s]), got %s", name, describe(v))
			continue
		}
		for _, k := range v.order {
			c.errorf(v.keys[k].line, key+"."+k, "unknown key: an operator table has no keys yet (its tokens come from maiden operators token %s)", name)
		}
		c.operators = append(c.operators, Operator{Name: name, Line: v.line})
	}
	slices.SortFunc(c.operators, func(a, b Operator) int { return strings.Compare(a.Name, b.Name) })
}

// checkOperatorNames refuses an operator named like an agent: audit
// records and decisions name both, and must not be confused.
func (c *checker) checkOperatorNames(agents []Agent) {
	for _, o := range c.operators {
		if slices.ContainsFunc(agents, func(a Agent) bool { return a.Name == o.Name }) {
			c.errorf(o.Line, formatKey([]string{"operators", o.Name}), "%s is also an agent's name: operators and agents need different names", quoteShort(o.Name))
		}
	}
}
