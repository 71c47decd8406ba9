package audit

// a2aAttacks is the A2A 1.0 attack set (the JSON-RPC binding).
func a2aAttacks() []Attack { return nil }
