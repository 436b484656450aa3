package cards

// Cascade returns root and every card derived from it, transitively, in
// breadth-first order, each once (a card with several parents, or a
// malformed lineage with a cycle, is visited once). childrenOf returns the
// direct children of a set of cards; the store answers it inside the
// revoking transaction, so the cascade and the revocation are one atomic
// step.
func Cascade(root string, childrenOf func(ids []string) ([]string, error)) ([]string, error) {
	seen := map[string]bool{root: true}
	all := []string{root}
	level := []string{root}
	for len(level) > 0 {
		kids, err := childrenOf(level)
		if err != nil {
			return nil, err
		}
		level = level[:0:0]
		for _, k := range kids {
			if !seen[k] {
				seen[k] = true
				all = append(all, k)
				level = append(level, k)
			}
		}
	}
	return all, nil
}
